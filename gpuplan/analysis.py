"""The estimate of one resolved spec: memory, speed, cost and storage per job, with the assumptions used."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import field

from gpuplan.architecture import Architecture
from gpuplan.assumptions import finetune_assumptions, serve_assumptions
from gpuplan.catalog import Gpu
from gpuplan.context_limits import beyond_model
from gpuplan.estimate.bands import (
    MemoryBand,
    SpeedBand,
    finetune_band,
    serving_band,
    serving_speed_bands,
    training_speed_bands,
)
from gpuplan.estimate.calibration import CALIBRATION, Calibration
from gpuplan.estimate.engines import (
    SGLANG_ENGINE,
    TRTLLM_ENGINE,
    TRTLLM_MAX_BATCH_SIZE,
    TRTLLM_MAX_NUM_TOKENS,
    default_memory_fraction,
    memory_engine,
    sglang_sizes,
)
from gpuplan.estimate.nccl import nccl_bytes
from gpuplan.estimate.performance import Efficiency
from gpuplan.estimate.serving import (
    ServingMemory,
    ServingSetup,
    ServingShape,
    Tenant,
    added_stage_weights,
    chunks_by_itself,
    decode_weight_reads,
    engine_batch_limits,
    estimate_serving,
    max_concurrency,
    max_context,
    shape_at_any_load,
)
from gpuplan.estimate.serving_categories import CategorySpeeds, category_speeds
from gpuplan.estimate.serving_speed import serving_speed
from gpuplan.estimate.serving_workload import ServingSpeed, ServingWorkload
from gpuplan.estimate.speculative import (
    SpeculativeWorkload,
    proposer_architecture,
    proposer_read_bytes,
)
from gpuplan.estimate.training import (
    REGIMES,
    TrainingMemory,
    TrainingSetup,
    has_master_weights,
    optimizer_state_bytes,
    trainable_params,
)
from gpuplan.estimate.training_memory import estimate_training, states_floor
from gpuplan.estimate.training_speed import TrainingSpeed, TrainingWorkload, training_speed
from gpuplan.estimate.vllm_releases import vllm_release
from gpuplan.estimate.weights import mxfp4_moe_alignment, routed_expert_bytes
from gpuplan.layout import replicas as layout_replicas
from gpuplan.records import evolve, record
from gpuplan.spec import HOURS_PER_MONTH, Finetune, Serve, Spec
from gpuplan.units import (
    DTYPE_BYTES,
    GIB,
    format_gib,
    format_gib_apart,
)

# Memory outside PyTorch's caching allocator per training process (the CUDA context and the kernel modules
# it loads; library handles): measured 0.3-2 GiB together with the allocator's slack (vram-calculator blog;
# the calculator itself uses 1000 MiB). The allocator's cache is now modelled apart (estimate/allocator.py)
# and this constant was not re-derived without it: an overestimate by whatever slack those figures held.
# NCCL's buffers, outside the allocator too, are counted by communicator (estimate/nccl.py).
TRAINING_OVERHEAD = GIB
# What a speed or per-token cost figure reads where the serving layout cannot start (ServeEstimate.loads).
NOT_LOADED = "n/a (the engine cannot start)"


Notes = Callable[[], tuple[tuple[str, str], ...]]  # words an estimate assumes, worded on first use


def fit_verdict(fits: bool, fits_at_confidence: bool, confidence: float) -> str:
    """The three states of a fit, in the words every output uses: the estimate does not fit; it fits but its
    pessimistic edge at ``confidence`` does not (GP208, GP209); it fits."""
    if not fits:
        return "does not fit"
    return "fits" if fits_at_confidence else f"at risk at {confidence:.0%} confidence"


@record
class FinetuneEstimate:
    job: Finetune
    memory: TrainingMemory
    setup: TrainingSetup
    speed: TrainingSpeed  # rates per step and token; its hours need finetune.tokens
    gpu: Gpu
    gpus: int
    price_per_hour: float | None
    price_source: str
    checkpoint_bytes: int
    notes: Notes = field(compare=False, repr=False)  # words `assumptions`: see there
    bands: dict[str, SpeedBand]  # speed figure -> its error band, measured out of sample (estimate.bands)
    workload: TrainingWorkload | None = None  # what the speed was computed from
    billed_gpus: int = 0  # the GPUs paid for: whole instances under an instance-hour quote; 0: ``gpus``

    @property
    def paid_gpus(self) -> int:
        return self.billed_gpus or self.gpus

    @functools.cached_property
    def assumptions(self) -> tuple[tuple[str, str], ...]:
        """What the estimate assumes, in words; worded on first use (the planner makes thousands of
        estimates whose assumptions no output reads)."""
        return self.notes()

    @property
    def fits(self) -> bool:
        """Whether the estimate itself fits: False is "does not fit" (GP201)."""
        return self.memory.per_gpu <= self.gpu.usable_bytes

    @property
    def memory_band(self) -> MemoryBand:
        """The measured error of the per-GPU figure for this kind of job (runs not used to tune it)."""
        return finetune_band(self.job.method)

    def planned_bytes(self, confidence: float) -> int:
        """The per-GPU figure a decision at ``confidence`` plans for: the band's pessimistic edge."""
        return math.ceil(self.memory_band.pessimistic(self.memory.per_gpu, confidence))

    def fits_at(self, confidence: float) -> bool:
        """Whether the band's pessimistic edge at ``confidence`` fits the usable memory too."""
        return self.fits and self.planned_bytes(confidence) <= self.gpu.usable_bytes

    def fit_verdict(self, confidence: float) -> str:
        return fit_verdict(self.fits, self.fits_at(confidence), confidence)

    @property
    def hours(self) -> float | None:
        """The run's wall-clock hours; None without ``finetune.tokens`` (no run length)."""
        return self.speed.hours

    @property
    def cost(self) -> float | None:
        return run_cost(self.speed, self.paid_gpus, self.price_per_hour)


