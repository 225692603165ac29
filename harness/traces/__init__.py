"""Public trace formats into layergate's traffic format (`layergate import-trace`): mooncake,
azure, burstgpt, sharegpt and openai-batch (docs/FORMATS.md, "Imported traces"). One module
per format registers its reader (`formats.py`); `pipeline.import_trace` does the rest."""

from harness.traces.config import ImportConfig, ImportConfigError
from harness.traces.pipeline import import_trace
from harness.traces.report import ImportReport
from harness.traces.source import TraceError
from harness.traces.synth import SynthError

__all__ = ["ImportConfig", "ImportConfigError", "ImportReport", "SynthError", "TraceError",
           "import_trace"]
