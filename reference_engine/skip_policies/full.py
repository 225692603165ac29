"""`full`: every layer, every token. The baseline."""

from __future__ import annotations

from layergate.exporters.catalogue import FULL_DEPTH
from layergate.reference_engine.skip_policies.base import SkipPolicy
from layergate.reference_engine.skip_policies.registry import register


@register(FULL_DEPTH)
class FullSkipPolicy(SkipPolicy):
    """Executes the whole decoder; the base class already does exactly that."""