@record
class ServeEstimate:
    job: Serve
    memory: ServingMemory
    setup: ServingSetup
    speed: ServingSpeed
    gpu: Gpu
    gpus: int
    price_per_hour: float | None
    price_source: str
    notes: Notes = field(compare=False, repr=False)  # words `assumptions`: see there
    bands: dict[str, SpeedBand]  # ttft, tpot, tokens_per_s -> the band under the job's load shape
    workload: ServingWorkload | None = None  # what the speed was computed from
    efficiency: Efficiency | None = field(default=None, compare=False, repr=False)
    calibration: Calibration = field(default=CALIBRATION, compare=False, repr=False)
    billed_gpus: int = 0  # the GPUs paid for: whole instances under an instance-hour quote; 0: ``gpus``

    @property
    def paid_gpus(self) -> int:
        return self.billed_gpus or self.gpus

    @functools.cached_property
    def assumptions(self) -> tuple[tuple[str, str], ...]:
        """What the estimate assumes, in words; worded on first use (the planner makes thousands of
        estimates whose assumptions no output reads). An engine that cannot start has no steady state."""
        notes = self.notes()
        return notes if self.loads else tuple((k, NOT_LOADED if k == "steady state" else v) for k, v in notes)

    @functools.cached_property
    def categories(self) -> CategorySpeeds | None:
        """The deployment's answer to each benchmark category (long-context input, high-throughput batch,
        short fast output), on first use only (lint and the planner never read it); None when the engine
        cannot start."""
        if not self.loads or self.workload is None:
            return None
        return category_speeds(self.workload, self.efficiency, self.calibration)

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @property
    def kv_band(self) -> MemoryBand:
        """The measured error of the KV cache the engine allocates (startup logs not used to tune the model)."""
        return serving_band()

    def planned_kv_pool(self, confidence: float) -> int:
        """The KV cache a decision at ``confidence`` plans for: the band's low edge of the engine's pool."""
        return planned_kv_pool(self.memory, confidence)

    def planned_bytes(self, confidence: float) -> int:
        """The per-GPU figure a decision at ``confidence`` plans for (``planned_serving_bytes``)."""
        return planned_serving_bytes(self.memory, confidence)

    def fits_at(self, confidence: float) -> bool:
        """Whether the declared sequences (a burst's one) fit the KV cache the engine allocates at the band's
        low edge."""
        return self.memory.fits and self.memory.kv_cache <= self.planned_kv_pool(confidence)

    def fit_verdict(self, confidence: float) -> str:
        verdict = fit_verdict(self.fits, self.fits_at(confidence), confidence)
        # memory holds, yet the engine refuses the context (``loads``): a fit that runs nothing is not "fits"
        return verdict if self.loads or not self.fits else f"{verdict} in memory, but the engine cannot start"

    @functools.cached_property
    def max_concurrency(self) -> int:
        """Sequences of the full context the KV budget holds (computed on first use: the planner never needs it)."""
        return max_concurrency(self.memory)

    @functools.cached_property
    def max_context(self) -> int:
        """The longest context at ``required_sequences`` that fits (a binary search: on first use only)."""
        return max_context(evolve(self.setup, concurrency=self.required_sequences), self.memory)

    @property
    def required_sequences(self) -> int:
        """The sequences the KV cache is sized for: the declared concurrency, a burst's one (``ServingShape.at``)."""
        return 1 if self.setup.burst else self.setup.concurrency

    @property
    def loads(self) -> bool:
        """Whether the engine starts: vLLM refuses to unless the KV cache left after the weights and its
        reserves holds one sequence of the full context, nor at a context longer than the model takes
        (``context_limits``: vLLM's _get_and_verify_max_len; GP206). Speed and cost per token are figures of a running
        engine, so the outputs state them only when it loads (the GPUs' monthly price stands either way)."""
        memory = self.memory
        if beyond_model(self.setup.architecture, self.setup.context):
            return False
        return memory.kv_available > 0 and memory.kv_available >= memory.kv_bytes_per_sequence

    @property
    def kv_field(self) -> tuple[str, str]:
        """Where a finding about the KV cache points: the concurrency it is sized for, or a burst's context
        (its cache is sized for one sequence: ``ServingShape.at``)."""
        return ("serve", "context") if self.setup.burst else ("serve", "concurrency")

    @property
    def kv_need_words(self) -> str:
        """What the fit asks of the KV cache, in words: '32 x 8,192 tokens need 40.0 GiB of KV cache per GPU',
        or in a burst 'one 4,096-token sequence needs 0.5 GiB of KV cache per GPU (the burst's others wait
        their turn)'."""
        return self.kv_need_text(self.memory.kv_cache)

    def kv_need_text(self, need_bytes: float) -> str:
        """``kv_need_words`` for a need of ``need_bytes`` (verify's: at a run's own bytes per sequence)."""
        job, need = self.job, format_gib(need_bytes)
        if self.setup.burst:
            return (
                f"one {job.context:,}-token sequence needs {need} of KV cache per GPU"
                " (the engine starts with room for one; the burst's others wait their turn)"
            )
        return f"{job.concurrency:,} x {job.context:,} tokens need {need} of KV cache per GPU"

    @property
    def not_loaded_reason(self) -> str:
        """Why the engine cannot start, in words (for a layout that does not load)."""
        if beyond_model(self.setup.architecture, self.setup.context):
            return (
                f"a {self.setup.context:,}-token context is longer than the model takes "
                f"({self.setup.architecture.max_position:,} tokens), so the engine cannot start"
            )
        if self.memory.kv_available <= 0:
            return "the weights and the engine's reserves leave no room for a KV cache, so the engine cannot start"
        memory = self.memory
        if memory.state_bytes_per_sequence:  # tokens alone undercount a sequence: its recurrent state is apart
            need, has = format_gib_apart(memory.kv_bytes_per_sequence, memory.kv_available)
            return (
                f"the KV cache's {has} is less than one {self.setup.context:,}-token sequence needs ({need}, its "
                "recurrent state included), so the engine cannot start"
            )
        return (
            f"the KV cache holds {memory.kv_cache_tokens:,} tokens, less than one "
            f"{self.setup.context:,}-token sequence, so the engine cannot start"
        )

    @property
    def monthly_cost(self) -> float | None:
        return None if self.price_per_hour is None else self.paid_gpus * self.price_per_hour * HOURS_PER_MONTH

    @property
    def cost_per_million_tokens(self) -> float | None:
        if self.price_per_hour is None or self.speed.tokens_per_s <= 0 or not self.loads:
            return None
        cost = self.paid_gpus * self.price_per_hour / (self.speed.tokens_per_s * 3600) * 1e6
        return cost if math.isfinite(cost) else None  # a throughput too small to price (subnormal)


