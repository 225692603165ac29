"""`layergate demo` end to end on one machine without Docker: three engines, a real
Prometheus, the bundled mix replayed through Locust, the repeat suite on a sample, the
gate and its reports, and the finished-run exporter — then where to look.

Every process it starts is stopped on the way out (Ctrl-C included): `NativeStack`.

The terminal gets one screen: the run directory, Prometheus' address, the replay's
progress, the leaderboard, the run's verdict and where to look; the rest goes to the files
it names (each candidate's checks in the reports, the verdict in plain words in
`summary.md`, Locust's statistics in `locust_stats.csv`, every process's log under
`stack/logs/`).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from layergate.exporters.atomic import write_json_atomic
from layergate.exporters.catalogue import BASELINE2, COMPLETE
from layergate.exporters.errors import InfrastructureError
from layergate.harness.rundir import RunDir
from layergate.harness.stack.demo_config import DemoConfig
from layergate.harness.stack.demo_traffic import demo_traffic, determinism_sample
from layergate.harness.stack.demo_words import plain_words
from layergate.harness.stack.native import NativeStack, RunningStack, StackConfig

if TYPE_CHECKING:
    from layergate.harness.gate import CandidateVerdict, FamilyResult

SCRAPE_S = 2.0
DETERMINISM_MAX_TOKENS = 24
# the gate's reports (harness/report/formats.py GATE) the demo writes into the run, by format
REPORT_FILES = {"html": "report.html", "json": "gate.json", "junit": "junit.xml",
                "markdown": "report.md"}

LINKS = {
    "finished-run figures (RER, termination, consistency)":
        '{__name__=~"layergate_run_(rer|rer_theoretical|termination_accuracy|exact_match)"}',
    "client TPOT p50 per arm": "histogram_quantile(0.5, sum by (arm, le) "
                               "(rate(layergate_replay_tpot_seconds_bucket[30s])))",
    "engine tokens/s per arm": "sum by (arm) (rate(layergate_generation_tokens_total[30s]))",
    "skip rate per arm": "sum by (arm) (rate(layergate_layers_skipped_total[30s])) / "
                         "(sum by (arm) (rate(layergate_layers_executed_total[30s])) + "
                         "sum by (arm) (rate(layergate_layers_skipped_total[30s])))",
}


class DemoError(InfrastructureError, RuntimeError):
    """The demo could not produce a verdict (a part failed to start or to run)."""


@dataclass(frozen=True)
class DemoOutcome:
    run_dir: Path
    verdict: str
    rollout: str
    reports: dict[str, Path]
    links: dict[str, str]
    timings: dict[str, float] = field(default_factory=dict)
    words: tuple[str, ...] = ()


class _Clock:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._start = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.timings[name] = round(now - self._start, 1)
        self._start = now


def _replay(config: DemoConfig, stack: RunningStack, run_dir: Path, console: Console) -> None:
    from layergate.harness.replay import ReplayConfig, run_replay

    traffic = demo_traffic(config.scenario, run_dir / "stack" / "demo-traffic.jsonl",
                           config.requests, config.max_tokens, config.rate)
    console.rule(f"replay of {config.scenario} to {', '.join(stack.arms)}")
    run_replay(ReplayConfig(out=run_dir, arms=stack.arms, traffic=traffic,
                            metrics_port=stack.replayer_metrics_port, timeout=config.timeout_s,
                            metrics_linger_s=3 * SCRAPE_S, progress=True))
    manifest = RunDir(run_dir).read_manifest()
    if manifest.status != COMPLETE:
        raise DemoError(f"the replay ended {manifest.status}: {'; '.join(manifest.notes)}")


def _determinism(config: DemoConfig, stack: RunningStack, run_dir: Path,
                 console: Console) -> None:
    from layergate.harness.determinism import DeterminismConfig, run_determinism

    run = RunDir(run_dir)
    sample = determinism_sample(run.traffic_path, run_dir / "stack" / "repeat.jsonl",
                                config.determinism_prompts,
                                min(config.max_tokens or DETERMINISM_MAX_TOKENS,
                                    DETERMINISM_MAX_TOKENS))
    targets = {arm: url for arm, url in stack.arms.items() if arm != BASELINE2}
    console.rule(f"determinism: {config.determinism_prompts} prompts x {config.repeats} "
                 f"repeats on {', '.join(targets)}")
    run_determinism(DeterminismConfig(targets=targets, traffic=sample,
                                      out=run.determinism.path, repeats=config.repeats))


def _gate_and_reports(config: DemoConfig, run_dir: Path,
                      console: Console) -> tuple[FamilyResult, dict[str, Path]]:
    from layergate.harness.gate import evaluate_family, load_policy
    from layergate.harness.report import formats
    from layergate.harness.report.family import print_brief
    from layergate.harness.rundir import load_run

    with console.status("computing figures (bootstrap CIs) and the gate's verdicts"):
        family = evaluate_family(load_run(run_dir), load_policy(config.gate_policy))
        reports = formats.GATE.write(family, {name: run_dir / file
                                              for name, file in REPORT_FILES.items()})
    print_brief(family, console)
    return family, reports


def _export(stack: RunningStack, run_dir: Path, config: DemoConfig,
            console: Console) -> dict[str, str]:
    policy = config.gate_policy or "default"  # a bundled name: `metrics --policy` resolves it
    with console.status("serving the run's figures to Prometheus"):
        stack.start_exporter(run_dir, ("--policy", str(policy)))
        if not stack.prometheus.wait_for("layergate_run_rer", timeout=10 * SCRAPE_S):
            console.print("[yellow]Prometheus has not scraped the run's figures yet[/]")
    return {name: stack.prometheus.graph_link(expr) for name, expr in LINKS.items()}


def run_demo(config: DemoConfig, console: Console | None = None) -> DemoOutcome:
    console = console or Console()
    clock = _Clock()
    run_dir = config.out / (f"demo-{time.strftime('%Y%m%d-%H%M%S')}-"
                            f"{'-'.join(config.candidates)}")
    (run_dir / "stack").mkdir(parents=True)
    write_json_atomic(run_dir / "stack" / "demo-config.json", config.to_json())
    console.rule(f"layergate demo: {', '.join(config.candidates)}")
    console.print(f"run directory: {run_dir}", soft_wrap=True, highlight=False)
    stack_config = StackConfig(engines=config.engines(), workdir=run_dir / "stack",
                               scrape_interval_s=SCRAPE_S)
    with ExitStack() as exits:
        with console.status(f"starting {len(stack_config.engines)} engines (the first start "
                            "converts the model) and Prometheus") as status:
            stack = exits.enter_context(NativeStack(stack_config, progress=status.update))
        clock.lap("start")
        console.print(f"Prometheus: {stack.prometheus.url} (its /targets: the engines)",
                      soft_wrap=True, highlight=False)
        _replay(config, stack, run_dir, console)
        clock.lap("replay")
        _determinism(config, stack, run_dir, console)
        clock.lap("determinism")
        family, reports = _gate_and_reports(config, run_dir, console)
        clock.lap("gate")
        links = _export(stack, run_dir, config, console)
        best = family.recommended or family.candidates[0]
        words = [line for c in family.candidates for line in _words(config, c)]
        if len(family.candidates) > 1:
            words += family.reasons()
        outcome = DemoOutcome(run_dir, family.verdict, best.result.rollout.label, reports,
                              links, clock.timings, tuple(words))
        _write_summary(outcome, best.result.rollout.reason, config.description)
        _where_to_look(outcome, config.hold, console)
        if config.hold:
            _hold(console)
    return outcome


def _words(config: DemoConfig, c: CandidateVerdict) -> list[str]:
    """One candidate's verdict in plain words (headed by its name among several)."""
    name = next(n for n in config.candidates if config.arm(n) == c.name)
    words = plain_words(c.result, name)
    if len(config.candidates) == 1:
        return words
    why = "; ".join(c.result.reasons[:2]) or "every gated figure cleared its threshold"
    return [f"{c.name}: {c.verdict.upper()} — {why}", *(f"  {w}" for w in words)]


