"""``path:line:col: CODE [severity] message`` lines, a hint under each, and a one-line summary.

Spec text is shown through :func:`gpuplan.visible.visible`: one finding never prints more lines than these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuplan.findings import Finding
from gpuplan.output.summary import RunSummary, Tally, rendered
from gpuplan.visible import visible, visible_path

if TYPE_CHECKING:
    from gpuplan.linter import LintResult


def finding_lines(finding: Finding) -> list[str]:
    """One finding as lint prints it: the located line, then its hint and waiver (every command that
    prints findings as text uses this, so spec text in them is escaped the one way)."""
    label = finding.severity.value + (", waived" if finding.waived else "")
    where = f"{visible_path(finding.file)}:{finding.line}:{finding.col}"
    lines = [f"{where}: {finding.code} [{label}] {visible(finding.message)}"]
    if finding.hint:
        lines.append(f"    hint: {visible(finding.hint)}")
    if finding.waiver is not None:
        by = f" (approved by {visible(finding.waiver.approved_by)})" if finding.waiver.approved_by else ""
        lines.append(f"    waived: {visible(finding.waiver.reason)}{by}")
    return lines


def result_text(result: LintResult) -> str:
    """One file's findings, printed as soon as it is linted."""
    return "".join(f"{line}\n" for finding in result.findings for line in finding_lines(finding))


def end_text(tally: Tally, quiet: bool) -> str:
    """The summary line, left out under --quiet when nothing was reported."""
    return "" if quiet and not tally.findings else f"{tally.line()}\n"


def render(summary: RunSummary) -> str:
    return rendered(result_text, end_text, summary)
