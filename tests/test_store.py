"""The results store (SQLite, WAL, several writer processes), its work queue (claims,
leases, idempotent completion, re-sends), and the run directory (`RunDir`), including
directories written before the queue had leases."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from layergate.exporters.records import ArmResult
from layergate.exporters.tool_calls import ToolCall
from layergate.exporters.traffic import TrafficRecord
from layergate.harness.manifest import Manifest
from layergate.harness.rundir import RunDir
from layergate.harness.store import Completion, QueueEntry, QueueProgress, ResultStore, WorkItem

FULL = ArmResult(
    request_id="r1", arm="candidate", scenario="long", ok=True, http_status=200, ttft_s=0.1,
    e2e_s=0.5, itl_s=(0.1, 0.2), output_text="héllo", output_tokens=3, prompt_tokens=60,
    finish_reason="stop", max_tokens=8, token_ids=(5, 6, 2), logprobs=(-0.1, -0.2, -0.3),
    top_logprobs=({"a": -0.1}, {"b": -0.2}, {"c": -0.3}),
    extension={"policy": "dynamic", "peak_memory_bytes": 123, "token_ids": [5, 6, 2]},
    repeat=1, concurrency=4, tokens_from="usage", quirks=("no_done",),
    tool_calls=(ToolCall("get_weather", '{"city": "Paris"}', "call_0"),
                ToolCall("lookup", "{broken", None, 1)),
    reasoning_text="first, the city", reasoning_tokens=4, refusal="no", answer_ttft_s=0.2,
    schema_valid={"tool_calls": False})


def record(i: int) -> TrafficRecord:
    return TrafficRecord(f"r{i}", float(i), "short", "/v1/chat/completions",
                         {"messages": [{"role": "user", "content": f"q{i}"}]})


def entries(n: int, arms: tuple[str, ...] = ("baseline", "candidate")) -> list[QueueEntry]:
    return [QueueEntry(record(i), arms, float(i)) for i in range(n)]


def ok(rid: str, arm: str) -> ArmResult:
    return ArmResult(rid, arm, "short", ok=True, output_tokens=1)


def test_every_field_round_trips(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        store.put(FULL, intended_at=1.0)
        store.put(ArmResult("r1", "baseline", "long", ok=False, error="timeout after 1s"),
                  worker="w9")
        assert store.results() == [FULL, ArmResult("r1", "baseline", "long", ok=False,
                                                   error="timeout after 1s")]
        rows = store.rows()
        assert rows[0].intended_at == 1.0 and rows[1].worker == "w9"
        assert rows[0].recorded_at <= rows[1].recorded_at


def test_a_repeated_pair_replaces_the_error(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        store.put(ArmResult("r1", "candidate", "s", ok=False, error="connection failed"))
        assert store.pairs() == {("r1", "candidate")} and store.pairs(ok_only=True) == set()
        store.put(ArmResult("r1", "candidate", "s", ok=True, output_tokens=2))
        assert store.count() == 1 and store.pairs(ok_only=True) == {("r1", "candidate")}
        assert store.counts_by_arm() == {"candidate": {"ok": 1, "error": 0}}


WRITER = """
import sys
from layergate.exporters.records import ArmResult
from layergate.harness.store import ResultStore
store = ResultStore(sys.argv[1])
for i in range(300):
    store.put(ArmResult(f"{sys.argv[2]}-{i}", "baseline", "short", ok=True, output_tokens=i))
