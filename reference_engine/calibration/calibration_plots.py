"""The calibration report's figures (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from layergate.reference_engine.calibration.profile import LayerProfile  # noqa: E402
from layergate.reference_engine.calibration.sweep import SpecCell, SweepCell  # noqa: E402


def plot_layers(profile: Sequence[LayerProfile], path: Path) -> Path:
    layers = [p.layer for p in profile]
    series = [("block influence (1 - cos)", [p.block_influence for p in profile]),
              ("drift KL when skipped alone", [p.drift_kl for p in profile]),
              ("share of decode time", [p.decode_share for p in profile]),
              ("near-zero update share (|dh| < 1e-5)", [p.near_zero_share for p in profile])]
    fig, axes = plt.subplots(len(series), 1, figsize=(10, 9), sharex=True)
    for ax, (title, values) in zip(axes, series, strict=True):
        ax.bar(layers, values, color="#4c72b0")
        ax.set_title(title, fontsize=10)
    axes[-1].set_xlabel("decoder layer")
    axes[-1].set_xticks(layers)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_sweep(cells: Sequence[SweepCell], path: Path) -> Path:
    columns = sorted({(c.feature, c.op, c.quantile) for c in cells},
                     key=lambda x: (x[0] != "always", x))
    ks = sorted({c.k for c in cells})
    index = {(c.feature, c.op, c.quantile, c.k): c for c in cells}
    fig, axes = plt.subplots(2, 1, figsize=(max(10, len(columns) * 0.45), 7))
    for ax, attr, title in ((axes[0], "consistency", "exact-match consistency vs full"),
                            (axes[1], "mean_layers_skipped", "mean layers skipped")):
        grid = [[getattr(index[(*col, k)], attr) for col in columns] for k in ks]
        image = ax.imshow(grid, aspect="auto", cmap="viridis", origin="lower")
        ax.set_yticks(range(len(ks)), [f"k={k}" for k in ks])
        ax.set_xticks(range(len(columns)),
                      [f"{f}{op}q{q:g}" if f != "always" else "always" for f, op, q in columns],
                      rotation=75, fontsize=7)
        ax.set_title(title, fontsize=10)
        fig.colorbar(image, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_speculative(cells: Sequence[SpecCell], path: Path) -> Path:
    drafts = sorted({c.draft for c in cells})
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for name in drafts:
        rows = sorted((c for c in cells if c.draft == name), key=lambda c: c.gamma)
        ax.plot([c.gamma for c in rows], [c.speedup_vs_full for c in rows], marker="o", label=name)
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label="full")
    ax.set_xlabel("gamma (drafted tokens per round)")
    ax.set_ylabel("predicted decode speed vs full")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
