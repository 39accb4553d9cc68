"""GP50x (right-sizing): a cheaper layout meets every constraint the declared one does."""

from __future__ import annotations

from collections.abc import Iterator

from gpuplan.catalog import Gpu
from gpuplan.findings import Finding
from gpuplan.plan.describe import cost_text, paste_line, saving_between
from gpuplan.plan.evaluate import Option, slo_figure
from gpuplan.plan.materiality import Materiality
from gpuplan.rules.context import RuleContext
from gpuplan.rules.registry import rule
from gpuplan.spec import Serve
from gpuplan.units import format_gib, format_latency_ms, listing


def _saving(declared: Option, option: Option, currency: str) -> str:
    saving = saving_between(declared, option)
    assert saving is not None
    return f"saving about {saving.text(currency)} ({saving.share_text()})"


def _right_sizing(ctx: RuleContext) -> tuple[float, Option, Option] | None:
    """(share of the engine budget used, declared, cheaper option) for a fitting deployment that uses
    less than ``thresholds.right_size_fraction`` of its GPU, when the planner finds a sound layout on a
    GPU with a lower hourly price that costs less per month; the option is the cheapest sound layout of any GPU."""
    s, planner = ctx.analysis.serve, ctx.plans.serve
    if s is None or planner is None or not s.fits:
        return None
    used = s.memory.per_gpu / s.memory.budget
    declared = planner.declared()
    price = declared.price_per_hour
    if used >= ctx.settings.right_size_fraction or declared.rate is None or price is None:
        return None
    declared_id = declared.layout.gpu.id

    def cheaper_gpu(gpu: Gpu, tp: int, pp: int) -> bool:
        other = ctx.spec.price(gpu)[0]
        return gpu.id != declared_id and other is not None and other < price

    option = planner.cheapest(ceiling=declared.rate, where=cheaper_gpu, tag=f"right-size:{declared_id}")
    if option is None:
        return None
    # A cheaper card would do; the layout named is the cheapest sound one of any card (the plan's, GP507's):
    # 2 x h100-pcie named beside 1 x h100-sxm for less drew GP507 once pasted.
    cheapest = planner.cheapest(ceiling=declared.rate)
    if cheapest is not None and cheapest.rate is not None and option.rate is not None and cheapest.rate < option.rate:
        option = cheapest
    return used, declared, option


