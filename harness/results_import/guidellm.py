"""GuideLLM 0.8's report (`guidellm run --output '{"kind":"json",...}'`, benchmarks.json):
`benchmarks[i].requests.{successful,errored,incomplete}` hold one GenerativeRequestStats
each (guidellm/schemas/request_stats.py), beside the run's own copy of its settings
(`config.spec`: data, profile, backend) and each benchmark's (`config`: strategy, warmup).

Per request: `request_args` (the HTTP body as JSON text: the prompt or messages, max_tokens,
ignore_eos), `output` (the text), `time_to_first_token_ms` (first token iteration minus
request_start), `request_latency` (request_end minus request_start, s), `prompt_tokens`,
`output_tokens` (the server's usage when it answered with one, `response_metrics`, else
GuideLLM's own count), `info.timings` (targeted_start, request_start: the send lag). GuideLLM
keeps no gaps between tokens: only the first and last token's times and how many
iterations came between, so a run from it has TTFT, E2E and TPOT, never ITL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from layergate.exporters.catalogue import TOKENIZER, USAGE
from layergate.harness.results_import.model import (
    SERVER_USAGE,
    TOOL_TOKENIZER,
    ImportedRequest,
    ImportedRun,
    ResultsError,
    one_setting,
    prompts_digest,
    text_key,
    words,
)
from layergate.harness.results_import.source import need, number, read_json

TOOL = "guidellm"
STATUSES = ("successful", "errored", "incomplete")
NOT_RECORDED = ("gaps between tokens (no ITL: only the first and last token's times)",)


def read(path: Path, benchmark: int | None = None) -> ImportedRun:
    doc = read_json(path, TOOL)
    benches = need(doc, "benchmarks", str(path), list)
    if benchmark is None and len(benches) != 1:
        raise ResultsError(f"{path}: {len(benches)} benchmarks in one report: name one with "
                           "--benchmark N (0-based)")
    index = benchmark or 0
    if not 0 <= index < len(benches):
        raise ResultsError(f"{path}: no benchmark {index} (it has {len(benches)})")
    where = f"{path} benchmarks[{index}]"
    bench = benches[index]
    groups = need(bench, "requests", where, dict)
    requests = []
    for status in STATUSES:
        for j, stats in enumerate(need(groups, status, f"{where}.requests", list)):
            requests.append(_request(stats, status, f"{where}.requests.{status}[{j}]"))
    spec = (doc.get("config") or {}).get("spec") or {}
    version = (doc.get("metadata") or {}).get("guidellm_version")
    backend = spec.get("backend") or {}
    bodies = [_body(s, "") for g in STATUSES for s in groups[g]]
    return ImportedRun(
        tool=TOOL, version=words(version), source=str(path), target=backend.get("target"),
        requests=tuple(requests), prompts_from="text",
        settings=_settings(bench, spec, bodies, [r.prompt_key for r in requests], requests),
        not_recorded=NOT_RECORDED)


def _body(stats: Any, where: str) -> dict[str, Any]:
    args = stats.get("request_args") if isinstance(stats, dict) else None
    try:
        body = json.loads(args).get("body") if isinstance(args, str) else None
    except (json.JSONDecodeError, AttributeError) as exc:
        raise ResultsError(f"{where}: request_args is not GuideLLM's JSON ({exc})") from exc
    return body if isinstance(body, dict) else {}


def _prompt(body: dict[str, Any]) -> str | None:
    if "prompt" in body:
        return json.dumps(body["prompt"])
    if "messages" in body:
        return json.dumps(body["messages"], sort_keys=True)
    return None


def _request(stats: Any, status: str, where: str) -> ImportedRequest:
    if not isinstance(stats, dict):
        raise ResultsError(f"{where}: not a request's stats object")
    body = _body(stats, where)
    prompt = _prompt(body)
    info = need(stats, "info", where, dict)
    timings = info.get("timings") or {}
    ok = status == "successful"
    ttft_ms = number(stats.get("time_to_first_token_ms"))
    e2e = number(stats.get("request_latency"))
    if ok and (ttft_ms is None or e2e is None):
        raise ResultsError(f"{where}: a successful request without time_to_first_token_ms "
                           "and request_latency")
    start, target = number(timings.get("request_start")), number(timings.get("targeted_start"))
    counted = USAGE if stats.get("response_metrics") else TOKENIZER
    output = stats.get("output")
    return ImportedRequest(
        prompt_key=text_key(prompt) if prompt is not None else None, ok=ok,
        error=None if ok else str(info.get("error") or status),
        ttft_s=ttft_ms / 1000 if ok and ttft_ms is not None else None,
        e2e_s=e2e if ok else None,
        output_tokens=int(stats.get("output_tokens") or 0),
        prompt_tokens=int(stats.get("prompt_tokens") or 0),
        output_text=output if isinstance(output, str) else "", text_saved=True,
        send_lag_s=start - target if start is not None and target is not None else None,
        max_tokens=body.get("max_tokens") or body.get("max_completion_tokens"),
        tokens_from=counted if ok else None)


def _settings(bench: dict[str, Any], spec: dict[str, Any], bodies: list[dict[str, Any]],
              keys: list[str | None], requests: list[ImportedRequest]) -> dict[str, str | None]:
    config = bench.get("config") or {}
    strategy = config.get("strategy") or {}
    backend = spec.get("backend") or {}
    rate = strategy.get("rate")
    kind = strategy.get("type_")
    counters = {r.tokens_from for r in requests if r.ok}
    return {
        "endpoint": words(f"{backend.get('request_format')}"
                          f"{' streamed' if backend.get('stream') else ''}"
                          if backend else None),
        "dataset": json.dumps(spec["data"], sort_keys=True) if spec.get("data") else None,
        "prompts": prompts_digest(keys),
        "max_tokens": one_setting([b.get("max_tokens", b.get("max_completion_tokens"))
                                  for b in bodies]),
        "ignore_eos": one_setting([b.get("ignore_eos", False) for b in bodies]),
        "rate": f"{kind} {rate} req/s" if rate is not None else words(kind),
        "concurrency": words(strategy.get("streams") or strategy.get("max_concurrency")),
        "warmup": json.dumps(config["warmup"], sort_keys=True) if config.get("warmup")
        else None,
        "token_counter": None if not counters else
        (SERVER_USAGE if counters == {USAGE} else TOOL_TOKENIZER if counters == {TOKENIZER}
         else "mixed"),
    }
