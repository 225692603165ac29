"""Dashboard JSON and provisioning by structure: Grafana is not installable here, so these
checks stand in for its loader (the PromQL itself runs in test_dashboards_promql.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
BOARDS = sorted((ROOT / "dashboards" / "grafana").glob("*.json"))
EXPECTED = {"ab-overview", "latency", "layer-skipping", "engine"}
# the only labels a query may select or group by: none of them is per request
LABELS = {"arm", "scenario", "run", "policy", "status", "finish_reason", "le", "job",
          "__name__", "figure", "state"}  # figure, state: `layergate watch`


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _panels(board: dict) -> list[dict]:
    out = []
    for p in board["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def _datasource_uids() -> set[str]:
    ds_dir = ROOT / "dashboards" / "provisioning" / "datasources"
    uids = set()
    for f in ds_dir.glob("*.yml"):
        uids |= {d["uid"] for d in yaml.safe_load(f.read_text())["datasources"]}
    return uids


def test_every_dashboard_is_there() -> None:
    assert {p.stem for p in BOARDS} == EXPECTED


def test_dashboards_share_one_grafana_schema() -> None:
    # exported from one Grafana: a board saved by another version would migrate differently
    versions = {_load(path)["schemaVersion"] for path in BOARDS}
    assert len(versions) == 1 and isinstance(versions.pop(), int)


@pytest.mark.parametrize("path", BOARDS, ids=lambda p: p.stem)
def test_dashboard_structure(path: Path) -> None:
    board = _load(path)
    assert board["uid"].startswith("layergate-") and len(board["uid"]) <= 40
    panels = _panels(board)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), f"duplicate panel ids in {path.name}"
    for p in panels:
        assert p.get("title"), f"panel {p['id']} of {path.name} has no title"


@pytest.mark.parametrize("path", BOARDS, ids=lambda p: p.stem)
def test_datasource_uids_match_provisioning(path: Path) -> None:
    uids = _datasource_uids()
    assert uids == {"layergate-prometheus"}
    board = _load(path)
    refs = [p["datasource"] for p in _panels(board) if p["type"] != "row"]
    refs += [t["datasource"] for p in _panels(board) for t in p.get("targets", [])]
    refs += [v["datasource"] for v in board["templating"]["list"]]
    for ref in refs:
        assert ref == {"type": "prometheus", "uid": "layergate-prometheus"}, ref


@pytest.mark.parametrize("path", BOARDS, ids=lambda p: p.stem)
def test_panels_do_not_overlap(path: Path) -> None:
    cells: dict[tuple[int, int], int] = {}
    for p in _load(path)["panels"]:  # top level: rows are not collapsed
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, f"panel {p['id']} leaves the grid"
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"panels {cells[(x, y)]} and {p['id']} overlap"
                cells[(x, y)] = p["id"]


@pytest.mark.parametrize("path", BOARDS, ids=lambda p: p.stem)
def test_every_variable_is_used(path: Path) -> None:
    board = _load(path)
    exprs = " ".join(t["expr"] for p in _panels(board) for t in p.get("targets", []))
    names = [v["name"] for v in board["templating"]["list"]]
    assert names, f"{path.name} has no template variables"
    for name in names:
        assert re.search(rf"\$(\{{)?{name}\b", exprs), f"${name} unused in {path.name}"
    used = set(re.findall(r"\$\{?([a-z]\w*)", exprs)) - {"__rate_interval", "__range",
                                                          "__interval"}
    assert used <= set(names), f"{path.name} uses undefined variables {used - set(names)}"


def test_variables_cover_arm_scenario_run() -> None:
    names = {v["name"] for p in BOARDS for v in _load(p)["templating"]["list"]}
    assert names == {"arm", "scenario", "run"}


@pytest.mark.parametrize("path", BOARDS, ids=lambda p: p.stem)
def test_no_per_request_labels(path: Path) -> None:
    for p in _panels(_load(path)):
        for t in p.get("targets", []):
            used = set(re.findall(r'(\w+)\s*(?:=~|!~|!=|=)\s*"', t["expr"]))
            for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", t["expr"]):
                used |= {g.strip() for g in group.split(",") if g.strip()}
            assert used and used <= LABELS, f"labels {used - LABELS} in {t['expr']}"


def test_dashboard_provider_points_at_the_mounted_json() -> None:
    provider = yaml.safe_load(
        (ROOT / "dashboards/provisioning/dashboards/layergate.yml").read_text())["providers"][0]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./dashboards/grafana:{provider['options']['path']}:ro" in mounts


# a raw engine family (not the replayer's, the exporter's, the watch's nor a capacity
# sweep's) or a rule over them
ENGINE_SERIES = re.compile(r"(?<![\w:])layergate_(?!replay_|run_|watch_|capacity_)\w+|"
                           r"arm:layergate_(engine|length_finish|termination_accuracy_upper_bound)")
CACHE_RULES = re.compile(r"arm:layergate_(prefix_cache_hit|cache_hit_delta)")


@pytest.mark.parametrize("path", BOARDS, ids=lambda p: p.stem)
def test_panels_on_engine_metrics_say_other_servers_leave_them_empty(path: Path) -> None:
    checked = 0
    for panel in _panels(_load(path)):
        exprs = " ".join(t.get("expr", "") for t in panel.get("targets", []))
        description = panel.get("description", "")
        if ENGINE_SERIES.search(exprs):
            checked += 1
            assert "Needs the layergate_* metrics of layergate's own engine" in description, \
                panel["title"]
        if CACHE_RULES.search(exprs):
            assert "layergate's engine, vLLM or SGLang" in description, panel["title"]
    # every board draws engine series; none matching means the pattern went stale
    assert checked, f"no panel of {path.stem} matched ENGINE_SERIES"
