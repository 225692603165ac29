"""Check a manifest's object against an upstream CRD's OpenAPI v3 schema: every field the
object writes must be one the schema declares, of its type, within its enum. (Kubernetes
prunes an unknown field silently, so a misspelt one would do nothing, unnoticed.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

UPSTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"
_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                       "boolean": (bool,), "object": (dict,), "array": (list,)}


def flagger_canary_schema() -> dict:
    docs = yaml.safe_load_all((UPSTREAM / "flagger-crd.yaml").read_text())
    [crd] = [d for d in docs if d and d["spec"]["names"]["kind"] == "Canary"]
    [version] = [v for v in crd["spec"]["versions"] if v.get("storage")]
    return version["schema"]["openAPIV3Schema"]


def argo_subtree(name: str, path: str) -> dict:
    """A vendored Argo Rollouts schema subtree (fetch_crds.py's ARGO_KEEP)."""
    return json.loads((UPSTREAM / f"{name}-schema.json").read_text())["subtrees"][path]


def at(schema: dict, dotted: str) -> dict:
    """The schema of a dotted property path; arrays are stepped into by their items."""
    for key in dotted.split("."):
        schema = schema["properties"][key]
        if schema.get("type") == "array":
            schema = schema["items"]
    return schema


def problems(value: Any, schema: dict, where: str = "") -> list[str]:
    """Every way `value` disagrees with `schema` (empty: it conforms)."""
    out = []
    if schema.get("x-kubernetes-int-or-string"):
        return [] if isinstance(value, int | str) and not isinstance(value, bool) \
            else [f"{where}: {value!r} is neither int nor string"]
    kind = schema.get("type")
    if kind:
        ok = isinstance(value, _TYPES[kind]) and not (kind in ("integer", "number")
                                                      and isinstance(value, bool))
        if not ok:
            return [f"{where}: {value!r} is not {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{where}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict) and "properties" in schema:
        open_ = schema.get("x-kubernetes-preserve-unknown-fields") or schema.get(
            "additionalProperties")
        for key, item in value.items():
            if key in schema["properties"]:
                out += problems(item, schema["properties"][key], f"{where}.{key}")
            elif not open_:
                out.append(f"{where}.{key}: no such field upstream")
        out += [f"{where}.{key}: required upstream" for key in schema.get("required", ())
                if key not in value]
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            out += problems(item, schema["items"], f"{where}[{i}]")
    return out
