"""Traffic mixes (`scenarios/mixes/*.yaml`, schema in scenarios/README.md): which bundled
requests a replay sends, in what proportions, and when they arrive.

Selection and arrivals follow the README exactly, so a mix file always gives the same
requests and schedule: class counts by floor + largest remainder, `rng.sample` per class
with `random.Random(seed)` (classes in file order), drawn records replayed in source order;
gaps from their own `random.Random(seed + 1)`:
- `poisson`: exponential gaps with mean 1/rate;
- `gamma`: Gamma(shape=burstiness, scale=1/(rate*burstiness)) gaps, mean 1/rate
  (vLLM's convention: 1 is Poisson, < 1 burstier, > 1 more regular);
- `timestamps`: the records' own offsets, relative to the first drawn one, divided by speed.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from layergate.exporters import bundled
from layergate.exporters.errors import UsageError
from layergate.exporters.traffic import TrafficError, TrafficRecord, read_traffic

SCENARIOS_DIR = bundled.scenarios_dir()
MIXES_DIR = bundled.path(*bundled.MIXES.folder)
ARRIVALS = ("poisson", "gamma", "timestamps")
# the prompt-length classes (docs/FORMATS.md), in prompt tokens (inclusive): short < 10, medium
# 10-50, long > 50; the capture proxy labels what it records with them
DEFAULT_CLASSES = {"short": (0, 9), "medium": (10, 50), "long": (51, None)}
REQUIRED = ("name", "description", "sources", "classes", "weights", "requests", "seed",
            "arrival")


class MixError(UsageError, ValueError):
    """A mix that cannot be used; names the file and the key (or the class)."""


@dataclass(frozen=True)
class MixClass:
    name: str
    min_tokens: int = 0
    max_tokens: int | None = None
    weight: float = 0.0


@dataclass(frozen=True)
class Arrival:
    type: str
    rate: float | None = None
    burstiness: float = 1.0
    speed: float = 1.0


@dataclass(frozen=True)
class Mix:
    name: str
    path: Path
    description: str
    sources: tuple[Path, ...]
    classes: tuple[MixClass, ...]
    requests: int
    seed: int
    arrival: Arrival


def mix_names() -> list[str]:
    return bundled.names(bundled.MIXES)


def resolve_mix(name_or_path: str | Path) -> Path:
    """A mix YAML path, or the bundled mix of a name (`saas-mix`)."""
    try:
        path = bundled.resolve(bundled.MIXES, name_or_path)
    except bundled.BundledNameError as exc:
        raise MixError(str(exc)) from exc
    if not path.is_file():
        raise MixError(f"scenario file {path} not found")
    return path


def _positive(raw: dict[str, Any], key: str, where: str) -> float:
    value = raw.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
        raise MixError(f"{where}.{key} must be a number > 0: {value!r}")
    return float(value)


def _arrival(raw: Any, where: str) -> Arrival:
    if not isinstance(raw, dict) or raw.get("type") not in ARRIVALS:
        raise MixError(f"{where}: arrival must be a mapping with type one of "
                       f"{', '.join(ARRIVALS)}: {raw!r}")
    kind = raw["type"]
    if kind == "timestamps":
        return Arrival(kind, speed=_positive(raw, "speed", f"{where}: arrival"))
    rate = _positive(raw, "rate", f"{where}: arrival")
    burst = _positive(raw, "burstiness", f"{where}: arrival") if kind == "gamma" else 1.0
    return Arrival(kind, rate=rate, burstiness=burst)


def _classes(raw: Any, weights: Any, where: str) -> tuple[MixClass, ...]:
    if not isinstance(raw, dict) or not raw:
        raise MixError(f"{where}: classes must map class names to prompt-token bounds")
    if not isinstance(weights, dict):
        raise MixError(f"{where}: weights must map class names to shares")
    unknown = sorted(set(weights) - set(raw))
    if unknown:
        raise MixError(f"{where}: weights.{unknown[0]} is not a class of the mix")
    out = []
    for name, bounds in raw.items():
        bounds = bounds or {}
        if not isinstance(bounds, dict) or set(bounds) - {"min_tokens", "max_tokens"}:
            raise MixError(f"{where}: classes.{name} takes min_tokens / max_tokens only")
        weight = weights.get(name, 0)
        if not isinstance(weight, int | float) or isinstance(weight, bool) or \
                not 0 <= weight <= 1:
            raise MixError(f"{where}: weights.{name} must be in [0, 1]: {weight!r}")
        out.append(MixClass(str(name), int(bounds.get("min_tokens", 0)),
                            bounds.get("max_tokens"), float(weight)))
    total = sum(c.weight for c in out)
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        raise MixError(f"{where}: weights must sum to 1, they sum to {total}")
    return tuple(out)


def _sources(raw: Any, where: str) -> tuple[Path, ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(s, str) for s in raw):
        raise MixError(f"{where}: sources must be a non-empty list of paths under scenarios/")
    paths = tuple(SCENARIOS_DIR / s for s in raw)
    for source, path in zip(raw, paths, strict=True):
        if not path.is_file():
            raise MixError(f"{where}: source {source!r} not found at {path}")
    return paths


def load_mix(name_or_path: str | Path) -> Mix:
    path = resolve_mix(name_or_path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise MixError(f"{path}: invalid YAML: {exc}") from exc
    where = str(path)
    if not isinstance(raw, dict):
        raise MixError(f"{where}: a mix must be a YAML mapping")
    missing = [key for key in REQUIRED if key not in raw]
    if missing:
        raise MixError(f"{where}: missing key {missing[0]!r}")
    if raw["name"] != path.stem:
        raise MixError(f"{where}: name {raw['name']!r} must equal the file name {path.stem!r}")
    for key in ("requests", "seed"):
        value = raw[key]
        if not isinstance(value, int) or isinstance(value, bool) or (key == "requests"
                                                                      and value < 1):
            raise MixError(f"{where}: {key} must be an integer{' > 0' * (key == 'requests')}: "
                           f"{value!r}")
    return Mix(raw["name"], path, str(raw["description"]), _sources(raw["sources"], where),
               _classes(raw["classes"], raw["weights"], where), raw["requests"], raw["seed"],
               _arrival(raw["arrival"], where))


def class_counts(classes: tuple[MixClass, ...], n: int) -> dict[str, int]:
    """floor(w * n) each, the rest one each by largest fractional part (ties: file order)."""
    counts = {c.name: math.floor(c.weight * n) for c in classes}
    order = sorted(range(len(classes)),
                   key=lambda i: -(classes[i].weight * n - counts[classes[i].name]))
    for i in order[: n - sum(counts.values())]:
        counts[classes[i].name] += 1
    return counts


def _pools(mix: Mix) -> tuple[list[TrafficRecord], dict[str, list[TrafficRecord]]]:
    """All source records in source order, and the pool of each class."""
    ordered: list[TrafficRecord] = []
    pools: dict[str, list[TrafficRecord]] = {c.name: [] for c in mix.classes}
    for source in mix.sources:
        try:
            traffic = read_traffic(source)
        except TrafficError as exc:
            raise MixError(f"{mix.path}: source traffic is invalid: {exc}") from exc
        for record, line in zip(traffic.records, traffic.lines, strict=True):
            if record.scenario not in pools:
                raise MixError(f"{source}:{line}: scenario {record.scenario!r} is not a class "
                               f"of mix {mix.name} ({', '.join(pools)})")
            pools[record.scenario].append(record)
            ordered.append(record)
    return ordered, pools


def select(mix: Mix, n: int) -> list[TrafficRecord]:
    """The n records a mix draws, in source order."""
    ordered, pools = _pools(mix)
    rng = random.Random(mix.seed)
    chosen: set[str] = set()
    for name, count in class_counts(mix.classes, n).items():
        pool = pools[name]
        if count > len(pool):
            raise MixError(f"mix {mix.name}: class {name!r} needs {count} records but its "
                           f"sources hold {len(pool)}")
        chosen.update(r.id for r in rng.sample(pool, count))
    return [r for r in ordered if r.id in chosen]


def gamma_offsets(n: int, rate: float, burstiness: float, seed: int) -> list[float]:
    """n arrival offsets from 0, gaps Gamma(burstiness, 1/(rate*burstiness))."""
    rng = random.Random(seed)
    offsets, t = [], 0.0
    for _ in range(n):
        offsets.append(t)
        t += rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
    return offsets


def poisson_offsets(n: int, rate: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    offsets, t = [], 0.0
    for _ in range(n):
        offsets.append(t)
        t += rng.expovariate(rate)
    return offsets


def arrival_offsets(arrival: Arrival, records: list[TrafficRecord], seed: int) -> list[float]:
    """Send offsets for `records` (in send order); `seed` is the mix seed."""
    if arrival.type == "timestamps":
        first = records[0].offset_s if records else 0.0
        return [(r.offset_s - first) / arrival.speed for r in records]
    if arrival.type == "gamma":
        return gamma_offsets(len(records), arrival.rate, arrival.burstiness, seed + 1)
    return poisson_offsets(len(records), arrival.rate, seed + 1)


def build_traffic(name_or_path: str | Path, requests: int | None = None,
                  rate: float | None = None, seed: int | None = None) -> list[TrafficRecord]:
    """The traffic a mix describes: drawn records with `offset_s` set to their send time.

    `requests` overrides the mix's count; `rate` its arrival rate (timestamp replay then
    becomes Poisson at that rate); `seed` its seed (another draw and other arrivals)."""
    mix = load_mix(name_or_path)
    if seed is not None:
        mix = dataclasses.replace(mix, seed=seed)
    records = select(mix, requests or mix.requests)
    arrival = mix.arrival
    if rate is not None:
        kind = "poisson" if arrival.type == "timestamps" else arrival.type
        arrival = dataclasses.replace(arrival, type=kind, rate=rate)
    offsets = arrival_offsets(arrival, records, mix.seed)
    return [dataclasses.replace(r, offset_s=round(o, 6))
            for r, o in zip(records, offsets, strict=True)]


def length_class(prompt_tokens: int) -> str:
    """The length class of a prompt by its token count (docs/FORMATS.md)."""
    for name, (lo, hi) in DEFAULT_CLASSES.items():
        if prompt_tokens >= lo and (hi is None or prompt_tokens <= hi):
            return name
    return "long"
