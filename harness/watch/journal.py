"""`watch --state FILE`: the watch's evidence, kept across restarts.

One JSON object, rewritten atomically (a temporary file beside it, flushed to disk, then
renamed over it) after every window and every controller answer:

- `identity`: what makes it this rollout (the selectors, engine, stages, window settings
  and policy); a file written for another rollout is refused, each difference named;
- `origin`: the end of the watch's first window, so a restarted watch keeps the window grid
  and reads the windows it missed from Prometheus (none after a new revision: its windows
  start when it is next watched);
- `revision`, `epoch`: the controller's revision (Flagger's `checksum`) and how many
  revisions this file has seen; a new one empties `inputs` and starts the stages over;
- `inputs`: this revision's windows in order, each arm's increases or why there were none.
  The sequences, the stage and the verdict are a pure function of them
  (`stages.StageMachine`), so replaying them restores exactly the state the watch had;
- `hooks`: per transition, `started` before the command runs and `done` (with its exit
  status) after; a done transition never runs again;
- `grants`, `answers`, `events`: each confirm-traffic-increase granted, every controller
  answer, every revision adopted or reset.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from layergate.exporters.atomic import write_json_atomic
from layergate.exporters.catalogue import BASELINE, CANDIDATE
from layergate.exporters.errors import UsageError
from layergate.exporters.figures.canary import ArmWindow, Window

VERSION = 1


class StateFileError(UsageError, ValueError):
    """A --state file that cannot be read or written."""


class StateMismatch(StateFileError):
    """The state file belongs to another rollout."""


def window_entry(window: Window) -> dict[str, Any]:
    return {"start": window.start, "end": window.end,
            BASELINE: dict(window.baseline.values),
            CANDIDATE: dict(window.candidate.values)}


def window_of(entry: dict[str, Any]) -> Window:
    return Window(entry["start"], entry["end"], ArmWindow(entry[BASELINE]),
                  ArmWindow(entry[CANDIDATE]))


class Journal:
    """The state file's content in memory; `save()` writes it (a no-op without a path)."""

    def __init__(self, path: Path | None, data: dict[str, Any]) -> None:
        self.path, self.data = path, data
        self._lock = threading.RLock()

    @classmethod
    def open(cls, path: Path | None, identity: dict[str, Any], origin: float) -> Journal:
        """The journal at `path` (created with `origin` when absent or empty). Raises
        StateMismatch when it names another rollout, StateFileError when it is unreadable."""
        fresh = {"version": VERSION, "identity": identity, "origin": origin,
                 "revision": None, "epoch": 0, "inputs": [], "hooks": {}, "grants": [],
                 "answers": [], "events": []}
        if path is None or not path.exists() or path.stat().st_size == 0:
            journal = cls(path, fresh)
            try:
                journal.save()
            except OSError as exc:
                raise StateFileError(f"--state {path}: cannot write it: "
                                 f"{exc.strerror or exc}") from exc
            return journal
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StateFileError(f"--state {path}: cannot read it as a watch state file: "
                             f"{exc}") from exc
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise StateFileError(f"--state {path}: not a watch state file of version {VERSION}")
        diffs = differences(data.get("identity", {}), identity)
        if diffs:
            raise StateMismatch(f"--state {path} was written for another rollout: "
                                + "; ".join(diffs)
                                + ". Use a new state file for a new rollout.")
        return cls(path, data)

    # --- reading ---------------------------------------------------------------------
    @property
    def inputs(self) -> list[dict[str, Any]]:
        return self.data["inputs"]

    @property
    def epoch(self) -> int:
        return self.data["epoch"]

    @property
    def revision(self) -> str | None:
        return self.data["revision"]

    def hook_state(self, key: str) -> dict[str, Any] | None:
        return self.data["hooks"].get(self._hook_key(key))

    def last_grant(self) -> dict[str, Any] | None:
        grants = [g for g in self.data["grants"] if g["epoch"] == self.epoch]
        return grants[-1] if grants else None

    # --- recording -------------------------------------------------------------------
    def record_input(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self.inputs.append(entry)

    def new_revision(self, checksum: str, reset: bool = True) -> bool:
        """Take `checksum` as the revision; True when the stages start over (it replaced
        another, or `reset`: the first named after a verdict, which is no verdict of its)."""
        with self._lock:
            old = self.revision
            self.data["revision"] = checksum
            if old is None and not reset:
                self._event("adopted", checksum=checksum)
                return False
            self.data["epoch"] += 1
            self.data["inputs"] = []
            self.data["reading"] = None
            self.data["origin"] = None  # its windows start when it is watched
            self._event("reset", checksum=checksum, previous=old)
            return True

    def note(self, **values: Any) -> None:
        """Top-level values shown for a reader of the file (the stage, the verdict)."""
        with self._lock:
            self.data.update(values)

    def hook(self, key: str, state: str, **detail: Any) -> None:
        with self._lock:
            self.data["hooks"][self._hook_key(key)] = {"state": state, "at": time.time(),
                                                       **detail}

    def grant(self, weight: float, at: float, passed: tuple[float, ...]) -> None:
        """A step granted from `weight` at `at`, with the stages passed by then."""
        with self._lock:
            self.data["grants"].append({"epoch": self.epoch, "weight": weight, "at": at,
                                        "passed": list(passed)})

    def answer(self, **entry: Any) -> None:
        with self._lock:
            self.data["answers"].append({"at": time.time(), "epoch": self.epoch, **entry})

    def save(self) -> None:
        if self.path is None:
            return
        with self._lock:
            write_json_atomic(self.path, self.data, indent=None)

    def _hook_key(self, key: str) -> str:
        return f"{self.epoch}:{key}"

    def _event(self, kind: str, **detail: Any) -> None:
        self.data["events"].append({"at": time.time(), "event": kind, "epoch": self.epoch,
                                    **detail})


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Each setting that differs, as '<key>: <in the file> in the file, <now> now'."""
    keys = sorted(set(old) | set(new))
    return [f"{k}: {json.dumps(old.get(k))} in the file, {json.dumps(new.get(k))} now"
            for k in keys if old.get(k) != new.get(k)]
