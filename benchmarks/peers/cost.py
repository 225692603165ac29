"""Section `cost` of the side-by-side: the client CPU each tool spends, split into a fixed
cost per run and a cost per request the server saw, measured so that a ranking holds.

One table per load level of `--cost-users` (default 16,64): a closed loop of that many
users, each sending its next request as soon as its last is done, through each tool's own
concurrency option (`common.Load.users`). The levels of `--cost-flood` (default 64: the
flood) run against an instant echo server, no time to the first token nor per token, so the
tools send as fast as they can; the others against the errors section's server (first token
after 100 ms, then one every 20 ms). Level 0 is the open loop: Poisson arrivals at
`--cost-rate` (default 64/s), on the errors section's server unless 0 is a flood level:

    --cost-users 16,64            16 users, then the flood of 64 (the default)
    --cost-users 0 --cost-rate 8  open loop only, Poisson at 8/s

Each repeat runs every tool twice against a fresh echo server (`errors.one_run`), once at
each of two sizes; the slope between the two is the cost per request, what is left at
zero requests the fixed cost. The tools take turns within a repeat, so a slow minute of
the machine falls on all of them. One warm-up run per tool comes first and is not counted
(bytecode written, files in the page cache): each tool then runs as an installed one does.
Reported per level: the median over the repeats with the lowest and highest, and where two
tools' ranges overlap, that the order between them is not measured.

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
from benchmarks.peers.errors import FIRST_TOKEN_S, INSTANT, TIMED, TOKEN_S, Row, one_run

OPEN_RATE = 64.0  # the open-loop level's rate when --cost-rate is not given


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cost-requests", default="300,1500",
                        help="the two run sizes whose CPU difference is the cost per request")
    parser.add_argument("--cost-repeats", type=int, default=5,
                        help="pairs of runs per tool; the figures are their median and range")
    parser.add_argument("--cost-users", default="16,64",
                        help="load levels, one table each: N users in a closed loop; 0 the "
                             "open loop at --cost-rate")
    parser.add_argument("--cost-flood", default="64",
                        help="the levels run against an instant echo server (no delay to "
                             "the first token nor per token); '' for none")
    parser.add_argument("--cost-rate", type=float, default=None,
                        help=f"offered rate of level 0 (Poisson), requests per second "
                             f"(default {OPEN_RATE:g})")


@dataclasses.dataclass(frozen=True)
class Level:
    """One load level of the section: `users` in a closed loop, or the open loop at `rate`
    (users 0); against an instant server or the errors section's paced one."""

    users: int
    rate: float
    instant: bool

    @property
    def pacing(self) -> tuple[str, ...]:
        return INSTANT if self.instant else TIMED

    def words(self) -> str:
        sent = (f"{self.users} users in a closed loop" if self.users
                else f"at {self.rate:g}/s offered")
        server = ("an instant server" if self.instant else
                  f"first token after {FIRST_TOKEN_S * 1000:g} ms, then one every "
                  f"{TOKEN_S * 1000:g} ms")
        return f"{sent}, {server}"


def levels(args: argparse.Namespace) -> list[Level]:
    """The levels `--cost-users`, `--cost-flood` and `--cost-rate` ask for, in order."""
    try:
        users = [int(n) for n in args.cost_users.split(",")]
        flood = {int(n) for n in args.cost_flood.split(",") if n.strip()}
    except ValueError as exc:
        raise SystemExit(f"--cost-users, --cost-flood: whole numbers ({exc})") from None
    if any(n < 0 for n in users) or len(set(users)) != len(users):
        raise SystemExit(f"--cost-users: distinct levels, 0 or more: {args.cost_users}")
    if args.cost_rate is not None and 0 not in users:
        raise SystemExit("--cost-rate is the rate of level 0 (the open loop): add 0 to "
                         "--cost-users")
    rate = OPEN_RATE if args.cost_rate is None else args.cost_rate
    return [Level(n, rate, n in flood) for n in users]


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


@dataclasses.dataclass(frozen=True)
class Table:
    """The costs of every tool at one level."""

    level: Level
    costs: tuple[Cost, ...]


def measure(args: argparse.Namespace, tools: list[str], work: Path) -> list[Table]:
    sizes = [int(n) for n in args.cost_requests.split(",")]
    if len(sizes) != 2 or sizes[0] >= sizes[1]:
        raise SystemExit(f"--cost-requests: two sizes, the smaller first: {args.cost_requests}")
    asked = levels(args)

    def run(tool: str, level: Level, n: int, where: Path) -> Row:
        return one_run(tool, level.rate, argparse.Namespace(**{**vars(args), "requests": n}),
                       fresh(where), users=level.users, pacing=level.pacing)

    for tool in tools:
        run(tool, asked[0], sizes[0], work / "warm-up" / _safe(tool))
    tables = []
    for level in asked:
        pairs: dict[str, list[Pair]] = {tool: [] for tool in tools}
        for repeat in range(args.cost_repeats):
            for tool in tools:
                base = work / _name(level) / f"{repeat}" / _safe(tool)
                pairs[tool].append(Pair(run(tool, level, sizes[0], base / "small"),
                                        run(tool, level, sizes[1], base / "large")))
                print(f"cost: {_name(level)}, repeat {repeat + 1}/{args.cost_repeats}, "
                      f"{tool}: {pairs[tool][-1].slope_ms:.2f} ms per request",
                      file=sys.stderr)
        tables.append(Table(level, tuple(Cost(tool, tuple(p)) for tool, p in pairs.items())))
    return tables


def _name(level: Level) -> str:
    return f"{level.users}-users" if level.users else f"rate-{level.rate:g}"


def _safe(tool: str) -> str:
    return tool.replace("/", "_").replace("@", "-at-")


def _range(values: list[float], fmt: str) -> str:
    return (f"{statistics.median(values):{fmt}} [{min(values):{fmt}}, "
            f"{max(values):{fmt}}]")


def print_tables(tables: list[Table]) -> None:
    """Each level's table, then how each tool sent it (its adapter's first note)."""
    for i, table in enumerate(tables):
        if i:
            print()
        print_table(list(table.costs), table.level.words())
        for c in table.costs:
            notes = c.pairs[-1].large.measured.notes
            print(f"{c.tool}: {notes[0] if notes else 'no note'}")


def print_table(costs: list[Cost], load: str | None = None) -> None:
    """One level's table; `load` says how it was sent (else the offered rate)."""
    if not costs:
        return
    first = costs[0].pairs[0]
    print(f"client CPU, {len(costs[0].pairs)} repeats of two runs "
          f"({first.small.truth.requests} and {first.large.truth.requests} requests the "
          f"server saw) {load or f'at {first.large.rate:g}/s offered'}: median "
          "[lowest, highest]")
    print("tool | ms per request the server saw | fixed s per run")
    ranked = sorted(costs, key=lambda c: statistics.median(c.slopes))
    for c in ranked:
        print(f"{c.tool} | {_range(c.slopes, '.2f')} | {_range(c.fixed, '.2f')}")
    for a, b in zip(ranked, ranked[1:], strict=False):
        if max(a.slopes) >= min(b.slopes):
            print(f"{a.tool} and {b.tool}: their ranges overlap, so which costs less per "
                  "request is not measured")
