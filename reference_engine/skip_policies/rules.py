"""The rules file written by `layergate calibrate` and read by `static`, `dynamic` and
`speculative`: JSON, one file per model.

    {"format": "layergate-rules/1", "model": "smollm2-135m", "num_layers": 30,
     "created": "2026-...Z", "traffic": {"path": ..., "sha256": ..., "count": 24},
     "dynamic": {"rules": [{"name": ..., "when": [{"feature": "grad_mean", "op": "<=",
                                                   "value": 0.03}], "skip": [12, 17]}], ...},
     "static": {"skip": [...], ...},
     "speculative": {"skip": [...], "exit_after": null, "head_tokens": null, "gamma": 3, ...},
     "notes": [...]}

Loading validates every field and says which one is wrong; a file for another model or with a
layer index the model does not have is refused. Extra keys (the measured figures calibration
adds for people to read) are kept in `info` and never change what a skip policy does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layergate.exporters import bundled
from layergate.exporters.atomic import write_json_atomic
from layergate.exporters.errors import UsageError
from layergate.reference_engine.skip_policies.decider import OPS, Condition, Rule
from layergate.reference_engine.skip_policies.detector import FEATURES

FORMAT = "layergate-rules/1"


class RulesError(UsageError, ValueError):
    """A rules file that cannot be used; names the file and the field."""

    def __init__(self, path: str | Path, field_name: str, message: str) -> None:
        self.path, self.field = str(path), field_name
        super().__init__(f"{path}: field {field_name!r}: {message}")


@dataclass(frozen=True)
class SpeculativeDraft:
    """How `speculative` drafts: skip these layers, or exit after layer `exit_after`; the
    draft's LM head may be cut to the first `head_tokens` vocabulary ids (BPE merge order is
    roughly frequency order). Verification always runs every layer and the whole head."""

    skip: tuple[int, ...] = ()
    exit_after: int | None = None
    head_tokens: int | None = None
    gamma: int = 3


@dataclass(frozen=True)
class RulesFile:
    model: str
    num_layers: int
    created: str
    traffic: Mapping[str, Any]
    dynamic: tuple[Rule, ...] = ()
    static_skip: tuple[int, ...] = ()
    speculative: SpeculativeDraft = SpeculativeDraft()
    info: Mapping[str, Any] = field(default_factory=dict)  # measured figures, for people
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        info = self.info
        spec = self.speculative
        return {
            "format": FORMAT, "model": self.model, "num_layers": self.num_layers,
            "created": self.created, "traffic": dict(self.traffic),
            "dynamic": {**info.get("dynamic", {}), "rules": [_rule_json(r) for r in self.dynamic]},
            "static": {**info.get("static", {}), "skip": list(self.static_skip)},
            "speculative": {**info.get("speculative", {}), "skip": list(spec.skip),
                            "exit_after": spec.exit_after, "head_tokens": spec.head_tokens,
                            "gamma": spec.gamma},
            "notes": list(self.notes),
        }


def save_rules(rules: RulesFile, path: str | Path) -> Path:
    return write_json_atomic(path, rules.to_json())


def load_rules(path: str | Path, *, model: str | None = None,
               num_layers: int | None = None) -> RulesFile:
    """Read and validate a rules file; with `model` / `num_layers`, refuse a file made for
    another model."""
    path = Path(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RulesError(path, "(file)", f"cannot read: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RulesError(path, "(file)", f"not valid JSON: {exc}") from exc
    return parse_rules(obj, path, model=model, num_layers=num_layers)


def parse_rules(obj: Any, path: str | Path, *, model: str | None = None,
                num_layers: int | None = None) -> RulesFile:
    r = _Reader(path)
    top = r.obj(obj, "(top level)")
    if top.get("format") != FORMAT:
        raise RulesError(path, "format", f"expected {FORMAT!r}, got {top.get('format')!r}")
    name = r.text(top.get("model"), "model")
    if model is not None and model_key(name) != model_key(model):
        raise RulesError(path, "model", f"the file was calibrated for {name!r}, not for "
                                        f"{model!r}: run `layergate calibrate` for this model")
    n = r.integer(top.get("num_layers"), "num_layers", low=1)
    if num_layers is not None and n != num_layers:
        raise RulesError(path, "num_layers", f"the file is for {n} layers, the model has "
                                             f"{num_layers}")
    dyn = r.obj(top.get("dynamic", {}), "dynamic")
    rules = tuple(r.rule(x, f"dynamic.rules[{i}]", n)
                  for i, x in enumerate(r.array(dyn.get("rules", []), "dynamic.rules")))
    stat = r.obj(top.get("static", {}), "static")
    spec = r.obj(top.get("speculative", {}), "speculative")
    exit_after = spec.get("exit_after")
    head = spec.get("head_tokens")
    draft = SpeculativeDraft(
        skip=r.layers(spec.get("skip", []), "speculative.skip", n),
        exit_after=None if exit_after is None else r.integer(
            exit_after, "speculative.exit_after", low=0, high=n - 1),
        head_tokens=None if head is None else r.integer(head, "speculative.head_tokens", low=1),
        gamma=r.integer(spec.get("gamma", 3), "speculative.gamma", low=1, high=16))
    info = {k: {x: y for x, y in v.items() if x not in _POLICY_KEYS[k]}
            for k, v in (("dynamic", dyn), ("static", stat), ("speculative", spec))}
    notes = r.array(top.get("notes", []), "notes")
    return RulesFile(
        model=name, num_layers=n, created=str(top.get("created", "")),
        traffic=r.obj(top.get("traffic", {}), "traffic"), dynamic=rules,
        static_skip=r.layers(stat.get("skip", []), "static.skip", n), speculative=draft,
        info=info, notes=tuple(r.text(x, f"notes[{i}]") for i, x in enumerate(notes)))


def model_key(name: str) -> str:
    """Compare model names by their last path part, case-insensitively."""
    return Path(str(name).rstrip("/")).name.lower()


_POLICY_KEYS = {"dynamic": {"rules"}, "static": {"skip"},
                "speculative": {"skip", "exit_after", "head_tokens", "gamma"}}


def _rule_json(rule: Rule) -> dict[str, Any]:
    return {"name": rule.name,
            "when": [{"feature": c.feature, "op": c.op, "value": c.value} for c in rule.when],
            "skip": list(rule.skip)}


class _Reader:
    """Typed field access that raises RulesError naming the field."""

    def __init__(self, path: str | Path) -> None:
        self.path = path

    def fail(self, where: str, message: str) -> RulesError:
        return RulesError(self.path, where, message)

    def obj(self, v: Any, where: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.fail(where, f"must be an object, got {type(v).__name__}")
        return v

    def array(self, v: Any, where: str) -> list[Any]:
        if not isinstance(v, list):
            raise self.fail(where, f"must be a list, got {type(v).__name__}")
        return v

    def text(self, v: Any, where: str) -> str:
        if not isinstance(v, str) or not v:
            raise self.fail(where, f"must be a non-empty string, got {v!r}")
        return v

    def integer(self, v: Any, where: str, low: int | None = None,
                high: int | None = None) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(where, f"must be an integer, got {v!r}")
        if (low is not None and v < low) or (high is not None and v > high):
            raise self.fail(where, f"{v} is out of range {low}..{'' if high is None else high}")
        return v

    def number(self, v: Any, where: str) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float) or v != v:
            raise self.fail(where, f"must be a number, got {v!r}")
        return float(v)

    def layers(self, v: Any, where: str, n: int) -> tuple[int, ...]:
        items = self.array(v, where)
        out = []
        for i, x in enumerate(items):
            if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < n:
                raise self.fail(f"{where}[{i}]", f"unknown layer index {x!r}: the model has "
                                                 f"layers 0..{n - 1}")
            out.append(x)
        if len(set(out)) != len(out):
            raise self.fail(where, f"repeats a layer index: {out}")
        return tuple(sorted(out))

    def rule(self, v: Any, where: str, n: int) -> Rule:
        d = self.obj(v, where)
        conditions = []
        for i, c in enumerate(self.array(d.get("when", []), f"{where}.when")):
            cw = f"{where}.when[{i}]"
            c = self.obj(c, cw)
            if c.get("feature") not in FEATURES:
                raise self.fail(f"{cw}.feature", f"unknown feature {c.get('feature')!r}; "
                                                 f"known: {', '.join(FEATURES)}")
            if c.get("op") not in OPS:
                raise self.fail(f"{cw}.op", f"unknown operator {c.get('op')!r}; "
                                            f"known: {' '.join(OPS)}")
            conditions.append(Condition(c["feature"], c["op"],
                                        self.number(c.get("value"), f"{cw}.value")))
        name = d.get("name", where)
        return Rule(str(name), tuple(conditions), self.layers(d.get("skip"), f"{where}.skip", n))


def bundled_rules_path(model: str) -> Path:
    """Where the committed calibrated rules of a model live: scenarios/rules/<model>.json."""
    return bundled.rules_file(model_key(model))


def calibrated_rules(rules_path: str | None, model: str, num_layers: int) -> RulesFile:
    """The calibrated rules a skip policy serves with: `--rules F`, else the model's bundled
    file."""
    path = Path(rules_path) if rules_path else bundled_rules_path(model)
    if not rules_path and not path.is_file():
        raise RulesError(path, "(file)", f"no calibrated rules are bundled for model {model!r}: "
                                         "pass --rules F (written by `layergate calibrate`)")
    return load_rules(path, model=model, num_layers=num_layers)
