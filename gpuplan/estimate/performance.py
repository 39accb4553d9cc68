"""What serving and training speed share: hardware rates, FLOP counts of a decoder, and collectives.

Sources: FLOPs per token 2 x (matmul parameters) forward (Kaplan et al. 2020; EleutherAI "Transformer
Math 101"); causal attention 2 x (keys attended) x (d_qk + d_v) per head per query (PaLM appendix B, with
the causal half); ring all-reduce 2(n-1)/n x S / bus bandwidth + a latency term, all-gather and
reduce-scatter (n-1)/n x S (NCCL tests, doc/PERFORMANCE.md); per-direction link bandwidth = half the
bidirectional figure the GPU catalog records.
"""

from __future__ import annotations

import functools

from gpuplan.architecture import Architecture
from gpuplan.catalog import Gpu
from gpuplan.records import record

HOST_GPUS = 8  # GPUs one PCIe host holds; beyond it a group crosses the network


@record
class Efficiency:
    """Overrides of the calibrated efficiencies (configuration ``thresholds``); None keeps the calibration.

    ``prefill_mfu``: share of dense tensor peak that GEMMs reach (prefill and compute-bound decode);
    ``decode_bandwidth``: share of peak HBM bandwidth that decode kernels stream at; ``training_mfu``:
    model FLOPs utilisation of training compute (recompute and exposed communication come on top).
    """

    prefill_mfu: float | None = None
    decode_bandwidth: float | None = None
    training_mfu: float | None = None


# Weight quantization -> the tensor-core dtype its GEMMs run in where the GPU has those units.
# W8A8 fp8/int8 (vLLM/TRT-LLM fp8 and SmoothQuant kernels), W4A4 FP4 on Blackwell; AWQ/GPTQ 4-bit are
# weight-only and dequantize to 16-bit inside the GEMM (Marlin / AWQ kernels), as do FP4 formats on GPUs
# without FP4 units.
QUANT_COMPUTE_DTYPE = {"fp8": "fp8", "int8": "int8", "nvfp4": "fp4", "mxfp4": "fp4"}


# Maximum achievable matmul FLOPS (MAMF) as a share of the dense datasheet peak: the best large-GEMM rate
# a GPU sustains (power- and clock-limited), measured by brute-force shape search with mamf-finder.py
# (S. Bekman, ml-engineering, compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS comparison
# table": BF16 and FP8 e4m3 tables). Engines and trainers reach a share of this ceiling, not of the
# datasheet. GPUs the table has not measured take the median of the measured NVIDIA parts. The table's
# 2026-08 revision adds B300 (BF16 1769.0 of 2250, FP8 3353.3 of 4500) and MI355X (BF16 1565.0 TFLOPS,
# against 2300 there): MI355X's share is taken of the catalog's 2500, 1565 / 2500.
MATMUL_CEILING: dict[str, dict[str, float]] = {
    "a100-sxm-80gb": {"bf16": 0.869},
    "a100-sxm-40gb": {"bf16": 0.869},
    "a100-pcie-80gb": {"bf16": 0.811},
    "a100-pcie-40gb": {"bf16": 0.811},
    "h100-sxm": {"bf16": 0.803, "fp8": 0.709},
    "h200-sxm": {"bf16": 0.803, "fp8": 0.734},  # the table: "H200 is the same" as H100 for BF16
    "b200-hgx": {"bf16": 0.776, "fp8": 0.763},
    "gb200": {"bf16": 0.729, "fp8": 0.723},
    "b300-hgx": {"bf16": 0.786, "fp8": 0.745},
    "mi300x": {"bf16": 0.514},
    "mi325x": {"bf16": 0.604},
    "mi355x": {"bf16": 0.626},
    "gaudi3-oam": {"bf16": 0.741},
}
# Medians of the NVIDIA parts measured when the speed model was calibrated (A100, H100, H200, B200, GB200);
# B300, measured since, is left out so that the estimates of the unmeasured GPUs keep the calibrated basis
# (with it the fp8 median would read 0.734, bf16 is unchanged).
UNMEASURED_CEILING = {"bf16": 0.803, "fp8": 0.728}


