"""Latency and cost per arm: TTFT / TPOT / ITL / E2E percentiles, jitter, goodput under an
SLO, token efficiency, error rate; and the paired per-token latency ratio against the
baseline with a Wilcoxon signed-rank test.

Percentile CIs come from order statistics; e2e_jitter = p99 - p50 with the conservative
interval [p99_low - p50_high, p99_high - p50_low]. goodput = share of the arm's requests
that succeeded within the SLO (TTFT, or E2E when TTFT was not measured, and TPOT).
token_efficiency = useful positions / `computed_tokens` (engine extension), useful = prompt
tokens not served from the prefix cache + output tokens - 1: 1.0 means no padding and no
rejected drafts.
latency_ratio = geometric mean over paired requests of (E2E_X/tokens_X) / (E2E_A/tokens_A);
ttft_latency_ratio and tpot_latency_ratio the same of TTFT_X / TTFT_A and TPOT_X / TPOT_A.
"""

from __future__ import annotations

import numpy as np

from layergate.exporters.catalogue import (
    BASELINE,
    BASELINE2,
    CANDIDATE,
    E2E_JITTER,
    ERROR_RATE,
    GOODPUT,
    LATENCY_RATIO,
    QUANTILES,
    RECORDED,
    TOKEN_EFFICIENCY,
    TPOT_LATENCY_RATIO,
    TTFT_LATENCY_RATIO,
)
from layergate.exporters.figures import Figure
from layergate.exporters.figures.aligned import Aligned, ArmColumns, compared_arms, lacking
from layergate.exporters.figures.bootstrap import SumTable
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.estimate import SumStat, estimate, scenarios, status_for
from layergate.exporters.figures.stats import quantiles_ci, wilcoxon


def reasoned(al: Aligned) -> bool:
    """Whether any answer of the run reasoned before it answered."""
    return any(bool((x.ok & (x.part("reasoning_chars") > 0)).any()) for x in al.arms.values())


def measured_arms(al: Aligned) -> tuple[str, ...]:
    return tuple(a for a in al.arms if a != RECORDED)


def tpot(x: ArmColumns) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x.ok & (x.tokens >= 2), (x.e2e - x.ttft) / (x.tokens - 1), np.nan)


def _itl(al: Aligned, x: ArmColumns) -> tuple[np.ndarray, np.ndarray]:
    """All inter-token gaps of ok requests in row order (so each scenario's are
    contiguous), and where each stratum's begin and end in them."""
    rows = np.flatnonzero(x.ok)
    ends = np.cumsum(x.itl_len[rows])
    cut = np.searchsorted(rows, np.searchsorted(al.strata, np.arange(len(al.scenario_names)
                                                                     + 1)))
    return x.gaps(rows), np.concatenate([[0], ends])[cut]


def columns(al: Aligned, config: MetricsConfig) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for arm in measured_arms(al):
        x = al.arms[arm]
        first = np.where(np.isfinite(x.ttft), x.ttft, x.e2e)
        t = tpot(x)
        good = x.ok & (first <= config.slo_ttft_s) & (~np.isfinite(t) | (t <= config.slo_tpot_s))
        eff = x.ok & np.isfinite(x.computed_tokens) & (x.computed_tokens > 0) \
            & np.isfinite(x.prompt_tokens)
        # positions that had to be computed: the uncached prompt, and every output token but
        # the last (it is sampled, never fed back); padding and rejected drafts are the rest
        useful = (x.prompt_tokens - np.nan_to_num(x.cache_hits)) + np.maximum(x.tokens - 1, 0)
        p = f"lat.{arm}."
        out |= {p + "n": x.present.astype(float), p + "good": good.astype(float),
                p + "error": (x.present & ~x.ok).astype(float), p + "eff_n": eff.astype(float),
                p + "useful": np.where(eff, useful, 0.0),
                p + "computed": np.where(eff, x.computed_tokens, 0.0)}
    a = al.arms.get(BASELINE)
    for arm in compared_arms(al):
        x = al.arms[arm]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = {"": (x.e2e / x.tokens) / (a.e2e / a.tokens), "ttft_": x.ttft / a.ttft,
                      "tpot_": tpot(x) / tpot(a)}
        for kind, ratio in ratios.items():
            with np.errstate(divide="ignore", invalid="ignore"):
                logr = np.log(ratio)
            valid = a.ok & x.ok & np.isfinite(logr)
            out[f"lat.{arm}.{kind}lr_n"] = valid.astype(float)
            out[f"lat.{arm}.{kind}logr"] = np.where(valid, logr, 0.0)
    return out


