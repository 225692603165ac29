"""`python -m layergate.harness.stack.await_arms URL...`: wait until every arm's server answers.

The compose stack runs it before the replay, so a replay never starts against a server
that is still loading (the reference engines convert the model first: minutes). An arm is
up once GET URL/v1/models shows it up by the project's one readiness rule
(harness/readiness.py): any answer but 502 / 503 / 504 (503 while loading), so 401 / 404
too (a server that wants a key, or has no model list, is still up); refused connections
are not. Exits 0 when all are up, 4 (infrastructure) naming the arms that are
not after --timeout seconds, 2 on a URL that is not http(s).
"""

from __future__ import annotations

import argparse
import sys

from layergate.exporters.catalogue import ExitCode
from layergate.harness.readiness import MODELS, models_url, wait_up, why_down


def answers(url: str, timeout: float = 3.0) -> str | None:
    """None when the server at `url` is up, else why not."""
    return why_down(models_url(url), timeout)


def wait(urls: list[str], timeout: float, interval: float = 2.0) -> dict[str, str]:
    """Poll until every URL is up or `timeout` passes; the ones still down, with why."""
    probes = {models_url(u): u for u in urls}
    return {probes[p]: why for p, why in wait_up(list(probes), timeout, interval).items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m layergate.harness.stack.await_arms",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("urls", nargs="+", metavar="URL")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds to wait for all of them (default 900)")
    args = parser.parse_args(argv)
    bad = [u for u in args.urls if not u.startswith(("http://", "https://"))]
    if bad:
        print(f"error: not an http(s) URL: {', '.join(bad)}", file=sys.stderr)
        return ExitCode.USAGE
    print(f"waiting up to {args.timeout:g} s for {', '.join(args.urls)}", flush=True)
    down = wait(args.urls, args.timeout)
    for url, why in down.items():
        print(f"error: {url} did not answer on {MODELS}: {why}", file=sys.stderr)
    if down:
        return ExitCode.INFRASTRUCTURE
    print("every arm answers", flush=True)
    return ExitCode.PASS


if __name__ == "__main__":
    sys.exit(main())