@rule("GP505")
def oversized_serving_gpu(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    When a deployment uses less than `thresholds.right_size_fraction` (default 25%) of its GPU's
    memory budget, asks the planner for the cheapest sound layout (memory with the configured
    headroom, the latency SLO) on a GPU with a lower hourly price, and when the whole layout costs
    less per month than the declared one, reports the cheapest sound layout of any GPU (the one
    `gpuplan plan` and GP507 name, so that its paste draws no other finding).

    ## Why is this bad?
    An H200 serving a lightly loaded 8B model costs several times an L4 that would do.

    ## Example
    ```yaml
    model: {id: llama-3.2-1b}
    serve: {context: 4096, concurrency: 4, hardware: {gpu: h200-sxm}}
    ```

    ## Use instead
    ```yaml
    serve: {context: 4096, concurrency: 4, hardware: {gpu: l4}}
    ```
    """
    found = _right_sizing(ctx)
    s = ctx.analysis.serve
    if found is None or s is None:
        return
    used, declared, option = found
    currency = ctx.spec.budget.currency
    yield ctx.finding(
        "GP505",
        ("serve", "hardware", "gpu"),
        f"the deployment uses {used:.0%} of {s.gpu.id} ({format_gib(s.memory.per_gpu)} of "
        f"{format_gib(s.memory.budget)}); {option.layout.describe()} holds it ({format_gib(option.per_gpu_bytes)} of "
        f"{format_gib(option.capacity_bytes)}) "
        f"{_and_meets(ctx.spec.serve)}for {cost_text(option, currency)}, {_saving(declared, option, currency)}",
        f"paste {paste_line(option.fragment)}",
    )


def _serving_constraints(job: Serve | None) -> list[str]:
    """The serving constraints a sound layout meets beyond memory and headroom, as the job declares them."""
    if job is None:
        return []
    return (["the SLO"] if job.has_latency_slo else []) + (
        ["the request rate"] if job.arrival == "steady" and job.rate_rps else []
    )


def _and_meets(job: Serve | None) -> str:
    """'and meets the SLO ' (or the request rate) where the job declares one; nothing otherwise."""
    constraints = _serving_constraints(job)
    return f"and meets {listing(constraints)} " if constraints else ""


@rule("GP506")
def train_and_serve_same_gpu(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports a spec whose serving deployment uses the fine-tuning GPU while needing less than
    `thresholds.right_size_fraction` of its memory budget, when the planner finds a cheaper sound
    serving layout on a GPU with a lower hourly price (never a dearer or unpriced one).

    ## Why is this bad?
    Training needs big, fast-linked GPUs for days; serving a small model runs for months and can
    use a much cheaper card. "Train on a big GPU, serve on a smaller one."

    ## Example
    ```yaml
    finetune: {hardware: {gpu: h100-sxm, count: 8}}
    serve: {hardware: {gpu: h100-sxm}}
    ```

    ## Use instead
    ```yaml
    serve: {hardware: {gpu: l40s}}
    ```
    """
    f, s = ctx.analysis.finetune, ctx.analysis.serve
    found = _right_sizing(ctx)
    if f is None or s is None or f.gpu.id != s.gpu.id or found is None:
        return
    used, declared, option = found
    currency = ctx.spec.budget.currency
    yield ctx.finding(
        "GP506",
        ("serve", "hardware", "gpu"),
        f"serving on the training GPU ({s.gpu.id}) uses {used:.0%} of it ({format_gib(s.memory.per_gpu)}); "
        f"{option.layout.describe()} serves it for {cost_text(option, currency)}, "
        f"{_saving(declared, option, currency)}",
        f"paste {paste_line(option.fragment)}",
    )


@rule("GP507")
def cheaper_layout_available(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    For each job whose declared layout fits and is priced, asks the planner for the cheapest sound
    layout within the spec's `plan` constraints: any allowed GPU, tensor and pipeline parallelism,
    replicas, and for fine-tuning the settings that keep the model's numerics (activation
    checkpointing, a fused loss, ZeRO sharding, the micro-batch split of the same global batch). A
    sound layout fits with `thresholds.headroom_pct` free, meets the latency SLO and, for fine-tuning,
    keeps gradient sync under `thresholds.gradient_sync_share`. Warns when the saving is material: more
    than `thresholds.cheaper_layout_share` (default 20%) of the declared cost on another GPU kind, or
    `thresholds.settings_change_share` (default 10%) on the declared kind, and at least
    `thresholds.min_saving` (default 100 in the spec's currency, per month or per run; a fine-tune without
    `finetune.tokens` is priced per 1M tokens, no amount of money, so there the share alone decides). It quotes both
    costs, and where the deployment declares no latency SLO and the cheaper layout is slower, both
    layouts' TTFT and output tokens/s; the hint is the YAML to paste. `gpuplan plan` recommends exactly
    the layout GP507 names, and keeps a sound declared layout when no saving is material.

    ## Why is this bad?
    A layout that fits is not yet a good plan: serving runs every hour of every month, and a
    deployment on the wrong GPU kind or with more GPUs than it needs repeats its overspend each month.

    ## Example
    ```yaml
    model: {id: llama-3.1-70b}
    serve: {context: 8192, output_tokens: 512, prompt_tokens: {mean: 2500, p90: 6000}, concurrency: 32,
            kv_cache_dtype: fp8, slo: {ttft_ms: 3500, tpot_ms: 60},
            hardware: {gpu: h100-sxm, count: 4, tensor_parallel: 4}}   # 12,030 USD a month
    ```

    ## Use instead
    ```yaml
    serve: {hardware: {gpu: h200-sxm, count: 2, tensor_parallel: 2}}   # 6,636 USD a month
    ```
    """
    materiality = Materiality.of(ctx.settings)
    currency = ctx.spec.budget.currency
    for kind, estimate in (("finetune", ctx.analysis.finetune), ("serve", ctx.analysis.serve)):
        planner = ctx.plans.job(kind)
        if estimate is None or planner is None or not estimate.fits:
            continue
        declared = planner.declared()
        option = planner.material_change(materiality)
        if option is None:
            continue
        yield ctx.finding(
            "GP507",
            (kind, "hardware"),
            f"{option.layout.describe()} meets "
            + listing(
                [
                    "memory",
                    "headroom",
                    *(_serving_constraints(ctx.spec.serve) if kind == "serve" else ["gradient sync"]),
                ]
            )
            + f" for {cost_text(option, currency)} against {cost_text(declared, currency)} for "
            f"{declared.layout.describe()}: {_saving(declared, option, currency)}"
            + (_unbounded_latency(ctx.spec.serve, declared, option) if kind == "serve" else ""),
            f"paste {paste_line(option.fragment)}",
        )


def _unbounded_latency(job: Serve | None, declared: Option, option: Option) -> str:
    """Where no latency SLO bounds the cheaper layout and it is slower: what the saving costs in time, TTFT at
    the statistic an SLO would bound and output tokens/s of each (a burst's wave 30 times as long reads as a
    saving otherwise)."""
    if job is None or job.has_latency_slo or not (option.estimate.loads and declared.estimate.loads):
        return ""
    speeds = (declared.estimate.speed, option.estimate.speed)
    ttfts = [slo_figure(job, speed, "ttft") for speed in speeds]
    if ttfts[1] <= ttfts[0] and speeds[1].tokens_per_s >= speeds[0].tokens_per_s:
        return ""
    ttft = [format_latency_ms("ttft", seconds) for seconds in ttfts]
    tokens = [f"{speed.tokens_per_s:,.0f}" for speed in speeds]
    if ttft[0] == ttft[1] and tokens[0] == tokens[1]:  # slower by less than the figures show: no cost to state
        return ""
    return (
        f"; no latency SLO is declared, and it is slower: {job.ttft_statistic} TTFT {ttft[0]} -> {ttft[1]} ms,"
        f" {tokens[0]} -> {tokens[1]} output tokens/s"
    )


@rule("GP508")
def declared_outside_plan_limits(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Checks each job's declared layout against the spec's own `plan` limits: the GPUs (`plan.gpu`) and vendors
    (`plan.vendor`) it allows, `plan.max_gpus` and `plan.max_nodes`. The planner judges the declared layout
    against them as it judges every option, so a layout outside them is not sound as it stands: the report does
    not approve it as declared and `gpuplan plan` recommends the cheapest sound layout within them. With
    `catalog-hints` the hint is that layout's YAML to paste (a search of the whole catalog), else it points to
    `gpuplan plan`.

    ## Why is this bad?
    The limits say which hardware the team may rent or buy; a declared layout outside them is either a mistake
    in the layout or in the limits, and a review signing it funds hardware the spec itself rules out.

    ## Example
    ```yaml
    finetune: {method: lora, hardware: {gpu: h200-sxm, count: 1}}
    plan: {gpu: [h100-sxm, h100-pcie]}
    ```

    ## Use instead
    ```yaml
    finetune: {method: lora, hardware: {gpu: h100-pcie, count: 1}}
    plan: {gpu: [h100-sxm, h100-pcie]}
    ```
    """
    for kind, estimate in (("finetune", ctx.analysis.finetune), ("serve", ctx.analysis.serve)):
        planner = ctx.plans.job(kind)
        if estimate is None or planner is None:
            continue
        declared = planner.declared()
        problem = declared.reason("limits")
        if problem is None:
            continue
        sized = declared.layout.gpu.id in problem  # the GPU or its vendor, else the count of GPUs or nodes
        # The cheapest layout within the limits is a search of the whole catalog: with catalog hints alone (lint's
        # speed guarantee), else `gpuplan plan` names it
        best = planner.cheapest() if ctx.catalog_hints else None
        yield ctx.finding(
            "GP508",
            (kind, "hardware", "gpu" if sized else "count"),
            f"the declared layout ({declared.layout.describe()}) is outside the spec's plan limits: {problem}",
            f"paste {paste_line(best.fragment)}, the cheapest sound layout within them"
            if best is not None
            else "declare a layout within them, or widen them: gpuplan plan names the cheapest sound one within them",
        )
