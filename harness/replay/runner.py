"""`run_replay(config) -> run_dir`: prepare the run directory, launch Locust in its own
processes on `harness/replay/locustfile.py`, follow it, and close the run.

Locust monkey-patches the standard library on import, so this process never imports it.
First every arm must answer (`preflight.py`): one that does not is an error and nothing is
sent. It starts Locust's master (`python -m locust --master`, its web UI on --web-port, or
on a free loopback port when none is given: Locust's headless mode would start the test by
itself, counting workers layergate refuses) with the plan in an environment variable and the
work in the store's queue, then `--processes` local workers (`workers.worker_command`, each
in an empty temporary directory); `--expect-workers` more may join from other hosts. The
master starts the run once that many *accepted* workers are connected (or gives up after
`--worker-wait`: exit 4, naming who joined and who was refused), serves them the work over
Locust's messages and writes their results (`master.py`). This process tails the store for
the progress bar and the live metrics, and stops Locust (SIGTERM; the master tells the
workers to quit) once every queued record is done, or the circuit breaker (`breaker.py`)
found an arm down (the run is then `interrupted`, for `--resume`). Locust's own stats go to
`locust_stats.csv` and its log to `locust.log` in the run directory. A record whose lease
runs out (its worker died) is put back in the queue and sent again.

`should_stop` (optional): a predicate the run asks with the results so far, every
STOP_CHECK_S or less often when it is slow; the results are read incrementally (each check
reads only the rows written since the last; a check with none skips the question). Once it
answers yes (True, or the reason as a string) the queue hands out nothing more, the records
in flight finish, and the run ends `complete` with `stopped_early` and the reason in its
manifest (e.g. a sequential test that has decided). It may also answer a `Stop`
(harness/stops.py) naming arms to send nothing more (a candidate whose verdict is known):
the queue's rows not yet handed out lose those arms, the others go on, and the manifest's
`arms_stopped` says where each stopped at once (a resume after a kill sends them nothing;
their missing answers are neither missing nor errors). A run of more than BIG_RUN records
notes its footprint: the peak memory of Locust's master and the size of the store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from layergate.exporters import tokenizer
from layergate.exporters.catalogue import COMPLETE, INTERRUPTED, RUNNING, RunStatus
from layergate.exporters.figures.schedule_lag import schedule_lag
from layergate.exporters.metrics_server import serve_metrics
from layergate.exporters.records import ArmResult
from layergate.exporters.traffic import TrafficRecord
from layergate.harness.interrupts import raise_if_interrupted
from layergate.harness.manifest import Manifest, now_iso
from layergate.harness.processes import ManagedProcess, free_port, spawn
from layergate.harness.replay import auth
from layergate.harness.replay.breaker import CircuitBreaker
from layergate.harness.replay.channel import parse_address
from layergate.harness.replay.config import ConfigError, ReplayConfig
from layergate.harness.replay.errors import ArmDown, WorkersShort
from layergate.harness.replay.live import ReplayMetrics
from layergate.harness.replay.own import OWN, RECORDED
from layergate.harness.replay.plan import load_records, pending_conversations, pending_items
from layergate.harness.replay.preflight import check_arms
from layergate.harness.replay.scrape import scrape_arms
from layergate.harness.replay.work import WorkerPlan
from layergate.harness.replay.workers import LOCUSTFILE, connect_host, worker_command, worker_env
from layergate.harness.rundir import RunDir, RunDirError
from layergate.harness.stops import Stop
from layergate.harness.store import ResultStore, WorkQueue
from layergate.harness.store.tail import Latest, StoreTail

POLL_S = 0.25
RELEASE_S = 5.0  # how often expired leases go back to the queue (a write: not every poll)
# how often `should_stop` is asked: at most every STOP_CHECK_S, and no more often than keeps
# its cost under 1 / STOP_CHECK_SHARE of the time (a decided run stops within a few requests)
STOP_CHECK_S = 0.5
STOP_CHECK_SHARE = 5
BIG_RUN = 100_000  # records: a run this big notes its memory and store size
STATS_SETTLE_S = 1.0  # > the ack round trip + a worker's STATS_S (channel_work.py)

# the results so far -> falsy to go on, True or the reason (a string) to stop early, or a
# Stop: arms to send nothing more, and maybe the reason to stop the run
StopHook = Callable[[Sequence[ArmResult]], "bool | str | Stop | None"]
# an arm to send nothing more, and why (the runner records it)
StopArm = Callable[[str, str], None]


LOOPBACK = ("127.", "localhost", "::1")


def _master_address(config: ReplayConfig) -> tuple[str, int]:
    if config.master_bind is not None:
        return parse_address(config.master_bind, "--master-bind")
    return "127.0.0.1", free_port()  # local workers only: any free port on loopback


def _locust_cmd(config: ReplayConfig, run: RunDir, host: str, port: int) -> list[str]:
    users = str(config.locust_users)
    # spawn users fast (100/s, Locust warns above): the schedule, not a ramp-up, sends
    rate = str(max(config.locust_users, 100))
    # never --headless: the master (master.py) starts the test once its accepted workers
    # are in; the web UI then only shows it, on loopback unless --web-port says otherwise
    web = (config.bind_host, config.web_port) if config.web_port else ("127.0.0.1", free_port())
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "-u", users, "-r", rate,
            "--host", next(iter(config.arms.values())), "--csv", str(run.locust_csv_prefix),
            "--loglevel", "WARNING", "--logfile", str(run.locust_log),
            "--master", "--master-bind-host", host, "--master-bind-port", str(port),
            "--enable-rebalancing", "--web-host", web[0], "--web-port", str(web[1])]


def _start_locust(config: ReplayConfig, run: RunDir, host: str, port: int,
                  token: dict[str, str]) -> ManagedProcess:
    plan = WorkerPlan(arms=config.arms, models=config.models, timeout=config.timeout,
                      closed_loop=config.closed_loop, users=config.locust_users,
                      run_dir=str(run.path), top_logprobs=config.logprobs,
                      tokenizers=tokenizer.for_arms(config.arms, config.models, config.tokenizer),
                      max_clock_skew_s=config.max_clock_skew, expect_workers=config.workers,
                      worker_wait_s=float(config.worker_wait),
                      tool_simulator=config.tool_simulator, reasoning_back=config.own_reasoning)
    env = {k: v for k, v in os.environ.items() if k != auth.TOKEN_ENV}
    return _spawn("locust-master", _locust_cmd(config, run, host, port),
                  {**env, **plan.to_env(), **token}, run)


def _start_local_workers(config: ReplayConfig, run: RunDir, host: str, port: int,
                         home: Path, token: dict[str, str]) -> list[ManagedProcess]:
    """`--processes` workers next to the master, each in its own empty directory: they
    reach the run only through the master, as workers on other hosts do."""
    procs = []
    for i in range(config.processes):
        cwd = home / f"worker-{i}"
        cwd.mkdir()
        procs.append(_spawn(f"locust-worker-{i}", worker_command(connect_host(host), port),
                            {**worker_env(os.environ, None), **token}, run, cwd))
    return procs


def _token_env(config: ReplayConfig, host: str) -> dict[str, str]:
    """The worker token for Locust's processes' environment ({} without one); warns when
    the master listens beyond loopback with none."""
    try:
        token = auth.token_from(config.worker_token_file, os.environ)
    except auth.TokenError as exc:
        raise ConfigError(str(exc)) from exc
    if token is None and not host.startswith(LOOPBACK):
        # a warning, so it shows with --no-progress too
        Console(stderr=True, soft_wrap=True).print(
            f"warning: the master listens on {host} with no worker token: any process that "
            "reaches its port can join as a worker, receive the traffic's records (prompts) "
            "and send results. Give --worker-token-file (and keep the network private: the "
            "channel is not encrypted)")
    return {auth.TOKEN_ENV: token} if token else {}


def _spawn(name: str, cmd: list[str], env: dict[str, str], run: RunDir,
           cwd: Path | None = None) -> ManagedProcess:
    # own session: a Ctrl-C in the terminal reaches only us, and we stop Locust in order;
    # if we die without stopping it, the kernel sends it SIGTERM
    return spawn(name, cmd, run.locust_output, env=env, cwd=cwd, append=True,
                 die_with_parent=True)


def _open_manifest(config: ReplayConfig, run: RunDir, count: int,
                   previous: Manifest | None) -> Manifest:
    traffic = run.traffic_summary(count, str(config.traffic or config.scenario or ""))
    if previous is not None:
        # keep the original config; each resume appends its own (arms may have moved)
        resumes = [*previous.config.get("resumes", []), {**config.to_json(), "at": now_iso()}]
        return Manifest(previous.id, "replay", RUNNING, previous.created,
                        {**previous.config, "resumes": resumes}, config.arms,
                        {**previous.traffic, **traffic, "source": previous.traffic.get("source")},
                        notes=previous.notes, arms_stopped=previous.arms_stopped,
                        in_flight_limit=config.in_flight_limit)
    return Manifest.new("replay", config.to_json(), config.arms, traffic,
                        config.in_flight_limit)


@dataclasses.dataclass(frozen=True)
class _Prepared:
    """A run about to start: its directory (not yet written), its records, the manifest of
    the run a resume fills, and where Locust's processes meet."""

    run: RunDir
    records: list[TrafficRecord]
    previous: Manifest | None  # None: a new run
    address: tuple[str, int]  # where Locust's master listens
    token: dict[str, str]  # the worker token for Locust's processes' environment

    @property
    def resuming(self) -> bool:
        return self.previous is not None


