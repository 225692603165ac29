"""The response recorded in production (traffic `response`), the oracle of
`termination_accuracy_recorded`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from layergate.exporters.catalogue import RECORDED
from layergate.exporters.records import ArmResult
from layergate.exporters.tool_calls import from_message


def recorded_result(request_id: str, scenario: str, response: Mapping[str, Any]) -> ArmResult:
    """An `ArmResult` on arm `recorded` from an OpenAI response body; ValueError names what
    is missing."""
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError(f"request {request_id!r}: recorded response has no choices[0]")
    choice = choices[0]
    message = choice.get("message") or {}
    text = message.get("content") if isinstance(message, dict) else None
    text = text if isinstance(text, str) else choice.get("text") or ""
    usage = response.get("usage") or {}
    tokens = usage.get("completion_tokens")
    if not isinstance(tokens, int):
        raise ValueError(f"request {request_id!r}: recorded response has no "
                         "usage.completion_tokens")
    ext = response.get("layergate") or {}
    ids = ext.get("token_ids") if isinstance(ext, dict) else None
    message = message if isinstance(message, dict) else {}
    reasoning = message.get("reasoning") or message.get("reasoning_content")
    return ArmResult(request_id=request_id, arm=RECORDED, scenario=scenario, ok=True,
                     output_text=text, output_tokens=tokens,
                     tool_calls=from_message(message.get("tool_calls")) or from_message(
                         [{"function": message["function_call"]}]
                         if isinstance(message.get("function_call"), dict) else None),
                     reasoning_text=reasoning if isinstance(reasoning, str) else "",
                     finish_reason=choice.get("finish_reason"),
                     token_ids=tuple(ids) if isinstance(ids, list) else None)


def recorded_results(requests: Iterable[tuple[str, str, Mapping[str, Any] | None]]
                     ) -> list[ArmResult]:
    """`recorded` rows for the (id, scenario, response) of every request that has one; add
    them to the results given to `compute_figures` for `termination_accuracy_recorded`."""
    return [recorded_result(rid, scenario, response) for rid, scenario, response in requests
            if response]
