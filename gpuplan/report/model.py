"""The report model: plain data built from the spec, its estimate, its findings and the decision.

Every number a template shows is computed and formatted here; the templates only loop and print. Every
table is a ``table()`` (caption, column headers, rows whose first cell heads the row), so the HTML, the
PDF and the Markdown all carry the same headers.
"""

from __future__ import annotations

import datetime
import hashlib
from pathlib import Path
from typing import Any

from gpuplan import __version__
from gpuplan.analysis import NOT_LOADED, Analysis, FinetuneEstimate, ServeEstimate, load_phrase
from gpuplan.catalog import catalog_version
from gpuplan.config import Settings, default_settings
from gpuplan.decision import Amount, Decision, Verdict, decide, layout_text
from gpuplan.estimate.engines import budget_words
from gpuplan.estimate.serving_speed import SHORT_OUTPUT, SHORT_PROMPT
from gpuplan.findings import Finding, Severity
from gpuplan.layout import replicas as layout_replicas
from gpuplan.linter import LintResult
from gpuplan.plan.configured import planner_for
from gpuplan.plan.describe import cost_text
from gpuplan.plan.search import JobPlan
from gpuplan.report.acquisition import acquisitions
from gpuplan.report.charts import memory_chart, sensitivity_chart
from gpuplan.report.options import planner_rows, saving_of, side_by_side
from gpuplan.report.prices import PriceBasis, price_bases
from gpuplan.report.record import (
    CONTENT_HASH_DEFINITION,
    ConfigRecord,
    approval_expiry,
    config_record,
    content_hash,
    git_state,
)
from gpuplan.report.risks import compute_risks
from gpuplan.report.sensitivity import Sensitivity, sensitivity
from gpuplan.rules.fit import PLAN_POINTER
from gpuplan.spec import Spec
from gpuplan.units import (
    HOURS_DIGITS,
    MS_DIGITS,
    RATE_DIGITS,
    TPOT_MS_DIGITS,
    Shown,
    format_figure,
    format_gib,
    format_gib_difference,
    format_money,
    format_ms,
    format_percent,
    money_difference,
    money_times,
    plural,
    shown_money,
)
from gpuplan.validate import load_schema

ROLES = (("prepared_by", "Prepared by"), ("reviewed_by", "Reviewed by"), ("approved_by", "Approved by"))
NOT_FOR_SIGNATURE = "not for signature"
# Serving memory has no measured runs outside those its constants were read from (docs/accuracy.md).
NO_SERVING_MEMORY_BAND = "serving memory: no band (no runs outside those it was tuned on)"
SPEED_NAMES = {
    "ttft": "TTFT",
    "tpot": "TPOT",
    "tokens_per_s": "throughput",
    "training_tokens_per_s": "training throughput",
}


SHORT_TABLE_ROWS = 14  # a table this short is kept on one page rather than split with a row or two alone
KV_WIDTHS = (26, 74)


def table(
    caption: str,
    columns: list[str],
    rows: list[list[str]],
    *,
    numeric: tuple[int, ...] = (),
    kind: str = "grid",
    widths: tuple[int, ...] = (),
    keep: bool = False,
) -> dict[str, Any]:
    """One table as the templates print it: a caption, column headers, and rows whose first cell heads the row.

    ``numeric`` lists the columns aligned right; ``kind`` is "grid" or "kv" (label/value pairs); ``widths``
    are column widths in percent (the PDF lays tables out with fixed widths: fast, and the same every time).
    A cell's lines (``\n``) are line breaks in HTML and "; " in Markdown. ``keep`` keeps a longer table
    on one page too (one that fits a page and reads only whole, as options compared side by side).
    """
    if kind == "kv" and not widths:
        widths = KV_WIDTHS
    assert not widths or (len(widths) == len(columns) and sum(widths) == 100), (caption, widths)
    return {
        "caption": caption,
        "columns": [
            {"label": label, "num": index in numeric, "width": widths[index] if widths else None}
            for index, label in enumerate(columns)
        ],
        "rows": [
            [
                {"text": "; ".join(cell.split("\n")), "lines": cell.split("\n"), "num": index in numeric}
                for index, cell in enumerate(row)
            ]
            for row in rows
        ],
        "kind": kind,
        "short": keep or len(rows) <= SHORT_TABLE_ROWS,
    }


