"""BLEU and chrF figures equal sacreBLEU's own command line on the same texts."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.textstats import bleu_stats, chrf_stats
from layergate.exporters.records import ArmResult

WORDS = ("The", "cat", "sat", "on", "the", "mat", ".", "It's", "a", "dog,", "isn't", "it?",
         "Paris", "(France)", "3.14", "—", "naïve", "café", "x+y=z", "end")


def _texts(seed: int, n: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    refs = [" ".join(rng.choices(WORDS, k=rng.randint(1, 25))) for _ in range(n)]
    hyps = []
    for ref in refs:
        words = ref.split()
        if rng.random() < 0.6:  # edit a few words; some pairs stay identical
            for _ in range(rng.randint(1, 3)):
                words[rng.randrange(len(words))] = rng.choice(WORDS)
        hyps.append(" ".join(words))
    return hyps, refs


def _cli(tmp_path: Path, hyps: list[str], refs: list[str]) -> list[float]:
    (tmp_path / "hyp.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "sacrebleu", str(tmp_path / "ref.txt"), "-i",
                          str(tmp_path / "hyp.txt"), "-m", "bleu", "chrf", "-b", "-w", "6"],
                         capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


@pytest.mark.parametrize("seed", [0, 1])
def test_bleu_and_chrf_equal_the_sacrebleu_cli(tmp_path: Path, seed: int) -> None:
    hyps, refs = _texts(seed, 60)
    results = []
    for i, (h, ref) in enumerate(zip(hyps, refs, strict=True)):
        results += [ArmResult(f"r{i}", "baseline", "s", True, output_text=ref, output_tokens=3),
                    ArmResult(f"r{i}", "candidate", "s", True, output_text=h, output_tokens=3)]
    figures = compute_figures(results, config=MetricsConfig(n_resamples=50))
    ours = {f.name: f.value for f in figures if f.scenario == "all" and f.arm == "candidate"}
    bleu, chrf = _cli(tmp_path, hyps, refs)
    assert ours["bleu"] == pytest.approx(bleu, abs=1e-6)
    assert ours["chrf"] == pytest.approx(chrf, abs=1e-6)


def test_identical_pair_shortcut_matches_sacrebleu_statistics() -> None:
    from sacrebleu.metrics import BLEU, CHRF

    hyps, refs = _texts(5, 80)
    hyps = [h if i % 2 else r for i, (h, r) in enumerate(zip(hyps, refs, strict=True))]
    assert (bleu_stats(hyps, refs) == BLEU()._extract_corpus_statistics(hyps, [refs])).all()
    assert (chrf_stats(hyps, refs) == CHRF()._extract_corpus_statistics(hyps, [refs])).all()
