"""GP30x: parallelism is needed the moment one GPU cannot hold the job, not a moment before."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpuplan.analysis import FinetuneEstimate, ServeEstimate
from gpuplan.findings import Finding
from gpuplan.plan.describe import cost_text, paste_line, summary
from gpuplan.plan.evaluate import ServePlanner
from gpuplan.plan.finetune_planner import FinetunePlanner
from gpuplan.plan.space import (
    domain_problem,
    max_tensor_parallel,
    proposed_serving_tensor_parallel,
    tensor_parallel_degrees,
    tensor_parallel_problem,
)
from gpuplan.rules.context import RuleContext
from gpuplan.rules.fit import finetune_single_gpu, more_of_the_same_gpu, serve_single_gpu, serve_weights_fit
from gpuplan.rules.registry import rule
from gpuplan.units import format_gib, format_gib_difference


@rule("GP301")
def parallelism_needed(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    For a job declared on a single GPU that does not fit, asks the planner for the fewest GPUs of the
    same kind that hold it with the configured headroom (and the SLO): tensor or pipeline parallelism
    for serving; data-parallel sharding, activation checkpointing or, only when those do not suffice,
    tensor or pipeline parallelism for fine-tuning; the message names the parallelism that layout uses.
    With `catalog-hints` on, the message adds the
    cheapest sound layout of any allowed GPU when it differs (`gpuplan plan` compares every GPU); the
    hint is the YAML to paste for the declared GPU.

    ## Why is this bad?
    A 70B model in bf16 is 131 GiB of weights: no 80 GB GPU can load it, however it is tuned.

    ## Example
    ```yaml
    model: {id: llama-3.1-70b}
    serve: {context: 8192, concurrency: 16, hardware: {gpu: h100-sxm}}
    ```

    ## Use instead
    ```yaml
    serve: {context: 8192, concurrency: 16, hardware: {gpu: h100-sxm, count: 4, tensor_parallel: 4}}
    ```
    """
    for kind, estimate, single in (
        ("finetune", ctx.analysis.finetune, finetune_single_gpu(ctx)),
        ("serve", ctx.analysis.serve, serve_single_gpu(ctx)),
    ):
        if estimate is None or estimate.fits or not single:
            continue
        if kind == "serve" and serve_weights_fit(ctx):
            continue  # the weights fit and the KV cache does not: GP203's case
        option = more_of_the_same_gpu(ctx, kind)
        if option is None:
            continue
        if isinstance(estimate, ServeEstimate):
            capacity, peak = f"engine budget {format_gib(estimate.memory.budget)}", ""
        else:  # a fine-tune says which phase peaks: an evaluation's own batch can be the reason
            capacity, peak = f"{format_gib(estimate.gpu.usable_bytes)} usable", f" {estimate.memory.peak_words}"
        layout = option.layout
        # name the parallelism the layout found uses (a serving layout may pipeline without tensor parallelism)
        kinds = [
            name
            for name, degree in (("tensor", layout.tensor_parallel), ("pipeline", layout.pipeline_parallel))
            if degree > 1
        ]
        what = f"{' and '.join(kinds)} parallelism {'are' if len(kinds) > 1 else 'is'}" if kinds else "parallelism is"
        currency = ctx.spec.budget.currency
        elsewhere = ""  # the message states what the declared GPU needs; `gpuplan plan` compares the others
        if ctx.catalog_hints:
            planner = ctx.plans.job(kind)
            cheapest = planner.cheapest() if planner is not None else None
            elsewhere = ""
            if cheapest is not None and cheapest.layout.key != option.layout.key:
                elsewhere = f"; cheapest of any GPU: {summary(cheapest, currency)}"
        yield ctx.finding(
            "GP301",
            (kind, "hardware"),
            f"{'serving' if kind == 'serve' else 'fine-tuning'} needs {format_gib(estimate.memory.per_gpu)}{peak} on "
            f"one {estimate.gpu.id} ({capacity}); {what} needed: {option.layout.describe()} fits "
            f"({cost_text(option, currency)}){elsewhere}",
            f"paste {paste_line(option.fragment)}",
        )


