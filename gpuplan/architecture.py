"""Transformer architectures: exact parameter counts and KV-cache bytes from config.json dimensions.

Sources: parameter layout as in Hugging Face ``transformers`` modelling code (Llama, Mistral, Qwen2,
Gemma 2, Phi, GPT-NeoX, Falcon, GPT-BigCode, Mixtral, DeepSeek-V3) and Megatron-LM's
``theoretical_memory_usage.py`` for MLA/MoE; KV-cache layout as in vLLM's ``kv_cache_interface.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer, as its config.json describes it."""

    layers: int
    hidden: int
    heads: int
    intermediate: int
    vocab: int
    kv_heads: int = 0  # 0: same as heads (multi-head attention)
    head_dim: int = 0  # 0: hidden // heads
    mlp: str = "gated"  # gated (SwiGLU/GeGLU: 3 matrices) | plain (2 matrices)
    norm: str = "rms"  # rms (weight only) | layer (weight + bias)
    norms_per_layer: int = 2
    tie_embeddings: bool = False
    attention_bias: bool = False  # q/k/v bias
    output_bias: bool = False  # o_proj bias
    mlp_bias: bool = False
    lm_head_bias: bool = False
    position_embeddings: int = 0  # learned absolute positions (GPT-2 style); 0 for RoPE
    experts: int = 0
    experts_per_token: int = 0
    expert_intermediate: int = 0
    shared_experts: int = 0
    router_bias: bool = False  # per-expert score correction bias (DeepSeek-V3 noaux_tc routing)
    dense_layers: int = 0  # leading layers with a dense MLP in an MoE model (DeepSeek first_k_dense_replace)
    q_lora_rank: int = 0  # MLA (DeepSeek-V2/V3) when kv_lora_rank > 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int = 0
    sliding_layers: str = "all"  # all | alternate
    max_position: int = 0

    # -- derived dimensions -------------------------------------------------------------------
    @property
    def n_kv(self) -> int:
        return self.kv_heads or self.heads

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_width(self) -> int:
        """Width of the attention output (heads x head_dim), which differs from hidden in Gemma."""
        if self.is_mla:
            return self.heads * self.v_head_dim
        return self.heads * self.d_head

    @property
    def kv_width(self) -> int:
        return self.n_kv * self.d_head

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def expert_width(self) -> int:
        return self.expert_intermediate or self.intermediate

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def sliding_layer_count(self) -> int:
        if not self.sliding_window:
            return 0
        return self.layers // 2 if self.sliding_layers == "alternate" else self.layers

    # -- parameters ---------------------------------------------------------------------------
    def norm_params(self) -> int:
        return self.hidden * (2 if self.norm == "layer" else 1)

    def attention_params(self) -> int:
        """q, k, v, o (+ biases); MLA per DeepSeek-V3's modelling code."""
        h = self.hidden
        if self.is_mla:
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.heads * qk_head
            else:
                q = h * self.heads * qk_head
            kv = (
                h * (self.kv_lora_rank + self.qk_rope_head_dim)
                + self.kv_lora_rank
                + self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim)
            )
            return q + kv + self.heads * self.v_head_dim * h
        q = h * self.q_width + (self.q_width if self.attention_bias else 0)
        kv = 2 * (h * self.kv_width + (self.kv_width if self.attention_bias else 0))
        o = self.q_width * h + (h if self.output_bias else 0)
        return q + kv + o

    def dense_mlp_params(self, width: int | None = None) -> int:
        width = width or self.intermediate
        matrices = 3 if self.mlp == "gated" else 2
        bias = (width * (matrices - 1) + self.hidden) if self.mlp_bias else 0
        return matrices * self.hidden * width + bias

    def moe_mlp_params(self) -> int:
        experts = self.experts * self.dense_mlp_params(self.expert_width)
        shared = self.shared_experts * self.dense_mlp_params(self.expert_width)
        router = (self.hidden + (1 if self.router_bias else 0)) * self.experts
        return experts + shared + router

    def layer_params(self, index: int) -> int:
        mlp = self.moe_mlp_params() if self.is_moe and index >= self.dense_layers else self.dense_mlp_params()
        return self.attention_params() + mlp + self.norms_per_layer * self.norm_params()

    def embedding_params(self) -> int:
        return self.vocab * self.hidden + self.position_embeddings * self.hidden

    def lm_head_params(self) -> int:
        bias = self.vocab if self.lm_head_bias else 0
        return bias if self.tie_embeddings else self.vocab * self.hidden + bias

    @property
    def params(self) -> int:
        """Total parameters, counted once (tied embeddings count once)."""
        layers = sum(self.layer_params(index) for index in range(self.layers))
        return layers + self.embedding_params() + self.lm_head_params() + self.norm_params()

    @property
    def active_params(self) -> int:
        """Parameters a token passes through (MoE: routed experts per token + shared experts)."""
        if not self.is_moe:
            return self.params
        unused = self.experts - self.experts_per_token
        return self.params - self.moe_layers * unused * self.dense_mlp_params(self.expert_width)

    def linear_params(self) -> int:
        """Parameters in matmul weights (quantizable linears), excluding embeddings and the LM head."""
        return self.params - self.embedding_params() - self.lm_head_params() - self.small_params()

    def small_params(self) -> int:
        """Norms, biases and routers: kept in 16-bit by every quantization format."""
        norms = (self.layers * self.norms_per_layer + 1) * self.norm_params()
        routers = self.moe_layers * (self.hidden + (1 if self.router_bias else 0)) * self.experts
        return norms + routers + self._bias_params()

    def _bias_params(self) -> int:
        per_layer = 0
        if self.attention_bias and not self.is_mla:
            per_layer += self.q_width + 2 * self.kv_width
        if self.output_bias:
            per_layer += self.hidden
        if self.mlp_bias:
            matrices = 3 if self.mlp == "gated" else 2
            per_layer += self.intermediate * (matrices - 1) + self.hidden
        return per_layer * self.layers

    def largest_linear_params(self) -> int:
        width = self.expert_width if self.is_moe and self.dense_layers == 0 else self.intermediate
        return max(self.hidden * width, self.hidden * self.q_width, self.vocab * self.hidden)

    # -- KV cache -----------------------------------------------------------------------------
    def kv_elements_per_token_per_layer(self, tensor_parallel: int = 1) -> int:
        """K and V elements one token stores in one layer on one GPU.

        GQA/MHA/MQA: 2 x kv_heads x head_dim, with kv heads split over TP ranks and replicated when
        TP exceeds them (vLLM ``get_num_kv_heads``); MLA: the latent plus the RoPE key, replicated
        on every TP rank (vLLM ``MLAAttentionSpec``).
        """
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        heads_per_rank = max(1, self.n_kv // tensor_parallel)
        return 2 * heads_per_rank * self.d_head

    def kv_bytes_per_token(self, dtype_bytes: float, tensor_parallel: int = 1) -> float:
        """Bytes of KV cache per token of context on one GPU, all layers, as if all were full attention."""
        return self.layers * self.kv_elements_per_token_per_layer(tensor_parallel) * dtype_bytes


ARCHITECTURE_FIELDS = frozenset(field.name for field in fields(Architecture))

# Hugging Face config.json keys -> Architecture fields (first key present wins).
_HF_KEYS: dict[str, tuple[str, ...]] = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads", "multi_query_group_num"),
    "head_dim": ("head_dim",),
    "intermediate": ("intermediate_size", "ffn_hidden_size", "n_inner"),
    "vocab": ("vocab_size", "padded_vocab_size"),
    "tie_embeddings": ("tie_word_embeddings",),
    "experts": ("num_local_experts", "n_routed_experts", "num_experts"),
    "experts_per_token": ("num_experts_per_tok", "moe_top_k"),
    "expert_intermediate": ("moe_intermediate_size",),
    "shared_experts": ("n_shared_experts",),
    "dense_layers": ("first_k_dense_replace",),
    "q_lora_rank": ("q_lora_rank",),
    "kv_lora_rank": ("kv_lora_rank",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "sliding_window": ("sliding_window",),
    "max_position": ("max_position_embeddings", "n_positions", "seq_length"),
    "attention_bias": ("attention_bias", "qkv_bias"),
}


class ArchitectureError(ValueError):
    """A config.json or explicit architecture that cannot describe a decoder."""


def from_hf_config(config: dict[str, Any]) -> Architecture:
    """An Architecture from a Hugging Face config.json (nested ``text_config`` is followed)."""
    if isinstance(config.get("text_config"), dict):
        config = {**config, **config["text_config"]}
    values: dict[str, Any] = {}
    for name, keys in _HF_KEYS.items():
        for key in keys:
            if config.get(key) is not None:
                values[name] = config[key]
                break
    missing = [name for name in ("layers", "hidden", "heads", "vocab") if name not in values]
    if "intermediate" not in values and "n_inner" in config:
        values["intermediate"] = 4 * values.get("hidden", 0)
    if "intermediate" not in values:
        missing.append("intermediate")
    if missing:
        raise ArchitectureError("config.json lacks " + ", ".join(missing))
    model_type = str(config.get("model_type", ""))
    if config.get("hidden_act", "silu") in ("gelu", "gelu_new", "gelu_pytorch_tanh") and "gemma" not in model_type:
        values["mlp"] = "plain"
    if model_type.startswith(("gemma2", "gemma3")):
        values["norms_per_layer"] = 4
    layer_types = config.get("layer_types")
    if values.get("sliding_window") and isinstance(layer_types, list):
        sliding = sum(1 for kind in layer_types if kind == "sliding_attention")
        values["sliding_layers"] = "all" if sliding == len(layer_types) else "alternate"
    elif values.get("sliding_window") and model_type.startswith("gemma2"):
        values["sliding_layers"] = "alternate"
    if config.get("use_sliding_window") is False:
        values.pop("sliding_window", None)
    if values.get("kv_lora_rank"):
        values["kv_heads"] = values["heads"]
    values["tie_embeddings"] = bool(values.get("tie_embeddings", False))
    return make_architecture(values)


def make_architecture(values: dict[str, Any]) -> Architecture:
    """An Architecture from field values, checked for consistency."""
    unknown = set(values) - ARCHITECTURE_FIELDS
    if unknown:
        raise ArchitectureError("unknown architecture fields: " + ", ".join(sorted(unknown)))
    architecture = Architecture(**{key: value for key, value in values.items() if value is not None})
    if architecture.heads % architecture.n_kv:
        raise ArchitectureError(
            f"{architecture.heads} attention heads are not a multiple of {architecture.n_kv} KV heads"
        )
    if not architecture.head_dim and architecture.hidden % architecture.heads:
        raise ArchitectureError(
            f"hidden size {architecture.hidden} is not a multiple of {architecture.heads} heads; give head_dim"
        )
    if architecture.is_moe and not architecture.experts_per_token:
        raise ArchitectureError("a mixture-of-experts model needs experts_per_token")
    if architecture.experts_per_token > max(architecture.experts, 0) and architecture.is_moe:
        raise ArchitectureError("experts_per_token exceeds the number of experts")
    return architecture


def read_hf_config(path: Path) -> dict[str, Any]:
    """Read a local config.json (a bounded read of a regular file). Raises ArchitectureError."""
    from gpuplan.reading import CONFIG_JSON, ReadRefused, read_bounded

    try:
        raw = read_bounded(path, CONFIG_JSON)
    except ReadRefused as refused:
        raise ArchitectureError(f"cannot read it: {refused.reason}") from None
    try:
        config = json.loads(raw, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise ArchitectureError(f"{path.name} is not valid JSON: {error.msg} at line {error.lineno}") from None
    except (ValueError, RecursionError) as error:  # not UTF-8, NaN/Infinity, nesting too deep
        raise ArchitectureError(f"{path.name} is not valid JSON: {error}") from None
    if not isinstance(config, dict):
        raise ArchitectureError(f"{path.name} is not a JSON object")
    return config


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def hf_quantization(config: dict[str, Any]) -> tuple[str, int] | None:
    """(serve quantization, group size) of a pre-quantized checkpoint's ``quantization_config``.

    AutoAWQ/GPTQ 4-bit -> int4-awq/int4-gptq with their group size; GPTQ 8-bit -> int8; fp8 (and
    compressed-tensors float8) -> fp8. None for an unquantized checkpoint or a format gpuplan cannot size.
    """
    quant = config.get("quantization_config")
    if not isinstance(quant, dict):
        return None
    method = str(quant.get("quant_method", "")).lower()
    bits = quant.get("bits") or quant.get("w_bit")
    group = quant.get("group_size") or quant.get("q_group_size") or 128
    group = int(group) if isinstance(group, int) and group > 0 else 128
    if method in ("awq", "gptq") and bits == 4:
        return f"int4-{method}", group
    if method == "gptq" and bits == 8:
        return "int8", group
    if method == "fp8" or (method == "compressed-tensors" and "float" in json.dumps(quant).lower()):
        return "fp8", group
    return None
