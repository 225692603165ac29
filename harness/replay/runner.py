"""`run_replay(config) -> run_dir`: prepare the run directory, launch Locust in its own
process on `harness/replay/locustfile.py`, follow it, and close the run.

Locust monkey-patches the standard library on import, so this process never imports it:
it starts `python -m locust` (headless, or `--autostart` with its web UI when a web port
is given; `--processes N` for master + N workers), hands it the plan in an environment
variable and the work in the store's queue, tails the store for the progress bar and the
live metrics, and stops Locust (SIGTERM) once every queued record is done. Locust's own
stats go to `locust_stats.csv` and its log to `locust.log` in the run directory. A record
whose lease runs out (its Locust process died) is put back in the queue and sent again.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from exporters import tokenizer
from exporters.traffic import TrafficRecord
from harness.manifest import Manifest, now_iso
from harness.replay.config import ConfigError, ReplayConfig
from harness.replay.live import ReplayMetrics, StoreTail
from harness.replay.plan import load_records, pending_items
from harness.replay.scrape import scrape_arms
from harness.replay.work import WorkerPlan
from harness.rundir import RunDir
from harness.store import ResultStore

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
POLL_S = 0.25
RELEASE_S = 5.0  # how often expired leases go back to the queue (a write: not every poll)


class ReplayError(RuntimeError):
    pass


def _locust_cmd(config: ReplayConfig, run: RunDir) -> list[str]:
    users = str(config.locust_users)
    # spawn users fast (100/s, Locust warns above): the schedule, not a ramp-up, sends
    spawn = str(max(config.locust_users, 100))
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "-u", users, "-r", spawn,
           "--host", config.arms["baseline"], "--csv", str(run.locust_csv_prefix),
           "--loglevel", "WARNING", "--logfile", str(run.locust_log)]
    if config.web_port:
        cmd += ["--autostart", "--web-host", config.bind_host, "--web-port", str(config.web_port)]
    else:
        cmd += ["--headless", "--only-summary"]
    if config.processes > 1:
        cmd += ["--processes", str(config.processes)]
    return cmd


def _start_locust(config: ReplayConfig, run: RunDir) -> subprocess.Popen:
    plan = WorkerPlan(arms=config.arms, models=config.models, timeout=config.timeout,
                      closed_loop=config.closed_loop, users=config.locust_users,
                      run_dir=str(run.path), top_logprobs=config.logprobs,
                      tokenizers=tokenizer.for_arms(config.arms, config.models, config.tokenizer))
    env = {**os.environ, **plan.to_env()}
    log = run.locust_output.open("ab")
    # own session: a Ctrl-C in the terminal reaches only us, and we stop Locust in order;
    # if we die without stopping it, the kernel sends it SIGTERM (Linux)
    return subprocess.Popen(_locust_cmd(config, run), env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=_die_with_parent if sys.platform == "linux" else None)


def _die_with_parent() -> None:
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _stop_locust(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _open_manifest(config: ReplayConfig, run: RunDir, count: int, resuming: bool) -> Manifest:
    traffic = run.traffic_summary(count, str(config.traffic or config.scenario or ""))
    if resuming:
        # keep the original config; each resume appends its own (arms may have moved)
        old = run.read_manifest()
        resumes = [*old.config.get("resumes", []), {**config.to_json(), "at": now_iso()}]
        return Manifest(old.id, "replay", "running", old.created,
                        {**old.config, "resumes": resumes}, config.arms,
                        {**old.traffic, **traffic, "source": old.traffic.get("source")},
                        notes=old.notes)
    return Manifest.new("replay", config.to_json(), config.arms, traffic)


def _prepare(config: ReplayConfig) -> tuple[RunDir, list[TrafficRecord], bool]:
    """The run directory, its records, and whether this resumes a run. `--resume` is
    start-or-resume: a directory without a manifest starts a fresh run (a first
    `docker compose up` on an empty volume), one with a manifest is filled."""
    run = RunDir(config.out)
    if run.exists() and not config.resume:
        raise ConfigError(f"{run.path} already holds a run: pass --resume to fill it, "
                          "or choose another --out")
    if run.exists():
        return run, list(run.read_traffic().records), True
    if config.traffic is None and config.scenario is None:
        raise ConfigError(f"--resume: {run.path} is not a run directory (no manifest.json) "
                          "and there is nothing to start it from: give --traffic or --scenario")
    records = load_records(config)
    run.write_traffic(records)
    return run, records, False


def _follow(proc: subprocess.Popen, store: ResultStore, tail: StoreTail | None,
            show: bool, total: int) -> bool:
    """Wait until every queued record is done (True) or Locust exits first (False); put
    back the records of a Locust process that died holding them."""
    columns = (TextColumn("replay"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rows]} results"), TimeElapsedColumn())
    released = time.monotonic()
    with Progress(*columns, disable=not show, transient=False) as bar:
        task = bar.add_task("replay", total=total, rows=0)
        while True:
            if tail is not None:
                tail.poll()
            if time.monotonic() - released > RELEASE_S:
                store.queue.release_expired()
                released = time.monotonic()
            done = store.queue.progress().done
            bar.update(task, completed=done, rows=store.count())
            if done >= total:
                return True
            if proc.poll() is not None:
                return False
            time.sleep(POLL_S)


def run_replay(config: ReplayConfig) -> Path:
    """Replay traffic to every arm through Locust; returns the run directory.

    The manifest ends `complete` when every (request, arm) has a row in the store (ok or
    an error), `interrupted` after Ctrl-C, a Locust crash, or rows still missing.
    """
    console = Console(stderr=True, quiet=not config.progress)
    run = RunDir(config.out)
    if config.resume and run.exists() and _nothing_to_send(run.read_manifest(), config):
        # a restarted replayer (a second `docker compose up`) must not send the run again
        console.print(f"{run.path} holds a complete run: nothing to send")
        return run.path
    run, records, resuming = _prepare(config)
    previous = run.read_manifest() if resuming else None
    manifest = _open_manifest(config, run, len(records), resuming)
    run.write_manifest(manifest)
    store = run.open_store()
    notes = list(manifest.notes)
    status = "interrupted"
    server = None
    try:
        # a resume keeps the run's schedule (its traffic.jsonl); --speed still applies
        total = store.queue.fill(pending_items(records, config.arms, store.pairs(ok_only=True),
                                               config.speed if resuming else 1.0))
        before = _needs_before(config, previous.arms if previous else {}, run)
        notes += scrape_arms(before, run, "before")
        tail = None
        if config.metrics_port:
            server, tail = _serve_metrics(config.metrics_port, config.bind_host, store)
            console.print(f"live metrics: http://{config.bind_host}:{config.metrics_port}/metrics")
        finished = True
        if total:
            proc = _start_locust(config, run)
            if config.web_port:
                console.print(f"Locust web UI: http://{config.bind_host}:{config.web_port}")
            console.print(f"Locust: {config.locust_users} users, {config.processes} process(es),"
                          f" {total} records to send; log in {run.locust_log}")
            try:
                finished = _follow(proc, store, tail, config.progress, total)
            finally:
                _stop_locust(proc)
            if not finished:
                notes.append(f"Locust exited early with code {proc.returncode}; "
                             f"see {run.locust_output}")
            resent = store.queue.progress().resent
            if resent:
                notes.append(f"{resent} record(s) sent again after their lease ran out "
                             "(a Locust process stopped while holding them)")
        notes += scrape_arms(config.arms, run, "after")
        missing = pending_items(records, config.arms, store.pairs())
        status = "complete" if finished and not missing else "interrupted"
    finally:
        if server is not None:
            if status == "complete" and config.metrics_linger_s > 0:
                tail.poll()  # the last rows, then one scrape interval for Prometheus to see them
                time.sleep(config.metrics_linger_s)
            server.shutdown()
        final = dataclasses.replace(manifest, notes=tuple(notes))
        run.write_manifest(final.with_status(status, store.counts_by_arm()))
        store.close()
    return run.path


def _nothing_to_send(manifest: Manifest, config: ReplayConfig) -> bool:
    """A complete run whose every arm has only ok rows: a resume would send nothing (a
    complete run with error rows is still filled: a resume turns an error into a result)."""
    counts = manifest.counts or {}
    return manifest.status == "complete" and all(
        arm in counts and counts[arm].get("error", 0) == 0 for arm in config.arms)


def _serve_metrics(port: int, host: str, store: ResultStore):
    registry = CollectorRegistry()
    try:
        server, _ = start_http_server(port, host, registry)
    except OSError as exc:
        raise ConfigError(f"--metrics-port {port}: cannot listen: {exc}") from exc
    return server, StoreTail(store, ReplayMetrics(registry))


def _needs_before(config: ReplayConfig, previous: dict[str, str],
                  run: RunDir) -> dict[str, str]:
    """Arms to scrape before sending. A resume keeps the first `before` of an arm still at
    the same URL, so the counters' deltas span the whole run; an arm that moved (restarted)
    starts from fresh counters and gets a new `before`."""
    return {arm: url for arm, url in config.arms.items()
            if previous.get(arm) != url or not run.has_scrape(arm, "before")}
