"""Speculative decoding's health, per arm that reports it: is the draft still accepted?

spec_acceptance_rate  draft tokens accepted / draft tokens proposed
spec_accept_length    1 + accepted / drafts: tokens emitted per verification pass, the
                      bonus token included (vLLM's "mean acceptance length"); 1.0 means
                      every draft was rejected and speculation only costs
spec_draft_per_token  draft tokens proposed / output tokens emitted

From the answers when they carry draft counts per request (`draft_tokens_proposed`,
`draft_tokens_accepted`, `draft_steps`: layergate's engine in its extension, vLLM in its
`metrics.speculative_decoding` with --per-request-spec-decode-metrics, SGLang in its
`sglext.spec_tokens_details` when asked; ArmResult.per_request):
ratios of sums, with the run's shared stratified bootstrap for an interval, per scenario
too.
Otherwise from the arm's `/metrics` scraped before and after the run (exporters/
spec_counters.py): vLLM's counters as deltas; SGLang's accept length from its counters'
deltas (tokens per verification) and its acceptance rate from its gauge at the last scrape;
one value per arm and no interval (the gate judges a missing end as unbounded, so a rule on it
is inconclusive, never a pass on a point). An arm that reports no drafting has none of
these figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from layergate.exporters.catalogue import (
    SPEC_ACCEPT_LENGTH,
    SPEC_ACCEPTANCE_RATE,
    SPEC_DRAFT_PER_TOKEN,
    SPEC_FIGURES,
)
from layergate.exporters.figures import OVERALL, Figure
from layergate.exporters.figures.aligned import ANSWERS, Aligned
from layergate.exporters.figures.bootstrap import SumTable
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.estimate import SumStat, estimate, status_for
from layergate.exporters.prom_text import has_metrics_endpoint
from layergate.exporters.records import MetricsScrape
from layergate.exporters.spec_counters import SpecCounters, spec_counters

NONE = "no draft tokens proposed"


def _drafting(al: Aligned, arm: str) -> np.ndarray:
    """Rows where the arm answered with draft counts in its extension."""
    x = al.arms[arm]
    return x.ok & np.isfinite(x.draft_tokens) & np.isfinite(x.draft_accepted)


def _reports(al: Aligned, arm: str) -> bool:
    x = al.arms[arm]
    rows = _drafting(al, arm)
    return bool(rows.any()) and float(x.draft_tokens[rows].sum()) > 0


def columns(al: Aligned, config: MetricsConfig) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for arm in al.arms:
        if not _reports(al, arm):
            continue
        x, rows = al.arms[arm], _drafting(al, arm)
        p = f"spec.{arm}."
        steps = np.where(rows & np.isfinite(x.drafts), x.drafts, 0.0)
        tokens = np.where(rows & np.isfinite(x.tokens), x.tokens, 0.0)
        out |= {p + "n": rows.astype(float), p + "proposed": np.where(rows, x.draft_tokens, 0.0),
                p + "accepted": np.where(rows, x.draft_accepted, 0.0),
                p + "drafts": steps, p + "tokens": tokens}
    return out


def _rate(accepted: Any, proposed: Any) -> Any:
    return accepted / proposed


def _length(accepted: Any, drafts: Any) -> Any:
    return 1 + accepted / drafts


def _per_token(proposed: Any, tokens: Any) -> Any:
    return proposed / tokens


def stats(arm: str) -> dict[str, SumStat]:
    p = f"spec.{arm}."
    return {
        SPEC_ACCEPTANCE_RATE: SumStat(_rate, (p + "accepted", p + "proposed"), p + "n", NONE),
        SPEC_ACCEPT_LENGTH: SumStat(_length, (p + "accepted", p + "drafts"), p + "n",
                                    "no draft verified (the engine reports no draft_steps)"),
        SPEC_DRAFT_PER_TOKEN: SumStat(_per_token, (p + "proposed", p + "tokens"), p + "n",
                                      "no output tokens counted"),
    }


def figures(table: SumTable, al: Aligned, scrapes: Sequence[MetricsScrape],
            config: MetricsConfig) -> list[Figure]:
    out: list[Figure] = []
    for arm in al.arms:
        if _reports(al, arm):
            for name, stat in stats(arm).items():
                out += [_sourced(f, ANSWERS) for f in
                        estimate(table, stat, al.scenario_names, config, name, arm)]
        else:
            out += _from_scrapes(scrapes, arm, int(al.arms[arm].ok.sum()), config)
    return out


def _sourced(f: Figure, source: str) -> Figure:
    return Figure(**{**f.__dict__, "detail": {**f.detail, "source": source}})


def _from_scrapes(scrapes: Sequence[MetricsScrape], arm: str, n: int,
                  config: MetricsConfig) -> list[Figure]:
    """The arm's figures from its counters (deltas over the run) or gauges (last scrape)."""
    by_when = {s.when: s for s in scrapes if s.arm == arm}
    if "after" not in by_when or not has_metrics_endpoint(by_when["after"].text):
        return []
    after = spec_counters(by_when["after"].text)
    if after is None:
        return []
    before = (spec_counters(by_when["before"].text, after.server) if "before" in by_when
              else None)
    counted = after.draft_tokens is not None or after.drafts is not None
    d = _delta(before, after) if counted else {}
    if any(v < 0 for v in d.values()):
        return [Figure(name, None, arm, OVERALL, n=n, status="not_computable",
                       reason=f"speculative counters of arm {arm!r} went down "
                              "(restarted?)") for name in SPEC_FIGURES]
    if counted and not (d.get("draft_tokens") or d.get("drafts")):
        return []  # counters present, nothing drafted during the run
    deltas, gauges = "scrapes: counter deltas", "scrapes: gauges at the last scrape"
    if after.draft_tokens is not None:  # drafts, draft tokens and accepted tokens counted
        accepted = _div(d.get("accepted"), d.get("drafts"))
        values = {SPEC_ACCEPTANCE_RATE: (_div(d.get("accepted"), d["draft_tokens"]), deltas),
                  SPEC_ACCEPT_LENGTH: (None if accepted is None else 1 + accepted, deltas),
                  SPEC_DRAFT_PER_TOKEN: (_div(d["draft_tokens"], d.get("emitted")), deltas)}
    elif counted:  # SGLang: verifications and tokens counted, its acceptance a gauge
        values = {SPEC_ACCEPT_LENGTH: (_div(d.get("emitted"), d["drafts"]), deltas),
                  SPEC_ACCEPTANCE_RATE: (after.acceptance_rate, gauges)}
    else:
        values = {SPEC_ACCEPT_LENGTH: (after.accept_length, gauges),
                  SPEC_ACCEPTANCE_RATE: (after.acceptance_rate, gauges)}
    out = []
    for name, (value, source) in values.items():
        status, reason = status_for(value, n, config.min_samples,
                                    f"{after.server} publishes no counter for it")
        detail = {"counters": d} if source == deltas else {}
        out.append(Figure(name, value, arm, OVERALL, n=n, status=status, reason=reason,
                          detail={**detail, "source": source, "server": after.server}))
    return out


def _delta(before: SpecCounters | None, after: SpecCounters) -> dict[str, float]:
    out = {}
    for key in ("drafts", "draft_tokens", "accepted", "emitted"):
        a = getattr(after, key)
        if a is None:
            continue
        b = getattr(before, key) if before is not None else None
        out[key] = a - (b or 0.0)
    return out


def _div(num: float | None, den: float | None) -> float | None:
    return None if num is None or not den else num / den
