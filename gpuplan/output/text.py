"""``path:line:col: CODE [severity] message`` lines, a hint under each, and a one-line summary."""

from __future__ import annotations

from gpuplan.output.summary import RunSummary


def render(summary: RunSummary) -> str:
    lines = []
    for finding in summary.findings:
        label = finding.severity.value + (", waived" if finding.waived else "")
        lines.append(f"{finding.file}:{finding.line}:{finding.col}: {finding.code} [{label}] {finding.message}")
        if finding.hint:
            lines.append(f"    hint: {finding.hint}")
        if finding.waiver is not None:
            by = f" (approved by {finding.waiver.approved_by})" if finding.waiver.approved_by else ""
            lines.append(f"    waived: {finding.waiver.reason}{by}")
    if lines or not summary.quiet:
        lines.append(summary.line())
    return "\n".join(lines) + ("\n" if lines else "")
