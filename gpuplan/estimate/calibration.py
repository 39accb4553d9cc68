"""The calibrated figures of the speed model: per serving engine, shared serving mechanisms, training.

Every figure is a mechanism-level efficiency or fixed cost, fitted once over the whole calibration set
(``benchmarks/data/speed-*.yaml``: published TensorRT-LLM, vLLM, SGLang and LMDeploy measurements and
llm-foundry, torchtitan, Megatron and NeMo training runs) by ``python benchmarks/speed_accuracy.py --fit``;
none is a constant per record. The engine limits (token budget, running sequences) are the engines' own
defaults, read from their source, not fitted. ``ERROR_BANDS`` are the spread the fit leaves, measured
out of sample (each record predicted by the figures fitted on the other half of the sources).
"""

from __future__ import annotations

from gpuplan.catalog import Gpu
from gpuplan.estimate.engines import TRTLLM_MAX_BATCH_SIZE, TRTLLM_MAX_NUM_TOKENS, sglang_sizes
from gpuplan.estimate.serving import DEFAULT_RELEASE, engine_batch_limits
from gpuplan.estimate.vllm_releases import VllmRelease
from gpuplan.records import record


@record
class EngineProfile:
    """How well one serving engine uses the hardware, and its scheduling defaults."""

    id: str
    name: str
    gemm_efficiency: float  # share of the GPU's achievable GEMM rate (its MAMF ceiling) reached by the engine
    bandwidth_efficiency: float  # share of peak HBM bandwidth streamed by decode GEMV and attention kernels
    step_overhead_s: float  # per forward step: scheduling and launch gaps the GPU waits through
    sequence_overhead_s: float  # per running sequence per step: sampling, detokenisation, bookkeeping
    request_overhead_s: float  # per request on the TTFT path: queue admission, tokenisation, first sample
    reserves_full_context: bool  # KV reserved for prompt + output at admission (else allocated as tokens arrive)
    limits_note: str
    # The prompt's forward pass samples no token: the engine's context decoder stops one token short and the
    # next decode step of the running batch feeds the prompt's last token and samples the first output
    # (TurboMind: LlamaBatch::ContextDecode, "subtract input/context len by 1 to skip last input token (will
    # process with decoder later)", InternLM/lmdeploy src/turbomind/models/llama/LlamaBatch.cc, v0.1-v0.2).
    first_token_from_decode_step: bool = False
    # A waiting request is admitted while the KV cache has room for its prompt's next chunk, and running
    # sequences are preempted (recomputed later) when decodes outgrow the cache: vLLM's V1 scheduler
    # (``Scheduler.schedule``, ``KVCacheManager.allocate_slots``). Otherwise a burst runs the sequences that fit
    # whole (TensorRT-LLM's GUARANTEED_NO_EVICT; SGLang reserves a share of each request's remaining output,
    # 70% at first: ``SGLANG_INIT_NEW_TOKEN_RATIO``).
    admits_by_prompt_chunk: bool = False
    # Prompts ride decode steps (vLLM's chunked prefill, TensorRT-LLM's in-flight batching, TurboMind);
    # otherwise a step of prompts runs alone whenever one can be formed, the decodes waiting (SGLang 0.5,
    # ``Scheduler.get_next_batch_to_run``: "Run prefill first if possible"; ``--enable-mixed-chunk`` off).
    mixes_prefill: bool = True

    def limits(
        self, gpu: Gpu, release: VllmRelease = DEFAULT_RELEASE, context: int = 0, chunks: bool = True
    ) -> tuple[int, int]:
        """(tokens one step may carry, running sequences) that the engine defaults to on ``gpu`` (vLLM's at
        ``release``, for a job of ``context`` tokens that V0 may chunk by itself or not: ``chunks``)."""
        memory = gpu.memory_bytes
        if self.id == "vllm":
            return engine_batch_limits(memory, gpu.id, release, context, chunks)  # the memory model's vLLM
        if self.id == "sglang":
            # SGLang's chunked_prefill_size by GPU memory (the memory model's rule, with its source); running
            # requests bounded by the KV pool, not by a small constant.
            return sglang_sizes(memory, 1)[0], 4096
        if self.id == "trtllm":
            return TRTLLM_MAX_NUM_TOKENS, TRTLLM_MAX_BATCH_SIZE  # the memory model's TorchLlmArgs defaults
        if self.id == "lmdeploy":
            return 8192, 128  # lmdeploy TurbomindEngineConfig: max_prefill_token_num 8192, max_batch_size 128
        return 8192, 256


