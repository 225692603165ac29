"""OpenAI-style errors: every failure the client can cause becomes a 4xx with the body
`{"error": {"message", "type", "param", "code"}}`, never a 500 or a dropped connection."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger(__name__)

# status -> OpenAI error type
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
}


class APIError(Exception):
    """An error the server answers with, already in OpenAI's vocabulary."""

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 code: str | None = None, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, param=self.param, code=self.code)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def error_body(status: int, message: str, *, param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    kind = _TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _validation_error(exc: RequestValidationError) -> APIError:
    """Pydantic's first complaint, phrased for a person, with the field as `param`."""
    errors = exc.errors()
    if not errors:
        return APIError(400, "invalid request body", code="invalid_request")
    first = errors[0]
    loc = _field_path(first.get("loc", ()))
    if first.get("type") == "json_invalid":
        detail = first.get("ctx", {}).get("error", "")
        return APIError(400, f"request body is not valid JSON: {detail}".rstrip(": "),
                        code="invalid_json")
    param = ".".join(loc) or None
    where = f"`{param}`: " if param else "request body: "
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    return APIError(400, f"{where}{first.get('msg', 'invalid value')}{more}", param=param,
                    code="invalid_value" if param else "invalid_request")


_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none", "function-after",
              "constrained-str", "constrained-int", "constrained-float"}


def _field_path(loc: tuple) -> list[str]:
    """The request field a pydantic location points at, without the union-member tags
    (`messages.0.content.str` -> `messages.0.content`)."""
    path = []
    for part in loc[1:] if loc[:1] == ("body",) else loc:
        text = str(part)
        if text in _TYPE_TAGS or "[" in text:
            break
        path.append(text)
    return path


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation_error(exc).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message, code = str(exc.detail), None
        if exc.status_code == 404:
            message, code = f"no route {request.method} {request.url.path}", "not_found"
        elif exc.status_code == 405:
            message = f"method {request.method} is not allowed on {request.url.path}"
            code = "method_not_allowed"
        return APIError(exc.status_code, message, code=code, headers=exc.headers).response()

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error while serving a request")
        return APIError(500, f"internal error: {type(exc).__name__}",
                        code="internal_error").response()
