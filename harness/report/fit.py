"""A table that fits the width it is printed at: rich's table where that width holds every
cell on one line, else each row stacked, so that no value is cut (`0.5…`) or cropped. A CI
log is such a place: rich sees no terminal there and lays out 80 columns.

Stacked, a row reads as its key cells (the name, the verdict) on one line, then each other
cell after its header: packed several to a line (`packed`), or one a line under aligned
headers. A `header value` pair is never split across lines (one longer than a line wraps
at its spaces); an empty cell (blank or —) is left out."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

GAP, INDENT = "  ", "    "
EMPTY = ("", "—")
UNBOUNDED = 100_000  # the width a table is measured at to find the width it needs


@dataclass(frozen=True)
class Fit:
    """`table` as it is where it fits on one line per row, else stacked."""

    table: Table
    keys: int = 1  # the leading cells a stacked row starts with
    packed: bool = True  # False: one `header value` a line

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if needed_width(console, self.table) <= options.max_width:
            yield self.table
        else:
            yield from stacked(console, self.table, self.keys, self.packed, options.max_width)


def needed_width(console: Console, table: Table) -> int:
    """The width `table` takes with no cell wrapped."""
    return Measurement.get(console, console.options.update_width(UNBOUNDED), table).maximum


def stacked(console: Console, table: Table, keys: int, packed: bool,
            width: int) -> Iterator[Text]:
    """The title, each row stacked (see the module), then the caption."""
    if table.title:
        yield _text(console, table.title, "table.title")
    headers = [str(c.header) for c in table.columns]
    cells = [list(c.cells) for c in table.columns]
    for i, row in enumerate(table.rows):
        texts = [_text(console, column[i]) for column in cells]
        head = Text(GAP).join(t for t in texts[:keys] if t.plain)
        shown = [(h, t) for h, t in zip(headers[keys:], texts[keys:], strict=True)
                 if t.plain.strip() not in EMPTY]
        lines = _packed(head, shown, width) if packed else [head, *_aligned(shown)]
        for line in lines:
            if row.style:
                line.stylize(row.style)
            yield line
    if table.caption:
        yield _text(console, table.caption, "table.caption")


def _text(console: Console, cell: RenderableType, style: str = "") -> Text:
    if isinstance(cell, Text):
        return cell.copy()
    if isinstance(cell, str):
        return console.render_str(cell, style=style)
    raise TypeError(f"a stacked table holds text, not {type(cell).__name__}")


def _pair(header: str, value: Text) -> Text:
    return Text.assemble((f"{header} ", "dim"), value) if header else value


def _packed(head: Text, shown: list[tuple[str, Text]], width: int) -> list[Text]:
    lines = [head.copy()]
    for header, value in shown:
        pair = _pair(header, value)
        if lines[-1].cell_len + len(GAP) + pair.cell_len <= width:
            lines[-1].append(GAP)
            lines[-1].append_text(pair)
        else:
            lines.append(Text(INDENT).append_text(pair))
    return lines


def _aligned(shown: list[tuple[str, Text]]) -> list[Text]:
    wide = max((len(h) for h, _ in shown), default=0)
    return [Text(INDENT).append_text(_pair(h.ljust(wide), v) if h else v) for h, v in shown]
