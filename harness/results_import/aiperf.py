"""AIPerf 0.13's artifact directory (`aiperf profile --artifact-dir DIR`): the per-request
records `profile_export.jsonl` (one MetricRecordInfo a line: `metadata`, `metrics` as
{value, unit}, `error`; aiperf/common/models/record_models.py), the run's own copy of its
settings in `profile_export_aiperf.json` (`input_config`: endpoint, datasets, phases), the
prompts it built in `inputs.json` (`data[].session_id`, `payloads[turn]`: the request
bodies) and, with `--export-outputs-json`, the answers in `outputs.json`
(`data[].x_request_id`, `response_text`).

Per request: `time_to_first_token` and `request_latency` (from the request's start),
`inter_chunk_latency` (the gaps between streamed chunks), `output_sequence_length` (the
server's usage with --use-server-token-count, else AIPerf's tokenizer, as `input_config`
says), `input_sequence_length`, `metadata.credit_issued_ns` (when the schedule released the
request) and `request_start_ns` (the send lag). Records of the warm-up phase
(`metadata.benchmark_phase` warmup) are left out, as AIPerf leaves them out of its figures.
The prompt's identity is its text from inputs.json; without that file (trace datasets skip
it), the conversation id of the seeded dataset."""

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
    generated_key,
    one_setting,
    prompts_digest,
    text_key,
    words,
)
from layergate.harness.results_import.source import number, read_json, read_jsonl

TOOL = "aiperf"
RECORDS, SUMMARY = "profile_export.jsonl", "profile_export_aiperf.json"
INPUTS, OUTPUTS = "inputs.json", "outputs.json"
MS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}
WARMUP = "warmup"


def read(source: Path) -> ImportedRun:
    folder = source if source.is_dir() else source.parent
    records = read_jsonl(folder / RECORDS if source.is_dir() else source, TOOL)
    summary = read_json(folder / SUMMARY, TOOL) if (folder / SUMMARY).is_file() else {}
    config = summary.get("input_config") or {} if isinstance(summary, dict) else {}
    endpoint = config.get("endpoint") or {}
    server_counts = bool(endpoint.get("use_server_token_count"))
    payloads = _payloads(folder / INPUTS)
    texts = _texts(folder / OUTPUTS)
    generator = _generator(config)
    requests = []
    where = folder / RECORDS if source.is_dir() else source
    for number_, record in enumerate(records, 1):
        meta = record.get("metadata")
        if not isinstance(meta, dict) or not isinstance(record.get("metrics"), dict):
            raise ResultsError(f"{where}:{number_}: no metadata and metrics (not AIPerf's "
                               "record)")
        if meta.get("benchmark_phase") == WARMUP:
            continue
        requests.append(_request(record, meta, payloads, texts, generator, server_counts,
                                 f"{where}:{number_}"))
    bodies = [payloads.get(_turn(r["metadata"]), {}) for r in records
              if isinstance(r.get("metadata"), dict)]
    not_recorded = [] if texts is not None else [
        "the output texts (run with --export-outputs-json)"]
    if not payloads:
        not_recorded.append("the prompts' text (no inputs.json): identity by conversation id")
    if not summary:
        not_recorded.append(f"the run's settings (no {SUMMARY})")
    urls = endpoint.get("urls") or [None]
    return ImportedRun(
        tool=TOOL, version=words(summary.get("aiperf_version")) if summary else None,
        source=str(where), target=urls[0], requests=tuple(requests),
        settings=_settings(config, bodies, [r.prompt_key for r in requests], server_counts,
                           bool(summary)),
        prompts_from="text" if payloads else (generator or "none"),
        not_recorded=tuple(not_recorded))


def _turn(meta: dict[str, Any]) -> tuple[str, int]:
    return str(meta.get("conversation_id")), int(meta.get("turn_index") or 0)


