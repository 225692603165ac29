from harness.cli import main

main(prog_name="layergate")  # its messages say `layergate`, not `python -m harness.cli`
