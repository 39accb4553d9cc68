"""The fine-tuning planner's judge: a layout of the run (GPU kind, TP x PP x data-parallel width and the
settings that keep the numerics) estimated and judged against memory at the plan's confidence, gradient
sync and the least model parallelism that holds the job; memoised per shape."""

from __future__ import annotations

import math
from typing import Any

from gpuplan.analysis import (
    FinetuneEstimate,
    estimate_finetune,
    finetune_memory,
    finetune_memory_floor,
    finetune_speed,
    finetune_tensor_bound,
    run_cost,
    training_setup,
)
from gpuplan.conflicts import offload_rests_on_sharding, runs_pipeline
from gpuplan.estimate.bands import finetune_band
from gpuplan.estimate.nccl import topology_key
from gpuplan.estimate.performance import Efficiency
from gpuplan.estimate.training import TrainingMemory, TrainingSetup, trainable_params
from gpuplan.estimate.training_speed import TrainingWorkload, seconds_per_token_floor
from gpuplan.layout import whole_replicas
from gpuplan.plan.evaluate import (
    NOMINAL_TOKENS,
    Evaluator,
    Option,
    gradient_sync_share,
    judged,
    sync_share,
    within_headroom,
)
from gpuplan.plan.space import POWERS_OF_TWO, Layout, TrainingSettings, declared_shape
from gpuplan.records import evolve
from gpuplan.spec import Finetune, PlanLimits, Spec
from gpuplan.units import format_gib, format_gib_apart, format_share_under

# A sharded run faster than plain data parallelism by less than this share ties with it: below what a run's hours
# or tokens/s are printed to, and far inside the speed band, so the sharding earns no place by speed (and a plan
# drops it even where the plain run's cost is higher by that little: no saving is then stated).
SHARDING_SPEED_TIE = 0.005