def _money(value: float | Shown | None, currency: str) -> str:
    return format_money(value, currency)


def _requested_text(decision: Decision) -> str:
    """The amount requested; under REJECT nothing is, and the declared plan's cost is said as such."""
    text = _amount_text(decision.amount)
    if decision.verdict is Verdict.REJECT and decision.amount is not None and not decision.amount.unknown:
        return f"none: the declared plan is rejected (as declared it would cost {text})"
    return text


def _amount_text(amount: Amount | None) -> str:
    if amount is None:
        return "cannot be stated: the spec has no estimate"
    currency, term = amount.currency, plural(amount.term_months, "month")
    parts = []
    if amount.finetune_run is not None:
        parts.append(f"fine-tuning run {_money(amount.finetune_run, currency)} (one-off)")
    if amount.serve_monthly is not None:
        parts.append(f"serving {_money(amount.serve_monthly, currency)} a month x {amount.term_months}")
    if amount.unknown:
        known = f" (known: {'; '.join(parts)})" if parts else ""
        return f"cannot be stated: {'; '.join(amount.unknown)}{known}"
    return f"{_money(amount.total_shown, currency)} over {term}: {' + '.join(parts)}"


def _with_changes(decision: Decision) -> list[list[str]]:
    """The amount once the required layouts are made, for an APPROVE WITH CHANGES: the declared amount
    alone left the signer to work out what the approval commits to."""
    after = decision.amount_with_changes if decision.verdict is Verdict.APPROVE_WITH_CHANGES else None
    return [] if after is None else [["Amount with the required layout", _amount_text(after)]]


def _headroom(used: float, capacity: float) -> str:
    """What is left of ``capacity``, as the difference of the two figures shown beside it."""
    free = capacity - used
    if free < 0:
        return f"none: short by {format_gib_difference(used, capacity)}"
    return f"{format_gib_difference(capacity, used)} ({format_percent(free / capacity)})"


def _job_layouts(analysis: Analysis) -> list[str]:
    lines = []
    if analysis.finetune:
        f = analysis.finetune
        lines.append(f"fine-tuning: {layout_text(f)}, {f.job.method}")
    if analysis.serve:
        s = analysis.serve
        setup = s.setup
        replicas = layout_replicas(s.gpus, setup.tensor_parallel, setup.pipeline_parallel)
        lines.append(
            f"serving: {layout_text(s)}, {plural(replicas, 'replica')}; "
            f"{plural(setup.concurrency, 'sequence')} x {setup.context:,} tokens"
        )
    return lines


def _budget_lines(spec: Spec, analysis: Analysis) -> list[str]:
    currency, budget = spec.budget.currency, spec.budget
    lines = []
    for word, cost, limit, per in (
        ("fine-tuning", analysis.finetune.cost if analysis.finetune else None, budget.finetune_total, ""),
        ("serving", analysis.serve.monthly_cost if analysis.serve else None, budget.serve_monthly, " a month"),
    ):
        if limit is None or cost is None:
            continue
        share = format_percent(cost / limit) if shown_money(limit).value else "n/a"  # as it reads: 5e-324 is 0.00
        verdict = "within" if cost <= limit else f"over by {_money(money_difference(cost, limit), currency)}"
        lines.append(f"{word} {_money(cost, currency)} of {_money(limit, currency)}{per} ({share}): {verdict}")
    if not lines:
        declared = budget.finetune_total is not None or budget.serve_monthly is not None
        lines.append("unchecked: no price" if declared else "none declared")
    return lines


