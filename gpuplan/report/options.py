"""The planner's options as an approver compares them: declared, recommended and next best side by side.

Nothing is searched here: every option is the planner's (gpuplan.plan, the one layout search rules, ``gpuplan
plan`` and reports share), estimated by the estimator and judged per constraint. This module picks the three
columns an approver weighs, says what each costs per month and over the term (or per run), per 1M tokens,
how much memory it leaves free, its latency against the SLO, which constraints it meets or breaks, whether
it is within the budget, and what its price rests on and when it was quoted.
"""

from __future__ import annotations

import math
from typing import Any

from gpuplan.analysis import NOT_LOADED
from gpuplan.decision.memo import budget_limit, within_budget
from gpuplan.decision.prices import price_basis
from gpuplan.plan.describe import Saving, cost_text
from gpuplan.plan.evaluate import Option, slo_figure, slow_factor
from gpuplan.plan.spec_planner import JobPlan
from gpuplan.records import record
from gpuplan.spec import Spec
from gpuplan.units import (
    HOURS_DIGITS,
    format_figure,
    format_gib_difference,
    format_latency_ms,
    format_money,
    format_ms,
    format_percent,
    format_price,
    money_difference,
    money_times,
    plural,
)

# Rows of the planner's full table: declared, recommended and the cheapest sound options, then the
# cheapest layouts that break a constraint (each GPU kind's fewest GPUs), so that why the others fail is
# on the page too; a last row counts what is left out (`gpuplan plan` lists everything).
MAX_SOUND_ROWS = 8
MAX_REJECTED_ROWS = 4

# Constraint names (gpuplan.plan.evaluate's, in its order) as an approver reads them.
CONSTRAINT_LABELS = {
    "context": "Context the model takes",
    "limits": "Within the plan's limits",
    "tensor_parallel": "Tensor parallelism valid",
    "nvlink_domain": "Within one NVLink domain",
    "pipeline_parallel": "Pipeline parallelism valid",
    "memory": "Fits in memory",
    "headroom": "Headroom margin kept",
    "arrival_rate": "Keeps up with the request rate",
    "ttft_slo": "TTFT SLO met",
    "tpot_slo": "TPOT SLO met",
    "gradient_sync": "Gradient sync affordable",
    "model_parallelism": "No needless model parallelism",
}


@record
class Column:
    """One option in the side-by-side table."""

    label: str  # "declared", "recommended", "declared and recommended", "next best"
    option: Option


def _ttft_ms(seconds: float, unit: str = " ms") -> str:
    """A TTFT in whole ms, or "without bound" where a steady stream outruns the layout (its queue grows)."""
    return f"{format_latency_ms('ttft', seconds)}{unit}" if math.isfinite(seconds) else "without bound"


def columns(plan: JobPlan) -> list[Column]:
    """Declared, recommended (when it is another layout) and the next best sound option, in that order."""
    declared = plan.declared
    picked = [Column("declared", declared)]
    keys = {declared.layout.key}
    recommended = plan.recommended
    if recommended is not None:
        if recommended.layout.key == declared.layout.key:
            picked[0] = Column("declared and recommended", declared)
        else:
            picked.append(Column("recommended", recommended))
            keys.add(recommended.layout.key)
    nxt = next((o for o in plan.options if o.layout.key not in keys and o.sound), None)
    if nxt is not None:
        picked.append(Column("next best", nxt))
    return picked


def saving_of(plan: JobPlan) -> Saving | None:
    """What the recommendation saves against the declared layout (gpuplan.plan.describe.Saving); None when
    the planner states no saving (either is unpriced, or the declared layout would not run as declared) or
    it saves nothing as shown."""
    saving = plan.saving
    return saving if saving is not None and plan.recommended is not None and saving.positive else None


def _latency(option: Option) -> str:
    estimate = option.estimate
    if option.kind != "serve":
        speed = estimate.speed
        return (
            "n/a (finetune.tokens is not given)"
            if speed is None or not option.tokens_known
            else f"{format_figure(speed.hours, 1, HOURS_DIGITS)} h"
        )
    if not estimate.loads:
        return f"{NOT_LOADED}: {estimate.not_loaded_reason}"
    job, speed = estimate.job, estimate.speed
    ttft = f"{job.ttft_statistic} TTFT {_ttft_ms(slo_figure(job, speed, 'ttft'))}" + (
        f" (SLO {job.ttft_ms:,g})" if job.ttft_ms is not None else ""
    )
    tpot = f"TPOT {format_latency_ms('tpot', speed.tpot_s)} ms" + (
        f" (SLO {job.tpot_ms:,g})" if job.tpot_ms is not None else ""
    )
    return f"{ttft}\n{tpot}"


