"""The tokenizer an import counts in when none is named: the embedded model's tokenizer.json,
from its converted cache. Converting needs the engine (torch), so it runs in a child process
once; this process never imports torch."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from layergate.exporters import tokenizer
from layergate.exporters.model_files import CONVERTER, converted_dir, embedded_tokenizer


def tokenizer_path(spec: str | None, note: Callable[[str], None]) -> Path:
    """The tokenizer.json `spec` names, else the embedded model's (converted first, in a
    child process, when this machine has the engine but has not converted it yet)."""
    if spec is not None:
        return tokenizer.find(spec)
    found = embedded_tokenizer()
    if found is not None:
        return found
    if importlib.util.find_spec("torch") is None:
        raise tokenizer.TokenizerError(
            f"the embedded model's tokenizer is not here ({converted_dir()} holds no "
            f"{tokenizer.TOKENIZER_FILE}) and this machine has no engine to convert the model "
            "with: pass --tokenizer with the arms' tokenizer.json")
    note(f"converting the embedded model once into {converted_dir()} for its tokenizer")
    done = subprocess.run([sys.executable, "-m", CONVERTER], capture_output=True, text=True)
    found = embedded_tokenizer()
    if done.returncode != 0 or found is None:
        raise tokenizer.TokenizerError("converting the embedded model failed: "
                                       f"{done.stderr.strip()[-2000:]}")
    return found
