"""The one client of Prometheus's HTTP API (`/api/v1/...`): the watch's windows and the
stack's queries. Every way a query can fail is a `PrometheusError` naming the server and
the query; the caller decides whether that is missing data or a usage error."""

from __future__ import annotations

from typing import Any

import httpx

from layergate.exporters.errors import InfrastructureError


class PrometheusError(InfrastructureError, RuntimeError):
    """Prometheus did not answer, answered without JSON, or failed or refused a query."""

    def __init__(self, url: str, query: str, problem: str, error_type: str | None = None,
                 error: str | None = None) -> None:
        self.url, self.query, self.problem = url, query, problem
        self.error_type, self.error = error_type, error  # Prometheus's own words, if any
        super().__init__(f"{self.where} (query {query!r})")

    @property
    def where(self) -> str:
        """What went wrong, without the query."""
        return f"Prometheus at {self.url} {self.problem}"

    @property
    def refused(self) -> bool:
        """The query itself is malformed (`bad_data`), not Prometheus unwell."""
        return self.error_type == "bad_data"


class PrometheusAPI:
    """Queries Prometheus at `url`; close it (or use it as a context manager) when done."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._client = httpx.Client(timeout=timeout)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> PrometheusAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's result (a vector's series), at `at` (Unix time) or now."""
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self.get("/api/v1/query", params)["result"]

    def query_range(self, expr: str, start: float, end: float,
                    step: float = 1.0) -> list[dict[str, Any]]:
        params = {"query": expr, "start": start, "end": end, "step": step}
        return self.get("/api/v1/query_range", params)["result"]

    def get(self, path: str, params: dict[str, Any]) -> Any:
        """The `data` of any API endpoint's answer."""
        query = str(params.get("query") or path)  # endpoints without a query named by path
        try:
            resp = self._client.get(f"{self.url}{path}", params=params)
        except httpx.HTTPError as exc:
            raise PrometheusError(self.url, query, f"did not answer: {exc}") from exc
        try:
            body = resp.json()
        except ValueError:
            raise PrometheusError(self.url, query, f"answered HTTP {resp.status_code} "
                                  "without JSON") from None
        if body.get("status") != "success":
            kind, error = body.get("errorType"), body.get("error")
            raise PrometheusError(self.url, query, f"failed a query: {kind}: {error}",
                                  kind, error)
        return body["data"]
