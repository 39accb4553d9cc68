"""GP31x: SXM/NVLink for multi-GPU training, NVL/PCIe for single-GPU serving."""

from __future__ import annotations

from collections.abc import Iterator

from gpuplan.catalog import Gpu, gpu_catalog
from gpuplan.findings import Finding
from gpuplan.plan.describe import cost_text, paste_line
from gpuplan.plan.evaluate import gradient_sync_share
from gpuplan.rules.context import RuleContext
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
    that exposed part exceeds `thresholds.gradient_sync_share` (default 25%) of the step's compute. A step's share
    needs no token count: it is checked with or without `finetune.tokens`. The planner rejects layouts above the same
    share.

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
    planner = ctx.plans.finetune
    if planner is None:
        return
    f = planner.declared().estimate  # with a nominal token count when the spec gives none: a step needs none
    share = gradient_sync_share(f)
    if share is not None and share > ctx.settings.gradient_sync_share:
        gpu = f.gpu
        link = f.speed.sync_bandwidth / 1e9
        yield ctx.finding(
            "GP310",
            ("finetune", "hardware", "gpu"),
            f"gradient and parameter traffic leaves {f.speed.gradient_sync_s * 1000:,.0f} ms per step exposed over"
            f" {link:.0f} GB/s against {f.speed.step_compute_s * 1000:,.0f} ms of compute ({share:.0%}) on"
            f" {f.gpus:,} x {gpu.id}",
            "use SXM GPUs inside one NVLink domain, fewer GPUs, more gradient_accumulation"
            + (", or LoRA" if f.setup.job.method == "full" else ""),  # an adapter job syncs its adapters alone
        )


def _siblings(gpu: Gpu) -> list[str]:
    """NVL/PCIe variants of an SXM GPU (same chip family, same vendor)."""
    family = gpu.id.split("-")[0]
    return [
        g.id
        for g in gpu_catalog().values()
        if g.id.split("-")[0] == family and g.vendor == gpu.vendor and g.form_factor in ("nvl", "pcie")
    ]


@rule("GP311")
def single_gpu_serving_on_sxm(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    For a serving job on one SXM GPU per replica, asks the planner for the cheapest sound layout on
    the NVL/PCIe variants of the same chip at one GPU per replica (memory with the configured
    headroom, the SLO), and reports it only when it costs less than the declared layout, with both
    monthly costs.

    ## Why is this bad?
    SXM modules come in 4- or 8-GPU HGX boards whose NVLink switch a single-GPU replica never uses;
    the PCIe/NVL cards are often cheaper to rent and run in ordinary servers.

    ## Example
    ```yaml
    serve: {hardware: {gpu: h100-sxm, count: 1}}
    ```

    ## Use instead
    ```yaml
    serve: {hardware: {gpu: h100-pcie, count: 1}}
    ```
    """
    s = ctx.analysis.serve
    if s is None or s.gpu.form_factor != "sxm" or s.job.hardware.tensor_parallel * s.job.hardware.pipeline_parallel > 1:
        return
    planner = ctx.plans.serve
    assert planner is not None
    declared = planner.declared()
    siblings = _siblings(s.gpu)
    if declared.rate is None or not siblings:
        return

    def sibling_card(gpu: Gpu, tp: int, pp: int) -> bool:
        return gpu.id in siblings and tp == 1 and pp == 1

    option = planner.cheapest(ceiling=declared.rate, where=sibling_card, tag=f"GP311:{s.gpu.id}")
    if option is None:
        return
    currency = ctx.spec.budget.currency
    yield ctx.finding(
        "GP311",
        ("serve", "hardware", "gpu"),
        f"one {s.gpu.id} per replica never uses its NVLink switch; {option.layout.describe()} holds the deployment "
        f"({format_gib(option.per_gpu_bytes)} of {format_gib(option.capacity_bytes)}) for "
        f"{cost_text(option, currency)} against {cost_text(declared, currency)}",
        f"paste {paste_line(option.fragment)}",
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
