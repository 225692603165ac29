"""inference-perf 0.7's report directory (`report.request_lifecycle.per_request: true`):
`per_request_lifecycle_metrics.json`, a list with one entry per request
(inference_perf/reportgen/base.py `build_per_request_lifecycle_entry`), beside the tool's
dump of its whole config, `config.yaml`.

Per request: `start_time` and `end_time` (the tool's monotonic clock: the send and the end
of the stream), `request` (the body as JSON text: prompt or messages, max_tokens,
ignore_eos), `response` (the raw body: for a stream, its SSE lines), `info.response_metrics`
(`chunk_times` on the same clock, `output_tokens` (its tokenizer's count of the streamed
text) and `server_usage`), `info.request_metrics.text.input_tokens`, and `error`. TTFT is the
first chunk's time minus start_time, as the tool's own time_to_first_token; the gaps are
between chunks; the output tokens are the server's usage where the config says
`use_server_output_tokens`, else the tool's count. The entry has no scheduled time (no send
lag), and the tool has no warm-up phase: every request is measured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

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
from layergate.harness.results_import.source import number, read_json

TOOL = "inference-perf"
PER_REQUEST, CONFIG = "per_request_lifecycle_metrics.json", "config.yaml"
NOT_RECORDED = ("scheduled send times (no send lag)",)


def read(source: Path) -> ImportedRun:
    folder = source if source.is_dir() else source.parent
    path = folder / PER_REQUEST if source.is_dir() else source
    entries = read_json(path, TOOL)
    if not isinstance(entries, list):
        raise ResultsError(f"{path}: a {type(entries).__name__}, not inference-perf's list of "
                           "per-request entries (run with report.request_lifecycle.per_request)")
    config = _config(folder / CONFIG)
    lifecycle = ((config.get("report") or {}).get("request_lifecycle") or {})
    server_counts = bool(lifecycle.get("use_server_output_tokens"))
    requests, bodies = [], []
    for i, entry in enumerate(entries):
        where = f"{path}[{i}]"
        if not isinstance(entry, dict):
            raise ResultsError(f"{where}: not a per-request entry")
        body = _body(entry, where)
        bodies.append(body)
        requests.append(_request(entry, body, server_counts, where))
    server = config.get("server") or {}
    not_recorded = list(NOT_RECORDED)
    if not config:
        not_recorded.append(f"the run's settings (no {CONFIG})")
    if any(e.get("response") is None for e in entries if isinstance(e, dict)):
        not_recorded.append("the output texts (per_request_fields.response off)")
    return ImportedRun(
        tool=TOOL, version=None, source=str(path), target=server.get("base_url"),
        requests=tuple(requests), prompts_from="text",
        settings=_settings(config, bodies, [r.prompt_key for r in requests], server_counts),
        not_recorded=tuple(not_recorded))


def _config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ResultsError(f"{path}: not inference-perf's config dump ({exc})") from exc
    return doc if isinstance(doc, dict) else {}


def _body(entry: dict[str, Any], where: str) -> dict[str, Any]:
    raw = entry.get("request")
    if raw is None:
        return {}
    try:
        body = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{where}: field 'request' is not a JSON body ({exc})") from exc
    return body if isinstance(body, dict) else {}


def _text(response: Any) -> str:
    """The answer's text from the raw response: its SSE chunks' choices, or one JSON body."""
    if not isinstance(response, str):
        return ""
    lines = [line[5:].strip() for line in response.splitlines() if line.startswith("data:")]
    docs = [line for line in lines if line and line != "[DONE]"] or [response]
    text = []
    for doc in docs:
        try:
            obj = json.loads(doc)
        except json.JSONDecodeError:
            continue
        for choice in (obj.get("choices") or [])[:1] if isinstance(obj, dict) else []:
            text.append(choice.get("text") or (choice.get("delta") or {}).get("content")
                        or (choice.get("message") or {}).get("content") or "")
    return "".join(text)


def _request(entry: dict[str, Any], body: dict[str, Any], server_counts: bool,
             where: str) -> ImportedRequest:
    info = entry.get("info") or {}
    metrics = info.get("response_metrics") or {}
    start, end = number(entry.get("start_time")), number(entry.get("end_time"))
    chunks = [t for t in (metrics.get("chunk_times") or []) if number(t) is not None]
    ok = entry.get("error") is None and start is not None and end is not None
    usage = metrics.get("server_usage") or {}
    counted = server_counts and number(usage.get("completion_tokens")) is not None
    prompt = body.get("prompt", body.get("messages"))
    text_in = ((info.get("request_metrics") or {}).get("text") or {}).get("input_tokens")
    return ImportedRequest(
        prompt_key=text_key(json.dumps(prompt, sort_keys=True)) if prompt is not None
        else None, ok=ok,
        error=None if ok else json.dumps(entry.get("error")),
        ttft_s=chunks[0] - start if ok and chunks else None,
        e2e_s=end - start if ok else None,
        itl_s=tuple(b - a for a, b in zip(chunks, chunks[1:], strict=False)) if ok else (),
        output_tokens=int(usage["completion_tokens"] if counted
                          else metrics.get("output_tokens") or 0),
        prompt_tokens=int(usage.get("prompt_tokens") or text_in or 0),
        output_text=_text(entry.get("response")), text_saved=entry.get("response") is not None,
        max_tokens=body.get("max_tokens") or body.get("max_completion_tokens"),
        tokens_from=(USAGE if counted else TOKENIZER) if ok else None)


def _settings(config: dict[str, Any], bodies: list[dict[str, Any]], keys: list[str | None],
              server_counts: bool) -> dict[str, str | None]:
    api, load, data = (config.get(k) or {} for k in ("api", "load", "data"))
    stages = [{k: s.get(k) for k in ("rate", "duration", "concurrency_level")}
              for s in load.get("stages") or [] if isinstance(s, dict)]
    return {
        "endpoint": f"{api.get('type')}{' streamed' if api.get('streaming') else ''}"
        if api else None,
        "dataset": json.dumps(data, sort_keys=True) if data else None,
        "prompts": prompts_digest(keys),
        "max_tokens": one_setting([b.get("max_tokens", b.get("max_completion_tokens"))
                            for b in bodies]),
        "ignore_eos": one_setting([b.get("ignore_eos", False) for b in bodies]) if bodies else None,
        "rate": f"{load.get('type')} {json.dumps(stages)}" if load else None,
        "concurrency": words(load.get("worker_max_concurrency")) if load else None,
        "warmup": "none (inference-perf measures every request)" if config else None,
        "token_counter": (SERVER_USAGE if server_counts else TOOL_TOKENIZER) if config
        else None,
    }
