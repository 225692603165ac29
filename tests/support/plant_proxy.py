"""A proxy that plants a known change in a real server's streamed answers, each chunk
delivered when it arrived: the candidate of a test that must fail for a known reason.

- `changed_arguments`: every tool call's arguments arrive as the server sent them, less
  one change: the first string value gets " (planted)" appended (or, without a string,
  a key `planted` is added). The fragments are forwarded with their arguments blanked and
  the changed arguments go out whole in one extra chunk just before the finish_reason.
- `dropped_reasoning`: `reasoning` / `reasoning_content` are taken out of every delta.

Other paths (health, `/metrics`, `/v1/models`) and non-streamed answers pass unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .asgi_proxy import AsgiProxy

PLANTED = " (planted)"


def _changed(arguments: str) -> str:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return arguments + PLANTED  # unparsed: changed all the same
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str):
                value[key] = item + PLANTED
                return json.dumps(value)
        value["planted"] = True
    return json.dumps(value)


class PlantProxy(AsgiProxy):
    """Forwards to `upstream`, changing streamed answers as `plant` names."""

    def __init__(self, upstream: str, plant: str) -> None:
        if plant not in ("changed_arguments", "dropped_reasoning"):
            raise ValueError(f"unknown plant {plant!r}")
        super().__init__(upstream)
        self.plant = plant
        self.planted = 0  # chunks (reasoning) or answers (arguments) changed

    async def handle(self, request):  # noqa: ANN001, ANN201 (starlette's types)
        from starlette.responses import StreamingResponse

        client, upstream = await self.open_upstream(request)
        streamed = "text/event-stream" in upstream.headers.get("content-type", "")
        if not request.url.path.startswith("/v1/") or not streamed:
            return await self.whole(client, upstream)

        async def events():
            calls: dict[int, list[str]] = {}
            try:
                async for line in upstream.aiter_lines():
                    if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                        if line:
                            yield line + "\n\n"
                        continue
                    for out in self._plant(json.loads(line[5:]), calls):
                        yield "data: " + json.dumps(out) + "\n\n"
            finally:
                await upstream.aclose()
                await client.aclose()

        return StreamingResponse(events(), upstream.status_code,
                                 media_type="text/event-stream")

    def _plant(self, chunk: dict[str, Any], calls: dict[int, list[str]]
               ) -> Iterator[dict[str, Any]]:
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if self.plant == "dropped_reasoning":
                dropped = [delta.pop(key, None) for key in ("reasoning", "reasoning_content")]
                self.planted += any(dropped)
                continue
            for call in delta.get("tool_calls") or ():
                function = call.get("function") or {}
                calls.setdefault(call.get("index", 0), []).append(
                    function.get("arguments") or "")
                if "arguments" in function:
                    function["arguments"] = ""
            if choice.get("finish_reason") and calls:
                self.planted += 1
                yield {**chunk, "choices": [{"index": 0, "finish_reason": None, "delta": {
                    "tool_calls": [{"index": i, "function": {"arguments": _changed(
                        "".join(parts))}} for i, parts in sorted(calls.items())]}}],
                       "usage": None}
                calls.clear()
        yield chunk
