"""The report model: plain data built from the spec, its estimate and its findings.

Every number a template shows is computed and formatted here; the templates only loop and print.
"""

from __future__ import annotations

import datetime
import hashlib
from pathlib import Path
from typing import Any

from gpuplan import __version__
from gpuplan.analysis import Analysis, FinetuneEstimate, ServeEstimate
from gpuplan.catalog import catalog_version
from gpuplan.config import Settings, default_settings
from gpuplan.findings import Finding, Severity
from gpuplan.linter import LintResult
from gpuplan.plan.describe import cost_text
from gpuplan.plan.search import JobPlan
from gpuplan.rules.context import planner_for
from gpuplan.spec import Spec
from gpuplan.units import format_gib, format_money
from gpuplan.validate import load_schema

CHART_WIDTH = 640  # px of the memory bar, for the GPU's usable memory (or the engine budget)
SEGMENT_COLOURS = {
    "weights": "#3b6ea5",
    "gradients": "#d9822b",
    "optimizer": "#7a5195",
    "activations": "#2a9d8f",
    "temporaries": "#e9c46a",
    "autocast_weight_copies": "#8ab17d",
    "optimizer_step_temporaries": "#bc5090",
    "gathered_parameters": "#6c757d",
    "framework_overhead": "#adb5bd",
    "kv_cache": "#e76f51",
    "runtime": "#adb5bd",
    "tenant_weights": "#264653",
    "tenant_kv_cache": "#f4a261",
}
MAX_ALTERNATIVE_ROWS = 10  # rows of the planner's table: declared, recommended, then the cheapest options


def _headroom(free: float, capacity: float) -> str:
    if free < 0:
        return f"none: short by {format_gib(-free)}"
    return f"{format_gib(free)} ({free / capacity:.0%})"


def verdict(findings: tuple[Finding, ...]) -> str:
    active = [f for f in findings if not f.waived]
    if any(f.severity is Severity.ERROR for f in active):
        return "FAIL"
    if any(f.severity is Severity.WARNING for f in active):
        return "PASS WITH WARNINGS"
    return "PASS"


def _chart(breakdown: dict[str, int], capacity: int) -> dict[str, Any]:
    total = sum(breakdown.values())
    scale = CHART_WIDTH / max(capacity, total, 1)
    x = 0.0
    segments = []
    for name, value in breakdown.items():
        width = value * scale
        segments.append(
            {
                "name": name.replace("_", " "),
                "value": format_gib(value),
                "share": f"{value / capacity:.0%}" if capacity else "",
                "x": round(x, 2),
                "width": round(width, 2),
                "colour": SEGMENT_COLOURS.get(name, "#999999"),
            }
        )
        x += width
    return {
        "segments": segments,
        "capacity_x": round(capacity * scale, 2),
        "width": CHART_WIDTH,
        "total": format_gib(total),
        "capacity": format_gib(capacity),
        "over": total > capacity,
        "legend": [
            {"name": s["name"], "value": s["value"], "colour": s["colour"], "share": s["share"]} for s in segments
        ],
    }


def _finetune_job(spec: Spec, f: FinetuneEstimate, currency: str, plan: JobPlan | None) -> dict[str, Any]:
    setup = f.setup
    headroom = f.gpu.usable_bytes - f.memory.per_gpu
    speed = f.speed
    rows = [
        ("Method", f"{setup.method} ({setup.precision}, {setup.optimizer})"),
        (
            "Layout",
            f"{f.gpus} x {f.gpu.name} ({f.gpu.id}), TP {setup.tensor_parallel}, PP {setup.pipeline_parallel}, "
            f"sharding {setup.sharding}",
        ),
        (
            "Shape",
            f"micro-batch {setup.micro_batch} x {setup.seq_len:,} tokens"
            + (f", {setup.checkpointing} activation checkpointing" if setup.checkpointing != "none" else ""),
        ),
        (
            "Peak per GPU",
            f"{format_gib(f.memory.per_gpu)} ({f.memory.peak_phase.replace('_', ' ')} peak) of {format_gib(f.gpu.usable_bytes)} usable",
        ),
        ("Headroom", _headroom(headroom, f.gpu.usable_bytes)),
        ("Trainable parameters", f"{f.memory.trainable_params:,} of {f.memory.params:,}"),
        *(
            [("Offloaded", f"{format_gib(f.memory.host)} host, {format_gib(f.memory.nvme)} NVMe per GPU")]
            if f.memory.host or f.memory.nvme
            else []
        ),
        (
            "Training time",
            "n/a (no tokens given)"
            if speed is None
            else f"{speed.hours:,.1f} h ({speed.hours * f.gpus:,.1f} GPU-hours)",
        ),
        ("Cost of the run", format_money(f.cost, currency)),
        ("Resumable checkpoint", f"{f.checkpoint_bytes / 1e9:,.1f} GB"),
    ]
    phases = [
        {"name": name.replace("_", " "), "value": format_gib(total)} for name, total in f.memory.phase_totals.items()
    ]
    return {
        "title": "Fine-tuning",
        "fits": f.fits,
        "rows": [{"label": label, "value": value} for label, value in rows],
        "chart": _chart(f.memory.breakdown, f.gpu.usable_bytes),
        "chart_caption": f"Per-GPU memory at the {f.memory.peak_phase.replace('_', ' ')} peak against {f.gpu.id}'s usable memory",
        "phases": phases,
        "alternatives": _plan_rows(plan, currency),
        "alternatives_unit": "training hours",
        "assumptions": [{"name": k, "value": v} for k, v in f.assumptions],
    }