def _finetune_details(f: FinetuneEstimate, currency: str, settings: Settings) -> dict[str, Any]:
    job = f.setup.job
    peak = f.memory.per_gpu
    peak_phase = f.memory.peak_phase.replace("_", " ")
    speed = f.speed
    rows = [
        ["Method", f"{job.method} ({job.precision}, {job.optimizer})"],
        ["Layout", layout_text(f)],
        [
            "Shape",
            f"micro-batch {job.micro_batch} x {job.seq_len:,} tokens"
            + (f", {job.checkpointing} activation checkpointing" if job.checkpointing != "none" else ""),
        ],
        ["Peak per GPU", f"{format_gib(peak)} at the {peak_phase} of {format_gib(f.gpu.usable_bytes)} usable"],
        ["Headroom", _headroom(peak, f.gpu.usable_bytes)],
        ["Trainable parameters", f"{f.memory.trainable_params:,} of {f.memory.params:,}"],
        *(
            [["Offloaded", f"{format_gib(f.memory.host)} host, {format_gib(f.memory.nvme)} NVMe per GPU"]]
            if f.memory.host or f.memory.nvme
            else []
        ),
        [
            "Throughput",
            f"{format_figure(speed.tokens_per_s, 0, RATE_DIGITS)} tokens/s ({speed.tokens_per_s_per_gpu:,.0f} per GPU),"
            f" MFU {speed.mfu:.0%}"
            + (f", of each {speed.step_s:,.2f} s step {speed.offload_s:,.2f} s offload" if speed.offload_s else ""),
        ],
        [
            "Training time",
            "n/a (finetune.tokens is not given)"
            if f.hours is None
            else f"{_hours(f.hours)} h ({_hours(f.hours * f.gpus)} GPU-hours)",
        ],
        ["Cost of the run", _money(f.cost, currency)],
        ["Resumable checkpoint", f"{f.checkpoint_bytes / 1e9:,.1f} GB of storage"],
    ]
    phases = "; ".join(f"{name.replace('_', ' ')} {format_gib(total)}" for name, total in f.memory.phase_totals.items())
    return {
        "id": "finetune",
        "title": "Fine-tuning",
        "fits": f.fits,
        "table": table("Fine-tuning: memory, time and cost", ["Item", "Value"], rows, kind="kv"),
        "chart": memory_chart(f.memory.breakdown, peak, f.gpu.usable_bytes, f"usable on {f.gpu.id}"),
        "chart_caption": f"Per-GPU memory at the {peak_phase} (the peak) against {f.gpu.id}'s usable memory",
        "phases": f"Phase totals per GPU, framework overhead included: {phases}." if phases else "",
        "assumptions": table(
            "Fine-tuning assumptions", ["Assumption", "Value"], [[k, v] for k, v in f.assumptions], kind="kv"
        ),
    }


def _serve_details(s: ServeEstimate, currency: str, settings: Settings) -> dict[str, Any]:
    setup = s.setup
    rows = [
        ["Layout", layout_text(s)],
        [
            "Workload",
            f"{plural(setup.concurrency, 'sequence')} x {setup.context:,} tokens, weights "
            f"{'unquantized' if setup.quantization == 'none' else setup.quantization}, "
            f"KV cache {setup.kv_dtype_bytes * 8}-bit",
        ],
        ["Peak per GPU", f"{format_gib(s.memory.per_gpu)} of a {format_gib(s.memory.budget)} engine budget"],
        ["Headroom", _headroom(s.memory.per_gpu, s.memory.budget)],
        [
            "Capacity",
            f"at most {plural(s.max_concurrency, 'sequence')} at {setup.context:,} tokens; "
            f"at most {s.max_context:,} tokens at {plural(setup.concurrency, 'sequence')}; "
            f"KV cache {s.memory.kv_cache_tokens:,} tokens",
        ],
        *(
            [
                [
                    "Latency",
                    f"TTFT p90 {_ms(s.speed.ttft_p90_s, 0)}, median {_ms(s.speed.ttft_median_s, 0)}, mean"
                    f" {_ms(s.speed.ttft_s, 0)} {load_phrase(s.job)}; TPOT {_ms(s.speed.tpot_s, 1, TPOT_MS_DIGITS)}"
                    f" (first token excluded; {s.speed.decode_bound}-bound)",
                ],
                [
                    "Throughput",
                    f"{format_figure(s.speed.tokens_per_s, 0, RATE_DIGITS)} output tokens/s,"
                    f" {s.speed.requests_per_s:,.2f} requests/s over the deployment",
                ],
                *_category_rows(s),
            ]
            if s.loads
            else [["Latency", f"{NOT_LOADED}: {s.not_loaded_reason}"], ["Throughput", NOT_LOADED]]
        ),
        ["Cost per month", _money(s.monthly_cost, currency)],
        ["Cost per 1M output tokens", _money(s.cost_per_million_tokens, currency) if s.loads else NOT_LOADED],
    ]
    budget_share = budget_words(setup)
    return {
        "id": "serve",
        "title": "Serving",
        "fits": s.fits,
        "table": table("Serving: memory, speed and cost", ["Item", "Value"], rows, kind="kv"),
        "chart": memory_chart(s.memory.breakdown, s.memory.per_gpu, s.memory.budget, "engine budget"),
        "chart_caption": f"Per-GPU memory against the engine budget on {s.gpu.id} ({budget_share})",
        "phases": "",
        "assumptions": table(
            "Serving assumptions", ["Assumption", "Value"], [[k, v] for k, v in s.assumptions], kind="kv"
        ),
    }


