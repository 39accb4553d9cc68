"""The context a config.json's model takes, as vLLM derives it: the length keys in order, RoPE scaling
(linear, dynamic, YaRN, LongRoPE, Llama 3) and the model types that state a prescaled length."""

from __future__ import annotations

from typing import Any

from gpuplan.architecture import ArchitectureError, check_value, show_value

# The keys vLLM reads a model's maximum length from, in its order (vllm/config/model.py,
# _get_and_verify_max_len's possible_keys).
_LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
# RoPE types whose max_position_embeddings already counts the scaling (vLLM multiplies the others).
_PRESCALED_ROPE = ("su", "longrope", "llama3")
_MAX_POSITION_BOUND = 100_000_000  # the schema's bound of max_position


def context_limit(text: dict[str, Any], prefix: str, model_type: str) -> tuple[int, str] | None:
    """(the longest context the model takes, how it was derived), as vLLM derives it, or None when the
    config.json states no length (vLLM then takes the user's --max-model-len unchecked).

    vLLM's ``_get_and_verify_max_len`` (vllm/config/model.py): the smallest of the length keys present;
    ``model_max_length``, when set, replaces it; then RoPE scaling (``rope_scaling``, or Transformers v5's
    ``rope_parameters``) of any type but su/longrope/llama3 multiplies it by ``factor`` (default 1), yarn
    starting from ``original_max_position_embeddings``; Gemma 3's length is already scaled. A sliding
    window lowers it only under ``--disable-sliding-window``, which a spec cannot declare. Every value is
    checked before any arithmetic: a bad one is an ArchitectureError naming its key (GP021).
    """
    lengths = {
        key: check_value("max_position", text[key], f"config.json {prefix}{key}")
        for key in _LENGTH_KEYS
        if text.get(key) is not None
    }
    if not lengths:
        return None
    key = min(lengths, key=lambda name: lengths[name])  # vLLM: the smallest; the first on a tie
    if "model_max_length" in lengths:  # vLLM: "For Command-R / Cohere ... models", set wins over the rest
        key = "model_max_length"
    base = lengths[key]
    source = f"config.json {prefix}{key} {base:,}"
    scalings = _rope_scalings(text, prefix)
    if "gemma3" in model_type:  # vLLM: "Gemma3's max_model_len (128K) is already scaled by RoPE scaling"
        scalings = []
    factor, yarn_start, scaled_by, counted = 1.0, None, [], []
    for where, rope_type, rope in scalings:
        stated = None if rope.get("factor") is None else _rope_factor(rope["factor"], f"{where}.factor")
        if rope_type in _PRESCALED_ROPE:  # vLLM: their max_position_embeddings is the scaled length
            counted.append(f"{where} {rope_type} is counted in it")
            continue
        if stated is not None:
            factor = stated
            scaled_by.append(f"{where} {rope_type} factor {stated:g}")
        if rope_type == "yarn":  # vLLM: yarn scales the pre-training length
            yarn_start = _yarn_start(rope, text, where, prefix, lengths)
    if yarn_start is not None:
        base, source = yarn_start
    if counted:
        source += f" ({'; '.join(counted)})"
    if factor == 1.0:
        return base, source
    scaled = base * factor
    if not 1 <= scaled <= _MAX_POSITION_BOUND:
        raise ArchitectureError(
            f"config.json {prefix}RoPE scaling gives {base:,} x {factor:g} positions, "
            f"outside 1 to {_MAX_POSITION_BOUND:,}"
        )
    return int(scaled), f"{source} x {', '.join(scaled_by)}"


def _rope_scalings(text: dict[str, Any], prefix: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(where, RoPE type, parameters) of each RoPE scaling a config.json states: ``rope_scaling``
    (Transformers v4) or ``rope_parameters`` (v5, flat or one per layer type, as vLLM reads it)."""
    key = "rope_scaling" if text.get("rope_scaling") is not None else "rope_parameters"
    rope = text.get(key)
    where = f"{prefix}{key}"
    if rope is not None and not isinstance(rope, dict):
        raise ArchitectureError(f"config.json {where} must be a mapping, not {show_value(rope)}")
    if not rope:  # absent, null or {}: no scaling
        return []
    # vLLM's is_rope_parameters_nested: one mapping per layer type (Gemma 3 under Transformers v5).
    nested = bool(rope) and all(isinstance(value, dict) for value in rope.values())
    entries = [(f"{where}.{name}", value) for name, value in rope.items()] if nested else [(where, rope)]
    return [(place, _rope_type(value, place), value) for place, value in entries]


def _rope_type(rope: dict[str, Any], where: str) -> str:
    """The RoPE type as vLLM's patch_rope_parameters_dict reads it: ``rope_type``, else the legacy ``type``
    (the two must agree; su is longrope, mrope is default)."""
    modern, legacy = rope.get("rope_type"), rope.get("type")
    for name, value in (("rope_type", modern), ("type", legacy)):
        if value is not None and (not isinstance(value, str) or len(value) > 200):
            raise ArchitectureError(f"config.json {where}.{name} must be a short string, not {show_value(value)}")
    if modern is None and legacy is None:
        raise ArchitectureError(f"config.json {where} names no rope_type")
    aliases = {"su": "longrope", "mrope": "default"}
    if modern is not None and legacy is not None and aliases.get(legacy, legacy) != aliases.get(modern, modern):
        raise ArchitectureError(f"config.json {where}: rope_type {modern!r} and type {legacy!r} disagree")
    rope_type = str(modern if modern is not None else legacy)
    return aliases.get(rope_type, rope_type)


def _rope_factor(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ArchitectureError(f"config.json {where} must be a number above 0, not {show_value(value)}")
    return float(value)


def _yarn_start(
    rope: dict[str, Any], text: dict[str, Any], where: str, prefix: str, lengths: dict[str, int]
) -> tuple[int, str] | None:
    """The length yarn scales: its ``original_max_position_embeddings``, else the config's top-level one
    (vLLM's patch_rope_parameters copies it in), else max_position_embeddings (Transformers' default)."""
    for place, data in ((where, rope), (prefix.rstrip("."), text)):
        value = data.get("original_max_position_embeddings")
        if value is not None:
            label = f"{place}.original_max_position_embeddings" if place else "original_max_position_embeddings"
            start = check_value("max_position", value, f"config.json {label}")
            return start, f"config.json {label} {start:,}"
    return (
        None
        if "max_position_embeddings" not in lengths
        else (
            lengths["max_position_embeddings"],
            f"config.json {prefix}max_position_embeddings {lengths['max_position_embeddings']:,}",
        )
    )
