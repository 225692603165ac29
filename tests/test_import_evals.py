"""`layergate import-trace` of the eval layouts (qa, multiple-choice, openai-evals): small
files (tests/fixtures/evals) become chat traffic whose references read back through
read_traffic and score the right answer right and a wrong one wrong; configured field
names and --answer-kind numeric work; bad rows say file, line and field; the CLI does it
end to end in a child process."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from layergate.exporters.references import parse_reference, score
from layergate.exporters.traffic import read_traffic
from layergate.harness.processes import layergate_command
from layergate.harness.traces import (
    TraceError,
    TraceImportConfig,
    TraceImportConfigError,
    import_trace,
)

EVALS = Path(__file__).resolve().parent / "fixtures" / "evals"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tok() -> str:
    from layergate.reference_engine.loading import ensure_converted

    return str(ensure_converted() / "tokenizer.json")


def imported(tmp_path: Path, tok: str, fmt: str, name: str, **options) -> list:
    out = tmp_path / f"{fmt}.jsonl"
    import_trace(TraceImportConfig(format=fmt, source=EVALS / name, out=out, tokenizer=tok,
                                   **options))
    return list(read_traffic(out).records)


def scores(record, text: str) -> bool:
    return score(parse_reference(record.reference), text)


def test_qa(tmp_path: Path, tok: str) -> None:
    records = imported(tmp_path, tok, "qa", "qa.jsonl", answer_tokens=16)
    assert [r.id for r in records] == ["qa-1", "qa-2", "qa-4"]  # ids are source lines
    first = records[0]
    assert first.body == {"messages": [{"role": "user",
                                        "content": "What is the capital of France?"}],
                          "max_tokens": 16, "temperature": 0}
    assert scores(first, "paris.") and not scores(first, "Lyon")
    assert scores(records[1], "Blue") and not scores(records[1], "green")


def test_qa_named_fields_numeric(tmp_path: Path, tok: str) -> None:
    records = imported(tmp_path, tok, "qa", "qa_custom.jsonl", question_field="problem_text",
                       answer_field="solution", answer_kind="numeric")
    assert [r.reference for r in records] == [{"kind": "numeric", "value": 144},
                                              {"kind": "numeric", "value": 1234}]
    assert scores(records[1], "1000 + 234 = 1,234") and not scores(records[1], "1,243")
    with pytest.raises(TraceError, match=r"qa_custom.jsonl:1: field 'question': missing"):
        imported(tmp_path, tok, "qa", "qa_custom.jsonl")


def test_multiple_choice(tmp_path: Path, tok: str) -> None:
    records = imported(tmp_path, tok, "multiple-choice", "multiple_choice.jsonl")
    prompt = records[0].body["messages"][0]["content"]
    assert "A. Mars\nB. Jupiter\nC. Venus\nD. Earth" in prompt
    assert [r.reference["answer"] for r in records] == [1, 1, 1]  # "B", 1, the key "2"
    assert scores(records[0], "The answer is B") and not scores(records[0], "A")
    assert scores(records[2], "B) cold")


def test_openai_evals(tmp_path: Path, tok: str) -> None:
    records = imported(tmp_path, tok, "openai-evals", "openai_evals.jsonl",
                       answer_kind="contains")
    assert records[0].body["messages"][0] == {"role": "system",
                                              "content": "Answer in one word."}
    assert records[1].body["messages"] == [{"role": "user",
                                            "content": "Spell 'cat' backwards."}]
    assert scores(records[0], "It is blue.") and not scores(records[0], "grey")


@pytest.mark.parametrize(("fmt", "line", "message"), [
    ("qa", '{"question": "q", "answer": ""}', "field 'answer': must be a non-empty"),
    ("multiple-choice", '{"question": "q", "choices": ["x", "y"], "answer": "C"}',
     "field 'answer': reference answer: must be a label"),
    ("multiple-choice", '{"question": "q", "choices": ["x"], "answer": 0}',
     "field 'choices': must be 2 to 26"),
    ("openai-evals", '{"input": [{"role": "user"}], "ideal": "x"}', "field 'input: "),
])
def test_bad_rows_name_line_and_field(tmp_path: Path, tok: str, fmt: str, line: str,
                                      message: str) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text(line + "\n")
    with pytest.raises(TraceError, match=rf"bad.jsonl:1: {message}"):
        import_trace(TraceImportConfig(format=fmt, source=source, out=tmp_path / "o.jsonl",
                                       tokenizer=tok))
    assert not (tmp_path / "o.jsonl").exists()


def test_eval_options_refused_for_other_formats(tmp_path: Path) -> None:
    with pytest.raises(TraceImportConfigError, match="--answer-kind is for the eval layouts"):
        TraceImportConfig(format="sharegpt", source=EVALS / "qa.jsonl", out=tmp_path / "o",
                          answer_kind="numeric")


@pytest.mark.parametrize(("fmt", "name", "kind"), [
    ("qa", "qa.jsonl", "exact"), ("multiple-choice", "multiple_choice.jsonl", "choice"),
    ("openai-evals", "openai_evals.jsonl", "exact")])
def test_cli_end_to_end(tmp_path: Path, tok: str, fmt: str, name: str, kind: str) -> None:
    out = tmp_path / "traffic.jsonl"
    done = subprocess.run(layergate_command("import-trace", "--format", fmt,
                                            str(EVALS / name), "--out", str(out),
                                            "--tokenizer", tok),
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    records = read_traffic(out).records
    assert records and all(r.reference["kind"] == kind for r in records)
    report = json.loads((tmp_path / "traffic.import.json").read_text())
    assert report["written"] == len(records)


def test_a_wrong_layout_names_the_right_one(tmp_path: Path, tok: str) -> None:
    with pytest.raises(TraceError, match="this looks like multiple-choice .*pass --format "
                                         "multiple-choice"):
        imported(tmp_path, tok, "qa", "multiple_choice.jsonl")
    with pytest.raises(TraceError, match="pass --format openai-evals"):
        imported(tmp_path, tok, "sharegpt", "openai_evals.jsonl")