def _mark(value: bool | None, yes: str = "✓", no: str = "✗") -> str:
    return "—" if value is None else (yes if value else no)


def _hours(hours: float) -> str:
    return format_figure(hours, 1, HOURS_DIGITS)


def _ms(seconds: float | None, digits: int, published: int = MS_DIGITS) -> str:
    """Milliseconds, or "no bound" where the error band gives none (a band of 100% or more)."""
    return "no bound" if seconds is None else f"{format_ms(seconds, digits, published)} ms"


def _sensitivity_table(sensitivity: Sensitivity, currency: str) -> dict[str, Any]:
    serving = sensitivity.job == "serve"
    columns = ["Scenario", "Memory per GPU", "Fits"]
    columns += ["TTFT / TPOT", "SLO"] if serving else ["Training time"]
    columns += ["Cost per month" if serving else "Cost of the run", "Within budget"]
    rows = []
    for scenario in sensitivity.scenarios:
        fits = "yes" if scenario.comfortable else ("tight" if scenario.fits else "no")
        row = [scenario.name, f"{format_gib(scenario.per_gpu)} of {format_gib(scenario.capacity)}", fits]
        if serving:
            row += [
                f"{_ms(scenario.ttft_s, 0)} / {_ms(scenario.tpot_s, 1, TPOT_MS_DIGITS)}"
                if scenario.loads
                else NOT_LOADED,
                "none declared" if scenario.slo_met is None else ("met" if scenario.slo_met else "missed"),
            ]
        else:
            row.append("n/a" if scenario.hours is None else f"{_hours(scenario.hours)} h")
        row += [
            _money(scenario.cost, currency),
            "—" if scenario.within_budget is None else ("yes" if scenario.within_budget else "no"),
        ]
        rows.append(row)
    title = "Serving" if serving else "Fine-tuning"
    numeric = (1, 3, 5) if serving else (1, 3, 4)
    widths = (18, 22, 6, 21, 11, 12, 10) if serving else (27, 21, 10, 14, 16, 12)
    return table(
        f"{title}: the declared layout under changed assumptions", columns, rows, numeric=numeric, widths=widths
    )


def _options_tables(plan: JobPlan, spec: Spec, title: str) -> list[dict[str, Any]]:
    """The planner's answer for one job: declared, recommended and next best side by side, then its full table."""
    currency = spec.budget.currency
    headers, rows = side_by_side(plan, spec)
    width = (100 - 22) // (len(headers) - 1)
    widths = (100 - width * (len(headers) - 1), *([width] * (len(headers) - 1)))
    compared = table(f"{title}: options side by side (the planner's)", headers, rows, widths=widths, keep=True)
    serving = plan.kind == "serve"
    weighed = table(
        f"{title}: every layout the planner weighed",
        [
            "",
            "Layout",
            "Free",
            "TTFT p90 / TPOT ms" if serving else "Training hours",
            f"{currency}/GPU-hour",
            "Cost",
            "Verdict",
        ],
        planner_rows(plan, currency),
        numeric=(2, 3, 4, 5),
        widths=(15, 25, 7, 14, 8, 13, 18),
    )
    return [compared, weighed]


