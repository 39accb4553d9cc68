"""GitHub Actions workflow commands: one ``::error file=..,line=..,col=..::message`` per finding."""

from __future__ import annotations

from gpuplan.output.summary import RunSummary
from gpuplan.visible import visible

_LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def _escape_data(text: str) -> str:
    """Control characters shown escaped first (a raw line break would start a new workflow command)."""
    return visible(text).replace("%", "%25")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(summary: RunSummary) -> str:
    lines = []
    for finding in summary.findings:
        if finding.waived:
            continue
        level = _LEVELS[finding.severity.value]
        title = _escape_property(f"{finding.code} {finding.name}")
        location = f"file={_escape_property(finding.file)},line={finding.line},col={finding.col}"
        message = finding.message + (f" (hint: {finding.hint})" if finding.hint else "")
        lines.append(f"::{level} {location},title={title}::{_escape_data(message)}")
    lines.append(summary.line())
    return "\n".join(lines) + "\n"
