"""`layergate watch --serve --state` (the real CLI, one process per scenario) driven by the
stand-in controllers of tests/support/controllers.py with their upstream timing, against
a real Prometheus scraping vLLM stand-ins whose traffic follows the controller: Flagger's
weight is the canary's share of the requests, Argo's setWeight is whole pods as Argo
rounds them (1 % and 5 % of 10 replicas: 1 pod of 11).

Every controller wait runs at SCALE = 1/30 of its production length: Flagger's 1-minute
`interval` and Argo's 60 s measurement `interval` are two seconds (the watch's window),
the retry waits 1, 2, 4, 8, 16, 30 s are 33 ms to 1 s, the 10 s per-attempt timeout 0.33 s,
Argo's 10 s error retry 0.33 s. The watch's own settings are the test's (2 s windows over a
0.5 s scrape). A restarting watch is not scaled: it takes its real second or two, about
the scaled retries' two seconds in all.

The eleven scenarios of issue 35 run at once, each on its own pair of arms, in one module
fixture, each from when its watch answers, the longest first (the whole run is about as long
as the longest); each test asserts one of them and
prints its figures. Flagger steps 5, 25, 50 (not the manifest's 1: 1 % of this traffic is
too few requests a window to decide within a few windows); Argo runs the shipped Rollout.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import yaml

from layergate.harness.processes import free_port, layergate_command
from layergate.harness.stack.processes import ProcessSet
from layergate.harness.stack.prometheus import start_prometheus
from layergate.harness.stack.prometheus_config import ScrapeTargets
from layergate.harness.watch.stages import StagePlan
from tests.support.controllers import ArgoRollout, FakeFlagger, FlaggerWeight, Ticker
from tests.support.vllm_exporter import FakeVllm
from tests.test_rollout_manifests import DIR
from tests.test_watch_prometheus import POLICY

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

SCALE = 1 / 30
SCRAPE_S = 0.5
TOTAL_RPS = 200  # both arms together
FLAGGER_STEPS = (5, 25, 50)
SLOW = 2.0  # a bad candidate's latency factor
DEADLINE_S = 150  # per scenario, wall clock

CANARY_SPEC = next(d for d in yaml.safe_load_all((DIR / "flagger.yaml").read_text())
                   if d["kind"] == "Canary")["spec"]["analysis"]
HOOK = {h["type"]: h for h in CANARY_SPEC["webhooks"]}
ARGO = {d["kind"]: d for d in yaml.safe_load_all((DIR / "argo-rollouts.yaml").read_text())}


def _seconds(text: str) -> float:
    return float(text[:-1]) * {"s": 1, "m": 60}[text[-1]]


INTERVAL_S = _seconds(CANARY_SPEC["interval"]) * SCALE
WINDOW_S = INTERVAL_S  # the watch's --window is Flagger's interval (watch.yaml)


@dataclass
class Arms:
    """One scenario's baseline and candidate, and its Flagger weight gauge."""

    name: str
    stable: FakeVllm
    canary: FakeVllm
    weight: FlaggerWeight

    def share(self, percent: float) -> None:
        self.canary.rate = TOTAL_RPS * percent / 100
        self.stable.rate = TOTAL_RPS - self.canary.rate

    def close(self) -> None:
        self.stable.__exit__()
        self.canary.__exit__()
        self.weight.close()

    def jobs(self) -> list[dict]:
        return [{"job_name": f"{role}-{self.name}", "static_configs": [{"targets": [t]}]}
                for role, t in (("stable", self.stable.target), ("canary", self.canary.target),
                                ("flagger", self.weight.target))]


