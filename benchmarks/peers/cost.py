"""Section `cost` of the side-by-side: the client CPU each tool spends, split into a fixed
cost per run and a cost per request the server saw, measured so that a ranking holds.

Each repeat runs every tool twice against the same echo server (`errors.one_run`: a
fixed time to the first token and per token, Poisson arrivals at `--cost-rate`), once at
each of two sizes; the slope between the two is the cost per request, what is left at
zero requests the fixed cost. The tools take turns within a repeat, so a slow minute of
the machine falls on all of them. One warm-up run per tool comes first and is not counted
(bytecode written, files in the page cache): each tool then runs as an installed one does.
Reported: the median over the repeats with the lowest and highest, and where two tools'
ranges overlap, that the order between them is not measured.

A tool named `layergate@DIR` is layergate run from the checkout at DIR (its `layergate`
package first on the path): an older commit measured beside the current one.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

from benchmarks.peers.common import fresh
from benchmarks.peers.errors import Row, one_run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cost-requests", default="300,1500",
                        help="the two run sizes whose CPU difference is the cost per request")
    parser.add_argument("--cost-repeats", type=int, default=5,
                        help="pairs of runs per tool; the figures are their median and range")
    parser.add_argument("--cost-rate", type=float, default=64.0,
                        help="offered rate of the cost runs, requests per second")


@dataclasses.dataclass(frozen=True)
class Pair:
    """One repeat of one tool: its small and its large run."""

    small: Row
    large: Row

    @property
    def slope_ms(self) -> float:
        """CPU per request the server saw, in ms."""
        n1, n2 = self.small.truth.requests, self.large.truth.requests
        return (self.large.measured.cpu_s - self.small.measured.cpu_s) / max(n2 - n1, 1) * 1000

    @property
    def fixed_s(self) -> float:
        return self.small.measured.cpu_s - self.slope_ms / 1000 * self.small.truth.requests


@dataclasses.dataclass(frozen=True)
class Cost:
    tool: str
    pairs: tuple[Pair, ...]

    @property
    def slopes(self) -> list[float]:
        return [p.slope_ms for p in self.pairs]

    @property
    def fixed(self) -> list[float]:
        return [p.fixed_s for p in self.pairs]


def measure(args: argparse.Namespace, tools: list[str], work: Path) -> list[Cost]:
    sizes = [int(n) for n in args.cost_requests.split(",")]
    if len(sizes) != 2 or sizes[0] >= sizes[1]:
        raise SystemExit(f"--cost-requests: two sizes, the smaller first: {args.cost_requests}")

    def run(tool: str, n: int, where: Path) -> Row:
        return one_run(tool, args.cost_rate,
                       argparse.Namespace(**{**vars(args), "requests": n}), fresh(where))

    for tool in tools:
        run(tool, sizes[0], work / "warm-up" / _safe(tool))
    pairs: dict[str, list[Pair]] = {tool: [] for tool in tools}
    for repeat in range(args.cost_repeats):
        for tool in tools:
            base = work / f"{repeat}" / _safe(tool)
            pairs[tool].append(Pair(run(tool, sizes[0], base / "small"),
                                    run(tool, sizes[1], base / "large")))
            print(f"cost: repeat {repeat + 1}/{args.cost_repeats}, {tool}: "
                  f"{pairs[tool][-1].slope_ms:.2f} ms per request", file=sys.stderr)
    return [Cost(tool, tuple(p)) for tool, p in pairs.items()]


def _safe(tool: str) -> str:
    return tool.replace("/", "_").replace("@", "-at-")


def _range(values: list[float], fmt: str) -> str:
    return (f"{statistics.median(values):{fmt}} [{min(values):{fmt}}, "
            f"{max(values):{fmt}}]")


def print_table(costs: list[Cost]) -> None:
    if not costs:
        return
    first = costs[0].pairs[0]
    print(f"client CPU, {len(costs[0].pairs)} repeats of two runs "
          f"({first.small.truth.requests} and {first.large.truth.requests} requests the "
          f"server saw) at {first.large.rate:g}/s offered: median [lowest, highest]")
    print("tool | ms per request the server saw | fixed s per run")
    ranked = sorted(costs, key=lambda c: statistics.median(c.slopes))
    for c in ranked:
        print(f"{c.tool} | {_range(c.slopes, '.2f')} | {_range(c.fixed, '.2f')}")
    for a, b in zip(ranked, ranked[1:], strict=False):
        if max(a.slopes) >= min(b.slopes):
            print(f"{a.tool} and {b.tool}: their ranges overlap, so which costs less per "
                  "request is not measured")