@record
class Analysis:
    spec: Spec
    finetune: FinetuneEstimate | None
    serve: ServeEstimate | None


def training_setup(spec: Spec, job: Finetune, gpus: int | None = None, tp: int | None = None) -> TrainingSetup:
    """``job`` on the spec's model; ``gpus`` and ``tp`` replace its hardware's count and TP degree."""
    if gpus or tp:
        hardware = job.hardware
        job = evolve(
            job, hardware=evolve(hardware, count=gpus or hardware.count, tensor_parallel=tp or hardware.tensor_parallel)
        )
    return TrainingSetup(spec.model.architecture, job, DTYPE_BYTES[spec.model.dtype])


def estimate_finetune(
    spec: Spec,
    job: Finetune,
    efficiency: Efficiency,
    gpu: Gpu | None = None,
    gpus: int | None = None,
    tp: int | None = None,
    calibration: Calibration = CALIBRATION,
    memory: TrainingMemory | None = None,
) -> FinetuneEstimate:
    """``memory``: the job's finetune_memory when the caller already has it (it does not depend on the GPU)."""
    gpu = gpu or job.hardware.gpu
    setup = training_setup(spec, job, gpus, tp)
    overhead = training_overhead(setup)
    memory = memory or estimate_training(setup, overhead)
    workload, speed = finetune_speed(setup, gpu, efficiency, calibration)
    price, source, paid = spec.priced(gpu, setup.gpus)
    return FinetuneEstimate(
        job,
        memory,
        setup,
        speed,
        gpu,
        setup.gpus,
        price,
        source,
        checkpoint_bytes(setup),
        functools.partial(finetune_assumptions, spec, job, efficiency, overhead, source, speed, calibration),
        training_speed_bands(),
        workload,
        billed_gpus=paid,
    )