def _slow_edge(option: Option, confidence: float) -> str:
    """The latencies at their slow edge and the share of the tighter SLO they leave (negative: over it)."""
    job, speed, bands = option.estimate.job, option.estimate.speed, option.estimate.bands
    parts = [
        f"{label} up to {format_ms(slo_figure(job, speed, metric) * slow_factor(bands[metric], confidence), digits)} ms"
        for metric, label, digits in (("ttft", f"{job.ttft_statistic} TTFT", 0), ("tpot", "TPOT", 1))
        if getattr(job, f"{metric}_ms") is not None
    ]
    return f"{', '.join(parts)}; {format_percent(option.slo_margin or 0.0)} of the SLO left"


def _budget(option: Option, spec: Spec) -> str:
    limit, cost = budget_limit(spec, option.kind), option.cost
    if limit is None:
        return "no budget declared"
    if cost is None:
        return "unchecked: no cost"
    if within_budget(option, spec):
        return "within"
    return f"over by {format_money(money_difference(cost, limit), spec.budget.currency)}"


def verdict_text(option: Option, spec: Spec) -> str:
    """A row's verdict: "meets every constraint" only when the layout is sound *and* within the budget;
    a sound layout over the budget says so (the planner's constraints leave the budget out), and one without
    a price under a budget says the budget could not be checked."""
    broken = [*option.broken]
    within = within_budget(option, spec)
    if within is False:
        broken.append("budget")
    unchecked = within is None and budget_limit(spec, option.kind) is not None
    met = "meets every other constraint" if unchecked else "meets every constraint"
    text = f"breaks {', '.join(broken)}" if broken else met
    return f"{text}; budget unchecked: no price" if unchecked else text


def _rows_for(option: Option, spec: Spec) -> dict[str, str]:
    currency, term = spec.budget.currency, spec.budget.term_months
    estimate = option.estimate
    rows: dict[str, str] = {"Layout": option.layout.describe()}
    if option.kind == "serve":
        monthly = option.cost
        rows["Cost per month"] = format_money(monthly, currency)
        rows[f"Cost over {plural(term, 'month')}"] = (
            format_money(None, currency) if monthly is None else format_money(money_times(monthly, term), currency)
        )
        rows["Cost per 1M output tokens"] = (
            format_money(estimate.cost_per_million_tokens, currency) if estimate.loads else NOT_LOADED
        )
    else:
        rows["Cost of the run"] = format_money(option.cost, currency)
        rows["Cost per 1M training tokens"] = format_money(option.rate, currency)
    # What the plan judges: the per-GPU figure at the plan's confidence (its band's pessimistic edge).
    planned = option.judged_bytes
    free = option.capacity_bytes - planned
    rows[f"Headroom per GPU at {spec.plan.confidence:.0%} confidence"] = (
        f"{format_gib_difference(option.capacity_bytes, planned)} ({format_percent(option.headroom)})"
        if free >= 0
        else f"none: short by {format_gib_difference(planned, option.capacity_bytes)}"
    )
    rows["Latency" if option.kind == "serve" else "Training time"] = _latency(option)
    if option.kind == "serve" and option.slo_margin is not None:
        # What the SLO is judged on: the slow edge at the plan's confidence (gpuplan.plan.evaluate).
        rows[f"SLO margin at {spec.plan.confidence:.0%} confidence"] = _slow_edge(option, spec.plan.confidence)
    rows["Budget"] = _budget(option, spec)
    steady = option.kind == "serve" and option.estimate.job.arrival == "steady"
    for name, ok in option.meets:
        if name == "arrival_rate" and not steady:
            continue  # only a steady stream has a rate to keep up with
        rows[CONSTRAINT_LABELS.get(name, name)] = _judgement(option, name, ok, spec.plan.confidence)
    rows["Price basis"] = price_basis(spec, option.layout.gpu).short
    return rows


def _judgement(option: Option, name: str, ok: bool, confidence: float) -> str:
    """ "meets" or "breaks", or why a constraint was not judged: the planner counts a check it could not
    make as passed, which a signer must not read as a pass (a layout over its memory has no headroom
    to keep, one that cannot start no latency; an SLO that is not declared is not met, just absent). An
    SLO the estimate meets and its slow edge does not is "at risk", as lint's GP405 says of it."""
    estimate: Any = option.estimate
    if not ok:
        if name in ("ttft_slo", "tpot_slo") and estimate.loads:
            metric = name.removesuffix("_slo")
            if slo_figure(estimate.job, estimate.speed, metric) <= getattr(estimate.job, f"{metric}_ms") / 1000:
                return f"at risk: met on the estimate, not at {confidence:.0%} confidence"
        if name == "arrival_rate" and estimate.loads and not estimate.speed.saturated:
            return f"at risk: kept up with on the estimate, not at {confidence:.0%} confidence"
        return "breaks"
    memory_broken = option.breaks("memory")
    if name == "headroom" and memory_broken:
        return "not judged (memory breaks)"
    if name == "arrival_rate" and not estimate.loads:
        return "not judged (the engine cannot start)"
    if name in ("ttft_slo", "tpot_slo"):
        if getattr(estimate.job, name.replace("_slo", "_ms")) is None:
            return "no SLO declared"
        if not estimate.loads:
            return "not judged (the engine cannot start)"
    return "meets"