def _serve_job(spec: Spec, s: ServeEstimate, currency: str, plan: JobPlan | None) -> dict[str, Any]:
    setup = s.setup
    headroom = s.memory.budget - s.memory.per_gpu
    rows = [
        ("Layout", f"{s.gpus} x {s.gpu.name} ({s.gpu.id}), TP {setup.tensor_parallel}, PP {setup.pipeline_parallel}"),
        (
            "Workload",
            f"{setup.concurrency} sequences x {setup.context:,} tokens, quantization {setup.quantization}, "
            f"KV cache {setup.kv_dtype_bytes * 8}-bit",
        ),
        ("Per GPU", f"{format_gib(s.memory.per_gpu)} of a {format_gib(s.memory.budget)} engine budget"),
        ("Headroom", _headroom(headroom, s.memory.budget)),
        (
            "Capacity",
            f"max {s.max_concurrency:,} sequences at {setup.context:,} tokens; "
            f"max {s.max_context:,} tokens at {setup.concurrency} sequences; "
            f"KV cache {s.memory.kv_cache_tokens:,} tokens",
        ),
        (
            "Latency",
            f"TTFT {s.speed.ttft_s * 1000:,.0f} ms; TPOT {s.speed.tpot_s * 1000:,.1f} ms ({s.speed.decode_bound}-bound)",
        ),
        ("Throughput", f"{s.speed.tokens_per_s:,.0f} output tokens/s"),
        ("Cost per month", format_money(s.monthly_cost, currency)),
        ("Cost per 1M output tokens", format_money(s.cost_per_million_tokens, currency)),
    ]
    return {
        "title": "Serving",
        "fits": s.fits,
        "rows": [{"label": label, "value": value} for label, value in rows],
        "chart": _chart(s.memory.breakdown, s.memory.budget),
        "chart_caption": f"Per-GPU memory against the engine budget on {s.gpu.id} ({setup.memory_utilization:.0%} of usable memory)",
        "phases": [],
        "alternatives": _plan_rows(plan, currency),
        "alternatives_unit": "TTFT / TPOT ms",
        "assumptions": [{"name": k, "value": v} for k, v in s.assumptions],
    }


def _plan_rows(plan: JobPlan | None, currency: str) -> list[dict[str, str]]:
    """The planner's table: the declared layout (marked), the recommendation, the sound options no other
    beats on cost and latency, then rejected layouts with the constraint each breaks."""
    if plan is None:
        return []
    rows: list[dict[str, str]] = []
    seen: set[tuple[object, ...]] = set()
    ordered = [("declared", plan.declared)]
    if plan.recommended is not None:
        ordered.append(("recommended", plan.recommended))
    ordered += [("", option) for option in plan.options] + [("", option) for option in plan.rejected]
    for mark, option in ordered:
        if option.layout.key in seen:
            if mark == "recommended":
                rows[0]["mark"] = "declared, recommended"
            continue
        seen.add(option.layout.key)
        if len(rows) >= MAX_ALTERNATIVE_ROWS and not mark:
            break
        speed = option.estimate.speed
        if option.kind == "serve":
            speed_text = f"{speed.ttft_s * 1000:,.0f} / {speed.tpot_s * 1000:,.1f}"
        else:
            speed_text = f"{speed.hours:,.1f}" if option.tokens_known else "n/a"
        price = option.price_per_hour
        broken = option.broken
        rows.append(
            {
                "mark": mark,
                "layout": option.layout.describe(),
                "headroom": f"{option.headroom:.0%}",
                "speed": speed_text,
                "price": "n/a" if price is None else f"{price:.2f}",
                "cost": cost_text(option, currency),
                "verdict": "meets every constraint" if not broken else f"breaks {', '.join(broken)}",
            }
        )
    return rows


def _recommendation(spec: Spec | None, analysis: Analysis | None, findings: tuple[Finding, ...], outcome: str) -> str:
    errors = [f for f in findings if f.severity is Severity.ERROR and not f.waived]
    if analysis is None or spec is None:
        first = errors[0].message if errors else "the spec could not be read"
        return f"Do not approve: the spec has input errors ({first}). Fix them and re-run the report."
    parts = []
    if analysis.finetune:
        f = analysis.finetune
        parts.append(
            f"fine-tuning on {f.gpus} x {f.gpu.id} {'fits' if f.fits else 'does not fit'} "
            f"({format_gib(f.memory.per_gpu)} per GPU of {format_gib(f.gpu.usable_bytes)})"
        )
    if analysis.serve:
        s = analysis.serve
        parts.append(
            f"serving on {s.gpus} x {s.gpu.id} {'fits' if s.fits else 'does not fit'} "
            f"({format_gib(s.memory.per_gpu)} per GPU of a {format_gib(s.memory.budget)} budget)"
        )
    summary = "; ".join(parts)
    if outcome == "FAIL":
        hint = next((f.hint for f in errors if f.hint), "")
        return (
            f"Do not approve as declared: {summary}. {len(errors)} blocking finding(s), first: "
            f"{errors[0].message}." + (f" Suggested change: {hint}." if hint else "")
        )
    if outcome == "PASS WITH WARNINGS":
        return f"Approve with care: {summary}. Review the warnings below before signing."
    return f"Approve: {summary}. No blocking or warning findings."