def _prepare(config: ReplayConfig) -> _Prepared:
    """Every usage error before anything is sent or written. `--resume` is start-or-resume:
    a directory without a manifest starts a fresh run (a first `docker compose up` on an
    empty volume), one with a manifest is filled."""
    address = _master_address(config)
    token = _token_env(config, address[0])
    run = RunDir(config.out)
    if run.exists() and not config.resume:
        raise ConfigError(f"{run.path} already holds a run: pass --resume to fill it, "
                          "or choose another --out")
    if run.exists():
        return _Prepared(run, list(run.read_traffic().records), run.read_manifest(),
                         address, token)
    if config.traffic is None and config.scenario is None:
        raise ConfigError(f"--resume: {run.path} is not a run directory (no manifest.json) "
                          "and there is nothing to start it from: give --traffic or --scenario")
    return _Prepared(run, load_records(config), None, address, token)


@dataclasses.dataclass
class _Ledger:
    """What the run's manifest says as the run goes: notes and stopped arms accumulate
    here, and `write` is the one writer of manifest.json once the run is open."""

    run: RunDir
    manifest: Manifest  # as opened: `running`
    notes: list[str]
    stopped: dict[str, dict]  # Manifest.arms_stopped: a stop before a resume stays

    @classmethod
    def open(cls, run: RunDir, manifest: Manifest) -> _Ledger:
        ledger = cls(run, manifest, list(manifest.notes), dict(manifest.arms_stopped))
        ledger.write()
        return ledger

    def write(self, status: RunStatus | None = None,
              counts: dict[str, dict[str, int]] | None = None, **fields: object) -> None:
        """The manifest with the notes and stopped arms so far, `fields` and, to end the
        run, its `status` and `counts`."""
        manifest = dataclasses.replace(self.manifest, notes=tuple(self.notes),
                                       arms_stopped=dict(self.stopped), **fields)
        if status is not None:
            manifest = manifest.with_status(status, counts or {})
        self.run.write_manifest(manifest)

    def arm_stopped(self, arm: str, reason: str, first: str | None, unsent: int) -> None:
        self.stopped[arm] = {"reason": reason, "first_unsent": first, "unsent": unsent,
                             "at": now_iso()}
        self.notes.append(f"{arm}: sent nothing more from request {first} on ({unsent} "
                          f"record(s) left): {reason}" if first else
                          f"{arm}: stopped with nothing left to send: {reason}")
        self.write()  # said at once, so a resume after a kill sends it nothing either


