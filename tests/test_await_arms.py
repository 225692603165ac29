"""`python -m layergate.harness.stack.await_arms`: the compose stack's wait for the arms,
against real HTTP servers on 127.0.0.1: a server that is loading (503) is not up, one that
refuses the request (401) is, and a port nobody listens on never is."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from layergate.exporters.catalogue import ExitCode
from layergate.harness.processes import free_port
from layergate.harness.stack import await_arms
from tests.support.http_server import serving


def _server(statuses: list[int]) -> Iterator[str]:
    """Answers GET with the next status of `statuses` (the last one from then on)."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            status = statuses.pop(0) if len(statuses) > 1 else statuses[0]
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        yield url.rstrip("/")


@pytest.fixture()
def loading() -> Iterator[str]:
    yield from _server([503, 503, 401])


@pytest.fixture()
def up() -> Iterator[str]:
    yield from _server([200])


def test_waits_through_loading_and_counts_a_refusal_as_up(loading: str, up: str) -> None:
    assert await_arms.answers(loading).endswith("answered HTTP 503")
    assert await_arms.wait([loading, up], timeout=10, interval=0.05) == {}
    assert await_arms.main(["--timeout", "5", loading, up]) == ExitCode.PASS


def test_a_dead_arm_is_named_after_the_timeout(up: str,
                                               capsys: pytest.CaptureFixture) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    assert await_arms.main(["--timeout", "0.3", up, dead]) == ExitCode.INFRASTRUCTURE
    err = capsys.readouterr().err
    assert dead in err and "ConnectError" in err and up not in err


def test_a_url_that_is_not_http_is_a_usage_error() -> None:
    assert await_arms.main(["baseline:8000"]) == ExitCode.USAGE
