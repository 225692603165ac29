"""Upload the provisioned datasource and every dashboard to a running Grafana, through
grafana-client: the same files docker-compose provisions, for a Grafana you already run."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import niquests
import yaml
from grafana_client import GrafanaApi
from grafana_client.client import GrafanaClientError, GrafanaException

from layergate.exporters.errors import InfrastructureError
from layergate.harness.stack.native import DASHBOARDS_DIR

FOLDER_UID = "layergate"
DATASOURCE_FILE = DASHBOARDS_DIR / "provisioning" / "datasources" / "prometheus.yml"


class GrafanaPushError(InfrastructureError, RuntimeError):
    """Grafana unreachable, credentials refused, or an upload rejected."""


@dataclass(frozen=True)
class PushResult:
    datasource_uid: str
    dashboards: tuple[str, ...]  # uids, in upload order
    urls: tuple[str, ...]


def load_datasource(prometheus_url: str | None = None,
                    path: Path = DATASOURCE_FILE) -> dict[str, Any]:
    """The provisioned datasource as a Grafana API payload (URL overridable)."""
    entries = yaml.safe_load(path.read_text())["datasources"]
    ds = dict(entries[0])
    if prometheus_url:
        ds["url"] = prometheus_url
    ds.pop("editable", None)
    return ds


def load_dashboards(directory: Path = DASHBOARDS_DIR / "grafana") -> list[dict[str, Any]]:
    files = sorted(directory.glob("*.json"))
    if not files:
        raise GrafanaPushError(f"no dashboard JSON under {directory}")
    return [json.loads(f.read_text()) for f in files]


def _explain(exc: Exception, url: str) -> GrafanaPushError:
    if isinstance(exc, GrafanaException) and exc.status_code in (401, 403):
        return GrafanaPushError(f"Grafana at {url} refused the credentials "
                                f"(HTTP {exc.status_code}: {exc}); check --api-key or "
                                "--user/--password")
    if isinstance(exc, GrafanaException):
        return GrafanaPushError(f"Grafana at {url} answered HTTP {exc.status_code}: {exc}")
    return GrafanaPushError(f"Grafana is not reachable at {url}: {exc}")


def _upsert_datasource(api: GrafanaApi, ds: dict[str, Any]) -> None:
    try:
        api.datasource.get_datasource_by_uid(ds["uid"])
    except GrafanaClientError as exc:
        if exc.status_code != 404:
            raise
        api.datasource.create_datasource(ds)
        return
    api.datasource.update_datasource_by_uid(ds["uid"], ds)


def _ensure_folder(api: GrafanaApi) -> None:
    try:
        api.folder.get_folder(FOLDER_UID)
    except GrafanaClientError as exc:
        if exc.status_code != 404:
            raise
        api.folder.create_folder("layergate", uid=FOLDER_UID)


def push_dashboards(url: str, credential: str | tuple[str, str] | None,
                    prometheus_url: str | None = None, timeout: float = 10.0,
                    on_upload: Callable[[str], None] | None = None) -> PushResult:
    api = GrafanaApi.from_url(url, credential=credential, timeout=timeout)
    ds = load_datasource(prometheus_url)
    boards = load_dashboards()
    uploaded: list[str] = []
    links: list[str] = []
    try:
        api.health.check()
        _upsert_datasource(api, ds)
        _ensure_folder(api)
        for board in boards:
            payload = {"dashboard": {**board, "id": None}, "folderUid": FOLDER_UID,
                       "overwrite": True, "message": "layergate dashboards push"}
            answer = api.dashboard.update_dashboard(payload)
            uploaded.append(board["uid"])
            links.append(url.rstrip("/") + str((answer or {}).get("url", "")))
            if on_upload:
                on_upload(board["title"])
    except (GrafanaException, niquests.exceptions.RequestException) as exc:
        raise _explain(exc, url) from exc
    return PushResult(ds["uid"], tuple(uploaded), tuple(links))
