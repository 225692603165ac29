"""schemathesis fuzzes the live server's own OpenAPI schema, valid and invalid requests
alike: whatever it sends, the answer is never a 5xx (real engine, shared `full_engine`)."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

pytestmark = [pytest.mark.model, pytest.mark.slow]

EXAMPLES_PER_MODE = 15  # x2 modes = 30 cases per operation
MAX_TOKENS = 3  # fuzzing is about the API, not about generating text


def _short(case) -> None:
    """Keep generations short: any valid token budget is cut to a few tokens."""
    body = case.body
    if not isinstance(body, dict):
        return
    limited = False
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            body[key] = min(value, MAX_TOKENS)
            limited = True
    if not limited and "max_tokens" not in body:
        body["max_tokens"] = MAX_TOKENS


def _send(client: httpx.Client, case, url: str) -> httpx.Response:
    """Sent with httpx: schemathesis' own `case.call` goes through `requests`, which the
    installed urllib3-future breaks."""
    kw = case.as_transport_kwargs(base_url=url)
    body: dict = {}
    if "json" in kw:
        body["json"] = kw["json"]
    elif isinstance(kw.get("data"), bytes | str):
        body["content"] = kw["data"]
    elif kw.get("data") is not None:
        body["data"] = kw["data"]
    return client.request(kw["method"], kw["url"], headers=kw.get("headers"),
                          params=kw.get("params"), **body)


def test_openapi_fuzz_never_5xx(full_engine):
    schema = schemathesis.openapi.from_url(f"{full_engine.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    paths = {op.path for op in operations}
    assert {"/v1/chat/completions", "/v1/completions", "/v1/models"} <= paths
    failures: list[str] = []
    with httpx.Client(timeout=60) as client:
        for operation in operations:
            _fuzz(client, operation, GenerationMode.POSITIVE, full_engine.url, failures)
            # GETs here take no body and at most a free-form string: nothing invalid to make
            if operation.method.upper() != "GET":
                _fuzz(client, operation, GenerationMode.NEGATIVE, full_engine.url, failures)
    assert not failures, "\n".join(failures[:10])


def _fuzz(client: httpx.Client, operation, mode: GenerationMode, url: str,
          failures: list[str]) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES_PER_MODE, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), derandomize=True)
    def run(case) -> None:
        _short(case)
        response = _send(client, case, url)
        if response.status_code >= 500:
            failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}) -> "
                            f"{response.status_code}: body={case.body!r} "
                            f"answer={response.text[:300]}")

    run()
