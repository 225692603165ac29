"""The native stack: engines for each arm, a Prometheus scraping them and the harness's own
endpoints (replayer live metrics, finished-run exporter), all on 127.0.0.1.

Ports for the replayer and the exporter are chosen up front so the generated Prometheus
config names them before they exist; Prometheus marks them down until they start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from layergate.exporters import bundled
from layergate.harness.processes import ManagedProcess, free_port, layergate_command
from layergate.harness.stack.engines import EngineSpec
from layergate.harness.stack.health import StackError, wait_healthy
from layergate.harness.stack.processes import ProcessSet
from layergate.harness.stack.prometheus import PrometheusServer, start_prometheus
from layergate.harness.stack.prometheus_config import ENGINE_JOB, ScrapeTargets

DASHBOARDS_DIR = bundled.dashboards_dir()
RULES_FILE = DASHBOARDS_DIR / "rules.yml"


@dataclass(frozen=True)
class StackConfig:
    engines: tuple[EngineSpec, ...]
    workdir: Path
    scrape_interval_s: float = 1.0
    with_replayer_target: bool = True
    with_exporter_target: bool = True
    rule_files: tuple[Path, ...] = field(default_factory=lambda: (RULES_FILE,))
    engine_timeout_s: float = 600.0  # the first start converts the GGUF (minutes)
    extra_jobs: tuple[dict, ...] = ()  # further Prometheus scrape configs, as written


@dataclass(frozen=True)
class RunningStack:
    arms: dict[str, str]  # arm -> base URL
    prometheus: PrometheusServer
    replayer_metrics_port: int | None
    exporter_port: int | None
    processes: ProcessSet

    def start_exporter(self, run_dir: Path, extra_args: tuple[str, ...] = (),
                       timeout: float = 60.0) -> ManagedProcess:
        """`layergate metrics RUN_DIR --serve PORT` on the port Prometheus already scrapes."""
        if self.exporter_port is None:
            raise ValueError("the stack was configured without an exporter target")
        cmd = layergate_command("metrics", str(run_dir), "--serve", str(self.exporter_port),
                                *extra_args)
        proc = self.processes.start("exporter", cmd)
        wait_healthy(proc, f"http://127.0.0.1:{self.exporter_port}/metrics", timeout)
        return proc


Progress = Callable[[str], None]


def _start_engine(processes: ProcessSet, spec: EngineSpec, timeout: float) -> str:
    port = free_port()
    proc = processes.start(f"engine-{spec.arm}", spec.command(port), env=spec.process_env())
    url = f"http://127.0.0.1:{port}"
    wait_healthy(proc, f"{url}/health", timeout)
    return url


@contextmanager
def NativeStack(config: StackConfig,  # noqa: N802 - reads as a resource, like open()
                progress: Progress | None = None) -> Iterator[RunningStack]:
    """Start the stack; stop every process it started when the block exits, however."""
    say = progress or (lambda _msg: None)
    missing = [str(p) for p in config.rule_files if not Path(p).is_file()]
    if missing:
        raise FileNotFoundError(f"Prometheus rule files not found: {', '.join(missing)}")
    processes = ProcessSet(config.workdir / "logs")
    try:
        arms = {s.arm: s.url for s in config.engines if s.url}
        local = [s for s in config.engines if not s.url]
        if local:
            # the first engine alone: on a cold cache it converts the model once, and the
            # others then load the converted copy instead of converting it in parallel
            first, rest = local[0], local[1:]
            say(f"starting engine {first.arm} ({first.skip_policy})")
            arms[first.arm] = _start_engine(processes, first, config.engine_timeout_s)
            if rest:
                say(f"starting engines: {', '.join(f'{s.arm} ({s.skip_policy})' for s in rest)}")
                with ThreadPoolExecutor(len(rest)) as pool:
                    futures = {s.arm: pool.submit(_start_engine, processes, s,
                                                  config.engine_timeout_s) for s in rest}
                    for arm, fut in futures.items():
                        arms[arm] = fut.result()
        replayer_port = free_port() if config.with_replayer_target else None
        exporter_port = free_port() if config.with_exporter_target else None
        targets = ScrapeTargets(
            engines={s.arm: arms[s.arm] for s in config.engines},
            replayer=[f"127.0.0.1:{replayer_port}"] if replayer_port else [],
            exporter=[f"127.0.0.1:{exporter_port}"] if exporter_port else [],
            rule_files=tuple(p for p in config.rule_files),
            scrape_interval_s=config.scrape_interval_s, extra_jobs=config.extra_jobs)
        say("starting prometheus")
        prom = start_prometheus(processes, targets, config.workdir / "prometheus")
        _wait_first_scrape(prom, len(targets.engines))
        yield RunningStack(arms, prom, replayer_port, exporter_port, processes)
    finally:
        processes.close()


def _wait_first_scrape(prom: PrometheusServer, engines: int, timeout: float = 60.0) -> None:
    """Prometheus is ready some seconds before its first scrape. Traffic sent before that
    scrape lands in the counters' first sample, where no rate() can ever show it, so wait
    until every engine has been scraped once."""
    if engines and not prom.wait_for(f'count(up{{job="{ENGINE_JOB}"}} == 1) >= {engines}',
                                     timeout=timeout):
        raise StackError(f"Prometheus did not scrape the {engines} engine(s) within "
                         f"{timeout:.0f}s of starting")
