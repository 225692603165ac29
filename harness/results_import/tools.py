"""The readers, by the tool's name on the command line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from layergate.harness.results_import import aiperf, guidellm, inference_perf, vllm_bench
from layergate.harness.results_import.model import ImportedRun, ResultsError

Reader = Callable[..., ImportedRun]
READERS: dict[str, Reader] = {
    guidellm.TOOL: guidellm.read,
    aiperf.TOOL: aiperf.read,
    inference_perf.TOOL: inference_perf.read,
    vllm_bench.TOOL: vllm_bench.read,
}
# what to point --source at, per tool
SOURCES = {
    guidellm.TOOL: "its JSON report (benchmarks.json)",
    aiperf.TOOL: "its artifact directory, or profile_export.jsonl in it",
    inference_perf.TOOL: "its report directory, or per_request_lifecycle_metrics.json in it",
    vllm_bench.TOOL: "the result JSON of --save-result --save-detailed",
}
names = tuple(READERS)


def read(tool: str, source: Path, benchmark: int | None = None) -> ImportedRun:
    if tool not in READERS:
        raise ResultsError(f"unknown tool {tool!r}: one of {', '.join(names)}")
    if benchmark is not None and tool != guidellm.TOOL:
        raise ResultsError(f"--benchmark picks one of GuideLLM's benchmarks, not {tool}'s")
    return guidellm.read(source, benchmark) if tool == guidellm.TOOL else READERS[tool](source)
