"""Serving memory per GPU: weights by quantization, a paged KV cache, and the engine's runtime reserve.

Mirrors vLLM's sizing (vllm/v1/worker/gpu_worker.py ``determine_available_memory`` and
vllm/v1/core/kv_cache_utils.py): the engine may use ``memory_utilization x`` the GPU's memory for
weights + activation peak + non-torch allocations + KV cache, in blocks of 16 tokens per sequence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.architecture import Architecture
from gpuplan.units import GIB, MIB

BLOCK_TOKENS = 16  # vLLM default block_size on CUDA
MAX_BATCHED_TOKENS = 8192  # vLLM V1 default max_num_batched_tokens for online serving
MAX_SAMPLED_SEQS = 256  # vLLM default max_num_seqs: sampler warm-up batch
CUDA_GRAPH_RESERVE = GIB  # CUDA graphs and compile workspaces; vLLM logs 0.3-1.5 GiB per GPU
NON_TORCH_TP1 = 256 * MIB  # NCCL/cuBLAS outside torch: 0.13 GiB at TP1 in llm-d's H100 logs
NON_TORCH_TP = 640 * MIB  # 0.55 GiB at TP2 in the same logs (custom all-reduce buffers)


# Values per scale of the FP4 block formats (NVFP4: fp8 scale per 16; MXFP4: e8m0 scale per 32).
FP4_BLOCK = {"nvfp4": 16, "mxfp4": 32}


# Bits per weight of quantized linears; embeddings, LM head, norms and biases stay 16-bit.
def quant_linear_bytes(quantization: str, group_size: int = 128) -> float:
    """Bytes per weight of a quantized linear (estimation.md 2.6, from the checkpoint tensor layout).

    fp8 e4m3 and int8 W8A8 carry per-tensor/per-channel scales (negligible); AWQ/GPTQ 4-bit store an
    fp16 scale and a 4-bit zero point per group of ``group_size`` weights: 4 + 20/g bits. The FP4 block
    formats store one scale per block: NVFP4 an fp8 e4m3 scale per 16 values (4 + 8/16 = 4.5 bits, plus a
    per-tensor fp32 scale; NVIDIA ModelOpt / TensorRT-LLM NVFP4 layout), MXFP4 an e8m0 scale per 32 values
    (4 + 8/32 = 4.25 bits; OCP Microscaling Formats spec v1.0, as gpt-oss ships its experts).
    """
    if quantization in ("fp8", "int8"):
        return 1.0
    if quantization in FP4_BLOCK:
        return (4 + 8 / FP4_BLOCK[quantization]) / 8
    return (4 + 20 / group_size) / 8


@dataclass(frozen=True)
class Tenant:
    name: str
    architecture: Architecture
    quantization: str
    context: int
    concurrency: int
    model_dtype_bytes: int = 2
    group_size: int = 128


@dataclass(frozen=True)
class ServingSetup:
    architecture: Architecture
    context: int
    concurrency: int
    quantization: str = "none"
    model_dtype_bytes: int = 2
    group_size: int = 128  # AWQ/GPTQ group size (from the checkpoint's quantization_config)
    kv_dtype_bytes: int = 2
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    expert_parallel: int = 1
    memory_utilization: float = 0.9
    tenants: tuple[Tenant, ...] = ()


@dataclass(frozen=True)
class ServingMemory:
    weights: int
    kv_cache: int
    activation_reserve: int
    runtime: int
    tenant_weights: int
    tenant_kv_cache: int
    budget: int  # usable bytes x memory utilization
    kv_bytes_per_sequence: int
    kv_bytes_per_token: float  # all layers on one GPU, full-attention layers only

    @property
    def breakdown(self) -> dict[str, int]:
        parts = {
            "weights": self.weights,
            "kv_cache": self.kv_cache,
            "activations": self.activation_reserve,
            "runtime": self.runtime,
        }
        if self.tenant_weights or self.tenant_kv_cache:
            parts["tenant_weights"] = self.tenant_weights
            parts["tenant_kv_cache"] = self.tenant_kv_cache
        return parts

    @property
    def per_gpu(self) -> int:
        return sum(self.breakdown.values())

    @property
    def kv_available(self) -> int:
        """KV bytes the engine can allocate after everything else (may be negative)."""
        return self.budget - (self.per_gpu - self.kv_cache)

    @property
    def fits(self) -> bool:
        return self.per_gpu <= self.budget


def weight_bytes(arch: Architecture, quantization: str, dtype_bytes: int, group_size: int = 128) -> float:
    """All weights of the model in bytes (not yet split over GPUs)."""
    if quantization == "none":
        return arch.params * dtype_bytes
    linear = arch.linear_params()
    return linear * quant_linear_bytes(quantization, group_size) + (arch.params - linear) * 2


def routed_expert_bytes(arch: Architecture, quantization: str, dtype_bytes: int, group_size: int = 128) -> float:
    """Bytes of all routed experts of the model (0 for a dense model); shared experts are not routed."""
    if not arch.is_moe:
        return 0.0
    per_param = dtype_bytes if quantization == "none" else quant_linear_bytes(quantization, group_size)
    return arch.moe_layers * arch.experts * arch.dense_mlp_params(arch.expert_width) * per_param


def per_gpu_weights(
    arch: Architecture, quantization: str, dtype_bytes: int, tp: int, pp: int, group_size: int = 128, ep: int = 1
) -> float:
    """Weight bytes on the most loaded GPU of a replica.

    Tensor parallelism splits every linear; with expert parallelism (``ep`` > 1) each GPU instead holds
    ceil(E / ep) whole routed experts (vLLM ``--enable-expert-parallel``, SGLang ``--ep-size``), while
    attention, shared experts and dense layers stay split by TP.
    """
    total = weight_bytes(arch, quantization, dtype_bytes, group_size)
    edges = (arch.embedding_params() + arch.lm_head_params()) * (dtype_bytes if quantization == "none" else 2)
    small = arch.small_params() * (dtype_bytes if quantization == "none" else 2)
    layers = total - edges - small
    stage_layers = math.ceil(arch.layers / pp) / arch.layers
    edge_share = edges if pp == 1 else edges / 2
    experts = routed_expert_bytes(arch, quantization, dtype_bytes, group_size) if ep > 1 else 0.0
    local_experts = experts * math.ceil(arch.experts / ep) / arch.experts if experts else 0.0
    return (
        (layers - experts) * stage_layers / tp + local_experts * stage_layers + edge_share / tp + small * stage_layers
    )


def cached_tokens(arch: Architecture, context: int, sliding: bool) -> int:
    """Tokens one sequence reserves in one layer's cache, rounded up to whole blocks (vLLM)."""
    if sliding and arch.sliding_window and arch.sliding_window < context:
        window = min(arch.sliding_window - 1 + MAX_BATCHED_TOKENS, context)
        return (math.ceil(window / BLOCK_TOKENS) + 1) * BLOCK_TOKENS
    return math.ceil(context / BLOCK_TOKENS) * BLOCK_TOKENS


