"""Accuracy against the traffic's references (exporters/references.py), per arm, and the
candidate's paired difference from the baseline beside A' vs A (the noise floor).

accuracy           share right among the requests with a reference the arm answered
accuracy_delta     arm minus baseline over the requests both answered (paired): the share
                   wrong on A and right on X minus the share right on A and wrong on X
right_to_wrong     share right on the baseline and wrong on the arm (wrong_to_right: the
                   reverse); detail["examples"] names a few request ids of each
accuracy_mcnemar_p McNemar's exact test: the discordant pairs against Binomial(b + c, 1/2)
judge_disagreement (baseline2, with `judge` references) the share of the requests both
                   baselines answered with the same text whose verdicts differ: the
                   judge's own noise, which any judged accuracy_delta carries

The intervals are the run's shared stratified bootstrap (paired: every arm sees the same
resampled requests). Figures appear only when some request of the run has a reference.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from layergate.exporters.catalogue import (
    ACCURACY,
    ACCURACY_DELTA,
    ACCURACY_MCNEMAR_P,
    BASELINE,
    BASELINE2,
    CANDIDATE,
    JUDGE_DISAGREEMENT,
    RIGHT_TO_WRONG,
    WRONG_TO_RIGHT,
)
from layergate.exporters.figures import Figure
from layergate.exporters.figures.aligned import Aligned, compared_arms
from layergate.exporters.figures.bootstrap import SumTable
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.estimate import SumStat, estimate, scenarios, status_for
from layergate.exporters.judgements import FILE as JUDGEMENTS
from layergate.exporters.judgements import digest, read_judgements, verdicts_of
from layergate.exporters.references import BadReference, Reference, parse_reference, score
from layergate.exporters.traffic import mentions

JUDGE = "judge"  # the reference kind scored by a judge's verdicts
EXAMPLES = 3  # request ids kept per direction and scenario, for the reports
NONE = "no request with a reference answered by the arm"
NONE_PAIRED = "no request with a reference answered by both arms"
NONE_SAME = "no judged request the two baselines answered with the same text"


def read_references(path: str | Path) -> dict[str, Reference]:
    """Request id -> its reference, from the traffic file at `path` (empty, and nothing
    parsed, when no line mentions one). A bad reference is a ValueError naming the line."""
    path = Path(path)
    if not mentions(path, '"reference"'):
        return {}
    out: dict[str, Reference] = {}
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if '"reference"' not in line:
                continue
            obj = json.loads(line)
            raw = obj.get("reference") if isinstance(obj, dict) else None
            if raw is None:
                continue
            try:
                out[str(obj["id"])] = parse_reference(raw)
            except BadReference as exc:
                raise ValueError(f"{path}:{number}: reference.{exc.field}: {exc.message}"
                                 ) from None
    return out


def read_verdicts(run_path: str | Path) -> Verdicts:
    """The verdicts a judge left in the run directory (none without a judgements file)."""
    return verdicts_of(read_judgements(Path(run_path) / JUDGEMENTS))


def mcnemar_exact(right_to_wrong: int, wrong_to_right: int) -> float:
    """Two-sided exact McNemar p-value: min(b, c) of b + c discordant pairs against
    Binomial(b + c, 1/2), as scipy.stats.binomtest(b, b + c).pvalue; 1 with none."""
    from scipy.special import bdtr  # the binomial CDF; scipy.special is already loaded

    n = right_to_wrong + wrong_to_right
    if n == 0:
        return 1.0
    return float(min(1.0, 2 * bdtr(min(right_to_wrong, wrong_to_right), n, 0.5)))


def _arms(al: Aligned) -> tuple[str, ...]:
    return tuple(a for a in (BASELINE, *compared_arms(al)) if a in al.arms)


@dataclass(frozen=True)
class Scores:
    """Every arm's outputs held to the references once (the columns and the figures both
    need it): which rows have a reference, and per arm which it answered right."""

    has: np.ndarray  # bool per row
    right: dict[str, np.ndarray]  # arm -> bool per row: answered, and right
    # arm -> bool per row: answered and scored (a `judge` reference only with a verdict)
    scored: dict[str, np.ndarray]
    # arm -> row -> sha256 of the output, for the rows a judge's verdict scored
    judged_text: dict[str, dict[int, str]]


# (request id, arm, sha256 of the output) -> a judge's verdict (exporters/judgements.py)
Verdicts = Mapping[tuple[str, str, str], bool | None]


def score_outputs(al: Aligned, references: Mapping[str, Reference] | None,
                  verdicts: Verdicts | None = None) -> Scores | None:
    """The outputs of the baseline and the compared arms scored; None when no request of
    the run has a reference (then there are no accuracy figures). A `judge` reference is
    scored by the verdict kept for that arm's output, and left out without one."""
    if not references or BASELINE not in al.arms:
        return None
    has = np.array([rid in references for rid in al.request_ids], dtype=bool)
    if not has.any():
        return None
    right, scored, texts = {}, {}, {}
    for arm in _arms(al):
        x = al.arms[arm]
        mine, done = np.zeros(al.n, dtype=bool), np.zeros(al.n, dtype=bool)
        texts[arm] = {}
        rows = np.flatnonzero(x.ok & has)
        for i, output in zip(rows, x.outputs(rows), strict=True):
            rid, text = al.request_ids[i], output.answer or ""
            reference = references[rid]
            if reference.kind == JUDGE:
                sha = digest(text)
                verdict = (verdicts or {}).get((rid, arm, sha))
                if verdict is None:
                    continue
                mine[i] = verdict
                texts[arm][int(i)] = sha
            else:
                mine[i] = score(reference, text)
            done[i] = True
        right[arm], scored[arm] = mine, done
    return Scores(has, right, scored, texts)


