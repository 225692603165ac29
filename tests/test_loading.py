"""Model loading: the atomic conversion cache, local model dirs, clear errors."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from transformers import GPT2Config, GPT2LMHeadModel

from layergate.harness.cli import main as cli
from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.loading import ModelLoadError, ensure_converted, load_model
from tests.support.tiny_llama import write_tiny_checkpoint


def test_conversion_is_atomic_and_cleans_leftovers(tmp_path: Path):
    target = tmp_path / "models" / "smollm2-135m"
    target.parent.mkdir(parents=True)
    leftover = target.parent / ".smollm2-135m.tmp-killed"  # what a killed conversion leaves
    leftover.mkdir()
    (leftover / "model.safetensors").write_bytes(b"half written")

    def failing(source: Path, out: Path) -> None:
        (out / "model.safetensors").write_bytes(b"partial")
        raise RuntimeError("killed mid-conversion")

    with pytest.raises(RuntimeError, match="killed"):
        ensure_converted(target, tmp_path, convert=failing)
    assert not target.exists(), "a failed conversion must not leave a target"
    assert ensure_converted(target, tmp_path, convert=write_tiny_checkpoint) == target
    assert (target / "config.json").is_file() and any(target.glob("*.safetensors"))
    assert not list(target.parent.glob(".smollm2-135m.tmp-*")), "temp dirs cleaned"
    # a complete cache is read, not converted again
    assert ensure_converted(target, tmp_path, convert=failing) == target


def test_two_converters_at_once_convert_once(tmp_path: Path):
    """flock locks belong to open file descriptions, so two threads contend exactly like two
    processes do (and cost no extra interpreter start-up)."""
    target = tmp_path / "models" / "smollm2-135m"
    calls: list[int] = []

    def slow(src: Path, out: Path) -> None:
        calls.append(1)
        time.sleep(0.5)
        write_tiny_checkpoint(src, out)

    threads = [threading.Thread(target=ensure_converted, args=(target, tmp_path, slow))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert calls == [1]
    assert (target / "config.json").is_file()


def test_local_llama_dir_loads(tmp_path: Path):
    write_tiny_checkpoint(tmp_path, tmp_path / "tiny", num_layers=3)
    loaded = load_model(EngineConfig(model=str(tmp_path / "tiny"), threads=1))
    assert loaded.num_layers == 3 and loaded.name == "tiny"
    assert loaded.numerics["dtype"] == "fp32" and loaded.numerics["threads"] == 1


@pytest.mark.parametrize("make, message", [
    (lambda d: None, "no such directory"),
    (lambda d: d.mkdir(), "no config.json"),
    (lambda d: GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2)).save_pretrained(d),
     "model.layers"),
])
def test_bad_model_dir_gives_a_clear_error(tmp_path: Path, make, message):
    bad = tmp_path / "bad"
    make(bad)
    with pytest.raises(ModelLoadError, match=message):
        load_model(EngineConfig(model=str(bad), threads=1))


def test_serve_with_a_bad_model_path_is_a_usage_error(tmp_path: Path):
    result = CliRunner().invoke(cli, ["serve", "--model", str(tmp_path / "nope"),
                                      "--threads", "1", "--port", "1"])
    assert result.exit_code == 2, result.output
    assert "no such directory" in result.output


def test_bf16_dtype_is_applied(tmp_path: Path):
    write_tiny_checkpoint(tmp_path, tmp_path / "t", num_layers=2)
    loaded = load_model(EngineConfig(model=str(tmp_path / "t"), dtype="bf16", threads=1))
    assert str(next(loaded.model.parameters()).dtype) == "torch.bfloat16"
