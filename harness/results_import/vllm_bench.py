"""`vllm bench serve --save-result --save-detailed` (vLLM 0.32): one JSON object whose
per-request lists run in the order the prompts were drawn (vllm/benchmarks/serve.py,
`benchmark()`'s result, and `main` adding the run's arguments).

Per request: `ttfts` (s, POST to the first SSE event with choices), `itls` (the gaps between
such events), `latencies` (POST to the last one), `output_lens` (the server's
usage.completion_tokens when it sent usage in an event of its own, else the tool's
tokenizer on the text: not recorded which), `input_lens`, `generated_texts`, `errors` ("" on
success). The file has no prompts, no dataset, seed, lengths asked or ignore_eos, and no
warm-up count; `--metadata KEY=VALUE` pairs are written at its top level, and this reader
takes `dataset_name`, `seed`, `random_input_len`, `random_output_len`, `ignore_eos`,
`num_warmups` from there. With a dataset name and a seed the prompts are the tool's seeded
draw, so each request's identity is (those settings, its index); without them the run
cannot be paired by prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from layergate.exporters.catalogue import TOKENIZER
from layergate.harness.results_import.model import (
    ImportedRequest,
    ImportedRun,
    ResultsError,
    generated_key,
    prompts_digest,
    words,
)
from layergate.harness.results_import.source import need, number, read_json

TOOL = "vllm-bench"
LISTS = ("ttfts", "itls", "latencies", "output_lens", "input_lens", "errors")
# `--metadata` keys this reader takes, so that what the file lacks can be given
METADATA = ("dataset_name", "seed", "random_input_len", "random_output_len", "ignore_eos",
            "num_warmups")
NOT_RECORDED = ("the prompts (their identity only through --metadata dataset_name= seed=)",
                "scheduled send times (no send lag)",
                "which counter gave output_lens (server usage or the tool's tokenizer)")


def read(path: Path) -> ImportedRun:
    doc = read_json(path, "vllm bench serve")
    if not isinstance(doc, dict):
        raise ResultsError(f"{path}: a {type(doc).__name__}, not vllm bench's result object")
    lists = {k: need(doc, k, f"{path} (run with --save-detailed)", list) for k in LISTS}
    n = len(lists["latencies"])
    uneven = [k for k, v in lists.items() if len(v) != n]
    if uneven:
        raise ResultsError(f"{path}: per-request lists of unequal length: {', '.join(uneven)}")
    texts = doc.get("generated_texts")
    generator = _generator(doc)
    requests = [_request(i, lists, texts, generator, path) for i in range(n)]
    asked = doc.get("random_output_len")
    return ImportedRun(
        tool=TOOL, version=None, source=str(path), target=None, requests=tuple(requests),
        settings=_settings(doc, generator, [r.prompt_key for r in requests], asked),
        prompts_from=generator or "none", not_recorded=(
            *NOT_RECORDED, *(() if isinstance(texts, list) else ("the output texts",)),
            *(f"{k} (pass --metadata {k}=...)" for k in METADATA if k not in doc)))


def _generator(doc: dict[str, Any]) -> str | None:
    if doc.get("dataset_name") is None or doc.get("seed") is None:
        return None
    return (f"vllm-bench {doc['dataset_name']} seed={doc['seed']} "
            f"in={doc.get('random_input_len')} out={doc.get('random_output_len')} "
            f"tokenizer={doc.get('tokenizer_id')}")


def _request(i: int, lists: dict[str, list], texts: Any, generator: str | None,
             path: Path) -> ImportedRequest:
    error = lists["errors"][i]
    ttft, e2e = number(lists["ttfts"][i]), number(lists["latencies"][i])
    ok = not error and ttft is not None and e2e is not None and ttft > 0
    gaps = lists["itls"][i]
    if not isinstance(gaps, list):
        raise ResultsError(f"{path}: itls[{i}] is not a list of gaps")
    text = texts[i] if isinstance(texts, list) and isinstance(texts[i], str) else ""
    return ImportedRequest(
        prompt_key=generated_key(generator, str(i)) if generator else None, ok=ok,
        error=(str(error) or "failed") if not ok else None,
        ttft_s=ttft if ok else None, e2e_s=e2e if ok else None,
        itl_s=tuple(float(g) for g in gaps) if ok else (),
        output_tokens=int(lists["output_lens"][i] or 0),
        prompt_tokens=int(lists["input_lens"][i] or 0), output_text=text,
        text_saved=isinstance(texts, list), tokens_from=TOKENIZER if ok else None)


def _settings(doc: dict[str, Any], generator: str | None, keys: list[str | None],
              asked: Any) -> dict[str, str | None]:
    rate = doc.get("request_rate")
    burst = doc.get("burstiness")
    return {
        "endpoint": words(doc.get("endpoint_type") or doc.get("backend")),
        "dataset": generator, "prompts": prompts_digest(keys),
        "max_tokens": words(asked), "ignore_eos": words(_flag(doc.get("ignore_eos"))),
        "rate": f"{rate} req/s, burstiness {burst}" if rate is not None else None,
        "concurrency": words(doc.get("max_concurrency") or "unbounded"),
        "warmup": words(doc.get("num_warmups")),
        # output_lens: usage when the server sent it apart, else the tool's tokenizer
        "token_counter": None,
    }


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool) or value is None:
        return value
    return str(value).strip().lower() in ("1", "true", "yes")
