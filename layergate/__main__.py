"""`python -m layergate`: the `layergate` command."""

from layergate.harness.cli import main

main(prog_name="layergate")
