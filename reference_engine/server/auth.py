"""Bearer-key authentication for the API routes.

Like vLLM's `--api-key`, only `/v1/*` is guarded: `/health` and `/metrics` stay open so
probes and Prometheus scrapes need no secret. Pure ASGI, so streaming is untouched.
"""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from layergate.reference_engine.server.errors import APIError

GUARDED_PREFIX = "/v1"


class BearerAuth:
    def __init__(self, app: ASGIApp, api_key: str) -> None:
        if not api_key:
            raise ValueError("BearerAuth needs a non-empty api_key")
        self.app = app
        self._expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(GUARDED_PREFIX):
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                error = APIError(401, "missing or wrong API key: send `Authorization: Bearer "
                                      "<key>`", code="invalid_api_key",
                                 headers={"WWW-Authenticate": "Bearer"})
                await error.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)
