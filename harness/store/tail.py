"""The results of a store as they are written, read incrementally: each `poll` reads only
the rows written since the last one and hands each to the observers that follow the store
from before it, so following a long run costs O(new rows) per look, not O(all). One reader
serves every follower (the circuit breaker, the live metrics, the stop hook's results)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from layergate.exporters.records import ArmResult
from layergate.harness.store.results import Head, ResultStore

Key = tuple[str, str, int, int]
Observer = Callable[[Any], None]


class StoreTail:
    def __init__(self, store: ResultStore) -> None:
        self.store = store
        self.last: int | None = None  # the rowid read last (None: nothing read yet)
        self._observers: list[tuple[int, Observer, bool]] = []

    def follow(self, observe: Observer, after: int = 0, heads: bool = False) -> None:
        """Call `observe` on every row written after rowid `after` (0: the whole store), in
        write order, as polls read them: an `ArmResult`, or with `heads` only its `Head`.
        Join before the first poll."""
        if self.last is not None and after < self.last:
            raise ValueError(f"a follower from rowid {after} joined after rowid {self.last} "
                             "was read")
        self._observers.append((after, observe, heads))

    def poll(self) -> int:
        """Read the rows written since the last poll, feed them on; how many were new. When
        every follower takes heads, only their columns are read: decoding whole rows was
        most of what following a replay cost (profiled)."""
        start = self.last if self.last is not None else min(
            (after for after, _, _ in self._observers), default=0)
        whole = not all(heads for _, _, heads in self._observers)
        rows = self.store.rows_after(start) if whole else self.store.heads_after(start)
        for rowid, row in rows:
            for after, observe, heads in self._observers:
                if rowid > after:
                    observe(Head.of(row) if heads and whole else row)
        self.last = rows[-1][0] if rows else start
        return len(rows)


class Latest:
    """Every result seen so far, the latest row per (request, arm, repeat, concurrency), as
    `ResultStore.results()` orders them: a replaced row takes the old one's place at the
    end. A follower of a `StoreTail`."""

    def __init__(self) -> None:
        self._rows: dict[Key, ArmResult] = {}
        self.changed = False  # a row came since `results` was last read

    def __call__(self, result: ArmResult) -> None:
        key = (result.request_id, result.arm, result.repeat, result.concurrency)
        self._rows.pop(key, None)  # re-inserted: it moves to the end
        self._rows[key] = result
        self.changed = True

    @property
    def results(self) -> list[ArmResult]:
        self.changed = False
        return list(self._rows.values())

    def __len__(self) -> int:
        return len(self._rows)