def _saving_text(plan: JobPlan, currency: str, term_months: int) -> str:
    """What the recommendation saves, with its layout; "" when it saves nothing (or cannot be said)."""
    saving = saving_of(plan)
    recommended = plan.recommended
    if recommended is not None and not plan.declared.sound:
        # Nothing to save against: the declared layout would not run as declared (or breaks a constraint).
        return (
            f"n/a: the declared layout breaks {', '.join(plan.declared.broken)}; {recommended.layout.describe()} "
            f"meets every constraint for {cost_text(recommended, currency)}"
        )
    if saving is None or recommended is None:
        return ""
    layout = recommended.layout.describe()
    if saving.per == "month":
        over = format_money(money_times(saving.amount, term_months), currency)  # the shown saving x the months
        return f"{saving.text(currency)} ({over} over {plural(term_months, 'month')}) with {layout}"
    return f"{saving.text(currency)} with {layout}"


def _memory_bands(estimates: list[Any], confidence: float) -> str:
    """Each job's memory band as the fit verdict uses it: fine-tuning at its edge, serving without one."""
    lines = []
    for estimate in estimates:
        if isinstance(estimate, ServeEstimate):
            lines.append(NO_SERVING_MEMORY_BAND)
            continue
        band = estimate.memory_band
        lines.append(
            f"fine-tuning memory: up to {format_gib(estimate.planned_bytes(confidence))} per GPU at "
            f"{confidence:.0%} confidence (x {band.ratio(confidence):.2f} over {band.records} published runs)"
        )
    return "\n".join(lines)


def _speed_bands(estimates: list[Any]) -> str:
    lines = []
    for estimate in estimates:
        job = "serving" if isinstance(estimate, ServeEstimate) else "fine-tuning"
        bands = [
            f"{SPEED_NAMES.get(name, name)} ±{band.within:.0%} ({band.share:.0%} of {band.records} records)"
            for name, band in estimate.bands.items()
        ]
        if bands:
            lines.append(f"{job} speed, calibration: {', '.join(bands)}")
    if not lines:
        return "speed: no calibrated error band"
    return "\n".join(lines) + "\nthe sensitivity table shows both ends"


def _acquisition_table(spec: Spec, estimate: Any, currency: str) -> dict[str, Any] | None:
    """Rent on demand, reserve or buy the declared GPUs, when the spec prices more than one of these."""
    serving = isinstance(estimate, ServeEstimate)
    gpu, count, price = estimate.gpu.id, estimate.gpus, estimate.price_per_hour
    if serving:
        span = f"over {plural(spec.budget.term_months, 'month')}"
        ways = acquisitions(spec, gpu, count, price, months=spec.budget.term_months)
    elif estimate.hours is not None:
        span = f"for the {_hours(estimate.hours)}-hour run"
        ways = acquisitions(spec, gpu, count, price, hours=estimate.hours)
    else:
        return None
    if not ways:
        return None
    cheapest = min(ways, key=lambda way: way.cost)
    rows = [
        [
            way.way + (" (cheapest)" if way is cheapest else ""),
            f"{way.gpus} x {way.gpu}",
            way.note,
            _money(way.cost, currency),
            _money(way.cash, currency),
        ]
        for way in ways
    ]
    return table(
        f"{'Serving' if serving else 'Fine-tuning'}: rent, reserve or buy the declared GPUs {span}",
        ["Way", "GPUs", "Terms", f"Cost {span}", "Paid or committed"],
        rows,
        numeric=(3, 4),
        widths=(18, 16, 34, 16, 16),
    )


def _finding_groups(findings: tuple[Finding, ...]) -> list[dict[str, Any]]:
    groups = []
    for severity in (Severity.ERROR, Severity.WARNING, Severity.INFO):
        items = [f for f in findings if f.severity is severity]
        if not items:
            continue
        groups.append(
            {
                "severity": severity.value,
                "title": plural(len(items), severity.value, "info" if severity is Severity.INFO else None),
                "more": "",
                "findings": [
                    {
                        "code": f.code,
                        "name": f.name,
                        "message": f.message,
                        "where": f"{f.line}:{f.col}",
                        "hint": hint_in_report(f.hint),
                        "waived": f.waived,
                        "waiver": ""
                        if f.waiver is None
                        else f"waived: {f.waiver.reason}"
                        + (f" (approved by {f.waiver.approved_by}" if f.waiver.approved_by else "")
                        + (f", until {f.waiver.expires}" if f.waiver.approved_by and f.waiver.expires else "")
                        + (")" if f.waiver.approved_by else ""),
                    }
                    for f in items
                ],
            }
        )
    return groups


