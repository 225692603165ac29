"""Who measures right and who costs less: layergate and its peers (AIPerf, GuideLLM,
inference-perf, vllm bench) against the same servers, the same traffic, in one run, each
section a table of every tool beside the truth. Peers are installed on first use, each in
a venv of its own (benchmarks/peers/venvs.py).

    python benchmarks/peers/side_by_side.py [--tools layergate,aiperf,...]
        [--sections errors,cost,...] [--json FILE] [each section's options]

Sections (each its own module in benchmarks/peers/, `SECTIONS` below):
- errors: TTFT / ITL / E2E percentiles against an echo server's own timeline;
- cost: client CPU per run and per request, over repeated pairs of runs (median, range),
  one table per load level: 16 users in a closed loop, and a flood of 64 against an
  instant server (`--cost-users`; 0 the open loop at `--cost-rate`);
- capacity: each tool's own capacity search on slot servers of known capacity, its ratio
  beside the true one.
- engines: TTFT / ITL / E2E percentiles against real engines (layergate's, llama.cpp), the
  tools beside each other and beside what each engine itself says.
- fidelity: each tool replaying one bursty timestamped trace, its schedule lag;
- limits: the highest constant rate each sustains against an instant server, its lag.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the checkout's rigs

from benchmarks.peers import capacity, cost, engines, errors, schedule  # noqa: E402
from benchmarks.peers.common import fresh  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Section:
    """One table of the side-by-side: what it measures (each tool of `tools`, in a work
    directory of its own) and how it prints what it measured."""

    measure: Callable[[argparse.Namespace, list[str], Path], Any]
    show: Callable[[Any], None]
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None


SECTIONS: dict[str, Section] = {
    "errors": Section(errors.measure_errors, errors.print_table, errors.add_arguments),
    "cost": Section(cost.measure, cost.print_tables, cost.add_arguments),
    "capacity": Section(capacity.measure, capacity.print_table, capacity.add_arguments),
    "engines": Section(engines.measure, engines.print_table, engines.add_arguments),
    "fidelity": Section(schedule.measure_fidelity, schedule.print_fidelity,
                        schedule.add_arguments),
    "limits": Section(schedule.measure_limits, schedule.print_limits),
}


def _names(value: str, known: dict[str, Any], option: str,
           parser: argparse.ArgumentParser) -> list[str]:
    names = value.split(",")
    # layergate@DIR: layergate from another checkout (errors.adapter_of)
    unknown = sorted(n for n in set(names) - set(known) if not n.startswith("layergate@"))
    if unknown:
        parser.error(f"{option}: unknown {unknown}; known: {', '.join(known)}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", default=",".join(errors.ADAPTERS))
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None,
                        help="also write every section's measurements here")
    for section in SECTIONS.values():
        if section.add_arguments:
            section.add_arguments(parser)
    args = parser.parse_args()
    # every tool runs as an installed one does: pip compiles a venv's bytecode at install,
    # and a checkout's is written by the first run (not when this is set)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    tools = _names(args.tools, errors.ADAPTERS, "--tools", parser)
    sections = _names(args.sections, SECTIONS, "--sections", parser)
    results = {}
    with tempfile.TemporaryDirectory(prefix="layergate-peers-") as tmp:
        for name in sections:
            results[name] = SECTIONS[name].measure(args, tools, fresh(Path(tmp) / name))
    for name in sections:
        SECTIONS[name].show(results[name])
        print()
    if args.json:
        args.json.write_text(json.dumps(
            {name: _plain(result) for name, result in results.items()},
            indent=2, default=str) + "\n")


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


if __name__ == "__main__":
    main()
