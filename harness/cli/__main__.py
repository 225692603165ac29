from layergate.harness.cli import main

main(prog_name="layergate")  # its messages say `layergate`, not `python -m layergate.harness.cli`
