"""Files written whole or not at all (exporters/atomic.py), the one owner of the writes."""

from __future__ import annotations

import json

import pytest

from layergate.exporters.atomic import atomic_file, write_json_atomic


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "deep" / "state.json"
    write_json_atomic(path, {"a": "é"})
    assert json.loads(path.read_text(encoding="utf-8")) == {"a": "é"}
    assert "é" in path.read_text(encoding="utf-8")  # UTF-8, not \\u escapes
    with pytest.raises(TypeError):
        write_json_atomic(path, {"a": object()})  # not serialisable: nothing written
    with pytest.raises(RuntimeError), atomic_file(path) as fh:
        fh.write("half")
        raise RuntimeError("crash mid-write")
    assert json.loads(path.read_text(encoding="utf-8")) == {"a": "é"}
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]


def test_compact_json_for_files_rewritten_often(tmp_path):
    path = write_json_atomic(tmp_path / "j.json", {"a": [1, 2]}, indent=None)
    assert path.read_text(encoding="utf-8") == '{"a":[1,2]}\n'
