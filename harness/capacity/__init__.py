"""`layergate capacity`: capacity at the SLO, paired across arms. The sweep (`sweep.py`)
drives the replayer step by step along a ladder (`ladder.py`) and stores each step as it
completes (`state.py`); the figures and their intervals are `exporters.capacity`'s."""
