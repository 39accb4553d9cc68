"""Search for the smallest layout that holds a job: more TP or sharding on the same GPU, or a bigger GPU.

"Parallelism is needed the moment one GPU cannot hold the job, not a moment before": candidates are
tried in order of GPU count, so the first that fits is the least parallel one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuplan.analysis import FinetuneEstimate, ServeEstimate, estimate_finetune, estimate_serve
from gpuplan.catalog import Gpu, gpu_catalog
from gpuplan.estimate.performance import Efficiency
from gpuplan.spec import Finetune, Hardware, Serve, Spec

MAX_GPUS = 64  # search bound: eight 8-GPU nodes, beyond which a plan is a cluster design, not a spec fix


@dataclass(frozen=True)
class Layout:
    gpu: Gpu
    count: int
    tensor_parallel: int
    sharding: str = "none"

    def describe(self) -> str:
        parts = [f"{self.count} x {self.gpu.id}"]
        if self.tensor_parallel > 1:
            parts.append(f"tensor_parallel {self.tensor_parallel}")
        if self.sharding != "none":
            parts.append(f"sharding {self.sharding}")
        return ", ".join(parts)


def tp_degrees(spec: Spec, gpu: Gpu, limit: int = 8) -> list[int]:
    """TP degrees that divide the attention heads and stay inside the GPU's scale-up domain."""
    heads = spec.model.architecture.heads
    domain = max(gpu.domain, 1)
    return [tp for tp in (1, 2, 4, 8, 16) if tp <= min(limit, max(domain, 1)) and heads % tp == 0]


def finetune_at(spec: Spec, job: Finetune, layout: Layout, efficiency: Efficiency) -> FinetuneEstimate:
    hardware = Hardware(layout.gpu, layout.count, layout.tensor_parallel, 1)
    changed = replace(job, hardware=hardware, sharding=layout.sharding)
    return estimate_finetune(spec, changed, efficiency, gpu=layout.gpu)


def serve_at(spec: Spec, job: Serve, layout: Layout, efficiency: Efficiency) -> ServeEstimate:
    hardware = Hardware(layout.gpu, layout.count, layout.tensor_parallel, 1)
    return estimate_serve(spec, replace(job, hardware=hardware), efficiency, gpu=layout.gpu)


def finetune_candidates(spec: Spec, gpu: Gpu) -> list[Layout]:
    layouts = [Layout(gpu, 1, 1)]
    count = 2
    while count <= MAX_GPUS:
        layouts.append(Layout(gpu, count, 1, "zero3"))
        for tp in tp_degrees(spec, gpu):
            if 1 < tp <= count and count % tp == 0:
                layouts.append(Layout(gpu, count, tp, "zero3" if count > tp else "none"))
        count *= 2
    return layouts


def smallest_finetune_layout(
    spec: Spec, job: Finetune, efficiency: Efficiency, *, other_gpus: bool = True
) -> Layout | None:
    for layout in finetune_candidates(spec, job.hardware.gpu):
        if finetune_at(spec, job, layout, efficiency).fits:
            return layout
    if other_gpus:
        for gpu in sorted(gpu_catalog().values(), key=lambda g: g.usable_bytes):
            if (
                gpu.suggestable
                and gpu.usable_bytes > job.hardware.gpu.usable_bytes
                and finetune_at(spec, job, Layout(gpu, 1, 1), efficiency).fits
            ):
                return Layout(gpu, 1, 1)
    return None


def smallest_serve_layout(spec: Spec, job: Serve, efficiency: Efficiency, *, other_gpus: bool = True) -> Layout | None:
    gpu = job.hardware.gpu
    for tp in tp_degrees(spec, gpu):
        if serve_at(spec, job, Layout(gpu, tp, tp), efficiency).fits:
            return Layout(gpu, tp, tp)
    if other_gpus:
        for other in sorted(gpu_catalog().values(), key=lambda g: (g.usable_bytes, g.id)):
            if other.usable_bytes <= gpu.usable_bytes or not other.suggestable:
                continue
            for tp in tp_degrees(spec, other):
                if serve_at(spec, job, Layout(other, tp, tp), efficiency).fits:
                    return Layout(other, tp, tp)
    return None
