"""``path:line:col: CODE [severity] message`` lines, a hint under each, and a one-line summary.

Spec text is shown through :func:`gpuplan.visible.visible`: one finding never prints more lines than these.
"""

from __future__ import annotations

from gpuplan.findings import Finding
from gpuplan.output.summary import RunSummary
from gpuplan.visible import visible


def finding_lines(finding: Finding) -> list[str]:
    """One finding as lint prints it: the located line, then its hint and waiver (every command that
    prints findings as text uses this, so spec text in them is escaped the one way)."""
    label = finding.severity.value + (", waived" if finding.waived else "")
    lines = [
        f"{visible(finding.file)}:{finding.line}:{finding.col}: {finding.code} [{label}] {visible(finding.message)}"
    ]
    if finding.hint:
        lines.append(f"    hint: {visible(finding.hint)}")
    if finding.waiver is not None:
        by = f" (approved by {visible(finding.waiver.approved_by)})" if finding.waiver.approved_by else ""
        lines.append(f"    waived: {visible(finding.waiver.reason)}{by}")
    return lines


def render(summary: RunSummary) -> str:
    lines = [line for finding in summary.findings for line in finding_lines(finding)]
    if lines or not summary.quiet:
        lines.append(summary.line())
    return "\n".join(lines) + ("\n" if lines else "")
