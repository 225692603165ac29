"""`layergate import-trace`: small traces in each public format (tests/fixtures/traces, in the
formats' own field names) become valid traffic with the rows, the inter-arrival times (and
their scaling), the token lengths and, for mooncake, exactly the shared prompt blocks the
trace records; a bad row, a wrong --format and a failed import are errors that say where,
and nothing half-written is left behind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from layergate.exporters import tokenizer
from layergate.exporters.traffic import read_traffic
from layergate.harness.cli import main
from layergate.harness.traces import TraceError, TraceImportConfig, import_trace

TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"
FILES = {"mooncake": "mooncake.jsonl", "azure": "azure.csv", "burstgpt": "burstgpt.csv",
         "sharegpt": "sharegpt.json", "openai-batch": "openai_batch.jsonl"}
BLOCK = 16  # the mooncake fixture's block size: small prompts


@pytest.fixture(scope="module")
def tok() -> str:
    """The embedded model's tokenizer.json (converted once, like the engine does)."""
    from layergate.reference_engine.loading import ensure_converted

    return str(ensure_converted() / "tokenizer.json")


def run(tmp_path: Path, tok: str, fmt: str, source: Path | None = None, **options):
    out = tmp_path / f"{fmt}.jsonl"
    config = TraceImportConfig(format=fmt, source=source or TRACES / FILES[fmt], out=out,
                               tokenizer=tok,
                               **({"block_size": BLOCK} if fmt == "mooncake" else {}),
                               **options)
    report = import_trace(config)
    return read_traffic(out).records, report


