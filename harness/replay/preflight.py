"""Before the schedule starts: is every arm there? One `GET <url>/v1/models` per arm,
concurrently, within a timeout, judged by the project's one readiness rule
(harness/readiness.py: no answer, 502, 503 or 504 is not there; any other answer, even a
404 from a server without that endpoint, shows a server). A replay against a mistyped URL
then fails in seconds, with nothing sent, instead of after the whole trace."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from layergate.harness.readiness import models_url, why_down
from layergate.harness.replay.errors import ArmsUnreachable


def probe(url: str, timeout: float) -> str | None:
    """Why the server at base URL `url` is not there, or None when it answers."""
    return why_down(models_url(url), timeout)


def check_arms(arms: dict[str, str], timeout: float) -> None:
    """Raise `ArmsUnreachable` naming every arm that is not there."""
    with ThreadPoolExecutor(max_workers=max(1, len(arms))) as pool:
        answers = dict(zip(arms, pool.map(lambda u: probe(u, timeout), arms.values()),
                           strict=True))
    problems = {arm: why for arm, why in answers.items() if why is not None}
    if problems:
        raise ArmsUnreachable(problems)
