"""A config.json's ``quantization_config``: the format a checkpoint stores its linears in, the group size,
and which modules it keeps in 16-bit (so how many weights it quantizes), as the engines read it."""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from gpuplan.architecture import Architecture, ArchitectureError, show_value
from gpuplan.hf_values import bounded_int, string_list, string_value
from gpuplan.records import record
from gpuplan.units import FP4_BLOCK


@record
class Checkpoint:
    """How a checkpoint stores its linears: format, group size and how many weights it quantizes."""

    quantization: str = "none"
    group_size: int = 128  # 0: one scale per output channel
    quantized_params: int | None = None  # linear weights stored quantized; None: every decoder linear


_FP8_METHODS = ("fp8", "fbgemm_fp8")
# NVIDIA ModelOpt checkpoints name their format in quant_algo (hf_quant_config.json's, copied into config.json's
# quantization_config; vLLM's ModelOptFp8Config and ModelOptNvFp4Config read it): FP8, or NVFP4 in blocks of 16.
_MODELOPT_ALGOS = {"FP8": ("fp8", 128), "NVFP4": ("nvfp4", FP4_BLOCK["nvfp4"])}
_KNOWN_UNSIZED = (
    "aqlm",
    "bitnet",
    "eetq",
    "exl2",
    "fp_quant",
    "gguf",
    "higgs",
    "hqq",
    "quanto",
    "spqr",
    "torchao",
    "vptq",
)


def read_quantization(config: dict[str, Any], arch: Architecture) -> Checkpoint:
    """The serving format of a pre-quantized checkpoint from its ``quantization_config``.

    AWQ/GPTQ 4-bit with their group size (-1: one scale per output channel); GPTQ 8-bit and
    compressed-tensors int8 -> int8; fp8/fbgemm_fp8/compressed-tensors float8 and ModelOpt FP8 -> fp8; ModelOpt NVFP4
    -> nvfp4 (its quant_algo; another is refused); MXFP4 (gpt-oss:
    4-bit e2m1 values in blocks of 32 with one 8-bit scale, 4.25 bits) -> mxfp4. The modules a
    checkpoint keeps in 16-bit (``ignore``, ``modules_to_not_convert``) are matched as transformers and
    compressed-tensors match them. Any other format is an ArchitectureError naming it.
    """
    quant = config.get("quantization_config")
    if quant is None:
        return Checkpoint()
    if not isinstance(quant, dict):
        raise ArchitectureError("config.json quantization_config must be a mapping")
    method = string_value(quant, "quant_method", "quantization_config.quant_method").lower()
    bits = quant.get("bits", quant.get("w_bit"))
    if method in ("awq", "gptq"):
        bits = bounded_int(quant, "bits" if "bits" in quant else "w_bit", 1, 64, "quantization_config.", 4)
        group = _group_size(quant)
        if bits == 4:
            return _checkpoint(f"int4-{method}", group, quant, arch)
        if bits == 8 and method == "gptq":
            return _checkpoint("int8", group, quant, arch)
        raise ArchitectureError(f"config.json quantization_config: {bits}-bit {method} is a format gpuplan cannot size")
    if method in _FP8_METHODS:
        return _checkpoint("fp8", 128, quant, arch)
    if method == "modelopt":
        algo = (string_value(quant, "quant_algo", "quantization_config.quant_algo") or "FP8").upper()  # FP8 alone once
        if algo not in _MODELOPT_ALGOS:
            raise ArchitectureError(
                f"config.json quantization_config.quant_algo {algo!r}: a ModelOpt format gpuplan cannot size"
                f" (it sizes {', '.join(_MODELOPT_ALGOS)})"
            )
        return _checkpoint(*_MODELOPT_ALGOS[algo], quant, arch)
    if method == "mxfp4":
        return _checkpoint("mxfp4", FP4_BLOCK["mxfp4"], quant, arch)
    if method == "compressed-tensors":
        return _checkpoint(_compressed_tensors_format(quant), _compressed_tensors_group(quant), quant, arch)
    if method == "bitsandbytes":
        if quant.get("load_in_8bit") is True:
            return _checkpoint("int8", 128, quant, arch)
        raise ArchitectureError(
            "config.json quantization_config: a bitsandbytes 4-bit checkpoint is not a serving format gpuplan sizes"
        )
    label = method or "(no quant_method)"
    if method in _KNOWN_UNSIZED or bits is not None or method:
        raise ArchitectureError(
            f"config.json quantization_config: quant_method {label!r} is a format gpuplan cannot size"
        )
    raise ArchitectureError("config.json quantization_config names no quant_method")