def _payloads(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    if not path.is_file():
        return {}
    doc = read_json(path, TOOL)
    out = {}
    for session in (doc.get("data") if isinstance(doc, dict) else None) or []:
        for turn, body in enumerate(session.get("payloads") or []):
            if isinstance(body, dict):
                out[(str(session.get("session_id")), turn)] = body
    return out


def _texts(path: Path) -> dict[str, str] | None:
    if not path.is_file():
        return None
    doc = read_json(path, TOOL)
    return {str(r.get("x_request_id")): r.get("response_text") or ""
            for r in (doc.get("data") if isinstance(doc, dict) else None) or []
            if isinstance(r, dict)}


def _generator(config: dict[str, Any]) -> str | None:
    datasets = config.get("datasets")
    if not datasets:
        return None
    return "aiperf " + json.dumps(datasets, sort_keys=True) + " tokenizer " + json.dumps(
        config.get("tokenizer"), sort_keys=True)


def _seconds(metrics: dict[str, Any], name: str, where: str) -> Any:
    entry = metrics.get(name)
    if entry is None:
        return None
    if not isinstance(entry, dict) or entry.get("unit") not in MS:
        raise ResultsError(f"{where}: metric {name!r} without a time unit")
    scale, value = MS[entry["unit"]], entry.get("value")
    if isinstance(value, list):
        return tuple(float(v) * scale for v in value)
    return float(value) * scale if number(value) is not None else None


def _count(metrics: dict[str, Any], name: str) -> int:
    entry = metrics.get(name)
    return int(entry["value"]) if isinstance(entry, dict) and number(entry.get("value")) \
        is not None else 0


def _request(record: dict[str, Any], meta: dict[str, Any], payloads: dict, texts: dict | None,
             generator: str | None, server_counts: bool, where: str) -> ImportedRequest:
    metrics, error = record["metrics"], record.get("error")
    ttft = _seconds(metrics, "time_to_first_token", where)
    e2e = _seconds(metrics, "request_latency", where)
    ok = not error and not meta.get("was_cancelled") and e2e is not None
    turn = _turn(meta)
    body = payloads.get(turn)
    prompt = body.get("prompt", body.get("messages")) if body else None
    if prompt is not None:
        key = text_key(json.dumps(prompt, sort_keys=True))
    elif generator and meta.get("conversation_id") is not None:
        key = generated_key(generator, f"{turn[0]}/{turn[1]}")
    else:
        key = None
    issued, start = number(meta.get("credit_issued_ns")), number(meta.get("request_start_ns"))
    gaps = _seconds(metrics, "inter_chunk_latency", where) or ()
    text = texts.get(str(meta.get("x_request_id")), "") if texts is not None else ""
    return ImportedRequest(
        prompt_key=key, ok=ok,
        error=None if ok else json.dumps(error) if error else "cancelled",
        ttft_s=ttft if ok else None, e2e_s=e2e if ok else None,
        itl_s=tuple(gaps) if ok else (),
        output_tokens=_count(metrics, "output_sequence_length"),
        prompt_tokens=_count(metrics, "input_sequence_length"),
        output_text=text, text_saved=texts is not None,
        send_lag_s=(start - issued) * 1e-9 if issued is not None and start is not None
        else None,
        max_tokens=(body or {}).get("max_tokens") or (body or {}).get(
            "max_completion_tokens"),
        tokens_from=(USAGE if server_counts else TOKENIZER) if ok else None)


def _settings(config: dict[str, Any], bodies: list[dict[str, Any]], keys: list[str | None],
              server_counts: bool, summarised: bool) -> dict[str, str | None]:
    endpoint = config.get("endpoint") or {}
    phases = {p.get("name"): p for p in config.get("phases") or () if isinstance(p, dict)}
    profiling = phases.get("profiling") or {}
    warmup = phases.get(WARMUP)
    datasets = config.get("datasets")
    shape = {k: profiling.get(k) for k in ("type", "rate", "concurrency") if k in profiling}
    return {
        "endpoint": f"{endpoint.get('type')}{' streamed' if endpoint.get('streaming') else ''}"
        if endpoint else None,
        "dataset": json.dumps(datasets, sort_keys=True) if datasets else None,
        "prompts": prompts_digest(keys),
        "max_tokens": one_setting([b.get("max_tokens", b.get("max_completion_tokens"))
                            for b in bodies]) if bodies and any(bodies) else None,
        "ignore_eos": one_setting([b.get("ignore_eos", False) for b in bodies])
        if bodies and any(bodies) else None,
        "rate": words(f"{shape.get('type')} {shape.get('rate')} req/s")
        if "rate" in shape else words(shape.get("type")),
        "concurrency": words(profiling.get("concurrency") or "unbounded")
        if summarised else None,
        "warmup": (json.dumps(warmup, sort_keys=True) if warmup else "none")
        if summarised else None,
        "token_counter": (SERVER_USAGE if server_counts else TOOL_TOKENIZER)
        if summarised else None,
    }
