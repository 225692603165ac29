"""Scrape each arm's `/metrics` before and after a run into `scrapes/<arm>-<when>.prom`.

An arm whose metrics cannot be read does not stop the run: the failure is returned as a
note for the manifest (the cache-hit delta then says it is not computable).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from harness.rundir import scrape_path


def scrape_arms(arms: dict[str, str], run_dir: Path, when: str, timeout: float = 10.0) -> list[str]:
    """Write one file per arm that answers; return a note for each arm that did not."""
    notes = []
    for arm, url in arms.items():
        try:
            response = httpx.get(url.rstrip("/") + "/metrics", timeout=timeout)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            notes.append(f"scrape {arm} {when}: {url}/metrics failed: {exc}")
            continue
        path = scrape_path(run_dir, arm, when)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(response.text, encoding="utf-8")
    return notes
