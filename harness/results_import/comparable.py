"""Whether two imported arms were run alike, before any verdict: the same endpoint, dataset
and prompts, max tokens and ignore_eos, rate or concurrency, warm-up, and who counted the
tokens (model.COMPARED). A setting both tools recorded and that differs is a mismatch,
refused unless allowed (then a warning in every report); one a tool did not record cannot be
checked, and is said so.

The prompts are compared by overlap, not by equality: a run that sent one request more or
less than another (GuideLLM's request limit let a 25th of 24 through here once, under load)
sent the same prompts, and the requests the other lacks are left unpaired. Under SAME_PROMPTS
of the larger run's requests in common (and more than one apart), the prompts differ."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from layergate.harness.results_import.model import COMPARED, ResultsError

Settings = Mapping[str, str | None]
PROMPTS = "prompts"
SAME_PROMPTS = 0.9  # share of the larger run's requests the other sent too


class NotComparable(ResultsError):
    """Arms whose runs differ in a setting that makes their figures incomparable (exit 2)."""


@dataclass(frozen=True)
class Mismatch:
    setting: str
    arm: str  # the arm already in the run
    theirs: str
    ours: str

    def words(self, new_arm: str) -> str:
        return (f"{self.setting} differs: {self.arm} {self.theirs!r}, {new_arm} "
                f"{self.ours!r}")


def compare(new_arm: str, ours: Settings, arms: Mapping[str, Settings]
            ) -> tuple[list[Mismatch], list[str]]:
    """The mismatches of `ours` against each arm already imported, and the settings that
    could not be checked (not recorded on one side or the other)."""
    mismatches, unchecked = [], []
    for setting in COMPARED:
        if setting == PROMPTS:  # by overlap: prompts_mismatch
            continue
        for arm, theirs in arms.items():
            a, b = theirs.get(setting), ours.get(setting)
            if a is None or b is None:
                missing = [name for name, v in ((arm, a), (new_arm, b)) if v is None]
                unchecked.append(f"{setting} (not recorded for {', '.join(missing)})")
                break
            if a != b:
                mismatches.append(Mismatch(setting, arm, a, b))
                break
    return mismatches, unchecked


def prompt_overlap(ours: Collection[str], theirs: Collection[str]) -> float:
    """The share of the larger run's requests (prompt and occurrence) the other sent too."""
    larger = max(len(ours), len(theirs))
    return len(set(ours) & set(theirs)) / larger if larger else 0.0


def prompts_mismatch(new_arm: str, ours: Collection[str] | None,
                     arms: Mapping[str, Collection[str] | None]) -> tuple[list[Mismatch],
                                                                       list[str]]:
    """The prompts compared with each arm's by overlap (None: the tool gave no identity):
    a mismatch under SAME_PROMPTS in common, else nothing; unchecked where unknown."""
    for arm, theirs in arms.items():
        if ours is None or theirs is None:
            missing = [name for name, v in ((arm, theirs), (new_arm, ours)) if v is None]
            return [], [f"{PROMPTS} (not recorded for {', '.join(missing)})"]
        share = prompt_overlap(ours, theirs)
        apart = max(len(ours), len(theirs)) - len(set(ours) & set(theirs))
        if share < SAME_PROMPTS and apart > 1:  # one request more or less pairs the rest
            return [Mismatch(PROMPTS, arm, f"{len(theirs)} requests",
                             f"{len(ours)} requests, {share:.0%} of them in common")], []
    return [], []


def refuse(new_arm: str, mismatches: list[Mismatch]) -> None:
    """Raise NotComparable naming every setting that differs."""
    if mismatches:
        lines = "; ".join(m.words(new_arm) for m in mismatches)
        raise NotComparable(f"arm {new_arm!r} is not comparable with the run: {lines}. "
                            "Rerun the tool alike, or import with --allow (every report "
                            "then carries this warning)")
