"""What the people-facing diff formats share: the order of specs, values and changes as text, the summary line.

Every string that comes from a spec (paths, field values, finding messages) passes through
``gpuplan.visible.visible`` before any format adds its own escaping.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from gpuplan.diff.fields import ADDED as ADDED_FIELD
from gpuplan.diff.fields import REMOVED as REMOVED_FIELD
from gpuplan.diff.fields import FieldChange
from gpuplan.diff.model import ADDED, JOBS, METRICS, REMOVED, DiffResult, Metric, SpecChange, Totals, Value
from gpuplan.findings import Finding
from gpuplan.records import record
from gpuplan.units import CENT_DIGITS, format_number, gib, money_decimals, plural, rounded
from gpuplan.visible import visible

ARROW = "→"


def ordered(result: DiffResult) -> list[SpecChange]:
    """Changes that matter, the largest monthly cost change first (unknown ones last), then by path."""

    def key(change: SpecChange) -> tuple[int, float, str]:
        delta = change.cost_delta("monthly_cost")
        return (1, 0.0, change.path) if delta is None else (0, -abs(delta), change.path)

    return sorted(result.material, key=key)


MONEY = Metric("amount", "Amount", "money")


def cost_change_text(change: SpecChange, key: str) -> str:
    """A spec's change in one of its costs (monthly_cost, run_cost, term_cost), signed; 'n/a' when unknown."""
    before, after = change.cost_before(key), change.cost_after(key)
    if before is None or after is None:
        return "n/a"
    if change.currency_changed:
        return "not comparable"
    return pair_texts(MONEY, before, after, change.currency)[2] or "±0"


# Per kind of figure: its published value in the shown unit (bytes as GiB at two decimals, money to the
# cent; the rest arrive published), the unit, and the decimals shown for a value (gpuplan.units rounds).
_UNITS: dict[str, tuple[Callable[[float], float], str, Callable[[float], int]]] = {
    "bytes": (gib, " GiB", lambda _: 1),
    "pct": (float, "%", lambda _: 1),
    "count": (float, "", lambda _: 0),
    "tokens": (float, " tokens", lambda _: 0),
    "ms": (float, " ms", lambda number: 0 if abs(number) >= 100 else 1),
    "rate": (float, " tokens/s", lambda _: 0),
    "hours": (float, " h", lambda _: 1),
    "money": (lambda value: rounded(value, CENT_DIGITS), "", money_decimals),
}


def _places(metric: Metric, value: float) -> int:
    published, _, decimals = _UNITS[metric.kind]
    return decimals(published(value))


def _number_text(metric: Metric, shown: float, places: int, currency: str) -> str:
    """A figure already in its shown unit (``_shown``)."""
    unit = _UNITS[metric.kind][1]
    return format_number(shown, places) + (f" {currency}" if metric.kind == "money" else unit)


def _short(metric: Metric, value: float) -> bool:
    """Whether a free-memory figure says the layout is over its memory (by any number of bytes)."""
    return metric.free and value < 0


def _figure_text(metric: Metric, value: float, places: int, currency: str) -> str:
    """A figure as people read it: free memory below zero is none, and an amount says how much is missing."""
    shown = _shown(metric, value, places)
    if not _short(metric, value):
        return _number_text(metric, shown, places, currency)
    if metric.kind == "pct":  # a negative share of memory means nothing to a reader
        return "none"
    return f"none: short by {_number_text(metric, abs(shown), places, currency)}"


def _shown(metric: Metric, value: float, places: int) -> float:
    return rounded(_UNITS[metric.kind][0](value), places)


