"""`full`: every layer, every token. The baseline."""

from __future__ import annotations

from reference_engine.policies.base import Policy
from reference_engine.policies.registry import register


@register("full")
class FullPolicy(Policy):
    """Executes the whole decoder; the base class already does exactly that."""
