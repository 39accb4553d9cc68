"""``path:line:col: CODE [severity] message`` lines, a hint under each, and a one-line summary.

Spec text is shown through :func:`gpuplan.visible.visible`: one finding never prints more lines than these.
"""

from __future__ import annotations

from gpuplan.output.summary import RunSummary
from gpuplan.visible import visible


def render(summary: RunSummary) -> str:
    lines = []
    for finding in summary.findings:
        label = finding.severity.value + (", waived" if finding.waived else "")
        lines.append(
            f"{visible(finding.file)}:{finding.line}:{finding.col}: {finding.code} [{label}] {visible(finding.message)}"
        )
        if finding.hint:
            lines.append(f"    hint: {visible(finding.hint)}")
        if finding.waiver is not None:
            by = f" (approved by {visible(finding.waiver.approved_by)})" if finding.waiver.approved_by else ""
            lines.append(f"    waived: {visible(finding.waiver.reason)}{by}")
    if lines or not summary.quiet:
        lines.append(summary.line())
    return "\n".join(lines) + ("\n" if lines else "")
