"""The capture proxy: record real traffic into the traffic format (see `proxy.py`)."""

from harness.capture.proxy import CaptureConfig, CaptureProxy, run_capture

__all__ = ["CaptureConfig", "CaptureProxy", "run_capture"]
