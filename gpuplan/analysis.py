"""The estimate of one resolved spec: memory, speed, cost and storage per job, with the assumptions used."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from gpuplan.catalog import Gpu
from gpuplan.estimate.performance import Efficiency, ServingSpeed, TrainingSpeed, serving_speed, training_speed
from gpuplan.estimate.serving import (
    ServingMemory,
    ServingSetup,
    Tenant,
    estimate_serving,
    max_concurrency,
    max_context,
)
from gpuplan.estimate.training import REGIMES, TrainingMemory, TrainingSetup, estimate_training
from gpuplan.spec import HOURS_PER_MONTH, Finetune, Serve, Spec
from gpuplan.units import DTYPE_BYTES, GIB

# CUDA context, cuBLAS/cuDNN workspaces and allocator slack per training process: measured 0.3-2 GiB
# (vram-calculator blog; the calculator itself uses 1000 MiB). NCCL buffers add ~0.5 GiB multi-GPU.
TRAINING_OVERHEAD = GIB
NCCL_OVERHEAD = GIB // 2
OPTIMIZER_NOTES = {
    "adamw": "AdamW, PyTorch foreach: two states and one trainable-size temporary at the step",
    "adamw-fused": "AdamW fused kernel: two states, no step temporary",
    "adamw-8bit": "bitsandbytes 8-bit AdamW: two 1-byte states + block constants (block 2048)",
    "sgd": "SGD with momentum: one state",
    "adafactor": "Adafactor: factored fp32 second moment (rows + columns), no first moment",
}
# Bytes per parameter of a resumable checkpoint: saved weights + optimizer states (+ fp32 master).
CHECKPOINT_STATE_BYTES = {"adamw": 8, "adamw-fused": 8, "adamw-8bit": 2, "sgd": 4, "adafactor": 0}


@dataclass(frozen=True)
class FinetuneEstimate:
    job: Finetune
    memory: TrainingMemory
    setup: TrainingSetup
    speed: TrainingSpeed | None
    gpu: Gpu
    gpus: int
    price_per_hour: float | None
    price_source: str
    checkpoint_bytes: int
    assumptions: tuple[tuple[str, str], ...]

    @property
    def fits(self) -> bool:
        return self.memory.per_gpu <= self.gpu.usable_bytes

    @property
    def cost(self) -> float | None:
        if self.speed is None or self.price_per_hour is None:
            return None
        return self.speed.hours * self.gpus * self.price_per_hour


@dataclass(frozen=True)
class ServeEstimate:
    job: Serve
    memory: ServingMemory
    setup: ServingSetup
    speed: ServingSpeed
    gpu: Gpu
    gpus: int
    price_per_hour: float | None
    price_source: str
    assumptions: tuple[tuple[str, str], ...]

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @functools.cached_property
    def max_concurrency(self) -> int:
        """Sequences of the full context the KV budget holds (computed on first use: the planner never needs it)."""
        return max_concurrency(self.memory)

    @functools.cached_property
    def max_context(self) -> int:
        """The longest context at the declared concurrency that fits (a binary search: on first use only)."""
        return max_context(self.setup, self.memory)

    @property
    def monthly_cost(self) -> float | None:
        return None if self.price_per_hour is None else self.gpus * self.price_per_hour * HOURS_PER_MONTH

    @property
    def cost_per_million_tokens(self) -> float | None:
        if self.price_per_hour is None or self.speed.tokens_per_s <= 0:
            return None
        return self.gpus * self.price_per_hour / (self.speed.tokens_per_s * 3600) * 1e6


@dataclass(frozen=True)
class Analysis:
    spec: Spec
    finetune: FinetuneEstimate | None
    serve: ServeEstimate | None


def training_setup(spec: Spec, job: Finetune, gpus: int | None = None, tp: int | None = None) -> TrainingSetup:
    hardware = job.hardware
    return TrainingSetup(
        architecture=spec.model.architecture,
        method=job.method,
        precision=job.precision,
        optimizer=job.optimizer,
        model_dtype_bytes=DTYPE_BYTES[spec.model.dtype],
        lora_rank=job.lora_rank,
        lora_targets=job.lora_targets,
        lora_bytes=DTYPE_BYTES[job.lora_dtype],
        micro_batch=job.micro_batch,
        seq_len=job.seq_len,
        gradient_accumulation=job.gradient_accumulation,
        checkpointing=job.checkpointing,
        attention=job.attention,
        fused_loss=job.fused_loss,
        sharding=job.sharding,
        tensor_parallel=tp or hardware.tensor_parallel,
        pipeline_parallel=hardware.pipeline_parallel,
        gpus=gpus or hardware.count,
    )


def estimate_finetune(
    spec: Spec,
    job: Finetune,
    efficiency: Efficiency,
    gpu: Gpu | None = None,
    gpus: int | None = None,
    tp: int | None = None,
    memory: TrainingMemory | None = None,
) -> FinetuneEstimate:
    """``memory``: the job's finetune_memory when the caller already has it (it does not depend on the GPU)."""
    gpu = gpu or job.hardware.gpu
    setup = training_setup(spec, job, gpus, tp)
    overhead = training_overhead(setup)
    memory = memory or estimate_training(setup, overhead)
    speed = None
    if job.tokens:
        grad_bytes = memory.trainable_params * (2 if job.method == "full" else setup.lora_bytes)
        speed = training_speed(
            spec.model.architecture,
            gpu,
            method=job.method,
            checkpointing=job.checkpointing,
            seq_len=job.seq_len,
            tokens_per_step_per_gpu=job.micro_batch * job.seq_len * job.gradient_accumulation,
            total_tokens=job.tokens,
            gpus=setup.gpus,
            data_parallel=setup.data_parallel,
            tensor_parallel=setup.tensor_parallel,
            gradient_bytes=grad_bytes / setup.tensor_parallel,
            efficiency=efficiency,
        )
    price, source = spec.price(gpu)
    return FinetuneEstimate(
        job,
        memory,
        setup,
        speed,
        gpu,
        setup.gpus,
        price,
        source,
        checkpoint_bytes(spec, job, memory),
        _finetune_assumptions(spec, job, efficiency, overhead, source),
    )


