"""Multi-LoRA serving: the adapter slots the engine preallocates, and what the batched LoRA kernels read.

vLLM v0.19 with ``--enable-lora`` (``vllm/lora/model_manager.py`` ``LoRAModelManager._create_lora_modules``)
wraps every linear module the model class supports for LoRA (without ``--lora-target-modules``: all of
them, whatever an adapter targets), and each wrapper's ``create_lora_weights`` allocates zero-filled stacks
for ``max_loras`` slots in ``lora_dtype`` (auto: the model dtype), sized for ``max_lora_rank``:

- a linear (``vllm/lora/layers/base_linear.py``): per output slice (q, k, v of the fused QKV; gate and up of
  the fused gate_up), A ``(max_loras, 1, rank, input_size)`` and B ``(max_loras, 1, output_size, rank)``
  with the sizes of this tensor-parallel rank: a column-parallel linear (QKV, gate_up) has its whole input
  and 1/TP of its output (its KV heads replicated when TP exceeds them), a row-parallel one (o_proj,
  down_proj) 1/TP of its input and its whole output;
- a mixture-of-experts layer (``vllm/lora/layers/fused_moe.py`` ``FusedMoEWithLoRA``): per local expert,
  w13 A ``(max_loras, experts, rank, hidden)`` and B ``(max_loras, experts, intermediate / TP, rank)`` per
  slice (two when gated), w2 A ``(max_loras, experts, rank, intermediate / TP)`` and B ``(max_loras,
  experts, hidden, rank)``; its router (a replicated linear) and shared experts as linears;
- the embedding (``VocabParallelEmbeddingWithLoRA``): A ``(max_loras, vocab, rank)``, B ``(max_loras, 1,
  hidden, rank)``, whole on every rank; the LM head (``LogitsProcessorWithLoRA``): A ``(max_loras, 1, rank,
  hidden)``, B ``(max_loras, 1, vocab, rank)``, whole on every rank (the logits are gathered first): where
  the model class lists them in ``embedding_modules`` (Llama, Qwen, Mistral; Gemma lists none, and the
  estimate is high by them there).

Not counted: MLA's and linear-attention/Mamba mixers' projections (the estimate is low by their slots and
says so), the punica wrapper's index buffers (a few int64 per batched token), the shrink kernel's fp32
intermediate (slices x tokens x rank x 4 B) and the CUDA graphs vLLM captures apart for batches with LoRA.

``max_cpu_loras`` whole adapters (default ``max_loras``) stay in host memory per worker (``LRUCacheLoRA
ModelManager``: ``LoRAModel`` tensors on the CPU, sliced to the rank's share when a slot is filled).

Speed: a decode step's batched LoRA kernels (punica BGMV/SGMV: shrink by A, expand by B) read the A and B of
every adapter its batch uses; with each decoding sequence taken to use another adapter until the slots are
full, a step of ``d`` decodes reads min(``max_adapters``, max(1, ``d``)) slots beside the weights
(``gpuplan.estimate.serving_speed``: the most such a step can read). Their FLOPs, 2 x rank x (in + out) per module and
token, are the slot's share of the layers' weights (Llama-3.1-8B: 0.6% at rank 16, 2.4% at rank 64) and are not
counted.
"""

from __future__ import annotations

import math

from gpuplan.architecture import Architecture
from gpuplan.records import record

# vLLM LoRAConfig.max_lora_rank: the ranks vLLM takes (MaxLoRARanks).
MAX_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


@record
class LoraSlots:
    """``serve.lora``: vLLM ``max_loras``, ``max_lora_rank`` and ``max_cpu_loras``."""

    max_adapters: int = 1
    max_rank: int = 16
    max_cpu_adapters: int = 1


def _linear(rank: int, inputs: float, outputs: float, slices: int = 1) -> float:
    """Elements of one slot of a LoRA-wrapped linear: A (rank x in) and B (out x rank) per output slice;
    ``outputs`` is their total (base_linear.py ``create_lora_weights``)."""
    return slices * rank * inputs + outputs * rank


