"""A model's own tokenizer, for servers that send no token counts or ids: the client counts
an answer's tokens with it, and consistency compares two outputs token by token with it.

Read from a `tokenizer.json` by the `tokenizers` library: no torch, and nothing is ever
downloaded. A tokenizer is named by a file, a directory holding one, or a model name
(`org/name`) already in the local Hugging Face cache.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from layergate.exporters.errors import UsageError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

TOKENIZER_FILE = "tokenizer.json"


class TokenizerError(UsageError, ValueError):
    """A tokenizer that cannot be found or read; the message says where it looked."""


def _hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface"
    return Path(home) / "hub"


def _cached_model(name: str) -> Path | None:
    """`tokenizer.json` of model `org/name` in the local Hugging Face cache, if there."""
    if "/" not in name:
        return None
    snapshots = _hub_cache() / f"models--{name.replace('/', '--')}" / "snapshots"
    found = sorted(snapshots.glob(f"*/{TOKENIZER_FILE}"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def locate(spec: str) -> Path | None:
    """The tokenizer.json `spec` names (a file, a directory, a cached model), or None."""
    path = Path(spec).expanduser()
    if path.is_file():
        return path.resolve()
    if (path / TOKENIZER_FILE).is_file():
        return (path / TOKENIZER_FILE).resolve()
    return _cached_model(spec)


def find(spec: str) -> Path:
    """Like `locate`, but a name that finds nothing is a TokenizerError naming where it
    looked, and an unreadable file is one too."""
    path = locate(spec)
    if path is None:
        raise TokenizerError(
            f"no tokenizer for {spec!r}: give a {TOKENIZER_FILE}, a directory holding one, or "
            f"a model name already in the Hugging Face cache ({_hub_cache()}); layergate "
            "downloads nothing")
    load(str(path))
    return path


@functools.lru_cache(maxsize=8)
def load(path: str) -> Tokenizer:
    from tokenizers import Tokenizer  # loaded by the first count: most answers carry theirs

    try:
        return Tokenizer.from_file(path)
    except Exception as exc:  # the library raises a bare Exception on a bad file
        raise TokenizerError(f"{path}: not a readable {TOKENIZER_FILE}: {exc}") from exc


def token_ids(path: str, text: str) -> list[int]:
    """The ids of `text` alone (no special tokens added)."""
    return load(path).encode(text, add_special_tokens=False).ids


def count(path: str, text: str) -> int:
    return len(token_ids(path, text))


def for_arms(arms: Iterable[str], models: Mapping[str, str], named: str | None
             ) -> dict[str, str]:
    """arm -> tokenizer.json path: the `named` one for every arm (it must exist), else each
    arm's model name where a tokenizer for it is already here; arms with neither are left
    out (their answers without a count are counted in characters)."""
    if named is not None:
        path = str(find(named))
        return {arm: path for arm in arms}
    found = {arm: locate(models[arm]) for arm in arms if models.get(arm)}
    return {arm: str(path) for arm, path in found.items() if path is not None}