def build_report(
    result: LintResult,
    generated: datetime.date,
    settings: Settings | None = None,
    verification: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The report model for one linted spec (analysis may be missing when the spec did not resolve).

    ``verification`` is the optional "Verified against a run" section (gpuplan.report.verified).
    """
    settings = settings or default_settings()
    analysis: Analysis | None = result.analysis
    spec = analysis.spec if analysis else None
    raw = result.document.raw if result.document else b""
    outcome = verdict(result.findings)
    currency = spec.budget.currency if spec else "USD"
    jobs = []
    planner = planner_for(analysis.spec, settings) if analysis else None
    if analysis and analysis.finetune and planner:
        jobs.append(_finetune_job(analysis.spec, analysis.finetune, currency, planner.plan("finetune")))
    if analysis and analysis.serve and planner:
        jobs.append(_serve_job(analysis.spec, analysis.serve, currency, planner.plan("serve")))
    groups = []
    for severity in (Severity.ERROR, Severity.WARNING, Severity.INFO):
        items = [f for f in result.findings if f.severity is severity]
        if items:
            groups.append(
                {
                    "severity": severity.value,
                    "title": severity.value.capitalize() + "s",
                    "findings": [
                        {
                            "code": f.code,
                            "name": f.name,
                            "message": f.message,
                            "line": f.line,
                            "col": f.col,
                            "hint": f.hint,
                            "waived": f.waived,
                            "waiver_reason": f.waiver.reason if f.waiver else "",
                            "waiver_by": f.waiver.approved_by if f.waiver else "",
                            "waiver_expires": f.waiver.expires if f.waiver else "",
                        }
                        for f in items
                    ],
                }
            )
    budget_rows = []
    if spec and analysis:
        if analysis.finetune:
            budget_rows.append(
                {
                    "item": "Fine-tuning run",
                    "estimate": format_money(analysis.finetune.cost, currency),
                    "budget": format_money(spec.budget.finetune_total, currency),
                    "within": _within(analysis.finetune.cost, spec.budget.finetune_total),
                }
            )
        if analysis.serve:
            budget_rows.append(
                {
                    "item": "Serving per month",
                    "estimate": format_money(analysis.serve.monthly_cost, currency),
                    "budget": format_money(spec.budget.serve_monthly, currency),
                    "within": _within(analysis.serve.monthly_cost, spec.budget.serve_monthly),
                }
            )
    price_dates = (
        sorted({f"{job.gpu.id}: {job.price_source}" for job in (analysis.finetune, analysis.serve) if job})
        if analysis
        else []
    )
    approvals = spec.approvals if spec else {}
    return {
        "title": f"GPU plan: {spec.name if spec else Path(result.path).name}",
        "name": spec.name if spec else Path(result.path).name,
        "owner": spec.owner if spec else "",
        "description": spec.description if spec else "",
        "verdict": outcome,
        "verdict_class": outcome.lower().replace(" ", "-"),
        "recommendation": _recommendation(spec, analysis, result.findings, outcome),
        "workload": []
        if spec is None
        else [
            {
                "label": "Model",
                "value": f"{spec.model.label} — {spec.model.architecture.params:,} parameters, {spec.model.dtype}",
            },
            {"label": "Model source", "value": spec.model.source},
            {"label": "Jobs", "value": ", ".join(job["title"].lower() for job in jobs) or "none"},
        ],
        "jobs": jobs,
        "finding_groups": groups,
        "finding_count": len(result.findings),
        "verification": verification or [],
        "budget_rows": budget_rows,
        "currency": currency,
        "signoff": [
            {"role": role, "name": approvals.get(key, "")}
            for role, key in (
                ("Prepared by", "prepared_by"),
                ("Reviewed by", "reviewed_by"),
                ("Approved by", "approved_by"),
            )
        ],
        "signoff_date": approvals.get("date", ""),
        "provenance": [
            {"label": "Spec file", "value": Path(result.path).name},
            {"label": "Spec SHA-256", "value": hashlib.sha256(raw).hexdigest()},
            {"label": "gpuplan version", "value": __version__},
            {"label": "Schema", "value": load_schema()["$id"]},
            {"label": "Catalog version", "value": catalog_version()},
            {"label": "Prices", "value": "; ".join(price_dates) or "n/a"},
            {"label": "Generated", "value": generated.isoformat()},
        ],
        "generated": generated.isoformat(),
    }


def _within(estimate: float | None, budget: float | None) -> str:
    if estimate is None or budget is None:
        return "unchecked"
    return "yes" if estimate <= budget else "no"