def _findings_summary(findings: tuple[Finding, ...]) -> str:
    counts = []
    for severity, noun in ((Severity.ERROR, "error"), (Severity.WARNING, "warning"), (Severity.INFO, "info")):
        count = sum(1 for f in findings if f.severity is severity and not f.waived)
        counts.append(plural(count, noun, "info" if noun == "info" else None))
    waived = sum(1 for f in findings if f.waived)
    return ", ".join(counts) + (f", {waived} waived" if waived else "")


def _configuration_text(record: ConfigRecord, fail_on: Severity) -> str:
    parts = [f"{record.path} (SHA-256 {record.sha256})" if record.path else "none: the documented defaults"]
    return "; ".join(parts)


def _record(
    result: LintResult,
    spec: Spec | None,
    decision: Decision,
    record: ConfigRecord,
    generated: datetime.date,
    layouts: list[str],
    expiry_text: str,
) -> dict[str, Any]:
    raw = result.document.raw if result.document else b""
    data = result.document.data if result.document else None
    signable = decision.verdict.signable
    approvals = spec.approvals if spec else {}
    signoff = []
    for key, role in ROLES:
        entry = approvals.get(key)
        if not signable:
            signoff.append([role, NOT_FOR_SIGNATURE, NOT_FOR_SIGNATURE, NOT_FOR_SIGNATURE])
        else:
            signoff.append([role, entry.name if entry else "", "", entry.date if entry and entry.date else ""])
    withheld = bool(approvals) and not signable
    if signable:
        approved = [
            ["Verdict", decision.verdict.value],
            ["Layout", "\n".join(layouts) or "n/a"],
            ["Amount", _amount_text(decision.amount)],
            *_with_changes(decision),
            ["Term", plural(decision.amount.term_months, "month") if decision.amount else "n/a"],
            ["Valid until", expiry_text],
        ]
        if decision.verdict is Verdict.APPROVE_WITH_CHANGES:
            if decision.changes:
                currency = spec.budget.currency if spec else ""
                approved.append(
                    ["Required layout", "\n".join(change.sentence(currency) for change in decision.changes)]
                )
            approved.append(["Conditions", "the changes listed under the decision are made before spending"])
    else:
        approved = [
            ["Verdict", decision.verdict.value],
            ["Approved", f"nothing: a {decision.verdict.value} is {NOT_FOR_SIGNATURE}"],
        ]
    git = git_state(Path(result.path)) if result.document else None
    digest = content_hash(data)
    provenance = [
        ["Spec file", Path(result.path).name],
        [
            "Repository",
            f"commit {git.commit}, {git.path} ({git.status})" if git else "not in a git repository (SHA-256 only)",
        ],
        ["Spec SHA-256 (file)", hashlib.sha256(raw).hexdigest()],
        ["Content hash", digest or "n/a: the spec did not load"],
        ["Configuration", _configuration_text(record, decision.fail_on)],
        ["Rules ignored", ", ".join(record.ignore) or "none"],
    ]
    if record.select:
        provenance.append(["Rules selected", ", ".join(record.select) + " (every other rule is off)"])
    provenance += [
        [
            "Rules re-levelled",
            ", ".join(f"{code} {default} → {level}" for code, default, level in record.severities) or "none",
        ],
        ["Waivers", "applied" if record.waivers else "not applied (--no-waivers)"],
        ["Fail level", f"{decision.fail_on.value} (exit code {decision.exit_code})"],
        ["gpuplan version", __version__],
        ["Schema", load_schema()["$id"]],
        ["Catalog version", catalog_version()],
        ["Generated", generated.isoformat()],
    ]
    return {
        "approved": table("What is approved", ["Item", "Value"], approved, kind="kv"),
        "signoff": table("Sign-off", ["Role", "Name", "Signature", "Date"], signoff, widths=(18, 30, 34, 18)),
        "signable": signable,
        "withheld": withheld,
        "provenance": table("Provenance", ["Item", "Value"], provenance, kind="kv"),
        "content_hash": digest or "n/a",
        "hash_definition": CONTENT_HASH_DEFINITION,
    }


