"""Read a Hugging Face config.json the way ``transformers`` reads it.

A config.json states only what differs from its config class's defaults, so the same key can mean
different things per ``model_type``: Gemma-2 omits ``tie_word_embeddings`` because GemmaConfig ties by
default; Qwen2 never states its q/k/v biases because Qwen2Attention always has them. ``MODEL_TYPES``
records, per model type, the class defaults and the facts of the modelling code gpuplan needs
(source: ``transformers/models/<type>/configuration_<type>.py`` and ``modeling_<type>.py``).

Also read here: nested ``text_config``/``vision_config`` (the vision tower is counted and reported
apart), sliding-window and chunked-attention layouts (any mix of windowed and full layers), the layers of
hybrid models (Qwen3-Next's Gated DeltaNet ``layer_types``; Nemotron-H's pattern in ``gpuplan.hf_nemotron``),
shared experts, the context limit (``gpuplan.hf_context``) and ``quantization_config`` (format, group size,
and the modules a checkpoint keeps in 16-bit: ``gpuplan.hf_quantization``). Every number passes the schema's
bounds before any arithmetic (``gpuplan.architecture.check_value``); anything gpuplan cannot size is an
ArchitectureError (GP021), never a silent guess.
"""

from __future__ import annotations

import json
from dataclasses import field
from pathlib import Path
from typing import Any

from gpuplan.architecture import Architecture, ArchitectureError, check_value, make_architecture, show_value
from gpuplan.hf_context import context_limit
from gpuplan.hf_nemotron import nemotron_h_layers, nemotron_h_specifics, nemotron_layer_count
from gpuplan.hf_quantization import Checkpoint, read_quantization
from gpuplan.hf_values import bool_value, bounded_int, compressed_pattern, int_list, string_list, string_value
from gpuplan.hf_vision import vision_tower_params
from gpuplan.records import record

