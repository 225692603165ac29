"""Bodies of the API routes are JSON, whatever Content-Type the client claims.

OpenAI's API takes only JSON, and `curl -d '{...}'` labels its body
`application/x-www-form-urlencoded`; without this, FastAPI would parse it as a form and
answer with a confusing error. Pure ASGI: the header is rewritten in the scope, nothing else.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

JSON_PREFIX = "/v1/"


class JSONBodies:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["method"] == "POST"
                and scope["path"].startswith(JSON_PREFIX)):
            headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
            scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
        await self.app(scope, receive, send)