class Watch:
    """`layergate watch --serve --state` for one scenario; restartable."""

    def __init__(self, prometheus: str, arms: Arms, work: Path, stages: str,
                 *extra: str) -> None:
        self.port, self.state, self.log = free_port(), work / "state.json", work / "watch.log"
        self.cmd = layergate_command(
            "watch", "--prometheus", prometheus, "--engine", "vllm",
            "--baseline", f'job="stable-{arms.name}"', "--candidate",
            f'job="canary-{arms.name}"', "--policy", str(work.parent / "policy.yaml"),
            "--stages", stages, "--window", f"{WINDOW_S:g}s", "--lag", "0.6s",
            "--min-windows", "4", "--max-windows", "40",
            # a loaded 2-core machine can miss the scrapes for a few seconds: not the case
            # under test
            "--no-data-windows", "10",
            "--serve", str(self.port), "--state", str(self.state), *extra)
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.kills = 0

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdout=self.log.open("a"),
                                     stderr=subprocess.STDOUT)

    def ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.status() is not None:
                return
            assert self.proc is not None and self.proc.poll() is None, self.tail()
            time.sleep(0.05)
        raise AssertionError(f"the watch never answered:\n{self.tail()}")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.kills += 1

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def status(self) -> dict | None:
        try:
            return httpx.get(f"{self.url}/status", timeout=2).json()
        except (httpx.HTTPError, ValueError):
            return None

    def journal(self) -> dict:
        return json.loads(self.state.read_text())

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text()[-chars:] if self.log.exists() else ""


def _attempt(url: str) -> Callable[[str, dict, float], tuple[int, float | None]]:
    """One webhook POST, as Go's client makes it: a new connection, a per-attempt timeout."""
    def attempt(hook: str, payload: dict, timeout: float) -> tuple[int, float | None]:
        try:
            got = httpx.post(f"{url}/flagger/{hook}", json=payload, timeout=timeout)
        except httpx.TimeoutException as exc:  # retried
            raise TimeoutError(str(exc)) from exc
        except httpx.HTTPError as exc:  # refused, reset: retried
            raise OSError(str(exc)) from exc
        after = got.headers.get("retry-after", "")
        return got.status_code, float(after) if after.isdigit() else None
    return attempt


def _get(port: int) -> Callable[[str, float], tuple[int, bytes]]:
    def get(url: str, timeout: float) -> tuple[int, bytes]:
        url = url.replace("layergate-watch.llm.svc:9105", f"127.0.0.1:{port}")
        try:
            got = httpx.get(url, timeout=timeout)
        except httpx.HTTPError as exc:
            raise OSError(str(exc)) from exc
        return got.status_code, got.content
    return get


@dataclass
class Outcome:
    controller: FakeFlagger | ArgoRollout
    journal: dict
    status: dict | None
    seconds: float
    log: str
    marks: dict[str, object] = field(default_factory=dict)  # wall times, runs
    dropped: int = 0
    kills: int = 0


@dataclass
class Ctx:
    arms: Arms
    watch: Watch  # started and answering


def _flagger(ctx: Ctx, during: Callable[[FakeFlagger, Watch, dict], None] | None = None
             ) -> Outcome:
    """A Flagger Canary (stepWeights FLAGGER_STEPS, the manifest's threshold, retries and
    timeouts) on its free-running ticker against a watch; `during` is polled meanwhile."""
    arms, watch = ctx.arms, ctx.watch
    marks: dict[str, float] = {}

    def on_weight(w: int) -> None:
        arms.share(w)
        arms.weight.set(w)
        marks.setdefault(f"weight {w}", time.time())

    hook = HOOK["rollout"]
    f = FakeFlagger(_attempt(watch.url), FLAGGER_STEPS, threshold=CANARY_SPEC["threshold"],
                    retries=hook["retries"], timeout=_seconds(hook["timeout"]), scale=SCALE,
                    on_weight=on_weight)
    on_weight(0)
    t0 = time.monotonic()
    ticker = Ticker(f.tick, INTERVAL_S, until=lambda: f.done)
    ticker.start()
    try:
        while not f.done and time.monotonic() - t0 < DEADLINE_S and ticker.error is None:
            if during is not None:
                during(f, watch, marks)
            time.sleep(0.05)
    finally:
        ticker.stop.set()
        ticker.join(10)
        status = watch.status()
        watch.stop()
    if ticker.error is not None:
        raise ticker.error
    return Outcome(f, watch.journal(), status, time.monotonic() - t0, watch.tail(10**7),
                   marks, ticker.dropped, watch.kills)


