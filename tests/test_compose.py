"""docker-compose.yml by structure (no Docker engine runs here): every mounted path exists,
every Prometheus target is a service and port of the file, every command is a real
`layergate` command that the click group parses, and the dependency graph is sound."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
import yaml

from layergate.harness.cli import main

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
PROMETHEUS = yaml.safe_load((ROOT / "dashboards" / "prometheus.yml").read_text())
WORKDIR = re.search(r"^WORKDIR (\S+)$", (ROOT / "Dockerfile").read_text(), re.M).group(1)
LAYERGATE = sorted(n for n, s in SERVICES.items()
                   if (s.get("image") == "layergate:local" or s.get("build"))
                   and s["command"][0] == "layergate")
# the arms as the replayer and the waiting service name them (the compose variables)
ARM_URLS = {"--baseline": "${BASELINE_URL:-http://baseline:8000}",
            "--baseline2": "${BASELINE2_URL:-http://baseline2:8000}",
            "--candidate": "${CANDIDATE_URL:-http://candidate:8000}"}


def _interpolate(value: str) -> str:
    """Compose's ${VAR:-default} / ${VAR:?error}, with the defaults (env not consulted)."""
    def sub(m: re.Match) -> str:
        if m.group(2) == ":?":
            return "set-by-user"
        return m.group(3) or ""
    return re.sub(r"\$\{(\w+)(:-|:\?)?([^}]*)\}", sub, value)


def _command(service: str) -> list[str]:
    return [_interpolate(a) for a in SERVICES[service]["command"]]


def _listen_ports(service: str) -> set[int]:
    args = _command(service) if "command" in SERVICES[service] else []
    ports = {int(args[i + 1]) for i, a in enumerate(args)
             if a in ("--port", "--metrics-port", "--serve", "--web-port")}
    for published in SERVICES[service].get("ports", []):
        ports.add(int(str(published).rsplit(":", 1)[-1]))
    return ports


def test_services() -> None:
    assert {"baseline", "baseline2", "candidate", "replayer", "exporter", "prometheus",
            "grafana", "jaeger"} <= set(SERVICES)


def test_mounted_paths_exist() -> None:
    named = set(COMPOSE.get("volumes", {}))
    for name, service in SERVICES.items():
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in named, f"{name} mounts undeclared volume {source}"


def test_dockerfile_copies_what_exists() -> None:
    text = (ROOT / "Dockerfile").read_text()
    for line in text.splitlines():
        if line.startswith("COPY "):
            for src in [a for a in line.split()[1:-1] if not a.startswith("--")]:
                if src != "README.md":  # written by the foundation part
                    assert (ROOT / src).exists(), f"Dockerfile copies missing {src}"
    # users get python:3.11-slim and the CPU index unless they pass build arguments
    assert "ARG BASE_IMAGE=python:3.11-slim\nFROM ${BASE_IMAGE}" in text
    assert "ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu" in text
    assert 'torch==2.13.0 --index-url "$TORCH_INDEX"' in text
    assert "ARG PIP_SOURCE=\n" in text and text.count("pip install $PIP_SOURCE") == 3


def test_prometheus_targets_are_services_and_ports() -> None:
    assert PROMETHEUS["rule_files"] == ["/etc/prometheus/rules.yml"]
    mounts = SERVICES["prometheus"]["volumes"]
    assert "./dashboards/rules.yml:/etc/prometheus/rules.yml:ro" in mounts
    assert "./dashboards/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in mounts
    for job in PROMETHEUS["scrape_configs"]:
        for static in job["static_configs"]:
            for target in static["targets"]:
                host, port = target.rsplit(":", 1)
                if host == "localhost":
                    assert job["job_name"] == "prometheus"
                    continue
                assert host in SERVICES, f"target {target} is not a service"
                assert int(port) in _listen_ports(host), f"{host} does not listen on {port}"


def test_engine_arm_labels_come_from_the_scrape_config() -> None:
    engines = next(j for j in PROMETHEUS["scrape_configs"]
                   if j["job_name"] == "layergate-engine")
    by_target = {s["targets"][0].split(":")[0]: s["labels"]["arm"]
                 for s in engines["static_configs"]}
    assert by_target == {"baseline": "baseline", "baseline2": "baseline2",
                         "candidate": "candidate"}


def _resolve(args: list[str]) -> click.Context:
    """Parse `layergate ...` through the real click group, as the container would."""
    assert args[0] == "layergate"
    command: click.Command = main
    name, rest, parent = "layergate", args[1:], None
    while isinstance(command, click.Group):
        ctx = click.Context(command, info_name=name, parent=parent)
        sub_name, sub, rest = command.resolve_command(ctx, rest)
        assert sub is not None, f"`{name} {sub_name}` is not a command"
        command, name, parent = sub, sub_name, ctx
    return command.make_context(name, rest, parent=parent)


@pytest.mark.parametrize("service", LAYERGATE)
def test_command_is_a_real_layergate_command(service: str, tmp_path: Path) -> None:
    args = _command(service)
    # paths inside volumes exist at run time; stand them up so path checks can pass
    mounts = [m.split(":")[1] for m in SERVICES[service].get("volumes", [])]
    for i, arg in enumerate(args):
        for mount in mounts:
            if arg.startswith(mount + "/"):
                local = tmp_path / arg.lstrip("/")
                # a directory, or a file's directory (the gate's reports)
                (local.parent if local.suffix else local).mkdir(parents=True, exist_ok=True)
                args[i] = str(local)
        if arg.startswith(WORKDIR + "/"):  # the image's copy of the repository
            args[i] = str(ROOT / arg[len(WORKDIR) + 1:])
    ctx = _resolve(args)
    assert ctx.command.name in {"serve", "replay", "metrics", "gate", "watch"}


