"""The SLO frontier of a capacity sweep, as PNGs: goodput, TTFT and TPOT (p50 solid, p90
dashed) against the offered load, one line per arm, each arm's capacity marked (a dotted
vertical line). Drawn from the sweep's report (harness/capacity/report.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.figure import Figure as Canvas

from layergate.harness.report.html_plots import ARM_COLOURS, plot_png

# file stem -> (title, the step keys drawn, y label)
FRONTIER = {
    "frontier-goodput": ("Goodput against offered load", ("goodput",), "requests/s within SLO"),
    "frontier-ttft": ("TTFT against offered load", ("ttft_p50", "ttft_p90"), "TTFT (s)"),
    "frontier-tpot": ("TPOT against offered load", ("tpot_p50", "tpot_p90"), "TPOT (s)"),
}


def frontier_pngs(report: dict[str, Any]) -> dict[str, bytes]:
    """Stem -> PNG for each plot of FRONTIER."""
    return {stem: _plot(report, keys, ylabel) for stem, (_, keys, ylabel) in FRONTIER.items()}


def _plot(report: dict[str, Any], keys: tuple[str, ...], ylabel: str) -> bytes:
    def draw(fig: Canvas) -> bool:
        ax = fig.axes[0]
        drawn = False
        for arm, info in report["arms"].items():
            colour = ARM_COLOURS.get(arm)
            steps = info["steps"]
            for key, style in zip(keys, ("-", "--"), strict=False):
                points = [(s["load"], s[key]) for s in steps if s.get(key) is not None]
                if not points:
                    continue
                xs, ys = zip(*points, strict=True)
                suffix = f" {key.rsplit('_', 1)[-1]}" if len(keys) > 1 else ""
                ax.plot(xs, ys, style, marker="o", ms=3, color=colour, label=f"{arm}{suffix}")
                drawn = True
            if info.get("capacity") is not None:
                ax.axvline(info["capacity"], color=colour, ls=":", lw=1.2)
        ax.set_xlabel(f"offered load ({report['unit']}); dotted: capacity at SLO "
                      f"{report['slo']}")
        ax.set_ylabel(ylabel)
        if drawn:
            ax.legend(fontsize=8)
        return drawn
    return plot_png(draw, empty="no step stored yet")


def write_frontier(report: dict[str, Any], directory: Path) -> list[Path]:
    out = []
    for stem, png in frontier_pngs(report).items():
        path = directory / f"{stem}.png"
        path.write_bytes(png)
        out.append(path)
    return out
