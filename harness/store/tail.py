"""The results of a store as they are written, read incrementally: each `poll` reads only
the rows written since the last one, so following a long run costs O(new rows) per look,
not O(all). A replaced row (the same request, arm, repeat and concurrency written again)
takes the old one's place at the end, as the store's own order (rowid) has it."""

from __future__ import annotations

from exporters.records import ArmResult
from harness.store.results import ResultStore

Key = tuple[str, str, int, int]


class ResultTail:
    def __init__(self, store: ResultStore) -> None:
        self.store = store
        self.last = 0  # the rowid read last
        self._rows: dict[Key, ArmResult] = {}

    def poll(self) -> list[ArmResult]:
        """The rows written since the last poll, in write order."""
        new = self.store.rows_after(self.last)
        for rowid, result in new:
            key = (result.request_id, result.arm, result.repeat, result.concurrency)
            self._rows.pop(key, None)  # re-inserted: it moves to the end
            self._rows[key] = result
            self.last = rowid
        return [result for _, result in new]

    @property
    def results(self) -> list[ArmResult]:
        """Every result so far, as `ResultStore.results()` orders them."""
        return list(self._rows.values())

    def __len__(self) -> int:
        return len(self._rows)
