"""``gpuplan diff`` for a terminal: the summary line, then per spec a table of figures and what changed."""

from __future__ import annotations

from gpuplan.diff.model import UNCHANGED, DiffResult, Revision, SpecChange
from gpuplan.diff.present import (
    ARROW,
    configuration_note,
    field_after,
    field_before,
    finding_text,
    ordered,
    reason_text,
    rows,
    status_text,
    summary_line,
)
from gpuplan.units import plural
from gpuplan.visible import visible, visible_path

LABEL_WIDTH = 32
VALUE_WIDTH = 30


def revision_text(revision: Revision) -> str:
    commit = f" ({revision.commit[:12]})" if revision.commit else ""
    return f"{visible(revision.name)}{commit}"


def render(result: DiffResult, breaches: list[str], exit_code: int) -> str:
    lines = [f"gpuplan diff: {revision_text(result.base)} {ARROW} {revision_text(result.head)}", summary_line(result)]
    note = configuration_note(result)
    if note:
        lines.append(note)
    for change in ordered(result):
        lines += ["", *_spec(change)]
    quiet = [change for change in result.changes if not change.material]
    # the same bytes at the same path (a renamed file differs in its name)
    identical = sum(1 for c in quiet if c.status == UNCHANGED and c.old_path in (None, c.path))
    if len(quiet) > identical:  # changed bytes that change nothing gpuplan reads
        count = len(quiet) - identical
        verb = "differs" if count == 1 else "differ"
        lines += ["", f"{plural(count, 'more spec file')} {verb} only in comments, layout or name."]
    if identical:
        lines += ["", f"{plural(identical, 'spec file')} identical on both sides."]
    if breaches:
        lines += ["", "Guardrails failed (exit 1):", *(f"  - {visible(reason)}" for reason in breaches)]
    return "\n".join(lines) + "\n"


def _spec(change: SpecChange) -> list[str]:
    lines = [f"{visible_path(change.path)} ({status_text(change)})", f"  {reason_text(change)}"]
    table = rows(change)
    width = max(LABEL_WIDTH, *(len(row.label) + 2 for row in table))
    # A value longer than the column (a sharded layout's description) widens it: the columns stay apart.
    before_width = max(VALUE_WIDTH, *(len(row.before) + 1 for row in table if not row.heading))
    after_width = max(VALUE_WIDTH, *(len(row.after) + 1 for row in table if not row.heading))
    for row in table:
        if row.heading:
            lines.append(f"  {row.label}")
            continue
        line = f"    {row.label:<{width}}{row.before:<{before_width}} {row.after:<{after_width}} {row.change}"
        lines.append(line.rstrip())
    if change.findings_added:
        lines.append("  findings added:")
        lines += [f"    + {finding_text(f)}" for f in change.findings_added]
    if change.findings_resolved:
        lines.append("  findings resolved:")
        lines += [f"    - {finding_text(f)}" for f in change.findings_resolved]
    if change.fields_changed:
        lines.append("  fields changed:")
        lines += [
            f"    {visible(field.json_pointer)}: {field_before(field)} {ARROW} {field_after(field)}"
            for field in change.fields_changed
        ]
    return lines
