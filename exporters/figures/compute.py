"""All figures of a run: every calculator, overall and per scenario, from one shared
set of bootstrap resamples (so paired comparisons and noise floors line up)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from layergate.exporters.catalogue import RER
from layergate.exporters.figures import (
    Figure,
    accuracy,
    answer_parts,
    cache_hit,
    consistency,
    determinism_figures,
    latency,
    rer,
    rrr,
    saturation,
    speculative,
    termination,
    turns,
)
from layergate.exporters.figures.aligned import align
from layergate.exporters.figures.bootstrap import compact, resample_sums
from layergate.exporters.figures.columns import ResultColumns
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.conversations import cluster_labels
from layergate.exporters.records import ArmResult, MetricsScrape
from layergate.exporters.references import Reference
from layergate.exporters.traffic import Offsets

_SUM_CALCULATORS = (rer, termination, consistency, latency, answer_parts)


def compute_figures(results: Iterable[ArmResult] | ResultColumns,
                    scrapes: Sequence[MetricsScrape] = (),
                    determinism: Iterable[ArmResult] | None = None,
                    config: MetricsConfig | None = None,
                    offsets: Mapping[str, float] | None = None,
                    max_in_flight: int | None = None,
                    clusters: Mapping[str, str] | None = None,
                    references: Mapping[str, Reference] | None = None,
                    verdicts: accuracy.Verdicts | None = None,
                    positions: Mapping[str, tuple[str, int]] | None = None) -> list[Figure]:
    """Figures of a shadow replay (`repeat` 0 rows; arm `recorded` = the traffic's recorded
    responses, judged against by `termination_accuracy_recorded` only) and of its repeat
    suite (`determinism`: the rows of the run's determinism sub-run, or, when None, the rows
    of `results` that belong to repeated prompts). `offsets` (request id -> intended send
    time, from the run's traffic) and `max_in_flight` (an open-loop replay's limit) feed the
    saturation check. `results` as columns (a run's store read as `harness.store` reads it)
    hold the shadow replay's rows only; the repeat suite's come in `determinism`.
    `clusters` (request id -> conversation, exporters/figures/conversations.py): the bootstrap
    resamples a multi-turn conversation as one unit. `references` (request id -> its
    reference, exporters/figures/accuracy.read_references): the accuracy figures, on the
    same resamples; none without them. `verdicts` (accuracy.read_verdicts): a judge's, for
    the references of kind `judge`. `positions` (request id -> (conversation, turn),
    conversations.turn_positions): the figures turn by turn (exporters/figures/turns.py)."""
    config = config if config is not None else MetricsConfig()
    if not isinstance(results, ResultColumns):
        results = list(results)
        # prompts sent more than once belong to a repeat suite, not to the shadow replay
        repeated = {(r.arm, r.request_id, r.concurrency) for r in results if r.repeat > 0}
        if repeated:
            replay = [r for r in results if (r.arm, r.request_id, r.concurrency) not in repeated]
            if determinism is None:
                determinism = [r for r in results
                               if (r.arm, r.request_id, r.concurrency) in repeated]
            results = replay
    al = align(results)
    del results  # the aligned arms hold what is needed: at a million rows, memory counts
    # the percentiles read every inter-token gap: made first, the gaps let go before the
    # columns and their resamples are made
    percentiles = latency.percentiles(al, config)
    al = al.without_gaps()
    columns = {}
    for calc in (*_SUM_CALCULATORS, cache_hit, speculative):
        columns |= {name: compact(col) for name, col in calc.columns(al, config).items()}
    # outputs scored once, for the columns and the figures
    scores = accuracy.score_outputs(al, references, verdicts)
    columns |= {name: compact(col) for name, col in accuracy.columns(al, config, scores).items()}
    table = resample_sums(columns, al.strata, len(al.scenario_names), config.n_resamples,
                          config.seed, cluster_labels(al.request_ids, dict(clusters or {})))
    del columns  # the sums are all the figures need of them
    figures: list[Figure] = []
    for calc in _SUM_CALCULATORS:
        figures += latency.figures(table, al, config, percentiles) if calc is latency else \
            calc.figures(table, al, config)
    figures += cache_hit.figures(table, al, scrapes, config)
    figures += speculative.figures(table, al, scrapes, config)
    figures += accuracy.figures(table, al, config, scores)
    sent = None if offsets is None else offsets.at(al.request_ids) \
        if isinstance(offsets, Offsets) else np.array(
            [offsets.get(rid, np.nan) for rid in al.request_ids], dtype=float)
    figures += turns.figures(al, positions, config, scores.right if scores else None,
                             scores.scored if scores else None)
    figures += saturation.figures(saturation.detect(al, sent, max_in_flight))
    figures += rrr.figures([f for f in figures if f.name == RER], config)
    figures += determinism_figures.figures(determinism or (), config)
    return figures
