"""GP2xx: does the job fit the declared GPUs, and with what headroom."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace

from gpuplan.analysis import FinetuneEstimate, ServeEstimate, estimate_finetune
from gpuplan.context_limits import Overrun, overruns
from gpuplan.estimate.training_activations import returned_cache_bytes
from gpuplan.estimate.training_memory import OUTPUTS_HELD
from gpuplan.estimate.vllm_releases import outside_modelled
from gpuplan.findings import Finding
from gpuplan.plan.describe import summary
from gpuplan.plan.evaluate import Option, within_headroom
from gpuplan.records import evolve
from gpuplan.rules.context import RuleContext
from gpuplan.rules.registry import rule
from gpuplan.units import format_gib, format_gib_apart, format_gib_difference, format_share_under, plural
from gpuplan.visible import visible

# Where a lint hint without the catalog-wide search sends the reader for the other GPUs.
PLAN_POINTER = "gpuplan plan compares every allowed GPU"


def layout_hint(ctx: RuleContext, kind: str) -> str:
    """The planner's answer for a job that does not fit: the fewest GPUs of the declared kind that hold
    it soundly, then (with `catalog-hints` on) the cheapest sound layout of any allowed GPU when it
    differs, or else a pointer to ``gpuplan plan``, which searches every GPU. A job whose context is more
    than its model takes has no layout: the hint says so (GP206) rather than sizing GPUs for it."""
    beyond = [overrun for overrun in overruns(ctx.spec) if overrun.kind == kind and overrun.fatal]
    if beyond:
        maxima = "; ".join(f"{o.whose} takes at most {o.limit:,} tokens, not {o.tokens:,}" for o in beyond)
        return f"no layout runs it: {maxima} (GP206)"
    planner = ctx.plans.job(kind)
    assert planner is not None
    currency = ctx.spec.budget.currency
    declared_gpu = planner.declared().layout.gpu
    on_declared = planner.fewest_gpus_on(declared_gpu)
    limits = planner.limits
    within = f"within {plural(limits.max_gpus, 'GPU')} and {plural(limits.max_nodes, 'node')}"
    parts = []
    if on_declared is not None:
        parts.append(f"on {declared_gpu.id}: {summary(on_declared, currency)}")
    if not ctx.catalog_hints:
        if on_declared is None:
            parts.append(f"no layout of {declared_gpu.id} {within} holds it soundly")
        return "; ".join([*parts, PLAN_POINTER])
    cheapest = planner.cheapest()
    if cheapest is not None and (on_declared is None or cheapest.layout.key != on_declared.layout.key):
        parts.append(f"cheapest: {summary(cheapest, currency)}")
    if not parts:
        return f"no layout {within} holds it soundly"
    return "; ".join(parts)


def more_of_the_same_gpu(ctx: RuleContext, kind: str) -> Option | None:
    """The fewest GPUs of the declared kind that hold the job soundly, when that is more than one GPU
    (GP301's case, not GP201's: a settings change on one GPU is no parallelism)."""
    planner = ctx.plans.job(kind)
    if planner is None:
        return None
    option = planner.fewest_gpus_on(planner.declared().layout.gpu)
    return option if option is not None and option.gpus > 1 else None


def finetune_single_gpu(ctx: RuleContext) -> bool:
    f = ctx.analysis.finetune
    return f is not None and f.job.hardware.count == 1


def serve_single_gpu(ctx: RuleContext) -> bool:
    s = ctx.analysis.serve
    return s is not None and s.job.hardware.tensor_parallel * s.job.hardware.pipeline_parallel == 1


def serve_weights_fit(ctx: RuleContext) -> bool:
    estimate = ctx.analysis.serve
    assert estimate is not None
    return estimate.memory.kv_available > 0


@rule("GP201")
def does_not_fit(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Compares the estimated per-GPU peak (the maximum over forward, backward and optimizer step for
    fine-tuning, and a prepared QLoRA model's loading; weights, runtime reserve and KV cache within the engine's
    memory budget for serving) with the GPU's usable memory, and reports the shortfall with the planner's answer: the
    fewest GPUs of the declared kind that hold the job with the configured headroom (and the SLO), then, with
    `catalog-hints` on, the cheapest sound layout of any allowed GPU (off, the hint points to `gpuplan plan`, which
    searches every GPU). A single-GPU job that more GPUs of the same kind would hold is GP301 instead; a serving job
    whose weights fit but whose KV cache does not is GP203.

    ## Why is this bad?
    The job will fail with an out-of-memory error after the GPUs are paid for.

    ## Example
    ```yaml
    finetune:
      method: full
      hardware: {gpu: h100-sxm, count: 2, tensor_parallel: 2}
    ```

    ## Use instead
    A layout the hint names, for example more GPUs with `sharding: zero3`, activation checkpointing,
    or a GPU with more memory; `gpuplan plan` lists every option with its cost.
    """
    f = ctx.analysis.finetune
    if f is not None and not f.fits and not (finetune_single_gpu(ctx) and more_of_the_same_gpu(ctx, "finetune")):
        yield ctx.finding(
            "GP201",
            ("finetune", "hardware", "gpu"),
            f"fine-tuning needs {format_gib(f.memory.per_gpu)} per GPU {f.memory.peak_words}; "
            f"{f.gpu.id} has {format_gib(f.gpu.usable_bytes)} usable — short by "
            f"{format_gib_difference(f.memory.per_gpu, f.gpu.usable_bytes)}",
            layout_hint(ctx, "finetune"),
        )
    s = ctx.analysis.serve
    if (
        s is not None
        and not s.fits
        and not serve_weights_fit(ctx)
        and not (serve_single_gpu(ctx) and more_of_the_same_gpu(ctx, "serve"))
    ):
        memory = s.memory
        non_kv = memory.per_gpu - memory.kv_cache
        needs = (
            f"serving needs {format_gib(non_kv)} per GPU before any KV cache (weights {format_gib(memory.weights)}); "
        )
        if memory.per_gpu > memory.budget:
            gives = f"{s.gpu.id} gives the engine {format_gib(memory.budget)} — short by "
            gives += f"{format_gib(memory.per_gpu - memory.budget)} with the KV cache"
        else:  # room is left, but the engine's share of it for the KV pool is nothing (TensorRT-LLM's fraction)
            gives = f"{s.gpu.id} gives the engine {format_gib(memory.budget)}, and its KV pool takes"
            gives += f" {format_gib(max(0, memory.kv_available))} of the {format_gib(memory.room)} left"
        yield ctx.finding("GP201", ("serve", "hardware", "gpu"), needs + gives, layout_hint(ctx, "serve"))