def _argo(ctx: Ctx, revisions: tuple[tuple[str, float], ...]) -> Outcome:
    """The shipped Rollout and AnalysisTemplate, once per (pod-template hash, candidate
    slowdown), through one long-running watch (the shipped watch.yaml's stages)."""
    arms, watch = ctx.arms, ctx.watch
    rollout = ArgoRollout(ARGO["Rollout"]["spec"]["strategy"]["canary"]["steps"],
                          ARGO["AnalysisTemplate"]["spec"], _get(watch.port),
                          replicas=ARGO["Rollout"]["spec"]["replicas"], scale=SCALE,
                          on_pods=lambda c, s: arms.share(100 * c / (c + s)))
    t0 = time.monotonic()
    marks: dict[str, float] = {}
    runs: list = []
    try:
        for k, (rev, slowdown) in enumerate(revisions):
            if k:
                rollout.new_revision(rev)
            arms.canary.slowdown = slowdown
            rollout.run()
            marks[f"{rev} {rollout.phase}"] = time.monotonic() - t0
            runs.append((rev, rollout.phase, list(rollout.runs), len(rollout.measurements)))
        status = watch.status()
    finally:
        watch.stop()
    out = Outcome(rollout, watch.journal(), status, time.monotonic() - t0, watch.tail(10**7),
                  marks)
    out.marks.update({f"runs {i}": r for i, r in enumerate(runs)})
    return out


# --- the scenarios --------------------------------------------------------------------

def good(ctx: Ctx) -> Outcome:
    return _flagger(ctx)


def bad_at_first_step(ctx: Ctx) -> Outcome:
    ctx.arms.canary.slowdown = SLOW
    return _flagger(ctx)


def turns_bad_at_25(ctx: Ctx) -> Outcome:
    def during(f: FakeFlagger, _w: Watch, _m: dict) -> None:
        if f.weight == 25:
            ctx.arms.canary.slowdown = SLOW
    return _flagger(ctx, during)


def _killer(hold_ticks: bool) -> Callable[[FakeFlagger, Watch, dict], None]:
    """SIGKILL the watch twice mid-stage (the 2nd window of stages 5 and 25). With
    `hold_ticks`, between Flagger's ticks: its lock is held from the kill until the new
    watch answers, so no call runs into it (the ticks it misses meanwhile are dropped).
    Without, the watch stays down for a tick and the calls run into it."""
    done: set[float] = set()

    def during(f: FakeFlagger, w: Watch, marks: dict) -> None:
        s = w.status()
        if s is None or s["verdict"] != "pending" or s["stage"] in done \
                or s["stage"] not in (5, 25) or s["windows"] != 2:
            return
        done.add(s["stage"])
        if hold_ticks:
            with f.lock:
                w.kill()
                w.start()
                w.ready()
        else:
            w.kill()
            time.sleep(INTERVAL_S * 1.5)  # a tick or two find it down
            w.start()
            w.ready()
        marks[f"kill {len(done)}"] = time.time()
    return during


def kills_between_calls(ctx: Ctx) -> Outcome:
    return _flagger(ctx, _killer(hold_ticks=True))


def kills_into_calls(ctx: Ctx) -> Outcome:
    return _flagger(ctx, _killer(hold_ticks=False))


def new_checksum_at_25(ctx: Ctx) -> Outcome:
    def during(f: FakeFlagger, _w: Watch, marks: dict) -> None:
        if f.weight == 25 and f.checksum == "rev-1":
            f.new_revision("rev-2")
            marks["rev-2"] = time.time()
    return _flagger(ctx, during)