"""


def test_concurrent_writer_processes_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    ResultStore(path).close()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name])
             for name in ("w1", "w2", "w3")]
    assert [p.wait(60) for p in procs] == [0, 0, 0]
    with ResultStore(path) as store:
        assert store.count() == 900


# --- the work queue ---------------------------------------------------------------------

def test_claims_go_in_order_and_are_due_from_the_first_claim(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        assert store.queue.fill(entries(3)) == 3
        assert store.queue.started_at() is None
        first = store.queue.claim("w1", lease_s=10, now=1000.0)
        later = store.queue.claim("w2", lease_s=10, limit=5, now=1005.0)
        assert [i.record.id for i in first + later] == ["r0", "r1", "r2"]
        assert store.queue.started_at() == 1000.0
        assert [i.due_at for i in first + later] == [1000.0, 1001.0, 1002.0]
        assert all(i.attempt == 1 and i.arms == ("baseline", "candidate")
                   for i in first + later)
        assert first[0].record == record(0)  # the whole record: no traffic file needed
        assert store.queue.claim("w3", lease_s=10, now=1006.0) == []
        assert store.queue.progress().leased == 3


def test_completion_writes_results_once(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        store.queue.fill(entries(1))
        (item,) = store.queue.claim("w1", lease_s=10)
        results = [ok("r0", "baseline"), ok("r0", "candidate")]
        assert store.queue.complete(item, results, "w1", intended_at=5.0)
        assert not store.queue.complete(item, [ArmResult("r0", "baseline", "short", ok=False,
                                                         error="late")], "w2")
        rows = store.rows()
        assert [r.result for r in rows] == results
        assert {r.worker for r in rows} == {"w1"} and {r.intended_at for r in rows} == {5.0}
        progress = store.queue.progress()
        assert (progress.done, progress.leased, progress.total) == (1, 0, 1)
        with pytest.raises(ValueError, match="do not belong to work item"):
            store.queue.complete(item, [ok("r9", "baseline")], "w1")


def test_an_expired_lease_is_sent_again_and_the_late_answer_dropped(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        store.queue.fill(entries(2))
        dead = store.queue.claim("dead", lease_s=30, now=100.0)[0]  # due 100, lease to 130
        alive = store.queue.claim("alive", lease_s=30, now=100.0)[0]  # due 101, lease to 131
        assert store.queue.complete(alive, [ok("r1", "baseline")], "alive")
        assert store.queue.release_expired(now=129.0) == 0
        assert store.queue.release_expired(now=131.0) == 1  # only the unfinished one
        (again,) = store.queue.claim("w2", lease_s=30, now=132.0)
        assert (again.seq, again.attempt, again.due_at) == (dead.seq, 2, 132.0)
        assert store.queue.complete(again, [ok("r0", "baseline")], "w2")
        # the dead worker's answer arrives after all: dropped, the re-sent one stays
        assert not store.queue.complete(dead, [ArmResult("r0", "baseline", "short", ok=False,
                                                         error="late")], "dead")
        assert store.results() == [ok("r1", "baseline"), ok("r0", "baseline")]
        assert store.queue.progress() == QueueProgress(total=2, done=2, leased=0, resent=1)


def test_release_puts_back_what_an_owner_held(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        store.queue.fill(entries(3))
        store.queue.claim("gone", lease_s=1000, limit=2)
        store.queue.claim("here", lease_s=1000)
        assert store.queue.release("gone") == 2
        assert [i.record.id for i in store.queue.claim("new", 1000, limit=5)] == ["r0", "r1"]
        assert store.queue.progress().resent == 2


def test_a_batch_completes_in_one_go_and_drops_what_is_already_done(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        store.queue.fill(entries(3))
        items = store.queue.claim("w1", lease_s=1000, limit=3)
        assert store.queue.holders() == {"w1": 3}
        assert store.queue.complete(items[1], [ok("r1", "baseline")], "w0")
        batch = [Completion(i.seq, i.record.id, (ok(i.record.id, "baseline"),), 5.0)
                 for i in items]
        assert store.queue.complete_many(batch, "w1") == [True, False, True]
        assert sorted((r.result.request_id, r.worker) for r in store.rows()) == [
            ("r0", "w1"), ("r1", "w0"), ("r2", "w1")]
        assert store.queue.holders() == {}
        with pytest.raises(ValueError, match="do not belong"):
            store.queue.complete_many([Completion(items[0].seq, "r0", (ok("r9", "a"),),
                                                  None)], "w1")


def test_the_look_ahead_stop_and_giving_one_record_back(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        store.queue.fill(entries(5))  # due at t0 + 0, 1, 2, 3, 4
        first = store.queue.claim("w1", 1000, limit=5, now=100.0, horizon_s=1.5)
        assert [i.record.id for i in first] == ["r0", "r1"]
        assert store.queue.claim("w2", 1000, limit=5, now=100.4, horizon_s=1.5) == []
        assert [i.record.id for i in store.queue.claim("w2", 1000, limit=5, now=101.0,
                                                       horizon_s=1.5)] == ["r2"]
        assert store.queue.release("w1", first[1].seq) == 1  # not sent: back, not lost
        assert store.queue.holders() == {"w1": 1, "w2": 1}
        store.queue.stop()
        assert store.queue.stopped()
        assert store.queue.claim("w3", 1000, limit=5, now=110.0) == []
        store.queue.fill(entries(1))  # a resume opens it again
        assert not store.queue.stopped() and store.queue.claim("w3", 1000)


def test_dropping_an_arm_takes_it_off_what_is_not_handed_out(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        store.queue.fill([*entries(3), QueueEntry(record(3), ("x",), 3.0)])
        leased = store.queue.claim("w1", 1000, now=100.0)  # r0, in flight: sent as claimed
        assert store.queue.drop_arm("candidate") == (2, "r1")
        assert store.queue.drop_arm("x") == (1, "r3")  # its only arm: nothing left to send
        rest = store.queue.claim("w1", 1000, limit=5, now=200.0)
        assert [(i.record.id, i.arms) for i in [*leased, *rest]] == [
            ("r0", ("baseline", "candidate")), ("r1", ("baseline",)), ("r2", ("baseline",))]
        assert store.queue.progress().done == 1
        assert store.queue.drop_arm("candidate") == (0, None)


def test_a_work_item_travels_as_json() -> None:
    item = WorkItem(7, record(3), ("baseline",), 12.5, 2)
    assert WorkItem.from_json(json.loads(json.dumps(item.to_json()))) == item


CLAIMER = """
import json, sys
from layergate.harness.store import ResultStore
store = ResultStore(sys.argv[1])
seqs = []
while True:
    items = store.queue.claim(sys.argv[2], lease_s=60, limit=3)
    if not items:
        break
    seqs += [i.seq for i in items]
