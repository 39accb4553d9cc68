"""The report's tables and the figures in their cells, as the templates print them."""

from __future__ import annotations

from typing import Any

from gpuplan.units import HOURS_DIGITS, MS_DIGITS, Shown, format_figure, format_money, format_ms

# A table this short is kept on one page; a longer one may split (report.css keeps two rows on each side of the
# break), as moving it whole left most of a page blank.
SHORT_TABLE_ROWS = 8
KV_WIDTHS = (26, 74)


def table(
    caption: str,
    columns: list[str],
    rows: list[list[str]],
    *,
    numeric: tuple[int, ...] = (),
    kind: str = "grid",
    widths: tuple[int, ...] = (),
    keep: bool = False,
) -> dict[str, Any]:
    """One table as the templates print it: a caption, column headers, and rows whose first cell heads the row.

    ``numeric`` lists the columns aligned right; ``kind`` is "grid" or "kv" (label/value pairs); ``widths``
    are column widths in percent (the PDF lays tables out with fixed widths: fast, and the same every time).
    A cell's lines (``\n``) are line breaks in HTML and "; " in Markdown. ``keep`` keeps a longer table
    on one page too (one that fits a page and reads only whole, as options compared side by side).
    """
    if kind == "kv" and not widths:
        widths = KV_WIDTHS
    assert not widths or (len(widths) == len(columns) and sum(widths) == 100), (caption, widths)
    return {
        "caption": caption,
        "columns": [
            {"label": label, "num": index in numeric, "width": widths[index] if widths else None}
            for index, label in enumerate(columns)
        ],
        "rows": [
            [
                {"text": "; ".join(cell.split("\n")), "lines": cell.split("\n"), "num": index in numeric}
                for index, cell in enumerate(row)
            ]
            for row in rows
        ],
        "kind": kind,
        "short": keep or len(rows) <= SHORT_TABLE_ROWS,
    }


def money(value: float | Shown | None, currency: str) -> str:
    return format_money(value, currency)


def hours(hours: float) -> str:
    return format_figure(hours, 1, HOURS_DIGITS)


def ms(seconds: float | None, digits: int, published: int = MS_DIGITS) -> str:
    """Milliseconds, or "no bound" where the error band gives none (a band of 100% or more)."""
    return "no bound" if seconds is None else f"{format_ms(seconds, digits, published)} ms"
