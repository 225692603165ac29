"""Locust's own statistics of the demo's replay (`locust_stats.csv`), as a terminal table."""

from __future__ import annotations

import csv
from pathlib import Path

from rich.table import Table


def locust_table(stats_csv: Path, expected: int) -> Table | None:
    """One row per arm:scenario of the end-to-end requests; None when Locust wrote none.

    `expected` is the number of results in the run's store: when Locust's CSV counts fewer
    (its last flush can miss the final requests), the table says so rather than mislead."""
    if not stats_csv.is_file():
        return None
    with stats_csv.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("Type") == "POST"]
    if not rows:
        return None
    table = Table(title=f"Locust stats ({stats_csv})", title_justify="left")
    for column in ("arm:scenario", "requests", "failures", "median ms", "p95 ms", "max ms"):
        table.add_column(column, justify="left" if column == "arm:scenario" else "right")
    for r in sorted(rows, key=lambda r: r["Name"]):
        table.add_row(r["Name"], r["Request Count"], r["Failure Count"],
                      f"{float(r['Median Response Time']):.0f}", r["95%"],
                      f"{float(r['Max Response Time']):.0f}")
    counted = sum(int(r["Request Count"]) for r in rows)
    if counted != expected:
        table.caption = (f"Locust's CSV counts {counted} of the {expected} requests in "
                         "results.sqlite (its last flush missed some): the store is the record")
    return table