@rule("GP302")
def parallelism_not_needed(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Serving: re-estimates a deployment with tensor or pipeline parallelism at one GPU per replica and
    reports when that still fits with the configured headroom, quoting the speed model's figures for the
    same GPUs run as replicas at TP 1 against the declared split (TPOT and tokens/s, with the all-reduces
    over NVLink or PCIe as the GPU has them), unless those replicas break a constraint the split meets (a
    TTFT SLO that only a split prefill of long prompts meets). Fine-tuning: re-estimates a sharded job
    (FSDP or ZeRO) without the sharding, at the declared tensor and pipeline parallelism and settings, and
    reports when plain data parallelism fits and runs no slower, within 0.5% (a sharded optimizer step can make
    the sharded run the faster, and then the sharding earns its place; a gain under 0.5% is below what a run's
    hours are printed to and far inside the speed band, so it ties); the planner judges it alike and drops
    such a sharding from what it recommends. A split of the model itself is GP306's, and where GP306 fires this
    says nothing of the sharding (the layout GP306 names keeps the sharding it needs).

    ## Why is this bad?
    Every TP rank adds two all-reduces per layer to every token; replicas (`count` with
    `tensor_parallel: 1`) give the same throughput without the latency. ZeRO-3 moves 1.5x the
    gradient traffic of plain data parallelism. On one GPU DeepSpeed's ZeRO shards nothing, yet its
    optimizer runs all the same: its gradient bucket and the step's flat copies take memory plain
    training does not (the hint says how much).

    ## Example
    ```yaml
    model: {id: llama-3.1-8b}
    serve: {context: 8192, concurrency: 8, hardware: {gpu: h100-sxm, count: 2, tensor_parallel: 2}}
    ```

    ## Use instead
    ```yaml
    serve: {context: 8192, concurrency: 8, hardware: {gpu: h100-sxm, count: 2, tensor_parallel: 1}}
    ```
    """
    s = ctx.analysis.serve
    if s is not None and s.job.hardware.tensor_parallel * s.job.hardware.pipeline_parallel > 1:
        yield from _serve_parallelism_not_needed(ctx)
    f = ctx.analysis.finetune
    if f is not None and f.fits:
        yield from _sharding_not_needed(ctx, f)


def _sharding_not_needed(ctx: RuleContext, f: FinetuneEstimate) -> Iterator[Finding]:
    """The declared sharding against plain data parallelism on the same GPUs, split as declared, as the planner
    judges it (``FinetunePlanner.unsharded``: a sharding an offload rests on is kept, and one that makes the run
    faster is no waste)."""
    tune = f.job
    hardware = tune.hardware
    if tune.sharding == "none":
        return
    planner = ctx.plans.finetune
    assert planner is not None and isinstance(planner.evaluator, FinetunePlanner)
    split = hardware.tensor_parallel * hardware.pipeline_parallel
    if split > 1 and 0 < planner.least_split(f.gpu) < split:
        return  # the split goes first (GP306), and the layout GP306 names keeps the sharding it needs
    plain = planner.evaluator.unsharded(planner.declared())
    if plain is None:
        return
    needs = plain.estimate.memory.per_gpu
    hint = "drop it; it only adds communication"
    if hardware.replicas == 1:  # nothing to shard over, yet DeepSpeed's ZeRO runs
        hint = f"drop it: {'one GPU' if hardware.count == 1 else 'one data-parallel rank'} shards nothing"
        if f.memory.per_gpu > needs:
            hint += (
                f", and DeepSpeed's ZeRO optimizer adds {format_gib_difference(f.memory.per_gpu, needs)} per GPU"
                " (its gradient buckets, the step's flat copies and the blocks the allocator caches of them)"
            )
    plain_words = "plain data parallelism" if hardware.replicas > 1 else "plain training"
    yield ctx.finding(
        "GP302",
        ("finetune", "sharding"),
        f"sharding {tune.sharding} is not needed: {plain_words} on {hardware.count:,} x {f.gpu.id} needs "
        f"{format_gib(needs)} of {format_gib(f.gpu.usable_bytes)} per GPU",
        hint,
    )


@rule("GP306")
def model_parallelism_not_needed(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    For a fine-tune that fits with tensor or pipeline parallelism, asks the planner for the fewest GPUs of
    the declared kind that hold the job soundly (memory at the plan's confidence with the headroom, gradient
    sync), with the settings it may change (sharding over data-parallel ranks, micro-batch, recompute, fused
    loss), and reports when that layout splits the model over fewer GPUs per replica. It is the planner's own
    judgement (`model_parallelism` in `gpuplan plan`), so the report asks for the same change.

    ## Why is this bad?
    Parallelism is needed the moment one GPU cannot hold the job, not a moment before. Tensor parallelism
    all-reduces activations twice per layer and a pipeline idles in its bubble, where sharding the model
    states over data-parallel ranks (FSDP, ZeRO) holds the same model while every rank runs whole layers.

    ## Example
    ```yaml
    model: {id: llama-2-7b}
    finetune:
      method: full
      sharding: fsdp
      seq_len: 1024
      micro_batch: 4
      hardware: {gpu: h100-nvl, count: 4, pipeline_parallel: 4}
    ```

    ## Use instead
    ```yaml
    finetune:
      method: full
      sharding: fsdp
      seq_len: 1024
      activation_checkpointing: full
      micro_batch: 1
      gradient_accumulation: 2
      hardware: {gpu: h100-nvl, count: 2}
    ```
    """
    f = ctx.analysis.finetune
    if f is None or not f.fits:  # a layout that does not fit is GP201's, with the planner's layout in its hint
        return
    hardware = f.job.hardware
    level = hardware.tensor_parallel * hardware.pipeline_parallel
    if level == 1:
        return
    planner = ctx.plans.finetune
    assert planner is not None
    least = planner.least_split(f.gpu)
    fewest = planner.fewest_gpus_on(f.gpu)
    if not least or least >= level or fewest is None:
        return
    split = [
        f"{name} {degree}"
        for name, degree in (
            ("tensor_parallel", hardware.tensor_parallel),
            ("pipeline_parallel", hardware.pipeline_parallel),
        )
        if degree > 1
    ]
    yield ctx.finding(
        "GP306",
        ("finetune", "hardware", "tensor_parallel" if hardware.tensor_parallel > 1 else "pipeline_parallel"),
        f"{' x '.join(split)} is not needed: {summary(fewest, ctx.spec.budget.currency)} holds the job at "
        f"{format_gib(fewest.estimate.memory.per_gpu)} of {format_gib(f.gpu.usable_bytes)} per GPU",
        f"paste {paste_line(fewest.fragment)}",
    )


def _serve_parallelism_not_needed(ctx: RuleContext) -> Iterator[Finding]:
    """One GPU holds a replica: the same GPUs as replicas at TP 1, from the speed model (any link)."""
    planner = ctx.plans.serve
    assert planner is not None and isinstance(planner.evaluator, ServePlanner)
    evaluator = planner.evaluator
    declared = planner.declared()
    gpu, hardware = declared.layout.gpu, ctx.spec.serve.hardware if ctx.spec.serve else None
    assert hardware is not None
    spread = evaluator.unsplit(declared)  # the same GPUs as replicas, as the planner judges the split
    if spread is None:
        return
    memory = evaluator.memory(evaluator.layout(gpu, 1, 1, declared.layout.replicas))  # one GPU a declared replica
    tp, pp = hardware.tensor_parallel, hardware.pipeline_parallel
    split = f"tensor_parallel {tp}" + (f" x pipeline_parallel {pp}" if pp > 1 else "")
    link = "NVLink" if gpu.has_nvlink and tp <= gpu.domain else "PCIe"
    # What a token waits for: TP's all-reduces in every layer, or PP's hand-offs between stages.
    wait = f"every token waits for {link} all-reduces" if tp > 1 else f"every token passes {pp} pipeline stages in turn"
    ones = ", ".join(
        f"{name}: 1" for name, degree in (("tensor_parallel", tp), ("pipeline_parallel", pp)) if degree > 1
    )
    yield ctx.finding(
        "GP302",
        ("serve", "hardware", "tensor_parallel" if tp > 1 else "pipeline_parallel"),
        f"one {gpu.id} holds a replica of this deployment ({format_gib(memory.per_gpu)} of "
        f"{format_gib(memory.budget)}); the same {declared.gpus} GPUs as {declared.gpus} single-GPU replicas "
        f"would serve {spread.estimate.speed.tokens_per_s:,.0f} tokens/s at TPOT "
        f"{spread.estimate.speed.tpot_s * 1000:,.1f} ms, against {declared.estimate.speed.tokens_per_s:,.0f} "
        f"tokens/s at {declared.estimate.speed.tpot_s * 1000:,.1f} ms with {split} ({wait})",
        f"use {ones} and count for replicas: paste {paste_line(spread.fragment)}",
    )


@rule("GP303")
def tp_does_not_divide_heads(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Checks that `tensor_parallel` divides the model's attention heads, that it divides the KV heads
    or is a multiple of them (vLLM and Megatron split heads across ranks and replicate KV heads
    beyond their number), and for serving that it divides the vocabulary padded to a multiple of 64
    (vLLM and SGLang split the padded embedding and LM head rows evenly).

    ## Why is this bad?
    The frameworks refuse to start such a layout (`AssertionError: 100352 is not divisible by 6`).

    ## Example
    ```yaml
    model: {id: llama-3.1-70b}   # 64 heads, 8 KV heads
    serve: {hardware: {gpu: h100-sxm, count: 6, tensor_parallel: 6}}
    ```

    ## Use instead
    ```yaml
    serve: {hardware: {gpu: h100-sxm, count: 8, tensor_parallel: 8}}
    ```
    """
    arch = ctx.spec.model.architecture
    for job_name in ("finetune", "serve"):
        job = getattr(ctx.spec, job_name)
        if job is None:
            continue
        serving = job_name == "serve"
        problem = tensor_parallel_problem(arch, job.hardware.tensor_parallel, serving=serving)
        if problem:
            gpu = job.hardware.gpu
            # the degrees the planner proposes there: TP 1 alone on a card without NVLink (GP312)
            degrees = (
                proposed_serving_tensor_parallel(arch, gpu)
                if serving
                else tensor_parallel_degrees(arch, gpu, serving=False)
            )
            hint = (
                f"use tensor_parallel 1 on {gpu.id}, with pipeline_parallel where one card cannot hold a replica"
                if degrees == [1] and serving
                else f"use one of {', '.join(str(d) for d in degrees)} on {gpu.id}"
            )
            yield ctx.finding("GP303", (job_name, "hardware", "tensor_parallel"), problem, hint)


@rule("GP304")
def tp_exceeds_nvlink_domain(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Compares `tensor_parallel` with the number of GPUs that share the GPU's scale-up link (8 on HGX
    SXM boards, 4 on H200 NVL bridges, 2 on bridged PCIe pairs), or for cards without NVLink with
    one PCIe server of 8 cards.

    ## Why is this bad?
    Tensor parallelism all-reduces activations twice per layer per token; across PCIe or the
    network that traffic dominates every step.

    ## Example
    ```yaml
    serve: {hardware: {gpu: h200-nvl, count: 8, tensor_parallel: 8}}
    ```

    ## Use instead
    ```yaml
    serve: {hardware: {gpu: h200-nvl, count: 8, tensor_parallel: 4}}   # two replicas
    ```
    """
    for job_name in ("finetune", "serve"):
        job = getattr(ctx.spec, job_name)
        if job is None:
            continue
        gpu, tp = job.hardware.gpu, job.hardware.tensor_parallel
        problem = domain_problem(gpu, tp)
        if problem:
            yield ctx.finding(
                "GP304",
                (job_name, "hardware", "tensor_parallel"),
                problem,
                f"keep tensor_parallel at most {max_tensor_parallel(gpu)}; use pipeline_parallel or replicas beyond it",
            )


@rule("GP305")
def larger_gpu_instead_of_tp(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    For a TP > 1 serving layout that one GPU of the declared kind cannot hold, asks the planner for
    the cheapest sound layout on a GPU with at least 10% more memory at TP 1 (one GPU per replica),
    and reports it only when it costs less than the declared layout, with both monthly costs.

    ## Why is this bad?
    One GPU has no all-reduce on the critical path and fewer parts to fail: 70B on one H200 instead
    of two H100s.

    ## Example
    ```yaml
    serve: {hardware: {gpu: h100-sxm, count: 2, tensor_parallel: 2}}
    ```

    ## Use instead
    ```yaml
    serve: {hardware: {gpu: h200-sxm, count: 1}}
    ```
    """
    s = ctx.analysis.serve
    if s is None or s.job.hardware.tensor_parallel < 2:
        return
    planner = ctx.plans.serve
    assert planner is not None and isinstance(planner.evaluator, ServePlanner)
    declared = planner.declared()
    evaluator = planner.evaluator
    if declared.rate is None or evaluator.memory_sound(evaluator.layout(s.gpu, 1, 1, evaluator.declared_replicas)):
        return  # unpriced (nothing to compare), or one GPU of the declared kind holds it: GP302's case
    bigger = s.gpu.usable_bytes

    def one_bigger_gpu(gpu: Any, tp: int, pp: int) -> bool:
        # Same-class cards differ by a few GiB of driver reserve (A100 80GB vs H100 80GB); only a memory
        # class at least 10% larger counts as "one bigger GPU".
        return tp == 1 and pp == 1 and gpu.usable_bytes > 1.1 * bigger

    option = planner.cheapest(ceiling=declared.rate, where=one_bigger_gpu, tag=f"GP305:{bigger}")
    if option is None:
        return
    currency = ctx.spec.budget.currency
    memory = option.estimate.memory
    yield ctx.finding(
        "GP305",
        ("serve", "hardware", "gpu"),
        f"one {option.layout.gpu.id} per replica holds this deployment at tensor_parallel 1 "
        f"({format_gib(memory.per_gpu)} of {format_gib(memory.budget)}): {option.layout.describe()} for "
        f"{cost_text(option, currency)} against {cost_text(declared, currency)} for {declared.layout.describe()}",
        f"paste {paste_line(option.fragment)}",
    )
