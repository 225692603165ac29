"""Is a server up? The one rule every probe of the project uses: the replay's preflight,
the compose stack's wait for its arms, and the wait for a process the project started.

A server is up when it answers HTTP with any status but 502, 503 or 504. Those three are
a gateway or load balancer with no live server behind it, or a server still loading (503);
anything else, 500 and 404 included, is a server that is there: its errors are the run's
to judge (a candidate that fails every request fails the gate on its error rate, it is
not "not there"). No answer (refused, unresolvable, silent past the timeout) is down."""

from __future__ import annotations

import functools
import ssl
import time

import httpx

NOT_UP_STATUSES = (502, 503, 504)
MODELS = "/v1/models"  # what every probe asks an OpenAI-compatible server for


def models_url(base_url: str) -> str:
    """The URL a probe of the server at `base_url` asks."""
    return base_url.rstrip("/") + MODELS


def status_up(status: int) -> bool:
    """Whether an HTTP answer with `status` shows a server that is up."""
    return status not in NOT_UP_STATUSES


@functools.cache
def _verified() -> ssl.SSLContext:
    return httpx.create_ssl_context()


def get(url: str, timeout: float) -> httpx.Response:
    """One GET, as `httpx.get` makes it, without its fixed cost: `httpx.get` builds a TLS
    context for each call, loading every CA certificate (about 65 ms here) even for an
    http:// URL, and a replay's preflight and scrapes make several. An https:// URL shares
    one context, made on first use; an http:// one, which never speaks TLS (`httpx.get`
    follows no redirect), gets an unverified one, which costs nothing to make."""
    verify = _verified() if url.lower().startswith("https:") else False
    return httpx.get(url, timeout=timeout, verify=verify)


def why_down(url: str, timeout: float) -> str | None:
    """Why the server is not up, from one GET `url` (None: it is up)."""
    try:
        status = get(url, timeout).status_code
    except httpx.TimeoutException:
        return f"{url} did not answer within {timeout:g}s"
    except httpx.HTTPError as exc:
        return f"{url}: {type(exc).__name__}: {exc}"
    return None if status_up(status) else f"{url} answered HTTP {status}"


def wait_up(urls: list[str], timeout: float, interval: float = 2.0,
            answer_timeout: float = 3.0) -> dict[str, str]:
    """Poll every URL until each is up or `timeout` passes; the ones still down, with why."""
    deadline = time.monotonic() + timeout
    down = dict.fromkeys(urls, "not tried")
    while True:
        down = {u: why for u in down if (why := why_down(u, answer_timeout)) is not None}
        if not down or time.monotonic() >= deadline:
            return down
        time.sleep(interval)
