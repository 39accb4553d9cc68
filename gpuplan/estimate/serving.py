"""Serving memory per GPU, as vLLM sizes it at startup: v0.19 (V1 engine) unless ``serve.engine_version``
names another release (what differs by release: gpuplan.estimate.vllm_releases).

vLLM profiles before it allocates the KV cache (vllm/v1/worker/gpu_worker.py ``determine_available_memory``):
``available KV = gpu_memory_utilization x total - (weights + torch peak increase + non-torch increase)``,
then fills the rest with 16-token blocks. Each term is modelled from the mechanism its startup log
exposes (ten v0.19 logs on H100, re-expressed with their figures in ``benchmarks/data/vllm_startup_logs.yaml``):
- weights: the checkpoint's tensors as loaded (quantized linears, 16-bit rest) plus the rotary cos/sin cache;
- torch peak increase: the larger of one dummy forward of ``max_num_batched_tokens`` and the sampler
  warm-up over its dummy requests, ``min(max_num_batched_tokens, max_num_seqs)`` of them (bf16 logits,
  fp32 copy, fp32 probabilities and fp32 exponential noise: 14 bytes per request x vocabulary entry);
  pipeline ranks also hold the hidden state and residual they send or receive; the first stage runs no
  sampler. Both limits are the engine's as configured (``serve.max_batched_tokens``/``max_sequences``,
  else its defaults): ``profile_run`` in vllm/v1/worker/gpu_model_runner.py runs ``_dummy_run`` of
  ``max_num_tokens`` (= ``scheduler_config.max_num_batched_tokens``) over
  ``num_reqs = min(num_tokens, max_num_reqs)`` requests (``max_num_reqs`` = ``max_num_seqs``) and samples
  one token per request;
- non-torch increase: cuBLAS workspaces on one GPU, NCCL/custom all-reduce buffers per TP rank;
- the CUDA-graph pool is captured after the KV cache is allocated, outside the utilization budget
  (v0.19 does not subtract it; it must fit in the rest of the GPU, beside the whole budget the KV pool fills);
- hybrid models (sliding window, chunked attention) put each attention kind into KV-cache groups of
  equal size (``_get_kv_cache_groups_uniform_page_size``), padding the short group: Gemma-3's 62
  layers take 70 layer slots;
- linear-attention and Mamba-2 layers keep a fixed state per sequence (``MambaSpec``), a group kind of
  its own: the attention block grows until one attention page holds a layer's state, and the state is
  padded to that page (``HybridAttentionMambaModelConfig``); without prefix caching (v0.19's default for
  hybrid models) each state layer takes one page per sequence, whatever its length.
"""

from __future__ import annotations

import functools
import math

from gpuplan.architecture import Architecture
from gpuplan.estimate.lora_serving import LoraSlots, slot_stage_bytes
from gpuplan.estimate.speculative import Speculation, proposer_kv_per_token, proposer_weight_bytes
from gpuplan.estimate.vllm_releases import CUDA_CONTEXT_BYTES, VllmRelease, vllm_release
from gpuplan.estimate.weights import decode_reads, stage_weights, unquantized_bytes
from gpuplan.records import evolve, record
from gpuplan.units import GIB, MIB

ENGINE = "vLLM v0.19 (V1 engine, OpenAI API server defaults)"  # the memory model's key; labels: VllmRelease
DEFAULT_RELEASE = vllm_release(None)
BLOCK_TOKENS = 16  # vLLM default block_size on CUDA
# vllm/engine/arg_utils.py get_batch_defaults, OpenAI API server: GPUs with >= 70 GiB other than A100
# get 8,192 batched tokens and 1,024 sequences; others 2,048 and 256 ("Defaulting max_num_seqs to 1024").
LARGE_GPU_BATCH = (8192, 1024)
# "non-torch forward increase memory" in the v0.19 H100 logs: 0.24-0.25 GiB on one GPU (cuBLAS/cuDNN
# workspaces), 0.07 GiB per pipeline rank (NCCL point-to-point only), 2.07 GiB per tensor-parallel rank
# (NCCL communicators and vLLM's custom all-reduce buffers; TP 2 on HGX H100, Llama-3.1-8B and Mixtral).
NON_TORCH_SINGLE = round(0.25 * GIB)
NON_TORCH_PP = round(0.07 * GIB)
NON_TORCH_TP = round(2.07 * GIB)
# CUDA graphs: PIECEWISE (mixed prefill-decode) and FULL (decode) modes, captured for the batch sizes
# [1, 2, 4] + 8..248 step 8 + 256..max step 16, max = min(2 x max_num_seqs, 512, max_num_batched_tokens)
# (vllm/config/vllm.py _set_cudagraph_sizes; 51 sizes at the defaults). The logs' estimates: a first capture of 84-328
# MiB per mode, 2-26 MiB per further graph; 0.65-1.07 GiB taken in all. gpuplan uses the medians: 200 MiB and 6 MiB.
GRAPH_FIRST_CAPTURE = 200 * MIB
GRAPH_EACH = 6 * MIB