def finetune_workload(setup: TrainingSetup, gpu: Gpu) -> TrainingWorkload:
    """What the training speed of the setup's job on ``gpu`` rests on (a step needs no token count; the
    run's hours do)."""
    return TrainingWorkload(setup, gpu, trainable_params(setup))


def finetune_speed(
    setup: TrainingSetup, gpu: Gpu, efficiency: Efficiency, calibration: Calibration = CALIBRATION
) -> tuple[TrainingWorkload, TrainingSpeed]:
    """(workload, speed) of the setup's job on ``gpu``; the speed's hours are None without a token count.
    No memory estimate is read (the trainable parameters come from the setup), so a cost floor needs none."""
    workload = finetune_workload(setup, gpu)
    return workload, training_speed(workload, efficiency, calibration)


def run_cost(speed: TrainingSpeed, gpus: int, price_per_hour: float | None) -> float | None:
    """A run's cost: its hours on ``gpus`` GPUs at ``price_per_hour`` each; None without either."""
    if speed.hours is None or price_per_hour is None:
        return None
    return speed.hours * gpus * price_per_hour


def training_overhead(setup: TrainingSetup) -> int:
    """Framework bytes per GPU beside the tensors: CUDA context and workspaces, plus the buffers of the NCCL
    communicators the job opens (none on one GPU)."""
    return TRAINING_OVERHEAD + nccl_bytes(setup.job.hardware.gpu, setup.communicators)