print(json.dumps(seqs))
"""


def test_claimer_processes_split_the_queue_without_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as store:
        store.queue.fill(entries(200))
    procs = [subprocess.Popen([sys.executable, "-c", CLAIMER, str(path), f"w{i}"],
                              stdout=subprocess.PIPE, text=True) for i in range(3)]
    claimed = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    every = [seq for seqs in claimed for seq in seqs]
    assert sorted(every) == list(range(1, 201))


# --- the run directory ----------------------------------------------------------------

def _run_dir(tmp_path: Path) -> RunDir:
    run = RunDir(tmp_path / "run")
    run.write_traffic([TrafficRecord("r1", 0.0, "long", "/v1/completions", {"prompt": "x"})])
    with run.open_store() as store:
        store.put(FULL)
    manifest = Manifest.new("replay", {"rate": 1.0}, {"baseline": "http://a"},
                            run.traffic_summary(1, "t.jsonl"))
    run.write_manifest(manifest.with_status("complete", {"candidate": {"ok": 1, "error": 0}}))
    run.write_scrape("baseline", "before", "layergate_requests_total 1\n")
    return run


def test_load_reads_everything(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    run = run_dir.load()
    assert run.complete and run.manifest.kind == "replay" and run.results == [FULL]
    assert [(s.arm, s.when) for s in run.scrapes] == [("baseline", "before")]
    assert run.traffic is not None and len(run.traffic) == 1 and run.determinism is None
    assert run.manifest.traffic["count"] == 1 and len(run.manifest.traffic["sha256"]) == 64
    assert run_dir.read_manifest() == run.manifest
    assert not any(p.name.endswith(".tmp") for p in run_dir.path.iterdir())


@pytest.mark.parametrize("command", ["metrics", "gate"])
def test_an_unreadable_run_dir_exits_4_saying_what_is_wrong(tmp_path: Path,
                                                            command: str) -> None:
    from click.testing import CliRunner

    from layergate.harness.cli import main

    def says(run: Path, words: str) -> None:
        result = CliRunner().invoke(main, [command, str(run)])
        assert result.exit_code == 4, result.output  # infrastructure, not a verdict
        assert words in result.output and str(run) in result.output, result.output

    says(tmp_path / "missing", "no such run directory")
    run = _run_dir(tmp_path)
    run.results_path.write_bytes(b"this is not sqlite" * 100)
    says(run.path, "results.sqlite")
    run.manifest_path.write_text(json.dumps({"id": "x"}))
    says(run.path, "missing key 'kind'")
    run.manifest_path.unlink()
    says(run.path, "not a run directory")


# the schema of the queue before it had owners and leases (results.sqlite of runs written
# until this change, e.g. every run in a benchmark's output directory)
EARLIER_QUEUE = (
    "CREATE TABLE replay_queue (seq INTEGER PRIMARY KEY, request_id TEXT NOT NULL,"
    " arms TEXT NOT NULL, offset_s REAL NOT NULL, claimed_by TEXT, claimed_at REAL,"
    " done INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE replay_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)


def test_an_earlier_run_directory_loads_and_resumes(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    conn = sqlite3.connect(run.results_path)
    conn.execute("DROP TABLE work_queue")
    conn.execute("DROP TABLE queue_meta")
    for statement in EARLIER_QUEUE:
        conn.execute(statement)
    conn.execute("INSERT INTO replay_queue (request_id, arms, offset_s, done) "
                 "VALUES ('r1', '[\"candidate\"]', 0.0, 1)")
    conn.commit()
    conn.close()
    before = run.results_path.read_bytes()
    assert run.load().results == [FULL]  # reading changes nothing
    assert run.results_path.read_bytes() == before
    with run.open_store() as store:  # a resume refills the queue in the new schema
        assert store.queue.fill(entries(1)) == 1
        tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master")}
        assert "replay_queue" not in tables and "work_queue" in tables
        assert store.results() == [FULL]


def test_a_store_older_than_quirks_loads_and_takes_them(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    conn = sqlite3.connect(run.results_path)
    for column in ("quirks", "tokens_from"):  # written before these fields existed
        conn.execute(f"ALTER TABLE results DROP COLUMN {column}")
    conn.commit()
    conn.close()
    old = dataclasses.replace(FULL, quirks=(), tokens_from=None)
    assert run.load().results == [old]  # read as the fields' defaults, nothing changed
    with run.open_store() as store:  # a resume adds the columns and writes them
        store.put(dataclasses.replace(FULL, arm="baseline"))
        assert store.results() == [old, dataclasses.replace(FULL, arm="baseline")]


def test_harness_parts_import_without_torch_or_locust() -> None:
    code = ("import sys, layergate.harness.replay, layergate.harness.capture, "
            "layergate.harness.determinism, layergate.harness.rundir, "
            "layergate.harness.scenarios, layergate.harness.cli.replay, "
            "layergate.harness.cli.capture, layergate.harness.cli.determinism; "
            "print(sorted(m for m in ('torch', 'transformers', 'locust', 'gevent') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