@dataclasses.dataclass(frozen=True)
class _ArmStopper:
    """The runner's `StopArm`: an arm of the run the stop hook names loses the queue's rows
    not yet handed out, once."""

    ledger: _Ledger
    queue: WorkQueue
    arms: dict[str, str]

    def __call__(self, arm: str, reason: str) -> None:
        if arm in self.ledger.stopped or arm not in self.arms:
            return
        unsent, first = self.queue.drop_arm(arm)
        self.ledger.arm_stopped(arm, reason, first, unsent)


@dataclasses.dataclass
class _Outcome:
    finished: bool = False  # every queued record done (or drained after a stop)
    stop_reason: str | None = None
    broken: str | None = None  # the circuit breaker's reason: the run stays interrupted


@dataclasses.dataclass(frozen=True)
class _Sent:
    """What this invocation's sending came to; the default: nothing to send."""

    outcome: _Outcome = dataclasses.field(default_factory=lambda: _Outcome(finished=True))
    resent: int = 0  # records sent again after their lease ran out
    workers: dict = dataclasses.field(default_factory=dict)  # workers.json, as the master wrote it


def _follow(proc: ManagedProcess, store: ResultStore, tail: StoreTail,
            breaker: CircuitBreaker, show: bool, total: int,
            should_stop: StopHook | None, stop_arm: StopArm) -> _Outcome:
    """Wait until every queued record is done (or, once `should_stop` said so, every record
    in flight) or Locust exits first; put back the records of a worker that died holding
    them. Arms `should_stop` names in a `Stop` go to `stop_arm`."""
    columns = (TextColumn("replay"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rows]} results"), TimeElapsedColumn())
    released = time.monotonic()
    next_check = released + STOP_CHECK_S
    outcome = _Outcome()
    results = None
    if should_stop is not None:  # every result of the run, resumed ones too
        results = Latest()
        tail.follow(results)
    with Progress(*columns, disable=not show, transient=False) as bar:
        task = bar.add_task("replay", total=total, rows=0)
        while True:
            raise_if_interrupted()
            tail.poll()
            if breaker.tripped and outcome.broken is None:
                store.queue.stop()  # the records in flight finish; nothing more goes out
                outcome.broken = breaker.tripped
            if time.monotonic() - released > RELEASE_S:
                store.queue.release_expired()
                released = time.monotonic()
            if (results is not None and outcome.stop_reason is None
                    and outcome.broken is None and time.monotonic() >= next_check):
                began = time.monotonic()
                # only new rows are read; with none, the answer cannot have changed
                answer = should_stop(results.results) if results.changed else None
                spent = time.monotonic() - began
                next_check = time.monotonic() + max(STOP_CHECK_S, STOP_CHECK_SHARE * spent)
                stop = Stop.of(answer)
                for arm, why in stop.arms.items():
                    stop_arm(arm, why)
                if stop.run is not None:
                    store.queue.stop()
                    outcome.stop_reason = stop.run
            progress = store.queue.progress()
            bar.update(task, completed=progress.done, rows=store.count())
            stopped = outcome.stop_reason or outcome.broken
            if progress.done >= total or (stopped and not progress.leased):
                outcome.finished = True
                return outcome
            if not proc.running():
                return outcome
            time.sleep(POLL_S)