def finetune_memory(spec: Spec, job: Finetune) -> TrainingMemory:
    """Per-GPU memory of ``job`` as declared (no speed, no price): what estimate_finetune's fit rests on."""
    setup = training_setup(spec, job)
    return estimate_training(setup, training_overhead(setup))


def finetune_memory_floor(spec: Spec, job: Finetune) -> int:
    """A lower bound of ``finetune_memory(spec, job).per_gpu`` from the model states alone (the same for
    every micro-batch, recompute and loss setting of a layout; ``training.states_floor``), and the CUDA
    context: NCCL's buffers are left out, so that the bound never grows with the data-parallel ranks (the
    tensors shrink or stay as the ranks grow; the communicators' buffers grow)."""
    return states_floor(training_setup(spec, job)) + TRAINING_OVERHEAD


def finetune_tensor_bound(spec: Spec, job: Finetune) -> int:
    """A lower bound of ``finetune_memory(spec, job).per_gpu`` from the phase model (its tensors, no allocator
    cache) and the CUDA context, NCCL's buffers left out as ``finetune_memory_floor`` leaves them: a planner
    rules a layout's shape out on it before it runs the allocator, and a wider shape's is never above it."""
    return estimate_training(training_setup(spec, job), TRAINING_OVERHEAD, allocator=False).per_gpu


def serve_memory(spec: Spec, job: Serve, gpu: Gpu) -> ServingMemory:
    """Per-GPU serving memory of ``job`` on ``gpu`` (no speed, no price): what estimate_serve's fit rests on."""
    return estimate_serving(serving_setup(spec, job, gpu=gpu), gpu.usable_bytes)


def serve_shape(spec: Spec, job: Serve, gpu: Gpu) -> ServingShape:
    """serve_memory of ``job`` on ``gpu`` at any concurrency (``job.concurrency`` is not read)."""
    return shape_at_any_load(serving_setup(spec, job, gpu=gpu), gpu.usable_bytes)


def checkpoint_bytes(setup: TrainingSetup) -> int:
    """A resumable checkpoint: saved weights + optimizer states (+ fp32 master weights when mixed).

    The states are the optimizer's own (the function the memory model uses), unsharded. Full
    mixed-precision AdamW: 2 + 4 + 8 = 14 B/param (ZeRO paper section 3); LoRA: the adapters only.
    """
    job, trainable = setup.job, trainable_params(setup)
    if job.method == "full":
        _, _, state_bytes, _, _ = REGIMES[job.precision]
        master = 4 if has_master_weights(job.precision) else 0
        states, _ = optimizer_state_bytes(setup, trainable, state_bytes)
        return math.ceil(trainable * (setup.model_dtype_bytes + master) + states)
    states, _ = optimizer_state_bytes(setup, trainable, setup.lora_bytes)
    return math.ceil(trainable * setup.lora_bytes + states)


def planned_kv_pool(memory: ServingMemory, confidence: float) -> int:
    """The KV cache the engine allocates on one GPU at the low edge of the serving band at ``confidence``
    (an engine that allocates none stays at its estimate: it does not start either way)."""
    pool = memory.kv_available
    return pool if pool <= 0 else math.floor(serving_band().smallest(pool, confidence))


