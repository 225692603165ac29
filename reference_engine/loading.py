"""Model loading: the bundled SmolLM2 GGUF (converted once to a safetensors cache) or a local
Hugging Face Llama-family directory; numerics (dtype, threads, seeds) pinned and recorded."""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from layergate.exporters.model_files import (  # noqa: F401 (GGUF_*: this module's names too)
    GGUF_FILE,
    GGUF_PACKAGE,
    ModelLoadError,
    cache_root,
    converted_dir,
    gguf_path,
)
from layergate.reference_engine.config import DEFAULT_MODEL, EngineConfig

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class LoadedModel:
    model: Any  # a transformers LlamaForCausalLM-like module, eval mode
    tokenizer: Any
    name: str
    path: Path
    num_layers: int
    max_model_len: int
    device: torch.device
    numerics: dict[str, Any]  # dtype, threads, seed, device, versions: recorded with runs


def load_model(config: EngineConfig) -> LoadedModel:
    """Load the configured model with pinned numerics."""
    numerics = pin_numerics(config)
    if config.model == DEFAULT_MODEL:
        path, name = ensure_converted(), DEFAULT_MODEL
    else:
        path, name = Path(config.model).expanduser(), Path(config.model).name
        check_model_dir(path)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = resolve_device(config.device)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=_DTYPES[config.dtype])
    model.to(device).eval()
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None:
        raise ModelLoadError(f"{path}: {type(model).__name__} has no model.layers list of "
                             "decoder blocks; layergate needs a Llama-family causal LM")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model_len = int(getattr(model.config, "max_position_embeddings", 2048) or 2048)
    max_len = config.max_model_len or min(2048, model_len)
    numerics["device"] = str(device)
    return LoadedModel(model, tokenizer, name, path, len(layers), max_len, device, numerics)


def pin_numerics(config: EngineConfig) -> dict[str, Any]:
    import transformers

    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    random.seed(config.seed)
    return {"dtype": config.dtype, "threads": torch.get_num_threads(), "seed": config.seed,
            "torch": torch.__version__, "transformers": transformers.__version__}


def resolve_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("--device cuda was asked for but torch sees no CUDA device")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def check_model_dir(path: Path) -> None:
    if not path.is_dir():
        raise ModelLoadError(f"--model {path}: no such directory (give `{DEFAULT_MODEL}` or a "
                             "local Hugging Face model directory)")
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"--model {path}: no config.json; not a Hugging Face model dir")
    weights = list(path.glob("*.safetensors")) + list(path.glob("*.bin"))
    if not weights:
        raise ModelLoadError(f"--model {path}: no *.safetensors or *.bin weights in it")


def ensure_converted(target: Path | None = None, source: Path | None = None,
                     convert: Callable[[Path, Path], None] | None = None) -> Path:
    """The safetensors cache of the bundled GGUF, converting it first when absent.

    Written into a temp dir next to the target, then renamed into place, under a lock file:
    a killed conversion leaves only a temp dir (removed by the next conversion), never a
    half cache, and two processes converting at once do not clash. `convert(gguf, out_dir)`
    defaults to the GGUF -> safetensors conversion.
    """
    target = target or converted_dir()
    if _complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f".{target.name}.lock"):
        if _complete(target):  # another process finished while we waited
            return target
        _remove_leftovers(target)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        try:
            (convert or _convert)(source or gguf_path(), tmp)
            tmp.chmod(0o755)  # mkdtemp makes it private; the cache is shared by processes
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


def _complete(path: Path) -> bool:
    return (path / "config.json").is_file() and any(path.glob("*.safetensors"))


def _remove_leftovers(target: Path) -> None:
    for leftover in target.parent.glob(f".{target.name}.tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _convert(gguf: Path, out: Path) -> None:
    """Dequantize the GGUF through transformers and save a plain fp32 Llama checkpoint."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                     dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = LlamaForCausalLM(config)
    plain.load_state_dict(quantized.state_dict())
    plain.generation_config = quantized.generation_config
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)


if __name__ == "__main__":  # `python -m` CONVERTER (exporters/model_files.py): convert once
    ensure_converted()
