"""The capture proxy: record real traffic into the traffic format (see `proxy.py`)."""

from layergate.harness.capture.config import CaptureConfig
from layergate.harness.capture.proxy import CaptureProxy, run_capture

__all__ = ["CaptureConfig", "CaptureProxy", "run_capture"]