class FinetunePlanner(Evaluator):
    """Evaluates fine-tuning layouts of one spec's run; memoises estimates and per-shape memory.

    The global batch (micro_batch x gradient_accumulation x data-parallel ranks) of the declared run is
    held fixed; micro-batches may shrink (more accumulation) but never grow.
    """

    kind = "finetune"

    def __init__(
        self,
        spec: Spec,
        efficiency: Efficiency,
        headroom_pct: float,
        sync_share: float,
        limits: PlanLimits,
        known: FinetuneEstimate | None = None,
    ) -> None:
        super().__init__(spec, efficiency, headroom_pct, limits)
        assert spec.finetune is not None
        self.job, self.sync_share = spec.finetune, sync_share
        self.band = finetune_band(self.job.method)
        hardware = self.job.hardware
        self.declared_data_parallel = hardware.replicas
        self.global_batch = self.job.micro_batch * self.job.gradient_accumulation * self.declared_data_parallel
        self._memory: dict[tuple[object, ...], TrainingMemory] = {}
        self._state_floors: dict[tuple[int, int, int, str, int], int] = {}  # TP, PP, DP, sharding, GA -> floor
        self._tensors_sound: dict[tuple[object, ...], bool] = {}  # usable bytes and memory key -> tensors_sound
        self._floor_job: tuple[Finetune, TrainingSetup] | None = None
        self._floor_trainable: int | None = None
        self._micro_batches: dict[int, tuple[int, ...]] = {}  # data-parallel width -> sizes
        self.declared = self.declared_layout()
        self.known = known if known is not None and self._same_job(known.job, known.gpu) else None
        if self.known is not None:  # the declared layout's memory, as evaluate computes it
            self._memory[self._memory_key(self.declared)] = self.known.memory

    def declared_settings(self) -> TrainingSettings:
        job = self.job
        return TrainingSettings(
            job.checkpointing, job.fused_loss, job.sharding, job.micro_batch, job.gradient_accumulation
        )

    def declared_layout(self) -> Layout:
        return declared_shape(self.job.hardware, self.declared_data_parallel, settings=self.declared_settings())

    def data_parallel_degrees(self, tensor_parallel: int, pipeline_parallel: int) -> list[int]:
        """Data-parallel widths (powers of two) that keep the global batch and stay within max_gpus."""
        most = whole_replicas(self.limits.max_gpus, tensor_parallel, pipeline_parallel)
        return [dp for dp in POWERS_OF_TWO if dp <= most and self.global_batch % dp == 0]

    def micro_batches(self, data_parallel: int) -> tuple[int, ...]:
        """Micro-batch sizes (the declared one first, then smaller) that keep the global batch."""
        if data_parallel not in self._micro_batches:
            per_rank = self.global_batch // data_parallel
            micro = self.job.micro_batch
            self._micro_batches[data_parallel] = tuple(
                m for m in range(micro, 0, -1) if micro % m == 0 and per_rank % m == 0
            )
        return self._micro_batches[data_parallel]

    def _job(self, layout: Layout) -> Finetune:
        settings = layout.settings
        assert settings is not None
        return evolve(
            self.job,
            checkpointing=settings.activation_checkpointing,
            fused_loss=settings.fused_loss,
            sharding=settings.sharding,
            micro_batch=settings.micro_batch,
            gradient_accumulation=settings.gradient_accumulation,
            tokens=self.job.tokens or NOMINAL_TOKENS,
            hardware=self._hardware(self.job.hardware, layout),
        )

    @staticmethod
    def _memory_key(layout: Layout) -> tuple[object, ...]:
        return (
            layout.tensor_parallel,
            layout.pipeline_parallel,
            layout.replicas,
            layout.settings,
            topology_key(layout.gpu),
        )

    def memory(self, layout: Layout) -> TrainingMemory:
        """Per-GPU memory of a layout's shape: the same on every GPU kind whose NCCL buffers are alike
        (``nccl.topology_key``; the tensors and the allocator's cache are the same on any kind)."""
        key = self._memory_key(layout)
        if key not in self._memory:
            self._memory[key] = finetune_memory(self.spec, self._job(layout))
        return self._memory[key]

    def planned_bytes(self, per_gpu: float) -> float:
        """The per-GPU figure a sound layout must fit with the headroom: the pessimistic edge of the
        job's measured memory error at the plan's confidence."""
        return self.band.pessimistic(per_gpu, self.limits.confidence)

    def memory_floor(self, layout: Layout) -> int:
        """A lower bound of ``memory(layout).per_gpu`` from the model states alone: one per shape, sharding
        and accumulation (pipelining over FSDP keeps gradients unsharded while they accumulate), whatever
        the layout's micro-batch, recompute and fused loss (which the states do not read) and GPU kind (NCCL's
        buffers, which alone differ by kind, are left out: ``finetune_memory_floor``)."""
        assert layout.settings is not None
        settings = layout.settings
        key = (
            layout.tensor_parallel,
            layout.pipeline_parallel,
            layout.replicas,
            settings.sharding,
            settings.gradient_accumulation,
        )
        floor = self._state_floors.get(key)
        if floor is None:
            floor = self._state_floors[key] = finetune_memory_floor(self.spec, self._job(layout))
        return floor

    def memory_sound(self, layout: Layout) -> bool:
        """Whether the layout's planned per-GPU memory (the band's edge) is within the headroom; a layout
        whose model states alone already are not is answered without its estimate: floor <= per_gpu and the
        edge grows with the figure (a ratio of it), so edge(floor) > limit implies edge(per_gpu) > limit."""
        if self._memory_key(layout) not in self._memory and not self.tensors_sound(layout):
            return False
        return within_headroom(
            self.planned_bytes(self.memory(layout).per_gpu), layout.gpu.usable_bytes, self.headroom_pct
        )

    def unsharded(self, option: Option) -> Option | None:
        """The same layout without its sharding where the sharding is needless (GP302): plain data parallelism's
        memory sound at the same split and settings, no offload resting on the sharding, and the run no slower
        (ZeRO and FSDP shard the optimizer's step over the ranks, which can make the sharded run the faster: a
        full fine-tune's FSDP on 8 H200s runs 6% faster than plain data parallelism; a QLoRA's ZeRO-3 gains
        nothing, 0.001%); else None."""
        settings = option.layout.settings
        if settings is None or settings.sharding == "none" or offload_rests_on_sharding(self._job(option.layout)):
            return None
        plain = evolve(option.layout, settings=evolve(settings, sharding="none"))
        if not self.memory_sound(plain):
            return None
        candidate = self.evaluate(plain)
        return candidate if candidate.latency_s <= option.latency_s * (1 + SHARDING_SPEED_TIE) else None

    def without_needless_sharding(self, option: Option) -> Option:
        """A sound ``option`` without a needless sharding (``unsharded``) when that layout is sound too: a
        recommendation then draws no GP302 once pasted."""
        plain = self.unsharded(option) if option.sound else None
        return plain if plain is not None and plain.sound else option

    def tensors_sound(self, layout: Layout) -> bool:
        """Whether the layout's tensors alone (the phase model, no allocator cache: a lower bound of the
        device figure) are within the headroom at the band's edge: necessary for ``memory_sound``, and,
        unlike the device figure, monotone in the settings a search relaxes (the allocator's cache is not:
        a smaller micro-batch can leave holes a larger one fills), so a search may skip a shape on it."""
        key = (layout.gpu.usable_bytes, *self._memory_key(layout))
        if key not in self._tensors_sound:
            self._tensors_sound[key] = self._tensors_within(layout)
        return self._tensors_sound[key]

    def _tensors_within(self, layout: Layout) -> bool:
        usable = layout.gpu.usable_bytes
        if not within_headroom(self.planned_bytes(self.memory_floor(layout)), usable, self.headroom_pct):
            return False
        tensors = finetune_tensor_bound(self.spec, self._job(layout))
        return within_headroom(self.planned_bytes(tensors), usable, self.headroom_pct)

    def sync_too_slow(self, layout: Layout) -> bool:
        """Whether gradient sync alone breaks the layout, as ``evaluate`` judges it, from the speed model
        alone (it reads no memory estimate)."""
        job = self._job(layout)
        setup = training_setup(self.spec, job)
        _, speed = finetune_speed(setup, layout.gpu, self.efficiency)
        share = sync_share(setup, layout.gpu, speed)
        return share is not None and share > self.sync_share

    def _evaluate(self, layout: Layout) -> Option:
        estimate = self._known_estimate(layout) or estimate_finetune(
            self.spec, self._job(layout), self.efficiency, gpu=layout.gpu, memory=self.memory(layout)
        )
        per_gpu, usable = estimate.memory.per_gpu, layout.gpu.usable_bytes
        planned = math.ceil(self.planned_bytes(per_gpu))
        nodes, checks = self._layout_checks(layout)
        assert layout.settings is not None
        if not runs_pipeline(layout.settings.sharding, layout.pipeline_parallel):
            checks["pipeline_parallel"] = (
                f"{layout.settings.sharding} does not run with pipeline parallelism"
                " (DeepSpeed's pipeline engine takes ZeRO-1 alone)"
            )
        if per_gpu > usable:
            checks["memory"] = f"needs {format_gib(per_gpu)} per GPU; {layout.gpu.id} has {format_gib(usable)} usable"
        elif not within_headroom(planned, usable, self.headroom_pct):
            at = f"{self.limits.confidence:.0%} confidence"
            needs, has = format_gib_apart(planned, usable)
            checks["headroom"] = (
                f"needs up to {needs} per GPU at {at}, more than the {has} usable"
                if planned > usable
                else f"leaves {format_share_under((usable - planned) / usable, self.headroom_pct / 100)} free at {at}"
                f" (margin {self.headroom_pct:g}%)"
            )
        share = gradient_sync_share(estimate)
        if share is not None and share > self.sync_share:
            checks["gradient_sync"] = (
                f"gradient sync takes {share:.0%} of each step's compute (threshold {self.sync_share:.0%})"
            )
        meets, reasons = judged("finetune", checks)
        return Option(
            "finetune",
            layout,
            nodes,
            estimate,
            meets,
            reasons,
            self.declared,
            tokens_known=self.job.tokens is not None,
            planned_bytes=planned,
            restated=self.restated(layout),
        )

    def floor_rate(self, gpu: Any) -> float | None:
        """Cost per 1M tokens on one ``gpu`` with no recompute, a fused loss (never slower), the declared
        micro-batch (smaller ones are never faster) and nothing offloaded (offload only adds time, and on
        one GPU its host step would be the whole model's): no layout on this GPU kind costs less.
        Only the run's speed and price on ``gpu`` are computed, as ``estimate_finetune`` computes them (the
        search compares every GPU kind's floor first; nothing else of an estimate is read)."""
        job, setup = self._floor_setup()
        _, speed = finetune_speed(setup, gpu, self.efficiency)
        price = self.spec.price_record(gpu)
        cost = run_cost(speed, setup.gpus, None if price is None else price.per_hour)
        return None if cost is None else cost / (job.tokens or NOMINAL_TOKENS) * 1e6

    def floor_rate_bound(self, gpu: Any) -> float:
        """A lower bound of ``floor_rate(gpu)`` (infinite unpriced) without the speed model's step: its
        ``seconds_per_token_floor`` at the GPU's price. floor_rate is the run's cost per 1M tokens, which
        is step time / tokens a step trains per GPU x the price per GPU-hour / 3600 x 1e6."""
        price = self.spec.price_record(gpu)
        if price is None:
            return math.inf
        _, setup = self._floor_setup()
        if self._floor_trainable is None:
            self._floor_trainable = trainable_params(setup)
        workload = TrainingWorkload(setup, gpu, self._floor_trainable)
        return seconds_per_token_floor(workload, self.efficiency) * price.per_hour / 3600 * 1e6 * (1 - 1e-9)

    def _floor_setup(self) -> tuple[Finetune, TrainingSetup]:
        """The job and setup of ``floor_rate``: one GPU, no recompute, a fused loss, the declared micro-batch."""
        if self._floor_job is None:
            declared = self.declared_settings()
            micro = declared.micro_batch
            settings = TrainingSettings("none", True, declared.sharding, micro, self.global_batch // micro)
            layout = Layout(self.job.hardware.gpu, 1, 1, 1, settings=settings)
            job = evolve(self._job(layout), offload_optimizer="none", offload_parameters="none")
            self._floor_job = (job, training_setup(self.spec, job))
        return self._floor_job
