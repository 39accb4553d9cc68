"""GP60x: checkpoint storage and runs without checkpoints."""

from __future__ import annotations

from collections.abc import Iterator

from gpuplan.findings import Finding
from gpuplan.rules.context import RuleContext
from gpuplan.rules.registry import rule


@rule("GP601")
def checkpoint_storage_exceeded(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Multiplies the resumable checkpoint size (weights + optimizer states + fp32 master weights for
    full fine-tuning, about 14 bytes per parameter with mixed-precision AdamW; the adapters and their
    states for LoRA) by `checkpoints.keep` and compares with `checkpoints.storage_gb`.

    ## Why is this bad?
    The run stops when the disk fills, usually hours in, or the oldest good checkpoint is deleted.

    ## Example
    ```yaml
    model: {id: llama-3.1-70b}
    finetune: {method: full, checkpoints: {keep: 3, storage_gb: 1000}}
    ```

    ## Use instead
    ```yaml
    finetune: {method: full, checkpoints: {keep: 3, storage_gb: 3000}}
    ```
    """
    f = ctx.analysis.finetune
    storage_gb = None if f is None else f.job.checkpoint_storage_gb
    if f is None or storage_gb is None:
        return
    keep = f.job.checkpoint_keep or 1
    need = f.checkpoint_bytes * keep
    if need > storage_gb * 1e9:
        yield ctx.finding(
            "GP601",
            ("finetune", "checkpoints", "storage_gb"),
            f"{keep} resumable checkpoints of {f.checkpoint_bytes / 1e9:,.1f} GB need {need / 1e9:,.1f} GB; "
            f"{storage_gb:,.0f} GB is declared",
            f"storage_gb: {need / 1e9 * 1.1:,.0f} (10% spare), or keep fewer",
        )


@rule("GP602")
def long_run_without_checkpoints(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports a run estimated longer than `thresholds.long_run_hours` (default 24) whose
    `finetune.checkpoints.every_hours` is not set.

    ## Why is this bad?
    A node failure, preemption or a NaN on day three restarts the run from zero.

    ## Example
    ```yaml
    finetune: {method: full, tokens: 20000000000}
    ```

    ## Use instead
    ```yaml
    finetune: {method: full, tokens: 20000000000, checkpoints: {every_hours: 2, keep: 3, storage_gb: 2000}}
    ```
    """
    f = ctx.analysis.finetune
    if f is None or f.hours is None or f.job.checkpoint_every_hours is not None:
        return
    if f.hours > ctx.settings.long_run_hours:
        yield ctx.finding(
            "GP602",
            ("finetune", "tokens"),
            f"the run takes about {f.hours:,.0f} hours on {f.gpus:,} x {f.gpu.id} with no checkpoints declared",
            "add checkpoints: {every_hours: ..., keep: ..., storage_gb: ...}",
        )
