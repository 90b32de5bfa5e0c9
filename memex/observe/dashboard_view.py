"""The dashboard's screen laid out to fit the terminal (80x24 and up).

The table's columns give way by priority (MODE, how ``memex watch`` serves each source, shows only while it
serves one): the source's full name and full
state word always show, then the age of the last poll, the last error (with
its time: 40 characters before any column below it, all that is left
once every column fits), and the rest as room allows. Every other
line is one screen line (cut with ``…``, never wrapped), and the latest poll
lines fill only the rows left under the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.text import Text

# Left to right on screen.
DISPLAY = ("SOURCE", "STATE", "MODE", "CURSOR", "LAST POLL", "LAST OK", "NEW/DUP", "1H", "24H", "PER HOUR (24H)", "LAST ERROR")
# Which columns stay when the terminal is narrow, most important first.
PRIORITY = ("SOURCE", "STATE", "LAST POLL", "LAST ERROR", "NEW/DUP", "LAST OK", "MODE", "CURSOR", "24H", "1H", "PER HOUR (24H)")
RIGHT = frozenset({"NEW/DUP", "1H", "24H"})
ERROR = "LAST ERROR"
ERROR_MIN = 16  # the error column is shown only with at least this much room
ERROR_WANT = 40  # the error's room before columns of lower priority are added
COLUMN_COST = 3  # a column's separator and padding around its cells


@dataclass(frozen=True)
class Layout:
    """The columns that fit (in display order) and the width left for the last error."""

    columns: tuple[str, ...]
    error_width: int


def layout(cells: list[dict[str, str]], width: int) -> Layout:
    """Choose the columns of rows ``cells`` (header -> text) that fit in ``width`` characters, by priority.

    The last error is given its room before any column of lower priority: up to ``ERROR_WANT`` characters (at least
    ``ERROR_MIN``, else it is not shown), and then the rest of the line once every column fits. So a wider screen
    never shows a narrower error: it only adds columns beside it.
    """
    natural = {col: max([len(col), *(len(c.get(col, "")) for c in cells)]) for col in DISPLAY}
    chosen: list[str] = []
    used = 1  # the table's right edge
    error_width = 0
    # MODE only while memex watch serves a source: otherwise the column would say nothing
    candidates = [col for col in PRIORITY if col != "MODE" or any(c.get(col, "-") != "-" for c in cells)]
    for col in candidates:
        if col == ERROR:
            room = min(natural[ERROR], ERROR_WANT, width - used - COLUMN_COST)
            if room >= min(natural[ERROR], ERROR_MIN):
                chosen.append(col)
                error_width = room
                used += room + COLUMN_COST
            continue
        cost = natural[col] + COLUMN_COST
        if col in ("SOURCE", "STATE") or used + cost <= width:
            chosen.append(col)
            used += cost
    if ERROR in chosen and len(chosen) == len(candidates):  # every column shows: the error takes what is left
        error_width = min(natural[ERROR], error_width + max(0, width - used))
    return Layout(tuple(c for c in DISPLAY if c in chosen), error_width)


def table(cells: list[dict[str, str]], styles: list[str], width: int) -> RenderableType:
    """The sources' table for rows ``cells`` (state styles in ``styles``), fitted to ``width``."""
    from rich.table import Table
    from rich.text import Text

    fit = layout(cells, width)
    grid = Table(expand=False, pad_edge=False)
    for col in fit.columns:
        if col == ERROR:
            grid.add_column(col, no_wrap=True, overflow="ellipsis", max_width=fit.error_width)
        else:
            grid.add_column(col, no_wrap=True, justify="right" if col in RIGHT else "left")
    for row, style in zip(cells, styles, strict=True):
        shown: list[RenderableType] = []
        for col in fit.columns:
            text = row.get(col, "")
            if col == "STATE":
                shown.append(Text(text, style=style))
            elif col == ERROR:
                shown.append(Text(text, style="red", no_wrap=True, overflow="ellipsis"))
            else:
                shown.append(Text(text))  # plain text, never read as rich markup
        grid.add_row(*shown)
    return grid


def line(text: str, style: str = "") -> Text:
    """One screen line: cut with an ellipsis at the terminal's edge, never wrapped."""
    from rich.text import Text

    return Text(text, style=style, no_wrap=True, overflow="ellipsis")


def table_height(rows: int) -> int:
    """Screen lines the table takes: top edge, header, header rule, the rows, bottom edge."""
    return rows + 4
