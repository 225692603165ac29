"""`layergate replay`: shadow replay of traffic to baseline, baseline2 and candidate."""

from __future__ import annotations

from pathlib import Path

import click

ARM_OPTIONS = ("baseline", "baseline2", "candidate")


@click.command(name="replay")
@click.option("--traffic", type=click.Path(dir_okay=False, path_type=Path),
              help="JSONL traffic file to replay (DESIGN.md format).")
@click.option("--scenario", metavar="NAME",
              help="A mix from scenarios/mixes (e.g. saas-mix) or a mix YAML path.")
@click.option("--baseline", required=True, metavar="URL", help="Full-depth reference arm (A).")
@click.option("--baseline2", metavar="URL",
              help="Second full-depth replica (A'): the noise floor. Recommended.")
@click.option("--candidate", required=True, metavar="URL", help="The change under test (B).")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Run directory to create (or to fill with --resume).")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True),
              help="Open loop: Poisson arrivals at R requests/s instead of the recorded times.")
@click.option("--users", type=click.IntRange(min=1),
              help="Closed loop: N users, each sending its next record when the last is done.")
@click.option("--requests", type=click.IntRange(min=1), help="Send only the first N records.")
@click.option("--speed", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True, help="Timestamp replay: divide recorded offsets by S.")
@click.option("--processes", type=click.IntRange(min=1), default=1, show_default=True,
              help="Locust worker processes (master + N workers when N > 1).")
@click.option("--max-in-flight", type=click.IntRange(min=1), default=32, show_default=True,
              help="Open loop: Locust users, i.e. records in flight at once.")
@click.option("--resume", is_flag=True,
              help="Fill an interrupted run: send only (request, arm) pairs with no ok result.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=120.0,
              show_default=True, help="Seconds per request before it counts as an error.")
@click.option("--metrics-port", type=click.IntRange(1, 65535),
              help="Serve live layergate_replay_* Prometheus metrics on port P.")
@click.option("--web-port", type=click.IntRange(1, 65535),
              help="Run Locust with its web UI on port P (default: headless).")
@click.option("--metrics-linger", type=click.FloatRange(min=0), default=15.0, show_default=True,
              metavar="S", help="With --metrics-port: keep serving the live metrics S seconds "
              "after the run, so Prometheus scrapes the final counts.")
@click.option("--bind-host", default="127.0.0.1", show_default=True, metavar="HOST",
              help="Address for --metrics-port and --web-port (0.0.0.0 inside a container).")
@click.option("--model-baseline", metavar="NAME", help="`model` to send to the baseline.")
@click.option("--model-baseline2", metavar="NAME", help="`model` to send to baseline2.")
@click.option("--model-candidate", metavar="NAME", help="`model` to send to the candidate.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed for scenario sampling and Poisson arrivals.")
@click.option("--skip-invalid", is_flag=True,
              help="Skip bad traffic lines (each is reported) instead of stopping.")
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs and CI).")
def command(traffic: Path | None, scenario: str | None, baseline: str, baseline2: str | None,
            candidate: str, out: Path, rate: float | None, users: int | None,
            requests: int | None, speed: float, processes: int, max_in_flight: int,
            resume: bool, timeout: float, metrics_port: int | None, web_port: int | None,
            metrics_linger: float, bind_host: str, model_baseline: str | None,
            model_baseline2: str | None, model_candidate: str | None, seed: int, skip_invalid: bool,
            no_progress: bool) -> None:
    """Send every traffic record to every arm at the same intended time, streaming, through
    Locust (run in its own process), and write a run directory: manifest.json,
    results.sqlite (one row per request and arm), traffic.jsonl, and each arm's /metrics
    before and after in scrapes/.

    Latencies count from the intended send time (open loop, no coordinated omission).
    An arm that fails (timeout, HTTP error, refused connection) gets an error row per
    request; the run goes on. Ctrl-C leaves a consistent run marked `interrupted`;
    `--resume` sends what is missing.

    Exit codes: 0 complete, 1 interrupted, 2 usage error (bad option, traffic or mix).
    """
    from harness.replay import ConfigError, ReplayConfig, run_replay
    from harness.rundir import RunDir, RunDirError
    from harness.scenarios import MixError
    from harness.traffic import TrafficError

    arms = {"baseline": baseline, "candidate": candidate}
    if baseline2:
        arms["baseline2"] = baseline2
    models = {arm: name for arm, name in (("baseline", model_baseline),
                                          ("baseline2", model_baseline2),
                                          ("candidate", model_candidate)) if name}
    try:
        config = ReplayConfig(out=out, arms=arms, traffic=traffic, scenario=scenario, rate=rate,
                              users=users, requests=requests, speed=speed, processes=processes,
                              resume=resume, timeout=timeout, metrics_port=metrics_port,
                              web_port=web_port, bind_host=bind_host, models=models,
                              metrics_linger_s=metrics_linger,
                              max_in_flight=max_in_flight,
                              seed=seed, skip_invalid=skip_invalid, progress=not no_progress)
        run_dir = run_replay(config)
    except (ConfigError, TrafficError, MixError) as exc:
        raise click.UsageError(str(exc)) from exc
    except RunDirError as exc:  # --resume of a directory that cannot be read
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt:
        click.echo(f"interrupted: the run in {out} is marked interrupted; "
                   "finish it with --resume", err=True)
        raise SystemExit(1) from None
    manifest = RunDir(run_dir).read_manifest()
    click.echo(f"{manifest.status}: {run_dir} ({manifest.counts_text()})")
    for note in manifest.notes:
        click.echo(f"note: {note}", err=True)
    if manifest.status != "complete":
        raise SystemExit(1)
