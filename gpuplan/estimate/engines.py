"""Serving memory of SGLang and TensorRT-LLM: each engine sizes its KV cache by its own mechanism.

vLLM's model (``gpuplan.estimate.serving``) budgets a share of the GPU's total memory and subtracts what a
profile run measured. The two other engines gpuplan plans for do it differently, each read from its code:

SGLang v0.5.3-v0.5.4 (``python/sglang/srt/model_executor/model_runner.py``):
- ``init_torch_distributed`` measures the memory free once the process and its communicators are up
  (``min_per_gpu_memory``, the smallest over the ranks);
- ``profile_max_num_token``: ``rest = free after loading the weights - free at start x (1 -
  mem_fraction_static)`` and ``max_total_num_tokens = rest // cell_size`` (``cell_size``: K and V of
  one token over the rank's layers), so the KV pool is ``mem_fraction_static x free at start -
  weights``; pages of one token (``page_size`` 1);
- the rest of the memory free at start, ``1 - mem_fraction_static`` of it, holds what comes after the
  pool: the request-to-token table (``init_memory_pool``), the chunked-prefill activations and the
  CUDA graphs (captured after the pool);
- ``mem_fraction_static`` defaults to SGLang's own rule (``server_args.py``
  ``_handle_gpu_memory_settings``): ``(GPU MiB - reserved) / GPU MiB`` with ``reserved = 512 +
  1.5 x chunked_prefill_size + 2 x cuda_graph_max_bs + 1024 x TP x PP / 8`` MiB, at least 10 GiB on
  GPUs of more than 60 GiB, both sizes set by the GPU's memory and TP.

TensorRT-LLM v0.19-v1.0, PyTorch backend (``tensorrt_llm/_torch/pyexecutor/_util.py`` ``KvCacheCreator``,
``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp`` ``calculateMaxNumBlocks``):
- the model is loaded and a profile forward of ``max_num_tokens`` dummy context tokens is run;
- ``_cal_max_memory``: ``available_kv_mem = (total - peak + the profiling KV) x
  free_gpu_memory_fraction``, the peak being torch's (weights and activations) plus everything outside
  torch (the CUDA context, NCCL, cuBLAS): ``free_gpu_memory_fraction`` of the memory free after the
  model loaded and ran, default 0.9 (``KvCacheConfig``); ``configure_kv_cache_capacity`` caps it at
  ``max_gpu_total_bytes`` when that is set;
- the pool is carved into blocks of ``tokens_per_block`` (32) tokens; CUDA graphs are captured after it,
  in the share the fraction leaves free.

Both engines are modelled for full-attention models: their sliding-window pools (SGLang's SWA pool,
TensorRT-LLM's variable attention windows) are not, and a windowed model is sized as if every layer kept
the whole context. Of a hybrid model (linear-attention or Mamba-2 layers) both count only the attention
layers in a token's KV (SGLang's ``cell_size`` over ``full_attention_layer_ids``), and each sequence's
recurrent state is counted beside its KV, in the same pool; the engines' own state pools (SGLang's
``max_mamba_cache_size`` requests taken from the pool first, TensorRT-LLM's ``MambaHybridCacheManager``
slots for ``max_batch_size``) are not sized as such.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gpuplan.architecture import Architecture
from gpuplan.estimate.serving import (
    DEFAULT_RELEASE,
    ServingMemory,
    ServingSetup,
    ServingShape,
    added_stage_weights,
    kv_pages,
    model_stage_weights,
    prefill_transient_per_token,
    proposer_kv,
    runtime_bytes,
    sampler_requests,
)
from gpuplan.estimate.serving import (
    ENGINE as VLLM_ENGINE,
)
from gpuplan.estimate.vllm_releases import VllmRelease
from gpuplan.estimate.weights import stage_weights, unquantized_bytes
from gpuplan.units import GIB, MIB

SGLANG_ENGINE = "SGLang v0.5.3-v0.5.4 (mem_fraction_static of the memory free at start; 1-token pages)"
TRTLLM_ENGINE = (
    "TensorRT-LLM v0.19-v1.0, PyTorch backend (free_gpu_memory_fraction of the memory free after the model "
    "loads and runs; 32-token blocks)"
)
# The memory model each serve.engine is estimated with; LMDeploy and the generic engine follow vLLM's.
MEMORY_ENGINES = {
    "vllm": VLLM_ENGINE,
    "sglang": SGLANG_ENGINE,
    "trtllm": TRTLLM_ENGINE,
    "lmdeploy": VLLM_ENGINE,
    "generic": VLLM_ENGINE,
}
# The engines' names, in a few words' notes.
SHORT_NAMES = {VLLM_ENGINE: "vLLM", SGLANG_ENGINE: "SGLang", TRTLLM_ENGINE: "TensorRT-LLM"}
# What serve.memory_utilization means for each memory model, and its name in the engine.
FRACTION_NAMES = {
    VLLM_ENGINE: "gpu_memory_utilization",
    SGLANG_ENGINE: "mem_fraction_static",
    TRTLLM_ENGINE: "free_gpu_memory_fraction",
}

# -- defaults: the one source of each engine's memory defaults ---------------------------------------

# vLLM EngineArgs.gpu_memory_utilization at the memory model's release (others: VllmRelease.default_utilization).
VLLM_MEMORY_UTILIZATION = DEFAULT_RELEASE.default_utilization
# tensorrt_llm/llmapi/llm_args.py KvCacheConfig.free_gpu_memory_fraction; TorchLlmArgs max_num_tokens and
# max_batch_size; tokens_per_block (KvCacheConfig / TorchLlmArgs) 32.
TRTLLM_FREE_GPU_MEMORY_FRACTION = 0.9
TRTLLM_MAX_NUM_TOKENS = 8192
TRTLLM_MAX_BATCH_SIZE = 2048
TRTLLM_TOKENS_PER_BLOCK = 32
# SGLang server_args.py _handle_gpu_memory_settings (v0.5.3): by the GPU's memory (nvidia-smi MiB, below the
# bound), chunked_prefill_size and cuda_graph_max_bs below TP 4 and from TP 4 on.
SGLANG_TIERS = (
    (20 * 1024, 2048, 8, 8),  # T4, 4080
    (35 * 1024, 2048, 16, 80),  # A10, 4090, 5090
    (60 * 1024, 4096, 32, 160),  # A100 40GB, L40
    (90 * 1024, 8192, 256, 512),  # H100, A100 80GB
    (160 * 1024, 8192, 256, 512),  # H20, H200
)
SGLANG_LARGEST = (16384, 512)  # B200, MI300: chunked_prefill_size 16k, cuda_graph_max_bs 512
SGLANG_PAGE_SIZE = 1  # ServerArgs.page_size
# CUDA graphs SGLang captures after the pool, per captured batch size: "Capture cuda graph end ... mem
# usage=1.44 GB" for 52 sizes (sgl-project/sglang#11830, B200) and 1.00-1.04 GB for 36 sizes
# (sgl-project/sglang#12978, TP 2): 28.4 and 29.0 MiB a size.
SGLANG_GRAPH_EACH = 29 * MIB
# ReqToTokenPool (mem_cache/memory_pool.py): int32 token indices, (size + 1) x (context_len + 4).
SGLANG_REQ_INDEX_BYTES = 4


def memory_engine(engine_id: str) -> str:
    """The memory model ``serve.engine`` is estimated with (vLLM's for LMDeploy and the generic engine)."""
    return MEMORY_ENGINES[engine_id]


def engine_short_name(engine_id: str) -> str:
    """The name of the engine whose memory model ``serve.engine`` is estimated with ("vLLM", "SGLang", ...)."""
    return SHORT_NAMES[memory_engine(engine_id)]


def fraction_name(engine_id: str) -> str:
    """The engine's own name for ``serve.memory_utilization``."""
    return FRACTION_NAMES[memory_engine(engine_id)]


def sglang_sizes(memory_bytes: int, tensor_parallel: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) SGLang v0.5.3 picks for a GPU of ``memory_bytes`` (the
    total nvidia-smi reports) at ``tensor_parallel`` ranks."""
    mib = memory_bytes / MIB
    for bound, chunked, small_tp, large_tp in SGLANG_TIERS:
        if mib < bound:
            return chunked, small_tp if tensor_parallel < 4 else large_tp
    return SGLANG_LARGEST


def sglang_mem_fraction_static(memory_bytes: int, tensor_parallel: int, pipeline_parallel: int = 1) -> float:
    """SGLang v0.5.3's default ``mem_fraction_static`` (server_args.py ``_handle_gpu_memory_settings``):
    the share of the GPU left after a reserve for activations, CUDA graphs and communicators, in MiB."""
    mib = memory_bytes / MIB
    chunked, graph_bs = sglang_sizes(memory_bytes, tensor_parallel)
    reserved = 512 + max(chunked, 2048) * 1.5 + graph_bs * 2 + tensor_parallel * pipeline_parallel / 8 * 1024
    if mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    # A reserve larger than the GPU (hundreds of pipeline ranks on a small card) leaves no pool: SGLang's
    # negative fraction and gpuplan's 0 both end in "Not enough memory".
    return max(0.0, round((mib - reserved) / mib, 3))


def default_memory_fraction(
    engine_id: str,
    memory_bytes: int,
    tensor_parallel: int,
    pipeline_parallel: int,
    release: VllmRelease = DEFAULT_RELEASE,
) -> float:
    """``serve.memory_utilization`` when the spec does not set it: each engine's own default (vLLM's at
    ``release``, ``serve.engine_version``)."""
    engine = memory_engine(engine_id)
    if engine == SGLANG_ENGINE:
        return sglang_mem_fraction_static(memory_bytes, tensor_parallel, pipeline_parallel)
    if engine == TRTLLM_ENGINE:
        return TRTLLM_FREE_GPU_MEMORY_FRACTION
    return release.default_utilization


def budget_bound(
    engine_id: str,
    memory_utilization: float | None,
    usable_bytes: int,
    memory_bytes: int,
    release: VllmRelease = DEFAULT_RELEASE,
) -> float:
    """An upper bound of the engine budget (``ServingMemory.budget``) on one GPU, whatever the layout: the
    planner prunes with it. SGLang's default fraction falls as TP grows, so TP 1 bounds it; TensorRT-LLM's
    budget is the whole usable memory (its fraction applies to what is left free)."""
    engine = memory_engine(engine_id)
    if engine == TRTLLM_ENGINE:
        return float(usable_bytes)
    fraction = memory_utilization
    if fraction is None:
        fraction = default_memory_fraction(engine_id, memory_bytes, 1, 1, release)
    return usable_bytes * fraction


def sglang_graph_sizes(cuda_graph_max_bs: int) -> int:
    """Batch sizes SGLang v0.5.3 captures (server_args.py ``_generate_cuda_graph_batch_sizes``): 1, 2, 4,
    8, 12, then 16-256 step 8, 272-496 step 16, 512 on step 32, up to ``cuda_graph_max_bs``."""
    sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, cuda_graph_max_bs + 1, 32)]
    return sum(1 for size in sizes if size <= cuda_graph_max_bs)


def sglang_request_table(max_total_tokens: int, context: int) -> int:
    """Bytes of SGLang's request-to-token table (model_runner.py ``init_memory_pool``): ``max_num_reqs =
    min(max(max_total_num_tokens / context_len x 512, 2048), 4096)`` rows of ``context_len + 4`` int32."""
    requests = min(max(int(max(max_total_tokens, 0) / context * 512), 2048), 4096)
    return (requests + 1) * (context + 4) * SGLANG_REQ_INDEX_BYTES


def _per_token(arch: Architecture, setup: ServingSetup, layers: range) -> float:
    """K and V bytes of one token over the attention layers of ``layers`` on one GPU, each a full-attention
    layer (SGLang ``cell_size``, TensorRT-LLM ``get_cache_size_per_token``)."""
    return (
        arch.attention_count(layers)
        * arch.kv_elements_per_token_per_layer(setup.tensor_parallel)
        * setup.kv_dtype_bytes
    )


def _state(arch: Architecture, setup: ServingSetup, layers: range) -> int:
    """One sequence's recurrent state over the linear-attention and Mamba layers of ``layers`` on one GPU
    (the shapes of ``Architecture.state_bytes_per_layer``, which SGLang's ``MambaPool`` shares)."""
    return arch.state_count(layers) * arch.state_bytes_per_layer(setup.model_dtype_bytes, setup.tensor_parallel)


def _tenants(setup: ServingSetup, block_tokens: int) -> tuple[float, float]:
    """Weights and KV cache of the other models on the same GPUs: memory the engine does not find free."""
    tp, pp = setup.tensor_parallel, setup.pipeline_parallel
    weights = sum(
        max(
            stage_weights(t.architecture, t.quantization, t.model_dtype_bytes, tp, pp, t.group_size, t.quantized_params)
        )
        for t in setup.tenants
    )
    kv = 0.0
    for t in setup.tenants:
        tokens = math.ceil(t.context / block_tokens) * block_tokens
        state = t.architecture.state_layers * t.architecture.state_bytes_per_layer(t.model_dtype_bytes, tp)
        kv += (t.architecture.kv_bytes_per_token(setup.kv_dtype_bytes, tp) * tokens + state) / pp * t.concurrency
    return weights, kv


def _loaded(setup: ServingSetup) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """(everything loaded before the engine sizes its pool, of which the LoRA slots, of which the proposer's
    weights) on one GPU of each stage: the model's weights, the adapter slots and a speculative proposer's
    weights on the last stage (SGLang and TensorRT-LLM load them before they measure what is free)."""
    weights = model_stage_weights(setup)
    lora, draft = added_stage_weights(setup)
    drafts = tuple(draft if index == len(weights) - 1 else 0.0 for index in range(len(weights)))
    return tuple(w + a + d for w, a, d in zip(weights, lora, drafts, strict=True)), lora, drafts


def _stage_caches(setup: ServingSetup) -> list[tuple[float, int]]:
    """(KV bytes per token, state bytes per sequence) on one GPU of each pipeline stage, a speculative
    proposer's layers in the last stage's pool."""
    arch = setup.architecture
    stages = arch.stage_layers(setup.pipeline_parallel)
    caches = [(_per_token(arch, setup, layers), _state(arch, setup, layers)) for layers in stages]
    per_token, state = caches[-1]
    caches[-1] = (per_token + proposer_kv(setup), state)
    return caches


def _tightest_stage(caches: list[tuple[float, int]], room: Callable[[int], float], tokens: int) -> int:
    """The pipeline stage whose ``room(index)`` holds the fewest sequences of ``tokens`` tokens (``caches``:
    ``_stage_caches``): it sizes every rank (SGLang ``init_memory_pool`` all-reduces the MIN over the PP ranks;
    TensorRT-LLM's blocks are the same on every rank). A model with no attention or state layer caches
    nothing: the stage with the least room."""
    holding = [index for index, (per_token, state) in enumerate(caches) if per_token * tokens + state > 0]
    if not holding:  # no stage holds a cache (MLP-only layers): the one with the least room sizes the rest
        return min(range(len(caches)), key=room)
    return min(holding, key=lambda index: (room(index) / (caches[index][0] * tokens + caches[index][1]), index))


def engine_shape(setup: ServingSetup, usable_bytes: int) -> ServingShape:
    """The serving shape of ``setup`` under its engine's own memory model (SGLang or TensorRT-LLM)."""
    if memory_engine(setup.engine) == SGLANG_ENGINE:
        return _sglang_shape(setup, usable_bytes)
    return _trtllm_shape(setup, usable_bytes)


def _sglang_shape(setup: ServingSetup, usable_bytes: int) -> ServingShape:
    """SGLang: a budget of ``runtime + tenants + mem_fraction_static x free at start`` holds the weights and
    the pool, ``free at start = usable - runtime - tenants`` (the CUDA context is the 0.5 GiB ``usable_bytes``
    already leaves out; ``runtime`` the communicators ``init_torch_distributed`` creates)."""
    arch, tp, pp = setup.architecture, setup.tensor_parallel, setup.pipeline_parallel
    weights, lora, draft = _loaded(setup)
    tenant_weights, tenant_kv = _tenants(setup, SGLANG_PAGE_SIZE)
    runtime = runtime_bytes(tp, pp) if tp * pp > 1 else 0  # world size 1 creates no communicator
    free_at_start = max(0.0, usable_bytes - runtime - tenant_weights - tenant_kv)
    budget = int(runtime + tenant_weights + tenant_kv + setup.memory_utilization * free_at_start)
    stages, caches = arch.stage_layers(pp), _stage_caches(setup)
    index = _tightest_stage(
        caches, lambda index: budget - runtime - tenant_weights - tenant_kv - weights[index], setup.context
    )
    pool = budget - runtime - tenant_weights - tenant_kv - math.ceil(weights[index])
    cell = caches[index][0]
    tokens = max(0, pool) // math.ceil(cell) if cell else 0
    table = sglang_request_table(int(tokens), setup.context)
    activations = setup.max_batched_tokens * prefill_transient_per_token(arch, tp)
    graphs = SGLANG_GRAPH_EACH * sglang_graph_sizes(setup.max_num_seqs)

    def stage_memory(index: int) -> ServingMemory:
        """One GPU of pipeline stage ``index`` before any sequence."""
        cell, state = caches[index]
        layers = max(1, arch.attention_count(stages[index]))
        return ServingMemory(
            weights=math.ceil(weights[index] - lora[index] - draft[index]),
            kv_cache=0,
            activation_reserve=0,  # outside the budget: in outside_budget
            runtime=runtime,
            tenant_weights=math.ceil(tenant_weights),
            tenant_kv_cache=math.ceil(tenant_kv),
            budget=budget,
            kv_bytes_per_sequence=math.ceil(cell * setup.context + state),
            kv_bytes_per_token=cell,
            cuda_graphs=graphs,
            capacity=usable_bytes,
            vision_weights=_vision(setup) if index == 0 else 0,
            kv_page_bytes=math.ceil(cell / layers),
            kv_group_size=layers,
            kv_groups=1,
            kv_block_tokens=SGLANG_PAGE_SIZE,
            state_bytes_per_sequence=state,
            outside_budget=math.ceil(activations) + table,
            outside_what="prefill activations and request table",
            lora_slots=math.ceil(lora[index]),
            draft_weights=math.ceil(draft[index]),
        )

    return _shape_at_tightest(stage_memory, index, [cell * setup.context + state for cell, state in caches])


def _shape_at_tightest(
    stage_memory: Callable[[int], ServingMemory], tightest: int, per_sequence: list[float]
) -> ServingShape:
    """The shape of the ``tightest`` stage, with every stage's figures under pipeline parallelism
    (``ServingShape.stages``)."""
    memories = [stage_memory(i) for i in range(len(per_sequence))]
    stages = tuple((memory.per_gpu, q) for memory, q in zip(memories, per_sequence, strict=True))
    return ServingShape(memories[tightest], per_sequence[tightest], stages=stages if len(stages) > 1 else ())


def _trtllm_shape(setup: ServingSetup, usable_bytes: int) -> ServingShape:
    """TensorRT-LLM: ``free_gpu_memory_fraction`` of what the weights, the profile forward of
    ``max_num_tokens`` tokens (the activations), the communicators and cuBLAS (``runtime``, as vLLM's logs
    measure them) and other tenants leave of ``usable_bytes``, capped at ``max_gpu_total_bytes``."""
    arch, tp, pp = setup.architecture, setup.tensor_parallel, setup.pipeline_parallel
    weights, lora, draft = _loaded(setup)
    tenant_weights, tenant_kv = _tenants(setup, TRTLLM_TOKENS_PER_BLOCK)
    runtime = runtime_bytes(tp, pp)
    activations = setup.max_batched_tokens * prefill_transient_per_token(arch, tp)
    stages, caches = arch.stage_layers(pp), _stage_caches(setup)
    tokens = math.ceil(setup.context / TRTLLM_TOKENS_PER_BLOCK) * TRTLLM_TOKENS_PER_BLOCK
    index = _tightest_stage(
        caches, lambda index: usable_bytes - weights[index] - activations - runtime - tenant_weights - tenant_kv, tokens
    )

    def stage_memory(index: int) -> ServingMemory:
        """One GPU of pipeline stage ``index`` before any sequence."""
        per_token, state = caches[index]
        layers = max(1, arch.attention_count(stages[index]))
        return ServingMemory(
            weights=math.ceil(weights[index] - lora[index] - draft[index]),
            kv_cache=0,
            activation_reserve=math.ceil(activations),
            runtime=runtime,
            tenant_weights=math.ceil(tenant_weights),
            tenant_kv_cache=math.ceil(tenant_kv),
            budget=usable_bytes,
            kv_bytes_per_sequence=math.ceil(per_token * tokens + state),
            kv_bytes_per_token=per_token,
            cuda_graphs=0,  # captured after the pool, in the share free_gpu_memory_fraction leaves: not sized
            capacity=usable_bytes,
            vision_weights=_vision(setup) if index == 0 else 0,
            kv_page_bytes=math.ceil(per_token / layers * TRTLLM_TOKENS_PER_BLOCK),
            kv_group_size=layers,
            kv_groups=1,
            kv_block_tokens=TRTLLM_TOKENS_PER_BLOCK,
            state_bytes_per_sequence=state,
            kv_share=setup.memory_utilization,
            kv_cap=setup.memory_cap,
            lora_slots=math.ceil(lora[index]),
            draft_weights=math.ceil(draft[index]),
        )

    return _shape_at_tightest(stage_memory, index, [per_token * tokens + state for per_token, state in caches])


def _vision(setup: ServingSetup) -> int:
    arch = setup.architecture
    return math.ceil(
        arch.vision_params * unquantized_bytes(setup.quantization, setup.model_dtype_bytes) / setup.tensor_parallel
    )


def budget_words(setup: ServingSetup) -> str:
    """What the engine budget is, in a few words (a chart caption)."""
    engine, fraction = memory_engine(setup.engine), setup.memory_utilization
    if engine == SGLANG_ENGINE:
        return f"mem_fraction_static {fraction:.3g} of the memory free at start, with the communicators"
    if engine == TRTLLM_ENGINE:
        return f"usable memory; free_gpu_memory_fraction {fraction:.3g} of what is left is the KV cache"
    return f"{fraction:.0%} of usable memory"


def engine_memory_notes(setup: ServingSetup, limits: str) -> tuple[tuple[str, str], ...]:
    """The estimate's memory model in words: the model with its fraction as the engine names it, what
    stands for activations (the batch limits it is sized at: from ``limits``, in words), and the runtime."""
    engine, fraction = memory_engine(setup.engine), setup.memory_utilization
    tokens, sequences = setup.max_batched_tokens, setup.max_num_seqs
    communicators = "communicators: 2.07 GiB per TP rank, 0.07 GiB per pipeline rank (NCCL and all-reduce buffers"
    if engine == SGLANG_ENGINE:
        return (
            (
                "memory model",
                f"{engine}: mem_fraction_static {fraction:.3g} of the memory free at start holds the"
                " weights and the KV pool",
            ),
            (
                "activation reserve",
                f"outside the budget: a chunked prefill of {tokens:,} tokens, the request table"
                f" and CUDA graphs for {sglang_graph_sizes(sequences)} batch sizes up to {sequences}, at {limits}",
            ),
            ("runtime", f"{communicators} as vLLM's logs measure them), none on one GPU"),
        )
    if engine == TRTLLM_ENGINE:
        cap = f", at most {setup.memory_cap / GIB:,.2f} GiB (max_gpu_total_bytes)" if setup.memory_cap else ""
        return (
            ("memory model", f"{engine}: free_gpu_memory_fraction {fraction:.3g} of the memory left free{cap}"),
            (
                "activation reserve",
                f"a profile forward of {tokens:,} tokens (max_num_tokens, at {limits}); CUDA graphs are"
                " captured in the share the fraction leaves free, not sized",
            ),
            ("runtime", f"cuBLAS 0.25 GiB on one GPU; {communicators}), as vLLM's logs measure them"),
        )
    arch, tp, release = setup.architecture, setup.tensor_parallel, setup.release
    block, _ = kv_pages(arch, setup.kv_dtype_bytes, tp, setup.model_dtype_bytes, setup.context, release.block_tokens)
    requests = sampler_requests(sequences, tokens)
    share = f"{fraction:.0%} of GPU memory"
    if release.extensible_kv:
        floor = release.kv_margin_floor(setup.gpu_arch) // GIB
        share += f" (at most what is free after warm-up, less max({floor} GiB, 3/4 of the activation peak))"
    graphs = (
        "estimated and taken from the budget"
        if release.graphs_counted(setup.gpu_arch)
        else "captured outside the budget"
    )
    context = "; the CUDA context counts against the budget (0.61 GiB)" if release.context_in_budget else ""
    if release.v2_runner:
        state = release.sampler_state_bytes(sequences, arch.vocab) / GIB
        where = "" if release.state_in_budget else ", beside the budget (it counts from 0.27)"
        context += f"; model runner V2's per-sequence sampler state {state:,.2f} GiB{where}"
    elif release.class_unknown:
        context += (
            "; sized for the V1 model runner: this release picks model runner V2 by the model's config.json class,"
            " which dimensions given in the spec do not name"
        )
    return (
        ("memory model", f"{release.label}: {share}, {block:,}-token KV blocks"),
        (
            "activation reserve",
            f"the larger of a dummy forward of {tokens:,} tokens and the sampler warm-up over"
            f" {requests:,} requests ({release.sampler_bytes_per_logit(requests, tp):g} B per request x vocabulary"
            f" entry), at {limits}; CUDA graphs {graphs}",
        ),
        (
            "runtime",
            f"non-torch memory: 0.25 GiB on one GPU, 0.07 GiB per pipeline rank, 2.07 GiB per TP rank{context}",
        ),
    )
