"""GitHub Actions workflow commands: one ``::error file=..,line=..,col=..::message`` per finding."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuplan.output.summary import RunSummary, Tally, rendered
from gpuplan.visible import visible

if TYPE_CHECKING:
    from gpuplan.linter import LintResult

# A finding's severity as a workflow command's level.
LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def _escape_data(text: str) -> str:
    """Control characters shown escaped first (a raw line break would start a new workflow command)."""
    return visible(text).replace("%", "%25")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(
    level: str, title: str, message: str, *, file: str | None = None, line: int | None = None, col: int | None = None
) -> str:
    """One workflow command (``::warning file=..,line=..,title=..::message``), every part escaped, on one line.

    ``file`` may be omitted (an annotation of the run, not of a file); ``line`` and ``col`` only with it.
    """
    location = ""
    if file is not None:
        location = f"file={_escape_property(file)}"
        location += f",line={line}" if line is not None else ""
        location += f",col={col}" if line is not None and col is not None else ""
        location += ","
    return f"::{level} {location}title={_escape_property(title)}::{_escape_data(message)}"


def result_text(result: LintResult) -> str:
    """One workflow command per finding of one file (waived ones are left out), printed as it is linted."""
    lines = []
    for finding in result.findings:
        if finding.waived:
            continue
        message = finding.message + (f" (hint: {finding.hint})" if finding.hint else "")
        lines.append(
            workflow_command(
                LEVELS[finding.severity.value],
                f"{finding.code} {finding.name}",
                message,
                file=finding.file,
                line=finding.line,
                col=finding.col,
            )
        )
    return "".join(f"{line}\n" for line in lines)


def end_text(tally: Tally, quiet: bool) -> str:
    """The summary line, always: a CI log shows that the check ran."""
    return f"{tally.line()}\n"


def render(summary: RunSummary) -> str:
    return rendered(result_text, end_text, summary)