def training_overhead(setup: TrainingSetup) -> int:
    """Framework bytes per GPU beside the tensors: CUDA context and workspaces, plus NCCL when multi-GPU."""
    return TRAINING_OVERHEAD + (NCCL_OVERHEAD if setup.gpus > 1 else 0)


def finetune_memory(spec: Spec, job: Finetune) -> TrainingMemory:
    """Per-GPU memory of ``job`` as declared (no speed, no price): what estimate_finetune's fit rests on."""
    setup = training_setup(spec, job)
    return estimate_training(setup, training_overhead(setup))


def serve_memory(spec: Spec, job: Serve, gpu: Gpu) -> ServingMemory:
    """Per-GPU serving memory of ``job`` on ``gpu`` (no speed, no price): what estimate_serve's fit rests on."""
    return estimate_serving(serving_setup(spec, job), gpu.usable_bytes)


def checkpoint_bytes(spec: Spec, job: Finetune, memory: TrainingMemory) -> int:
    """A resumable checkpoint: saved weights + optimizer states (+ fp32 master weights when mixed).

    Full mixed-precision AdamW: 2 + 4 + 8 = 14 B/param (estimation.md 2.12); LoRA: the adapters only.
    """
    states = CHECKPOINT_STATE_BYTES[job.optimizer]
    if job.method == "full":
        _, _, state_bytes, _, _ = REGIMES[job.precision]
        master = 4 if job.precision in ("bf16-mixed", "fp16-mixed") else 0
        per_param = DTYPE_BYTES[spec.model.dtype] + master + states * state_bytes / 4
        return math.ceil(memory.params * per_param)
    adapter_bytes = DTYPE_BYTES[job.lora_dtype]
    return math.ceil(memory.trainable_params * (adapter_bytes + states * adapter_bytes / 4))


def serving_setup(spec: Spec, job: Serve, tp: int | None = None) -> ServingSetup:
    dtype_bytes = DTYPE_BYTES[spec.model.dtype]
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
        )
        for t in job.tenants
    )
    return ServingSetup(
        architecture=spec.model.architecture,
        context=job.context,
        concurrency=job.concurrency,
        quantization=job.quantization,
        model_dtype_bytes=dtype_bytes,
        group_size=spec.model.group_size,
        kv_dtype_bytes=kv_bytes,
        tensor_parallel=tp or job.hardware.tensor_parallel,
        pipeline_parallel=job.hardware.pipeline_parallel,
        memory_utilization=job.memory_utilization,
        tenants=tenants,
    )