def _attention(arch: Architecture, rank: int, tp: int) -> float:
    """q/k/v (one column-parallel QKV of three slices) and o_proj (row-parallel) on one GPU."""
    h = arch.hidden
    q = arch.q_width * (2 if arch.attention_gate else 1) / tp
    kv = max(1, arch.n_kv // tp) * arch.d_head  # KV heads replicated when TP exceeds them
    return _linear(rank, h, q + 2 * kv, 3) + _linear(rank, arch.q_width / tp, h)


def _mlp(arch: Architecture, rank: int, width: float, tp: int) -> float:
    """gate_up (column-parallel, two slices when gated) and down_proj (row-parallel) of a dense MLP."""
    slices = 2 if arch.mlp == "gated" else 1
    return _linear(rank, arch.hidden, slices * width / tp, slices) + _linear(rank, width / tp, arch.hidden)


def _moe(arch: Architecture, rank: int, tp: int, ep: int) -> float:
    """Every local expert's w13 and w2 (FusedMoEWithLoRA), the router and the shared experts, on one GPU."""
    h, slices = arch.hidden, 2 if arch.mlp == "gated" else 1
    experts = math.ceil(arch.experts / ep) if ep > 1 else arch.experts
    width = arch.expert_width if ep > 1 else arch.expert_width / tp
    routed = experts * (slices * rank * h + slices * width * rank + rank * width + h * rank)
    router = _linear(rank, h, arch.experts)
    shared = _mlp(arch, rank, arch.shared_experts * arch.shared_width, tp) if arch.shared_experts else 0.0
    return routed + router + shared


def slot_elements(arch: Architecture, rank: int, tp: int, ep: int, layers: range, first: bool, last: bool) -> float:
    """Elements of one adapter slot on one GPU holding ``layers`` (the embedding when ``first``, the LM
    head when ``last``); MLA and linear-attention/Mamba mixers are not counted."""
    elements = 0.0
    for index in layers:
        if arch.has_attention(index) and not arch.is_mla:
            elements += _attention(arch, rank, tp)
        if arch.is_moe_layer(index):
            elements += _moe(arch, rank, tp, ep)
        elif arch.has_mlp(index):
            elements += _mlp(arch, rank, arch.intermediate, tp)
    if first:
        elements += _linear(rank, arch.vocab, arch.hidden)  # embedding: A (vocab x rank), B (hidden x rank)
    if last:
        elements += _linear(rank, arch.hidden, arch.vocab)  # LM head: A (rank x hidden), B (vocab x rank)
    return elements


def slot_stage_bytes(
    arch: Architecture, lora: LoraSlots, dtype_bytes: int, tp: int, pp: int, ep: int = 1
) -> tuple[float, ...]:
    """Bytes of ``max_adapters`` slots on one GPU of each pipeline stage."""
    stages = arch.stage_layers(pp)
    return tuple(
        lora.max_adapters
        * dtype_bytes
        * slot_elements(arch, lora.max_rank, tp, ep, layers, index == 0, index == len(stages) - 1)
        for index, layers in enumerate(stages)
    )


def host_bytes(arch: Architecture, lora: LoraSlots, dtype_bytes: int) -> float:
    """Host bytes of the adapters one engine worker caches: ``max_cpu_adapters`` whole adapters of
    ``max_rank`` over every module a slot holds (an upper bound: an adapter may target fewer, at a lower
    rank)."""
    whole = slot_elements(arch, lora.max_rank, 1, 1, range(arch.layers), True, True)
    return lora.max_cpu_adapters * whole * dtype_bytes


def adapters_read(slots: int, sequences: float) -> float:
    """Adapters a step of ``sequences`` decodes reads with its batched LoRA kernels: one per adapter in the
    batch, at most the ``slots`` (each sequence taken to use another adapter until they are full: the most
    the step can read; the speed model's step counts them so)."""
    return min(float(slots), max(1.0, sequences))


def unmodelled_mixers(arch: Architecture) -> str:
    """The layers whose projections a slot holds but the estimate does not count ('' when none)."""
    parts = []
    if arch.is_mla and arch.attention_layers:
        parts.append("MLA attention")
    if arch.state_layers:
        parts.append("linear-attention/Mamba mixers")
    return " and ".join(parts)
