"""Nemotron-H's config.json (NemotronHConfig, transformers ``modeling_nemotron_h.py``): its layer pattern of
Mamba-2, attention, MLP and mixture-of-experts blocks, the Mamba-2 dimensions, and what its attention and
projections carry; the reading of one model family that ``gpuplan.hf_config`` calls by model type."""

from __future__ import annotations

from typing import Any

from gpuplan.architecture import ArchitectureError, check_value, show_value
from gpuplan.hf_values import bool_value, compressed_pattern, string_list

# E: a mixture-of-experts block in place of the MLP (NemotronHMoE); gpuplan's pattern writes it "-" once the
# experts are read (every MLP layer of an MoE model is an MoE layer: Architecture.is_moe_layer).
_NEMOTRON_LETTERS = {"M": "M", "*": "A", "-": "-", "E": "E"}
_NEMOTRON_TYPES = {
    "mamba": "M",
    "linear_attention": "M",
    "attention": "A",
    "full_attention": "A",
    "mlp": "-",
    "moe": "E",
}


def _pattern(text: dict[str, Any], prefix: str) -> str | None:
    """Nemotron-H's layers as gpuplan letters: ``hybrid_override_pattern`` (M Mamba-2, * attention, - MLP, E
    mixture of experts) or ``layers_block_type`` (transformers v5: linear_attention is Mamba-2 there); E stays E
    until ``nemotron_h_layers`` reads the experts."""
    letters = _override_pattern(text, prefix)
    key = next((key for key in ("layers_block_type", "layer_types") if text.get(key) is not None), None)
    if key is None:  # NemotronHConfig.attribute_map: layer_types is layers_block_type
        return letters
    kinds = string_list(text[key], f"{prefix}{key}", 1000)
    unknown = sorted(set(kinds) - set(_NEMOTRON_TYPES))
    if unknown:
        raise ArchitectureError(
            f"config.json {prefix}{key} names {', '.join(unknown)}: a layer kind gpuplan cannot size"
        )
    listed = "".join(_NEMOTRON_TYPES[kind] for kind in kinds)
    if letters is not None and letters != listed:  # one config class reads one, another the other
        raise ArchitectureError(
            f"config.json {prefix}hybrid_override_pattern and {prefix}{key} state different layers: "
            f"{show_value(text['hybrid_override_pattern'])} against {show_value(_override_letters(listed))}"
        )
    return listed


def _override_letters(letters: str) -> str:
    """gpuplan's letters written as hybrid_override_pattern writes them."""
    back = {ours: theirs for theirs, ours in _NEMOTRON_LETTERS.items()}
    return "".join(back[letter] for letter in letters)


def _override_pattern(text: dict[str, Any], prefix: str) -> str | None:
    """``hybrid_override_pattern`` in gpuplan's letters, or None when absent."""
    pattern = text.get("hybrid_override_pattern")
    if pattern is None:
        return None
    if not isinstance(pattern, str) or not 1 <= len(pattern) <= 1000:
        raise ArchitectureError(
            f"config.json {prefix}hybrid_override_pattern must be a string of 1 to 1,000 layer letters, "
            f"not {show_value(pattern)}"
        )
    unknown = sorted(set(pattern) - set(_NEMOTRON_LETTERS))
    if unknown:
        raise ArchitectureError(
            f"config.json {prefix}hybrid_override_pattern names {', '.join(repr(c) for c in unknown)}: "
            "a layer kind gpuplan cannot size"
        )
    return "".join(_NEMOTRON_LETTERS[letter] for letter in pattern)


def nemotron_layer_count(text: dict[str, Any], prefix: str) -> dict[str, Any]:
    """``text`` with num_hidden_layers from the pattern when it is absent; GP021 when the two disagree
    (transformers takes the pattern's length, vLLM num_hidden_layers)."""
    pattern = _pattern(text, prefix)
    if pattern is None:
        raise ArchitectureError(f"config.json lacks {prefix}hybrid_override_pattern (or layers_block_type)")
    stated = text.get("num_hidden_layers")
    if stated is None:
        return {**text, "num_hidden_layers": len(pattern)}
    if stated != len(pattern):
        raise ArchitectureError(
            f"config.json {prefix}num_hidden_layers {show_value(stated)} but the layer pattern has {len(pattern)} "
            "layers"
        )
    return text