def planned_serving_bytes(memory: ServingMemory, confidence: float) -> int:
    """The per-GPU serving figure a decision at ``confidence`` plans for: the engine budget less the KV room
    the declared sequences leave in the pool at its low edge, so that it is within the budget exactly when
    they fit that smaller pool (for vLLM: the estimate, the CUDA graphs the budget pays for and what the
    pool may come short by; TensorRT-LLM's pool is a share of its room, within its cap); at least what the
    fullest pipeline stage's GPUs hold (``peak_per_gpu``, within the budget whenever the sequences fit the
    tightest stage's room, so the fit is unchanged and the headroom is the least any GPU keeps)."""
    return max(memory.budget - (planned_kv_pool(memory, confidence) - memory.kv_cache), memory.peak_per_gpu)


def engine_memory_limits(job: Serve, gpu: Gpu, tp: int, architecture: Architecture) -> tuple[int, int]:
    """(tokens, sequences) the engine's memory depends on, the spec's where it sets them, else as the engine
    defaults them for ``gpu`` at ``tp`` ranks: vLLM's profiled batch and sampler warm-up
    (``max_batched_tokens``, ``max_sequences``); SGLang's chunked_prefill_size (``max_batched_tokens``) and
    cuda_graph_max_bs; TensorRT-LLM's profiled max_num_tokens (``max_batched_tokens``) and max_batch_size."""
    engine = memory_engine(job.engine)
    if engine == SGLANG_ENGINE:
        chunked, graph_bs = sglang_sizes(gpu.memory_bytes, tp)
        return job.max_batched_tokens or chunked, graph_bs
    if engine == TRTLLM_ENGINE:
        return job.max_batched_tokens or TRTLLM_MAX_NUM_TOKENS, TRTLLM_MAX_BATCH_SIZE
    chunks = chunks_by_itself(architecture, gpu.arch, bool(job.lora), bool(job.speculation))
    default_batched, default_seqs = engine_batch_limits(
        gpu.memory_bytes, gpu.id, vllm_release(job.engine_version), job.context, chunks
    )
    return job.max_batched_tokens or default_batched, job.max_sequences or default_seqs


def memory_fraction(job: Serve, gpu: Gpu, tp: int | None = None) -> float:
    """``serve.memory_utilization`` as the engine runs it on ``gpu``: the spec's, else the engine's default
    (SGLang's depends on the GPU and the parallel layout)."""
    if job.memory_utilization is not None:
        return job.memory_utilization
    tensor_parallel = tp or job.hardware.tensor_parallel
    return default_memory_fraction(
        job.engine, gpu.memory_bytes, tensor_parallel, job.hardware.pipeline_parallel, vllm_release(job.engine_version)
    )


def serving_setup(spec: Spec, job: Serve, tp: int | None = None, gpu: Gpu | None = None) -> ServingSetup:
    gpu = gpu or job.hardware.gpu
    dtype_bytes = DTYPE_BYTES[spec.model.dtype]
    tensor_parallel = tp or job.hardware.tensor_parallel
    # The engine profiles with the limits it is configured with: the spec's, else its defaults for the GPU.
    max_batched, max_seqs = engine_memory_limits(job, gpu, tensor_parallel, spec.model.architecture)
    kv_bytes = dtype_bytes if job.kv_cache_dtype == "auto" else DTYPE_BYTES[job.kv_cache_dtype]
    tenants = tuple(
        Tenant(
            t.name,
            t.model.architecture,
            t.quantization,
            t.context,
            t.concurrency,
            DTYPE_BYTES[t.model.dtype],
            t.model.group_size,
            t.model.quantized_params if t.quantization == t.model.quantization else None,
        )
        for t in job.tenants
    )
    return ServingSetup(
        architecture=spec.model.architecture,
        context=job.context,
        concurrency=job.concurrency,
        burst=job.arrival == "burst",
        quantization=job.quantization,
        model_dtype_bytes=dtype_bytes,
        group_size=spec.model.group_size,
        # The checkpoint's 16-bit modules only matter when it is served in its own format.
        quantized_params=spec.model.quantized_params if job.quantization == spec.model.quantization else None,
        kv_dtype_bytes=kv_bytes,
        tensor_parallel=tensor_parallel,
        pipeline_parallel=job.hardware.pipeline_parallel,
        expert_parallel=job.hardware.expert_parallel,
        memory_utilization=memory_fraction(job, gpu, tensor_parallel),
        max_batched_tokens=max_batched,
        max_num_seqs=max_seqs,
        tenants=tenants,
        engine=job.engine,
        memory_cap=job.max_gpu_total_bytes or 0,
        lora=job.lora,
        speculation=job.speculation,
        # vLLM pads MXFP4 experts for its kernels (the model's or a tenant's); other engines are not modelled so
        expert_alignment=mxfp4_moe_alignment(gpu.arch)
        if job.engine == "vllm" and "mxfp4" in job.quantizations
        else (1, 1),
        release=vllm_release(job.engine_version).for_deployment(
            spec.model.classes,
            spec.model.architecture,
            job.quantization != "none",  # the checkpoint served carries a quantization_config (is_quantized)
            job.speculation.method if job.speculation else "",
            gpu.arch,
        ),
        gpu_arch=gpu.arch,
    )