def estimate_serve(
    spec: Spec,
    job: Serve,
    efficiency: Efficiency,
    gpu: Gpu | None = None,
    tp: int | None = None,
    gpus: int | None = None,
) -> ServeEstimate:
    gpu = gpu or job.hardware.gpu
    setup = serving_setup(spec, job, tp)
    memory = estimate_serving(setup, gpu.usable_bytes)
    count = gpus or job.hardware.count
    replicas = max(1, count // (setup.tensor_parallel * setup.pipeline_parallel))
    speed = serving_speed(
        spec.model.architecture,
        gpu,
        weights_per_gpu=memory.weights,
        kv_bytes_per_token=memory.kv_bytes_per_token,
        context=job.context,
        output_tokens=job.output_tokens,
        concurrency=job.concurrency,
        quantization=job.quantization,
        tensor_parallel=setup.tensor_parallel,
        replicas=replicas,
        efficiency=efficiency,
    )
    price, source = spec.price(gpu)
    return ServeEstimate(
        job,
        memory,
        setup,
        speed,
        gpu,
        count,
        price,
        source,
        _serve_assumptions(spec, job, efficiency, source),
    )


def analyse(spec: Spec, efficiency: Efficiency | None = None) -> Analysis:
    efficiency = efficiency or Efficiency()
    finetune = estimate_finetune(spec, spec.finetune, efficiency) if spec.finetune else None
    serve = estimate_serve(spec, spec.serve, efficiency) if spec.serve else None
    return Analysis(spec, finetune, serve)


def _finetune_assumptions(
    spec: Spec, job: Finetune, efficiency: Efficiency, overhead: int, price: str
) -> tuple[tuple[str, str], ...]:
    return (
        ("precision", f"{job.precision}: weights/grads/states/activations bytes {REGIMES[job.precision][:4]}"),
        ("optimizer", OPTIMIZER_NOTES[job.optimizer]),
        ("attention", f"{job.attention} (SDPA/FlashAttention keeps O(s) per layer; eager keeps s x s scores)"),
        (
            "loss",
            "fused/chunked cross-entropy" if job.fused_loss else "logits upcast to fp32 for the loss (Hugging Face)",
        ),
        (
            "lora",
            f"rank {job.lora_rank}, adapters {job.lora_dtype} on {', '.join(job.lora_targets)}"
            if job.method != "full"
            else "n/a",
        ),
        (
            "qlora base",
            "NF4 + double quantization: 0.516 B/param for linears; embeddings/LM head bf16"
            if job.method == "qlora"
            else "n/a",
        ),
        (
            "framework overhead",
            f"{overhead / GIB:.1f} GiB per GPU (CUDA context, workspaces{', NCCL' if overhead > GIB else ''})",
        ),
        ("training MFU", f"{efficiency.training_mfu:.0%} of dense bf16 peak (typical 25-45%)"),
        ("price", price),
    )


def _serve_assumptions(spec: Spec, job: Serve, efficiency: Efficiency, price: str) -> tuple[tuple[str, str], ...]:
    return (
        ("engine", f"vLLM-style: {job.memory_utilization:.0%} of GPU memory, 16-token KV blocks"),
        ("kv cache dtype", job.kv_cache_dtype if job.kv_cache_dtype != "auto" else f"auto ({spec.model.dtype})"),
        ("activation reserve", "one 8,192-token prefill batch + sampler for 256 sequences + 1 GiB CUDA graphs"),
        ("prefill MFU", f"{efficiency.prefill_mfu:.0%}"),
        ("decode bandwidth efficiency", f"{efficiency.decode_bandwidth:.0%} of peak HBM bandwidth"),
        ("prompt", f"context - output_tokens = {max(1, job.context - job.output_tokens):,} tokens for TTFT"),
        ("month", f"{HOURS_PER_MONTH} hours"),
        ("price", price),
    )


def to_dict(analysis: Analysis) -> dict[str, Any]:
    """The documented JSON object of ``gpuplan estimate --format json``."""
    result: dict[str, Any] = {"name": analysis.spec.name, "model": analysis.spec.model.label}
    if analysis.finetune:
        f = analysis.finetune
        result["finetune"] = {
            "params": f.memory.params,
            "trainable_params": f.memory.trainable_params,
            "per_gpu_bytes": f.memory.per_gpu,
            "peak_phase": f.memory.peak_phase,
            "breakdown": f.memory.breakdown,
            "phases": f.memory.phases,
            "gpu": f.gpu.id,
            "gpus": f.gpus,
            "usable_bytes": f.gpu.usable_bytes,
            "fits": f.fits,
            "training_hours": None if f.speed is None else round(f.speed.hours, 3),
            "cost": None if f.cost is None else round(f.cost, 2),
            "price_per_gpu_hour": f.price_per_hour,
            "checkpoint_bytes": f.checkpoint_bytes,
            "assumptions": dict(f.assumptions),
        }
    if analysis.serve:
        s = analysis.serve
        result["serve"] = {
            "params": s.setup.architecture.params,
            "per_gpu_bytes": s.memory.per_gpu,
            "breakdown": s.memory.breakdown,
            "gpu": s.gpu.id,
            "gpus": s.gpus,
            "usable_bytes": s.memory.budget,
            "fits": s.fits,
            "kv_bytes_per_token": s.memory.kv_bytes_per_token,
            "max_concurrency": s.max_concurrency,
            "max_context": s.max_context,
            "ttft_ms": round(s.speed.ttft_s * 1000, 1),
            "tpot_ms": round(s.speed.tpot_s * 1000, 2),
            "tokens_per_s": round(s.speed.tokens_per_s, 1),
            "monthly_cost": None if s.monthly_cost is None else round(s.monthly_cost, 2),
            "cost_per_million_tokens": None
            if s.cost_per_million_tokens is None
            else round(s.cost_per_million_tokens, 3),
            "price_per_gpu_hour": s.price_per_hour,
            "assumptions": dict(s.assumptions),
        }
    return result
