"""Render one linted spec's report in the asked-for formats (all in memory before anything is written)."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from gpuplan.findings import Severity
from gpuplan.linter import LintResult
from gpuplan.report.model import build_report
from gpuplan.report.render import render_html, render_markdown


def render_report(
    result: LintResult,
    formats: tuple[str, ...],
    generated: datetime.date,
    progress: Callable[[str], None] | None = None,
    fail_on: Severity = Severity.ERROR,
    render_pdf: Callable[[str], bytes] | None = None,
    verification: list[dict[str, Any]] | None = None,
) -> dict[str, bytes]:
    """Bytes per format; the PDF is the HTML (with the bundled fonts) through WeasyPrint (``render_pdf``:
    gpuplan.report.pdf_process's renderer, or in-process). ``verification``: the "Verified against a run" rows."""
    model: dict[str, Any] = build_report(result, generated, result.settings, fail_on, verification)
    rendered: dict[str, bytes] = {}
    if "md" in formats:
        rendered["md"] = render_markdown(model).encode()
    if "html" in formats:
        rendered["html"] = render_html(model).encode()
    if "pdf" in formats:
        if render_pdf is None:
            from gpuplan.report import pdf as pdf_module

            render_pdf = pdf_module.render_pdf
        if progress:
            progress("rendering PDF")
        rendered["pdf"] = render_pdf(render_html(model, bundled_fonts=True))
    return rendered