@record
class Tenant:
    name: str
    architecture: Architecture
    quantization: str
    context: int
    concurrency: int
    model_dtype_bytes: int = 2
    group_size: int = 128
    quantized_params: int | None = None


@record
class ServingSetup:
    architecture: Architecture
    context: int
    concurrency: int
    quantization: str = "none"
    model_dtype_bytes: int = 2
    group_size: int = 128  # AWQ/GPTQ group size (from the checkpoint's quantization_config); 0 per channel
    quantized_params: int | None = None  # linear weights stored quantized; None: every decoder linear
    kv_dtype_bytes: int = 2
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    expert_parallel: int = 1
    memory_utilization: float = DEFAULT_RELEASE.default_utilization  # vLLM's, at the release it follows
    max_batched_tokens: int = LARGE_GPU_BATCH[0]
    max_num_seqs: int = LARGE_GPU_BATCH[1]
    tenants: tuple[Tenant, ...] = ()
    engine: str = "vllm"  # serve.engine: its memory model (gpuplan.estimate.engines for SGLang, TensorRT-LLM)
    memory_cap: int = 0  # TensorRT-LLM max_gpu_total_bytes; 0: none
    lora: LoraSlots | None = None  # serve.lora: adapter slots (gpuplan.estimate.lora_serving)
    speculation: Speculation | None = None  # serve.speculative: the proposer (gpuplan.estimate.speculative)
    expert_alignment: tuple[int, int] = (1, 1)  # vLLM's MXFP4 expert padding on the GPU (mxfp4_moe_alignment)
    release: VllmRelease = DEFAULT_RELEASE  # serve.engine_version: what vLLM's sizing does (vllm_releases)
    gpu_arch: str = ""  # the GPU's architecture (catalog arch): AMD GPUs and Blackwell size some things apart
    # serve.arrival burst: ``concurrency`` requests arrive at once; the engine runs the sequences its KV pool
    # holds and queues the rest, so the KV cache is sized for one sequence, not for all (``ServingShape.at``).
    burst: bool = False


