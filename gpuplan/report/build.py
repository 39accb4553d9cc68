"""Render one linted spec's report in the asked-for formats (all in memory before anything is written).

The decision is computed once, by gpuplan.decision.memo.build_memo; every format renders that Memo."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from gpuplan.decision.memo import Memo, build_memo
from gpuplan.findings import Severity
from gpuplan.linter import LintResult
from gpuplan.report.model import build_report
from gpuplan.report.render import render_html, render_markdown


def report_model(
    result: LintResult,
    generated: datetime.date,
    fail_on: Severity = Severity.ERROR,
    verification: list[dict[str, Any]] | None = None,
    memo: Memo | None = None,
) -> dict[str, Any]:
    """The report model of ``result``: its Memo (built here unless given), formatted."""
    memo = memo or build_memo(result, generated, fail_on, result.settings)
    return build_report(memo, result, verification)


def render_report(
    result: LintResult,
    formats: tuple[str, ...],
    generated: datetime.date,
    progress: Callable[[str], None] | None = None,
    fail_on: Severity = Severity.ERROR,
    render_pdf: Callable[[str], bytes] | None = None,
    verification: list[dict[str, Any]] | None = None,
    memo: Memo | None = None,
) -> dict[str, bytes]:
    """Bytes per format; the PDF is the HTML (with the bundled fonts) through WeasyPrint (``render_pdf``:
    gpuplan.report.pdf_process's renderer, or in-process). ``verification``: the "Verified against a run"
    rows. ``memo``: the decision, when the caller has it (else built here from ``result``)."""
    model = report_model(result, generated, fail_on, verification, memo)
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
