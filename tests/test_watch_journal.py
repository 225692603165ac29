"""The watch's state file (`--state`): a board rebuilt from it is the board that wrote it,
and a file of another rollout, or not a state file at all, is refused with the reason."""

from __future__ import annotations

import numpy as np
import pytest

from layergate.harness.watch.board import Board, Missing
from layergate.harness.watch.flagger import Payload
from layergate.harness.watch.journal import Journal, StateMismatch
from tests.test_watch_decisions import machine, window

IDENTITY = {"baseline": 'arm="baseline"', "candidate": 'arm="candidate"', "stages": [5, 50, 100]}


def test_a_board_rebuilt_from_its_state_file_is_where_it_was(tmp_path) -> None:
    path = tmp_path / "state.json"
    board = Board(machine, Journal.open(path, IDENTITY, 60.0))
    rng = np.random.default_rng(21)
    board.flagger("rollout", Payload(checksum="r1"))
    for k in range(9):
        board.observe(window(rng, k))
    board.observe(Missing(600, "Prometheus down"))
    before = board.snapshot()
    assert before.status.history == (5,) and before.status.missing == 1
    again = Board(machine, Journal.open(path, IDENTITY, 999.0))
    after = again.snapshot()
    assert after.status == before.status and after.transitions == before.transitions
    assert again.journal.revision == "r1" and again.journal.data["origin"] == 60.0
    assert not list(tmp_path.glob(".*.tmp"))  # written by rename, nothing left beside it


def test_a_new_revision_empties_the_windows_and_the_grid(tmp_path) -> None:
    journal = Journal.open(tmp_path / "state.json", IDENTITY, 60.0)
    board = Board(machine, journal)
    board.flagger("rollout", Payload(checksum="r1"))
    board.observe(window(np.random.default_rng(22), 1))
    board.flagger("rollout", Payload(checksum="r2"))
    assert journal.inputs == [] and journal.data["origin"] is None and journal.epoch == 1
    assert board.snapshot().status.windows == 0


def test_a_state_file_of_another_rollout_names_each_difference(tmp_path) -> None:
    path = tmp_path / "state.json"
    Journal.open(path, IDENTITY, 60.0)
    other = {**IDENTITY, "candidate": 'arm="canary"', "stages": [1, 100]}
    with pytest.raises(StateMismatch) as got:
        Journal.open(path, other, 60.0)
    text = str(got.value)
    assert 'candidate: "arm=\\"candidate\\"" in the file, "arm=\\"canary\\"" now' in text
    assert "stages: [5, 50, 100] in the file, [1, 100] now" in text
    assert "baseline" not in text


def test_a_file_that_is_not_a_state_file_is_refused(tmp_path) -> None:
    path = tmp_path / "state.json"
    path.write_text('{"inputs": [')
    with pytest.raises(ValueError, match="cannot read it as a watch state file"):
        Journal.open(path, IDENTITY, 60.0)
    path.write_text('{"version": 99}')
    with pytest.raises(ValueError, match="not a watch state file of version 1"):
        Journal.open(path, IDENTITY, 60.0)
