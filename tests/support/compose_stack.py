"""docker-compose.yml run for real by Debian's `docker-compose` against the test's own daemon,
from a project directory as `layergate init` writes it (the same compose file, its .env,
dashboards/ and policy.yaml) with a user's traffic file in it, through the file's own
variables (TRAFFIC, POLICY, BASELINE_URL, BASELINE2_URL, CANDIDATE_URL, COMPOSE_PROFILES),
and a generated override for tests:

- every service on `network_mode: host`, each listening on its own free port on 127.0.0.1
  (the real commands, with `--host 0.0.0.0 --port 8000` etc. rewritten; no traffic leaves
  loopback); the stack runs from `docker-compose config` of the file and the override with
  the published ports dropped (meaningless under host networking, refused by compose 1.29);
- the arms' URLs are the reference engines' loopback ports (BASELINE_URL ...), which the
  `engines` profile starts;
- Prometheus mounts a copy of the project's dashboards/prometheus.yml whose targets
  `service:port` are rewritten to those loopback ports (jobs, labels, intervals and the
  mounted rules.yml are the real ones);
- Jaeger and Grafana cannot be built here: Jaeger (the engines' dependency) becomes the
  Debian base idling, the engines and replayer export no spans, and Grafana is not started
  (tests/test_compose.py checks both by structure).
"""

from __future__ import annotations

import copy
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from layergate.harness.processes import free_port
from tests.support.docker_engine import DockerCommandError, DockerEngine, _tool
from tests.support.stack_images import BASE_IMAGE, PROMETHEUS_IMAGE

# what the test runs: everything but Grafana (jaeger comes as the engines' stand-in dependency)
SERVICES = ("baseline", "baseline2", "candidate", "arms", "replayer", "exporter", "prometheus")
# the compose variable of each arm's URL
ARM_URLS = {"baseline": "BASELINE_URL", "baseline2": "BASELINE2_URL",
            "candidate": "CANDIDATE_URL"}
# the container-side ports of each service's listeners (the compose file's)
LISTENERS = {"baseline": {"--port": 8000}, "baseline2": {"--port": 8000},
             "candidate": {"--port": 8000},
             "replayer": {"--metrics-port": 9102, "--web-port": 8089},
             "exporter": {"--serve": 9103}}
# the test's settings, through the compose file's own variables (the arms' URLs are added
# once their ports are chosen); TRAFFIC and POLICY are files of the project directory
ENVIRONMENT = {"TRAFFIC": "./captured.jsonl", "POLICY": "./policy.yaml",
               "COMPOSE_PROFILES": "engines",
               "ENGINE_THREADS": "1", "REPLAY_PROCESSES": "1",
               "CANDIDATE_POLICY": "dynamic", "GRAFANA_ADMIN_PASSWORD": "unused-in-tests",
               # where the daemon falls back to vfs, creating a container copies the
               # whole image: over a minute on a loaded machine, compose's default API
               # timeout
               "COMPOSE_HTTP_TIMEOUT": "900"}