def nemotron_h_layers(text: dict[str, Any], prefix: str, values: dict[str, Any], notes: list[str]) -> None:
    """NemotronHConfig: the layer pattern and the Mamba-2 dimensions (with their legacy mamba_* spellings);
    the recurrent state's dtype as vLLM takes it (``mamba_ssm_cache_dtype``, float32 by default)."""
    pattern = _pattern(text, prefix)
    assert pattern is not None  # nemotron_layer_count refused a config without one
    for name in ("sliding_window", "sliding_layers", "attention_chunk"):
        values.pop(name, None)
    if "E" in pattern:
        pattern = _moe_layers(text, prefix, pattern, values)
    else:  # the routed-expert keys size only MoE (E) layers (the reader leaves out the rest of them)
        values.pop("experts", None)
    values["layer_pattern"] = compressed_pattern(pattern)
    if "M" in pattern:
        for name, keys in (
            ("mamba_heads", ("mamba_num_heads",)),
            ("mamba_head_dim", ("mamba_head_dim",)),
            ("ssm_state", ("ssm_state_size",)),
            ("ssm_groups", ("mamba_n_groups", "n_groups")),
            ("conv_kernel", ("mamba_d_conv", "conv_kernel")),
        ):
            key = next((key for key in keys if text.get(key) is not None), None)
            if key is None:  # absent, it took the config class's default above: null, a size the layers lack
                stated = " and ".join(prefix + key for key in reversed(keys) if key in text)
                raise ArchitectureError(f"config.json {stated}: null, where the Mamba-2 (M) layers need a size")
            values[name] = check_value(name, text[key], f"config.json {prefix}{key}")
        conv_key = "mamba_conv_bias" if "mamba_conv_bias" in text else "use_conv_bias"
        values["conv_bias"] = bool_value(text, conv_key, prefix, True)
        dtype = text.get("mamba_ssm_cache_dtype")
        if dtype is None:
            notes.append(
                f"{prefix}mamba_ssm_cache_dtype absent: float32 (NemotronHConfig default; vLLM keeps the SSM state "
                "in it)"
            )
            dtype = "float32"
        if dtype not in ("float32", "bfloat16", "float16"):
            raise ArchitectureError(
                f"config.json {prefix}mamba_ssm_cache_dtype must be float32, bfloat16 or float16, not "
                f"{show_value(dtype)}"
            )
        values["state_fp32"] = dtype == "float32"


def _moe_layers(text: dict[str, Any], prefix: str, pattern: str, values: dict[str, Any]) -> str:
    """A Nemotron-H with mixture-of-experts (E) layers (NemotronHMoE, Nemotron 3 Nano): each E layer's routed experts
    (n_routed_experts of moe_intermediate_size, num_experts_per_tok a token) and shared expert
    (moe_shared_expert_intermediate_size), relu2 MLPs of two matrices as the dense layers', and a router with
    NemotronHTopkRouter's score-correction bias (e_score_correction_bias, DeepSeek-V3's). gpuplan makes every MLP
    layer of an MoE model an MoE layer, so E is written as an MLP layer (-); a pattern with both, dense MLP and MoE
    layers, and a latent MoE (moe_latent_size: projections around the experts) are layouts it cannot express."""
    if "-" in pattern:
        raise ArchitectureError(
            f"config.json {prefix}layer pattern mixes dense MLP (- or mlp) and mixture-of-experts (E or moe) "
            "layers: a layout gpuplan cannot express"
        )
    # Each size the E layers read is stated in the file: absent, gpuplan would take another key's (the dense MLP's
    # width, no shared expert) where NemotronHConfig takes its own defaults.
    needed = ["n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts"]
    if text.get("n_shared_experts"):
        needed.append("moe_shared_expert_intermediate_size")
    missing = [key for key in needed if text.get(key) is None]
    if missing:
        raise ArchitectureError(
            f"config.json lacks {', '.join(prefix + key for key in missing)}, which its mixture-of-experts (E) layers"
            " need"
        )
    if text.get("moe_latent_size") is not None:
        raise ArchitectureError(
            f"config.json {prefix}moe_latent_size: a latent mixture of experts, which gpuplan cannot size yet"
        )
    values["router_bias"] = True
    return pattern.replace("E", "-")


def nemotron_h_specifics(text: dict[str, Any], prefix: str, values: dict[str, Any], notes: list[str]) -> None:
    """NemotronHAttention: head_dim (attention_head_dim in the first released configs, 128 by default), the
    o_proj biased with q/k/v (attention_bias); the Mamba projections' bias (use_bias) is refused rather than
    left uncounted; the routed-expert keys are read with the pattern (``nemotron_h_layers``)."""
    if text.get("head_dim") is None:
        if text.get("attention_head_dim") is not None:
            values["head_dim"] = check_value(
                "head_dim", text["attention_head_dim"], f"config.json {prefix}attention_head_dim"
            )
        else:
            values["head_dim"] = 128
            notes.append(f"{prefix}head_dim absent: 128 (config-class default)")
    values["output_bias"] = values.get("attention_bias", False)
    if bool_value(text, "use_bias", prefix, False):
        raise ArchitectureError(f"config.json {prefix}use_bias true: biased Mamba projections gpuplan does not count")