@record
class ServingMemory:
    """Per-GPU bytes of the most constrained GPU (the pipeline stage with the least KV room)."""

    weights: int
    kv_cache: int
    activation_reserve: int
    runtime: int
    tenant_weights: int
    tenant_kv_cache: int
    budget: int  # usable bytes x memory utilization
    kv_bytes_per_sequence: int
    kv_bytes_per_token: float  # all layers on one GPU, full-attention layers only
    cuda_graphs: int = 0  # captured after the KV cache; outside the budget unless ``graphs_in_budget``
    graphs_in_budget: bool = False  # vLLM 0.20 on: their estimate is taken from the budget before the KV cache
    capacity: int = 0  # the GPU's usable bytes
    vision_weights: int = 0  # the part of ``weights`` that is the vision tower
    kv_page_bytes: int = 0  # one block of one layer slot
    kv_group_size: int = 1  # layer slots per KV-cache group
    kv_groups: int = 1
    # tokens per block: vLLM's 16, more when state layers share the pages; SGLang's pages of 1, TensorRT-LLM's 32
    kv_block_tokens: int = BLOCK_TOKENS
    state_bytes_per_sequence: int = 0  # the part of kv_bytes_per_sequence that is recurrent state (padded pages)
    outside_budget: int = 0  # besides CUDA graphs, held outside the budget: ``outside_what``
    outside_what: str = ""  # SGLang's prefill activations and request table; vLLM's V2 sampler state before 0.27
    kv_share: float = 1.0  # the share of the room left that becomes the pool (TensorRT-LLM free_gpu_memory_fraction)
    kv_cap: int = 0  # the largest pool the engine allocates (TensorRT-LLM max_gpu_total_bytes); 0: none
    lora_slots: int = 0  # serve.lora: the adapter slots the engine preallocates (loaded with the weights)
    draft_weights: int = 0  # serve.speculative: the proposer's weights (loaded with the model's)
    draft_page_bytes: int = 0  # the proposer's KV in one block, beside the model's layer slots
    fullest_gpu: int = 0  # under pipeline parallelism, the largest per_gpu of any stage at these sequences

    @property
    def peak_per_gpu(self) -> int:
        """The most any one GPU holds at these sequences: ``per_gpu`` is the stage whose KV room is tightest,
        which sizes every stage's pool, and under pipeline parallelism another stage may hold more."""
        return max(self.per_gpu, self.fullest_gpu)

    @property
    def breakdown(self) -> dict[str, int]:
        """What the engine budget holds; sums to ``per_gpu``."""
        parts = {
            "weights": self.weights,
            "kv_cache": self.kv_cache,
            "activations": self.activation_reserve,
            "runtime": self.runtime,
        }
        if self.tenant_weights or self.tenant_kv_cache:
            parts["tenant_weights"] = self.tenant_weights
            parts["tenant_kv_cache"] = self.tenant_kv_cache
        if self.lora_slots:
            parts["lora_slots"] = self.lora_slots
        if self.draft_weights:
            parts["draft_weights"] = self.draft_weights
        return parts

    @property
    def per_gpu(self) -> int:
        """The sum of ``breakdown`` (added directly: planners read it tens of thousands of times)."""
        return (
            self.weights
            + self.kv_cache
            + self.activation_reserve
            + self.runtime
            + self.tenant_weights
            + self.tenant_kv_cache
            + self.lora_slots
            + self.draft_weights
        )

    @property
    def non_kv(self) -> int:
        """vLLM's "Total non KV cache memory" (tenants' weights included)."""
        return self.per_gpu - self.kv_cache - self.tenant_kv_cache

    @property
    def room(self) -> int:
        """What the budget leaves after everything but the KV cache (negative when nothing is left)."""
        return self.budget - (self.per_gpu - self.kv_cache) - self.graphs_inside

    @property
    def kv_available(self) -> int:
        """KV bytes the engine allocates after everything else (negative when nothing is left): the room
        the budget leaves, times ``kv_share`` and within ``kv_cap`` where the engine has them."""
        room = self.room
        if room <= 0 or (self.kv_share == 1.0 and not self.kv_cap):
            return room
        pool = int(room * self.kv_share)
        return min(pool, self.kv_cap) if self.kv_cap else pool

    @property
    def kv_cache_tokens(self) -> int:
        """The engine's KV cache size in tokens (vLLM "GPU KV cache size", SGLang "max_total_num_tokens",
        TensorRT-LLM "max tokens in paged KV cache"): whole blocks per group slot, over the groups."""
        available = self.kv_available
        if available <= 0 or self.kv_page_bytes <= 0:
            return 0
        if self.draft_page_bytes:  # a proposer's layers take their blocks beside every group's
            row = self.kv_page_bytes * self.kv_group_size * self.kv_groups + self.draft_page_bytes
            return int(available // row * self.kv_block_tokens)
        blocks = available // (self.kv_page_bytes * self.kv_group_size)
        return int(blocks // self.kv_groups * self.kv_block_tokens)

    @property
    def graphs_inside(self) -> int:
        """The CUDA-graph bytes the budget pays for (0 where they are captured outside it)."""
        return self.cuda_graphs if self.graphs_in_budget else 0

    @property
    def fits(self) -> bool:
        """The declared sequences' KV cache within the pool the engine allocates (for vLLM and SGLang: the
        per-GPU figure within the budget; TensorRT-LLM's pool is a share of its room, within its cap), and the
        memory outside the budget within the GPU."""
        return self.kv_cache <= self.kv_available and self.outside_fits

    @property
    def outside_fits(self) -> bool:
        """Whether what the engine holds beyond its budget fits the GPU beside it: the engine fills its budget
        with the KV pool before it captures its CUDA graphs (vLLM's capture_model after initialize_kv_cache),
        so the budget, not the declared sequences' share of it, sits beside them."""
        return not self.capacity or self.budget + self.beside_budget <= self.capacity

    @property
    def graphs_outside(self) -> int:
        """The CUDA-graph bytes captured outside the budget (0 where the budget pays for them)."""
        return self.cuda_graphs - self.graphs_inside

    @property
    def beside_budget(self) -> int:
        """What the engine holds beside its budget: CUDA graphs captured outside it and ``outside_budget``."""
        return self.graphs_outside + self.outside_budget


def chunks_by_itself(architecture: Architecture, gpu_arch: str, lora: bool, speculation: bool) -> bool:
    """Whether a V0 vLLM turns chunked prefill on by itself above 32K tokens for this job: on CUDA, not for a
    sliding-window or multimodal model, nor with LoRA or speculative decoding (arg_utils.py: is_gpu and not
    is_rocm, use_sliding_window, is_multimodal_model, use_lora, use_spec_decode)."""
    amd = gpu_arch.startswith("gfx")
    return not (architecture.windowed or architecture.vision_params or lora or speculation or amd)


def engine_batch_limits(
    total_bytes: int,
    gpu_name: str,
    release: VllmRelease = DEFAULT_RELEASE,
    context: int = 0,
    chunks_by_itself: bool = True,
) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM's API server picks for this GPU: the one source of
    these defaults, for memory (the profiled batch) and for speed (the scheduler's budget). ``total_bytes``
    is the device's total memory as CUDA reports it (``get_device_total_memory``); ``context`` and
    ``chunks_by_itself`` matter to V0 releases only (``VllmRelease.batch_defaults``)."""
    return release.batch_defaults(total_bytes, gpu_name, context, chunks_by_itself)


def model_stage_weights(setup: ServingSetup) -> tuple[float, ...]:
    """``stage_weights`` of the setup's own model (its tenants' are apart)."""
    return stage_weights(
        setup.architecture,
        setup.quantization,
        setup.model_dtype_bytes,
        setup.tensor_parallel,
        setup.pipeline_parallel,
        setup.group_size,
        setup.quantized_params,
        setup.expert_parallel,
        setup.expert_alignment if setup.quantization == "mxfp4" else (1, 1),  # one cache entry on every GPU else
    )


def added_stage_weights(setup: ServingSetup) -> tuple[tuple[float, ...], float]:
    """(LoRA slot bytes on one GPU of each pipeline stage, the proposer's weights on one GPU of the last),
    both loaded with the model's weights (vLLM ``load_model``: ``load_lora_model``, the drafter's
    ``load_model``); zeros without ``serve.lora`` or ``serve.speculative``."""
    arch, tp, pp = setup.architecture, setup.tensor_parallel, setup.pipeline_parallel
    lora = (
        slot_stage_bytes(arch, setup.lora, setup.model_dtype_bytes, tp, pp, setup.expert_parallel)
        if setup.lora
        else (0.0,) * len(arch.stage_layers(pp))  # stages: no more than the layers, whatever the degree
    )
    draft = 0.0
    if setup.speculation:
        draft = proposer_weight_bytes(arch, setup.speculation, setup.model_dtype_bytes, tp)
    return lora, draft


def proposer_kv(setup: ServingSetup) -> float:
    """The proposer's KV bytes per token on one GPU of the last stage (0 without speculation)."""
    if not setup.speculation:
        return 0.0
    return proposer_kv_per_token(setup.architecture, setup.speculation, setup.kv_dtype_bytes, setup.tensor_parallel)


def decode_weight_reads(setup: ServingSetup) -> tuple[float, ...]:
    """Weight bytes one decode step reads on one GPU of each pipeline stage, apart from routed experts
    (a step reads only the experts its tokens touch: the speed model counts those).

    A stage's weights (``stage_weights``) less its resident routed experts and what a decode step never
    streams: the embedding table, of which a step gathers only its tokens' rows (unless the head is tied
    to it on the same GPU: one stage, where the head's matmul reads all of it), and the vision tower,
    which runs in the prefill of prompts with images [vLLM PPMissingLayer: the embedding lives on the
    first stage, the head on the last]. The stages differ (the head's stage reads most where the
    vocabulary is large), and the stage whose memory peaks (``serving_shape``) need not read the most.
    """
    return decode_reads(
        setup.architecture,
        setup.quantization,
        setup.model_dtype_bytes,
        setup.tensor_parallel,
        setup.pipeline_parallel,
        setup.group_size,
        setup.quantized_params,
        setup.expert_parallel,
    )


def _windowed_tokens(arch: Architecture, context: int, max_batched: int, block: int) -> int:
    """Tokens one sequence reserves in a sliding-window or chunked layer, rounded to blocks (vLLM specs)."""
    if arch.attention_chunk:
        tokens = min(arch.attention_chunk + max_batched, context)
        return math.ceil(tokens / block) * block
    tokens = min(arch.sliding_window - 1 + max_batched, context)
    return (math.ceil(tokens / block) + 1) * block


def cached_tokens(
    arch: Architecture,
    context: int,
    windowed: bool,
    max_batched: int = LARGE_GPU_BATCH[0],
    block: int = BLOCK_TOKENS,
) -> int:
    """Tokens one sequence reserves in one layer's cache, rounded up to whole blocks (vLLM)."""
    if windowed and arch.windowed:
        return _windowed_tokens(arch, context, max_batched, block)
    return math.ceil(context / block) * block


def kv_pages(
    arch: Architecture, kv_bytes: float, tp: int, state_dtype_bytes: int, context: int, base: int = BLOCK_TOKENS
) -> tuple[int, float]:
    """(tokens per block, bytes of one block of one layer slot) on one GPU.

    ``base``-token blocks of attention KV (16; 64 from vLLM 0.34), unless the model has linear-attention or
    Mamba layers: vLLM then raises the attention block to the smallest multiple of 16 tokens whose page holds
    one layer's state (block = 16 x ceil(state / (16 x KV bytes per token)); ``HybridAttentionMambaModelConfig.
    verify_and_update_config``, vllm/model_executor/models/config.py, v0.19, without prefix caching) and
    pads the state to that page (``mamba_page_size_padded``). An attention-free model pages its states
    alone, one block of ``context`` tokens (``mamba_block_size`` = max_model_len). Blackwell (SM100) with
    FlashInfer and 256-wide heads aligns the block to 32 tokens instead: not modelled.
    """
    token_bytes = arch.kv_elements_per_token_per_layer(tp) * kv_bytes
    if not arch.state_layers:
        return base, token_bytes * base
    state = arch.state_bytes_per_layer(state_dtype_bytes, tp)
    if not arch.attention_layers:
        return context, float(state)
    block = BLOCK_TOKENS * math.ceil(state / (BLOCK_TOKENS * token_bytes))
    return block, token_bytes * block


@record
class KvLayout:
    """KV-cache groups of one pipeline stage: layer slots per layer kind after padding."""

    full_slots: int
    windowed_slots: int
    group_size: int
    groups: int
    state_slots: int = 0  # linear-attention and Mamba layers: one page per sequence each


def kv_layout(arch: Architecture, layers: range) -> KvLayout:
    """vLLM's grouping: each layer kind (full attention, windowed attention, recurrent state) split into
    groups of equal size (the smallest kind's layer count, or the largest one's when it is under 1.25x the
    smallest), the last group of a kind padded (``_get_kv_cache_groups_uniform_page_size``)."""
    windowed = arch.windowed_count(layers)
    state = arch.state_count(layers)
    full = arch.attention_count(layers) - windowed
    counts = [count for count in (full, windowed, state) if count]
    if len(counts) < 2:
        size = max(counts[0], 1) if counts else 1
        return KvLayout(full, windowed, size, 1, state)
    smallest, largest = min(counts), max(counts)
    size = largest if largest < 1.25 * smallest else smallest
    groups = [math.ceil(count / size) for count in (full, windowed, state)]
    return KvLayout(groups[0] * size, groups[1] * size, size, sum(groups), groups[2] * size)


def kv_bytes_per_sequence(
    arch: Architecture,
    context: int,
    kv_bytes: float,
    tp: int,
    pp: int,
    max_batched: int = LARGE_GPU_BATCH[0],
    stage: int | None = None,
    *,
    state_dtype_bytes: int,
    base_block: int = BLOCK_TOKENS,
) -> float:
    """KV bytes one sequence of ``context`` tokens needs on one GPU (the stage with the most layer slots
    unless ``stage`` is given), per layer kind, group padding included: attention layers by the blocks
    their tokens fill, each state layer one page whatever the length (vLLM ``MambaSpec.
    max_memory_usage_bytes`` without prefix caching). ``state_dtype_bytes``: the model dtype's."""
    per_layer_token = arch.kv_elements_per_token_per_layer(tp) * kv_bytes
    block, page = kv_pages(arch, kv_bytes, tp, state_dtype_bytes, context, base_block)
    stages = arch.stage_layers(pp)
    chosen = stages if stage is None else (stages[stage],)
    full_tokens = cached_tokens(arch, context, False, max_batched, block)
    windowed_tokens = cached_tokens(arch, context, True, max_batched, block)
    best = 0.0
    for layers in chosen:
        layout = kv_layout(arch, layers)
        bytes_ = per_layer_token * (layout.full_slots * full_tokens + layout.windowed_slots * windowed_tokens)
        best = max(best, bytes_ + page * layout.state_slots)
    return best


def prefill_transient_per_token(arch: Architecture, tp: int = 1) -> float:
    """Bytes per prompt token live at the MLP of a layer in a no-grad bf16 forward.

    The embedding output, the layer input and the post-attention residual (2h each), the norm output
    (2h), and the MLP: act(gate), up and their product (3 x 2i), or for fused-expert MoE the gate_up
    output (4i), act and product per routed expert plus the gathered token copy. Matches PyTorch's own
    accounting of Hugging Face prefills (llama3-8b, qwen2.5-7b, llama3-70b, mixtral) to within 0.3%,
    and vLLM's first-pipeline-stage profile of Llama-3.1-8B (1.1 GiB at 8,192 tokens) within 7%.
    """
    residual = 8 * arch.hidden
    if arch.is_moe:
        per_expert = 8 * arch.expert_width / tp + 2 * arch.hidden
        return residual + arch.experts_per_token * per_expert
    return residual + (6 if arch.mlp == "gated" else 4) * arch.intermediate / tp


def sampler_requests(max_num_seqs: int, max_batched: int) -> int:
    """Dummy requests of the profile run: vLLM's ``_dummy_run`` spreads ``max_batched`` tokens over
    ``min(num_tokens, max_num_reqs)`` requests, and the sampler warm-up samples one token per request."""
    return min(max_num_seqs, max_batched)


def sampler_warmup_bytes(
    arch: Architecture,
    max_num_seqs: int,
    max_batched: int,
    release: VllmRelease = DEFAULT_RELEASE,
    tensor_parallel: int = 1,
) -> float:
    """The sampler warm-up over the profile run's dummy requests, with the dummy batch's hidden states."""
    requests = sampler_requests(max_num_seqs, max_batched)
    per_logit = release.sampler_bytes_per_logit(requests, tensor_parallel)
    return requests * arch.vocab * per_logit + max_batched * arch.hidden * 2


def activation_reserve(arch: Architecture, setup: ServingSetup, last: bool) -> float:
    """vLLM's "torch peak memory increase" on one GPU of a pipeline stage: every stage runs the same
    profiling forward; only the last one also warms up the sampler."""
    tokens = setup.max_batched_tokens
    forward = tokens * prefill_transient_per_token(arch, setup.tensor_parallel)
    sampler = sampler_warmup_bytes(arch, setup.max_num_seqs, tokens, setup.release, setup.tensor_parallel)
    peak = max(forward, sampler) if last else forward
    if setup.pipeline_parallel > 1:
        peak += 2 * tokens * arch.hidden * 2  # hidden state and residual sent to (or received from) a neighbour
    return peak


def runtime_bytes(tp: int, pp: int) -> int:
    if tp > 1:
        return NON_TORCH_TP
    return NON_TORCH_PP if pp > 1 else NON_TORCH_SINGLE


@functools.lru_cache(maxsize=64)
def cuda_graph_bytes(
    max_num_seqs: int, max_batched: int, release: VllmRelease = DEFAULT_RELEASE, gpu_arch: str = ""
) -> int:
    """The CUDA-graph pool: a first capture per mode, then each further graph (``VllmRelease.capture_sizes``:
    from 0.11.2 PIECEWISE graphs for the sizes up to min(2 x seqs, 512, batched tokens), FULL ones up to seqs)."""
    return sum(
        GRAPH_FIRST_CAPTURE + (sizes - 1) * GRAPH_EACH
        for sizes in release.capture_sizes(max_num_seqs, max_batched, gpu_arch)
        if sizes
    )


@record
class ServingShape:
    """The serving memory of a deployment shape before any running sequence, and what each one adds:
    everything but the running sequences' KV cache is the same at every concurrency (the stage with the
    least room per sequence is the tightest whatever the concurrency)."""

    empty: ServingMemory  # kv_cache 0
    per_sequence: float  # KV bytes of one sequence on the tightest stage
    burst: bool = False  # ServingSetup.burst
    # Under pipeline parallelism, each stage's (per-GPU bytes before any sequence, KV bytes per sequence): the
    # stage whose KV room is tightest sizes every stage's pool (``empty``), yet another may hold more bytes (the
    # embeddings, a vision tower, a heavier share of layers): ``ServingMemory.fullest_gpu``.
    stages: tuple[tuple[int, float], ...] = ()

    def at(self, concurrency: int) -> ServingMemory:
        """The memory with the KV cache of ``concurrency`` sequences, or of one in a burst. A burst's requests
        wait in the engine's queue until its pool has room (vLLM's scheduler admits while the cache has room
        and preempts when it runs out; SGLang and TensorRT-LLM queue likewise), so a pool smaller than the
        burst slows it, which the speed model's wave prices, but stops nothing: the engine needs room for one
        sequence of the full context to start (vLLM's check at start-up), and that is what the fit asks."""
        sequences = 1 if self.burst else concurrency
        fullest = max((fixed + math.ceil(per_sequence * sequences) for fixed, per_sequence in self.stages), default=0)
        # evolve: a copy of the empty memory's fields (a planner builds thousands of these)
        return evolve(self.empty, kv_cache=math.ceil(self.per_sequence * sequences), fullest_gpu=fullest)


def estimate_serving(setup: ServingSetup, usable_bytes: int) -> ServingMemory:
    """Per-GPU serving memory of ``setup`` (the shape is computed once per process: the planner asks for
    the same shape at many concurrencies)."""
    return shape_at_any_load(setup, usable_bytes).at(setup.concurrency)


def shape_at_any_load(setup: ServingSetup, usable_bytes: int) -> ServingShape:
    """``serving_shape`` of ``setup``, memoised without its concurrency (which the shape does not read):
    one cached shape serves every load; a burst's shape is the same, marked as one."""
    shape = serving_shape(evolve(setup, concurrency=0, burst=False), usable_bytes)
    return evolve(shape, burst=True) if setup.burst else shape


@functools.lru_cache(maxsize=512)  # a spec's declared shapes and rules' what-ifs; about 1 MiB at most
def serving_shape(setup: ServingSetup, usable_bytes: int) -> ServingShape:
    """The memory of ``setup`` apart from its own sequences' KV cache (``setup.concurrency`` is not read),
    under its engine's memory model: vLLM's here, SGLang's and TensorRT-LLM's in gpuplan.estimate.engines."""
    if setup.engine in ("sglang", "trtllm"):
        from gpuplan.estimate.engines import engine_shape  # imports this module: loaded on first use

        return engine_shape(setup, usable_bytes)
    arch, tp, pp, release = setup.architecture, setup.tensor_parallel, setup.pipeline_parallel, setup.release
    weights = model_stage_weights(setup)
    tenant_weights = sum(
        max(
            stage_weights(
                t.architecture,
                t.quantization,
                t.model_dtype_bytes,
                tp,
                pp,
                t.group_size,
                t.quantized_params,
                expert_alignment=setup.expert_alignment if t.quantization == "mxfp4" else (1, 1),
            )
        )
        for t in setup.tenants
    )
    tenant_kv = sum(
        kv_bytes_per_sequence(
            t.architecture,
            t.context,
            setup.kv_dtype_bytes,
            tp,
            pp,
            setup.max_batched_tokens,
            state_dtype_bytes=t.model_dtype_bytes,
            base_block=release.block_tokens,
        )
        * t.concurrency
        for t in setup.tenants
    )
    stages = arch.stage_layers(pp)
    # Every stage but the last reserves the same (only the last samples).
    reserves = {
        last: max(
            [activation_reserve(arch, setup, last)]
            + [activation_reserve(t.architecture, setup, last) for t in setup.tenants]
        )
        for last in {index == len(stages) - 1 for index in range(len(stages))}
    }
    budget = _budget(release, usable_bytes, setup.memory_utilization, max(reserves.values()), setup.gpu_arch)
    runtime = runtime_bytes(tp, pp) + (CUDA_CONTEXT_BYTES if release.context_in_budget else 0)
    # Model runner V2's sampler state, on the last stage (the one that samples): in the budget from 0.27.0,
    # beside it before (VllmRelease.state_in_budget).
    state = release.sampler_state_bytes(setup.max_num_seqs, arch.vocab)
    state_inside = state if release.state_in_budget else 0
    graphs = cuda_graph_bytes(setup.max_num_seqs, setup.max_batched_tokens, release, setup.gpu_arch)
    counted = release.graphs_counted(setup.gpu_arch)
    graphs_inside = graphs if counted else 0
    block, page_bytes = kv_pages(
        arch, setup.kv_dtype_bytes, tp, setup.model_dtype_bytes, setup.context, release.block_tokens
    )
    page = math.ceil(page_bytes)
    lora, draft = added_stage_weights(setup)
    draft_token = proposer_kv(setup)
    candidates = []
    for index in range(len(stages)):
        last = index == len(stages) - 1
        reserve = reserves[last]
        per_sequence = kv_bytes_per_sequence(
            arch,
            setup.context,
            setup.kv_dtype_bytes,
            tp,
            pp,
            setup.max_batched_tokens,
            index,
            state_dtype_bytes=setup.model_dtype_bytes,
            base_block=release.block_tokens,
        )
        added = lora[index] + (draft if last else 0.0)
        if last and draft_token:  # the proposer's layers: blocks of the model's size over the whole context
            per_sequence += draft_token * math.ceil(setup.context / block) * block
        non_kv = weights[index] + reserve + runtime + (state_inside if last else 0) + tenant_weights + added
        room = (budget - non_kv - tenant_kv - graphs_inside) / max(per_sequence, 1.0)
        candidates.append((room, index, reserve, per_sequence))
    vision = arch.vision_params * unquantized_bytes(setup.quantization, setup.model_dtype_bytes) / tp

    def stage_memory(index: int, reserve: float, per_sequence: float) -> ServingMemory:
        """One GPU of pipeline stage ``index`` before any sequence."""
        last = index == len(stages) - 1
        layout = kv_layout(arch, stages[index])
        return ServingMemory(
            weights=math.ceil(weights[index]),
            kv_cache=0,
            activation_reserve=math.ceil(reserve),
            runtime=runtime + (state_inside if last else 0),
            tenant_weights=math.ceil(tenant_weights),
            tenant_kv_cache=math.ceil(tenant_kv),
            budget=budget,
            kv_bytes_per_sequence=math.ceil(per_sequence),
            kv_bytes_per_token=arch.kv_bytes_per_token(setup.kv_dtype_bytes, tp) / pp + (draft_token if last else 0.0),
            cuda_graphs=graphs,
            graphs_in_budget=counted,
            capacity=usable_bytes,
            vision_weights=math.ceil(vision) if index == 0 else 0,
            kv_page_bytes=page,
            kv_group_size=layout.group_size,
            kv_groups=layout.groups,
            kv_block_tokens=block,
            state_bytes_per_sequence=math.ceil(page_bytes * layout.state_slots),
            lora_slots=math.ceil(lora[index]),
            draft_weights=math.ceil(draft) if last else 0,
            draft_page_bytes=math.ceil(draft_token * block) if last else 0,
            # On the last stage's GPUs, beside a budget every stage shares: checked whichever stage is the tightest.
            outside_budget=state - state_inside,
            outside_what="model runner V2's sampler state" if state > state_inside else "",
        )

    _, index, _, per_sequence = min(candidates)
    memories = [stage_memory(i, r, q) for _, i, r, q in candidates]  # in stage order
    figures = tuple((m.per_gpu, c[3]) for m, c in zip(memories, candidates, strict=True)) if len(memories) > 1 else ()
    return ServingShape(memories[index], per_sequence, stages=figures)


def _budget(release: VllmRelease, usable_bytes: int, utilization: float, activation_peak: float, arch: str) -> int:
    """The engine's budget on one GPU: ``utilization`` x the GPU's memory; vLLM 0.34's extensible KV cache
    takes at most what is free after warm-up less its margin (the larger of its floor, 1 GiB or 3 GiB on AMD
    GPUs, and 3/4 of the activation peak; the activation peak itself is in the non-KV memory:
    ``measure_kv_cache_bytes``), so its budget is also at most the memory less the CUDA context (in use
    before the snapshot) and that margin."""
    budget = usable_bytes * utilization
    if release.extensible_kv:  # (never below 0: an activation peak beyond the GPU leaves nothing)
        margin = max(release.kv_margin_floor(arch), 0.75 * activation_peak)
        budget = max(0.0, min(budget, usable_bytes - CUDA_CONTEXT_BYTES - margin))
    return int(budget)


def max_concurrency(memory: ServingMemory) -> int:
    """Sequences of the full context that fit in the KV budget (vLLM's logged 'maximum concurrency')."""
    if memory.kv_bytes_per_sequence <= 0:
        return 0
    return max(0, memory.kv_available // memory.kv_bytes_per_sequence)


def max_context(setup: ServingSetup, memory: ServingMemory) -> int:
    """The longest context at the declared concurrency that fits the KV budget (binary search, as vLLM), under the
    engine's own sizing: SGLang and TensorRT-LLM size every layer for the whole context (their bytes per token, in
    their blocks) beside each sequence's state (gpuplan.estimate.engines), vLLM caps windowed layers."""
    available = memory.kv_available
    arch, tp, pp = setup.architecture, setup.tensor_parallel, setup.pipeline_parallel
    if available <= 0:
        return 0
    if setup.engine in ("sglang", "trtllm"):
        block, per_token = memory.kv_block_tokens, memory.kv_bytes_per_token
        sequences = available // max(1, setup.concurrency) - memory.state_bytes_per_sequence
        return max(0, int(sequences // (per_token * block)) * block) if per_token > 0 else 0
    low, high = 0, max(setup.context, arch.max_position or setup.context) * 64
    draft_token, block = proposer_kv(setup), memory.kv_block_tokens
    while low < high:
        middle = (low + high + 1) // 2
        need = (
            kv_bytes_per_sequence(
                arch,
                middle,
                setup.kv_dtype_bytes,
                tp,
                pp,
                setup.max_batched_tokens,
                state_dtype_bytes=setup.model_dtype_bytes,
                base_block=setup.release.block_tokens,
            )
            + draft_token * math.ceil(middle / block) * block
        ) * setup.concurrency
        low, high = (middle, high) if need <= available else (low, middle - 1)
    return low