def estimate_serve(
    spec: Spec,
    job: Serve,
    efficiency: Efficiency,
    gpu: Gpu | None = None,
    tp: int | None = None,
    gpus: int | None = None,
    calibration: Calibration = CALIBRATION,
    memory: ServingMemory | None = None,
    speed: ServingSpeed | None = None,
    workload: ServingWorkload | None = None,
) -> ServeEstimate:
    """``memory``, ``speed`` and ``workload``: the job's serve_memory on ``gpu``, the speed of its
    serving_workload and that workload when the caller already has them (the planner does)."""
    gpu = gpu or job.hardware.gpu
    setup = serving_setup(spec, job, tp, gpu)
    memory = memory or estimate_serving(setup, gpu.usable_bytes)
    count = gpus or job.hardware.count
    workload = workload or serving_workload(spec, job, setup, memory.kv_available, gpu, count)
    speed = speed or serving_speed(workload, efficiency, calibration)
    price, source, paid = spec.priced(gpu, count)
    return ServeEstimate(
        job,
        memory,
        setup,
        speed,
        gpu,
        count,
        price,
        source,
        functools.partial(serve_assumptions, spec, job, setup, efficiency, source, speed, calibration),
        serving_speed_bands(job.arrival, job.output_tokens),
        workload,
        efficiency,
        calibration,
        billed_gpus=paid,
    )


def serving_workload(
    spec: Spec, job: Serve, setup: ServingSetup, kv_available: float, gpu: Gpu, count: int
) -> ServingWorkload:
    """What the serving speed of ``job`` rests on, from its setup and the KV space per GPU its memory
    leaves (``ServingMemory.kv_available``) on ``count`` GPUs."""
    return workload_at_load(deployment_workload(spec, job, setup, gpu), kv_available, job.concurrency, count)