def run_replay(config: ReplayConfig, should_stop: StopHook | None = None) -> Path:
    """Replay traffic to every arm through Locust; returns the run directory.

    The manifest ends `complete` when every (request, arm) has a row in the store (ok or
    an error; an arm `should_stop` stopped counts only the records it was sent), or when
    `should_stop` stopped the run and every record handed out is done (`stopped_early`);
    `interrupted` after Ctrl-C, a Locust crash, or rows still missing.
    Raises `ArmsUnreachable` (nothing sent, no run directory made) when an arm does not
    answer the preflight; `ArmDown` (the run written, interrupted) when the circuit
    breaker stopped it; `WorkersShort` when too few accepted workers joined in time.
    """
    console = Console(stderr=True, quiet=not config.progress)
    run = RunDir(config.out)
    if config.resume and run.exists() and _nothing_to_send(run.read_manifest(), config):
        # a restarted replayer (a second `docker compose up`) must not send the run again
        console.print(f"{run.path} holds a complete run: nothing to send")
        return run.path
    prepared = _prepare(config)  # bad traffic is a usage error: first
    if config.preflight_timeout > 0:
        check_arms(config.arms, config.preflight_timeout)
    if not prepared.resuming:
        prepared.run.write_traffic(prepared.records)
    ledger = _Ledger.open(prepared.run, _open_manifest(config, prepared.run,
                                                        len(prepared.records), prepared.previous))
    sent = _replay_run(config, prepared, ledger, should_stop, console)
    if sent.outcome.broken is not None:
        raise ArmDown(f"{sent.outcome.broken} (the run in {prepared.run.path} is interrupted)")
    if sent.workers.get("start_failed") and not sent.outcome.finished:
        raise WorkersShort(f"the run never started: {sent.workers['start_failed']}")
    return prepared.run.path


