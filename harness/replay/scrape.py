"""Scrape each arm's `/metrics` before and after a run into the run directory's scrapes.

An arm whose metrics cannot be read does not stop the run: the failure is returned as a
note for the manifest (the cache-hit delta then says it is not computable).
"""

from __future__ import annotations

import httpx

from harness.rundir import RunDir


def scrape_arms(arms: dict[str, str], run: RunDir, when: str,
                timeout: float = 10.0) -> list[str]:
    """Write one file per arm that answers; return a note for each arm that did not."""
    notes = []
    for arm, url in arms.items():
        try:
            response = httpx.get(url.rstrip("/") + "/metrics", timeout=timeout)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            notes.append(f"scrape {arm} {when}: {url}/metrics failed: {exc}")
            continue
        run.write_scrape(arm, when, response.text)
    return notes