def _suspender() -> Callable[[FakeFlagger, Watch, dict], None]:
    """spec.suspend at 25 % for as long as the watch takes to pass stage 25 and then
    (before issue 35) stage 50 on windows served at 25 %; then resumed."""
    def during(f: FakeFlagger, w: Watch, marks: dict) -> None:
        if f.weight == 25 and "suspended" not in marks:
            f.suspend = True
            marks["suspended"] = time.time()
        if f.suspend and "resumed" not in marks:
            s = w.status()
            long_enough = time.time() - marks["suspended"] > 12 * WINDOW_S
            if long_enough or (s is not None and (s["verdict"] != "pending"
                                                  or s.get("held_windows", 0) >= 5)):
                f.suspend = False
                marks["resumed"] = time.time()
    return during


def suspended_at_25(ctx: Ctx) -> Outcome:
    return _flagger(ctx, _suspender())


def suspended_at_25_controller_weight(ctx: Ctx) -> Outcome:  # --controller-weight
    return _flagger(ctx, _suspender())


def argo_good(ctx: Ctx) -> Outcome:
    return _argo(ctx, (("rev-1", 1.0),))


def argo_bad(ctx: Ctx) -> Outcome:
    return _argo(ctx, (("rev-1", SLOW),))


def argo_second_revision(ctx: Ctx) -> Outcome:
    return _argo(ctx, (("rev-1", 1.0), ("rev-2", SLOW)))


SCENARIOS = (good, bad_at_first_step, turns_bad_at_25, kills_between_calls,
             kills_into_calls, new_checksum_at_25, suspended_at_25,
             suspended_at_25_controller_weight, argo_good, argo_bad, argo_second_revision)
# the longest, whose watches start first (each scenario starts once its own watch answers):
# five Flagger stages, two Argo rollouts, four Argo analyses, a suspension
LONGEST = (new_checksum_at_25, argo_second_revision, argo_good, suspended_at_25)
FLAGGER_STAGES, ARGO_STAGES = "5,25,50,100", "1,5,25,50,100"  # ARGO: watch.yaml's


def _watch_args(scenario: Callable, arms: Arms) -> tuple[str, ...]:
    if scenario.__name__.startswith("argo"):
        return (ARGO_STAGES,)
    if scenario is suspended_at_25_controller_weight:
        return (FLAGGER_STAGES, "--controller-weight",
                f'flagger_canary_weight{{workload="{arms.name}",namespace="llm"}}')
    return (FLAGGER_STAGES,)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, prometheus_bin) -> Iterator[dict[str, Outcome | BaseException]]:
    work = tmp_path_factory.mktemp("watch-scenarios")
    (work / "policy.yaml").write_text(yaml.safe_dump(POLICY))
    procs = ProcessSet(work / "logs")
    arms: list[Arms] = []
    watches: list[Watch] = []
    try:
        for i, s in enumerate(SCENARIOS):
            name = s.__name__.replace("_", "-")
            a = Arms(name, FakeVllm(f"llama-stable-{i}", seed=100 + i),
                     FakeVllm(f"llama-canary-{i}", seed=200 + i), FlaggerWeight(name))
            a.share(0)
            a.stable.__enter__()
            a.canary.__enter__()
            arms.append(a)
        jobs = tuple(j for a in arms for j in a.jobs())
        prom = start_prometheus(procs, ScrapeTargets(engines={}, scrape_interval_s=SCRAPE_S,
                                                     extra_jobs=jobs), work / "prom")
        assert prom.wait_for(f"count(up == 1) == {len(jobs)}", timeout=60), \
            "Prometheus never scraped every stand-in"
        for scenario, a in zip(SCENARIOS, arms, strict=True):
            (work / a.name).mkdir()
            watches.append(Watch(prom.url, a, work / a.name, *_watch_args(scenario, a)))
        results: dict[str, Outcome | BaseException] = {}

        def run(i: int) -> None:
            scenario = SCENARIOS[i]
            try:
                results[scenario.__name__] = scenario(Ctx(arms[i], watches[i]))
            except BaseException as exc:  # reported by the scenario's own test
                results[scenario.__name__] = exc
        order = sorted(range(len(SCENARIOS)), key=lambda i: SCENARIOS[i] not in LONGEST)
        with ThreadPoolExecutor(len(SCENARIOS)) as pool:
            # started three at a time: eleven at once would starve the scrapes on two cores
            for batch in range(0, len(order), 3):
                for i in order[batch:batch + 3]:
                    watches[i].start()
                for i in order[batch:batch + 3]:
                    watches[i].ready()
                    pool.submit(run, i)
        yield results
    finally:
        for w in watches:
            w.stop()
        # at once: each server's shutdown waits up to half a second for its loop to notice
        with ThreadPoolExecutor(max(len(arms), 1)) as pool:
            list(pool.map(Arms.close, arms))
        procs.close()