def matmul_ceiling(gpu: Gpu, dtype: str) -> float:
    """Share of the dense peak of ``dtype`` that GEMMs can reach on ``gpu`` (FP4 and int8 taken as FP8)."""
    kind = "bf16" if dtype in ("bf16", "fp16") else "fp8"
    return MATMUL_CEILING.get(gpu.id, {}).get(kind, UNMEASURED_CEILING[kind])


# Attention kernels, share of the dense 16-bit peak they reach (forward + backward), by kernel and GPU:
# - flash, FlashAttention-2 (and PyTorch SDPA's default flash backend): 73% on A100 (Dao 2023,
#   "FlashAttention-2", abstract: "reaching 50-73% of the theoretical maximum FLOPs/s on A100"), 35% on
#   H100 (Shah et al. 2024, "FlashAttention-3", introduction: "FlashAttention-2 achieves only 35%
#   utilization on the H100 GPU"): the Ampere kernel does not use Hopper's asynchronous tensor cores
#   (wgmma, TMA), so attention gains far less from H100 than GEMMs do;
# - flash3, FlashAttention-3 on Hopper: "up to 740 TFLOPs/s (75% utilization)" in BF16 on H100 (ibid.,
#   abstract);
# - cudnn, cuDNN's fused flash attention on Hopper, which Transformer Engine selects there ("Disabling
#   FlashAttention to give FusedAttention preference on Hopper+", transformer_engine/pytorch/attention/
#   dot_product_attention/utils.py), so NeMo and Megatron run it: "up to 75% speed-up over
#   FlashAttentionV2" on H100 (PyTorch 2.5 release notes, cuDNN SDPA backend): 35% x 1.75.
# A kernel not measured on a GPU (FlashAttention-3 exists only for Hopper; the Triton kernel was measured on
# A100 only) takes FlashAttention-2's figure there; GPUs with no figure take their MAMF ceiling x the lower of
# FlashAttention-2's measured ratios to it (H100's), the cautious reading until a measurement lands.
HOPPER = ("h100-sxm", "h100-pcie", "h100-nvl", "h200-sxm", "h200-nvl", "h20")
AMPERE_DATACENTER = ("a100-sxm-80gb", "a100-sxm-40gb", "a100-pcie-80gb", "a100-pcie-40gb")
ATTENTION_CEILING: dict[str, dict[str, float]] = {
    "flash": {**dict.fromkeys(AMPERE_DATACENTER, 0.73), **dict.fromkeys(HOPPER, 0.35)},
    "flash3": dict.fromkeys(HOPPER, 0.75),
    "cudnn": dict.fromkeys(HOPPER, 0.35 * 1.75),
    "triton": dict.fromkeys(AMPERE_DATACENTER, 0.40),
}
UNMEASURED_ATTENTION_RATIO = min(
    share / MATMUL_CEILING[gpu]["bf16"] for gpu, share in ATTENTION_CEILING["flash"].items() if gpu in MATMUL_CEILING
)


def attention_ceiling(gpu: Gpu, kernel: str = "flash") -> float:
    """Share of the dense 16-bit peak that the ``kernel``'s attention reaches on ``gpu`` (see the table).

    ``eager`` attention is timed as FlashAttention-2 (the speed model does not price materialised scores).
    """
    for table in (ATTENTION_CEILING.get(kernel, {}), ATTENTION_CEILING["flash"]):
        if gpu.id in table:
            return table[gpu.id]
    return matmul_ceiling(gpu, "bf16") * UNMEASURED_ATTENTION_RATIO


