"""Scrape each arm's `/metrics` before and after a run into the run directory's scrapes.

An arm whose metrics cannot be read does not stop the run: the failure is returned as a
note for the manifest (the cache-hit delta then says it is not computable). An arm that
answers 404 has no metrics endpoint (llama-cpp-python's server, a llama-server without
--metrics): that is what its scrape file says, not a failure.
"""

from __future__ import annotations

import httpx

from layergate.exporters.prom_text import NO_METRICS_ENDPOINT
from layergate.harness.readiness import get
from layergate.harness.rundir import RunDir


def scrape_arms(arms: dict[str, str], run: RunDir, when: str,
                timeout: float = 10.0) -> list[str]:
    """Write one file per arm that answers; return a note for each arm that did not."""
    notes = []
    for arm, url in arms.items():
        metrics = url.rstrip("/") + "/metrics"
        try:
            response = get(metrics, timeout)
            if response.status_code == 404:
                run.write_scrape(arm, when, f"{NO_METRICS_ENDPOINT}: GET {metrics} answered "
                                            "404\n")
                if when == "before":
                    notes.append(f"arm {arm}: no /metrics endpoint ({metrics} answered 404); "
                                 "its counters are not computable")
                continue
            response.raise_for_status()
        except httpx.HTTPError as exc:
            notes.append(f"scrape {arm} {when}: {url}/metrics failed: {exc}")
            continue
        run.write_scrape(arm, when, response.text)
    return notes