def _group_size(quant: dict[str, Any]) -> int:
    key = next((k for k in ("group_size", "q_group_size") if quant.get(k) is not None), None)
    if key is None:
        return 128
    value = quant[key]
    if not isinstance(value, int) or isinstance(value, bool) or not (value == -1 or 1 <= value <= 1_000_000):
        raise ArchitectureError(
            f"config.json quantization_config.{key} must be -1 or a positive group size, not {show_value(value)}"
        )
    return 0 if value == -1 else value


def _compressed_tensors_format(quant: dict[str, Any]) -> str:
    groups = quant.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise ArchitectureError("config.json quantization_config: compressed-tensors without config_groups")
    formats = set()
    for name, group in groups.items():
        weights = group.get("weights") if isinstance(group, dict) else None
        if not isinstance(weights, dict):
            raise ArchitectureError(f"config.json quantization_config.config_groups.{name} lacks weights")
        bits, kind = weights.get("num_bits"), str(weights.get("type", "int")).lower()
        if kind == "float" and bits == 8:
            formats.add("fp8")
        elif kind == "int" and bits == 8:
            formats.add("int8")
        elif kind == "int" and bits == 4:
            formats.add("int4-gptq")  # packed int4 + 16-bit group scale (and zero point): at most 4 + 20/g bits
        else:
            raise ArchitectureError(
                f"config.json quantization_config: compressed-tensors {show_value(bits)}-bit {kind} is a format "
                "gpuplan cannot size"
            )
    if len(formats) != 1:
        raise ArchitectureError("config.json quantization_config: mixed compressed-tensors formats gpuplan cannot size")
    return formats.pop()


def _compressed_tensors_group(quant: dict[str, Any]) -> int:
    for group in quant["config_groups"].values():
        size = group["weights"].get("group_size")
        if size is not None:
            if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= 1_000_000:
                raise ArchitectureError("config.json quantization_config: group_size must be a positive integer")
            return int(size)
    return 0 if any(group["weights"].get("strategy") == "channel" for group in quant["config_groups"].values()) else 128


def _checkpoint(quantization: str, group: int, quant: dict[str, Any], arch: Architecture) -> Checkpoint:
    patterns: list[str] = []
    for key in ("ignore", "modules_to_not_convert", "llm_int8_skip_modules"):
        value = quant.get(key)
        if value is not None:
            patterns.extend(string_list(value, f"quantization_config.{key}", 100_000))
    kept = [pattern for pattern in patterns if pattern]
    if not kept:
        return Checkpoint(quantization, group, None)
    return Checkpoint(quantization, group, quantized_linear_params(arch, kept))


