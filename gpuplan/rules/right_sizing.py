"""GP50x (right-sizing): the GPU is far larger than the job needs."""

from __future__ import annotations

from collections.abc import Iterator

from gpuplan.catalog import gpu_catalog
from gpuplan.findings import Finding
from gpuplan.layout import Layout, serve_at
from gpuplan.rules.context import RuleContext, comfortable
from gpuplan.rules.registry import rule
from gpuplan.spec import HOURS_PER_MONTH
from gpuplan.units import format_gib


@rule("GP505")
def oversized_serving_gpu(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    When a deployment uses less than `thresholds.right_size_fraction` (default 25%) of its GPU's
    memory budget, estimates it on every cheaper catalog GPU at the same layout and reports the
    cheapest that fits and meets the latency SLO, with the monthly saving.

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
    s = ctx.analysis.serve
    if s is None or s.price_per_hour is None or not s.fits:
        return
    job = s.job
    used = s.memory.per_gpu / s.memory.budget
    if used >= ctx.settings.right_size_fraction:
        return
    best = None
    for gpu in gpu_catalog().values():
        price, _ = ctx.spec.price(gpu)
        if price is None or price >= s.price_per_hour or gpu.id == s.gpu.id or not gpu.suggestable:
            continue
        tp = job.hardware.tensor_parallel if gpu.domain >= job.hardware.tensor_parallel else 1
        candidate = serve_at(ctx.spec, job, Layout(gpu, job.hardware.count, tp), ctx.efficiency)
        meets = (
            comfortable(candidate.memory.per_gpu, candidate.memory.budget, ctx.settings)
            and (job.ttft_ms is None or candidate.speed.ttft_s * 1000 <= job.ttft_ms)
            and (job.tpot_ms is None or candidate.speed.tpot_s * 1000 <= job.tpot_ms)
        )
        if meets and (best is None or price < best[1]):
            best = (candidate, price)
    if best is not None:
        candidate, price = best
        saving = (s.price_per_hour - price) * job.hardware.count * HOURS_PER_MONTH
        yield ctx.finding(
            "GP505",
            ("serve", "hardware", "gpu"),
            f"the deployment uses {used:.0%} of {s.gpu.id} ({format_gib(s.memory.per_gpu)} of {format_gib(s.memory.budget)}); "
            f"{candidate.gpu.id} holds it ({format_gib(candidate.memory.per_gpu)} of {format_gib(candidate.memory.budget)}) and meets the SLO, "
            f"saving about {saving:,.0f} {ctx.spec.budget.currency} a month",
            f"gpu: {candidate.gpu.id}",
        )


@rule("GP506")
def train_and_serve_same_gpu(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports a spec whose serving deployment uses the fine-tuning GPU while needing less than
    `thresholds.right_size_fraction` of its memory budget.

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
    if f is None or s is None or f.gpu.id != s.gpu.id or not s.fits:
        return
    used = s.memory.per_gpu / s.memory.budget
    if used < ctx.settings.right_size_fraction:
        yield ctx.finding(
            "GP506",
            ("serve", "hardware", "gpu"),
            f"serving on the training GPU ({s.gpu.id}) uses {used:.0%} of it ({format_gib(s.memory.per_gpu)}); "
            "a smaller GPU would serve it",
            "see GP505 or `gpuplan estimate` for a cheaper serving GPU",
        )
