"""Worlds a coverage simulation runs in: the interval's own model (each engine process a
log speed factor of SD τ = the prior, per-request log noise normal) and worlds that differ
from it, so a figure is shown to hold off the model, or shown not to.

  prior         τ = the prior process_spread (0.02), normal per-request noise
  tau-2x        the processes spread twice as far as the prior says (τ = 0.04)
  tau-0.5x      half as far (τ = 0.01)
  heavy-tails   per-request noise Student-t with 3 degrees of freedom, scaled to the same
                SD (outliers a normal would almost never give)

Every world gives A, A' and B each their own process draw.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PRIOR_TAU = 0.02  # the shipped policies' process_spread


@dataclass(frozen=True)
class World:
    name: str
    tau_scale: float = 1.0  # the true process SD over the prior the intervals assume
    tails: str = "normal"  # or "t3"

    @property
    def tau(self) -> float:
        return PRIOR_TAU * self.tau_scale

    def noise(self, rng: np.random.Generator, sd: float, size: int | tuple[int, ...]
              ) -> np.ndarray:
        """Per-request log noise of SD `sd` in this world's shape."""
        if self.tails == "t3":  # t(3) has variance 3: scaled to SD 1
            return sd * rng.standard_t(3, size) / np.sqrt(3.0)
        return rng.normal(0.0, sd, size)


WORLDS = {w.name: w for w in (World("prior"), World("tau-2x", 2.0), World("tau-0.5x", 0.5),
                              World("heavy-tails", tails="t3"))}
