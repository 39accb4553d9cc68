"""Weights on one GPU as a serving engine loads them: a quantized checkpoint's bytes per weight, MoE
experts under tensor or expert parallelism (with vLLM's MXFP4 padding), each pipeline stage's share, and
what one decode step reads of them. The serving memory model (``gpuplan.estimate.serving``), the speed
model and the speculative proposer read them; nothing here depends on the engine's batch or KV cache."""

from __future__ import annotations

import functools
import math

from gpuplan.architecture import Architecture
from gpuplan.catalog import compute_capability
from gpuplan.units import FP4_BLOCK

ROPE_CACHE_BYTES = 2  # the rotary cos/sin cache is kept in the model dtype


# The lowest compute capability vLLM serves a quantization from (QuantizationConfig.get_min_capability:
# Fp8Config and Mxfp4Config return 80, vllm/model_executor/layers/quantization/fp8.py and mxfp4.py; below
# 8.9 fp8 weights run through Marlin). On a GPU below it the engine refuses the model at startup (GP026).
VLLM_MIN_CAPABILITY = {"fp8": 80, "mxfp4": 80}


# vLLM allocates each MXFP4 expert's matrices padded for its MoE kernels (Mxfp4MoEMethod.create_weights,
# vllm/model_executor/layers/quantization/mxfp4.py at commit 007d500): the intermediate size per partition
# and the hidden size rounded up to the backend's alignment. Which backend runs depends on packages and
# environment variables a spec does not state (FlashInfer, triton_kernels, VLLM_MXFP4_USE_MARLIN), so each
# GPU takes the largest padding of the backends vLLM may pick on it, as (intermediate, hidden):
# Blackwell data-centre GPUs (sm100, sm103): FlashInfer's TRT-LLM and BF16 MoE, (256, 256); Hopper (sm90):
# Marlin, chosen when triton_kernels is absent, (128, 256) (the Triton backend pads only the intermediate,
# to 64, and FlashInfer's SM90 BF16 MoE both to 128); Ampere, Ada and sm120: Marlin alone (triton_kernels
# needs 9.0 to below 11.0), (128, 256); AMD: get_padding_alignment() (mxfp4_utils.py), 256 on gfx950, else
# 128, both. Below compute capability 8.0 vLLM runs no MXFP4 (Mxfp4Config.get_min_capability), nor on
# Gaudi; a GPU of unknown architecture (a custom one without ``arch``, an NVIDIA one not listed here)
# takes the largest padding, (256, 256).
def mxfp4_moe_alignment(arch: str) -> tuple[int, int]:
    """(intermediate, hidden) alignment of vLLM's MXFP4 expert matrices on a GPU of ``arch``; (1, 1): none."""
    if arch.startswith("gfx"):
        return (256, 256) if arch == "gfx950" else (128, 128)
    if arch in ("sm80", "sm86", "sm89", "sm90", "sm120"):
        return (128, 256)
    capability = compute_capability(arch)
    if arch == "gaudi3" or (capability is not None and capability < VLLM_MIN_CAPABILITY["mxfp4"]):
        return (1, 1)
    return (256, 256)


def mxfp4_expert_bytes(intermediate: int, hidden: int) -> int:
    """One MXFP4 expert as vLLM holds it: the fused gate/up matrix (2I x H) and down (H x I) at 4 bits with
    an 8-bit scale per 32 values, and their bf16 biases (2I + H)."""
    return 3 * intermediate * hidden * 17 // 32 + 2 * (2 * intermediate + hidden)