def _where_to_look(outcome: DemoOutcome, held: bool, console: Console) -> None:
    """The files to read, one a line, unwrapped so that a path can be copied from any
    terminal width; with the stack `held` up, Prometheus' graphs of the run too."""
    timing = ", ".join(f"{k} {v:.0f}s" for k, v in outcome.timings.items())
    console.rule(f"where to look ({timing})")
    first = sorted(outcome.reports, key=lambda kind: kind != "summary")  # the plain words
    say = [f"{kind:9s} {outcome.reports[kind]}" for kind in first]
    say.append(f"{'locust':9s} {RunDir(outcome.run_dir).locust_stats}")
    say.append(f"{'logs':9s} {outcome.run_dir / 'stack' / 'logs'}")
    if not held:
        say.append("(the stack stopped with the demo: --hold keeps it up, with Prometheus' "
                   "graphs of the run)")
    else:
        say += [f"{name}: {url}" for name, url in outcome.links.items()]
    for line in say:
        console.print(line, soft_wrap=True, highlight=False, markup=False)


def _write_summary(outcome: DemoOutcome, rollout_reason: str, candidates: str) -> None:
    """The verdict in plain words next to the reports (`summary.md`)."""
    path = outcome.run_dir / "summary.md"
    timing = ", ".join(f"{k} {v:.0f} s" for k, v in outcome.timings.items())
    text = [f"# layergate demo: {outcome.verdict}", "", f"Candidates: {candidates}.", "",
            f"Rollout stage: **{outcome.rollout}** ({rollout_reason}).", "",
            *outcome.words, "", f"Timings: {timing}.", ""]
    path.write_text("\n".join(text))
    outcome.reports["summary"] = path


def _hold(console: Console) -> None:
    console.print("the stack stays up: Ctrl-C stops every process the demo started")
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        console.print("stopping")