def _numeric(value: Value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def value_text(metric: Metric, value: Value, currency: str) -> str:
    """One figure as people read it."""
    if value is None:
        return "n/a"
    if metric.kind == "text" or not _numeric(value):
        return visible(str(value))
    assert isinstance(value, (int, float))
    return _figure_text(metric, value, _places(metric, value), currency)


def pair_texts(
    metric: Metric, before: Value, after: Value, currency: str, before_currency: str | None = None
) -> tuple[str, str, str]:
    """Two figures and their signed change, all at the finer of the two precisions, so the shown numbers
    add up (the change is empty when there is none, or nothing to subtract). Amounts in two currencies
    (``before_currency`` differs) are each stated in their own, and have no difference: "not comparable"."""
    if metric.kind == "money" and before_currency not in (None, currency):
        assert before_currency is not None
        return value_text(metric, before, before_currency), value_text(metric, after, currency), "not comparable"
    if metric.kind == "text" or not (_numeric(before) and _numeric(after)):
        return value_text(metric, before, currency), value_text(metric, after, currency), ""
    assert isinstance(before, (int, float)) and isinstance(after, (int, float))
    # A zero (a job or spec that is not there) takes the other figure's precision.
    places = max((_places(metric, value) for value in (before, after) if value), default=_places(metric, 0))
    shown_before, shown_after = _shown(metric, before, places), _shown(metric, after, places)
    difference = rounded(shown_after - shown_before, places)  # of the shown figures: it checks by hand
    texts = _figure_text(metric, before, places, currency), _figure_text(metric, after, places, currency)
    # A share that is none on a side has no difference in points (the amount short still has one in GiB).
    if not difference or (metric.kind == "pct" and (_short(metric, before) or _short(metric, after))):
        return *texts, ""
    change = _number_text(metric, abs(difference), places, currency)
    if metric.kind == "pct":
        change = change.rstrip("%") + " pp"
    return *texts, ("+" if difference > 0 else "-") + change


def verdict_text(change: SpecChange) -> str:
    before, after = change.verdict_before, change.verdict_after
    if before is None:
        return f"new: {after}"
    if after is None:
        return f"removed (was {before})"
    return before if before == after else f"{before} {ARROW} {after}"


def reason_text(change: SpecChange) -> str:
    """Why the spec gets its verdict now (the removed spec's last reason): the decision's own sentence."""
    side = change.after or change.before
    assert side is not None, "a change has at least one side"
    return visible(side.reason)


def status_text(change: SpecChange) -> str:
    status = change.status
    if change.old_path:
        status = f"{status}, renamed from {visible(change.old_path)}"
    if change.inputs_changed:
        status += f"; {plural(len(change.inputs_changed), 'file')} it reads changed: "
        status += ", ".join(visible(path) for path in change.inputs_changed)
    return status


def configuration_note(result: DiffResult) -> str | None:
    """What the diff says of the configuration files it changes, or None: both sides are linted with the
    working tree's configuration (docs/diff.md), so such a change is named rather than left unseen."""
    if not result.configuration_changed:
        return None
    named = ", ".join(visible(path) for path in result.configuration_changed)
    return (
        f"Configuration changed: {named}. Both sides are linted with the working tree's configuration, so what"
        " it changes for the specs is not shown here; gpuplan lint shows the specs under it."
    )


def summary_line(result: DiffResult) -> str:
    """One sentence for the top of a pull-request comment: the money first, then the specs and verdicts."""
    material = result.material
    if not material:
        if not result.changes:
            return "No spec changed."
        return "No spec changed in a way that affects memory, cost, findings or verdicts."
    clauses = [_money_clause(totals) for totals in result.totals if totals.specs]
    clauses.append(_specs_clause(material))
    uncosted = sorted({path for totals in result.totals for path in totals.uncosted})
    moved = {change.path for change in result.changes if change.currency_changed}
    if set(uncosted) - moved:
        count = len(set(uncosted) - moved)
        clauses.append(f"{plural(count, 'spec')} without a known cost left out of the totals")
    if moved & set(uncosted):
        count = len(moved & set(uncosted))
        clauses.append(f"{plural(count, 'spec')} whose currency changed left out of the totals (not comparable)")
    sentence = "; ".join(clause for clause in clauses if clause)
    return sentence[0].upper() + sentence[1:]


def _money_clause(totals: Totals) -> str:
    if len(totals.monthly.uncosted) == totals.specs:  # no spec of this currency has a cost on both sides
        return ""
    parts = [_figure_clause("Monthly GPU cost", totals.monthly, totals.currency)]
    if totals.run.delta:
        parts.append(_figure_clause("one-off fine-tuning cost", totals.run, totals.currency))
    return "; ".join(parts)


def _figure_clause(label: str, figure: Any, currency: str) -> str:
    before, after, change = pair_texts(MONEY, figure.before, figure.after, currency)
    if not change:
        return f"{label} will not change ({after})"
    direction = "increase" if change.startswith("+") else "decrease"
    percent = ""
    if figure.percent is not None:  # signed as the change is: a cent's fall rounds to -0.0%, not to a rise
        whole = format_number(abs(figure.percent), 0)
        percent = " (under 1%)" if whole == "0" else f" ({change[0]}{whole}%)"
    return f"{label} will {direction} by {change[1:]}{percent}, from {before.removesuffix(' ' + currency)} to {after}"


def _specs_clause(material: tuple[SpecChange, ...]) -> str:
    statuses = Counter(change.status for change in material)
    detail = [f"{statuses[status]} {status}" for status in (ADDED, REMOVED) if statuses[status]]
    text = f"{plural(len(material), 'spec')} changed" + (f" ({', '.join(detail)})" if detail else "")
    moves = Counter(
        f"{change.verdict_before} {ARROW} {change.verdict_after}"
        for change in material
        if change.before and change.after and change.verdict_before != change.verdict_after
    )
    new = Counter(change.verdict_after for change in material if change.status == ADDED)
    verdicts = [f"{count} {move}" for move, count in sorted(moves.items())]
    verdicts += [f"{count} new {verdict}" for verdict, count in sorted(new.items(), key=lambda item: str(item[0]))]
    return text + (f", verdicts: {', '.join(verdicts)}" if verdicts else ", verdicts unchanged")


JOB_TITLES = {"finetune": "Fine-tuning", "serve": "Serving"}


@record
class Row:
    """One line of a spec's table: a label, the figure before and after, and the change (a job's title row
    has ``heading`` set and nothing else)."""

    label: str
    before: str = ""
    after: str = ""
    change: str = ""
    heading: bool = False


def rows(change: SpecChange) -> list[Row]:
    """The verdict, then per job (fine-tuning, serving) every figure before and after, with its change."""
    was, currency = change.currencies
    table = [Row("Verdict", change.verdict_before or "-", change.verdict_after or "-", _verdict_move(change))]
    for job in JOBS:
        old = change.before.jobs.get(job) if change.before else None
        new = change.after.jobs.get(job) if change.after else None
        if old is None and new is None:
            continue
        table.append(Row(JOB_TITLES[job], heading=True))
        for metric in METRICS[job]:
            before, after, change_ = pair_texts(metric, *change.figure_pair(job, metric.key), currency, was)
            label = metric.label
            bursts = any(str(job_.get("workload", "")).startswith("a burst") for job_ in (old or {}, new or {}))
            if metric.key == "max_context" and bursts:  # a burst's engine holds one sequence at a time at least
                label += " (a burst: one sequence)"
            if metric.key == "term_cost":
                terms = list(dict.fromkeys(side.term_months for side in (change.before, change.after) if side))
                label += f" ({f' {ARROW} '.join(map(str, terms))} months)"
            if metric.key.startswith("ttft"):  # a stream that outruns the deployment waits without bound
                before, after = (
                    "without bound" if side is not None and side.get("saturated") and text == "n/a" else text
                    for side, text in ((old, before), (new, after))
                )
            table.append(Row(label, "-" if old is None else before, "-" if new is None else after, change_))
    return table


def _verdict_move(change: SpecChange) -> str:
    if change.verdict_worsened:
        return "worse"
    if change.before and change.after and change.verdict_before != change.verdict_after:
        return "better"
    return ""


def finding_text(finding: Finding) -> str:
    """A finding by its identity (code, name, field) and where it is now, then its message."""
    where = visible(finding.pointer) if finding.pointer else "the file"
    return f"{finding.code} {finding.name} at {where} (line {finding.line}): {visible(finding.message)}"


def field_value(value: Any) -> str:
    return visible(json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str))


def field_before(field: FieldChange) -> str:
    return "(absent)" if field.kind == ADDED_FIELD else field_value(field.before)


def field_after(field: FieldChange) -> str:
    return "(absent)" if field.kind == REMOVED_FIELD else field_value(field.after)
