"""The `layergate` response extension of one finished request (keys: docs/CONTRACTS.md)."""

from __future__ import annotations

from typing import Any

from layergate.reference_engine.sequence import SequenceState

EXTENSION_KEYS = (
    "policy", "dry_run", "policy_fingerprint", "layers_total", "layer_mask",
    "layers_executed_per_token", "mean_layers_executed", "would_skip_layers",
    "theoretical_saving", "draft_tokens_proposed", "draft_tokens_accepted",
    "draft_steps",
    "prefix_cache_query_tokens", "prefix_cache_hit_tokens", "computed_tokens",
    "peak_memory_bytes", "decision_time_s", "queue_time_s", "prefill_time_s", "decode_time_s",
    "token_ids", "batch_invariant",
)


def build_extension(seq: SequenceState, *, policy: str, num_layers: int, fixed_mask: bool,
                    batch_invariant: bool, peak_memory_bytes: int,
                    extra: dict[str, Any]) -> dict[str, Any]:
    plan = seq.plan
    per_token = list(seq.layers_per_token)
    mean = sum(per_token) / len(per_token) if per_token else float(plan.layers_executed)
    queue = (seq.admitted_at - seq.request.arrival_time) if seq.admitted_at else 0.0
    ext: dict[str, Any] = {
        "policy": policy,
        "dry_run": plan.dry_run,
        "policy_fingerprint": plan.fingerprint,
        "layers_total": num_layers,
        "layer_mask": [int(m) for m in plan.mask] if fixed_mask else None,
        "layers_executed_per_token": per_token,
        "mean_layers_executed": mean,
        "would_skip_layers": list(plan.would_skip) if plan.dry_run else None,
        "theoretical_saving": 1.0 - mean / num_layers,
        "draft_tokens_proposed": seq.draft_proposed,
        "draft_tokens_accepted": seq.draft_accepted,
        "draft_steps": seq.draft_steps,
        "prefix_cache_query_tokens": seq.prefix_query_tokens,
        "prefix_cache_hit_tokens": seq.prefix_hit_tokens,
        "computed_tokens": seq.computed_tokens,
        "peak_memory_bytes": int(peak_memory_bytes),
        "decision_time_s": plan.decision_time_s,
        "queue_time_s": max(0.0, queue),
        "prefill_time_s": seq.prefill_time_s,
        "decode_time_s": seq.decode_time_s,
        "token_ids": list(seq.output_ids),
        "batch_invariant": batch_invariant,
    }
    ext.update({k: v for k, v in extra.items() if k in EXTENSION_KEYS})
    return ext
