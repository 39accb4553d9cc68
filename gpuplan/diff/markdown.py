"""``gpuplan diff --format markdown``: a pull-request comment.

The summary sentence first; then one overview row per changed spec (largest cost change first); then per
spec a table of figures and, folded in ``<details>``, the findings and fields that changed. GitHub refuses
comments over 65,536 characters: the overview and the per-spec sections stop at a character budget below
that and say how many specs they leave out.
"""

from __future__ import annotations

from gpuplan.diff.model import SERVE_METRICS, DiffResult, SpecChange
from gpuplan.diff.present import (
    ARROW,
    configuration_note,
    cost_change_text,
    field_after,
    field_before,
    finding_text,
    ordered,
    reason_text,
    rows,
    status_text,
    summary_line,
    value_text,
    verdict_text,
)
from gpuplan.diff.text import revision_text
from gpuplan.output.markdown import escape_markdown

GITHUB_COMMENT_LIMIT = 65_536
# Kept free below GitHub's limit for what a CI step adds around the output (a marker, a heading).
BUDGET = GITHUB_COMMENT_LIMIT - 4_096
_MONTHLY = next(metric for metric in SERVE_METRICS if metric.key == "monthly_cost")


def md(text: str) -> str:
    return escape_markdown(text)


def render(result: DiffResult, breaches: list[str], exit_code: int) -> str:
    head = [f"**{md(summary_line(result))}**", ""]
    head.append(f"<sub>gpuplan diff {md(revision_text(result.base))} {ARROW} {md(revision_text(result.head))}</sub>")
    note = configuration_note(result)
    if note:
        head += ["", md(note)]
    if breaches:
        head += ["", "**Guardrails failed:**", *(f"- {md(reason)}" for reason in breaches)]
    changes = ordered(result)
    if not changes:
        return "\n".join(head) + "\n"
    tail: list[str] = []
    used = sum(len(line) + 1 for line in head) + 400  # room for the two "... more" lines
    overview = [
        "",
        "| spec | status | verdict | monthly before | monthly after | change |",
        "|---|---|---|---|---|---|",
    ]
    shown_rows = 0
    for change in changes:
        row = _overview_row(change)
        if used + sum(len(line) + 1 for line in overview) + len(row) + 1 > BUDGET // 3:
            break
        overview.append(row)
        shown_rows += 1
    if shown_rows < len(changes):
        overview.append(f"\n… and {len(changes) - shown_rows} more changed specs (all of them: `--format json`).")
    used += sum(len(line) + 1 for line in overview)
    detailed = 0
    for change in changes:
        section = _section(change)
        size = sum(len(line) + 1 for line in section)
        if used + size > BUDGET:
            break
        tail += section
        used += size
        detailed += 1
    if detailed < len(changes):
        tail += [
            "",
            f"_{len(changes) - detailed} more changed specs are not shown in detail (`--format json` has all)._",
        ]
    return "\n".join(head + overview + tail) + "\n"


def _cell(text: str) -> str:
    return md(text) if text else " "


def _overview_row(change: SpecChange) -> str:
    was, currency = change.currencies
    # A side without a serving job has no monthly cost ("-", not 0); a spec serving on neither side states
    # the change in its fine-tuning run's cost instead.
    serving = [side is not None and "serve" in side.jobs for side in (change.before, change.after)]
    before = value_text(_MONTHLY, change.cost_before("monthly_cost"), was) if serving[0] else "-"
    after = value_text(_MONTHLY, change.cost_after("monthly_cost"), currency) if serving[1] else "-"
    cells = [change.path, status_text(change), verdict_text(change), before, after]
    cells.append(
        cost_change_text(change, "monthly_cost") if any(serving) else f"run {cost_change_text(change, 'run_cost')}"
    )
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"


def _section(change: SpecChange) -> list[str]:
    lines = ["", f"### {md(change.path)}", "", f"{md(status_text(change))}; verdict {md(verdict_text(change))}", ""]
    lines += [md(reason_text(change)), ""]
    lines += ["| | before | after | change |", "|---|---|---|---|"]
    for row in rows(change):
        if row.heading:
            lines.append(f"| **{md(row.label)}** | | | |")
        else:
            lines.append(f"| {md(row.label)} | {_cell(row.before)} | {_cell(row.after)} | {_cell(row.change)} |")
    details = _details(change)
    if details:
        summary = []
        if change.findings_added or change.findings_resolved:
            summary.append(f"findings: {len(change.findings_added)} added, {len(change.findings_resolved)} resolved")
        if change.fields_changed:
            summary.append(f"{len(change.fields_changed)} field(s) changed")
        lines += ["", f"<details><summary>{md('; '.join(summary))}</summary>", "", *details, "", "</details>"]
    return lines


def _details(change: SpecChange) -> list[str]:
    lines: list[str] = []
    if change.findings_added:
        lines += ["**Findings added**", ""]
        lines += [f"- {md(finding_text(f))}" for f in change.findings_added]
        lines.append("")
    if change.findings_resolved:
        lines += ["**Findings resolved**", ""]
        lines += [f"- {md(finding_text(f))}" for f in change.findings_resolved]
        lines.append("")
    if change.fields_changed:
        lines += ["**Fields changed**", "", "| field | before | after |", "|---|---|---|"]
        lines += [
            f"| {md(field.json_pointer)} | {_cell(field_before(field))} | {_cell(field_after(field))} |"
            for field in change.fields_changed
        ]
    return lines[:-1] if lines and lines[-1] == "" else lines
