"""A run's candidates, as both machines judge them: a run's arms are baseline, baseline2 and
one or more candidates (exporters.catalogue); each candidate is judged by the one-candidate
gate unchanged, the run shown with that candidate as the arm `candidate` and the others left
out (`as_candidate`), and `--require` turns the candidates' verdicts into the run's
(`combined`)."""

from __future__ import annotations

import dataclasses
import functools

from layergate.exporters.catalogue import (
    CANDIDATE,
    FAIL,
    INCONCLUSIVE,
    PASS,
    REQUIRE_ALL,
    REQUIRE_ANY,
    candidate_arms,
    did_you_mean,
)
from layergate.exporters.errors import UsageError
from layergate.exporters.records import ArmResult
from layergate.harness.rundir import LazyResults, Run


class RequireError(UsageError, ValueError):
    """A `--require` naming no candidate of the run (a usage error)."""


def candidates_of(run: Run) -> tuple[str, ...]:
    """The run's candidates in run order (from its manifest, else its rows)."""
    arms = run.manifest.arms or dict.fromkeys(r.arm for r in run.results)
    return candidate_arms(arms)


def as_candidate(run: Run, name: str) -> Run:
    """`run` with `name` as its one candidate: its rows, scrapes and manifest entries on the
    arm `candidate`, the other candidates' left out."""
    if candidates_of(run) == (CANDIDATE,) == (name,):
        return run  # already so: its rows stay unread (figures read the store as columns)
    arm = _renaming(candidates_of(run), name)

    def keyed(d: dict) -> dict:
        return {arm(k): v for k, v in d.items() if arm(k) is not None}

    manifest = run.manifest
    config = dict(manifest.config)
    if isinstance(config.get("models"), dict):
        config["models"] = keyed(config["models"])
    manifest = dataclasses.replace(manifest, arms=keyed(manifest.arms),
                                   counts=keyed(manifest.counts), config=config)
    scrapes = [s if s.arm != name else dataclasses.replace(s, arm=CANDIDATE)
               for s in run.scrapes if arm(s.arm) is not None]
    sub = run.determinism
    determinism = as_candidate(sub, name) if sub is not None and name in {
        r.arm for r in sub.results} else sub
    return run.seen_as(arm, manifest=manifest, scrapes=scrapes,
                       results=LazyResults(functools.partial(
                           rows_as_candidate, run.results, name, candidates_of(run))),
                       determinism=determinism)


def _renaming(names: tuple[str, ...], name: str):
    others = set(names) - {name}
    return lambda a: None if a in others else CANDIDATE if a == name else a


def rows_as_candidate(rows: list[ArmResult], name: str, names: tuple[str, ...]
                      ) -> list[ArmResult]:
    """`rows` of the reference arms and of candidate `name` (as the arm `candidate`)."""
    arm = _renaming(names, name)
    return [r if r.arm != name else dataclasses.replace(r, arm=CANDIDATE)
            for r in rows if arm(r.arm) is not None]


def combined(verdicts: dict[str, str], require: str) -> str:
    """The run's verdict from its candidates' under `--require`: all must pass (any fail
    fails), any may pass (all failing fails), or the named one's."""
    chosen = list(verdicts.values())
    if require == REQUIRE_ALL:
        return FAIL if FAIL in chosen else INCONCLUSIVE if INCONCLUSIVE in chosen else PASS
    if require == REQUIRE_ANY:
        return PASS if PASS in chosen else INCONCLUSIVE if INCONCLUSIVE in chosen else FAIL
    return verdicts[require]


def check_require(require: str, names: tuple[str, ...]) -> str:
    if require in (REQUIRE_ALL, REQUIRE_ANY) or require in names:
        return require
    raise RequireError(f"--require {require!r}: not all, any or a candidate of the run "
                       f"({', '.join(names)}){did_you_mean(require, names)}")
