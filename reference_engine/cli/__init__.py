"""The engine's commands of the `layergate` CLI (`serve`, `calibrate`), registered there by
module path: the harness names them without importing the engine."""