def side_by_side(plan: JobPlan, spec: Spec) -> tuple[list[str], list[list[str]], list[str]]:
    """(column headers, rows, the constraints every option meets): one row per quantity, one column per
    option; the constraints every option meets are one row."""
    picked = columns(plan)
    per_option = [_rows_for(column.option, spec) for column in picked]
    labels = list(per_option[0])
    headers = ["", *(column.label.capitalize() for column in picked)]
    rows = [[label, *(rows.get(label, "—") for rows in per_option)] for label in labels]
    # Constraints every option meets are one row (``met_by_all`` names them): a column of "meets" per
    # constraint told the reader nothing the row's label did not, and took a page of two jobs' tables.
    met = met_by_all(rows)
    if len(met) > 1:
        at = next(index for index, row in enumerate(rows) if row[0] == met[0])
        rows = [row for row in rows if row[0] not in met]
        rows.insert(at, [EVERY_OTHER, *(["meets"] * len(picked))])
    return headers, rows, met if len(met) > 1 else []


EVERY_OTHER = "Every other constraint"


def met_by_all(rows: list[list[str]]) -> list[str]:
    """The constraint rows of a side-by-side table that every option meets."""
    constraints = set(CONSTRAINT_LABELS.values())
    return [row[0] for row in rows if row[0] in constraints and all(cell == "meets" for cell in row[1:])]


def planner_rows(plan: JobPlan, spec: Spec) -> list[list[str]]:
    """The planner's full table: declared (marked), recommended, the sound options no other beats on cost
    and latency, then layouts that break a constraint, each with the constraints it breaks."""
    rows: list[list[str]] = []
    seen: set[tuple[object, ...]] = set()
    with_slo = planner_slo_column(plan)
    ordered = [("declared", plan.declared)]
    if plan.recommended is not None:
        ordered.append(("recommended", plan.recommended))
    ordered += [("", option) for option in plan.options]
    ordered += [("rejected", option) for option in plan.rejected if option.layout.key != plan.declared.layout.key]
    left_out = {"sound": 0, "rejected": 0}
    shown = {"sound": 0, "rejected": 0}
    for mark, option in ordered:
        if option.layout.key in seen:
            if mark == "recommended":
                rows[0][0] = "declared, recommended"
            continue
        seen.add(option.layout.key)
        group = "rejected" if mark == "rejected" else "sound"
        if mark in ("", "rejected") and shown[group] >= (MAX_REJECTED_ROWS if group == "rejected" else MAX_SOUND_ROWS):
            left_out[group] += 1
            continue
        shown[group] += 1
        mark = "" if mark == "rejected" else mark
        speed: Any = option.estimate.speed
        if option.kind == "serve":
            loads = option.estimate.loads
            # A layout that cannot start has no speed (the row's verdict says it breaks memory).
            speed_text = (
                f"{_ttft_ms(speed.ttft_p90_s, '')} / {format_latency_ms('tpot', speed.tpot_s)}" if loads else "n/a"
            )
        else:
            speed_text = (
                format_figure(speed.hours, 1, HOURS_DIGITS) if option.tokens_known and speed is not None else "n/a"
            )
        price = option.price_per_hour
        row = [
            mark,
            option.layout.describe(),
            # A layout over its memory has no free share ("none", not a negative one; the side-by-side
            # table says by how much it is short, and this row's verdict that it breaks memory).
            format_percent(option.headroom) if option.headroom >= 0 else "none",
            speed_text,
        ]
        if with_slo:
            # The latencies above are the estimates; the SLO is judged at their slow edge, so a row within the
            # SLO on the estimate can still break it: the share of the tighter SLO left there says by how much.
            row.append("n/a" if option.slo_margin is None else format_percent(option.slo_margin))
        rows.append(
            row
            + [
                "n/a" if price is None else format_price(price),
                cost_text(option, spec.budget.currency),
                verdict_text(option, spec),
            ]
        )
    if any(left_out.values()):
        more = [plural(left_out["sound"], "more sound option"), plural(left_out["rejected"], "more rejected layout")]
        text = " and ".join(part for part, count in zip(more, left_out.values(), strict=True) if count)
        rows.append(["", f"{text}: gpuplan plan lists them all"] + [""] * (len(rows[0]) - 2))
    return rows


def planner_slo_column(plan: JobPlan) -> bool:
    """Whether the planner's table has a column for the share of the SLO left at the slow edge: a serving job
    with a TTFT or TPOT SLO."""
    job = plan.declared.estimate.job
    return plan.kind == "serve" and job.has_latency_slo
