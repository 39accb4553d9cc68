"""GP31x: SXM/NVLink for multi-GPU training, NVL/PCIe for single-GPU serving."""

from __future__ import annotations

from collections.abc import Iterator

from gpuplan.catalog import gpu_catalog
from gpuplan.estimate.performance import link_bandwidth
from gpuplan.findings import Finding
from gpuplan.layout import Layout, serve_at
from gpuplan.rules.context import RuleContext, comfortable
from gpuplan.rules.registry import rule
from gpuplan.units import format_gib


@rule("GP310")
def gradient_sync_bound(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    For data-parallel fine-tuning on PCIe/NVL cards or across more GPUs than the NVLink domain,
    estimates the data-parallel traffic of an optimizer step (DDP and ZeRO-1/2: a ring all-reduce of
    the gradients, 2(n-1)/n x gradient bytes; ZeRO-3/FSDP: parameters gathered for forward and for
    backward and gradients reduce-scattered on every micro-batch, 3x the parameter bytes) over the
    per-direction link bandwidth, keeps the part that overlap with compute cannot hide, and warns when
    that exposed part exceeds `thresholds.gradient_sync_share` (default 25%) of the step's compute.

    ## Why is this bad?
    Llama-3-8B's bf16 gradients are 16 GB: about 70 ms per step over NVLink, over a second through
    PCIe. The GPUs idle while the gradients travel.

    ## Example
    ```yaml
    finetune: {method: full, sharding: zero3, hardware: {gpu: l40s, count: 8}}
    ```

    ## Use instead
    ```yaml
    finetune: {method: full, sharding: zero3, hardware: {gpu: h100-sxm, count: 8}}
    ```
    """
    f = ctx.analysis.finetune
    if f is None or f.speed is None or f.setup.data_parallel < 2:
        return
    gpu = f.gpu
    span = f.setup.data_parallel * f.setup.tensor_parallel
    if gpu.has_nvlink and span <= gpu.domain:
        return
    share = f.speed.gradient_sync_s / max(f.speed.step_compute_s, 1e-9)
    if share > ctx.settings.gradient_sync_share:
        link = link_bandwidth(gpu, f.gpus) / 1e9
        yield ctx.finding(
            "GP310",
            ("finetune", "hardware", "gpu"),
            f"gradient and parameter traffic leaves {f.speed.gradient_sync_s * 1000:,.0f} ms per step exposed over"
            f" {link:.0f} GB/s against {f.speed.step_compute_s * 1000:,.0f} ms of compute ({share:.0%}) on"
            f" {f.gpus} x {gpu.id}",
            "use SXM GPUs inside one NVLink domain, fewer GPUs, more gradient_accumulation, or LoRA",
        )


def _siblings(gpu_id: str) -> list[str]:
    """NVL/PCIe variants of an SXM GPU (same chip family, same vendor)."""
    family = gpu_id.split("-")[0]
    return [g.id for g in gpu_catalog().values() if g.id.split("-")[0] == family and g.form_factor in ("nvl", "pcie")]


@rule("GP311")
def single_gpu_serving_on_sxm(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    For a serving job on one SXM GPU, estimates the same deployment on the NVL/PCIe variants and
    reports those that fit, with prices where known.

    ## Why is this bad?
    SXM modules come in 4- or 8-GPU HGX boards whose NVLink switch a single-GPU replica never uses;
    the PCIe/NVL cards are cheaper to rent and run in ordinary servers.

    ## Example
    ```yaml
    serve: {hardware: {gpu: h100-sxm, count: 1}}
    ```

    ## Use instead
    ```yaml
    serve: {hardware: {gpu: h100-nvl, count: 1}}
    ```
    """
    s = ctx.analysis.serve
    if s is None or s.gpu.form_factor != "sxm" or s.job.hardware.tensor_parallel > 1:
        return
    job = s.job
    fitting = []
    for sibling in _siblings(s.gpu.id):
        gpu = gpu_catalog()[sibling]
        candidate = serve_at(ctx.spec, job, Layout(gpu, 1, 1), ctx.efficiency)
        if (
            comfortable(candidate.memory.per_gpu, candidate.memory.budget, ctx.settings)
            and candidate.speed.tpot_s <= (job.tpot_ms or 1e9) / 1000
        ):
            price, _ = ctx.spec.price(gpu)
            fitting.append(
                f"{sibling} ({format_gib(candidate.memory.per_gpu)}" + (f", {price:.2f}/h)" if price else ")")
            )
    if fitting:
        yield ctx.finding(
            "GP311",
            ("serve", "hardware", "gpu"),
            f"one {s.gpu.id} per replica never uses its NVLink switch; {', '.join(fitting)} would hold the deployment",
            "prefer the NVL/PCIe card for TP 1 replicas",
        )


@rule("GP312")
def multi_gpu_serving_without_nvlink(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports `tensor_parallel` > 1 on PCIe-only GPUs (L4, L40S, A10, RTX cards).

    ## Why is this bad?
    Each output token waits for two all-reduces per layer over PCIe through the host bridge; large
    batches make it worse.

    ## Example
    ```yaml
    serve: {hardware: {gpu: l40s, count: 4, tensor_parallel: 4}}
    ```

    ## Use instead
    ```yaml
    serve: {hardware: {gpu: h100-nvl, count: 2, tensor_parallel: 2}}
    ```
    """
    s = ctx.analysis.serve
    if s is None or s.job.hardware.tensor_parallel < 2 or s.gpu.has_nvlink:
        return
    job = s.job
    arch = ctx.spec.model.architecture
    yield ctx.finding(
        "GP312",
        ("serve", "hardware", "tensor_parallel"),
        f"tensor_parallel {job.hardware.tensor_parallel} on {s.gpu.id} (PCIe only) puts {2 * arch.layers} all-reduces "
        f"over PCIe on every output token (TPOT estimate {s.speed.tpot_s * 1000:.1f} ms)",
        "use GPUs with NVLink for TP, or a GPU large enough for TP 1",
    )