def _replay_run(config: ReplayConfig, prepared: _Prepared, ledger: _Ledger,
                should_stop: StopHook | None, console: Console) -> _Sent:
    """Queue the work, send it and close the run: whatever ends it (Ctrl-C, a crash), the
    manifest says how far it got and the store is closed."""
    run = prepared.run
    store = run.open_store()
    sent, total, status, server = _Sent(), 0, INTERRUPTED, None
    try:
        total = _fill_queue(config, prepared, ledger, store)
        # the breaker sees this invocation's results only (a resume starts afresh); the
        # live metrics count the whole run
        breaker = CircuitBreaker(config.breaker)
        tail = StoreTail(store)
        tail.follow(breaker.observe, after=store.last_rowid(), heads=True)
        if config.metrics_port:
            server, metrics = _serve_metrics(config.metrics_port, config.bind_host)
            tail.follow(metrics.observe)
            console.print(f"live metrics: http://{config.bind_host}:{config.metrics_port}/metrics")
        if total:
            sent = _send(config, prepared, store, tail, breaker, total,
                         (should_stop, _ArmStopper(ledger, store.queue, config.arms)),
                         console, ledger.notes)
        ledger.notes.extend(scrape_arms(config.arms, run, "after"))
        status = _final_status(config, prepared.records, ledger.stopped, store, sent.outcome,
                               prepared.previous)
    finally:
        if total and not sent.workers:  # interrupted mid-send: what the master wrote so far
            with contextlib.suppress(RunDirError):
                sent = dataclasses.replace(sent, workers=run.read_workers() or {})
        if server is not None:
            if status == COMPLETE and config.metrics_linger_s > 0:
                tail.poll()  # the last rows, then one scrape interval for Prometheus to see them
                time.sleep(config.metrics_linger_s)
            server.stop()
        _close(prepared.previous, ledger, store, sent, status)
    return sent


def _fill_queue(config: ReplayConfig, prepared: _Prepared, ledger: _Ledger,
                store: ResultStore) -> int:
    """Queue what is left to send and scrape the arms that need a `before`; returns the
    records queued."""
    # a resume keeps the run's schedule (its traffic.jsonl); --speed still applies
    speed = config.speed if prepared.resuming else 1.0
    arms = _sending(config, ledger.stopped)
    if conversation_mode(config, prepared.previous) == OWN:
        entries = pending_conversations(prepared.records, arms, store.pairs(ok_only=True),
                                        store.pairs(),
                                        store.queue.conversation_ends(), config.timeout, speed)
    else:
        entries = pending_items(prepared.records, arms, store.pairs(ok_only=True), speed)
    total = store.queue.fill(entries)
    previous = prepared.previous.arms if prepared.previous else {}
    ledger.notes.extend(scrape_arms(_needs_before(config, previous, prepared.run),
                                    prepared.run, "before"))
    return total