def kv_bytes_per_sequence(arch: Architecture, context: int, kv_bytes: float, tp: int, pp: int) -> float:
    """KV bytes one sequence of ``context`` tokens needs on one GPU, per layer kind."""
    per_layer_token = arch.kv_elements_per_token_per_layer(tp) * kv_bytes
    layers = math.ceil(arch.layers / pp)
    sliding_layers = math.ceil(arch.sliding_layer_count / pp)
    full_layers = layers - sliding_layers
    return per_layer_token * (
        full_layers * cached_tokens(arch, context, False) + sliding_layers * cached_tokens(arch, context, True)
    )


def prefill_transient_per_token(arch: Architecture, tp: int = 1) -> float:
    """Bytes per prompt token live at the MLP of the last layer in a no-grad bf16 forward.

    The embedding output, the layer input and the post-attention residual (2h each), the norm output
    (2h), and the MLP: act(gate), up and their product (3 x 2i), or for fused-expert MoE the gate_up
    output (4i), act and product per routed expert plus the gathered token copy. Matches the
    ground-truth prefills (llama3-8b, qwen2.5-7b, llama3-70b, mixtral) to within 0.3%.
    """
    residual = 8 * arch.hidden
    if arch.is_moe:
        per_expert = 8 * arch.expert_width / tp + 2 * arch.hidden
        return residual + arch.experts_per_token * per_expert
    return residual + (6 if arch.mlp == "gated" else 4) * arch.intermediate / tp


def eager_attention_transient(arch: Architecture, batch: int, seq: int, tp: int = 1) -> float:
    """Eager softmax attention materialises scores: bf16 masked scores + fp32 upcast + fp32 softmax."""
    return 10 * batch * (arch.heads / tp) * seq * seq


