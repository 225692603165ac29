"""The HTML report's plots, each a PNG (bytes) drawn with matplotlib's object API (no
pyplot global state, no GUI backend). Every plot always renders: with no data it says so."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from matplotlib.figure import Figure as Canvas
from matplotlib.ticker import MaxNLocator

from layergate.exporters.catalogue import (
    BASELINE,
    BASELINE2,
    CANDIDATE,
    EXACT_MATCH,
    FAIL,
    INCONCLUSIVE,
    PASS,
    RER,
    TERMINATION_ACCURACY,
    TERMINATION_OVERRUN,
    TERMINATION_PREMATURE,
    TERMINATION_TRUNCATED,
)
from layergate.exporters.figures import OVERALL, Figure
from layergate.exporters.records import ArmResult
from layergate.harness.report.leaderboard import SAVING, against, vertical
from layergate.harness.report.pairs import pair_arms

ARM_COLOURS = {BASELINE: "#3b6fb6", BASELINE2: "#9aa5b1", CANDIDATE: "#e07b39"}
TERMINATION = ((TERMINATION_ACCURACY, "correct", "#4caf50"),
               (TERMINATION_TRUNCATED, "truncated", "#ffb300"),
               (TERMINATION_PREMATURE, "premature", "#e53935"),
               (TERMINATION_OVERRUN, "overrun", "#8e24aa"))


def plot_png(draw: Callable[[Canvas], bool], size: tuple[float, float] = (7.0, 3.6),
             empty: str = "no data in this run") -> bytes:
    """One plot as PNG bytes: `draw` fills the canvas and says whether it drew anything
    (if not, the plot says `empty`)."""
    fig = Canvas(figsize=size, dpi=110, layout="constrained")
    ax = fig.add_subplot()
    if not draw(fig):
        ax.clear()
        ax.set_axis_off()
        ax.text(0.5, 0.5, empty, ha="center", va="center", color="#777")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _arms(results: Sequence[ArmResult]) -> list[str]:
    present = {r.arm for r in results}
    return [a for a in ARM_COLOURS if a in present] + sorted(present - set(ARM_COLOURS))


def latency_cdf(results: Sequence[ArmResult]) -> bytes:
    def draw(fig: Canvas) -> bool:
        ax = fig.axes[0]
        drawn = False
        for arm in _arms(results):
            colour = ARM_COLOURS.get(arm)
            for attr, style in (("e2e_s", "-"), ("ttft_s", ":")):
                xs = np.sort([getattr(r, attr) for r in results
                              if r.arm == arm and r.ok and getattr(r, attr) is not None])
                if xs.size:
                    ys = np.arange(1, xs.size + 1) / xs.size
                    ax.step(xs, ys, style, where="post", color=colour,
                            label=f"{arm} {'E2E' if attr == 'e2e_s' else 'TTFT'}")
                    drawn = True
        ax.set(xlabel="seconds", ylabel="share of requests ≤ x",
               title="Latency CDF per arm (solid E2E, dotted TTFT)", ylim=(0, 1.02))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        return drawn
    return plot_png(draw)


def rer_by_scenario(figures: Sequence[Figure], target: float | None) -> bytes:
    def draw(fig: Canvas) -> bool:
        ax = fig.axes[0]
        rows = [f for f in figures if f.name == RER and f.value is not None]
        scenarios = _scenario_order({f.scenario for f in rows})
        if not scenarios:
            return False
        x = np.arange(len(scenarios))
        arms = [a for a in (CANDIDATE, BASELINE2) if any(f.arm == a for f in rows)]
        width = 0.8 / max(len(arms), 1)
        for i, arm in enumerate(arms):
            by = {f.scenario: f for f in rows if f.arm == arm}
            vals = [by[s].value if s in by else np.nan for s in scenarios]
            err = [[_gap(by.get(s), low=True) for s in scenarios],
                   [_gap(by.get(s), low=False) for s in scenarios]]
            label = f"{arm} vs {BASELINE}"
            ax.bar(x + (i - (len(arms) - 1) / 2) * width, vals, width, yerr=err, capsize=4,
                   color=ARM_COLOURS[arm], label=label)
        if target is not None:
            ax.axhline(target, color="#c62828", ls="--", lw=1, label=f"target {target:g}")
        ax.axhline(0, color="#333", lw=0.6)
        ax.set_xticks(x, scenarios)
        ax.set(ylabel="RER", title="RER per scenario (95 % CI)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
        return True
    return plot_png(draw)


def termination_breakdown(figures: Sequence[Figure]) -> bytes:
    def draw(fig: Canvas) -> bool:
        ax = fig.axes[0]
        rows = {(f.name, f.scenario): f.value for f in figures
                if f.arm == CANDIDATE and f.value is not None
                and f.name in {n for n, _, _ in TERMINATION}}
        scenarios = _scenario_order({s for _, s in rows})
        if not scenarios:
            return False
        left = np.zeros(len(scenarios))
        for name, label, colour in TERMINATION:
            vals = np.array([rows.get((name, s), 0.0) for s in scenarios])
            ax.barh(scenarios, vals, left=left, color=colour, label=label)
            left += vals
        ax.set(xlabel="share of requests", xlim=(0, 1),
               title="How the candidate's requests ended, against the baseline")
        ax.invert_yaxis()
        fig.legend(fontsize=8, ncols=4, loc="outside lower center")
        return True
    return plot_png(draw)


def consistency_by_position(results: Sequence[ArmResult]) -> bytes:
    def draw(fig: Canvas) -> bool:
        ax = fig.axes[0]
        drawn = False
        # baseline2 first and dashed, so an identical candidate stays visible on top of it
        for arm, style in ((BASELINE2, "--"), (CANDIDATE, "-")):
            pairs = pair_arms(results, arm)
            if not pairs:
                continue
            longest = max(max(len(p.tokens[0]), len(p.tokens[1])) for p in pairs)
            cut = [p.divergence if p.divergence is not None else longest + 1 for p in pairs]
            positions = np.arange(0, longest + 1)
            # share of pairs still identical through position k
            alive = [(np.array(cut) > k).mean() for k in positions]
            ax.step(positions, alive, style, where="post", color=ARM_COLOURS[arm], lw=2,
                    label=f"{arm} vs {BASELINE} (n={len(pairs)})")
            drawn = True
        ax.set(xlabel="output position (tokens)", ylabel="share still identical",
               title="Consistency against output position", ylim=(-0.03, 1.06))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        return drawn
    return plot_png(draw)


def layers_histogram(results: Sequence[ArmResult]) -> bytes:
    def draw(fig: Canvas) -> bool:
        ax = fig.axes[0]
        drawn = False
        total = None
        arms = _arms(results)
        width = 0.8 / max(len(arms), 1)
        for i, arm in enumerate(arms):
            counts: Counter[int] = Counter()
            for r in results:
                if r.arm == arm and r.ok:
                    counts.update(r.extension.get("layers_executed_per_token") or [])
                    total = r.extension.get("layers_total") or total
            if counts:
                xs = np.array(sorted(counts))
                n = sum(counts.values())
                ax.bar(xs + (i - (len(arms) - 1) / 2) * width, [counts[x] / n for x in xs],
                       width, color=ARM_COLOURS.get(arm), label=f"{arm} ({n} tokens)")
                drawn = True
        if total:
            ax.axvline(total, color="#333", ls=":", lw=1, label=f"model depth {total}")
        low, high = ax.get_xlim()
        ax.set_xlim(min(low, (total or high) - 3), max(high, (total or high) + 1))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set(xlabel="layers executed for a token", ylabel="share of output tokens",
               title="Layers executed per output token")
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=8)
        return drawn
    # only layergate's engine reports the layers it ran (its `layergate` extension)
    return plot_png(draw, empty="no arm reported the layers it executed (layergate's engine "
                                "does, in its response extension)")


def _gap(fig: Figure | None, low: bool) -> float:
    if fig is None or fig.value is None:
        return 0.0
    bound = fig.ci_low if low else fig.ci_high
    return 0.0 if bound is None else abs(fig.value - bound)


def _scenario_order(names: set[str]) -> list[str]:
    return ([OVERALL] if OVERALL in names else []) + sorted(names - {OVERALL})


VERDICT_COLOURS = {PASS: "#2e7d32", FAIL: "#c62828", INCONCLUSIVE: "#f9a825"}


def saving_against_consistency(rows: Sequence) -> bytes:
    """The leaderboard's plot: one point per candidate (`leaderboard.Row`) at its saving and
    consistency, with both intervals, coloured by verdict; the Pareto front joined."""
    def draw(fig: Canvas) -> bool:
        ax = fig.axes[0]
        axis = vertical(list(rows))  # exact match, or accuracy_delta with references
        drawn = [r for r in rows if r.cells[SAVING].value is not None
                 and r.cells[axis].value is not None]
        for r in drawn:
            x, y = r.cells[SAVING], r.cells[axis]
            xerr = [[x.value - x.low], [x.high - x.value]] if x.low is not None \
                and x.high is not None else None
            yerr = [[y.value - y.low], [y.high - y.value]] if y.low is not None \
                and y.high is not None else None
            swept = r.saving.source != RER
            ax.errorbar([x.value], [y.value], xerr=xerr, yerr=yerr, fmt="s" if swept else "o",
                        capsize=3, color=VERDICT_COLOURS[r.verdict], label=r.verdict)
            mark = " ★ recommended" if r.recommended else ""
            source = f", capacity ×{r.saving.measured.value:.3g}" if swept else ""
            ax.annotate(f"{r.name} ({r.verdict}{source}){mark}", (x.value, y.value),
                        textcoords="offset points", xytext=(6, 6), fontsize=8)
        front = sorted((r for r in drawn if r.pareto), key=lambda r: r.cells[SAVING].value)
        if len(front) > 1:
            ax.plot([r.cells[SAVING].value for r in front],
                    [r.cells[axis].value for r in front], "--", color="#555",
                    lw=1, label="Pareto front")
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        ax.legend(unique.values(), unique.keys(), fontsize=8, loc="lower left")
        ax.set(xlabel="saving: RER (share of time per output token eliminated), or "
                      "1 − 1/capacity ratio (squares: from a capacity sweep)",
               ylabel="consistency: exact match with the baseline" if axis == EXACT_MATCH
               else "accuracy: candidate − baseline, paired",
               title=f"Candidates: saving against {against(list(rows))}")
        ax.grid(alpha=0.3)
        return bool(drawn)
    return plot_png(draw, size=(7.0, 4.2),
                    empty=f"no candidate has both a saving and {vertical(list(rows))}")