def _unresolved_name(result: LintResult) -> str:
    """The ``name`` of a spec that did not resolve, when it has a plausible one; else the file name."""
    data = result.document.data if result.document else None
    name = data.get("name") if isinstance(data, dict) else None
    if isinstance(name, str) and 0 < len(name) <= 200:
        return name
    return Path(result.path).name


def _verification_tables(verification: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The "Verified against a run" section (gpuplan.report.verified) as tables with their notes."""
    runs = []
    for run in verification:
        rows = [
            [row["term"], row["estimate"], row["measured"], row["delta"], row["ratio"], row["status"]]
            for row in run["rows"]
        ]
        notes = [f"Compared with {run['basis']}."] + [f"Differs: {d}." for d in run["differing"]]
        runs.append(
            {
                "title": run["title"],
                "notes": " ".join(notes),
                "table": table(
                    run["title"],
                    ["Term", "Estimate", "Measured", "Delta", "Ratio", "Status"],
                    rows,
                    numeric=(1, 2, 3, 4),
                    widths=(28, 15, 15, 15, 10, 17),
                ),
                "meaning": run["meaning"],
            }
        )
    return runs


# Where a lint hint sends the reader to `gpuplan plan`, the report has that search's options itself.
REPORT_POINTER = "this report's options side by side compare every allowed GPU"


def hint_in_report(hint: str) -> str:
    """A finding's hint as the report shows it: its pointer to ``gpuplan plan`` names the report's own
    options section, which shows that command's search."""
    return hint.replace(PLAN_POINTER, REPORT_POINTER)


def build_report(
    result: LintResult,
    generated: datetime.date,
    settings: Settings | None = None,
    fail_on: Severity = Severity.ERROR,
    verification: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The report model for one linted spec (the analysis is missing when the spec did not resolve).

    ``verification`` is the optional "Verified against a run" section (gpuplan.report.verified).
    """
    settings = settings or result.settings or default_settings()
    analysis: Analysis | None = result.analysis
    spec = analysis.spec if analysis else None
    planner = planner_for(spec, settings) if spec else None
    decision = decide(result, fail_on, planner=planner)
    currency = spec.budget.currency if spec else "USD"
    record = config_record(result.options, result.path)
    estimates = [e for e in (analysis.finetune, analysis.serve) if e] if analysis else []
    bases: dict[str, PriceBasis] = price_bases(spec, [e.gpu for e in estimates]) if spec else {}
    risks = compute_risks(analysis, result.findings, bases, settings, record, generated)
    layouts = _job_layouts(analysis) if analysis else []
    waivers_in_force = {f.code: f.waiver.expires for f in result.findings if f.waiver and f.waiver.expires}
    expiry = approval_expiry(
        generated,
        {gpu_id: basis.date for gpu_id, basis in bases.items() if basis.date},
        waivers_in_force,
        settings.price_max_age_days,
    )
    expiry_text = f"{expiry.date.isoformat()} ({expiry.basis})"
    plans: list[tuple[Any, JobPlan]] = []
    if analysis and planner:
        for kind, estimate in (("finetune", analysis.finetune), ("serve", analysis.serve)):
            plan = planner.plan(kind) if estimate is not None else None
            if plan is not None:
                plans.append((estimate, plan))
    savings = [text for _, plan in plans if spec and (text := _saving_text(plan, currency, spec.budget.term_months))]
    headline_savings = [text for text in savings if not text.startswith("n/a")]
    recommended = [
        f"{'serving' if plan.kind == 'serve' else 'fine-tuning'}: {plan.recommended.layout.describe()}"
        for _, plan in plans
        if plan.recommended is not None and plan.recommended.layout.key != plan.declared.layout.key
    ]
    summary_rows = [["Amount requested", _requested_text(decision)], *_with_changes(decision)]
    if analysis and spec:
        summary_rows += [
            ["Layout", "\n".join(layouts)],
            ["Budget", "\n".join(_budget_lines(spec, analysis))],
            ["Saving available", "\n".join(savings) or "none: no sound option is cheaper"],
        ]
        if recommended:
            summary_rows.append(["Recommended layout", "\n".join(recommended)])
        summary_rows += [
            ["Price basis", "\n".join(f"{b.gpu}: {b.text}" for b in bases.values())],
            ["Error bands", f"{_memory_bands(estimates, spec.plan.confidence)}\n{_speed_bands(estimates)}"],
        ]
    summary_rows += [
        ["Approval valid until", expiry_text if decision.verdict.signable else f"n/a: {NOT_FOR_SIGNATURE}"],
        ["Findings", _findings_summary(result.findings)],
    ]
    changes = []
    if decision.verdict is Verdict.APPROVE_WITH_CHANGES:
        changes = [
            f"{'Serve' if c.job == 'serve' else 'Fine-tune'} on {c.layout} ({c.cost}): paste {c.fragment}"
            for c in decision.changes
        ]
        changes += [
            f"{f.code} {f.name}: {hint_in_report(f.hint) or f.message}"
            for f in decision.deciding
            if not (f.code == "GP507" and decision.changes)  # its hint is the planner's change above
        ]
    jobs = []
    sensitivities = []
    if analysis and spec:
        for estimate, plan in plans:
            details = _serve_details if plan.kind == "serve" else _finetune_details
            job = details(estimate, currency, settings)
            job["options"] = _options_tables(plan, spec, job["title"])
            job["acquisition"] = _acquisition_table(spec, estimate, currency)
            jobs.append(job)
            moved = sensitivity(spec, estimate, settings)
            sensitivities.append(
                {
                    "title": job["title"],
                    "table": _sensitivity_table(moved, currency),
                    "chart": sensitivity_chart(moved),
                }
            )
    name = spec.name if spec else _unresolved_name(result)
    return {
        "title": f"GPU plan: {name}",
        "name": name,
        "owner": spec.owner if spec else "",
        "description": spec.description if spec else "",
        "generated": generated.isoformat(),
        "currency": currency,
        "verdict": {"label": decision.verdict.value, "slug": decision.verdict.slug, "reason": decision.reason},
        "headline": {
            "amount": _requested_text(decision),
            "layout": "; ".join(layouts) or "n/a: no estimate",
            "saving": "; ".join(headline_savings),
        },
        "summary": table("The decision", ["Item", "Value"], summary_rows, kind="kv"),
        "changes": changes,
        "risks": [{"title": r.title, "detail": r.detail} for r in risks],
        "model": None
        if spec is None
        else table(
            "The model",
            ["Item", "Value"],
            [
                ["Model", f"{spec.model.label} — {spec.model.architecture.params:,} parameters, {spec.model.dtype}"],
                ["Model source", spec.model.source],
            ],
            kind="kv",
        ),
        "jobs": jobs,
        "sensitivities": sensitivities,
        "finding_groups": _finding_groups(result.findings),
        "findings_summary": _findings_summary(result.findings),
        "verification": _verification_tables(verification or []),
        "record": _record(result, spec, decision, record, generated, layouts, expiry_text),
    }


def _category_rows(s: ServeEstimate) -> list[list[str]]:
    """The deployment's answer to each benchmark category, whatever the declared load: one row."""
    c = s.categories
    if c is None:
        return []
    return [
        [
            "Benchmark categories",
            f"long-context input: TTFT {_ms(c.long_context_ttft_s, 0)} ({c.long_context_tokens:,}-token prompt,"
            f" idle); high-throughput batch: {format_figure(c.saturated_tokens_per_s, 0, RATE_DIGITS)} output"
            f" tokens/s at {c.saturated_sequences:,} sequences per replica; short fast output: TTFT"
            f" {_ms(c.short_ttft_s, 0)} + TPOT {_ms(c.short_tpot_s, 1, TPOT_MS_DIGITS)}"
            f" ({SHORT_PROMPT} in, {SHORT_OUTPUT} out, one request)",
        ]
    ]
