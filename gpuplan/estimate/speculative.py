"""Speculative decoding: the proposer's memory and the speed-up of verifying drafted tokens.

A proposer drafts ``k`` tokens per step; the model verifies them, and the first rejected one, in one
forward pass over ``k + 1`` positions per sequence, and keeps the accepted prefix plus one token of its own.
With each drafted token accepted with probability ``a`` given the ones before it, a step yields
``E = (1 - a^(k+1)) / (1 - a)`` tokens per sequence (``k + 1`` at ``a = 1``; Leviathan, Kalman and Matias
2023, "Fast Inference from Transformers via Speculative Decoding", eq. 1).

Proposers (``serve.speculative.method``), as vLLM v0.19 runs them (``vllm/v1/spec_decode``):
- ``draft``: a separate small model of the same tokenizer (``draft_model``), at the model's tensor
  parallelism and dtype; its own embedding, layers and LM head; its own KV cache;
- ``eagle``: an EAGLE head (Li et al. 2024): one decoder layer of the model's dimensions and a ``2 hidden x
  hidden`` fc that fuses the token embedding with the model's hidden state (``EagleLlamaForCausalLM``); the
  embedding and the LM head are the model's own (``EagleProposer.load_model`` shares them); one layer of KV;
- ``mtp``: the model's multi-token-prediction module (DeepSeek-V3, Qwen3-Next, GLM-4.5): one decoder layer
  of its own kind (mixture-of-experts where the model's are) and a ``2 hidden x hidden`` ``eh_proj``, the
  embedding and head shared likewise, run ``k`` times; one layer of KV.
EAGLE-3 heads (a 3 hidden x hidden fc, a QKV over 2 hidden inputs and an LM head over a draft vocabulary)
are larger than the EAGLE head counted here.

Memory (vLLM loads the proposer in ``load_model`` beside the model and registers its attention layers in
the same KV cache): the draft's weights on each GPU of the last pipeline stage, and its KV bytes per token
beside the model's in every sequence's blocks.

Speed (``gpuplan.estimate.speculative_speed``): each decode step becomes a round of a verify pass and
``k`` proposer steps that yields ``E`` tokens per sequence; a request then needs ``output / E`` rounds.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gpuplan.architecture import Architecture
from gpuplan.estimate.weights import stage_weights
from gpuplan.records import record

if TYPE_CHECKING:
    from gpuplan.estimate.serving_workload import ServingWorkload


@record
class Speculation:
    """``serve.speculative``, its draft model resolved (method draft)."""

    method: str
    num_tokens: int
    acceptance_rate: float
    draft: Architecture | None = None
    draft_label: str = ""


@record
class SpeculativeWorkload:
    """What the speed-up rests on: the proposal length, the acceptance rate and the proposer's own step."""

    num_tokens: int
    acceptance_rate: float
    proposer: ServingWorkload  # the draft model or head as a deployment of its own (one stage)


def expected_tokens(acceptance_rate: float, num_tokens: int) -> float:
    """Tokens one verify step yields per sequence (Leviathan et al. 2023, eq. 1): (1 - a^(k+1)) / (1 - a)."""
    if acceptance_rate >= 1:
        return float(num_tokens + 1)
    return (1 - acceptance_rate ** (num_tokens + 1)) / (1 - acceptance_rate)


def proposer_architecture(target: Architecture, speculation: Speculation) -> Architecture:
    """The proposer as a model: the draft model, or the EAGLE/MTP head as one decoder layer of the target's
    dimensions (EAGLE: attention and a dense MLP; MTP: a layer of the target's kind), its vocabulary the
    target's (the LM head it shares)."""
    if speculation.method == "draft":
        assert speculation.draft is not None
        return speculation.draft
    moe = speculation.method == "mtp" and target.is_moe
    return replace(
        target,
        layers=1,
        layer_pattern="",
        separate_mlp=False,
        sliding_window=0,
        sliding_layers=0,
        attention_chunk=0,
        dense_layers=0,
        moe_every=1,
        vision_params=0,
        experts=target.experts if moe else 0,
        experts_per_token=target.experts_per_token if moe else 0,
        shared_experts=target.shared_experts if moe else 0,
    )


def _head_extra_params(target: Architecture) -> int:
    """The EAGLE fc / MTP eh_proj, 2 hidden -> hidden (EagleLlamaForCausalLM.fc, DeepSeekMTP eh_proj)."""
    return 2 * target.hidden * target.hidden


def proposer_weight_bytes(target: Architecture, speculation: Speculation, dtype_bytes: int, tp: int) -> float:
    """The proposer's weights on one GPU: a draft model whole at TP (``stage_weights`` of one stage), a head's
    layer and fc over TP (its embedding and LM head are the target's)."""
    if speculation.method == "draft":
        return stage_weights(proposer_architecture(target, speculation), "none", dtype_bytes, tp, 1)[0]
    head = proposer_architecture(target, speculation)
    return (head.layer_params(0) + _head_extra_params(target)) * dtype_bytes / tp


def proposer_kv_per_token(target: Architecture, speculation: Speculation, kv_dtype_bytes: float, tp: int) -> float:
    """KV bytes the proposer caches per token on one GPU: every attention layer of a draft model, the one
    layer of a head (vLLM allocates it in the same KV cache as the model's layers)."""
    return proposer_architecture(target, speculation).kv_bytes_per_token(kv_dtype_bytes, tp)


def proposer_read_bytes(target: Architecture, speculation: Speculation, dtype_bytes: int, tp: int) -> float:
    """Weight bytes one proposer step reads on one GPU: a draft model's weights but its embedding table
    (a step gathers its tokens' rows) unless tied to its head; a head's layer and fc and the target's LM
    head it shares."""
    arch = proposer_architecture(target, speculation)
    if speculation.method == "draft":
        gathered = 0 if arch.tie_embeddings else arch.embedding_params()
        return proposer_weight_bytes(target, speculation, dtype_bytes, tp) - gathered * dtype_bytes / tp
    return proposer_weight_bytes(target, speculation, dtype_bytes, tp) + target.vocab * target.hidden * dtype_bytes / tp


def tpot_floor(tpot: float, spec: SpeculativeWorkload | None) -> float:
    """A TPOT floor without speculation, made one with it: a round costs at least a step and yields at most
    ``E`` tokens."""
    return tpot if spec is None else tpot / expected_tokens(spec.acceptance_rate, spec.num_tokens)


def rounds_note(spec: Speculation) -> str:
    """The proposal and its expected yield, in words."""
    gain = expected_tokens(spec.acceptance_rate, spec.num_tokens)
    return (
        f"{spec.num_tokens} drafted tokens per step at acceptance rate {spec.acceptance_rate:g}:"
        f" {gain:.2f} tokens per verify step ((1 - a^(k+1)) / (1 - a), Leviathan et al. 2023)"
    )
