"""`run_replay(config) -> run_dir`: prepare the run directory, launch Locust in its own
process on `harness/replay/locustfile.py`, follow it, and close the run.

Locust monkey-patches the standard library on import, so this process never imports it:
it starts `python -m locust` (headless, or `--autostart` with its web UI when a web port
is given; `--processes N` for master + N workers), hands it the plan in an environment
variable and the work in the store's queue, tails the store for the progress bar and the
live metrics, and stops Locust (SIGTERM) once every queued record is done. Locust's own
stats go to `locust_stats.csv` and its log to `locust.log` in the run directory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from exporters.traffic import traffic_sha256, write_traffic
from harness.manifest import Manifest, now_iso, read_manifest, write_manifest
from harness.replay import queue
from harness.replay.config import ConfigError, ReplayConfig
from harness.replay.live import ReplayMetrics, StoreTail
from harness.replay.plan import load_records, pending_items
from harness.replay.scrape import scrape_arms
from harness.rundir import RESULTS, TRAFFIC, scrape_path
from harness.store import ResultStore

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
PLAN_ENV = "LAYERGATE_REPLAY_PLAN"
POLL_S = 0.25


class ReplayError(RuntimeError):
    pass


def _locust_cmd(config: ReplayConfig, run_dir: Path) -> list[str]:
    users = str(config.locust_users)
    # spawn users fast (100/s, Locust warns above): the schedule, not a ramp-up, sends
    spawn = str(max(config.locust_users, 100))
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "-u", users, "-r", spawn,
           "--host", config.arms["baseline"], "--csv", str(run_dir / "locust"),
           "--loglevel", "WARNING", "--logfile", str(run_dir / "locust.log")]
    if config.web_port:
        cmd += ["--autostart", "--web-host", config.bind_host, "--web-port", str(config.web_port)]
    else:
        cmd += ["--headless", "--only-summary"]
    if config.processes > 1:
        cmd += ["--processes", str(config.processes)]
    return cmd


def _start_locust(config: ReplayConfig, run_dir: Path) -> subprocess.Popen:
    plan = {"run_dir": str(run_dir), "arms": config.arms, "models": config.models,
            "timeout": config.timeout, "closed_loop": config.closed_loop,
            "users": config.locust_users}
    env = {**os.environ, PLAN_ENV: json.dumps(plan)}
    log = (run_dir / "locust.out").open("ab")
    # own session: a Ctrl-C in the terminal reaches only us, and we stop Locust in order;
    # if we die without stopping it, the kernel sends it SIGTERM (Linux)
    return subprocess.Popen(_locust_cmd(config, run_dir), env=env, stdout=log,
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


def _open_manifest(config: ReplayConfig, run_dir: Path, count: int) -> Manifest:
    traffic = {"path": str(run_dir / TRAFFIC), "count": count,
               "sha256": traffic_sha256(run_dir / TRAFFIC),
               "source": str(config.traffic or config.scenario or "")}
    if config.resume:
        # keep the original config; each resume appends its own (arms may have moved)
        old = read_manifest(run_dir)
        resumes = [*old.config.get("resumes", []), {**config.to_json(), "at": now_iso()}]
        return Manifest(old.id, "replay", "running", old.created,
                        {**old.config, "resumes": resumes}, config.arms,
                        {**old.traffic, **traffic, "source": old.traffic.get("source")},
                        notes=old.notes)
    return Manifest.new("replay", config.to_json(), config.arms, traffic)


def _prepare(config: ReplayConfig) -> tuple[Path, int]:
    run_dir = Path(config.out)
    exists = (run_dir / "manifest.json").is_file()
    if config.resume and not exists:
        raise ConfigError(f"--resume: {run_dir} is not a run directory (no manifest.json)")
    if exists and not config.resume:
        raise ConfigError(f"{run_dir} already holds a run: pass --resume to fill it, "
                          "or choose another --out")
    run_dir.mkdir(parents=True, exist_ok=True)
    if config.resume:
        records = load_records(run_dir / TRAFFIC, skip_invalid=False)
    else:
        records = load_records(None, config=config)
        write_traffic(run_dir / TRAFFIC, records)
    return run_dir, len(records)


def _follow(proc: subprocess.Popen, store: ResultStore, tail: StoreTail | None,
            show: bool, total: int) -> bool:
    """Wait until every queued record is done (True) or Locust exits first (False)."""
    columns = (TextColumn("replay"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rows]} results"), TimeElapsedColumn())
    with Progress(*columns, disable=not show, transient=False) as bar:
        task = bar.add_task("replay", total=total, rows=0)
        while True:
            if tail is not None:
                tail.poll()
            done, _ = queue.progress(store.conn)
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
    run_dir, count = _prepare(config)
    previous_arms = read_manifest(run_dir).arms if config.resume else {}
    manifest = _open_manifest(config, run_dir, count)
    write_manifest(run_dir, manifest)
    store = ResultStore(run_dir / RESULTS)
    notes = list(manifest.notes)
    status = "interrupted"
    server = None
    try:
        records = load_records(run_dir / TRAFFIC, skip_invalid=False)
        items = pending_items(records, config.arms, store.ok_pairs())
        if config.resume:  # the run's traffic holds the schedule; --speed still applies
            items = [(rid, arms, offset / config.speed) for rid, arms, offset in items]
        total = queue.fill(store.conn, items)
        notes += scrape_arms(_needs_before(config, previous_arms, run_dir), run_dir,
                             "before")
        tail = None
        if config.metrics_port:
            server, tail = _serve_metrics(config.metrics_port, config.bind_host, store)
            console.print(f"live metrics: http://{config.bind_host}:{config.metrics_port}/metrics")
        finished = True
        if total:
            proc = _start_locust(config, run_dir)
            if config.web_port:
                console.print(f"Locust web UI: http://{config.bind_host}:{config.web_port}")
            console.print(f"Locust: {config.locust_users} users, {config.processes} process(es),"
                          f" {total} records to send; log in {run_dir / 'locust.log'}")
            try:
                finished = _follow(proc, store, tail, config.progress, total)
            finally:
                _stop_locust(proc)
            if not finished:
                notes.append(f"Locust exited early with code {proc.returncode}; "
                             f"see {run_dir / 'locust.out'}")
        notes += scrape_arms(config.arms, run_dir, "after")
        missing = pending_items(records, config.arms, _all_pairs(store))
        status = "complete" if finished and not missing else "interrupted"
    finally:
        if server is not None:
            if status == "complete" and config.metrics_linger_s > 0:
                tail.poll()  # the last rows, then one scrape interval for Prometheus to see them
                time.sleep(config.metrics_linger_s)
            server.shutdown()
        final = dataclasses.replace(manifest, notes=tuple(notes))
        write_manifest(run_dir, final.with_status(status, store.counts_by_arm()))
        store.close()
    return run_dir


def _serve_metrics(port: int, host: str, store: ResultStore):
    registry = CollectorRegistry()
    try:
        server, _ = start_http_server(port, host, registry)
    except OSError as exc:
        raise ConfigError(f"--metrics-port {port}: cannot listen: {exc}") from exc
    return server, StoreTail(store, ReplayMetrics(registry))


def _needs_before(config: ReplayConfig, previous: dict[str, str],
                  run_dir: Path) -> dict[str, str]:
    """Arms to scrape before sending. A resume keeps the first `before` of an arm still at
    the same URL, so the counters' deltas span the whole run; an arm that moved (restarted)
    starts from fresh counters and gets a new `before`."""
    return {arm: url for arm, url in config.arms.items()
            if previous.get(arm) != url or not scrape_path(run_dir, arm, "before").is_file()}


def _all_pairs(store: ResultStore) -> set[tuple[str, str]]:
    rows = store.conn.execute("SELECT request_id, arm FROM results")
    return {(r[0], r[1]) for r in rows}