@dataclass
class ComposeStack:
    engine: DockerEngine
    workdir: Path
    project_dir: Path  # what `layergate init` wrote, and the user's traffic
    project: str = "lgstack"
    ports: dict[str, int] = field(default_factory=dict)  # "service:container_port" -> host
    environment: dict[str, str] = field(default_factory=lambda: dict(ENVIRONMENT))

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        compose_file = self.project_dir / "docker-compose.yml"
        base = yaml.safe_load(compose_file.read_text())
        for service, listeners in LISTENERS.items():
            for port in listeners.values():
                self.ports[f"{service}:{port}"] = free_port()
        self.ports["prometheus:9090"] = free_port()
        for arm, variable in ARM_URLS.items():
            self.environment[variable] = self.url(arm, 8000)
        self.override = self.workdir / "docker-compose.test.yml"
        self.override.write_text(yaml.safe_dump(self._override(base), sort_keys=False))
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(self._prometheus_config(),
                                                                    sort_keys=False))
        self.files = [compose_file, self.override]
        self.effective = self.workdir / "docker-compose.effective.yml"
        self.effective.write_text(yaml.safe_dump(self._effective(), sort_keys=False))
        self.files = [self.effective]

    def _effective(self) -> dict[str, Any]:
        """`docker-compose config` of the file and the override, without published ports:
        docker-compose 1.29 refuses `ports` next to `network_mode: host` (where they would
        be ignored anyway), and an override can only add to a list, never remove from it."""
        merged = yaml.safe_load(self.compose("config").stdout)
        for service in merged["services"].values():
            service.pop("ports", None)
        return merged

    # --- the override -------------------------------------------------------------------

    def url(self, service: str, port: int) -> str:
        return f"http://127.0.0.1:{self.ports[f'{service}:{port}']}"

    def _rewrite(self, service: str, command: list[str]) -> list[str]:
        out = list(command)
        for i, arg in enumerate(out[:-1]):
            if arg in LISTENERS.get(service, {}):
                out[i + 1] = str(self.ports[f"{service}:{LISTENERS[service][arg]}"])
            elif arg in ("--host", "--bind-host"):
                out[i + 1] = "127.0.0.1"
        return out

    def _override(self, base: dict[str, Any]) -> dict[str, Any]:
        services: dict[str, Any] = {}
        for name, svc in base["services"].items():
            over: dict[str, Any] = {"network_mode": "host"}
            if "command" in svc and svc.get("image") == "layergate:local":
                over["command"] = self._rewrite(name, svc["command"])
            env = svc.get("environment") or {}
            if "OTEL_EXPORTER_OTLP_ENDPOINT" in env:
                # no trace backend runs: spans are not exported (unset = off)
                over["environment"] = {"OTEL_EXPORTER_OTLP_ENDPOINT": ""}
            health = svc.get("healthcheck")
            if health and name in LISTENERS:
                test = copy.deepcopy(health["test"])
                container_port = next(iter(LISTENERS[name].values()))
                test[-1] = test[-1].replace(f":{container_port}/",
                                            f":{self.ports[f'{name}:{container_port}']}/")
                over["healthcheck"] = {**health, "test": test}
            services[name] = over
        prom = self.ports["prometheus:9090"]
        services["prometheus"].update({
            "image": PROMETHEUS_IMAGE,
            "command": [*base["services"]["prometheus"]["command"],
                        f"--web.listen-address=127.0.0.1:{prom}"],
            "volumes": [f"{self.workdir / 'prometheus.yml'}:/etc/prometheus/prometheus.yml:ro"],
            "healthcheck": {"test": ["CMD", "wget", "-q", "-O", "-",
                                     f"http://127.0.0.1:{prom}/-/ready"],
                            "interval": "5s", "timeout": "5s", "retries": 10}})
        services["jaeger"].update({"image": BASE_IMAGE, "command": ["sleep", "infinity"],
                                   "environment": {}})
        return {"services": services}

    def _prometheus_config(self) -> dict[str, Any]:
        config = yaml.safe_load((self.project_dir / "dashboards" / "prometheus.yml").read_text())
        for job in config["scrape_configs"]:
            for static in job["static_configs"]:
                static["targets"] = [
                    f"127.0.0.1:{self.ports['prometheus:9090']}" if t == "localhost:9090"
                    else f"127.0.0.1:{self.ports[t]}" for t in static["targets"]]
        return config

    # --- running ------------------------------------------------------------------------

    def compose(self, *args: str, check: bool = True, timeout: float = 1800):
        files = [a for f in self.files for a in ("-f", str(f))]
        cmd = [_tool("docker-compose"), *files, "-p", self.project,
               "--project-directory", str(self.project_dir), *args]
        env_cmd = ["env", *[f"{k}={v}" for k, v in self.environment.items()], *cmd]
        return self.engine.run(env_cmd, check=check, timeout=timeout)

    def up(self) -> None:
        try:
            self.compose("up", "-d", "--no-build", *SERVICES)
        except DockerCommandError as exc:  # say why: the logs of the one-shot services
            logs = "\n".join(f"--- {s} ---\n{self.logs(s)}" for s in ("arms", "replayer"))
            raise DockerCommandError(f"{exc}\n{logs}") from exc

    def container(self, service: str) -> dict[str, Any]:
        ids = self.compose("ps", "-q", service).stdout.decode().split()
        assert ids, f"no container for {service}"
        return json.loads(self.engine.docker("inspect", ids[0]).stdout)[0]

    def wait_exited(self, service: str, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.container(service)["State"]
            if state["Status"] == "exited":
                return state["ExitCode"]
            time.sleep(2)
        raise TimeoutError(f"{service} still running after {timeout:.0f} s:\n"
                           + self.logs(service))

    def wait_healthy(self, service: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            health = self.container(service)["State"].get("Health", {}).get("Status")
            if health == "healthy":
                return
            time.sleep(2)
        raise TimeoutError(f"{service} not healthy after {timeout:.0f} s:\n" + self.logs(service))

    def logs(self, service: str) -> str:
        done = self.compose("logs", "--no-color", "--tail", "60", service, check=False)
        return done.stdout.decode(errors="replace")[-4000:]

    def volume_dir(self, volume: str) -> Path:
        """The named volume's directory on this machine (the daemon's data root is ours)."""
        out = self.engine.docker("volume", "inspect", f"{self.project}_{volume}").stdout
        return Path(json.loads(out)[0]["Mountpoint"])

    def get(self, service: str, port: int, path: str, timeout: float = 10) -> str:
        with urllib.request.urlopen(self.url(service, port) + path, timeout=timeout) as r:
            return r.read().decode()

    def prometheus_query(self, query: str) -> list[dict[str, Any]]:
        body = self.get("prometheus", 9090,
                        "/api/v1/query?" + urllib.parse.urlencode({"query": query}))
        data = json.loads(body)
        assert data["status"] == "success", data
        return data["data"]["result"]

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", check=False, timeout=600)


def poll(fn, timeout: float, interval: float = 2.0, what: str = "condition"):
    """fn() until it returns something truthy (exceptions count as not yet)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = fn()
            if value:
                return value
        except (OSError, urllib.error.URLError, AssertionError, KeyError) as exc:
            last = exc
        time.sleep(interval)
    raise TimeoutError(f"{what} not reached in {timeout:.0f} s (last error: {last})")