def _own_settings(config: ReplayConfig, previous: Manifest | None) -> ReplayConfig:
    """A resume sends the run's conversations as the run began them: its mode, and its
    simulator and reasoning unless this invocation gives its own."""
    if previous is None:
        return config
    given = previous.config
    return dataclasses.replace(
        config, conversation_mode=conversation_mode(config, previous),
        tool_simulator=config.tool_simulator or given.get("tool_simulator"),
        own_reasoning=given.get("own_reasoning") or config.own_reasoning)


def conversation_mode(config: ReplayConfig, previous: Manifest | None) -> str:
    """The run's conversation mode: a resume keeps the one the run started with."""
    if previous is not None:
        return str(previous.config.get("conversation_mode") or RECORDED)
    return config.conversation_mode


def _final_status(config: ReplayConfig, records: list[TrafficRecord], stopped: dict[str, dict],
                  store: ResultStore, outcome: _Outcome,
                  previous: Manifest | None = None) -> RunStatus:
    """`complete` when every record the arms still sent to has a row (or a stop hook ended
    the run and what was handed out is done), else `interrupted`."""
    if conversation_mode(config, previous) == OWN:  # a cut (an error row) ends it too
        missing = pending_conversations(records, _sending(config, stopped),
                                        store.pairs(ok_only=True), store.pairs(),
                                        store.queue.conversation_ends(), config.timeout,
                                        retry_errors=False)
    else:
        missing = pending_items(records, _sending(config, stopped), store.pairs())
    complete = outcome.finished and outcome.broken is None and (
        not missing or outcome.stop_reason is not None)
    return COMPLETE if complete else INTERRUPTED


def _close(previous: Manifest | None, ledger: _Ledger, store: ResultStore, sent: _Sent,
           status: RunStatus) -> None:
    """The run's last manifest, this invocation's sending added to what earlier ones did;
    then the store is closed."""
    outcome = sent.outcome
    ledger.write(status, store.counts_by_arm(),
                 resent=(previous.resent if previous else 0) + sent.resent,
                 stopped_early=outcome.stop_reason is not None, stop_reason=outcome.stop_reason,
                 workers=_merge_workers(previous.workers if previous else {}, sent.workers),
                 schedule=_schedule(store))
    store.close()


def _sending(config: ReplayConfig, stopped: dict[str, dict]) -> list[str]:
    """The arms still sent to: the run's, less those a stop hook stopped."""
    return [arm for arm in config.arms if arm not in stopped]


def _send(config: ReplayConfig, prepared: _Prepared, store: ResultStore, tail: StoreTail,
          breaker: CircuitBreaker, total: int,
          stopping: tuple[StopHook | None, StopArm], console: Console,
          notes: list[str]) -> _Sent:
    """Run Locust's master and the local workers until the work is done; returns the
    outcome, the records sent again and what the master recorded about its workers."""
    run, token = prepared.run, prepared.token
    host, port = prepared.address
    if run.workers_path.exists():
        run.workers_path.unlink()  # this invocation's workers only
    with tempfile.TemporaryDirectory(prefix="layergate-workers-") as home:
        proc = _start_locust(_own_settings(config, prepared.previous), run, host, port, token)
        locals_ = _start_local_workers(config, run, host, port, Path(home), token)
        if config.web_port:
            console.print(f"Locust web UI: http://{config.bind_host}:{config.web_port}")
        if config.expect_workers:
            console.print(f"Locust master on {host}:{port}: waiting for {config.expect_workers}"
                          f" worker(s) from other hosts (layergate replay-worker --master "
                          f"{host}:{port})")
        console.print(f"Locust: {config.locust_users} users, {config.processes} local "
                      f"process(es), {config.expect_workers} other worker(s), {total} records "
                      f"to send; log in {run.locust_log}")
        try:
            outcome = _follow(proc, store, tail, breaker, config.progress, total, *stopping)
            if outcome.finished:
                time.sleep(STATS_SETTLE_S)  # the workers' last stats reach Locust's master
            if total > BIG_RUN:
                notes.append(_footprint(proc.pid, run))
                console.print(notes[-1])
        finally:
            # the run is ending: workers that leave from now on were stopped, not lost
            store.queue.stop()
            proc.stop(20.0)
            for worker in locals_:
                worker.stop(10.0)
    if not outcome.finished:
        notes.append(f"Locust exited early with code {proc.popen.returncode}; "
                     f"see {run.locust_output}")
    if outcome.stop_reason is not None:
        notes.append(f"stopped early: {outcome.stop_reason}")
    if outcome.broken is not None:
        notes.append(outcome.broken)
    resent = store.queue.progress().resent
    if resent:
        notes.append(f"{resent} record(s) sent again after their lease ran out "
                     "(a worker stopped while holding them)")
    workers = run.read_workers() or {}
    notes += _worker_notes(workers)
    return _Sent(outcome, resent, workers)


