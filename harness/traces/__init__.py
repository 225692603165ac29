"""Public trace formats into layergate's traffic format (`layergate import-trace`): mooncake,
azure, burstgpt, sharegpt and openai-batch, and the eval layouts qa, multiple-choice and
openai-evals, whose records carry references (docs/FORMATS.md, "Imported traces"). One module
per format registers its reader (`formats.py`); `pipeline.import_trace` does the rest."""

from layergate.harness.traces.config import TraceImportConfig, TraceImportConfigError
from layergate.harness.traces.pipeline import import_trace
from layergate.harness.traces.report import ImportReport
from layergate.harness.traces.source import TraceError
from layergate.harness.traces.synth import SynthError

__all__ = ["ImportReport", "SynthError", "TraceError", "TraceImportConfig",
           "TraceImportConfigError", "import_trace"]
