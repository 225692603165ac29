"""OTel spans of the server, read back in-process with an InMemorySpanExporter: one SERVER
span per request with the GenAI attributes, parented on the caller's `traceparent`, and
`queue` / `prefill` / `decode` children. Mechanical, so a tiny random Llama (with the real
SmolLM2 tokenizer and chat template) serves."""

from __future__ import annotations

import shutil

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry

from layergate.exporters.otlp import tracer_provider_from_env
from layergate.reference_engine.tracing import SERVICE_NAME

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "chat_template.jinja")


def tiny_llama(path):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from layergate.reference_engine.loading import ensure_converted

    torch.manual_seed(0)
    real = ensure_converted()
    config = LlamaConfig(vocab_size=49152, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(config).save_pretrained(path)
    for name in TOKENIZER_FILES:
        if (real / name).exists():
            shutil.copy(real / name, path / name)
    return path


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    import torch

    from layergate.reference_engine.config import EngineConfig
    from layergate.reference_engine.engine import Engine
    from layergate.reference_engine.server import create_app

    torch.set_num_threads(1)
    model_dir = tiny_llama(tmp_path_factory.mktemp("tiny-llama"))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = CollectorRegistry()
    engine = Engine(EngineConfig(model=str(model_dir), threads=1), registry)
    with TestClient(create_app(engine, registry, tracer_provider=provider)) as client:
        yield client, exporter


def request_spans(exporter):
    return [s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER]


def children_of(exporter, span):
    return {s.name: s for s in exporter.get_finished_spans()
            if s.parent is not None and s.parent.span_id == span.context.span_id}


def test_span_honours_traceparent_with_genai_attributes(traced):
    client, exporter = traced
    exporter.clear()
    r = client.post("/v1/chat/completions", headers={"traceparent": TRACEPARENT}, json={
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "temperature": 0.5,
        "seed": 1})
    assert r.status_code == 200, r.text
    [span] = request_spans(exporter)
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert format(span.parent.span_id, "016x") == PARENT_ID
    attrs = span.attributes
    usage = r.json()["usage"]
    assert attrs["gen_ai.system"] == "layergate"
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == r.json()["model"]
    assert attrs["gen_ai.request.max_tokens"] == 5
    assert attrs["gen_ai.request.temperature"] == 0.5
    assert attrs["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    assert attrs["gen_ai.usage.output_tokens"] == usage["completion_tokens"]
    assert tuple(attrs["gen_ai.response.finish_reasons"]) == (
        r.json()["choices"][0]["finish_reason"],)
    phases = children_of(exporter, span)
    assert {"queue", "prefill", "decode"} <= phases.keys()
    assert phases["queue"].end_time <= phases["prefill"].start_time
    assert phases["prefill"].end_time <= phases["decode"].start_time


def test_streamed_request_without_traceparent_is_a_root_span(traced):
    client, exporter = traced
    exporter.clear()
    with client.stream("POST", "/v1/completions", json={
            "prompt": "hello", "max_tokens": 4, "stream": True}) as r:
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    [span] = request_spans(exporter)
    assert span.parent is None
    assert span.attributes["gen_ai.operation.name"] == "text_completion"
    assert span.attributes["gen_ai.usage.output_tokens"] == 4
    assert {"queue", "prefill", "decode"} <= children_of(exporter, span).keys()


def test_rejected_request_span_is_an_error(traced):
    client, exporter = traced
    exporter.clear()
    r = client.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "hi"}], "model": "nope"})
    assert r.status_code == 404
    [span] = request_spans(exporter)
    assert not span.status.is_ok and span.attributes["error.type"] == "404"


def test_otlp_exporter_only_when_configured(monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert tracer_provider_from_env(SERVICE_NAME) is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    provider = tracer_provider_from_env(SERVICE_NAME)
    assert isinstance(provider, TracerProvider)
    provider.shutdown()
