"""Before the schedule starts: is every arm there? One `GET <url>/v1/models` per arm,
concurrently, within a timeout. An arm that cannot be reached (refused, unresolvable,
silent past the timeout) or that answers as a gateway with nothing behind it (502, 503,
504) is not there; any other answer, even a 404 from a server without that endpoint,
shows a server. A replay against a mistyped URL then fails in seconds, with nothing sent,
instead of after the whole trace."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

from layergate.harness.replay.errors import ArmsUnreachable

ABSENT_STATUSES = (502, 503, 504)  # a proxy or load balancer with no live server behind


def probe(url: str, timeout: float) -> str | None:
    """Why the server at base URL `url` is not there, or None when it answers."""
    target = url.rstrip("/") + "/v1/models"
    try:
        status = httpx.get(target, timeout=timeout).status_code
    except httpx.TimeoutException:
        return f"{target} did not answer within {timeout:g}s"
    except httpx.HTTPError as exc:
        return f"{target}: {type(exc).__name__}: {exc}"
    if status in ABSENT_STATUSES:
        return f"{target} answered HTTP {status} (no server behind it)"
    return None


def check_arms(arms: dict[str, str], timeout: float) -> None:
    """Raise `ArmsUnreachable` naming every arm that is not there."""
    with ThreadPoolExecutor(max_workers=max(1, len(arms))) as pool:
        answers = dict(zip(arms, pool.map(lambda u: probe(u, timeout), arms.values()),
                           strict=True))
    problems = {arm: why for arm, why in answers.items() if why is not None}
    if problems:
        raise ArmsUnreachable(problems)
