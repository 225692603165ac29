"""Consistency of an arm's outputs against the baseline's, beside A' vs A (noise floor).

exact_match      share of paired requests with identical output (token ids when both
                 arms returned them, else the text)
first_divergence mean length of the common prefix (tokens; whitespace words without ids):
                 the position of the first differing token, the full length when identical
bleu, chrf       sacreBLEU corpus scores of the arm's texts against the baseline's, on at
                 most `text_sample` pairs (a seeded sample, proportional per scenario)
token_kl         mean per-token KL (see layergate.exporters.figures.token_kl) when top_logprobs are
present
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from layergate.exporters import tokenizer
from layergate.exporters.catalogue import (
    BASELINE,
    BASELINE2,
    BLEU,
    CANDIDATE,
    CHRF,
    EXACT_MATCH,
    FIRST_DIVERGENCE,
    TOKEN_KL,
    Answer,
    compared_tokens,
    same_output,
)
from layergate.exporters.figures import Figure
from layergate.exporters.figures.aligned import Aligned, ArmColumns, compared_arms, lacking
from layergate.exporters.figures.bootstrap import SumTable, compact
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.estimate import SumStat, estimate
from layergate.exporters.figures.textstats import (
    BLEU_ORDER,
    CHRF_ORDER,
    bleu_score,
    bleu_stats,
    chrf_score,
    chrf_stats,
)
from layergate.exporters.figures.token_kl import request_kl

BLEU_COLS = 2 + 2 * BLEU_ORDER
CHRF_COLS = 3 * CHRF_ORDER


Cut = Callable[[str], Sequence]


def compare(a: Answer, x: Answer, cut: Cut | None = None) -> tuple[bool, int]:
    """(the same output, common prefix length): in token ids when both carry them, else in
    whitespace words; with `cut`, always in the texts cut by it (a tokenizer)."""
    sa, sx = compared_tokens(a, x) if cut is None else (cut(a.answer), cut(x.answer))
    if same_output(a, x):
        return True, len(sa)
    n = min(len(sa), len(sx))
    return False, next((i for i in range(n) if sa[i] != sx[i]), n)


def common_prefix(a: np.ndarray, a_len: np.ndarray, b: np.ndarray, b_len: np.ndarray
                  ) -> np.ndarray:
    """Per pair, how many leading tokens two token sequences share (`compare`'s prefix);
    each side given end to end with its lengths."""
    m = np.minimum(a_len, b_len)
    pair = np.repeat(np.arange(len(m)), m)
    at = np.arange(int(m.sum())) - np.repeat(np.cumsum(m) - m, m)  # position in the pair
    differs = np.flatnonzero(a[np.repeat(np.cumsum(a_len) - a_len, m) + at]
                             != b[np.repeat(np.cumsum(b_len) - b_len, m) + at])
    out = m.copy()
    first, where = np.unique(pair[differs], return_index=True)  # each pair's first mismatch
    out[first] = at[differs[where]]
    return out


SAMPLE_RULE = ("above text_sample pairs, a sample without replacement of round(text_sample x "
               "share) pairs per scenario, drawn by numpy's default_rng(seed + 1) among the "
               "requests the baseline answered, in (scenario, request id) order")


def text_sample(al: Aligned, eligible: np.ndarray, size: int, seed: int) -> np.ndarray:
    """Row indices: all eligible rows, or a seeded sample proportional per scenario
    (SAMPLE_RULE)."""
    rows = np.flatnonzero(eligible)
    if rows.size <= size:
        return rows
    rng = np.random.default_rng(seed + 1)
    picked = []
    for i, _ in enumerate(al.scenario_names):
        in_s = rows[al.strata[rows] == i]
        k = int(round(size * in_s.size / rows.size))
        picked.append(np.sort(rng.choice(in_s, size=min(k, in_s.size), replace=False)))
    return np.concatenate(picked)


def divergence_unit(al: Aligned, config: MetricsConfig) -> tuple[str, Cut | None]:
    """One unit for every pair of the run, so B vs A and its noise floor A' vs A count the
    same thing: token ids when every answer carries them; else the texts re-tokenised with
    the configured tokenizer; else whitespace words."""
    arms = (BASELINE, *compared_arms(al))
    if all(al.arms[arm].has_ids[al.arms[arm].ok].all() for arm in arms):
        return "token ids", None
    path = tokenizer.locate(config.tokenizer) if config.tokenizer else None
    if path is not None:
        return f"tokens of {path}", functools.partial(tokenizer.token_ids, str(path))
    return "whitespace words (no token ids from every arm, no tokenizer)", str.split


def _same(a: ArmColumns, x: ArmColumns) -> np.ndarray:
    """`same_output` on every row, by digest: token ids when both carry them, else text."""
    both = a.has_ids & x.has_ids
    return np.where(both, a.ids_key == x.ids_key, a.text_key == x.text_key)


def _arm_columns(al: Aligned, arm: str, sample: np.ndarray, cut: Cut | None
                 ) -> dict[str, np.ndarray]:
    a, x = al.arms[BASELINE], al.arms[arm]
    valid = a.ok & x.ok
    exact, prefix = np.zeros(al.n), np.zeros(al.n)
    kl_sum, kl_pos = np.zeros(al.n), np.zeros(al.n)
    if cut is None:  # token ids on every row: an identical pair's prefix is its length
        same = valid & _same(a, x)
        exact[same], prefix[same] = 1.0, a.ids_len[same]
        # pairs with top logprobs need their outputs read; the other differing pairs only
        # their token ids, compared in bulk
        logprobs = valid & a.has["top_logprobs"] & x.has["top_logprobs"]
        differ = np.flatnonzero(valid & ~same & ~logprobs)
        prefix[differ] = common_prefix(*a.token_ids(differ), *x.token_ids(differ))
        read = logprobs
    else:
        read = valid
    rows = np.flatnonzero(read)
    for i, ra, rx in zip(rows, a.outputs(rows), x.outputs(rows), strict=True):
        same_i, pre = compare(ra, rx, cut)
        exact[i], prefix[i] = same_i, pre
        kl_sum[i], kl_pos[i] = request_kl(ra.top_logprobs, rx.top_logprobs, pre)
    rows = sample[valid[sample]]
    hyps = [r.answer for r in x.outputs(rows)]
    refs = [r.answer for r in a.outputs(rows)]
    p = f"cons.{arm}."
    out = {p + "n": valid.astype(float), p + "exact": exact, p + "prefix": prefix,
           p + "kl_sum": kl_sum, p + "kl_pos": kl_pos}
    text_n = np.zeros(al.n)
    text_n[rows] = 1
    out[p + "text_n"] = text_n
    for name, stats, width in ((BLEU, bleu_stats, BLEU_COLS), (CHRF, chrf_stats, CHRF_COLS)):
        full = np.zeros((al.n, width))
        full[rows] = stats(hyps, refs)
        # narrowed one by one: a million rows x 28 float64 columns per arm would be 224 MB
        out |= {f"{p}{name}{j}": compact(full[:, j]) for j in range(width)}
    return out


def columns(al: Aligned, config: MetricsConfig) -> dict[str, np.ndarray]:
    arms = compared_arms(al)
    if not arms:
        return {}
    sample = text_sample(al, al.arms[BASELINE].ok, config.text_sample, config.seed)
    cut = divergence_unit(al, config)[1]
    out: dict[str, np.ndarray] = {}
    for arm in arms:
        out |= _arm_columns(al, arm, sample, cut)
    return out


def stats(al: Aligned, arm: str) -> dict[str, SumStat]:
    p = f"cons.{arm}."
    none = "no request succeeded on both arms"
    return {
        EXACT_MATCH: SumStat(lambda e, n: e / n, (p + "exact", p + "n"), p + "n", none),
        FIRST_DIVERGENCE: SumStat(lambda f, n: f / n, (p + "prefix", p + "n"), p + "n", none),
        BLEU: SumStat(bleu_score, tuple(f"{p}bleu{j}" for j in range(BLEU_COLS)),
                        p + "text_n", none),
        CHRF: SumStat(chrf_score, tuple(f"{p}chrf{j}" for j in range(CHRF_COLS)),
                        p + "text_n", none),
        TOKEN_KL: SumStat(lambda s, n: s / n, (p + "kl_sum", p + "kl_pos"), p + "kl_pos",
                          lacking(al, (BASELINE, arm), "top_logprobs",
                                  "no top_logprobs returned by both arms")),
    }


def figures(table: SumTable, al: Aligned, config: MetricsConfig) -> list[Figure]:
    arms = compared_arms(al)
    unit = divergence_unit(al, config)[0] if arms else ""
    out: list[Figure] = []
    for arm in arms:
        floor = stats(al, BASELINE2) if arm == CANDIDATE and BASELINE2 in arms else None
        for name, stat in stats(al, arm).items():
            def detail(s, name=name, arm=arm):
                if name == FIRST_DIVERGENCE:
                    return {"unit": unit}
                if name not in (BLEU, CHRF):
                    return {}
                pairs = int(table.sums(f"cons.{arm}.n", s)[0])
                sampled = int(table.sums(f"cons.{arm}.text_n", s)[0])
                return {"pairs": pairs, "sample_limit": config.text_sample,
                        "sampled": sampled, "sample_seed": config.seed + 1,
                        "sample_rule": SAMPLE_RULE if sampled < pairs else None}
            out += estimate(table, stat, al.scenario_names, config, name, arm,
                            noise=floor[name] if floor else None, detail=detail)
    return out