@rule("GP202")
def low_headroom(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports a fitting job whose free memory per GPU is below `thresholds.headroom_pct` (default 10%)
    of the GPU's usable memory (of the engine budget for serving). Fine-tuning is judged at its
    pessimistic edge at `plan.confidence` (GP208 covers an edge beyond the usable memory itself).

    ## Why is this bad?
    Allocator fragmentation, a longer sample, a framework upgrade or a driver reservation can take
    the last few GiB; a plan with no margin fails on the first surprise.

    ## Example
    A full fine-tune estimated at 76 GiB on an 80 GB H100 (79.2 GiB usable).

    ## Use instead
    Shorter sequences, activation checkpointing, a fused loss, or a larger GPU.
    """
    margin = ctx.settings.headroom_pct / 100
    f = ctx.analysis.finetune
    confidence = ctx.spec.plan.confidence
    if f is not None and f.planned_bytes(confidence) <= f.gpu.usable_bytes:
        free = f.gpu.usable_bytes - f.planned_bytes(confidence)
        if free < margin * f.gpu.usable_bytes:
            yield ctx.finding(
                "GP202",
                ("finetune", "hardware", "gpu"),
                # the difference of the two figures as the report shows them (its headroom row), not of the bytes
                f"fine-tuning leaves {format_gib_difference(f.gpu.usable_bytes, f.planned_bytes(confidence))} of "
                f"{format_gib(f.gpu.usable_bytes)} free on {f.gpu.id} "
                f"({format_share_under(free / f.gpu.usable_bytes, margin)}, margin {ctx.settings.headroom_pct:g}%) "
                f"at {confidence:.0%} confidence ({edge_words(f, confidence)})",
                "activation checkpointing, a fused loss or shorter sequences buy headroom",
            )
    s = ctx.analysis.serve
    if s is not None and s.fits_at(confidence):
        free = s.memory.budget - s.planned_bytes(confidence)
        if free < margin * s.memory.budget:
            yield ctx.finding(
                "GP202",
                s.kv_field,
                f"serving leaves {format_gib_difference(s.memory.budget, s.planned_bytes(confidence))} of the "
                f"{format_gib(s.memory.budget)} engine budget free "
                f"on {s.gpu.id} "
                f"({format_share_under(free / s.memory.budget, margin)}, margin {ctx.settings.headroom_pct:g}%) "
                f"at {confidence:.0%} confidence ({kv_edge_words(s, confidence)})",
                ("an fp8 KV cache halves the cache; or " if s.job.kv_cache_dtype != "fp8" else "")
                + ("a shorter context" if s.setup.burst else "lower concurrency or context"),
            )


def kv_edge_words(s: ServeEstimate, confidence: float) -> str:
    """Where the KV cache's low edge comes from, in words: the engine's pool, the measured ratio, the logs."""
    band = s.kv_band
    return (
        f"the engine's KV cache {format_gib(s.memory.kv_available)} estimated x {band.ratio(1 - confidence):.2f},"
        f" the ratio measured / estimate that {confidence:.0%} of {band.describe()} stayed at or above"
    )


def edge_words(f: FinetuneEstimate, confidence: float) -> str:
    """Where the pessimistic edge comes from, in words: the estimate, the measured ratio, the records."""
    band = f.memory_band
    return (
        f"{format_gib(f.memory.per_gpu)} estimated x {band.ratio(confidence):.2f}, the ratio measured / estimate "
        f"that {confidence:.0%} of {band.describe()} stayed within"
    )


@rule("GP208")
def memory_at_risk(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports a fine-tuning job whose estimate fits the GPU but whose pessimistic edge at
    `plan.confidence` (default 0.9) does not: the estimate times the ratio measured / estimate that
    that share of published fine-tuning runs of the same kind (full, LoRA, QLoRA) stayed at or below.
    The runs are ones gpuplan was never tuned on (`benchmarks/bands.py` generates the bands).

    ## Why is this bad?
    An estimate is off by what it has been off by before, and fine-tuning estimates have erred low:
    allocator caching, framework buffers and loading transients take memory no tensor count shows.
    A job that fits only if gpuplan is right about it runs out of memory partway through training.

    ## Example
    A QLoRA job of a 70B model estimated at 45.2 GiB on a 48 GB GPU (47.5 GiB usable), where
    measured QLoRA peaks reached 1.22 x the estimate at 0.9 confidence (55.2 GiB).

    ## Use instead
    The layout the hint names (more GPUs or one with more memory), or memory-saving settings
    (activation checkpointing, a fused loss, a shorter `seq_len`); or, knowingly, a lower
    `plan.confidence`.
    """
    f = ctx.analysis.finetune
    confidence = ctx.spec.plan.confidence
    if f is None or not f.fits or f.planned_bytes(confidence) <= f.gpu.usable_bytes:
        return
    yield ctx.finding(
        "GP208",
        ("finetune", "hardware", "gpu"),
        f"fine-tuning fits {f.gpu.id} on the estimate ({format_gib(f.memory.per_gpu)} of "
        f"{format_gib(f.gpu.usable_bytes)} usable) but not at {confidence:.0%} confidence: up to "
        f"{format_gib(f.planned_bytes(confidence))} per GPU ({edge_words(f, confidence)})",
        layout_hint(ctx, "finetune"),
    )


@rule("GP203")
def kv_capacity_exceeded(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports a serving job whose weights fit but whose KV cache for `concurrency` sequences of
    `context` tokens does not, with the largest concurrency at that context and the longest context at
    that concurrency that would fit. Where the KV cache fits the engine's budget but what the engine holds
    beside the budget (CUDA graphs captured outside it, SGLang's prefill activations and request table,
    vLLM's model runner V2 sampler state before 0.27) does not fit the GPU with it, it says that instead.
    A burst (`arrival: burst`) asks the KV cache for one sequence: its other requests wait in the engine's
    queue (the speed model prices the wait), so only a pool that cannot hold one sequence is reported.

    ## Why is this bad?
    The engine will refuse to start ("no available memory for the cache blocks") or silently queue
    requests: the planned concurrency never happens.

    ## Example
    ```yaml
    serve: {context: 131072, concurrency: 64, hardware: {gpu: h100-sxm}}
    ```

    ## Use instead
    ```yaml
    serve: {context: 131072, concurrency: 64, kv_cache_dtype: fp8,
            hardware: {gpu: h200-sxm, count: 4, tensor_parallel: 4}}
    ```
    """
    s = ctx.analysis.serve
    if s is None or s.fits or not serve_weights_fit(ctx):
        return
    job, memory = s.job, s.memory
    if memory.kv_cache <= memory.kv_available:  # the pool holds them; what the engine holds beside it does not fit
        beside = ((memory.graphs_outside, "CUDA graphs"), (memory.outside_budget, memory.outside_what))
        held = " and ".join(f"{format_gib(size)} of {what}" for size, what in beside if size)
        total, capacity = format_gib_apart(memory.budget + memory.beside_budget, memory.capacity)
        yield ctx.finding(
            "GP203",
            s.kv_field,
            f"the KV cache fits the engine's budget of {format_gib(memory.budget)}, but with the {held} the engine"
            f" holds beside it that is {total} per GPU, more than the {capacity} of {s.gpu.id}: it runs out of"
            " memory as it starts",
            "lower serve.memory_utilization (or serve.max_sequences) until the budget and what sits beside it fit",
        )
        return
    if memory.kv_cap and memory.kv_available == memory.kv_cap:  # the cap, not what is left, sets the pool
        yield ctx.finding(
            "GP203",
            ("serve", "max_gpu_total_bytes"),
            f"{s.kv_need_words}; serve.max_gpu_total_bytes caps the KV cache at {format_gib(memory.kv_cap)} on"
            f" {s.gpu.id} — at most {plural(s.max_concurrency, 'sequence')} at {job.context:,} tokens, or"
            f" {s.max_context:,} tokens at {s.required_sequences:,}",
            f"raise serve.max_gpu_total_bytes to at least {math.ceil(memory.kv_cache)} ({format_gib(memory.kv_cache)}),"
            " or remove it: the engine then takes its fraction of the free memory",
        )
        return
    yield ctx.finding(
        "GP203",
        s.kv_field,
        f"{s.kv_need_words}; {format_gib(max(0, s.memory.kv_available))} is left after weights and runtime"
        f"{' and the CUDA graphs' if s.memory.graphs_inside else ''} on {s.gpu.id} — at most "
        f"{plural(s.max_concurrency, 'sequence')} at {job.context:,} tokens, or {s.max_context:,} tokens at "
        f"{s.required_sequences:,}",
        layout_hint(ctx, "serve"),
    )


@rule("GP209")
def kv_capacity_at_risk(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports a serving job whose declared sequences (a burst's one, as GP203 counts it) fit the KV cache the
    engine allocates on the estimate, but not the KV cache at the band's low edge at `plan.confidence`
    (default 0.9): the estimate times the
    ratio measured / estimate that that share of published engine startup logs stayed at or above. The
    logs are ones gpuplan was never tuned on (`benchmarks/serving_memory.py`; `benchmarks/bands.py`
    generates the band).

    ## Why is this bad?
    The KV cache an engine allocates is what its budget leaves after the weights, the activation peak of
    its profile run and its runtime, and engines have left less than gpuplan estimated (by up to 18% in
    the published logs). A deployment planned to the last gigabyte of KV cache serves fewer sequences than
    it was bought for (requests queue, or are preempted and recomputed), or its engine refuses to start at
    the full context.

    ## Example
    ```yaml
    model: {id: llama-3.1-8b}
    serve: {context: 16384, concurrency: 33, hardware: {gpu: h100-nvl}}   # 66 GiB of KV in a 66.8 GiB pool
    ```

    ## Use instead
    ```yaml
    serve: {context: 16384, concurrency: 26, hardware: {gpu: h100-nvl}}   # or kv_cache_dtype: fp8
    ```
    Or more replicas or GPUs, or a GPU with more memory; or, knowingly, a lower `plan.confidence`.
    """
    s = ctx.analysis.serve
    confidence = ctx.spec.plan.confidence
    if s is None or not s.fits or s.fits_at(confidence):
        return
    yield ctx.finding(
        "GP209",
        s.kv_field,
        f"{s.kv_need_words}; at {confidence:.0%} confidence the engine allocates as little as"
        f" {format_gib(s.planned_kv_pool(confidence))} ({kv_edge_words(s, confidence)})",
        layout_hint(ctx, "serve"),
    )


@rule("GP210")
def engine_version_not_modelled(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports a `serve.engine_version` older than the oldest or newer than the newest vLLM release gpuplan
    models (0.6.0 to 0.34.0), and says which release it is estimated as instead.

    ## Why is this bad?
    How vLLM sizes its memory changes between releases: what counts against `gpu_memory_utilization`,
    the batch it profiles, the sampler warm-up, where the CUDA graphs go, the default utilization. A
    release gpuplan has not read may size the KV cache differently from the nearest one it has.

    ## Example
    ```yaml
    serve: {engine_version: "0.5.4", context: 8192, concurrency: 32, hardware: {gpu: h100-sxm}}
    ```

    ## Use instead
    A modelled release, or a startup log of the release you run (`gpuplan verify` compares one with the
    estimate).
    """
    s = ctx.analysis.serve
    if s is None or s.job.engine_version is None:
        return
    reason = outside_modelled(s.job.engine_version)
    if reason is None:
        return
    yield ctx.finding(
        "GP210",
        ("serve", "engine_version"),
        f"vLLM {visible(s.job.engine_version)} is {reason}: its memory is estimated as {s.setup.release.label}",
        "name a release from 0.6.0 to 0.34.0, or check the estimate against the engine's startup log (gpuplan verify)",
    )


@rule("GP211")
def training_returns_kv_cache(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports a fine-tuning job whose model returns its KV cache (`finetune.use_cache: true`) where those key
    and value states outlive their layer (under activation checkpointing, or a GQA layer whose attention
    saves repeated copies instead), with the bytes they take per GPU.

    ## Why is this bad?
    Training never reads them. A Hugging Face model returns every layer's keys and values when its
    config.json's `use_cache` is true, as most released ones are; Hugging Face's own gradient checkpointing
    turns that off, FSDP's and DeepSpeed's checkpointing do not. They stay until the loop drops the output,
    beside the next forward in a loop that keeps `outputs`: 4 GiB for Llama-2-7B at 4 x 2,048 tokens
    (llama-recipes PR #165), enough to run a card out of memory.

    ## Example
    ```yaml
    finetune: {method: lora, activation_checkpointing: full, sharding: fsdp, use_cache: true}
    ```

    ## Use instead
    Load the model with `use_cache=False` (`from_pretrained(..., use_cache=False)`, or
    `model.config.use_cache = False` before training):
    ```yaml
    finetune: {method: lora, activation_checkpointing: full, sharding: fsdp, use_cache: false}
    ```
    """
    f = ctx.analysis.finetune
    if f is None:
        return
    cache = returned_cache_bytes(f.setup)
    if not cache:
        return
    yield ctx.finding(
        "GP211",
        ("finetune", "use_cache"),
        f"the model returns every layer's key and value states, {format_gib(cache)} per GPU and micro-batch that"
        f" training never reads, held {OUTPUTS_HELD[f.job.loop]}; the peak is {format_gib(f.memory.per_gpu)} per GPU",
        "load the model with use_cache=False (from_pretrained(..., use_cache=False)) and set use_cache: false",
    )


@rule("GP204")
def full_finetune_fits_as_adapter(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    For `method: full` declared on more than one GPU (or not fitting), estimates LoRA and QLoRA with
    the same shape on one GPU of the same kind and reports the first that fits.

    ## Why is this bad?
    Full fine-tuning needs about 4x the weights or more; adapters train a fraction of a percent of
    the parameters, often to comparable quality, on a fraction of the hardware.

    ## Example
    ```yaml
    finetune: {method: full, hardware: {gpu: h100-sxm, count: 8}, sharding: zero3}
    ```

    ## Use instead
    ```yaml
    finetune: {method: lora, lora: {rank: 16}, hardware: {gpu: h100-sxm, count: 1}}
    ```
    """
    f = ctx.analysis.finetune
    if f is None or f.job.method != "full" or (f.job.hardware.count == 1 and f.fits):
        return
    job = f.job
    single = replace(job.hardware, count=1, tensor_parallel=1, pipeline_parallel=1)
    for method in ("lora", "qlora"):
        candidate = estimate_finetune(
            ctx.spec, replace(job, method=method, hardware=single, sharding="none"), ctx.efficiency
        )
        planned = candidate.planned_bytes(ctx.spec.plan.confidence)
        if within_headroom(planned, candidate.gpu.usable_bytes, ctx.settings.headroom_pct):
            yield ctx.finding(
                "GP204",
                ("finetune", "method"),
                f"full fine-tuning needs {format_gib(f.memory.per_gpu)} per GPU "
                f"on {job.hardware.count:,} x {f.gpu.id}; {method} (rank {job.lora_rank}) "
                f"needs {format_gib(candidate.memory.per_gpu)} on 1 x {f.gpu.id}",
                f"consider method: {method} if adapter quality suffices",
            )
            return


@rule("GP205")
def activations_dominate(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports when activations plus temporaries (and an evaluation's kept predictions) exceed
    `thresholds.activations_share` (default 50%) of the per-GPU peak (the figure `gpuplan estimate` and
    GP201 state, framework overhead included), naming the switches not yet used. Where the peak is an
    evaluation (`finetune.evaluation`), it points there: no recompute or fused loss applies to it (Liger's
    makes the logits in eval mode), its own batch does, and, where the Trainer keeps every batch's
    predictions for compute_metrics (`evaluation.predictions`), moving them to the host sooner
    (`accumulation_steps`) or keeping token ids instead of logits.

    ## Why is this bad?
    LoRA and sharding do not shrink activations; at long sequences they, and the fp32 logits the
    loss keeps, decide which GPU is needed. An evaluation batch (the Hugging Face Trainer's
    per_device_eval_batch_size, 8 by default) makes the logits of 8 sequences at once, and with
    compute_metrics the Trainer keeps every batch's logits, all GPUs', on each GPU until
    eval_accumulation_steps moves them to the host or the evaluation ends.

    ## Example
    ```yaml
    finetune: {method: lora, seq_len: 16384, activation_checkpointing: false}
    ```

    ## Use instead
    ```yaml
    finetune: {method: lora, seq_len: 16384, activation_checkpointing: true, fused_loss: true}
    ```
    """
    f = ctx.analysis.finetune
    if f is None:
        return
    job = f.job
    phase = f.memory.phases[f.memory.peak_phase]
    # Against the per-GPU peak every output states (framework overhead included), so the share is of a
    # figure the reader sees in the estimate, in GP201/GP204 and in the report.
    share = (phase.get("activations", 0) + phase.get("temporaries", 0) + phase.get("predictions", 0)) / f.memory.per_gpu
    if share <= ctx.settings.activations_share:
        return
    if f.memory.peak_phase == "evaluation":  # no recompute there: its own batch, the loss's logits, what it keeps
        remedies = []
        what = f"the evaluation's activations and loss temporaries are {share:.0%}"
        if phase.get("predictions", 0) > phase.get("activations", 0):
            what = f"the predictions the evaluation keeps for compute_metrics are {share:.0%}"
            if job.eval_accumulation_steps != 1:
                remedies.append("evaluation.accumulation_steps: 1")
            if job.eval_predictions == "logits":
                remedies.append(
                    "evaluation.predictions: argmax (a preprocess_logits_for_metrics that returns logits.argmax(-1))"
                )
        # no fused loss runs in evaluation (training_memory._evaluation_read): a smaller batch does
        remedies.append(f"a smaller evaluation.micro_batch than {job.eval_micro_batch:,}")
        where: tuple[str, ...] = ("finetune", "evaluation")
    else:
        remedies = [
            name
            for name, used in (
                ("activation_checkpointing: full", job.checkpointing != "none"),
                ("fused_loss: true", job.fused_loss),
            )
            if not used
        ]
        remedies.append(f"a shorter seq_len than {job.seq_len:,} or a smaller micro_batch")
        where, what = ("finetune", "seq_len"), f"activations and loss temporaries are {share:.0%}"
    yield ctx.finding(
        "GP205", where, f"{what} of the {format_gib(f.memory.per_gpu)} peak per GPU", "try " + ", ".join(remedies)
    )


def _at_its_field(ctx: RuleContext, overrun: Overrun) -> Overrun:
    """A tenant that declares no context of its own takes the deployment's: the finding is at serve.context."""
    if overrun.tenant:
        index = overrun.pointer[2]
        tenants = ctx.document.data.get("serve", {}).get("tenants", [])
        entry = tenants[index] if isinstance(index, int) and index < len(tenants) else {}
        if not isinstance(entry, dict) or "context" not in entry:
            return evolve(overrun, field="serve.context", pointer=("serve", "context"))
    return overrun


@rule("GP206")
def context_exceeds_model(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports a `serve.context` (or a tenant's `context`) longer than its model takes, and a
    `finetune.seq_len` longer than a model with a learned position table has rows, naming the model's
    maximum and where it comes from: the catalog's `max_position` (copied from the model's config.json),
    an explicit architecture's `max_position`, or a `model.config` file's length as vLLM derives it. vLLM
    takes the smallest of `max_position_embeddings`, `n_positions`, `max_seq_len`, `seq_length`,
    `max_target_positions`, `max_sequence_length`, `max_seq_length` and `seq_len` (a `model_max_length`
    replaces it), then multiplies it by the `rope_scaling` `factor` (yarn: its
    `original_max_position_embeddings` times the factor) unless the RoPE type is `llama3`, `longrope` or
    `su`, whose `max_position_embeddings` already counts the scaling (Gemma 3's too). A model with no
    known maximum gets no finding. The planner proposes no layout for such a job, and the fit findings'
    hints say why instead of sizing GPUs for it.

    ## Why is this bad?
    The engine refuses to start: vLLM raises for a `--max-model-len` above the length it derives from
    the config.json unless `VLLM_ALLOW_LONG_MAX_MODEL_LEN=1` is set, and then warns that positions past
    it give NaNs (RoPE) or out-of-bounds errors (learned positions). No number of GPUs fixes it; sizing
    GPUs for the context would approve a deployment that never serves.

    ## Example
    ```yaml
    model: {id: llama-2-7b}      # at most 4,096 tokens
    serve:
      context: 16384
    ```

    ## Use instead
    ```yaml
    model: {id: llama-3.1-8b}    # at most 131,072 tokens
    serve:
      context: 16384
    ```
    or a `model.config` whose `rope_scaling` (for example yarn, factor 4) extends the model to the
    context, as the model's authors document it.
    """
    for overrun in overruns(ctx.spec):
        if not overrun.fatal:
            continue
        overrun = _at_its_field(ctx, overrun)
        if overrun.kind == "serve":
            why = "the serving engine refuses to start with a longer maximum length"
            hint = (
                f"lower {overrun.field} to at most {overrun.limit:,}, "
                f"or serve a model that takes {overrun.tokens:,} tokens"
            )
        else:
            why = (
                f"its learned position table has {overrun.model.architecture.position_embeddings:,} rows, so a "
                "longer sequence fails with an index error"
            )
            hint = f"lower {overrun.field} to at most {overrun.limit:,}"
        yield ctx.finding("GP206", overrun.pointer, f"{overrun.sentence()}; {why}", hint)


@rule("GP207")
def seq_len_beyond_trained_positions(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports a `finetune.seq_len` longer than the model's maximum position (found as GP206 finds it) on a
    model with rotary position embeddings (RoPE), naming the maximum and where it comes from.

    ## Why is this bad?
    The run starts: Transformers computes rotary angles for any position. But the model never saw
    positions past its maximum, so the first steps train on positions it extrapolates poorly, and the
    result is a model tuned at a length its own config.json says it does not take (serving it at that
    length is GP206). Extending a context by fine-tuning is done on purpose, with a RoPE scaling (linear,
    dynamic, yarn) set in the training config and in the config.json that serves the result.

    ## Example
    ```yaml
    model: {id: llama-2-7b}      # at most 4,096 positions
    finetune:
      seq_len: 16384
    ```

    ## Use instead
    ```yaml
    model: {id: llama-2-7b}
    finetune:
      seq_len: 4096
    ```
    or, to extend the context on purpose, a `model.config` with the `rope_scaling` the run trains with
    (then its length is the model's maximum), or a waiver that says so.
    """
    for overrun in overruns(ctx.spec):
        if overrun.fatal:
            continue
        yield ctx.finding(
            "GP207",
            overrun.pointer,
            f"{overrun.field} {overrun.tokens:,} is longer than {overrun.whose} was trained for: at most "
            f"{overrun.limit:,} positions ({overrun.source}); it trains on RoPE positions it never saw",
            f"lower {overrun.field} to at most {overrun.limit:,}, or extend the context on purpose with a RoPE "
            "scaling in the training config",
        )