# Names a decoder linear goes by in Hugging Face checkpoints, per gpuplan canonical module.
_MODULE_NAMES: dict[str, tuple[str, ...]] = {
    "q": (
        "self_attn.q_proj",
        "self_attn.qkv_proj",
        "self_attention.query_key_value",
        "attention.query_key_value",
        "attn.c_attn",
    ),
    "k": (
        "self_attn.k_proj",
        "self_attn.qkv_proj",
        "self_attention.query_key_value",
        "attention.query_key_value",
        "attn.c_attn",
    ),
    "v": (
        "self_attn.v_proj",
        "self_attn.qkv_proj",
        "self_attention.query_key_value",
        "attention.query_key_value",
        "attn.c_attn",
    ),
    "o": ("self_attn.o_proj", "self_attn.dense", "self_attention.dense", "attention.dense", "attn.c_proj"),
    "q_a": ("self_attn.q_a_proj",),
    "q_b": ("self_attn.q_b_proj",),
    "kv_a": ("self_attn.kv_a_proj_with_mqa",),
    "kv_b": ("self_attn.kv_b_proj",),
    "gate": ("mlp.gate_proj", "mlp.gate_up_proj", "feed_forward.gate_proj"),
    "up": ("mlp.up_proj", "mlp.gate_up_proj", "mlp.fc1", "mlp.dense_h_to_4h", "mlp.c_fc", "feed_forward.up_proj"),
    "down": ("mlp.down_proj", "mlp.fc2", "mlp.dense_4h_to_h", "mlp.c_proj", "feed_forward.down_proj"),
    "experts": ("mlp.experts", "block_sparse_moe.experts", "feed_forward.experts", "mixer.experts"),
    "shared": ("mlp.shared_experts", "mlp.shared_expert", "feed_forward.shared_expert", "mixer.shared_experts"),
    "linear_qkvz": ("linear_attn.in_proj_qkvz",),  # Qwen3NextGatedDeltaNet
    "linear_ba": ("linear_attn.in_proj_ba",),
    "linear_out": ("linear_attn.out_proj",),
    "mamba_in": ("mixer.in_proj",),  # NemotronHMamba2Mixer
    "mamba_out": ("mixer.out_proj",),
}
# Nemotron-H names every block's module "mixer": its attention and MLP linears too.
for _module, _names in (
    ("q", "q_proj"),
    ("k", "k_proj"),
    ("v", "v_proj"),
    ("o", "o_proj"),
    ("up", "up_proj"),
    ("down", "down_proj"),
):
    _MODULE_NAMES[_module] += (f"mixer.{_names}",)
_LAYER_PREFIXES = (
    "model.layers.{}.",
    "model.language_model.layers.{}.",
    "language_model.model.layers.{}.",
    "transformer.h.{}.",
    "gpt_neox.layers.{}.",
    "backbone.layers.{}.",
)
_LAYER_INDEX = re.compile(r"(?:layers|\.h)\.(\d+)(?:\.|$)")
_NESTED_QUANTIFIER = re.compile(r"\([^)]*[*+][^)]*\)[*+{]")


def quantized_linear_params(arch: Architecture, patterns: list[str]) -> int:
    """Decoder linear weights that no pattern keeps in 16-bit.

    Plain names match as transformers matches ``modules_to_not_convert`` (the pattern is a part of the
    module's name), ``*`` as a glob, and ``re:`` patterns as compressed-tensors does (``re.match``).
    """
    literal, compiled = [], []
    for pattern in patterns:
        if len(pattern) > 500:
            raise ArchitectureError("config.json quantization_config: a module pattern longer than 500 characters")
        if pattern.startswith("re:"):
            if _NESTED_QUANTIFIER.search(pattern):
                raise ArchitectureError(
                    f"config.json quantization_config: regular expression {show_value(pattern)} is too complex to "
                    "evaluate safely"
                )
            try:
                compiled.append(re.compile(pattern[3:]))
            except re.error:
                raise ArchitectureError(
                    f"config.json quantization_config: {show_value(pattern)} is not a valid regular expression"
                ) from None
        else:
            literal.append(pattern)
    layer_specific: dict[int, list[str]] = {}
    everywhere: list[str] = []
    for pattern in literal:
        found = _LAYER_INDEX.search(pattern)
        if found and "*" not in pattern:
            layer_specific.setdefault(int(found.group(1)), []).append(pattern)
        else:
            everywhere.append(pattern)
    total = 0
    for index in range(arch.layers):
        checks = layer_specific.get(index, []) + everywhere
        for module, weights in arch.layer_modules(index):
            if checks or compiled:
                names = [prefix.format(index) + name for prefix in _LAYER_PREFIXES for name in _MODULE_NAMES[module]]
                if any(_literal_match(pattern, name) for pattern in checks for name in names):
                    continue
                if any(regex.match(name) for regex in compiled for name in names[: 2 * len(_MODULE_NAMES[module])]):
                    continue
            total += weights
    return total


def _literal_match(pattern: str, name: str) -> bool:
    if "*" in pattern or "?" in pattern:
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name, pattern + ".*")
    return pattern in name
