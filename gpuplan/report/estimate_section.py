"""Appendix E of the report: the estimate of the layout each job's approver funds, term by term, with the
declared layout's verdict beside it where the planner changed it."""

from __future__ import annotations

from typing import Any

from gpuplan.analysis import NOT_LOADED, FinetuneEstimate, ServeEstimate
from gpuplan.assumptions import (
    fullest_stage_words,
    load_phrase,
    sequences_words,
    ttft_prompt_phrase,
    ttft_tail_words,
)
from gpuplan.config import Settings
from gpuplan.decision import layout_text
from gpuplan.decision.memo import JobMemo
from gpuplan.decision.offered import offered_figures
from gpuplan.estimate.engines import budget_words
from gpuplan.estimate.serving_categories import SHORT_OUTPUT, SHORT_PROMPT
from gpuplan.report.charts import memory_chart
from gpuplan.report.tables import hours, money, ms, table
from gpuplan.units import (
    RATE_DIGITS,
    TPOT_MS_DIGITS,
    format_figure,
    format_gib,
    format_gib_difference,
    format_percent,
    plural,
)


def _headroom(used: float, capacity: float) -> str:
    """What is left of ``capacity``, as the difference of the two figures shown beside it."""
    free = capacity - used
    if free < 0:
        return f"none: short by {format_gib_difference(used, capacity)}"
    return f"{format_gib_difference(capacity, used)} ({format_percent(free / capacity)})"


def finetune_details(
    f: FinetuneEstimate, currency: str, settings: Settings, confidence: float, tokens_known: bool = True
) -> dict[str, Any]:
    """Appendix E's fine-tuning table. ``tokens_known`` False: the planner priced the layout over NOMINAL_TOKENS
    (finetune.tokens is not given), so its hours and cost are per 1M tokens, not the run's."""
    job = f.setup.job
    peak = f.memory.per_gpu
    peak_phase = f.memory.peak_phase_name
    speed = f.speed
    rows = [
        ["Method", f"{job.method} ({job.precision}, {job.optimizer})"],
        ["Layout", layout_text(f)],
        [
            "Shape",
            f"micro-batch {job.micro_batch} x {job.seq_len:,} tokens"
            + (f", {job.checkpointing} activation checkpointing" if job.checkpointing != "none" else ""),
        ],
        ["Peak per GPU", f"{format_gib(peak)} of {format_gib(f.gpu.usable_bytes)} usable, in the {peak_phase} phase"],
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
            if f.hours is None or not tokens_known
            else f"{hours(f.hours)} h ({hours(f.hours * f.gpus)} GPU-hours)",
        ],
        ["Cost of the run", money(f.cost, currency) if tokens_known else "n/a (finetune.tokens is not given)"],
        *([] if tokens_known or f.cost is None else [["Cost per 1M training tokens", money(f.cost, currency)]]),
        ["Resumable checkpoint", f"{f.checkpoint_bytes / 1e9:,.1f} GB of storage"],
    ]
    phases = "; ".join(f"{name.replace('_', ' ')} {format_gib(total)}" for name, total in f.memory.phase_totals.items())
    return {
        "id": "finetune",
        "title": "Fine-tuning",
        "verdict": f.fit_verdict(confidence),
        "table": table("Fine-tuning: memory, time and cost", ["Item", "Value"], rows, kind="kv"),
        "chart": memory_chart(f.memory.breakdown, peak, f.gpu.usable_bytes, f"usable on {f.gpu.id}"),
        "chart_caption": f"Per-GPU memory at the {peak_phase} (the peak) against {f.gpu.id}'s usable memory",
        "phases": f"Phase totals per GPU, framework overhead included, the allocator's cache not: {phases}."
        if phases
        else "",
        "assumptions": table(
            "Fine-tuning assumptions", ["Assumption", "Value"], [[k, v] for k, v in f.assumptions], kind="kv"
        ),
    }


