"""The one table that says which measured terms correspond to which estimated terms.

Rows sum evidence terms (per rank) on one side and estimate terms on the other, so a mechanism the
estimator splits finer than the engine logs it, or the other way round, is still compared like for
like. When the estimator's breakdown changes (new keys, split keys), this table is the only place to
change: a test holds every key of the serving breakdown to exactly one usage row or to
``SERVE_NOT_MEASURED``.

A *usage* row is memory the run spent (more than estimated is the risk: GP801); a *capacity* row is
what the run could hold (less than estimated means less concurrency: GP803 when it falls below the
spec's). Usage rows take the largest rank (the GPU that runs out first), capacity rows the smallest
(vLLM sizes the KV cache by its smallest rank).
"""

from __future__ import annotations

import math

from gpuplan.analysis import FinetuneEstimate, ServeEstimate
from gpuplan.estimate.engines import SGLANG_ENGINE, TRTLLM_ENGINE, memory_engine
from gpuplan.evidence.model import (
    BYTES,
    CUDA_GRAPHS,
    FINETUNE,
    FREE_AT_START,
    KV_POOL,
    KV_ROOM,
    KV_TOKENS,
    MAX_CONCURRENCY,
    NON_TORCH,
    PEAK_ALLOCATED,
    PEAK_RESERVED,
    SEQUENCES,
    SERVE,
    TOKENS,
    TORCH_PEAK,
    WEIGHTS,
)
from gpuplan.records import record

USAGE, CAPACITY = "usage", "capacity"


@record
class Row:
    name: str
    estimate: tuple[str, ...]  # estimate terms, summed
    measured: tuple[str, ...]  # evidence terms, summed rank by rank
    direction: str  # USAGE | CAPACITY
    unit: str
    meaning: str  # what the row holds, for docs/verify.md and the Markdown output
    kinds: tuple[str, ...] = ()  # the evidence kinds the row is for; () every serving log


SERVE_ROWS = (
    Row(
        "weights",
        ("weights", "lora_slots", "draft_weights"),
        (WEIGHTS,),
        USAGE,
        BYTES,
        "weights on each GPU as loaded, with any LoRA slots and speculative proposer loaded beside them",
    ),
    Row(
        "activations",
        ("activations",),
        (TORCH_PEAK,),
        USAGE,
        BYTES,
        "profile-run peak: the larger of the dummy prefill batch and the sampler warm-up",
    ),
    Row(
        "CUDA graph pool",
        ("cuda_graphs",),
        (CUDA_GRAPHS,),
        USAGE,
        BYTES,
        "CUDA graphs captured after the KV cache is sized (outside gpu_memory_utilization in vLLM 0.19)",
    ),
    Row("runtime", ("runtime",), (NON_TORCH,), USAGE, BYTES, "allocations outside torch: NCCL, cuBLAS, all-reduce"),
    Row(
        "free at start",
        ("free_at_start",),
        (FREE_AT_START,),
        CAPACITY,
        BYTES,
        "SGLang: memory free once the communicators are up, of which mem_fraction_static is taken",
        ("sglang",),
    ),
    Row(
        "room for KV cache",
        ("kv_room",),
        (KV_ROOM,),
        CAPACITY,
        BYTES,
        "TensorRT-LLM: memory free after the weights and the profile run, of which free_gpu_memory_fraction is taken",
        ("trtllm",),
    ),
    Row("KV cache pool", ("kv_pool",), (KV_POOL,), CAPACITY, BYTES, "memory left for the KV cache on each GPU"),
    Row("KV cache tokens", ("kv_tokens",), (KV_TOKENS,), CAPACITY, TOKENS, "tokens the KV cache holds"),
    Row(
        "max concurrency",
        ("max_concurrency",),
        (MAX_CONCURRENCY,),
        CAPACITY,
        SEQUENCES,
        "sequences of the full context the KV cache holds",
    ),
)
# Serving breakdown keys no single-engine startup log measures, and what stands for them.
SERVE_NOT_MEASURED = {
    "kv_cache": "the declared concurrency's need: checked against the measured pool (GP803)",
    "tenant_weights": "other models on the same GPUs: one vLLM engine serves one model",
    "tenant_kv_cache": "other models on the same GPUs: one vLLM engine serves one model",
}
FINETUNE_ROWS = (
    Row(
        "tensor peak",
        ("tensor_peak",),
        (PEAK_ALLOCATED,),
        USAGE,
        BYTES,
        "tensors live at the peak (max_memory_allocated)",
    ),
    Row(
        "reserved peak",
        ("reserved",),
        (PEAK_RESERVED,),
        USAGE,
        BYTES,
        "the caching allocator's segments at their peak (max_memory_reserved): the tensors and the blocks it "
        "keeps cached; the CUDA context is in neither",
    ),
)
ROWS = {SERVE: SERVE_ROWS, FINETUNE: FINETUNE_ROWS}
TOTAL_ROW = "non-KV total"  # serving: the sum of the usage rows, shown when all of them were measured


def serve_estimate_terms(estimate: ServeEstimate) -> dict[str, float]:
    """The serving estimate's terms by name: its breakdown plus what vLLM logs about the KV cache."""
    memory = estimate.memory
    pool = float(memory.kv_available)
    per_block = memory.kv_bytes_per_token * memory.kv_block_tokens
    terms: dict[str, float] = {name: float(value) for name, value in memory.breakdown.items()}
    terms.setdefault("lora_slots", 0.0)  # loaded with the weights, as the engines measure them
    terms.setdefault("draft_weights", 0.0)
    terms["cuda_graphs"] = float(memory.cuda_graphs)
    terms["kv_pool"] = max(pool, 0.0)  # no room for a pool (weights and reserves over the budget): none, not below
    # num_blocks = pool // (bytes of one block over the GPU's layers); tokens = blocks x block size (vLLM 16,
    # SGLang 1, TensorRT-LLM 32).
    terms["kv_tokens"] = math.floor(max(pool, 0) / per_block) * memory.kv_block_tokens if per_block > 0 else 0.0
    if memory.state_bytes_per_sequence:  # state layers share the pages: blocks of the raised size per group
        terms["kv_tokens"] = float(memory.kv_cache_tokens)
    engine = memory_engine(estimate.setup.engine)
    room = float(memory.budget - (memory.per_gpu - memory.kv_cache))
    if engine == SGLANG_ENGINE:
        terms["free_at_start"] = float(
            memory.capacity - memory.runtime - memory.tenant_weights - memory.tenant_kv_cache
        )
    elif engine == TRTLLM_ENGINE:
        terms["kv_room"] = room
    terms["max_concurrency"] = max(pool, 0) / memory.kv_bytes_per_sequence if memory.kv_bytes_per_sequence else 0.0
    return terms


def finetune_estimate_terms(estimate: FinetuneEstimate, peaks_from_training: bool = False) -> dict[str, float]:
    """The training estimate's terms by name; ``peaks_from_training``: the evidence's peaks leave loading out
    (``Evidence.peaks_from_training``), so its tensor peak is held to the steps' (``step_allocated``)."""
    memory = estimate.memory
    terms: dict[str, float] = {name: float(value) for name, value in memory.breakdown.items()}
    terms["tensor_peak"] = float(memory.step_allocated if peaks_from_training else memory.allocated)
    terms["reserved"] = float(memory.reserved)
    return terms