def padded_expert_bytes(arch: Architecture, tp: int, ep: int, alignment: tuple[int, int]) -> float:
    """Bytes vLLM's padding adds to one MoE layer's routed experts on one GPU (0 without padding): whole
    experts of the full width under expert parallelism, else every expert at 1/TP of its width."""
    if alignment == (1, 1) or not arch.is_moe:
        return 0.0
    width = arch.expert_width if ep > 1 else math.ceil(arch.expert_width / tp)
    experts = math.ceil(arch.experts / ep) if ep > 1 else arch.experts
    padded_width = -(-width // alignment[0]) * alignment[0]
    padded_hidden = -(-arch.hidden // alignment[1]) * alignment[1]
    return experts * (mxfp4_expert_bytes(padded_width, padded_hidden) - mxfp4_expert_bytes(width, arch.hidden))


def quant_linear_bytes(quantization: str, group_size: int = 128, row: int = 4096) -> float:
    """Bytes per weight of a quantized linear, from the checkpoint tensor layout.

    fp8 e4m3 and int8 W8A8 carry per-tensor/per-channel scales (negligible); AWQ/GPTQ 4-bit store an
    fp16 scale and a 4-bit zero point per group of ``group_size`` weights: 4 + 20/g bits, and per output
    channel (group size 0, i.e. -1 in the config) once per row of ``row`` inputs. The FP4 block formats
    store one scale per block: NVFP4 an fp8 e4m3 scale per 16 values (4 + 8/16 = 4.5 bits, plus a
    per-tensor fp32 scale; NVIDIA ModelOpt / TensorRT-LLM NVFP4 layout), MXFP4 an e8m0 scale per 32 values
    (4 + 8/32 = 4.25 bits, 17/32 bytes; OCP Microscaling Formats spec v1.0, as gpt-oss ships its experts).
    """
    if quantization in ("fp8", "int8"):
        return 1.0
    if quantization in FP4_BLOCK:
        return (4 + 8 / FP4_BLOCK[quantization]) / 8
    return (4 + 20 / (group_size or row)) / 8


def weight_bytes(
    arch: Architecture,
    quantization: str,
    dtype_bytes: int,
    group_size: int = 128,
    quantized_params: int | None = None,
) -> float:
    """All weights of the model in bytes (not yet split over GPUs)."""
    if quantization == "none":
        return arch.params * dtype_bytes
    quantized = arch.linear_params() if quantized_params is None else quantized_params
    return quantized * quant_linear_bytes(quantization, group_size, arch.hidden) + (arch.params - quantized) * 2


def rope_cache_bytes(arch: Architecture) -> int:
    """The rotary cos/sin cache vLLM builds once per GPU: max_position x rotary dims in the model dtype."""
    if arch.position_embeddings:
        return 0
    rotary = arch.qk_rope_head_dim if arch.is_mla else arch.d_head
    return arch.max_position * rotary * ROPE_CACHE_BYTES


def routed_expert_bytes(arch: Architecture, quantization: str, dtype_bytes: int, group_size: int = 128) -> float:
    """Bytes of all routed experts of the model (0 for a dense model); shared experts are not routed."""
    if not arch.is_moe:
        return 0.0
    per_param = dtype_bytes if quantization == "none" else quant_linear_bytes(quantization, group_size)
    return arch.moe_layers * arch.experts * arch.dense_mlp_params(arch.expert_width) * per_param


def unquantized_bytes(quantization: str, dtype_bytes: int) -> int:
    """Bytes per value of the tensors no quantization format touches (embeddings, norms, a vision tower):
    the model dtype's when the weights are not quantized, 16-bit otherwise."""
    return dtype_bytes if quantization == "none" else 2


def stage_routed_bytes(arch: Architecture, experts: float, layers: range) -> float:
    """All routed-expert bytes of the MoE layers among ``layers``; ``experts``: ``routed_expert_bytes``."""
    if not experts:
        return 0.0
    return sum(1 for layer in layers if arch.is_moe_layer(layer)) * experts / arch.moe_layers


def routed_share(arch: Architecture, tp: int, ep: int) -> float:
    """The share of a MoE layer's routed experts one GPU holds: ceil(E / EP) whole experts under expert
    parallelism (vLLM ``--enable-expert-parallel``), else 1/TP of each."""
    return math.ceil(arch.experts / ep) / arch.experts if ep > 1 else 1 / tp


# Weight bytes per stage depend on the GPU kind only through vLLM's MXFP4 expert padding (its architecture):
# a planner asks for the same TP x PP split on every GPU it searches (memory shape, decode reads), and each
# answer loops over the model's layers.
@functools.lru_cache(maxsize=1024)
def stage_weights(
    arch: Architecture,
    quantization: str,
    dtype_bytes: int,
    tp: int,
    pp: int,
    group_size: int = 128,
    quantized_params: int | None = None,
    ep: int = 1,
    expert_alignment: tuple[int, int] = (1, 1),
) -> tuple[float, ...]:
    """Weight bytes on one GPU of each pipeline stage.

    Decoder layers split as vLLM splits them; the embedding (and a vision tower) on the first stage, the
    LM head and final norm on the last (a tied head is a second copy there when PP > 1); linears,
    embeddings and the vision tower sharded over TP ranks, norms replicated. With expert parallelism
    (``ep`` > 1) each GPU instead holds ceil(E / ep) whole routed experts of each MoE layer (vLLM
    ``--enable-expert-parallel``, SGLang ``--ep-size``); attention, shared experts and dense layers stay
    split by TP. MXFP4 experts take the padding vLLM gives them on the GPU (``expert_alignment``,
    ``mxfp4_moe_alignment``).
    """
    sixteen = unquantized_bytes(quantization, dtype_bytes)
    total = weight_bytes(arch, quantization, dtype_bytes, group_size, quantized_params)
    embedding = arch.embedding_params() * sixteen
    head = (arch.lm_head_params() + (arch.vocab * arch.hidden if arch.tie_embeddings and pp > 1 else 0)) * sixteen
    vision = arch.vision_params * sixteen
    small = arch.small_params() * sixteen
    final_norm = arch.norm_params() * sixteen
    layers = total - arch.embedding_params() * sixteen - arch.lm_head_params() * sixteen - vision - small
    layer_small = small - final_norm
    all_linear, all_small = arch.stage_params(range(arch.layers))
    experts = routed_expert_bytes(arch, quantization, dtype_bytes, group_size) if ep > 1 else 0.0
    stages = arch.stage_layers(pp)
    padding = padded_expert_bytes(arch, tp, ep, expert_alignment) if quantization == "mxfp4" else 0.0
    result = []
    for index, stage in enumerate(stages):
        # A stage holds its own layers' share of the linears and of the small tensors, by their parameters.
        stage_linear, stage_small = arch.stage_params(stage)
        linear = layers * stage_linear / all_linear if all_linear else 0.0
        others = layer_small * stage_small / all_small if all_small else 0.0
        routed = stage_routed_bytes(arch, experts, stage)  # under EP: whole experts, not a TP slice
        bytes_ = (linear - routed) / tp + (routed * routed_share(arch, tp, ep) if routed else 0.0) + others
        bytes_ += padding * sum(1 for layer in stage if arch.is_moe_layer(layer))
        if index == 0:
            bytes_ += (embedding + vision) / tp
        if index == len(stages) - 1:
            bytes_ += head / tp + final_norm
        result.append(bytes_ + rope_cache_bytes(arch))
    return tuple(result)


# Remembered as stage_weights is: the same on every GPU kind.
@functools.lru_cache(maxsize=1024)
def decode_reads(
    arch: Architecture,
    quantization: str,
    dtype_bytes: int,
    tp: int,
    pp: int,
    group_size: int,
    quantized_params: int | None,
    ep: int,
) -> tuple[float, ...]:
    """Weight bytes one decode step reads on one GPU of each pipeline stage, apart from routed experts
    (``gpuplan.estimate.serving.decode_weight_reads`` says what a step leaves unread)."""
    stages = stage_weights(arch, quantization, dtype_bytes, tp, pp, group_size, quantized_params, ep)
    sixteen = unquantized_bytes(quantization, dtype_bytes)
    one_stage = pp == 1
    gathered = arch.embedding_params() - (arch.vocab * arch.hidden if arch.tie_embeddings and one_stage else 0)
    # Resident routed experts per MoE layer on one GPU: ceil(E / EP) whole experts, or 1/TP of each.
    experts = routed_expert_bytes(arch, quantization, dtype_bytes, group_size)
    reads = []
    for index, layers in enumerate(arch.stage_layers(pp)):
        resident = stage_routed_bytes(arch, experts, layers) * routed_share(arch, tp, ep) if experts else 0.0
        unread = (gathered + arch.vision_params) * sixteen / tp if index == 0 else 0.0
        reads.append(stages[index] - unread - resident)
    return tuple(reads)