def _quantile_figures(al: Aligned, arm: str, config: MetricsConfig) -> list[Figure]:
    x = al.arms[arm]
    itl_values, itl_bounds = _itl(al, x)
    series = {"ttft": np.where(x.ok, x.ttft, np.nan), "tpot": tpot(x), "itl": itl_values,
              "e2e": np.where(x.ok, x.e2e, np.nan)}
    if reasoned(al):  # the first answer token differs from the first token only then
        series["ttfat"] = np.where(x.ok, x.part("answer_ttft"), np.nan)
    rows = np.searchsorted(al.strata, np.arange(len(al.scenario_names) + 1))
    found = {}
    # each scenario's before the run's: the series are this function's to reorder, and a
    # scenario's values stay in its block, so no series is copied (the gaps: tens of MB)
    for stratum in [*range(len(al.scenario_names)), None]:
        for kind, values in series.items():
            bounds = itl_bounds if kind == "itl" else rows
            v = values if stratum is None else values[bounds[stratum]:bounds[stratum + 1]]
            found[stratum, kind] = int(np.isfinite(v).sum()), quantiles_ci(
                v, tuple(QUANTILES.values()), config.confidence, reorder=True)
    out = []
    for label, stratum in scenarios(al.scenario_names):
        for kind in series:
            n, at = found[stratum, kind]
            got = dict(zip(QUANTILES, at, strict=True))
            why = f"no {kind.upper()} measured"
            if kind == "tpot":  # per token: needs token counts
                why = lacking(al, (arm,), "tokens", why)
            for qname, (point, low, high) in got.items():
                status, reason = status_for(point, n, config.min_samples, why)
                open_ci = {"ci_note": "a CI bound lies beyond the sample: too few requests "
                                      "for this percentile"} \
                    if point is not None and (low is None or high is None) else {}
                out.append(Figure(f"{kind}_{qname}", point, arm, label, low, high, n, status,
                                  reason, detail=open_ci))
            if kind == "e2e":
                (p50, l50, h50), (p99, l99, h99) = got["p50"], got["p99"]
                jitter = p99 - p50 if p50 is not None else None
                low = l99 - h50 if l99 is not None and h50 is not None else None
                high = h99 - l50 if h99 is not None and l50 is not None else None
                status, reason = status_for(jitter, n, config.min_samples, "no E2E measured")
                out.append(Figure(E2E_JITTER, jitter, arm, label, low, high, n, status,
                                  reason))
    return out


def _paired_test(al: Aligned, table: SumTable, arm: str, stratum: int | None) -> dict:
    a, x = al.arms[BASELINE], al.arms[arm]
    rows = slice(None) if stratum is None else al.block(al.scenario_names[stratum])
    with np.errstate(divide="ignore", invalid="ignore"):
        logr = np.log((x.e2e[rows] / x.tokens[rows]) / (a.e2e[rows] / a.tokens[rows]))
    test = wilcoxon(logr[a.ok[rows] & x.ok[rows]])
    if test is None:
        return {"test": "wilcoxon signed-rank", "p_value": None}
    return {"test": "wilcoxon signed-rank", "p_value": test.p_value,
            "effect_size": test.effect_size, "effect_size_kind": "rank-biserial",
            "statistic": test.statistic, "method": test.method, "n_nonzero": test.n}


def percentiles(al: Aligned, config: MetricsConfig) -> dict[str, list[Figure]]:
    """Each measured arm's percentile figures (TTFT, TPOT, ITL, E2E, jitter): the only
    figures that read every inter-token gap, so a caller can make them first and let the
    gaps go (`Aligned.without_gaps`) before the bootstrap."""
    return {arm: _quantile_figures(al, arm, config) for arm in measured_arms(al)}


def figures(table: SumTable, al: Aligned, config: MetricsConfig,
            made: dict[str, list[Figure]] | None = None) -> list[Figure]:
    """The latency figures; `made`: their percentiles made already (`percentiles`)."""
    made = made if made is not None else percentiles(al, config)
    out: list[Figure] = []
    for arm in measured_arms(al):
        out += made[arm]
        p = f"lat.{arm}."
        for name, stat in (
            (GOODPUT, SumStat(lambda g, n: g / n, (p + "good", p + "n"), p + "n")),
            (ERROR_RATE, SumStat(lambda e, n: e / n, (p + "error", p + "n"), p + "n")),
            (TOKEN_EFFICIENCY, SumStat(lambda u, c: u / c, (p + "useful", p + "computed"),
                                       p + "eff_n", lacking(
                                           al, (arm,), "extension", "the arm reported no "
                                           "computed_tokens / prompt usage")))):
            out += estimate(table, stat, al.scenario_names, config, name, arm)
    arms = compared_arms(al)
    for arm in arms:
        for name, kind, why in ((LATENCY_RATIO, "", "no request succeeded with output tokens on "
                                 "both arms"),
                                (TTFT_LATENCY_RATIO, "ttft_", "no paired request with a TTFT"),
                                (TPOT_LATENCY_RATIO, "tpot_", "no paired request with a TPOT "
                                 "(TTFT and >= 2 tokens)")):
            def ratio(of: str, kind: str = kind, why: str = why) -> SumStat:
                p = f"lat.{of}.{kind}"
                return SumStat(lambda s, n: np.exp(s / n), (p + "logr", p + "lr_n"), p + "lr_n",
                               lacking(al, (BASELINE, of), "tokens", why) if kind != "ttft_"
                               else why)
            noise = ratio(BASELINE2) if arm == CANDIDATE and BASELINE2 in arms else None
            test = (lambda s, arm=arm: _paired_test(al, table, arm, s)) \
                if name == LATENCY_RATIO else None
            out += estimate(table, ratio(arm), al.scenario_names, config, name, arm,
                            noise=noise, detail=test)
    return out
