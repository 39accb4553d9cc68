"""``gpuplan diff --format github``: workflow commands that annotate the changed lines of a pull request.

Per changed spec: a notice on the first changed line with the verdict and cost change (a warning when the
verdict worsens), a notice on each changed field's line (old -> new), and each new finding at its own
line and severity. Removed specs have no line left to annotate: their notice carries no line.
"""

from __future__ import annotations

from gpuplan.diff.model import REMOVED, DiffResult, SpecChange
from gpuplan.diff.present import (
    ARROW,
    cost_change_text,
    field_after,
    field_before,
    finding_text,
    ordered,
    summary_line,
    verdict_text,
)
from gpuplan.output.github import LEVELS, workflow_command


def _command(level: str, title: str, message: str, path: str | None = None, line: int | None = None) -> str:
    return workflow_command(level, title, message, file=path, line=line if path is not None else None)


def render(result: DiffResult, breaches: list[str], exit_code: int) -> str:
    lines = []
    for change in ordered(result):
        lines += _spec(change)
    for reason in breaches:
        lines.append(_command("error", "gpuplan diff guardrail", reason))
    lines.append(summary_line(result))
    return "\n".join(lines) + "\n"


def _spec(change: SpecChange) -> list[str]:
    monthly = cost_change_text(change, "monthly_cost")
    message = f"verdict {verdict_text(change)}; monthly cost {monthly}"
    level = "warning" if change.verdict_worsened else "notice"
    if change.status == REMOVED:
        return [_command(level, f"gpuplan diff: {change.path} removed", message)]
    first = min((line for field in change.fields_changed if (line := change.line_of(field.pointer))), default=1)
    lines = [_command(level, "gpuplan diff", message, change.path, first)]
    for field in change.fields_changed:
        text = f"{field.json_pointer}: {field_before(field)} {ARROW} {field_after(field)}"
        lines.append(_command("notice", "spec field changed", text, change.path, change.line_of(field.pointer)))
    for finding in change.findings_added:
        title = f"new finding {finding.code} {finding.name}"
        lines.append(_command(LEVELS[finding.severity.value], title, finding_text(finding), change.path, finding.line))
    return lines