def deployment_workload(spec: Spec, job: Serve, setup: ServingSetup, gpu: Gpu) -> ServingWorkload:
    """The part of ``serving_workload`` that one GPU kind and TP x PP split fix, whatever the load: its
    load (KV space per GPU, sequences per replica, replicas) is left at zero for ``workload_at_load`` to
    set (a planner tries many loads of one split)."""
    arch = spec.model.architecture
    reads = decode_weight_reads(setup)
    heaviest = max(reads)
    # The batched LoRA kernels read the A and B of each adapter in the batch: one slot's bytes on the stage
    # that reads the most, counted per adapter in each step by the speed model.
    slots, _ = added_stage_weights(setup)
    adapter = slots[reads.index(heaviest)] / job.lora.max_adapters if job.lora else 0.0
    return ServingWorkload(
        architecture=arch,
        gpu=gpu,
        weights_read=heaviest,
        weights_above_mean=heaviest - sum(reads) / len(reads),
        routed_expert_bytes=routed_expert_bytes(arch, job.quantization, setup.model_dtype_bytes, setup.group_size),
        kv_dtype_bytes=setup.kv_dtype_bytes,
        kv_capacity_bytes=0.0,
        prompt_tokens=job.mean_prompt,
        prompt_p90=job.prompt_p90 or job.mean_prompt,
        full_prompt=job.full_prompt,
        output_tokens=job.output_tokens,
        output_p90=job.output_p90 or 0,
        concurrency=0,
        quantization=job.quantization,
        engine=job.engine,
        batching=job.batching,
        tensor_parallel=setup.tensor_parallel,
        pipeline_parallel=setup.pipeline_parallel,
        expert_parallel=setup.expert_parallel,
        replicas=0,
        max_batched_tokens=job.max_batched_tokens,
        max_sequences=job.max_sequences,
        engine_version=job.engine_version,
        network_gbs=job.hardware.network_gbs,
        state_dtype_bytes=setup.model_dtype_bytes,
        arrival=job.arrival,
        rate_rps=job.rate_rps,
        endpoint=job.endpoint,
        speculation=_proposer_workload(job, setup, gpu),
        adapter_slots=job.lora.max_adapters if job.lora else 0,
        adapter_bytes=adapter,
    )


def _proposer_workload(job: Serve, setup: ServingSetup, gpu: Gpu) -> SpeculativeWorkload | None:
    """The speculative proposer's step as a one-stage deployment of its own (None without speculation)."""
    speculation = job.speculation
    if speculation is None:
        return None
    target, tp = setup.architecture, setup.tensor_parallel
    proposer = proposer_architecture(target, speculation)
    experts = routed_expert_bytes(proposer, "none", setup.model_dtype_bytes)
    return SpeculativeWorkload(
        speculation.num_tokens,
        speculation.acceptance_rate,
        ServingWorkload(
            architecture=proposer,
            gpu=gpu,
            weights_read=proposer_read_bytes(target, speculation, setup.model_dtype_bytes, tp) - experts / tp,
            routed_expert_bytes=experts,
            kv_dtype_bytes=setup.kv_dtype_bytes,
            kv_capacity_bytes=math.inf,
            prompt_tokens=job.mean_prompt,
            prompt_p90=job.prompt_p90 or job.mean_prompt,
            full_prompt=job.full_prompt,
            output_tokens=job.output_tokens,
            concurrency=job.concurrency,
            quantization="none",
            engine=job.engine,
            batching=job.batching,
            tensor_parallel=tp,
            pipeline_parallel=1,  # the proposer runs on one stage (speculative.proposer_read_bytes)
            expert_parallel=setup.expert_parallel,
            arrival=job.arrival,
            endpoint="offline",  # it runs inside the engine: no front end of its own
            max_batched_tokens=job.max_batched_tokens,
            max_sequences=job.max_sequences,
            network_gbs=job.hardware.network_gbs,
            state_dtype_bytes=setup.model_dtype_bytes,
        ),
    )


def workload_at_load(deployment: ServingWorkload, kv_available: float, concurrency: int, count: int) -> ServingWorkload:
    """``deployment`` on ``count`` GPUs with ``concurrency`` sequences per replica and the given KV space
    per GPU (negative KV space: none)."""
    replicas = layout_replicas(count, deployment.tensor_parallel, deployment.pipeline_parallel)
    return evolve(
        deployment,
        kv_capacity_bytes=max(0.0, kv_available),
        concurrency=concurrency,
        replicas=replicas,
    )


def analyse(spec: Spec, efficiency: Efficiency | None = None, calibration: Calibration = CALIBRATION) -> Analysis:
    efficiency = efficiency or Efficiency()
    finetune = estimate_finetune(spec, spec.finetune, efficiency, calibration=calibration) if spec.finetune else None
    serve = estimate_serve(spec, spec.serve, efficiency, calibration=calibration) if spec.serve else None
    return Analysis(spec, finetune, serve)