def fp32_matmul_peak(gpu: Gpu, tf32: bool) -> tuple[float, str]:
    """(FLOP/s, the units) fp32 matmuls run at: PyTorch's default fp32 matmul precision ("highest") keeps
    them off the tensor cores, on the CUDA cores at the non-tensor fp32 peak; with TF32 allowed
    (``torch.backends.cuda.matmul.allow_tf32``, ``torch.set_float32_matmul_precision("high")``, the Hugging
    Face Trainer's ``tf32=True``) cuBLAS runs them on the tensor cores at the TF32 rate. A GPU without a
    figure for the units falls back to its 16-bit rate (a custom GPU states only that one)."""
    for dtype in ("tf32", "fp32") if tf32 else ("fp32",):
        value = gpu.tflops.get(dtype)
        if value:
            return float(value) * 1e12, "TF32 tensor cores" if dtype == "tf32" else "CUDA cores (fp32, no TF32)"
    return gpu.peak_flops("bf16"), "the 16-bit rate (no fp32 figure for this GPU)"


def compute_dtype(quantization: str, gpu: Gpu) -> str:
    """The dtype of the GEMMs: the quantized format's own where the GPU has the units, else bf16."""
    wanted = QUANT_COMPUTE_DTYPE.get(quantization)
    if wanted and gpu.tflops.get(wanted):
        return wanted
    return "bf16"


@functools.lru_cache(maxsize=512)
def matmul_params(arch: Architecture) -> int:
    """Parameters a token multiplies through (MoE: its routed experts), the LM head included.

    The embedding is a lookup, not a matmul; a tied LM head still multiplies by the embedding matrix.
    """
    head = arch.vocab * arch.hidden if arch.tie_embeddings else 0
    return arch.active_params - arch.embedding_params() + head


def lm_head_params(arch: Architecture) -> int:
    return arch.vocab * arch.hidden


def attention_dims(arch: Architecture, decode: bool = False) -> tuple[int, int]:
    """(d_qk, d_v) per query head. MLA prefills with uncompressed heads (nope + rope, v_head_dim) and
    decodes with the absorbed form, attending over the latent (kv_lora_rank + rope) and reading values
    from the latent (DeepSeek-V2 paper, section 2.1.3; vLLM's MLA backends)."""
    if arch.is_mla:
        if decode:
            return arch.kv_lora_rank + arch.qk_rope_head_dim, arch.kv_lora_rank
        return arch.qk_nope_head_dim + arch.qk_rope_head_dim, arch.v_head_dim
    return arch.d_head, arch.d_head


def causal_pairs(start: float, end: float, window: int = 0) -> float:
    """Sum over query positions i in [start, end) of the keys each attends to, min(i + 1, window)."""
    if end <= start:
        return 0.0

    def full(n: float) -> float:  # sum_{i < n} (i + 1)
        return n * (n + 1) / 2

    if not window:
        return full(end) - full(start)

    def windowed(n: float) -> float:  # sum_{i < n} min(i + 1, window)
        return full(n) if n <= window else full(window) + (n - window) * window

    return windowed(end) - windowed(start)


@functools.lru_cache(maxsize=4096)  # the same prompts on every GPU kind and layout a planner tries
def attention_flops(arch: Architecture, start: float, end: float) -> float:
    """Causal attention FLOPs (QK^T and PV) of query positions [start, end) of one sequence, all layers.

    Sliding-window layers attend to at most ``sliding_window`` keys; linear-attention and Mamba layers
    attend to none (their state update is linear in the tokens, counted with no FLOPs here).
    """
    d_qk, d_v = attention_dims(arch)
    per_pair = 2 * arch.heads * (d_qk + d_v)
    sliding = arch.sliding_layer_count
    full = arch.attention_layers - sliding
    pairs = full * causal_pairs(start, end)
    if sliding:
        pairs += sliding * causal_pairs(start, end, arch.sliding_window)
    return per_pair * pairs


def decode_attention_flops(arch: Architecture, context: float) -> float:
    """Attention FLOPs of one decode token at ``context`` cached tokens, all layers."""
    d_qk, d_v = attention_dims(arch, decode=True)
    sliding = arch.sliding_layer_count
    keys = (arch.attention_layers - sliding) * context + sliding * min(context, arch.sliding_window or context)
    return 2 * arch.heads * (d_qk + d_v) * keys