def source_rows(fmt: str) -> list:
    path = TRACES / FILES[fmt]
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def common(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@pytest.mark.parametrize(("fmt", "written", "left_out"), [
    ("mooncake", 6, {}), ("azure", 5, {}), ("burstgpt", 3, {"failed": 1}),
    ("sharegpt", 3, {}), ("openai-batch", 3, {})])
def test_every_format_becomes_valid_traffic(tmp_path, tok, fmt, written, left_out) -> None:
    records, report = run(tmp_path, tok, fmt)
    assert len(records) == report.tally.written == written
    assert report.tally.left_out == left_out and report.tally.bad == 0
    assert {r.scenario for r in records} == {fmt}
    saved = json.loads((tmp_path / f"{fmt}.import.json").read_text())
    assert saved["written"] == written and saved["config"]["format"] == fmt


def test_inter_arrival_times_are_kept_and_scaled(tmp_path, tok) -> None:
    ms = [row["timestamp"] for row in source_rows("mooncake")]
    records, _ = run(tmp_path, tok, "mooncake")
    assert [r.offset_s for r in records] == [(t - ms[0]) / 1000 for t in ms]
    fast, _ = run(tmp_path, tok, "mooncake", time_scale=0.1)
    assert [r.offset_s for r in fast] == pytest.approx([r.offset_s * 0.1 for r in records])
    azure, _ = run(tmp_path, tok, "azure")  # date-times with seven fractional digits
    assert [r.offset_s for r in azure] == pytest.approx(
        [0.0, 4.314579, 4.564140, 5.113589, 6.465179], abs=1e-6)
    burst, _ = run(tmp_path, tok, "burstgpt")  # the failed row at 45 s is left out
    assert [r.offset_s for r in burst] == [0.0, 113.0, 135.0]


@pytest.mark.parametrize("fmt", ["mooncake", "azure", "burstgpt"])
def test_made_up_prompts_have_the_recorded_token_lengths(tmp_path, tok, fmt) -> None:
    records, report = run(tmp_path, tok, fmt)
    if fmt == "mooncake":
        recorded = [(r["input_length"], r["output_length"]) for r in source_rows(fmt)]
    else:
        import csv

        rows = list(csv.reader((TRACES / FILES[fmt]).open()))[1:]
        cols = (1, 2) if fmt == "azure" else (2, 3)
        recorded = [(int(r[cols[0]]), int(r[cols[1]])) for r in rows
                    if fmt == "azure" or int(r[cols[1]])]  # burstgpt: 0 = failed, left out
    assert [tokenizer.count(tok, r.body["prompt"]) for r in records] == [n for n, _ in recorded]
    # the output length is max_tokens, asked for exactly; 0 tokens is sent as 1 and noted
    assert [r.body["max_tokens"] for r in records] == [max(1, o) for _, o in recorded]
    assert all(r.endpoint == "/v1/completions" and r.body["ignore_eos"] is True
               and r.body["min_tokens"] == r.body["max_tokens"] for r in records)
    assert report.tally.raised == (["azure-6"] if fmt == "azure" else [])


def test_mooncake_requests_share_exactly_their_shared_blocks(tmp_path, tok) -> None:
    rows = source_rows("mooncake")
    records, report = run(tmp_path, tok, "mooncake")
    ids = [tokenizer.token_ids(tok, r.body["prompt"]) for r in records]
    for i, a in enumerate(rows):
        for j, b in enumerate(rows):
            k = common(a["hash_ids"], b["hash_ids"])
            # k shared blocks: exactly k * block tokens in common (or the shorter prompt
            # whole, when its last shared block is its partial last one)
            expected = min(k * BLOCK, len(ids[i]), len(ids[j]))
            assert common(ids[i], ids[j]) == expected, (i, j, k)
    assert report.shared_leads == 0


def test_an_import_is_the_same_bytes_for_the_same_seed(tmp_path, tok) -> None:
    for fmt in ("mooncake", "azure"):
        run(tmp_path / "a", tok, fmt)
        run(tmp_path / "b", tok, fmt)
        run(tmp_path / "c", tok, fmt, seed=1)
        first = (tmp_path / "a" / f"{fmt}.jsonl").read_bytes()
        assert first == (tmp_path / "b" / f"{fmt}.jsonl").read_bytes()
        assert first != (tmp_path / "c" / f"{fmt}.jsonl").read_bytes()


def test_window_limit_and_sample(tmp_path, tok) -> None:
    window, report = run(tmp_path, tok, "mooncake", start=0.4, duration=1.0)
    assert [r.id for r in window] == ["mooncake-3", "mooncake-4"]  # at 0.5 s and 1.25 s
    assert [r.offset_s for r in window] == [0.0, 0.75]
    assert report.tally.left_out == {"outside_window": 4}
    limited, report = run(tmp_path, tok, "mooncake", limit=2)
    assert len(limited) == 2 and report.tally.limit_reached
    sampled, report = run(tmp_path, tok, "azure", sample=0.5, seed=3)
    again, _ = run(tmp_path, tok, "azure", sample=0.5, seed=3)
    assert [r.id for r in sampled] == [r.id for r in again]
    assert len(sampled) + report.tally.left_out.get("sampled_out", 0) == 5


def test_long_prompts_are_clipped_or_dropped_and_outputs_capped(tmp_path, tok) -> None:
    clipped, report = run(tmp_path, tok, "mooncake", max_input_tokens=30, max_output_tokens=4)
    lengths = [r["input_length"] for r in source_rows("mooncake")]
    assert [tokenizer.count(tok, r.body["prompt"]) for r in clipped] == [min(n, 30)
                                                                          for n in lengths]
    assert report.tally.clipped == [f"mooncake-{i + 1}" for i, n in enumerate(lengths) if n > 30]
    assert [r.body["max_tokens"] for r in clipped] == [4, 4, 3, 4, 4, 2]
    assert report.tally.capped == ["mooncake-1", "mooncake-2", "mooncake-4"]
    dropped, report = run(tmp_path, tok, "mooncake", max_input_tokens=30, drop_long=True)
    assert len(dropped) == 2 and report.tally.left_out == {"too_long": 4}
    chat, report = run(tmp_path, tok, "sharegpt", max_input_tokens=12)
    assert report.tally.clipped == ["sharegpt-1-2"]  # the context no longer fits: cut
    assert chat[1].body["messages"] == [{"role": "user", "content": "Now in one sentence."}]


def test_sharegpt_turns_become_chat_requests_with_their_context(tmp_path, tok) -> None:
    records, _ = run(tmp_path, tok, "sharegpt")
    first, second, other = records
    assert [m["role"] for m in second.body["messages"]] == ["user", "assistant", "user"]
    assert second.body["messages"][0] == first.body["messages"][0]
    reply = "Canberra."
    assert other.response["choices"][0]["message"]["content"] == reply
    assert other.body["max_tokens"] == tokenizer.count(tok, reply)
    assert other.response["usage"]["completion_tokens"] == other.body["max_tokens"]


def test_openai_batch_bodies_are_sent_as_they_are(tmp_path, tok) -> None:
    records, _ = run(tmp_path, tok, "openai-batch")
    rows = source_rows("openai-batch")
    assert [(r.id, r.endpoint, dict(r.body)) for r in records] == [
        (row["custom_id"], row["url"], row["body"]) for row in rows]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


MOONCAKE_BAD = ('{"timestamp": 0, "input_length": 20, "output_length": 3, "hash_ids": [0, 1]}\n'
                '{"timestamp": 10, "input_length": 20, "hash_ids": [0, 1]}\n'
                '{"timestamp": 20, "input_length": 20, "output_length": 3, "hash_ids": [0, 2]}\n')


@pytest.mark.parametrize(("fmt", "text", "where"), [
    ("mooncake", MOONCAKE_BAD, ":2: field 'output_length': missing"),
    ("mooncake", '{"timestamp": 0, "input_length": 40, "output_length": 3, "hash_ids": [0]}\n',
     ":1: field 'hash_ids': 1 ids for input_length 40: blocks of 16 tokens need 3"),
    ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,10,2\n"
              "yesterday,10,2\n", ":3: field 'TIMESTAMP': must be a date-time"),
    ("burstgpt", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                 "1,ChatGPT,ten,2,12,API log\n", ":2: field 'Request tokens': must be a whole"),
    ("sharegpt", '[{"id": "a", "conversations": [{"from": "robot", "value": "hi"}]}]',
     ":1: field 'conversations[0].from': unknown speaker 'robot'"),
    ("openai-batch", '{"custom_id": "r1", "method": "GET", "url": "/v1/chat/completions", '
                     '"body": {}}\n', ":1: field 'method': must be POST"),
    ("openai-batch", '{"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions", '
                     '"body": {"messages": []}}\n', ":1: field 'body.messages'"),
])
def test_a_malformed_row_names_the_file_line_and_field(tmp_path, tok, fmt, text, where) -> None:
    source = _write(tmp_path, "trace.txt", text)
    with pytest.raises(TraceError) as err:
        run(tmp_path, tok, fmt, source)
    assert str(err.value).startswith(f"{source}{where}"), str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.txt"]  # nothing written