def _footprint(master_pid: int, run: RunDir) -> str:
    """The big run's cost in memory and disk: the peak resident memory of Locust's master
    (it holds the schedule and writes the store) and of this process, and the store's size."""
    try:
        status = Path(f"/proc/{master_pid}/status").read_text()
        peak = next(int(line.split()[1]) // 1024 for line in status.splitlines()
                    if line.startswith("VmHWM:"))
        master = f"{peak} MiB"
    except (OSError, StopIteration, ValueError):
        master = "unknown (no /proc)"
    mine = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    size = sum(p.stat().st_size for p in run.path.glob(f"{run.results_path.name}*")) / 2**20
    return (f"footprint: replay master peak memory {master}, this process {mine} MiB; "
            f"store {size:.0f} MiB ({run.results_path.name} with its WAL)")


def _worker_notes(summary: dict) -> list[str]:
    notes = []
    first = summary.get("first_work")
    for worker in summary.get("workers", []):
        if worker["late"] and first is not None:
            notes.append(f"worker {worker['name']} joined {worker['joined'] - first:.1f}s "
                         "after the first records went out")
        if worker["lost"] is not None:
            notes.append(f"worker {worker['name']} was lost mid-run; {worker['released']} "
                         "of its record(s) went back to the queue")
    notes += [f"worker refused: {r['reason']}" for r in summary.get("refused", [])]
    if summary.get("start_failed"):
        notes.append(f"the run never started: {summary['start_failed']}")
    dropped = summary.get("late_results_dropped", 0)
    if dropped:
        notes.append(f"{dropped} late result(s) dropped: their records had been "
                     "done by another worker")
    return notes


def _merge_workers(old: dict, new: dict) -> dict:
    """Workers across a run and its resumes: their lists appended, dropped results summed."""
    if not new:
        return old
    return {"workers": [*old.get("workers", []), *new.get("workers", [])],
            "refused": [*old.get("refused", []), *new.get("refused", [])],
            "late_results_dropped": old.get("late_results_dropped", 0)
            + new.get("late_results_dropped", 0)}


def _schedule(store: ResultStore) -> dict:
    """The run's schedule fidelity (all its sends, resumes included) for the manifest."""
    lag = schedule_lag(store.send_lags())
    return lag.to_json() if lag is not None else {}


def _nothing_to_send(manifest: Manifest, config: ReplayConfig) -> bool:
    """A complete run whose every arm has only ok rows: a resume would send nothing (a
    complete run with error rows is still filled: a resume turns an error into a result)."""
    counts = manifest.counts or {}
    return manifest.status == COMPLETE and all(
        arm in counts and counts[arm].get("error", 0) == 0 for arm in config.arms)


def _serve_metrics(port: int, host: str):
    registry = CollectorRegistry()
    try:
        server = serve_metrics(registry, host, port)
    except OSError as exc:
        raise ConfigError(f"--metrics-port {port}: cannot listen: {exc}") from exc
    return server, ReplayMetrics(registry)


def _needs_before(config: ReplayConfig, previous: dict[str, str],
                  run: RunDir) -> dict[str, str]:
    """Arms to scrape before sending. A resume keeps the first `before` of an arm still at
    the same URL, so the counters' deltas span the whole run; an arm that moved (restarted)
    starts from fresh counters and gets a new `before`."""
    return {arm: url for arm, url in config.arms.items()
            if previous.get(arm) != url or not run.has_scrape(arm, "before")}