def hf_prefill_peak(
    arch: Architecture,
    batch: int,
    prompt: int,
    *,
    weights: float,
    kv_bytes: float = 2,
    attention: str = "flash",
    all_logits: bool = False,
    tp: int = 1,
) -> float:
    """Peak bytes of a Hugging Face ``generate`` prefill on one GPU (weights + full KV + transients).

    Only the last position's logits are computed by default (``logits_to_keep=1``); keeping all of
    them holds batch x prompt x vocab bf16 logits beside the final norm's output instead.
    """
    tokens = batch * prompt
    kv = arch.kv_bytes_per_token(kv_bytes, tp) * tokens
    transient = tokens * prefill_transient_per_token(arch, tp)
    if attention == "eager":
        transient = max(transient, eager_attention_transient(arch, batch, prompt, tp) + tokens * 12 * arch.hidden)
    if all_logits:
        transient = max(transient, tokens * (2 * arch.vocab / tp + 2 * arch.hidden))
    return weights + kv + transient + batch * arch.vocab * 6


def activation_reserve(arch: Architecture, context: int, concurrency: int, tp: int) -> float:
    """vLLM's profile-run peak: one max-size prefill batch, the sampler, CUDA graphs."""
    tokens = min(MAX_BATCHED_TOKENS, context * concurrency)
    sampler = min(concurrency, MAX_SAMPLED_SEQS) * arch.vocab * 4 * 3  # fp32 logits, probs, logprobs
    return tokens * prefill_transient_per_token(arch, tp) + sampler + CUDA_GRAPH_RESERVE


def estimate_serving(setup: ServingSetup, usable_bytes: int) -> ServingMemory:
    arch, tp, pp = setup.architecture, setup.tensor_parallel, setup.pipeline_parallel
    weights = per_gpu_weights(
        arch, setup.quantization, setup.model_dtype_bytes, tp, pp, setup.group_size, setup.expert_parallel
    )
    per_sequence = kv_bytes_per_sequence(arch, setup.context, setup.kv_dtype_bytes, tp, pp)
    kv = per_sequence * setup.concurrency
    tenant_weights = sum(
        per_gpu_weights(t.architecture, t.quantization, t.model_dtype_bytes, tp, pp, t.group_size)
        for t in setup.tenants
    )
    tenant_kv = sum(
        kv_bytes_per_sequence(t.architecture, t.context, setup.kv_dtype_bytes, tp, pp) * t.concurrency
        for t in setup.tenants
    )
    reserve = max(
        [activation_reserve(arch, setup.context, setup.concurrency, tp)]
        + [activation_reserve(t.architecture, t.context, t.concurrency, tp) for t in setup.tenants]
    )
    runtime = NON_TORCH_TP1 if tp * pp == 1 else NON_TORCH_TP
    return ServingMemory(
        weights=math.ceil(weights),
        kv_cache=math.ceil(kv),
        activation_reserve=math.ceil(reserve),
        runtime=runtime,
        tenant_weights=math.ceil(tenant_weights),
        tenant_kv_cache=math.ceil(tenant_kv),
        budget=int(usable_bytes * setup.memory_utilization),
        kv_bytes_per_sequence=math.ceil(per_sequence),
        kv_bytes_per_token=arch.kv_bytes_per_token(setup.kv_dtype_bytes, tp) / pp,
    )


def max_concurrency(memory: ServingMemory) -> int:
    """Sequences of the full context that fit in the KV budget (vLLM's logged 'maximum concurrency')."""
    if memory.kv_bytes_per_sequence <= 0:
        return 0
    return max(0, (memory.kv_available - memory.tenant_kv_cache) // memory.kv_bytes_per_sequence)


def max_context(setup: ServingSetup, memory: ServingMemory) -> int:
    """The longest context at the declared concurrency that fits the KV budget (binary search, as vLLM)."""
    available = memory.kv_available - memory.tenant_kv_cache
    arch, tp, pp = setup.architecture, setup.tensor_parallel, setup.pipeline_parallel
    if available <= 0:
        return 0
    low, high = 0, max(setup.context, arch.max_position or setup.context) * 64
    while low < high:
        middle = (low + high + 1) // 2
        need = kv_bytes_per_sequence(arch, middle, setup.kv_dtype_bytes, tp, pp) * setup.concurrency
        low, high = (middle, high) if need <= available else (low, middle - 1)
    return low