def link_bandwidth(gpu: Gpu, group: int, network_gbs: float) -> float:
    """Bytes/s one direction per GPU for a collective over ``group`` GPUs.

    NVLink/xGMI when the group fits the scale-up domain; PCIe through the host within one host; the
    network (``network_gbs`` GB/s per GPU, behind PCIe) beyond it. The network has no default: each
    caller passes the spec's (``hardware.network_gbps``), so no figure quotes another network.
    """
    if gpu.has_nvlink and group <= gpu.domain:
        return gpu.interconnect_gbs / 2 * 1e9
    if group <= HOST_GPUS:
        return gpu.pcie_gbs / 2 * 1e9
    return min(gpu.pcie_gbs / 2, network_gbs) * 1e9


def scale_up_size(gpu: Gpu) -> int:
    """GPUs one node joins without the network: the NVLink/xGMI domain where it spans the server (an HGX
    or OAM board, an NVL72 rack), else one PCIe host. NVLink-bridged PCIe cards (pairs of H100 PCIe or
    NVL, fours of H200 NVL) sit several to a host: between bridges they talk over PCIe, not the network."""
    return max(gpu.domain, HOST_GPUS) if gpu.has_nvlink else HOST_GPUS


def group_bandwidth(gpu: Gpu, group: int, stride: int, network_gbs: float) -> float:
    """Bytes/s one direction per GPU for a ring collective over ``group`` GPUs spaced ``stride`` ranks apart.

    Within one node it is ``link_bandwidth`` of the ranks the group spans (a pair of ranks 4 apart on
    NVLink-bridged pairs of PCIe cards crosses PCIe, not a bridge). Across nodes NCCL splits the data
    over its channels, one ring per NIC on rail-aligned clusters, and each ring crosses a node boundary
    once per node: with k of the group's GPUs (and NICs) in a node, each NIC carries 1/k of the
    (n-1)/n x S a ring moves, so the bus bandwidth per rank (NCCL tests doc/PERFORMANCE.md:
    t = S (n-1) / (n B) for an all-gather) is k x the NIC's, never above the node's own link. A group
    whose members sit ``stride`` ranks apart (data parallelism outside tensor parallelism) has
    ``node / stride`` of them per node.
    """
    node = scale_up_size(gpu)
    span = group * stride  # consecutive ranks the group's members reach across: the link they share
    if span <= node:
        return link_bandwidth(gpu, span, network_gbs)
    per_node = max(1, min(group, node // stride))
    network = network_gbs * per_node * 1e9
    if per_node == 1:
        return min(network, gpu.pcie_gbs / 2 * 1e9)
    return min(network, link_bandwidth(gpu, per_node * stride, network_gbs))


def on_fast_link(gpu: Gpu, group: int) -> bool:
    return gpu.has_nvlink and group <= gpu.domain


def allreduce_time(size: float, group: int, bandwidth: float, latency: float) -> float:
    """Ring all-reduce of ``size`` bytes: 2(n-1)/n x S over the link, plus a latency term."""
    if group <= 1:
        return 0.0
    return latency + 2 * (group - 1) / group * size / bandwidth


def gather_time(size: float, group: int, bandwidth: float) -> float:
    """All-gather or reduce-scatter of a ``size``-byte tensor: (n-1)/n x S over the link."""
    if group <= 1:
        return 0.0
    return (group - 1) / group * size / bandwidth


def roofline(memory: float, compute: float, p: float, inverse: float) -> float:
    """Time of a kernel class that must stream ``memory`` seconds and compute ``compute`` seconds, with
    the sharpness ``p`` and ``inverse`` = 1 / p given (the step's hot path passes its deployment's).

    Near the ridge point neither bound is reached; the p-norm (sharpness p) is the usual smooth roofline
    (p -> infinity gives max), as measured GEMM curves bend between the two regimes.
    """
    if not memory or not compute:
        return memory + compute
    if memory >= compute:
        return memory * (1 + (compute / memory) ** p) ** inverse
    return compute * (1 + (memory / compute) ** p) ** inverse
