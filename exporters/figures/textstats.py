"""sacreBLEU's BLEU and chrF as sums of per-pair sufficient statistics, so a corpus score
can be bootstrapped by resampling the sums. `bleu_score` / `chrf_score` reproduce
`sacrebleu.corpus_bleu` / `corpus_chrf` (default settings) from summed statistics,
vectorised over resamples."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sacrebleu.metrics import BLEU, CHRF

BLEU_ORDER = 4  # sacreBLEU defaults: 13a tokenizer, exp smoothing, 4-grams
CHRF_ORDER = 6  # chrF (not chrF++): 6 character orders, beta 2, no word n-grams
CHRF_BETA = 2
_MY_LOG_ZERO = -9999999999.0  # sacrebleu.utils.my_log(0)


def _differing(hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    return np.array([h != r for h, r in zip(hyps, refs, strict=True)], dtype=bool)


def bleu_stats(hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """(n, 2 + 2 * 4): sys_len, ref_len, correct 1..4, total 1..4 per pair.

    Identical pairs (most of them, in practice) skip sacreBLEU's n-gram matching: every
    n-gram matches, so correct = total = max(len - n + 1, 0)."""
    out = np.zeros((len(hyps), 2 + 2 * BLEU_ORDER))
    diff = _differing(hyps, refs)
    metric = BLEU()
    same = np.flatnonzero(~diff)
    if same.size:
        lengths = np.array([len(metric._preprocess_segment(hyps[i]).split()) for i in same])
        out[same, 0] = out[same, 1] = lengths
        for n in range(1, BLEU_ORDER + 1):
            out[same, 1 + n] = out[same, 1 + BLEU_ORDER + n] = np.maximum(lengths - n + 1, 0)
    rows = np.flatnonzero(diff)
    if rows.size:
        out[rows] = metric._extract_corpus_statistics([hyps[i] for i in rows],
                                                      [[refs[i] for i in rows]])
    return out


def chrf_stats(hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """(n, 3 * 6): hypothesis, reference and matching n-grams per character order.

    Identical pairs: each order has max(chars - n + 1, 0) n-grams on both sides, all
    matching (chrF drops whitespace before counting)."""
    out = np.zeros((len(hyps), 3 * CHRF_ORDER))
    diff = _differing(hyps, refs)
    same = np.flatnonzero(~diff)
    if same.size:
        chars = np.array([len("".join(hyps[i].split())) for i in same])
        for n in range(1, CHRF_ORDER + 1):
            m = np.maximum(chars - n + 1, 0)
            out[same, 3 * (n - 1)] = out[same, 3 * (n - 1) + 1] = out[same, 3 * (n - 1) + 2] = m
    rows = np.flatnonzero(diff)
    if rows.size:
        out[rows] = CHRF()._extract_corpus_statistics([hyps[i] for i in rows],
                                                      [[refs[i] for i in rows]])
    return out


def bleu_score(*cols: np.ndarray) -> np.ndarray:
    """BLEU (0..100) from summed statistics, each argument one statistic (scalar or array)."""
    sys_len, ref_len = np.asarray(cols[0], float), np.asarray(cols[1], float)
    correct, total = cols[2:2 + BLEU_ORDER], cols[2 + BLEU_ORDER:]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        bp = np.where(sys_len < ref_len,
                      np.where(sys_len > 0, np.exp(1 - ref_len / sys_len), 0.0), 1.0)
        smooth = np.ones_like(sys_len)
        stopped = np.zeros(sys_len.shape, dtype=bool)
        logs = np.zeros_like(sys_len)
        for c, t in zip(correct, total, strict=True):
            stopped = stopped | (t == 0)
            smooth = np.where(~stopped & (c == 0), smooth * 2, smooth)
            p = np.where(c == 0, 100.0 / (smooth * t), 100.0 * c / t)
            logs = logs + np.where(stopped, _MY_LOG_ZERO, np.log(np.where(stopped, 1, p)))
        score = bp * np.exp(logs / BLEU_ORDER)
        any_correct = np.zeros(sys_len.shape, dtype=bool)
        for c in correct:
            any_correct = any_correct | (c != 0)
        return np.where(any_correct, score, 0.0)


def chrf_score(*cols: np.ndarray) -> np.ndarray:
    """chrF (0..100) from summed statistics, sacreBLEU's effective-order averaging."""
    factor = CHRF_BETA ** 2
    first = np.asarray(cols[0], float)
    avg_p, avg_r, order = np.zeros_like(first), np.zeros_like(first), np.zeros_like(first)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(CHRF_ORDER):
            hyp, ref, match = cols[3 * i], cols[3 * i + 1], cols[3 * i + 2]
            used = (hyp > 0) & (ref > 0)
            avg_p = avg_p + np.where(used, match / hyp, 0.0)
            avg_r = avg_r + np.where(used, match / ref, 0.0)
            order = order + used
        avg_p = np.where(order > 0, avg_p / order, 0.0)
        avg_r = np.where(order > 0, avg_r / order, 0.0)
        score = 100 * (1 + factor) * avg_p * avg_r / (factor * avg_p + avg_r)
        return np.where(avg_p + avg_r > 0, score, 0.0)