@record
class ServingMechanisms:
    """Figures shared by every engine: they describe kernels and links, not schedulers."""

    attention_efficiency: float  # FlashAttention-style kernels: share of the GPU's achievable 16-bit GEMM rate
    # per decoder layer (an attention and an MLP block) per step: minimum kernel durations of ~10 kernels; a
    # layer of one block (Nemotron-H) costs half (``Architecture.block_count``)
    layer_overhead_s: float
    allreduce_latency_nvlink_s: float  # one small all-reduce over NVLink (custom all-reduce, one shot)
    allreduce_latency_pcie_s: float  # one small all-reduce through PCIe or the network
    link_efficiency: float  # share of the link's per-direction bandwidth a large all-reduce reaches
    roofline_sharpness: float  # p of the smooth roofline (t_mem^p + t_compute^p)^(1/p); large p is max()


@record
class TrainingMechanisms:
    gemm_efficiency: float  # share of the GPU's achievable 16-bit GEMM rate (MAMF ceiling) in training
    attention_efficiency: float  # FlashAttention forward + backward, share of the GPU's attention ceiling
    low_precision_gemm_factor: float  # fp8 GEMMs (Transformer Engine, torchao float8): share of the above
    kernel_launch_s: float  # host time per kernel launch: a micro-batch takes at least its launches' time
    bandwidth_efficiency: float  # share of HBM bandwidth for elementwise kernels and the optimizer step
    link_efficiency: float  # share of per-direction link bandwidth for gradient and parameter collectives
    overlap: float  # share of a micro-batch's compute that data-parallel communication can hide behind


@record
class Calibration:
    engines: dict[str, EngineProfile]
    serving: ServingMechanisms
    training: TrainingMechanisms

    def engine(self, engine_id: str) -> EngineProfile:
        return self.engines[engine_id]


ENGINE_NAMES = {
    "vllm": "vLLM (V1 scheduler, chunked prefill, CUDA graphs)",
    "sglang": "SGLang (RadixAttention scheduler, chunked prefill)",
    "trtllm": "TensorRT-LLM (in-flight batching)",
    "lmdeploy": "LMDeploy TurboMind",
    "generic": "generic engine (the figures fitted over every engine's records)",
}
ENGINES = tuple(ENGINE_NAMES)
DEFAULT_ENGINE = "vllm"

# -- fitted figures (python benchmarks/speed_accuracy.py --fit) ------------------------------------------


# Engines whose first output token comes from a decode step after the prompt's pass (see EngineProfile).
FIRST_TOKEN_FROM_DECODE_STEP = frozenset({"lmdeploy"})
# Engines that admit a request while its prompt's chunk fits the KV cache and preempt when it runs out.
ADMITS_BY_PROMPT_CHUNK = frozenset({"vllm"})
# Engines that run a step of prompts alone, before any decode, whenever they can form one.
PREFILL_FIRST = frozenset({"sglang"})


def _engine(
    engine_id: str, gemm: float, bandwidth: float, step: float, sequence: float, request: float, reserves_full: bool
) -> EngineProfile:
    return EngineProfile(
        engine_id,
        ENGINE_NAMES[engine_id],
        gemm,
        bandwidth,
        step,
        sequence,
        request,
        reserves_full,
        "engine defaults",
        engine_id in FIRST_TOKEN_FROM_DECODE_STEP,
        engine_id in ADMITS_BY_PROMPT_CHUNK,
        engine_id not in PREFILL_FIRST,
    )


CALIBRATION = Calibration(
    engines={
        "vllm": _engine("vllm", 0.846, 0.95, 0, 1.09e-05, 0.000768, False),
        "sglang": _engine("sglang", 0.846, 0.95, 0, 1.09e-05, 0.000799, False),
        "trtllm": _engine("trtllm", 0.792, 0.933, 0, 7.38e-06, 0.00132, True),
        "lmdeploy": _engine("lmdeploy", 0.89, 0.877, 4.22e-07, 1.51e-05, 0.000522, False),
        "generic": _engine("generic", 0.846, 0.95, 0, 1.09e-05, 0.000799, False),
    },
    serving=ServingMechanisms(
        attention_efficiency=0.304,
        layer_overhead_s=5.63e-05,
        allreduce_latency_nvlink_s=2.94e-05,
        allreduce_latency_pcie_s=3e-05,
        link_efficiency=0.483,
        roofline_sharpness=1.4,
    ),
    training=TrainingMechanisms(
        gemm_efficiency=0.788,
        attention_efficiency=0.571,
        low_precision_gemm_factor=0.982,
        kernel_launch_s=1e-05,
        bandwidth_efficiency=0.4,
        link_efficiency=0.769,
        overlap=1,
    ),
)