def _got(outcomes: dict, name: str) -> Outcome:
    got = outcomes[name]
    if isinstance(got, BaseException):
        raise got
    return got


def _answers(o: Outcome, hook: str) -> list[tuple[int, str]]:
    return [(a["code"], a["message"]) for a in o.journal["answers"] if a.get("hook") == hook]


def _report(name: str, o: Outcome) -> None:
    c = o.controller
    if isinstance(c, FakeFlagger):
        print(f"\n{name}: {c.phase} ({c.rolled_back_by or 'promoted'}) in {o.seconds:.1f} s; "
              f"steps {c.steps}; failed checks {c.failed_checks}; ticks {c.ticks} "
              f"(suspended {c.skipped}, dropped {o.dropped}); webhook calls {len(c.calls)}, "
              f"attempts {c.attempts}, refused {c.refused}, timed out {c.timeouts}; grants "
              f"{len(o.journal['grants'])} {[g['weight'] for g in o.journal['grants']]}; "
              f"kills {o.kills}; epoch {o.journal['epoch']}")
    else:
        print(f"\n{name}: {c.phase} in {o.seconds:.1f} s; "
              + "; ".join(f"{k}: {v}" for k, v in o.marks.items())
              + f"; revision {o.journal['revision']}, epoch {o.journal['epoch']}")


def _promoted_once_through(o: Outcome) -> FakeFlagger:
    f = o.controller
    assert isinstance(f, FakeFlagger)
    assert f.phase == "Succeeded", (f.phase, f.rolled_back_by, f.calls[-12:], o.log[-3000:])
    assert f.steps[-3:] == [(0, 5), (5, 25), (25, 50)], f.steps
    assert ("confirm-promotion", 200) in f.calls
    assert o.status is not None and o.status["verdict"] == "pass"
    return f


def _counted_after(o: Outcome, stage: int) -> None:
    """Stage `stage` passed on windows all read after Flagger stepped to it: the pass
    came at least 3 windows after the step (4 are needed; one may straddle the step)."""
    passed_at = next(w["end"] for w in reversed(o.journal["inputs"]) if "baseline" in w)
    stepped = o.marks[f"weight {stage}"]
    assert passed_at >= stepped + 3 * WINDOW_S, (passed_at - stepped, o.log[-3000:])


def test_flagger_promotes_identical_arms(outcomes) -> None:
    o = _got(outcomes, "good")
    _report("good", o)
    f = _promoted_once_through(o)
    assert f.steps == [(0, 5), (5, 25), (25, 50)] and f.failed_checks == 0


def test_flagger_rolls_back_a_bad_candidate_at_the_first_step(outcomes) -> None:
    o = _got(outcomes, "bad_at_first_step")
    _report("bad_at_first_step", o)
    f = o.controller
    assert f.phase == "Failed" and f.rolled_back_by == "rollback webhook", f.calls[-8:]
    # a failed check only when the verdict came between a tick's rollback and rollout calls
    assert f.steps == [(0, 5)] and f.failed_checks <= 1
    assert o.journal["verdict"] == "fail"


def test_flagger_rolls_back_a_candidate_that_turns_bad_at_25(outcomes) -> None:
    o = _got(outcomes, "turns_bad_at_25")
    _report("turns_bad_at_25", o)
    f = o.controller
    assert f.phase == "Failed" and f.rolled_back_by == "rollback webhook", f.calls[-8:]
    assert f.steps == [(0, 5), (5, 25)] and f.failed_checks <= 1


