"""GP30x: parallelism is needed the moment one GPU cannot hold the job, not a moment before."""

from __future__ import annotations

from collections.abc import Iterator

from gpuplan.catalog import gpu_catalog
from gpuplan.estimate.calibration import CALIBRATION
from gpuplan.findings import Finding
from gpuplan.layout import Layout, finetune_at, serve_at, smallest_finetune_layout, smallest_serve_layout
from gpuplan.rules.context import RuleContext, comfortable
from gpuplan.rules.fit import finetune_single_gpu, serve_single_gpu, serve_weights_fit
from gpuplan.rules.registry import rule
from gpuplan.units import format_gib


@rule("GP301")
def parallelism_needed(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    For a job declared on a single GPU that does not fit, finds the least parallel layout of the same
    GPU that does (tensor parallelism for serving; data-parallel sharding or TP for fine-tuning).

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
    f = ctx.analysis.finetune
    if f is not None and not f.fits and finetune_single_gpu(ctx):
        layout = smallest_finetune_layout(ctx.spec, f.job, ctx.efficiency, other_gpus=False)
        if layout is not None:
            yield ctx.finding(
                "GP301",
                ("finetune", "hardware"),
                f"fine-tuning needs {format_gib(f.memory.per_gpu)} on one {f.gpu.id} ({format_gib(f.gpu.usable_bytes)} usable); "
                f"parallelism is needed: {layout.describe()} fits",
                f"declare count: {layout.count}"
                + (f", sharding: {layout.sharding}" if layout.sharding != "none" else ""),
            )
    s = ctx.analysis.serve
    if s is not None and not s.fits and serve_single_gpu(ctx) and not serve_weights_fit(ctx):
        layout = smallest_serve_layout(ctx.spec, s.job, ctx.efficiency, other_gpus=False)
        if layout is not None:
            yield ctx.finding(
                "GP301",
                ("serve", "hardware"),
                f"serving needs {format_gib(s.memory.per_gpu)} on one {s.gpu.id} (engine budget {format_gib(s.memory.budget)}); "
                f"tensor parallelism is needed: {layout.describe()} fits",
                f"declare count: {layout.count}, tensor_parallel: {layout.tensor_parallel}",
            )


@rule("GP302")
def parallelism_not_needed(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Re-estimates the job without the declared TP/PP (and without sharding) and reports when it still
    fits, with the cost of the parallelism: per-token all-reduce latency for serving, gradient and
    parameter traffic for fine-tuning.

    ## Why is this bad?
    Every TP rank adds two all-reduces per layer to every token; replicas (`count` with
    `tensor_parallel: 1`) give the same throughput without the latency. ZeRO-3 moves 1.5x the
    gradient traffic of plain data parallelism.

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
        job = s.job
        single = serve_at(ctx.spec, job, Layout(s.gpu, 1, 1), ctx.efficiency)
        if comfortable(single.memory.per_gpu, single.memory.budget, ctx.settings):
            latency = 2 * ctx.spec.model.architecture.layers * CALIBRATION.serving.allreduce_latency_nvlink_s * 1000
            yield ctx.finding(
                "GP302",
                ("serve", "hardware", "tensor_parallel"),
                f"one {s.gpu.id} holds this deployment ({format_gib(single.memory.per_gpu)} of {format_gib(single.memory.budget)}); "
                f"tensor_parallel {job.hardware.tensor_parallel} adds about {latency:.1f} ms of all-reduce latency per "
                f"output token",
                "use tensor_parallel: 1 and count for replicas",
            )
    f = ctx.analysis.finetune
    if f is not None and f.fits:
        tune = f.job
        hardware = tune.hardware
        if hardware.tensor_parallel * hardware.pipeline_parallel > 1 or tune.sharding != "none":
            plain = finetune_at(ctx.spec, tune, Layout(f.gpu, hardware.count, 1, "none"), ctx.efficiency)
            if comfortable(plain.memory.per_gpu, plain.gpu.usable_bytes, ctx.settings):
                what = [f"tensor_parallel {hardware.tensor_parallel}"] if hardware.tensor_parallel > 1 else []
                what += [f"pipeline_parallel {hardware.pipeline_parallel}"] if hardware.pipeline_parallel > 1 else []
                what += [f"sharding {tune.sharding}"] if tune.sharding != "none" else []
                yield ctx.finding(
                    "GP302",
                    ("finetune", "sharding" if tune.sharding != "none" else "hardware"),
                    f"{' and '.join(what)} is not needed: plain data parallelism on {hardware.count} x {f.gpu.id} "
                    f"needs {format_gib(plain.memory.per_gpu)} of {format_gib(f.gpu.usable_bytes)} per GPU",
                    "drop it; it only adds communication",
                )


@rule("GP303")
def tp_does_not_divide_heads(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Checks that `tensor_parallel` divides the model's attention heads, and that it divides the KV
    heads or is a multiple of them (vLLM and Megatron split heads across ranks).

    ## Why is this bad?
    The frameworks refuse to start such a layout.

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
        tp = job.hardware.tensor_parallel
        kv = arch.n_kv
        if arch.heads % tp or (not arch.is_mla and kv % tp and tp % kv):
            yield ctx.finding(
                "GP303",
                (job_name, "hardware", "tensor_parallel"),
                f"tensor_parallel {tp} does not divide {arch.heads} attention heads / {kv} KV heads",
                "use a divisor of the head count: "
                + ", ".join(str(d) for d in (1, 2, 4, 8, 16) if arch.heads % d == 0 and (kv % d == 0 or d % kv == 0)),
            )


@rule("GP304")
def tp_exceeds_nvlink_domain(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Compares `tensor_parallel` with the number of GPUs that share the GPU's scale-up link (8 on HGX
    SXM boards, 4 on H200 NVL bridges, 2 on bridged PCIe pairs).

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
        if gpu.domain > 1 and tp > gpu.domain:
            yield ctx.finding(
                "GP304",
                (job_name, "hardware", "tensor_parallel"),
                f"tensor_parallel {tp} exceeds the NVLink domain of {gpu.domain} GPUs on {gpu.id}",
                f"keep tensor_parallel at most {gpu.domain}; use pipeline_parallel or replicas beyond it",
            )


@rule("GP305")
def larger_gpu_instead_of_tp(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    For a TP > 1 layout, looks for a catalog GPU with more memory that holds the job at TP 1, and
    reports it with both hourly costs where prices are known.

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
    job = s.job
    if serve_at(ctx.spec, job, Layout(s.gpu, 1, 1), ctx.efficiency).fits:
        return  # one GPU of the declared kind holds it: GP302's case, not a bigger GPU's
    for gpu in sorted(gpu_catalog().values(), key=lambda g: (g.usable_bytes, g.id)):
        # Same-class cards differ by a few GiB of driver reserve (A100 80GB vs H100 80GB); only a memory
        # class at least 10% larger counts as "one bigger GPU".
        bigger = gpu.usable_bytes > 1.1 * s.gpu.usable_bytes
        if not bigger or gpu.vendor != s.gpu.vendor or not gpu.suggestable:
            continue
        single = serve_at(ctx.spec, job, Layout(gpu, 1, 1), ctx.efficiency)
        if comfortable(single.memory.per_gpu, single.memory.budget, ctx.settings):
            price, _ = ctx.spec.price(gpu)
            current = f"{s.price_per_hour * job.hardware.tensor_parallel:.2f}/h" if s.price_per_hour else "unpriced"
            offer = f"{price:.2f}/h" if price else "unpriced"
            yield ctx.finding(
                "GP305",
                ("serve", "hardware", "gpu"),
                f"one {gpu.id} holds this deployment at tensor_parallel 1 ({format_gib(single.memory.per_gpu)} of "
                f"{format_gib(single.memory.budget)}) instead of {job.hardware.tensor_parallel} x {s.gpu.id} "
                f"({current} vs {offer} per replica)",
                f"gpu: {gpu.id}, tensor_parallel: 1",
            )
            return
