"""Layer policies: which decoder layers a request executes, and how it decodes.

Importing this package registers `full` and whichever of the other policy modules exist.
"""

from __future__ import annotations

import importlib

from reference_engine.policies.base import LayerPlan, Policy, StepResult, mask_fingerprint
from reference_engine.policies.registry import (
    create_policy,
    get_policy,
    policy_names,
    register,
)

__all__ = ["LayerPlan", "Policy", "StepResult", "create_policy", "get_policy",
           "mask_fingerprint", "policy_names", "register"]

_OPTIONAL = ("static", "dynamic", "speculative")


def _load_policy_modules() -> None:
    importlib.import_module("reference_engine.policies.full")
    for name in _OPTIONAL:
        module = f"reference_engine.policies.{name}"
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # a missing dependency inside the module is a real error
                raise


_load_policy_modules()
