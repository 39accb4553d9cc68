"""Roofline bounds: TTFT (prefill, compute-bound), TPOT (decode, memory-bound), training time.

Sources: prefill/decode roofline as in LLM-Viewer (Yuan et al. 2024, arXiv 2402.16363) and
cli99/llm-analysis; training FLOPs 6*N*D (Kaplan et al. 2020; EleutherAI Transformer Math 101) with
causal attention 6*L*s*d_attn per token (PaLM appendix B); ring all-reduce 2(n-1)/n*S/bw (NCCL tests).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.architecture import Architecture
from gpuplan.catalog import Gpu

INTER_NODE_GBS = 50.0  # 400 Gb/s NIC per GPU, one direction, when a job spans NVLink domains
TP_ALLREDUCE_LATENCY_NVLINK = 10e-6  # seconds per latency-bound all-reduce (decode)
TP_ALLREDUCE_LATENCY_PCIE = 30e-6


@dataclass(frozen=True)
class Efficiency:
    """Achieved fractions of peak; documented defaults, overridable in configuration."""

    prefill_mfu: float = 0.5  # 0.4-0.7 typical (llm-analysis README)
    decode_bandwidth: float = 0.8  # 0.7-0.9 typical HBM efficiency
    decode_mfu: float = 0.5
    training_mfu: float = 0.35  # single-node fine-tuning: 0.25-0.45 (estimation.md 2.10)


@dataclass(frozen=True)
class ServingSpeed:
    ttft_s: float
    tpot_s: float
    tokens_per_s: float  # aggregate output tokens per second over all replicas
    decode_bound: str  # memory | compute
    prefill_flops: float
    decode_bytes_per_step: float


def compute_dtype(quantization: str, gpu: Gpu) -> str:
    """fp8 and int8 weights run fp8/int8 GEMMs where the GPU has them; 4-bit formats dequantize to 16-bit."""
    if quantization in ("fp8", "int8") and gpu.tflops.get(quantization):
        return quantization
    return "bf16"


def prefill_flops(arch: Architecture, prompt_tokens: int) -> float:
    """2 x active params per token + causal attention 2 x s^2 x (heads x head_dim) per layer."""
    return 2 * arch.active_params * prompt_tokens + 2 * arch.layers * prompt_tokens**2 * arch.q_width


def expert_fraction_read(arch: Architecture, batch: int) -> float:
    """Expected share of routed experts a decode step touches with uniform routing: 1-(1-k/E)^B."""
    if not arch.is_moe:
        return 1.0
    return 1 - (1 - arch.experts_per_token / arch.experts) ** batch


def serving_speed(
    arch: Architecture,
    gpu: Gpu,
    *,
    weights_per_gpu: float,
    kv_bytes_per_token: float,
    context: int,
    output_tokens: int,
    concurrency: int,
    quantization: str,
    tensor_parallel: int,
    replicas: int,
    efficiency: Efficiency,
) -> ServingSpeed:
    prompt = max(1, context - output_tokens)
    flops = prefill_flops(arch, prompt)
    peak = gpu.peak_flops(compute_dtype(quantization, gpu))
    ttft = flops / (tensor_parallel * peak * efficiency.prefill_mfu)
    average_context = prompt + output_tokens / 2
    if arch.is_moe:
        expert_weights = weights_per_gpu * (arch.params - arch.active_params) / arch.params
        touched = expert_weights * (1 - expert_fraction_read(arch, concurrency))
        weights_read = weights_per_gpu - touched
    else:
        weights_read = weights_per_gpu
    kv_read = concurrency * average_context * kv_bytes_per_token
    memory_time = (weights_read + kv_read) / (gpu.bandwidth * efficiency.decode_bandwidth)
    # 2 FLOPs per active weight per sequence, plus QK^T and PV over the cached context: 2 x 2 x d_attn per
    # cached token per layer (estimation.md 2.9).
    decode_flops = 2 * arch.active_params * concurrency + 4 * arch.layers * arch.q_width * concurrency * average_context
    compute_time = decode_flops / (tensor_parallel * peak * efficiency.decode_mfu)
    comm = 0.0
    if tensor_parallel > 1:
        latency = (
            TP_ALLREDUCE_LATENCY_NVLINK
            if gpu.has_nvlink and tensor_parallel <= gpu.domain
            else TP_ALLREDUCE_LATENCY_PCIE
        )
        comm = 2 * arch.layers * latency
    tpot = max(memory_time, compute_time) + comm
    return ServingSpeed(
        ttft_s=ttft,
        tpot_s=tpot,
        tokens_per_s=replicas * concurrency / tpot,
        decode_bound="memory" if memory_time >= compute_time else "compute",
        prefill_flops=flops,
        decode_bytes_per_step=weights_read + kv_read,
    )


@dataclass(frozen=True)
class TrainingSpeed:
    flops_per_token: float
    hours: float
    step_compute_s: float
    gradient_sync_s: float
    tokens_per_s: float


def training_flops_per_token(arch: Architecture, method: str, checkpointing: bool, seq_len: int) -> float:
    """Full: 6N (+2N recompute); LoRA/QLoRA: forward 2N + input gradients 2N (+2N recompute)."""
    passes = 6 if method == "full" else 4
    if checkpointing:
        passes += 2
    attention = passes * arch.layers * seq_len * arch.q_width  # causal: half of 2 x s x d per matmul pair
    return passes * arch.active_params + attention


def sync_bandwidth(gpu: Gpu, data_parallel: int, tensor_parallel: int) -> float:
    """Bytes/s per direction for gradient all-reduce across the data-parallel group."""
    span = data_parallel * tensor_parallel
    if gpu.has_nvlink and span <= gpu.domain:
        return gpu.interconnect_gbs / 2 * 1e9
    if span <= 8:  # one host: PCIe through the host bridge
        return gpu.pcie_gbs / 2 * 1e9
    return min(gpu.pcie_gbs / 2, INTER_NODE_GBS) * 1e9


def training_speed(
    arch: Architecture,
    gpu: Gpu,
    *,
    method: str,
    checkpointing: bool,
    seq_len: int,
    tokens_per_step_per_gpu: int,
    total_tokens: int,
    gpus: int,
    data_parallel: int,
    tensor_parallel: int,
    gradient_bytes: float,
    efficiency: Efficiency,
) -> TrainingSpeed:
    per_token = training_flops_per_token(arch, method, checkpointing, seq_len)
    rate = gpu.peak_flops("bf16") * efficiency.training_mfu
    step_compute = tokens_per_step_per_gpu * per_token / (rate * tensor_parallel)
    sync = 0.0
    if data_parallel > 1:
        volume = 2 * (data_parallel - 1) / data_parallel * gradient_bytes
        sync = volume / sync_bandwidth(gpu, data_parallel, tensor_parallel)
    seconds = total_tokens * per_token / (gpus * rate)
    return TrainingSpeed(per_token, seconds / 3600, step_compute, sync, total_tokens / seconds if seconds else 0.0)