@pytest.mark.parametrize("name", ["kills_between_calls", "kills_into_calls"])
def test_two_sigkills_give_the_same_promotion_one_step_each(outcomes, name: str) -> None:
    o = _got(outcomes, name)
    _report(name, o)
    f = _promoted_once_through(o)
    assert o.kills == 2 and o.log.count("resumed from") == 2
    assert f.steps == [(0, 5), (5, 25), (25, 50)]  # each step once: none twice, none lost
    assert f.failed_checks < f.threshold
    if name == "kills_into_calls":
        assert f.refused > 0  # calls did find the watch down, and were retried
    else:
        assert f.refused == 0  # (a timeout under load may still cost an attempt)


def test_a_new_checksum_at_25_starts_the_analysis_afresh(outcomes) -> None:
    o = _got(outcomes, "new_checksum_at_25")
    _report("new_checksum_at_25", o)
    f = _promoted_once_through(o)
    assert f.steps == [(0, 5), (5, 25), (0, 5), (5, 25), (25, 50)]
    events = [(e["event"], e["checksum"]) for e in o.journal["events"]]
    assert events == [("adopted", "rev-1"), ("reset", "rev-2")]
    # rev-2's grants (observed shares, read as stages): from 0, 5, 25 and at 50, none
    # carried over from rev-1
    plan = StagePlan((5, 25, 50, 100))
    weights = [plan.nearest(g["weight"]) for g in o.journal["grants"] if g["epoch"] == 1]
    assert sorted(set(weights)) == [0, 5, 25, 50], weights


@pytest.mark.parametrize("name", ["suspended_at_25", "suspended_at_25_controller_weight"])
def test_a_suspended_flagger_resumes_to_promotion_and_stage_50_is_judged_at_50(
        outcomes, name: str) -> None:
    o = _got(outcomes, name)
    _report(name, o)
    f = _promoted_once_through(o)
    assert f.skipped > 0 and f.steps == [(0, 5), (5, 25), (25, 50)]
    _counted_after(o, 50)
    waits = [m for c, m in _answers(o, "confirm-traffic-increase")
             if c == 403 and "after the last step was granted" in m]
    # it makes progress: at most a tick or two per grant wait for the window after it
    assert len(waits) <= 2 * len(o.journal["grants"]), waits
    print(f"  resumed {o.marks['resumed'] - o.marks['suspended']:.1f} s after the suspend; "
          f"stage 50 passed {o.journal['inputs'][-1]['end'] - o.marks['weight 50']:.1f} s "
          f"after Flagger stepped to 50; 'newer reading' waits {len(waits)}")


def test_argo_promotes_identical_arms(outcomes) -> None:
    o = _got(outcomes, "argo_good")
    _report("argo_good", o)
    r = o.controller
    assert r.phase == "Healthy", (r.runs, o.log[-3000:])
    assert r.runs == [(1.0, "Successful"), (5.0, "Successful"), (25.0, "Successful"),
                      (50.0, "Successful")]


def test_argo_aborts_a_bad_candidate_at_the_first_step(outcomes) -> None:
    o = _got(outcomes, "argo_bad")
    _report("argo_bad", o)
    r = o.controller
    assert r.phase == "Degraded" and r.runs == [(1.0, "Failed")], (r.runs, o.log[-3000:])


def test_argo_analyses_a_second_revision_afresh(outcomes) -> None:
    o = _got(outcomes, "argo_second_revision")
    _report("argo_second_revision", o)
    r = o.controller
    first = o.marks["runs 0"]
    assert first[1] == "Healthy", first
    assert r.phase == "Degraded" and r.runs == [(1.0, "Failed")], (r.runs, o.log[-3000:])
    events = [(e["event"], e["checksum"]) for e in o.journal["events"]]
    assert events == [("adopted", "rev-1"), ("reset", "rev-2")]
    # the first answers for rev-2 were not pass: it was judged on its own windows
    rev2 = [a["stage_verdict"] for a in o.journal["answers"] if a.get("revision") == "rev-2"]
    assert rev2[0] == "pending" and "pass" not in rev2, rev2