def columns(al: Aligned, config: MetricsConfig, scores: Scores | None
            ) -> dict[str, np.ndarray]:
    if scores is None:
        return {}
    right = scores.right
    out: dict[str, np.ndarray] = {}
    for arm in _arms(al):
        p = f"acc.{arm}."
        out[p + "n"] = scores.scored[arm].astype(float)
        out[p + "right"] = right[arm].astype(float)
        if arm == BASELINE:
            continue
        pair = scores.scored[BASELINE] & scores.scored[arm]
        out[p + "pair"] = pair.astype(float)
        out[p + "rw"] = (pair & right[BASELINE] & ~right[arm]).astype(float)
        out[p + "wr"] = (pair & ~right[BASELINE] & right[arm]).astype(float)
    if _judge_noise_measurable(scores):
        a, b = (scores.judged_text[x] for x in (BASELINE, BASELINE2))
        same = np.zeros(al.n, dtype=bool)
        same[[i for i, sha in a.items() if b.get(i) == sha]] = True
        out["judge.same"] = same.astype(float)
        out["judge.differ"] = (same & (right[BASELINE] != right[BASELINE2])).astype(float)
    return out


def _judge_noise_measurable(scores: Scores) -> bool:
    """A judge scored some output of both baselines: its own noise can be counted."""
    texts = scores.judged_text
    return BASELINE2 in texts and bool(texts[BASELINE]) and bool(texts[BASELINE2])


def _share(x: Any, n: Any) -> Any:
    return x / n


def _delta(rw: Any, wr: Any, n: Any) -> Any:
    return (wr - rw) / n


def paired_stats(arm: str) -> dict[str, SumStat]:
    p = f"acc.{arm}."
    return {
        ACCURACY_DELTA: SumStat(_delta, (p + "rw", p + "wr", p + "pair"), p + "pair",
                                NONE_PAIRED),
        RIGHT_TO_WRONG: SumStat(_share, (p + "rw", p + "pair"), p + "pair", NONE_PAIRED),
        WRONG_TO_RIGHT: SumStat(_share, (p + "wr", p + "pair"), p + "pair", NONE_PAIRED),
    }


def figures(table: SumTable, al: Aligned, config: MetricsConfig, scores: Scores | None
            ) -> list[Figure]:
    if scores is None:
        return []
    out: list[Figure] = []
    for arm in _arms(al):
        p = f"acc.{arm}."
        out += estimate(table, SumStat(_share, (p + "right", p + "n"), p + "n", NONE),
                        al.scenario_names, config, ACCURACY, arm)
    for arm in compared_arms(al):
        with_floor = arm == CANDIDATE and BASELINE2 in compared_arms(al)
        floor = paired_stats(BASELINE2) if with_floor else None
        flips = _flips(al, scores, arm)
        for name, stat in paired_stats(arm).items():
            def detail(s: int | None, name: str = name, flips: dict = flips
                       ) -> dict[str, Any]:
                key = "rw" if name == RIGHT_TO_WRONG else "wr" if name == WRONG_TO_RIGHT \
                    else None
                return {"examples": flips[key][s]} if key else {}
            out += estimate(table, stat, al.scenario_names, config, name, arm,
                            noise=floor[name] if floor else None, detail=detail)
        out += _mcnemar(table, al, config, arm, BASELINE2 if with_floor else None)
    if _judge_noise_measurable(scores):
        out += estimate(table, SumStat(_share, ("judge.differ", "judge.same"), "judge.same",
                                       NONE_SAME),
                        al.scenario_names, config, JUDGE_DISAGREEMENT, BASELINE2)
    return out


def _flips(al: Aligned, scores: Scores, arm: str) -> dict[str, dict[int | None, list[str]]]:
    """"rw" / "wr" -> stratum (None: overall) -> the first few request ids that flipped."""
    right = scores.right
    pair = scores.scored[BASELINE] & scores.scored[arm]
    masks = {"rw": pair & right[BASELINE] & ~right[arm],
             "wr": pair & ~right[BASELINE] & right[arm]}
    out: dict[str, dict[int | None, list[str]]] = {}
    for key, mask in masks.items():
        out[key] = {s: [al.request_ids[i] for i in np.flatnonzero(
            mask if s is None else mask & (al.strata == s))[:EXAMPLES]]
            for _, s in scenarios(al.scenario_names)}
    return out


def _mcnemar(table: SumTable, al: Aligned, config: MetricsConfig, arm: str,
             floor_arm: str | None) -> list[Figure]:
    out = []
    for label, s in scenarios(al.scenario_names):
        def counts(x: str, s: int | None = s) -> tuple[int, int, int]:
            rw, wr, n = (int(round(table.sums(f"acc.{x}.{c}", s)[0]))
                         for c in ("rw", "wr", "pair"))
            return rw, wr, n
        rw, wr, n = counts(arm)
        value = mcnemar_exact(rw, wr) if n else None
        status, reason = status_for(value, n, config.min_samples, NONE_PAIRED)
        detail: dict[str, Any] = {RIGHT_TO_WRONG: rw, WRONG_TO_RIGHT: wr,
                                  "test": "McNemar exact (two-sided binomial, p = 1/2)"}
        noise = None
        if floor_arm is not None:
            frw, fwr, fn = counts(floor_arm)
            noise = mcnemar_exact(frw, fwr) if fn else None
            detail["noise_floor_n"] = fn
        out.append(Figure(ACCURACY_MCNEMAR_P, value, arm=arm, scenario=label, n=n,
                          status=status, reason=reason, noise_floor=noise, detail=detail))
    return out
