"""The Argo Rollouts and Flagger examples in dashboards/rollout/ against what they rely on:
the watch's answers (paths, JSON field, verdict words), the fields and types of the two
projects' CRDs that the examples use (written here by hand; the full CRD check is in
dashboards/rollout/README.md), and one set of stages everywhere."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import click
import pytest
import yaml

from layergate.exporters.catalogue import WatchVerdict
from layergate.harness.cli.watch import command as watch_command
from layergate.harness.watch.board import Board
from layergate.harness.watch.flagger import HOOKS, Payload
from layergate.harness.watch.metric_map import load_engine_metrics
from layergate.harness.watch.policy import load_watch_policy
from layergate.harness.watch.stages import StageMachine, StagePlan
from tests.support.crd_schema import argo_subtree, at, flagger_canary_schema, problems

DIR = Path(__file__).resolve().parents[1] / "dashboards" / "rollout"
# Flagger's webhook types: the enum of spec.analysis.webhooks[].type in its Canary CRD,
# vendored at a named commit (tests/fixtures/upstream/fetch_crds.py)
FLAGGER_TYPES = set(at(flagger_canary_schema(), "spec.analysis.webhooks.type")["enum"]) - {""}


def _docs(name: str) -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all((DIR / name).read_text())}


def _watch_args() -> dict:
    container = _docs("watch.yaml")["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:2] == ["layergate", "watch"]
    ctx = watch_command.make_context("watch", list(container["args"][2:]))
    return ctx.params


def _port(url: str) -> int:
    return int(re.match(r"http://[^/:]+:(\d+)/", url).group(1))


def test_the_watch_deployment_parses_with_the_real_cli_and_serves_its_service_port() -> None:
    params = _watch_args()
    docs = _docs("watch.yaml")
    assert docs["Service"]["spec"]["ports"][0]["port"] == params["serve_port"]
    assert params["host"] == "0.0.0.0"
    with pytest.raises(click.UsageError):  # the parser really checks
        watch_command.make_context("watch", ["--serve", "x"])


def test_argo_analysis_reads_the_per_stage_verdict() -> None:
    docs = _docs("argo-rollouts.yaml")
    metric = docs["AnalysisTemplate"]["spec"]["metrics"][0]
    web = metric["provider"]["web"]
    assert web["jsonPath"] == "{$.stage_verdict}"
    assert web["url"].endswith("/status?stage={{args.stage}}&revision={{args.revision}}")
    assert _port(web["url"]) == _watch_args()["serve_port"]
    verdicts = set(get_args(WatchVerdict))
    assert set(re.findall(r'"(\w+)"', metric["successCondition"])) == {"pass"}
    assert set(re.findall(r'"(\w+)"', metric["failureCondition"])) == {"fail", "no_data"}
    assert {"pass", "fail", "no_data"} <= verdicts
    for key in ("failureLimit", "consecutiveSuccessLimit", "inconclusiveLimit"):
        assert isinstance(metric[key], int), key  # IntOrString: we write ints
    assert metric["failureLimit"] == 0 and metric["consecutiveSuccessLimit"] == 1
    assert metric["inconclusiveLimit"] > watch_command.params[
        [p.name for p in watch_command.params].index("max_windows")].default
    assert docs["AnalysisTemplate"]["spec"]["args"] == [{"name": "stage"},
                                                         {"name": "revision"}]


def test_argo_steps_follow_the_watch_stages() -> None:
    steps = _docs("argo-rollouts.yaml")["Rollout"]["spec"]["strategy"]["canary"]["steps"]
    weights = [s["setWeight"] for s in steps if "setWeight" in s]
    assert all(isinstance(w, int) for w in weights)
    assert tuple(weights) == StagePlan(_watch_args()["stages"]).analysed
    for before, step in zip(steps, steps[1:], strict=False):
        if "analysis" in step:
            assert step["analysis"]["templates"] == [{"templateName": "layergate-watch"}]
            # the revision is the new ReplicaSet's hash (AnalysisRunArgument.valueFrom)
            assert step["analysis"]["args"] == [
                {"name": "stage", "value": str(before["setWeight"])},
                {"name": "revision", "valueFrom": {"podTemplateHashValue": "Latest"}}]


def test_flagger_webhooks_are_answered_by_the_watch() -> None:
    analysis = _docs("flagger.yaml")["Canary"]["spec"]["analysis"]
    assert tuple(analysis["stepWeights"]) == StagePlan(_watch_args()["stages"]).analysed
    assert isinstance(analysis["threshold"], int)
    plan = StagePlan()
    policy = load_watch_policy()
    board = Board(lambda: StageMachine(policy, plan, load_engine_metrics("layergate").roles))
    hooks = analysis["webhooks"]
    assert {h["type"] for h in hooks} == set(HOOKS)  # the watch answers what it asks for
    assert set(HOOKS) <= FLAGGER_TYPES  # and every hook the watch serves is Flagger's
    for hook in hooks:
        assert hook["url"].endswith(f"/flagger/{hook['type']}")
        assert _port(hook["url"]) == _watch_args()["serve_port"]
        code = board.flagger(hook["type"], Payload()).code  # every type has an answer
        assert code in (200, 403)


def test_the_watch_keeps_one_pod_and_its_state_on_a_volume() -> None:
    docs = _docs("watch.yaml")
    spec = docs["Deployment"]["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    mount = pod["containers"][0]["volumeMounts"][0]
    assert str(_watch_args()["state"]).startswith(mount["mountPath"] + "/")
    claim = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert claim["persistentVolumeClaim"]["claimName"] \
        == docs["PersistentVolumeClaim"]["metadata"]["name"]


def test_flagger_confirm_hooks_are_muted_and_every_hook_retries() -> None:
    hooks = _docs("flagger.yaml")["Canary"]["spec"]["analysis"]["webhooks"]
    for hook in hooks:
        assert isinstance(hook["retries"], int) and hook["retries"] >= 3, hook["name"]
        # CanaryWebhook.muteAlert is a boolean; a "wait" from a confirm hook is no alert
        assert hook.get("muteAlert", False) is hook["type"].startswith("confirm-")


def test_flagger_canary_conforms_to_the_upstream_crd() -> None:
    canary = _docs("flagger.yaml")["Canary"]
    assert canary["apiVersion"] == "flagger.app/v1beta1"
    assert problems(canary["spec"], at(flagger_canary_schema(), "spec"), "spec") == []


def test_argo_manifests_conform_to_the_upstream_crds() -> None:
    docs = _docs("argo-rollouts.yaml")
    steps = docs["Rollout"]["spec"]["strategy"]["canary"]["steps"]
    schema = argo_subtree("argo-rollout", "spec.strategy.canary.steps")
    assert problems(steps, schema, "steps") == []
    template = docs["AnalysisTemplate"]["spec"]
    for key in ("args", "metrics"):
        schema = argo_subtree("argo-analysis-template", f"spec.{key}")
        assert problems(template[key], schema, key) == []


def test_the_schema_check_can_fail() -> None:
    schema = argo_subtree("argo-rollout", "spec.strategy.canary.steps")
    assert problems([{"setWieght": 5}], schema, "steps") == ["steps[0].setWieght: no such "
                                                              "field upstream"]
    assert problems([{"setWeight": "5"}], schema, "steps")  # an int32 upstream
    assert problems({"type": "pre-rollot"}, at(flagger_canary_schema(),
                                                "spec.analysis.webhooks"), "hook")