def test_skip_bad_counts_the_rows_it_skips(tmp_path, tok) -> None:
    source = _write(tmp_path, "m.jsonl", MOONCAKE_BAD)
    records, report = run(tmp_path, tok, "mooncake", source, skip_bad=True)
    assert [r.id for r in records] == ["mooncake-1", "mooncake-3"]
    assert report.tally.bad == 1 and "m.jsonl:2: field 'output_length'" in report.tally.errors[0]


@pytest.mark.parametrize(("declared", "actual"), [
    ("burstgpt", "azure"), ("azure", "burstgpt"), ("sharegpt", "mooncake"),
    ("mooncake", "openai-batch"), ("openai-batch", "sharegpt")])
def test_a_wrong_format_names_the_one_the_file_looks_like(tmp_path, tok, declared,
                                                          actual) -> None:
    with pytest.raises(TraceError, match=f"looks like {actual} .*pass --format {actual}"):
        run(tmp_path, tok, declared, TRACES / FILES[actual])
    assert not (tmp_path / f"{declared}.jsonl").exists()


def test_a_traffic_file_is_already_traffic(tmp_path, tok) -> None:
    records, _ = run(tmp_path, tok, "azure")
    with pytest.raises(TraceError, match="already layergate's traffic format"):
        run(tmp_path, tok, "openai-batch", tmp_path / "azure.jsonl")


def test_the_embedded_tokenizer_is_the_default(tmp_path, tok, monkeypatch) -> None:
    cache = tmp_path / "cache"
    (cache / "models" / "smollm2-135m").mkdir(parents=True)
    shutil.copy(tok, cache / "models" / "smollm2-135m" / "tokenizer.json")
    monkeypatch.setenv("LAYERGATE_CACHE", str(cache))
    records, report = run(tmp_path, None, "burstgpt")
    assert report.tokenizer == str(cache / "models" / "smollm2-135m" / "tokenizer.json")
    assert tokenizer.count(tok, records[0].body["prompt"]) == 472


def test_the_command_prints_the_summary_and_exits_2_on_bad_input(tmp_path, tok) -> None:
    out = tmp_path / "t.jsonl"
    runner = CliRunner()
    done = runner.invoke(main, ["import-trace", "--format", "burstgpt", "--tokenizer", tok,
                                str(TRACES / FILES["burstgpt"]), "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert "3 requests written from 4 rows" in done.output and "1 rows left out: failed" \
        in done.output
    bad = runner.invoke(main, ["import-trace", "--format", "azure", "--tokenizer", tok,
                               str(TRACES / FILES["burstgpt"]), "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "looks like burstgpt" in bad.output
    untimed = runner.invoke(main, ["import-trace", "--format", "sharegpt", "--time-scale", "2",
                                   str(TRACES / FILES["sharegpt"]), "--out", str(out)])
    assert untimed.exit_code == 2 and "carry no timestamps" in untimed.output
