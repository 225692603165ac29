"""The latency SLO of a capacity sweep, per request, after vLLM's goodput convention.

`ttft:2s,tpot:150ms,e2e:10s`: a request meets the SLO when it succeeded and every limit
given holds (TTFT, TPOT = (E2E - TTFT) / (tokens - 1), E2E). A request whose TPOT is
undefined (one output token, or tokens counted in characters) is judged on the other
limits only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from layergate.exporters.errors import UsageError
from layergate.exporters.records import ArmResult

SLO_KEYS = ("ttft", "tpot", "e2e")
_UNITS = {"ms": 1e-3, "s": 1.0}
_LIMIT = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*(ms|s)?\s*$", re.IGNORECASE)


class SLOError(UsageError, ValueError):
    pass


@dataclass(frozen=True)
class SLO:
    """Per-request limits in seconds; None: not limited."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def __post_init__(self) -> None:
        limits = self.limits()
        if not limits:
            raise SLOError("the SLO limits nothing: give at least one of "
                           f"{', '.join(SLO_KEYS)} (e.g. ttft:2s,tpot:150ms)")
        for key, value in limits.items():
            if not value > 0:
                raise SLOError(f"SLO {key}: the limit must be > 0, got {value:g}")

    def limits(self) -> dict[str, float]:
        return {k: v for k, v in (("ttft", self.ttft_s), ("tpot", self.tpot_s),
                                  ("e2e", self.e2e_s)) if v is not None}

    def meets(self, r: ArmResult) -> bool:
        """Succeeded, and within every limit it can be judged on."""
        if not r.ok:
            return False
        measured = {"ttft": r.ttft_s, "tpot": r.tpot_s, "e2e": r.e2e_s}
        for key, limit in self.limits().items():
            value = measured[key]
            if value is None:
                if key == "tpot":
                    continue  # undefined for one token: the other limits judge it
                return False
            if value > limit:
                return False
        return True

    def text(self) -> str:
        return ",".join(f"{k}:{_seconds_text(v)}" for k, v in self.limits().items())


def _seconds_text(value: float) -> str:
    return f"{value * 1000:g}ms" if value < 1 else f"{value:g}s"


def parse_slo(text: str) -> SLO:
    """`ttft:2s,tpot:150ms` -> SLO; an SLOError names the bad part. A bare number is
    seconds."""
    limits: dict[str, float] = {}
    for part in (p for p in text.split(",") if p.strip()):
        key, sep, value = part.partition(":")
        key = key.strip().lower()
        if not sep:
            raise SLOError(f"SLO {part.strip()!r}: expected KEY:LIMIT (e.g. ttft:2s)")
        if key not in SLO_KEYS:
            raise SLOError(f"SLO: unknown key {key!r}: the keys are {', '.join(SLO_KEYS)}")
        if key in limits:
            raise SLOError(f"SLO: {key} given twice")
        m = _LIMIT.match(value)
        if m is None:
            raise SLOError(f"SLO {key}: {value.strip()!r} is not a duration (e.g. 2s, 150ms)")
        limits[key] = float(m.group(1)) * _UNITS[(m.group(2) or "s").lower()]
    return SLO(limits.get("ttft"), limits.get("tpot"), limits.get("e2e"))
