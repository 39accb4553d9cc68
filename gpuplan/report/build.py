"""Render one linted spec's report in the asked-for formats (all in memory before anything is written)."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from gpuplan.linter import LintResult
from gpuplan.report.model import build_report
from gpuplan.report.render import render_html, render_markdown


def render_report(
    result: LintResult,
    formats: tuple[str, ...],
    generated: datetime.date,
    epoch: int,
    progress: Callable[[str], None] | None = None,
    verification: list[dict[str, Any]] | None = None,
) -> dict[str, bytes]:
    """Bytes per format; the PDF is the HTML through WeasyPrint."""
    model: dict[str, Any] = build_report(result, generated, result.settings, verification)
    rendered: dict[str, bytes] = {}
    if "md" in formats:
        rendered["md"] = render_markdown(model).encode()
    if "html" in formats or "pdf" in formats:
        html = render_html(model)
        if "html" in formats:
            rendered["html"] = html.encode()
        if "pdf" in formats:
            from gpuplan.report.pdf import render_pdf

            if progress:
                progress("rendering PDF")
            rendered["pdf"] = render_pdf(html, epoch)
    return rendered
