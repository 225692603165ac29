"""Multi-turn traffic: a conversation is the bootstrap's resampling unit. Which requests
form one (from the messages, as the traffic format carries them), the draw by cluster, and
by repetition that the interval of a figure whose turns move together covers where the
per-request one does not."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from layergate.exporters.figures.bootstrap import percentile_ci, resample_sums
from layergate.exporters.figures.conversations import cluster_labels, conversations


def _chat(rid: str, *turns: str) -> dict:
    messages = [{"role": "system", "content": "be brief"}]
    for i, text in enumerate(turns):
        messages.append({"role": "user", "content": text})
        if i < len(turns) - 1:
            messages.append({"role": "assistant", "content": f"reply {i}"})
    return {"id": rid, "offset_s": 0.0, "scenario": "sharegpt",
            "endpoint": "/v1/chat/completions", "body": {"messages": messages}}


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_turns_of_one_conversation_share_a_key_and_single_turns_stay_alone(tmp_path):
    path = _write(tmp_path / "t.jsonl", [
        _chat("s-0-0", "plan a trip"), _chat("s-0-1", "plan a trip", "in May"),
        _chat("s-0-2", "plan a trip", "in May", "by train"),
        _chat("s-1-0", "hello"), _chat("r-1", "hello again"), _chat("r-2", "hello again"),
        _chat("f-1", "shot", "ask"), _chat("f-2", "shot", "ask")])
    found = conversations(path)
    # a repeated prompt (single-turn, or few-shot at one turn position) is no conversation
    assert set(found) == {"s-0-0", "s-0-1", "s-0-2"}
    assert len(set(found.values())) == 1
    assert conversations(_write(tmp_path / "single.jsonl", [_chat("a", "x")])) == {}
    labels = cluster_labels(["s-0-0", "s-1-0", "s-0-2", "r-1"], found)
    assert labels[0] == labels[2] and len(set(labels.tolist())) == 3
    assert cluster_labels(["a", "b"], found) is None


def test_singletons_draw_as_before_and_a_cluster_draws_its_rows_together():
    rng = np.random.default_rng(0)
    x = rng.normal(size=30)
    cols = {"x": x, "n": np.ones(30)}
    strata = np.zeros(30, dtype=np.int64)
    plain = resample_sums(cols, strata, 1, 200, 3)
    alone = resample_sums(cols, strata, 1, 200, 3, np.arange(30))
    assert np.array_equal(plain.boot, alone.boot)
    pairs = resample_sums(cols, strata, 1, 200, 3, np.repeat(np.arange(15), 2))
    _, counts = pairs.sums("n")
    assert np.all(counts % 2 == 0)  # whole conversations of two turns, never half of one


def test_the_cluster_bootstrap_covers_where_the_per_request_one_does_not():
    """40 conversations of 6 turns, each with its own level (ICC 0.5): the 95 % interval of
    the mean, 300 times."""
    rng = np.random.default_rng(1)
    reps, k, turns = 300, 40, 6
    covered = {"request": 0, "conversation": 0}
    labels = np.repeat(np.arange(k), turns)
    strata = np.zeros(k * turns, dtype=np.int64)
    for _ in range(reps):
        x = np.repeat(rng.normal(0, 1, k), turns) + rng.normal(0, 1, k * turns)
        cols = {"x": x, "n": np.ones(k * turns)}
        for unit, clusters in (("request", None), ("conversation", labels)):
            table = resample_sums(cols, strata, 1, 400, int(rng.integers(1 << 30)), clusters)
            total, boot = table.sums("x")
            _, n = table.sums("n")
            low, high = percentile_ci(boot / n, 0.95)
            covered[unit] += low <= 0 <= high
    assert covered["request"] / reps < 0.85
    assert covered["conversation"] / reps >= 0.9


def test_the_gate_reads_conversations_from_the_runs_traffic(tmp_path):
    """compute_figures with the run's conversations: a latency ratio whose turns share their
    conversation's ratio gets a wider interval than the per-request one."""
    from layergate.exporters.figures.compute import compute_figures
    from layergate.exporters.records import ArmResult

    rng = np.random.default_rng(2)
    rows, clusters = [], {}
    for c in range(12):
        level = rng.normal(0, 0.2)
        for t in range(5):
            rid = f"s-{c:02d}-{t}"
            clusters[rid] = f"conv{c}"
            for arm, scale in (("baseline", 1.0), ("candidate", np.exp(level))):
                e2e = float(scale * np.exp(rng.normal(0, 0.02)))
                rows.append(ArmResult(rid, arm, "sharegpt", True, ttft_s=0.1, e2e_s=e2e,
                                      output_tokens=10))

    def width(given):
        figs = compute_figures(rows, clusters=given)
        f = next(f for f in figs if f.name == "latency_ratio" and f.arm == "candidate"
                 and f.scenario == "all")
        return f.ci_high - f.ci_low

    assert width(clusters) > 1.5 * width(None)