# config.json keys -> Architecture fields (first key present wins).
_KEYS: dict[str, tuple[str, ...]] = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads", "multi_query_group_num"),
    "head_dim": ("head_dim",),
    "intermediate": ("intermediate_size", "ffn_hidden_size", "n_inner"),
    "vocab": ("vocab_size", "padded_vocab_size"),
    "tie_embeddings": ("tie_word_embeddings",),
    "attention_bias": ("attention_bias", "qkv_bias", "use_qkv_bias"),
    "mlp_bias": ("mlp_bias",),
    "experts": ("num_local_experts", "n_routed_experts", "num_experts"),
    "experts_per_token": ("num_experts_per_tok", "moe_top_k", "experts_per_token"),
    "expert_intermediate": ("moe_intermediate_size",),
    "shared_experts": ("n_shared_experts",),
    "shared_expert_intermediate": ("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"),
    "moe_every": ("decoder_sparse_step", "interleave_moe_layer_step"),
    "dense_layers": ("first_k_dense_replace",),
    "q_lora_rank": ("q_lora_rank",),
    "kv_lora_rank": ("kv_lora_rank",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "sliding_window": ("sliding_window",),
    "attention_chunk": ("attention_chunk_size",),
}
_MOE_FIELDS = (
    "experts_per_token",
    "expert_intermediate",
    "shared_experts",
    "shared_expert_intermediate",
    "moe_every",
    "dense_layers",
)
_MLA_FIELDS = ("q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
_GELU = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_10")


@record
class ModelType:
    """What the config class and modelling code of one ``model_type`` fix, beyond its config.json keys."""

    label: str
    tie: bool  # the config class's tie_word_embeddings default
    fixed: dict[str, Any] = field(default_factory=dict)  # Architecture fields set by the modelling code
    key_defaults: dict[str, Any] = field(default_factory=dict)  # config-class defaults of keys gpuplan reads
    note: str = ""
    # The key of the routed experts' count when every MoE layer of the modelling code routes among them
    # (MixtralSparseMoeBlock, GptOssMLP, ...): none stated is no model, not a dense one.
    experts_key: str = ""


_LAYER_NORM_BIASED = {"norm": "layer", "attention_bias": True, "output_bias": True, "mlp_bias": True, "mlp": "plain"}
# Multi-head latent attention's dimensions when a config.json leaves them out: DeepseekV2Config's and
# DeepseekV3Config's defaults (transformers 4.57 configuration_deepseek_v2.py / _v3.py, the same in both), and
# those of the configuration_deepseek.py that Kimi-K2 ships as remote code (a copy of DeepSeek-V3's).
_MLA_TYPES = ("deepseek_v2", "deepseek_v3", "kimi_k2")
_MLA_DEFAULTS = {
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}

_QWEN2_VL = ModelType(
    "Qwen2-VL",
    False,
    {"attention_bias": True},
    note="Qwen2 language model; vision tower of depth blocks of embed_dim, MLP embed_dim x mlp_ratio, patch merger",
)
_QWEN2_5_VL = ModelType(
    "Qwen2.5-VL",
    False,
    {"attention_bias": True},
    note="Qwen2 language model; vision tower of depth blocks of hidden_size, gated MLP of intermediate_size, "
    "patch merger to out_hidden_size",
)
# Qwen2 decoders: sliding window only when use_sliding_window is true (Qwen2Config and the VL text configs: false).
_QWEN2_TEXT = ("qwen2", "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text")

MODEL_TYPES: dict[str, ModelType] = {
    "llama": ModelType("Llama 2/3", False, note="attention_bias and mlp_bias read from their keys"),
    "mistral": ModelType(
        "Mistral", False, key_defaults={"sliding_window": 4096}, note="absent sliding_window: 4096 (class default)"
    ),
    "mixtral": ModelType("Mixtral", False, note="routed experts, no shared expert", experts_key="num_local_experts"),
    "qwen2": ModelType(
        "Qwen2/2.5",
        False,
        {"attention_bias": True},
        note="q/k/v always biased; sliding window only when use_sliding_window is true",
    ),
    "qwen2_moe": ModelType(
        "Qwen1.5/2-MoE",
        False,
        {"attention_bias": True, "shared_experts": 1, "shared_expert_gate": True},
        note="one gated shared expert of shared_expert_intermediate_size",
    ),
    # Qwen2VLTextModel / Qwen2_5_VLTextModel: Qwen2's decoder (q/k/v biased); a flat config.json carries the text
    # keys beside vision_config (model_type qwen2_vl), a nested one in text_config (model_type qwen2_vl_text).
    "qwen2_vl": _QWEN2_VL,
    "qwen2_vl_text": _QWEN2_VL,
    "qwen2_5_vl": _QWEN2_5_VL,
    "qwen2_5_vl_text": _QWEN2_5_VL,
    "qwen3": ModelType("Qwen3", False, {"qk_norm": True}, note="per-head q/k RMSNorm"),
    "qwen3_moe": ModelType("Qwen3-MoE", False, {"qk_norm": True}, note="per-head q/k RMSNorm, no shared expert"),
    "gemma": ModelType(
        "Gemma",
        True,
        key_defaults={"head_dim": 256, "vocab_size": 256000},
        note="GeGLU MLP (gated although hidden_act is gelu); absent head_dim 256, vocab_size 256,000",
    ),
    "gemma2": ModelType(
        "Gemma 2",
        True,
        {"norms_per_layer": 4, "sliding_layers": 2},
        {"sliding_window": 4096, "head_dim": 256, "vocab_size": 256000},
        "tied when tie_word_embeddings is absent; 4 norms per layer; every other layer slides (window 4096)",
    ),
    "gemma3_text": ModelType(
        "Gemma 3",
        True,
        {"norms_per_layer": 4, "qk_norm": True},
        {
            "sliding_window": 4096,
            "sliding_window_pattern": 6,
            "head_dim": 256,
            "vocab_size": 262208,
            "max_position_embeddings": 131072,
        },
        "tied by default; 5 local : 1 global layers (sliding_window_pattern or layer_types); absent vocab_size "
        "262,208 (the published 4B-27B configs omit it)",
    ),
    "phi": ModelType(
        "Phi-1/1.5/2",
        False,
        {**_LAYER_NORM_BIASED, "norms_per_layer": 1, "parallel_attention": True, "lm_head_bias": True},
        note="biases on every linear and the LM head, one shared LayerNorm, parallel attention",
    ),
    "phi3": ModelType("Phi-3/Phi-4", False, {"fused_qkv": True}, note="fused qkv_proj and gate_up_proj"),
    "gpt_neox": ModelType(
        "GPT-NeoX / StableLM-alpha / Pythia",
        False,
        {**_LAYER_NORM_BIASED, "fused_qkv": True, "parallel_attention": True},
        note="fused query_key_value, biased LayerNorm and linears, parallel residual",
    ),
    "stablelm": ModelType(
        "StableLM 2/3B-4e1t", False, {"norm": "layer"}, note="LayerNorm, gated MLP, qkv bias from use_qkv_bias"
    ),
    "falcon": ModelType(
        "Falcon",
        True,
        {"norm": "layer", "mlp": "plain", "fused_qkv": True, "parallel_attention": True},
        note="tied; 1 norm per layer (2 with new_decoder_architecture); multi_query means 1 KV head",
    ),
    "gpt_bigcode": ModelType(
        "GPT-BigCode / StarCoder",
        True,
        {**_LAYER_NORM_BIASED},
        note="tied; learned positions (no rotary copies, so the fused c_attn output is what attention keeps); "
        "multi_query means 1 KV head; n_inner absent means 4 x hidden",
    ),
    "starcoder2": ModelType(
        "StarCoder2",
        True,
        {**_LAYER_NORM_BIASED},
        {"sliding_window": 4096},
        "tied; biased LayerNorm and linears (use_bias)",
    ),
    "deepseek_v2": ModelType(
        "DeepSeek-V2",
        False,
        key_defaults=_MLA_DEFAULTS,
        note="MLA (absent ranks and head dims: the class defaults); n_shared_experts x moe_intermediate_size shared",
        experts_key="n_routed_experts",
    ),
    "deepseek_v3": ModelType(
        "DeepSeek-V3 / Kimi-K2",
        False,
        {"router_bias": True},
        _MLA_DEFAULTS,
        "MLA (absent ranks and head dims: the class defaults); score-correction router bias; "
        "first_k_dense_replace dense layers; MTP module not counted",
        experts_key="n_routed_experts",
    ),
    "llama4_text": ModelType(
        "Llama 4",
        False,
        {"shared_experts": 1},
        note="one shared expert; intermediate_size is the expert width, intermediate_size_mlp the dense one; "
        "chunked attention on 3 of 4 layers",
        experts_key="num_local_experts",
    ),
    "gpt_oss": ModelType(
        "gpt-oss",
        False,
        {
            "attention_bias": True,
            "output_bias": True,
            "mlp_bias": True,
            "router_bias": True,
            "attention_sinks": True,
        },
        note="biased attention, experts and router; attention sinks; alternating 128-token sliding window",
        experts_key="num_local_experts",
    ),
    "granite": ModelType("Granite 3", False, note="Llama layout"),
    # configuration_cohere.py CohereConfig: tie_word_embeddings True; modeling_cohere.py CohereDecoderLayer: one
    # weight-only CohereLayerNorm (input_layernorm) feeding attention and the MLP in parallel, no second norm.
    "cohere": ModelType(
        "Cohere Command-R",
        True,
        {"norms_per_layer": 1, "parallel_attention": True},
        note="tied by default; one weight-only LayerNorm per layer before parallel attention and MLP",
    ),
    # configuration_qwen3_next.py Qwen3NextConfig defaults; modeling_qwen3_next.py: Qwen3NextAttention's q_proj
    # doubles for the output gate, q/k RMSNorm per head, Qwen3NextSparseMoeBlock's gated shared expert.
    "qwen3_next": ModelType(
        "Qwen3-Next",
        False,
        {"qk_norm": True, "attention_gate": True, "shared_experts": 1, "shared_expert_gate": True},
        {
            "head_dim": 256,
            "linear_conv_kernel_dim": 4,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 32,
            "num_experts": 512,
            "num_experts_per_tok": 10,
            "moe_intermediate_size": 512,
            "shared_expert_intermediate_size": 512,
            "max_position_embeddings": 32768,
        },
        "Gated DeltaNet layers and gated attention (layer_types, else every full_attention_interval-th layer); "
        "one gated shared expert",
    ),
    # configuration_nemotron_h.py NemotronHConfig defaults; modeling_nemotron_h.py: one RMSNorm and one
    # mixer per block (Mamba-2, attention without RoPE, or a two-matrix relu2 MLP).
    "nemotron_h": ModelType(
        "Nemotron-H",
        False,
        {"mlp": "plain", "norms_per_layer": 1, "separate_mlp": True},
        {
            "vocab_size": 131072,
            "intermediate_size": 21504,
            "max_position_embeddings": 4096,
            "mamba_num_heads": 128,
            "mamba_head_dim": 64,
            "ssm_state_size": 128,
            "n_groups": 8,
            "conv_kernel": 4,
        },
        "each layer one mixer: Mamba-2 (M), attention (*) or MLP (-) of hybrid_override_pattern",
    ),
    "kimi_k2": ModelType(
        "Kimi-K2",
        False,
        {"router_bias": True},
        _MLA_DEFAULTS,
        "DeepSeek-V3 layout (absent MLA ranks and head dims: its configuration_deepseek.py defaults)",
        experts_key="n_routed_experts",
    ),
}
# Multimodal wrappers: their text_config carries the language model's own model_type.
MULTIMODAL_TYPES: dict[str, str] = {
    "gemma3": "Gemma 3 (vision): SigLIP tower + projection",
    "mistral3": "Mistral-Small-3.1: Pixtral tower + patch merger + 2-layer projector",
    "llava": "LLaVA: vision tower + 2-layer projector",
    "llava_next": "LLaVA-NeXT / granite-vision: vision tower + 2-layer projector + image newline",
    "llama4": "Llama 4: vision tower + adapter + projector",
    "kimi_vl": "Kimi-VL: MoonViT tower (read as a SigLIP-style ViT) + 2-layer projector",
}
_TEXT_DEFAULT_TYPE = {
    "gemma3": "gemma3_text",
    "llama4": "llama4_text",
    "kimi_vl": "deepseek_v3",
    "qwen2_vl": "qwen2_vl_text",
    "qwen2_5_vl": "qwen2_5_vl_text",
}
# Hybrid and state-space model types whose layers gpuplan does not size yet: read with generic keys they
# would pass for attention models, so they are refused by name (GP021).
UNSIZED_TYPES: dict[str, str] = {
    "jamba": "Jamba's Mamba-1 layers",
    "falcon_h1": "Falcon-H1's parallel attention and Mamba-2 mixers",
    "bamba": "Bamba's Mamba-2 layers",
    "granitemoehybrid": "Granite-4.0-H's Mamba-2 layers",
    "zamba": "Zamba's Mamba layers",
    "zamba2": "Zamba2's Mamba-2 layers",
    "mamba": "Mamba's state-space layers",
    "mamba2": "Mamba-2's state-space layers",
    "falcon_mamba": "Falcon-Mamba's state-space layers",
    "lfm2": "LFM2's convolution layers",
    "minimax": "MiniMax's lightning-attention layers",
    "plamo2": "PLaMo-2's Mamba layers",
    "kimi_linear": "Kimi-Linear's delta-attention layers",
    "qwen3_5_text": "Qwen3.5's Gated DeltaNet layers (its split projections)",
    "qwen3_5_moe_text": "Qwen3.5-MoE's Gated DeltaNet layers (its split projections)",
}
# Keys only hybrid and state-space configs carry: in a model type gpuplan does not read specially they
# mean layers the generic reading would take for attention.
_HYBRID_KEYS = (
    "hybrid_override_pattern",
    "layers_block_type",
    "attn_layer_period",
    "mamba_d_state",
    "ssm_state_size",
    "linear_num_value_heads",
    "full_attention_interval",
)


@record
class HfModel:
    architecture: Architecture
    checkpoint: Checkpoint
    model_type: str
    notes: tuple[str, ...]
    context_source: str = ""  # how architecture.max_position was derived (the keys and any RoPE scaling)
    classes: tuple[str, ...] = ()  # ``architectures``: the modelling classes (vLLM picks its model runner by them)


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


def from_hf_config(config: dict[str, Any]) -> Architecture:
    """The Architecture of a Hugging Face config.json (see ``read_hf_model`` for the checkpoint format)."""
    return read_hf_model(config).architecture


def read_hf_model(config: dict[str, Any]) -> HfModel:
    """Architecture, checkpoint format and the assumptions made, from a parsed config.json."""
    notes: list[str] = []
    top_type = string_value(config, "model_type", "model_type")
    text, prefix = config, ""
    if isinstance(config.get("text_config"), dict):
        text, prefix = config["text_config"], "text_config."
    elif "text_config" in config and config["text_config"] is not None:
        raise ArchitectureError("text_config must be a mapping")
    text_type = string_value(text, "model_type", f"{prefix}model_type") if text is not config else top_type
    if text is not config and not text_type:
        text_type = _TEXT_DEFAULT_TYPE.get(top_type, "")
    kind = MODEL_TYPES.get(text_type)
    _refuse_unsized(text, prefix, text_type or top_type, kind)
    # How the file names each field, for make_architecture's messages: the key read, else the first spelling.
    spelled = {name: f"config.json {prefix}{keys[0]}" for name, keys in _KEYS.items()}
    values = _read_keys(text, prefix, kind, notes, text_type, spelled)
    limit = context_limit({**(kind.key_defaults if kind else {}), **text}, prefix, text_type or top_type)
    if limit is not None:
        values["max_position"], context_source = limit
    else:
        context_source = ""
    if kind is None:
        notes.append(
            f"model_type {text_type or '(none)'!r} is not one gpuplan reads specially: generic keys only"
            + ("" if "tie_embeddings" in values else "; LM head assumed untied (the larger count)")
        )
    if "tie_embeddings" not in values and text is not config and config.get("tie_word_embeddings") is not None:
        values["tie_embeddings"] = check_value(
            "tie_embeddings", config["tie_word_embeddings"], "config.json tie_word_embeddings"
        )
    elif "tie_embeddings" not in values and kind is not None:
        values["tie_embeddings"] = kind.tie
        notes.append(f"tie_word_embeddings absent: {kind.label} default {str(kind.tie).lower()}")
    values.setdefault("tie_embeddings", False)
    vision = config.get("vision_config")
    if vision is not None:
        if not isinstance(vision, dict):
            raise ArchitectureError("vision_config must be a mapping")
        values["vision_params"] = vision_tower_params(vision, top_type, values["hidden"], config)
        notes.append(f"vision tower of {values['vision_params']:,} parameters counted in the weights (16-bit)")
    architecture = make_architecture(values, "config.json", spelled)
    checkpoint = read_quantization(config, architecture)
    return HfModel(architecture, checkpoint, text_type or top_type, tuple(notes), context_source, _classes(config))


def _classes(config: dict[str, Any]) -> tuple[str, ...]:
    """config.json ``architectures``: modelling class names (Python identifiers, as Transformers names them)."""
    value = config.get("architectures")
    if value is None:
        return ()
    names = string_list(value, "architectures", 16)
    if not all(name.isidentifier() and name.isascii() and len(name) <= 100 for name in names):
        raise ArchitectureError(f"config.json architectures must list class names, not {show_value(value)}")
    return tuple(names)


# -- text model ---------------------------------------------------------------------------------


def _refuse_unsized(text: dict[str, Any], prefix: str, model_type: str, kind: ModelType | None) -> None:
    """ArchitectureError for a model whose layers gpuplan cannot size: a known hybrid or state-space
    model type it does not read, or such a model's keys in a config of a type it does not know."""
    if model_type in UNSIZED_TYPES:
        raise ArchitectureError(
            f"config.json model_type {model_type!r}: gpuplan cannot size {UNSIZED_TYPES[model_type]} yet"
        )
    if kind is not None and kind.experts_key and not text.get(kind.experts_key):  # absent, null or 0
        raise ArchitectureError(
            f"config.json {prefix}{kind.experts_key}: {show_value(text.get(kind.experts_key))}, where every "
            f"mixture-of-experts layer of {kind.label} routes among that many experts"
        )
    if kind is None:
        key = next((key for key in _HYBRID_KEYS if text.get(key) is not None), None)
        if key is not None:
            raise ArchitectureError(
                f"config.json {prefix}{key}: linear-attention or state-space layers of model_type "
                f"{model_type or '(none)'!r}, which gpuplan cannot size"
            )


def _read_keys(
    text: dict[str, Any],
    prefix: str,
    kind: ModelType | None,
    notes: list[str],
    model_type: str,
    spelled: dict[str, str],
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    defaults = kind.key_defaults if kind else {}
    # The config class's defaults for keys the file leaves out (an explicit null stays null).
    absent = {key: value for key, value in defaults.items() if key not in text}
    if absent:
        notes.extend(f"{prefix}{key} absent: {value} (config-class default)" for key, value in absent.items())
        text = {**absent, **text}
    if model_type == "nemotron_h":
        text = nemotron_layer_count(text, prefix)
    dense = not any(text.get(key) for key in _KEYS["experts"])
    for name, keys in _KEYS.items():
        if dense and name in _MOE_FIELDS:
            continue
        for key in keys:
            if name == "shared_expert_intermediate" and text.get(key) == 0:
                break  # a zero-width shared expert is none (Qwen2-MoE's own reading of 0), not a bad dimension
            if text.get(key) is not None:
                spelled[name] = f"config.json {prefix}{key}"
                values[name] = check_value(name, text[key], spelled[name])
                break
    missing = [name for name in ("layers", "hidden", "heads", "vocab") if name not in values]
    if "intermediate" not in values and model_type in ("gpt_bigcode", "falcon", "gpt2") and "hidden" in values:
        values["intermediate"] = 4 * values["hidden"]
        notes.append("MLP width absent: 4 x hidden_size")
    if "intermediate" not in values:
        missing.append("intermediate_size")
    if missing:
        raise ArchitectureError("config.json lacks " + ", ".join(missing))
    if kind is not None:
        values.update(kind.fixed)
    elif string_value(text, "hidden_act", f"{prefix}hidden_act") in _GELU:
        values["mlp"] = "plain"
    _model_type_specifics(text, prefix, model_type, values, notes)
    _moe(text, prefix, values, notes, spelled)
    if kind is not None and model_type in _MLA_TYPES:
        _require_mla(text, prefix, kind, values)
    if values.get("kv_lora_rank"):
        values["kv_heads"] = values["heads"]
    else:
        for name in _MLA_FIELDS:
            values.pop(name, None)
    if model_type == "qwen3_next":
        _qwen3_next_layers(text, prefix, values, notes)
    elif model_type == "nemotron_h":
        nemotron_h_layers(text, prefix, values, notes)
        if not values.get("experts"):  # its routed-expert keys size only MoE (E) layers
            _drop_moe(values)
    else:
        _sliding_layout(text, prefix, values, notes)
    return values


def _require_mla(text: dict[str, Any], prefix: str, kind: ModelType, values: dict[str, Any]) -> None:
    """DeepSeek-V2/V3 attention is always latent (DeepseekV2Attention builds kv_a_proj_with_mqa of kv_lora_rank
    + qk_rope_head_dim outputs and splits q into qk_nope_head_dim + qk_rope_head_dim): a null or zero rank or a
    null head dim builds no model, and reading it as multi-head attention would size a KV cache 3-25x too big."""
    for key in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        if values.get(key) is None or (key == "kv_lora_rank" and not values[key]):
            raise ArchitectureError(
                f"config.json {prefix}{key}: {show_value(text.get(key))}, where every attention layer of "
                f"{kind.label} is multi-head latent attention, which needs it (leave it out for the class default "
                f"{_MLA_DEFAULTS[key]})"
            )


# -- hybrid models ------------------------------------------------------------------------------


def _qwen3_next_layers(text: dict[str, Any], prefix: str, values: dict[str, Any], notes: list[str]) -> None:
    """Qwen3NextConfig: ``layer_types`` (linear_attention / full_attention), else every
    ``full_attention_interval``-th layer (default 4) full attention; the Gated DeltaNet dimensions."""
    layers = values["layers"]
    layer_types = text.get("layer_types")
    if layer_types is not None:
        kinds = _layer_types(layer_types, prefix, layers)
        letters = {"linear_attention": "L", "full_attention": "A"}
        unknown = sorted(set(kinds) - set(letters))
        if unknown:
            raise ArchitectureError(
                f"config.json {prefix}layer_types names {', '.join(unknown)}: a layer kind gpuplan cannot size "
                "in a Qwen3-Next model (linear_attention, full_attention)"
            )
        pattern = "".join(letters[kind] for kind in kinds)
    else:
        interval = bounded_int(text, "full_attention_interval", 1, layers, prefix, 4)
        pattern = "".join("A" if (index + 1) % interval == 0 else "L" for index in range(layers))
        if "full_attention_interval" not in text:
            notes.append(f"{prefix}full_attention_interval absent: 4 (config-class default)")
    for name in ("sliding_window", "sliding_layers", "attention_chunk"):
        values.pop(name, None)  # Qwen3NextAttention has no window
    if "L" not in pattern:
        return
    values["layer_pattern"] = compressed_pattern(pattern)
    for name, key in (
        ("linear_key_heads", "linear_num_key_heads"),
        ("linear_value_heads", "linear_num_value_heads"),
        ("linear_key_head_dim", "linear_key_head_dim"),
        ("linear_value_head_dim", "linear_value_head_dim"),
        ("conv_kernel", "linear_conv_kernel_dim"),
    ):
        values[name] = check_value(name, text[key], f"config.json {prefix}{key}")


def _model_type_specifics(
    text: dict[str, Any], prefix: str, model_type: str, values: dict[str, Any], notes: list[str]
) -> None:
    if model_type in ("falcon", "gpt_bigcode") and bool_value(text, "multi_query", prefix, False):
        values["kv_heads"] = 1
    if model_type == "falcon":
        new_architecture = bool_value(text, "new_decoder_architecture", prefix, False)
        values["norms_per_layer"] = 2 if new_architecture else 1
        biased = bool_value(text, "bias", prefix, False)
        values.update(attention_bias=biased, output_bias=biased, mlp_bias=biased)
        if not new_architecture and not bool_value(text, "multi_query", prefix, True):
            values.pop("kv_heads", None)
    if model_type == "gpt_bigcode" and text.get("n_positions") is not None:
        values["position_embeddings"] = check_value("position_embeddings", text["n_positions"], f"{prefix}n_positions")
    if model_type == "gpt_neox":
        values["parallel_attention"] = bool_value(text, "use_parallel_residual", prefix, True)
        biased = bool_value(text, "attention_bias", prefix, True)
        values.update(attention_bias=biased, output_bias=biased)
    if model_type == "stablelm":
        values["parallel_attention"] = bool_value(text, "use_parallel_residual", prefix, False)
        values["qk_norm"] = False  # its q/k LayerNorms are per head; counted below as small parameters if set
    if model_type == "starcoder2":
        biased = bool_value(text, "use_bias", prefix, True)
        values.update(attention_bias=biased, output_bias=biased, mlp_bias=biased)
    if model_type == "llama4_text":
        dense = text.get("intermediate_size_mlp")
        if dense is not None:
            values["expert_intermediate"] = values["intermediate"]
            values["intermediate"] = check_value("intermediate", dense, f"config.json {prefix}intermediate_size_mlp")
    if model_type == "gpt_oss":
        values["expert_intermediate"] = values["intermediate"]
    if model_type in _QWEN2_TEXT and not bool_value(text, "use_sliding_window", prefix, False):
        values.pop("sliding_window", None)
    if model_type in ("qwen2_moe", "qwen3_moe") and not bool_value(text, "use_sliding_window", prefix, False):
        values.pop("sliding_window", None)
    if model_type in ("qwen2_moe", "qwen3_next") and not text.get("shared_expert_intermediate_size"):
        values["shared_experts"] = 0
        values["shared_expert_gate"] = False
    if model_type == "nemotron_h":
        nemotron_h_specifics(text, prefix, values, notes)
    if model_type == "cohere" and bool_value(text, "use_qk_norm", prefix, False):
        # CohereAttention's q_norm/k_norm weigh each head apart ((heads + kv_heads) x head_dim a layer): no field
        # holds that, and it is under 0.001% of Command-R+.
        notes.append(f"{prefix}use_qk_norm: its per-head q/k norm weights are not counted")
    if text.get("use_sliding_window") is False:
        values.pop("sliding_window", None)


def _drop_moe(values: dict[str, Any]) -> None:
    """Leave out every mixture-of-experts field: a model that routes no layer among experts."""
    for name in (*_MOE_FIELDS, "experts", "router_bias", "shared_expert_gate"):
        values.pop(name, None)


def _moe(text: dict[str, Any], prefix: str, values: dict[str, Any], notes: list[str], spelled: dict[str, str]) -> None:
    if not values.get("experts"):
        _drop_moe(values)
        return
    skipped = text.get("mlp_only_layers")
    if skipped:
        if not isinstance(skipped, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in skipped):
            raise ArchitectureError(f"config.json {prefix}mlp_only_layers must be a list of layer indices")
        if sorted(skipped) != list(range(len(skipped))):
            raise ArchitectureError(
                f"config.json {prefix}mlp_only_layers other than the leading layers is a layout gpuplan cannot express"
            )
        spelled["dense_layers"] = f"config.json {prefix}mlp_only_layers' count"
        values["dense_layers"] = check_value("dense_layers", len(skipped), spelled["dense_layers"])
    frequency = text.get("moe_layer_freq")
    if frequency not in (None, 1):
        raise ArchitectureError(
            f"config.json {prefix}moe_layer_freq {show_value(frequency)} is a layout gpuplan cannot express"
        )
    if values.get("shared_experts") and "shared_expert_intermediate" not in values:
        notes.append("shared expert width: the routed experts' width")


def _sliding_layout(text: dict[str, Any], prefix: str, values: dict[str, Any], notes: list[str]) -> None:
    """Which layers slide (or attend in chunks): layer_types, no_rope_layers or a pattern key."""
    layers = values["layers"]
    layer_types = text.get("layer_types")
    if layer_types is not None:
        kinds = _layer_types(layer_types, prefix, layers)
        unknown = set(kinds) - {"full_attention", "sliding_attention", "chunked_attention"}
        if unknown:
            raise ArchitectureError(
                f"config.json {prefix}layer_types names {', '.join(sorted(unknown))}: a layer kind gpuplan cannot size"
            )
        windowed = [kind != "full_attention" for kind in kinds]
        if not any(windowed):
            values.pop("sliding_window", None)
            values.pop("attention_chunk", None)
            values.pop("sliding_layers", None)
            return
        _windowed_layers(windowed, layers, values, f"{prefix}layer_types")
        return
    no_rope = text.get("no_rope_layers")
    if values.get("attention_chunk"):
        if isinstance(no_rope, list) and no_rope:
            flags = [bool(flag) for flag in int_list(no_rope, f"{prefix}no_rope_layers", layers)]
            _windowed_layers(flags, layers, values, f"{prefix}no_rope_layers")
        else:
            values["sliding_layers"] = 4  # Llama4TextConfig no_rope_layer_interval: every 4th layer is global
        return
    if not values.get("sliding_window"):
        values.pop("sliding_layers", None)
        return
    pattern = text.get("sliding_window_pattern")
    if pattern is not None and "sliding_layers" not in values:
        values["sliding_layers"] = check_value("sliding_layers", pattern, f"config.json {prefix}sliding_window_pattern")
        if values["sliding_layers"] == 1:
            values.pop("sliding_layers")


def _layer_types(value: Any, prefix: str, layers: int) -> list[str]:
    """``layer_types``, one name a layer: transformers' ``layer_type_validation`` refuses a list of another length
    (a Gemma-2 list of 10 for 42 layers was read as its period, alternate layers sliding)."""
    if isinstance(value, list) and len(value) != layers:
        raise ArchitectureError(
            f"config.json {prefix}layer_types lists {len(value)} layers, where num_hidden_layers is {layers}: "
            "transformers needs one entry a layer"
        )
    return string_list(value, f"{prefix}layer_types", layers)


def _windowed_layers(windowed: list[bool], layers: int, values: dict[str, Any], where: str) -> None:
    """Set which layers slide (or attend in chunks) from ``windowed``, one flag a layer: as ``sliding_layers``
    N when every Nth layer is full attention (0: all slide), else, for any other mix of a list naming every
    layer, as a ``layer_pattern`` of S (windowed) and A (full) layers."""
    period = _period(windowed)
    if period is not None:
        values["sliding_layers"] = period
        return
    if len(windowed) != layers:
        raise ArchitectureError(
            f"config.json {where} lists {len(windowed)} of {layers} layers: a mix of windowed and full layers "
            "gpuplan cannot express"
        )
    values.pop("sliding_layers", None)
    values["layer_pattern"] = compressed_pattern("".join("S" if flag else "A" for flag in windowed))


def _period(windowed: list[bool]) -> int | None:
    """The N of "every Nth layer is full attention" that reproduces ``windowed``, 0 when all slide, None
    when no period does."""
    if all(windowed):
        return 0
    for period in range(2, len(windowed) + 1):
        if all(flag == ((index + 1) % period != 0) for index, flag in enumerate(windowed)):
            return period
    return None
