"""The work queue of a replay: tables `work_queue` and `queue_meta` beside `results`, owned
by the run's `ResultStore` (`store.queue`); no SQL about it lives anywhere else.

One row per traffic record still to send: the record itself (so whoever claims it needs no
traffic file), the arms it still needs, and its intended offset. A claim takes the next free
rows atomically for an owner and a lease, so several processes split the traffic without
duplicates; the first claim fixes `t0`, the wall-clock start every claimer shares (a record
is due at `t0 + offset_s`). `complete` writes the record's results and marks it done in one
transaction, once: a second completion (a late answer for a record whose lease ran out and
which was sent again) is dropped, so each (request, arm, repeat) has exactly one result.
`release_expired` (or `release`, for an owner known to be gone) puts unfinished rows back;
the next claim sends them again, due at once, and counts the re-send. `stop` closes the
queue early: claims then get nothing, and what is already leased can still complete;
`drop_arm` closes it to one arm only: the rows not handed out lose that arm (one left with
no arm is done), the leased ones are sent as they were claimed.

In `own` conversation mode a row is a whole conversation (`turns`: its records in order),
so one worker holds it and sends each arm its turns in turn. Each turn's result is written
as it comes (`complete_turn`, only while the row is leased to the writer), with the turn at
which an arm's conversation ended (`conversation_ends`: its next turn could not be built) and
the tool simulator's answers (`tool_answers`). A claim hands each arm its state from them
(`ArmState`): the answers so far and the turn to go on from, so a conversation a crash or a
lost worker broke off goes on at its next turn.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from layergate.exporters.records import ArmResult
from layergate.exporters.traffic import TrafficRecord, parse_record
from layergate.harness.store.items import (
    ArmState,
    Completion,
    QueueEntry,
    QueueProgress,
    TurnDone,
    WorkItem,
)
from layergate.harness.store.rows import decode, encode_row, insert_rows
from layergate.harness.store.sqlite import write_transaction

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS work_queue (seq INTEGER PRIMARY KEY, request_id TEXT NOT NULL,"
    " record TEXT NOT NULL, arms TEXT NOT NULL, offset_s REAL NOT NULL, owner TEXT,"
    " lease_until REAL, claims INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0,"
    " turns TEXT, span_s REAL NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS queue_meta (key TEXT PRIMARY KEY, value REAL NOT NULL)",
    # the free rows, so a claim finds the next one without scanning the done ones
    "CREATE INDEX IF NOT EXISTS work_queue_free ON work_queue (seq) "
    "WHERE done = 0 AND owner IS NULL",
    # own mode: the turn after which an arm's conversation ended, and why
    "CREATE TABLE IF NOT EXISTS conversation_ends (request_id TEXT NOT NULL, arm TEXT NOT NULL,"
    " reason TEXT NOT NULL, PRIMARY KEY (request_id, arm))",
    # own mode: a tool simulator's answers to an arm's calls of one turn (JSON list, in order)
    "CREATE TABLE IF NOT EXISTS tool_answers (request_id TEXT NOT NULL, arm TEXT NOT NULL,"
    " calls TEXT NOT NULL, answers TEXT NOT NULL, PRIMARY KEY (request_id, arm))",
)
_ADDED = ("turns TEXT", "span_s REAL NOT NULL DEFAULT 0")  # columns of queues before own mode
_EARLIER = ("replay_queue", "replay_meta")  # the queue before leases; dropped by `fill`


class WorkQueue:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    @staticmethod
    def create_schema(conn: sqlite3.Connection) -> None:
        for statement in SCHEMA:
            conn.execute(statement)
        have = {row[1] for row in conn.execute("PRAGMA table_info(work_queue)")}
        for column in _ADDED:
            if column.split()[0] not in have:
                with contextlib.suppress(sqlite3.OperationalError):  # added meanwhile
                    conn.execute(f"ALTER TABLE work_queue ADD COLUMN {column}")

    def fill(self, entries: Iterable[QueueEntry]) -> int:
        """Replace the queue with `entries`, in send order; returns how many."""
        rows = [(e.record.id, json.dumps(e.record.to_json(), ensure_ascii=False),
                 json.dumps(list(e.arms)), e.offset_s,
                 json.dumps([t.to_json() for t in e.turns], ensure_ascii=False)
                 if e.turns else None, e.span_s) for e in entries]
        with write_transaction(self.conn) as conn:
            for table in _EARLIER:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
            conn.execute("DELETE FROM work_queue")
            conn.execute("DELETE FROM queue_meta")
            conn.executemany("INSERT INTO work_queue (request_id, record, arms, offset_s, "
                             "turns, span_s) VALUES (?, ?, ?, ?, ?, ?)", rows)
        return len(rows)

    def claim(self, owner: str, lease_s: float, limit: int = 1,
              now: float | None = None, horizon_s: float | None = None) -> list[WorkItem]:
        """Up to `limit` free rows, in order, leased to `owner` until `lease_s` seconds after
        they are due; with `horizon_s`, only rows due within that many seconds (so a worker
        does not hoard the future of an open-loop schedule); [] when nothing is free."""
        now = time.time() if now is None else now
        horizon = float("inf") if horizon_s is None else now + horizon_s
        with write_transaction(self.conn) as conn:  # short: Locust users wait on this lock
            if conn.execute("SELECT 1 FROM queue_meta WHERE key = 'stopped'").fetchone():
                return []
            conn.execute("INSERT OR IGNORE INTO queue_meta (key, value) VALUES ('t0', ?)",
                         (now,))
            t0 = conn.execute("SELECT value FROM queue_meta WHERE key = 't0'").fetchone()[0]
            rows = conn.execute(
                "UPDATE work_queue SET owner = :owner, claims = claims + 1, lease_until = "
                "MAX(:now, CASE WHEN claims = 0 THEN :t0 + offset_s ELSE :now END) + :lease "
                "+ span_s "
                "WHERE seq IN (SELECT seq FROM work_queue WHERE done = 0 AND owner IS NULL "
                "AND (claims > 0 OR :t0 + offset_s <= :horizon) "
                "ORDER BY seq LIMIT :limit) RETURNING seq, record, arms, offset_s, claims, turns",
                {"owner": owner, "now": now, "t0": t0, "lease": lease_s,
                 "limit": limit, "horizon": horizon}).fetchall()
        items = []
        for row in sorted(rows, key=lambda r: r["seq"]):
            arms = tuple(json.loads(row["arms"]))
            turns = tuple(parse_record(t, Path("work_queue"), row["seq"])
                          for t in json.loads(row["turns"] or "[]"))
            items.append(WorkItem(
                row["seq"], parse_record(json.loads(row["record"]), Path("work_queue"),
                                         row["seq"]),
                arms, t0 + row["offset_s"] if row["claims"] == 1 else now, row["claims"],
                turns, self.states(turns, arms) if turns else {}))
        return items

    def states(self, turns: Sequence[TrafficRecord], arms: Iterable[str]) -> dict[str, ArmState]:
        """Each arm's state in the conversation of `turns`, from what the store holds: its
        ok answers in order up to the first turn without one (sent next) or to the turn
        after which its conversation ended (nothing left)."""
        ids = [t.id for t in turns]
        marks = ",".join("?" * len(ids))
        rows = {(r["request_id"], r["arm"]): r for r in self.conn.execute(
            f"SELECT * FROM results WHERE request_id IN ({marks}) AND repeat = 0", ids)}
        ends = {(r[0], r[1]) for r in self.conn.execute(
            f"SELECT request_id, arm FROM conversation_ends WHERE request_id IN ({marks})", ids)}
        tools = {(r[0], r[1]): tuple(json.loads(r[2])) for r in self.conn.execute(
            f"SELECT request_id, arm, answers FROM tool_answers WHERE request_id IN ({marks})",
            ids)}
        out = {}
        for arm in arms:
            answers: list[ArmResult] = []
            start = len(ids)
            for i, rid in enumerate(ids):
                row = rows.get((rid, arm))
                if row is None or not row["ok"]:
                    start = i
                    break
                answers.append(decode(row))
                if (rid, arm) in ends:
                    break
            out[arm] = ArmState(tuple(answers), {i: tools[(rid, arm)] for i, rid in enumerate(ids)
                                                 if (rid, arm) in tools}, start)
        return out

    def complete_turn(self, seq: int, owner: str, turn: TurnDone) -> bool:
        """Own mode: write what `turn` says of one arm in conversation `seq`, only while
        the row is leased to `owner`: False (nothing written) for a late writer whose lease
        was taken back."""
        row = encode_row(turn.result, turn.intended_at, owner) if turn.result else None
        with write_transaction(self.conn) as conn:
            held = conn.execute("SELECT 1 FROM work_queue WHERE seq = ? AND owner = ? AND "
                                "done = 0", (seq, owner)).fetchone()
            if not held:
                return False
            if row is not None:
                insert_rows(conn, [row])
            if turn.ended is not None:
                conn.execute("INSERT OR REPLACE INTO conversation_ends VALUES (?, ?, ?)",
                             (turn.request_id, turn.arm, turn.ended))
            if turn.tool_answers is not None:
                calls, answers = turn.tool_answers
                conn.execute("INSERT OR REPLACE INTO tool_answers VALUES (?, ?, ?, ?)",
                             (turn.request_id, turn.arm, json.dumps(calls),
                              json.dumps(answers)))
        return True

    def conversation_ends(self) -> dict[tuple[str, str], str]:
        """(request id, arm) -> why the arm's conversation ended after that turn."""
        try:
            rows = self.conn.execute("SELECT request_id, arm, reason FROM conversation_ends")
        except sqlite3.OperationalError:  # a store from before own mode, opened to read
            return {}
        return {(r[0], r[1]): r[2] for r in rows}

    def complete(self, item: WorkItem, results: Sequence[ArmResult], owner: str,
                 intended_at: float | None = None) -> bool:
        """Write `results` and mark `item` done, in one transaction. False (nothing
        written) when it is already done: the late answer of an earlier claim."""
        return self.complete_many([Completion(item.seq, item.record.id, tuple(results),
                                              intended_at)], owner)[0]

    def complete_many(self, done: Sequence[Completion], owner: str) -> list[bool]:
        """`complete` for a batch (e.g. one message from a worker), in one transaction:
        for each, whether its results were kept (False: it was already done)."""
        for c in done:
            strays = {r.request_id for r in c.results} - {c.request_id}
            if strays:
                raise ValueError(f"results for {sorted(strays)} do not belong to work item "
                                 f"{c.seq} ({c.request_id})")
        rows = [[encode_row(r, c.intended_at, owner) for r in c.results] for c in done]
        kept = []
        with write_transaction(self.conn) as conn:
            for c in done:
                kept.append(bool(conn.execute("UPDATE work_queue SET done = 1, owner = ? "
                                              "WHERE seq = ? AND request_id = ? AND done = 0",
                                              (owner, c.seq, c.request_id)).rowcount))
            insert_rows(conn, [row for first, encoded in zip(kept, rows, strict=True) if first
                               for row in encoded])
        return kept

    def release_expired(self, now: float | None = None) -> int:
        """Put back every unfinished row whose lease has run out; returns how many."""
        now = time.time() if now is None else now
        return self.conn.execute(
            "UPDATE work_queue SET owner = NULL, lease_until = NULL "
            "WHERE done = 0 AND owner IS NOT NULL AND lease_until < ?", (now,)).rowcount

    def release(self, owner: str, seq: int | None = None) -> int:
        """Put back every unfinished row leased to `owner` (known to be gone), or only row
        `seq` (claimed but not sent)."""
        only = "" if seq is None else " AND seq = ?"
        return self.conn.execute(
            "UPDATE work_queue SET owner = NULL, lease_until = NULL "
            f"WHERE done = 0 AND owner = ?{only}",
            (owner,) if seq is None else (owner, seq)).rowcount

    def stop(self) -> None:
        """Hand out nothing more (a run stopped early); `fill` opens the queue again."""
        self.conn.execute("INSERT OR IGNORE INTO queue_meta (key, value) VALUES ('stopped', ?)",
                          (time.time(),))

    def drop_arm(self, arm: str) -> tuple[int, str | None]:
        """Send `arm` nothing more: take it off every row not handed out (never claimed,
        or put back). Returns how many rows lost it and the first one's request id (None
        when none did)."""
        with write_transaction(self.conn) as conn:
            rows = conn.execute("SELECT seq, request_id, arms FROM work_queue "
                                "WHERE done = 0 AND owner IS NULL ORDER BY seq").fetchall()
            arms = [(row["seq"], row["request_id"], json.loads(row["arms"])) for row in rows]
            left = [(seq, rid, [a for a in had if a != arm]) for seq, rid, had in arms
                    if arm in had]
            conn.executemany("UPDATE work_queue SET arms = ?, done = ? WHERE seq = ?",
                             [(json.dumps(arms), int(not arms), seq) for seq, _, arms in left])
        return len(left), left[0][1] if left else None

    def stopped(self) -> bool:
        return self.conn.execute(
            "SELECT 1 FROM queue_meta WHERE key = 'stopped'").fetchone() is not None

    def holders(self) -> dict[str, int]:
        """Unfinished rows leased, by owner."""
        return {row[0]: row[1] for row in self.conn.execute(
            "SELECT owner, COUNT(*) FROM work_queue WHERE done = 0 AND owner IS NOT NULL "
            "GROUP BY owner")}

    def progress(self) -> QueueProgress:
        row = self.conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(done), 0), "
            "COALESCE(SUM(done = 0 AND owner IS NOT NULL), 0), "
            "COALESCE(SUM(MAX(claims - 1, 0)), 0) FROM work_queue").fetchone()
        return QueueProgress(*(int(v) for v in row))

    def started_at(self) -> float | None:
        """`t0`: the wall-clock time of the first claim, None before it."""
        row = self.conn.execute("SELECT value FROM queue_meta WHERE key = 't0'").fetchone()
        return None if row is None else row[0]
