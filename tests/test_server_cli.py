"""`layergate serve` as a click command: usage errors exit 2 with a message that says what
was wrong, and importing the command never pulls in torch."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from layergate.harness.cli import main


def test_unknown_skip_policy_lists_the_choices():
    result = CliRunner().invoke(main, ["serve", "--skip-policy", "shallow"])
    assert result.exit_code == 2
    for choice in ("full", "static", "dynamic", "speculative"):
        assert choice in result.output


def test_bad_skip_layers_is_a_usage_error():
    result = CliRunner().invoke(main, ["serve", "--skip-policy", "static", "--skip-layers", "3,x"])
    assert result.exit_code == 2
    assert "--skip-layers" in result.output and "3,x" in result.output


def test_missing_model_dir_is_a_usage_error(tmp_path):
    missing = tmp_path / "no-such-model"
    result = CliRunner().invoke(main, ["serve", "--model", str(missing), "--threads", "1"])
    assert result.exit_code == 2, result.output
    assert str(missing) in result.output


def test_help_explains_and_import_stays_free_of_torch():
    result = CliRunner().invoke(main, ["serve", "--help"])
    assert result.exit_code == 0
    for option in ("--skip-policy", "--api-key", "--max-queue", "--batch-invariant", "--padding"):
        assert option in result.output
    probe = ("import sys, layergate.reference_engine.cli.serve; "
             "bad = [m for m in ('torch', 'transformers', 'layergate.reference_engine.engine') "
             "if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
