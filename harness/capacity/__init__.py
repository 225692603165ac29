"""`layergate capacity`: capacity at the SLO, paired across arms. The sweep (`sweep.py`)
drives the replayer step by step along a ladder (`ladder.py`) and stores each step as it
completes (`harness/sweepdir.py`, the sweep's directory, as `rundir.py` is a run's); the
gate judges a finished sweep (`verdict.py`); the figures and their intervals are
`layergate.exporters.figures.capacity`'s."""
