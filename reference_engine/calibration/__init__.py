"""Calibration: profile the layers on real traffic, sweep the decider's thresholds, choose the
rules `static`, `dynamic` and `speculative` serve with (see `run.calibrate`)."""
