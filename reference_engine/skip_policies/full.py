"""`full`: every layer, every token. The baseline."""

from __future__ import annotations

from reference_engine.skip_policies.base import SkipPolicy
from reference_engine.skip_policies.registry import register


@register("full")
class FullSkipPolicy(SkipPolicy):
    """Executes the whole decoder; the base class already does exactly that."""
