"""Which requests of a traffic file belong to one multi-turn conversation: the bootstrap's
resampling unit (exporters/figures/bootstrap.py), since the turns of one conversation share its
topic, length and difficulty, so their figures move together.

The traffic format has no conversation field (docs/FORMATS.md): a chat request carries the
conversation up to its turn in `messages` (as `import-trace --format sharegpt` writes it),
so a later turn is a request whose messages hold an assistant reply, and its conversation
is named by its first non-system message. Requests sharing that first message, holding a
later turn, and at two or more turn positions (so not one request repeated) form one
conversation; every other request (repeats of one prompt, few-shot or not, as a mix draws
them) is its own unit, as before.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from layergate.exporters.traffic import CHAT, mentions


def conversations(path: str | Path) -> dict[str, str]:
    """Request id -> conversation key for the requests of multi-turn conversations in the
    traffic file at `path` (empty when it has none: a cheap scan finds no assistant message,
    and nothing is parsed)."""
    path = Path(path)
    if not mentions(path, '"assistant"'):
        return {}
    first: dict[str, str] = {}  # id -> its first message's key
    later: set[str] = set()  # keys of conversations with a later turn
    turns: dict[str, set[int]] = {}  # key -> the turn positions (messages) seen
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            obj = json.loads(line)
            if obj.get("endpoint") != CHAT:
                continue
            messages = obj.get("body", {}).get("messages") or []
            key, turn = _opening(messages)
            if key is None:
                continue
            first[str(obj["id"])] = key
            turns.setdefault(key, set()).add(len(messages))
            if turn:
                later.add(key)
    return {rid: key for rid, key in first.items() if key in later and len(turns[key]) > 1}


def turn_positions(path: str | Path) -> dict[str, tuple[str, int]]:
    """Request id -> (conversation key, turn: 1, 2, ...) for the turns of multi-turn
    conversations in the traffic file at `path`, as `conversations` groups them; a
    conversation with two requests at one position (a repeated turn) is left out, since its
    turns have no one order. Empty when the file has none."""
    keys = conversations(path)
    if not keys:
        return {}
    lengths: dict[str, int] = {}
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                obj = json.loads(line)
                if str(obj["id"]) in keys:
                    lengths[str(obj["id"])] = len(obj["body"]["messages"])
    return ordered_turns({rid: (key, lengths[rid]) for rid, key in keys.items()})


def ordered_turns(positions: dict[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
    """Request id -> (conversation, 1-based turn) from id -> (conversation, its messages'
    count); conversations with a repeated position are left out."""
    by_key: dict[str, list[tuple[int, str]]] = {}
    for rid, (key, length) in positions.items():
        by_key.setdefault(key, []).append((length, rid))
    out: dict[str, tuple[str, int]] = {}
    for key, turns in by_key.items():
        if len({length for length, _ in turns}) != len(turns):
            continue
        for turn, (_, rid) in enumerate(sorted(turns), start=1):
            out[rid] = (key, turn)
    return out


def opening(messages: list[Any]) -> tuple[str | None, bool]:
    """(a key of the conversation's first non-system message, whether an assistant reply
    precedes this request's turn)."""
    return _opening(messages)


def _opening(messages: list[Any]) -> tuple[str | None, bool]:
    """(a key of the conversation's first non-system message, whether an assistant reply
    precedes this request's turn)."""
    said = [m for m in messages if isinstance(m, dict) and m.get("role") != "system"]
    if not said:
        return None, False
    opening = json.dumps([said[0].get("role"), said[0].get("content")], sort_keys=True)
    key = hashlib.blake2b(opening.encode(), digest_size=8).hexdigest()
    return key, any(m.get("role") == "assistant" for m in said)


def cluster_labels(request_ids: list[str] | tuple[str, ...],
                   clusters: dict[str, str] | None) -> np.ndarray | None:
    """An integer label per request (rows of one conversation share one; every other row
    its own), for `layergate.exporters.figures.bootstrap.resample_sums`; None when no request is in
    one."""
    if not clusters or not any(rid in clusters for rid in request_ids):
        return None
    keys: dict[str, int] = {}
    out = np.empty(len(request_ids), dtype=np.int64)
    for i, rid in enumerate(request_ids):
        key = clusters.get(rid)
        out[i] = keys.setdefault(key, len(keys)) if key is not None else -(i + 1)
    return out
