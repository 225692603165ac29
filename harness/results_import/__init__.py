"""Load tools' per-request results into a layergate run directory (`layergate
import-results`): GuideLLM's benchmarks JSON, AIPerf's profile export records,
inference-perf's per-request lifecycle metrics and `vllm bench serve --save-detailed`'s
result, each read by a module of its own from that tool's output schema (`tools.py` names
them), each import one arm. `comparable.py` checks that the arms were run alike before any
verdict; `write.py` stores the arm; the gate judges the run like a replay (paired by prompt
where the arms sent the same prompts, else unpaired: harness/gate/fixed/unpaired.py)."""

from layergate.harness.results_import.model import ImportedRequest, ImportedRun, ResultsError
from layergate.harness.results_import.write import ResultsImportConfig, import_results

__all__ = ["ImportedRequest", "ImportedRun", "ResultsError", "ResultsImportConfig",
           "import_results"]
