"""`--on-advance` / `--on-rollback`: a shell command run exactly once per transition.

The command runs with `sh -c`, the watch's environment plus:

- `LAYERGATE_WATCH_DECISION`: `advance` or `rollback`;
- `LAYERGATE_WATCH_STAGE`: the stage judged, percent of traffic on the candidate (`5`);
- `LAYERGATE_WATCH_NEXT_STAGE`: the share to set now: the next stage, `100` to promote,
  `0` on a rollback;
- `LAYERGATE_WATCH_REASONS`: why, one figure a line;
- `LAYERGATE_WATCH_EXIT_CODE`: what the watch exits with when this transition ends it
  (`0` after the last advance, `1` after a rollback), else empty.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from layergate.exporters.catalogue import ADVANCE, ROLLBACK, exit_code
from layergate.harness.processes import run_captured
from layergate.harness.watch.journal import Journal
from layergate.harness.watch.stages import Transition

ENV_PREFIX = "LAYERGATE_WATCH_"


@dataclass(frozen=True)
class HookResult:
    command: str
    returncode: int | None  # None: it did not finish within the timeout
    output: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def hook_env(t: Transition) -> dict[str, str]:
    code = exit_code(t.ends) if t.ends is not None else None
    return {f"{ENV_PREFIX}DECISION": t.decision, f"{ENV_PREFIX}STAGE": f"{t.stage:g}",
            f"{ENV_PREFIX}NEXT_STAGE": f"{t.next_stage:g}",
            f"{ENV_PREFIX}REASONS": "\n".join(t.reasons),
            f"{ENV_PREFIX}EXIT_CODE": "" if code is None else str(code)}


class Hooks:
    """Runs the command for each transition once; never twice for one transition, even if
    asked again (a retried loop, a restarted watch): the journal records it `started` before
    it runs and `done` after, and a transition recorded done is not run again."""

    def __init__(self, on_advance: str | None, on_rollback: str | None,
                 journal: Journal, timeout: float = 300.0,
                 log: Callable[[str], None] | None = None) -> None:
        self.commands = {ADVANCE: on_advance, ROLLBACK: on_rollback}
        self.journal = journal
        self.timeout = timeout
        self.log = log or (lambda _msg: None)

    def unfinished(self, t: Transition) -> bool:
        """Recorded started but never done: the watch died while it ran."""
        state = self.journal.hook_state(t.key)
        return bool(self.commands[t.decision]) and state is not None \
            and state["state"] == "started"

    def run(self, t: Transition) -> HookResult | None:
        """Run it unless it has no command or is recorded done (an unfinished one reruns:
        check `unfinished` first)."""
        command = self.commands[t.decision]
        state = self.journal.hook_state(t.key)
        if not command or (state is not None and state["state"] == "done"):
            return None
        self.journal.hook(t.key, "started", command=command)
        self.journal.save()
        self.log(f"running --on-{t.decision} for stage {t.stage:g} -> {t.next_stage:g}: "
                 f"{command}")
        result = self._run(command, t)
        self.journal.hook(t.key, "done", command=command, returncode=result.returncode)
        self.journal.save()
        return result

    def _run(self, command: str, t: Transition) -> HookResult:
        got = run_captured(["sh", "-c", command], self.timeout,
                           env={**os.environ, **hook_env(t)})
        return HookResult(command, got.returncode, got.output)
