"""What `layergate policies` and `layergate scenarios` print: one line per bundled name."""

from __future__ import annotations

import click

from layergate.exporters import bundled


def echo_catalogue(kind: bundled.Kind, title: str) -> None:
    entries = bundled.catalogue(kind)
    width = max((len(name) for name, _ in entries), default=0)
    click.echo(f"{title}:")
    for name, text in entries:
        click.echo(f"  {name:<{width}}  {text}".rstrip())