def test_candidate_policy_from_the_environment() -> None:
    raw = SERVICES["candidate"]["command"]
    assert "${CANDIDATE_POLICY:-dynamic}" in raw
    assert _command("baseline")[_command("baseline").index("--skip-policy") + 1] == "full"
    assert _command("baseline2")[_command("baseline2").index("--skip-policy") + 1] == "full"


def test_engines_trace_to_the_backend_and_cache_on_a_volume() -> None:
    for name in ("baseline", "baseline2", "candidate"):
        svc = SERVICES[name]
        endpoint = svc["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"]
        assert endpoint.startswith("http://jaeger:") and endpoint.endswith(":4318")
        assert any(v.startswith("model-cache:") for v in svc["volumes"])
        assert "healthcheck" in svc and ":8000/health" in " ".join(svc["healthcheck"]["test"])
    assert SERVICES["jaeger"]["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"


def test_depends_on_conditions_are_sound() -> None:
    for name, svc in SERVICES.items():
        for dep, cond in svc.get("depends_on", {}).items():
            assert dep in SERVICES, f"{name} depends on unknown {dep}"
            if cond["condition"] == "service_healthy":
                assert "healthcheck" in SERVICES[dep], f"{dep} has no healthcheck"
    assert SERVICES["replayer"]["depends_on"]["arms"]["condition"] == \
        "service_completed_successfully"
    assert SERVICES["exporter"]["depends_on"]["replayer"]["condition"] == \
        "service_completed_successfully"


def test_replay_is_start_or_resume_and_one_shot() -> None:
    """Every `up` runs the same replay command: --resume starts, finishes or leaves alone
    the one run of the volume (tests/test_compose_stack.py runs it twice)."""
    replayer = SERVICES["replayer"]
    assert "--resume" in replayer["command"] and "/runs/compose" in replayer["command"]
    assert replayer["restart"] == "no"
    assert SERVICES["exporter"]["restart"] == "unless-stopped"
    for engine in ("baseline", "baseline2", "candidate"):
        assert SERVICES[engine]["restart"] == "unless-stopped"


def test_gate_service_writes_every_report_into_the_runs_volume() -> None:
    gate = SERVICES["gate"]
    assert gate["profiles"] == ["gate"] and gate["restart"] == "no"
    assert "runs:/runs" in gate["volumes"] and "depends_on" not in gate
    args = _command("gate")
    assert args[:3] == ["layergate", "gate", "/runs/compose"]
    for option, name in (("--json", "gate.json"), ("--junit", "junit.xml"),
                         ("--markdown", "report.md"), ("--html", "report.html")):
        assert args[args.index(option) + 1] == f"/runs/compose/{name}"


def test_grafana_anonymous_viewer_admin_password_from_env() -> None:
    env = SERVICES["grafana"]["environment"]
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert env["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD")
    assert "./dashboards/provisioning:/etc/grafana/provisioning:ro" in \
        SERVICES["grafana"]["volumes"]


def test_watch_service_keeps_its_state_on_a_volume_under_a_profile() -> None:
    from layergate.harness.cli.watch import command as watch

    service = SERVICES["watch"]
    assert service["profiles"] == ["watch"] and "watch-state:/state" in service["volumes"]
    args = _command("watch")
    params = watch.make_context("watch", args[2:]).params  # parses with the real CLI
    assert str(params["state"]).startswith("/state/") and params["serve_port"] == 9105
    assert "watch-state" in COMPOSE["volumes"]


def test_the_arms_are_variables_and_the_replay_waits_for_them() -> None:
    """Your servers or the reference engines (the `engines` profile): the replayer sends to
    the URLs the `arms` service waited for, and depends on no engine (a profile's service
    cannot be a dependency of one outside it)."""
    replay = SERVICES["replayer"]["command"]
    for flag, url in ARM_URLS.items():
        assert replay[replay.index(flag) + 1] == url
    assert SERVICES["arms"]["build"] == "." and "profiles" not in SERVICES["arms"]  # builds
    arms = SERVICES["arms"]["command"]
    assert arms[:3] == ["python", "-m", "layergate.harness.stack.await_arms"]
    assert arms[-3:] == list(ARM_URLS.values())
    for engine in ("baseline", "baseline2", "candidate"):
        assert SERVICES[engine]["profiles"] == ["engines"]
    for name, svc in SERVICES.items():
        if "profiles" not in svc:
            assert not set(svc.get("depends_on", {})) & {"baseline", "baseline2",
                                                         "candidate"}, name


def test_traffic_and_policy_come_from_the_project_directory() -> None:
    """TRAFFIC (a file to replay as recorded) replaces the mix; POLICY is a bundled name or
    a file; both relative to the project directory, mounted read-only at the working
    directory of the services that read them."""
    env = SERVICES["replayer"]["environment"]
    assert env["LAYERGATE_REPLAY_TRAFFIC"] == "${TRAFFIC:-}"
    assert env["LAYERGATE_REPLAY_SCENARIO"] == "${REPLAY_SCENARIO:-saas-mix}"
    for name in ("replayer", "exporter", "gate"):
        svc = SERVICES[name]
        assert svc["working_dir"] == "/work" and ".:/work:ro" in svc["volumes"], name
    for name in ("exporter", "gate"):
        command = SERVICES[name]["command"]
        assert command[command.index("--policy") + 1] == "${POLICY:-default}", name