def serve_details(
    s: ServeEstimate, currency: str, settings: Settings, confidence: float, declared: ServeEstimate | None = None
) -> dict[str, Any]:
    """Appendix E's serving table of ``s``; ``declared``: the declared layout's estimate where ``s`` is another's
    (the evidence a spec offers speaks for the layout it declares: it is set beside that layout's figures)."""
    setup = s.setup
    rows = [
        ["Layout", layout_text(s)],
        [
            "Workload",
            f"{sequences_words(setup, s.memory)}, weights "
            f"{'unquantized' if setup.quantization == 'none' else setup.quantization}, "
            f"KV cache {setup.kv_dtype_bytes * 8}-bit",
        ],
        [
            "Peak per GPU",
            f"{format_gib(s.memory.peak_per_gpu)} of a {format_gib(s.memory.budget)} engine budget"
            + (f" ({words})" if (words := fullest_stage_words(s.memory)) else ""),
        ],
        ["Headroom", _headroom(s.memory.peak_per_gpu, s.memory.budget)],
        [
            "Capacity",
            f"at most {plural(s.max_concurrency, 'sequence')} at {setup.context:,} tokens; "
            f"at most {s.max_context:,} tokens at {plural(s.required_sequences, 'sequence')}; "
            f"KV cache {s.memory.kv_cache_tokens:,} tokens",
        ],
        *(
            [
                [
                    "Latency",
                    (
                        f"TTFT p90 {ms(s.speed.ttft_p90_s, 0)}, median {ms(s.speed.ttft_median_s, 0)}, mean"
                        f" {ms(s.speed.ttft_s, 0)} {ttft_prompt_phrase(s.job)}{load_phrase(s.job)}"
                        + (f" ({tail})" if (tail := ttft_tail_words(s.speed)) else "")
                        if not s.speed.saturated
                        else f"TTFT without bound {load_phrase(s.job)} (the stream outruns the layout)"
                    )
                    + f"; TPOT {ms(s.speed.tpot_s, 1, TPOT_MS_DIGITS)}"
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
        *_evidence_rows(declared or s, settings, confidence, declared is not None),
        ["Cost per month", money(s.monthly_cost, currency)],
        ["Cost per 1M output tokens", money(s.cost_per_million_tokens, currency) if s.loads else NOT_LOADED],
    ]
    budget_share = budget_words(setup)
    return {
        "id": "serve",
        "title": "Serving",
        "verdict": s.fit_verdict(confidence),
        "table": table("Serving: memory, speed and cost", ["Item", "Value"], rows, kind="kv"),
        "chart": memory_chart(s.memory.breakdown, s.memory.per_gpu, s.memory.budget, "engine budget"),
        "chart_caption": f"Per-GPU memory against the engine budget on {s.gpu.id} ({budget_share})",
        "phases": "",
        "assumptions": table(
            "Serving assumptions", ["Assumption", "Value"], [[k, v] for k, v in s.assumptions], kind="kv"
        ),
    }


def funded_details(job: JobMemo, currency: str, settings: Settings, confidence: float) -> dict[str, Any]:
    """Appendix E for one job: the estimate of the layout the approver funds and, when the planner changed
    it, the declared layout's verdict beside it (Appendix A says why it changed)."""
    funded = job.funded.estimate
    if job.kind == "serve":
        details = serve_details(
            funded, currency, settings, confidence, job.plan.declared.estimate if job.changed else None
        )
    else:
        details = finetune_details(funded, currency, settings, confidence, job.funded.tokens_known)
    details["funded"] = job.funded.layout.describe()
    declared = job.plan.declared
    details["declared"] = (
        f"The declared layout ({declared.layout.describe()}): {declared.estimate.fit_verdict(confidence)}, "
        f"{_memory_words(declared.estimate, confidence)} (Appendix A)."
        if job.changed
        else ""
    )
    return details


def _memory_words(estimate: Any, confidence: float) -> str:
    """A layout's per-GPU memory: the estimate, its figure at ``confidence`` and the capacity it is judged on."""
    if isinstance(estimate, ServeEstimate):
        capacity = f"a {format_gib(estimate.memory.budget)} engine budget"
    else:
        capacity = f"{format_gib(estimate.gpu.usable_bytes)} usable"
    peak = estimate.memory.peak_per_gpu if isinstance(estimate, ServeEstimate) else estimate.memory.per_gpu
    return (
        f"{format_gib(peak)} per GPU estimated, {format_gib(estimate.planned_bytes(confidence))} "
        f"at {confidence:.0%} confidence, of {capacity}"
    )


def _evidence_rows(s: ServeEstimate, settings: Settings, confidence: float, other: bool) -> list[list[str]]:
    """One row per ``serve.evidence`` item: the offered figure beside gpuplan's for the same category and metric
    on ``s``, the declared layout (``other``: not the one the table describes)."""
    layout = f"for the declared {layout_text(s)}" if other else ""
    return [["Evidence offered", o.words(confidence, layout)] for o in offered_figures(s, settings, confidence)]


def _category_rows(s: ServeEstimate) -> list[list[str]]:
    """The deployment's answer to each benchmark category, whatever the declared load: one row."""
    c = s.categories
    if c is None:
        return []
    return [
        [
            "Benchmark categories",
            f"long-context input: TTFT {ms(c.long_context_ttft_s, 0)} ({c.long_context_tokens:,}-token prompt,"
            f" idle); high-throughput batch: {format_figure(c.saturated_tokens_per_s, 0, RATE_DIGITS)} output"
            f" tokens/s at {c.saturated_sequences:,} sequences per replica; short fast output: TTFT"
            f" {ms(c.short_ttft_s, 0)} + TPOT {ms(c.short_tpot_s, 1, TPOT_MS_DIGITS)}"
            f" ({SHORT_PROMPT} in, {SHORT_OUTPUT} out, one request)",
        ]
    ]
