"""A multimodal config.json's vision tower: the parameters of its encoder and of the projector into the language
model (``vision_tower_params``), counted apart from the text model's (``gpuplan.hf_config`` reads the rest)."""

from __future__ import annotations

from typing import Any

from gpuplan.architecture import ArchitectureError, show_value
from gpuplan.hf_values import bounded_int, string_value


def vision_tower_params(vision: dict[str, Any], top_type: str, text_hidden: int, config: dict[str, Any]) -> int:
    """Parameters of the vision encoder and the projector into the language model.

    ViT encoders (SigLIP, CLIP, MoonViT): per layer q/k/v/o with biases, a two-matrix GELU MLP with
    biases and two biased LayerNorms; patch embedding (channels x patch^2 x width + bias) and learned
    positions. Pixtral: RMSNorm, gated MLP, no biases, no learned positions. Projectors as in each
    multimodal model's modelling code.
    """
    if top_type in ("qwen2_vl", "qwen2_5_vl"):
        return _qwen_vl_tower(vision, gated=top_type == "qwen2_5_vl")
    vision_type = string_value(vision, "model_type", "vision_config.model_type")
    width = bounded_int(vision, "hidden_size", 1, 1_000_000, "vision_config.")
    depth = bounded_int(vision, "num_hidden_layers", 1, 1000, "vision_config.")
    mlp = bounded_int(vision, "intermediate_size", 1, 10_000_000, "vision_config.")
    patch = bounded_int(vision, "patch_size", 1, 10_000, "vision_config.", 14)
    channels = bounded_int(vision, "num_channels", 1, 64, "vision_config.", 3)
    image = bounded_int(vision, "image_size", 1, 100_000, "vision_config.", 224)
    positions = (image // patch) ** 2
    if vision_type == "pixtral":
        layer = 4 * width * width + 3 * width * mlp + 2 * width
        encoder = depth * layer + channels * patch * patch * width + width  # patch conv (no bias) + ln_pre
    else:
        layer = 4 * (width * width + width) + 2 * width * mlp + mlp + width + 2 * 2 * width
        encoder = depth * layer + channels * patch * patch * width + width + positions * width + 2 * width
        if vision_type in ("clip_vision_model", "llama4_vision_model"):
            encoder += width + width + 2 * width  # class embedding + its position + pre-layernorm
    projector_input = width
    if top_type == "llava_next" or top_type == "llava":
        layers_used = config.get("vision_feature_layer")
        if isinstance(layers_used, list):
            projector_input = width * len(layers_used)
        bias = 1 if config.get("multimodal_projector_bias", True) is not False else 0
        projector = projector_input * text_hidden + text_hidden * text_hidden + 2 * text_hidden * bias
        if top_type == "llava_next":
            projector += text_hidden  # image_newline
    elif top_type == "mistral3":
        merge = bounded_int(config, "spatial_merge_size", 1, 64, "", 2)
        bias = 1 if config.get("multimodal_projector_bias") else 0
        projector = width + width * merge * merge * width + width * text_hidden + text_hidden * text_hidden
        projector += 2 * text_hidden * bias
    elif top_type == "gemma3":
        projector = width * text_hidden + width  # mm_input_projection_weight + mm_soft_emb_norm
    elif top_type == "llama4":
        output = bounded_int(vision, "vision_output_dim", 1, 1_000_000, "vision_config.", width)
        adapter = bounded_int(vision, "projector_input_dim", 1, 1_000_000, "vision_config.", output)
        ratio = vision.get("pixel_shuffle_ratio", 0.5)
        grid = image // patch  # patches a side; the shuffle keeps ratio x grid of them (at least one)
        if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not 0 < ratio <= 1 or ratio * grid < 1:
            raise ArchitectureError(
                "config.json vision_config.pixel_shuffle_ratio must be a number in (0, 1] that keeps at least one of"
                f" the image's {grid} patches a side (image_size {image} // patch_size {patch})"
                + (f": 1 / {grid} or more" if grid else ": the image holds none")
            )
        shuffled = int(width / (ratio * ratio))
        projector = shuffled * adapter + adapter * output + output * text_hidden
    else:
        projector = width * text_hidden + text_hidden * text_hidden + 2 * text_hidden
    return encoder + projector


def _qwen_vl_tower(vision: dict[str, Any], gated: bool) -> int:
    """Qwen2-VL's (``gated`` False) or Qwen2.5-VL's vision tower and patch merger, absent keys at the defaults of
    transformers' Qwen2VLVisionConfig / Qwen2_5_VLVisionConfig (4.57; ``in_chans`` in published configs is not a
    key the classes read: ``in_channels``, default 3).

    modeling_qwen2_vl.py / modeling_qwen2_5_vl.py: a Conv3d patch embedding without bias over in_channels x
    temporal_patch_size x patch_size^2; per block a biased fused qkv and a biased proj; Qwen2-VL two biased
    LayerNorms and a biased two-matrix MLP of int(embed_dim x mlp_ratio), Qwen2.5-VL two RMSNorms and a biased
    gated MLP of intermediate_size; the merger a norm of the width (LayerNorm, RMSNorm) then biased linears from
    width x spatial_merge_size^2 to itself and to the language model's width (hidden_size, out_hidden_size).
    """
    where = "vision_config."
    depth = bounded_int(vision, "depth", 1, 1000, where, 32)
    channels = bounded_int(vision, "in_channels", 1, 64, where, 3)
    patch = bounded_int(vision, "patch_size", 1, 10_000, where, 14)
    frames = bounded_int(vision, "temporal_patch_size", 1, 64, where, 2)
    merge = bounded_int(vision, "spatial_merge_size", 1, 64, where, 2)
    if gated:
        width = bounded_int(vision, "hidden_size", 1, 1_000_000, where, 3584)
        mlp = bounded_int(vision, "intermediate_size", 1, 10_000_000, where, 3420)
        output = bounded_int(vision, "out_hidden_size", 1, 1_000_000, where, 3584)
        block = 3 * width * mlp + 2 * mlp + width + 2 * width  # gate, up, down with biases; two RMSNorms
        merger_norm = width
    else:
        width = bounded_int(vision, "embed_dim", 1, 1_000_000, where, 1280)
        ratio = vision.get("mlp_ratio", 4)
        if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not 1 <= width * ratio <= 10_000_000:
            raise ArchitectureError(
                f"config.json vision_config.mlp_ratio must be a number that makes embed_dim {width} x it a width from "
                f"1 to 10,000,000, not {show_value(ratio)}"
            )
        mlp = int(width * ratio)  # Qwen2VLVisionBlock: int(config.embed_dim * config.mlp_ratio)
        output = bounded_int(vision, "hidden_size", 1, 1_000_000, where, 3584)
        block = 2 * width * mlp + mlp + width + 2 * 2 * width  # fc1, fc2 with biases; two LayerNorms
        merger_norm = 2 * width
    block += 4 * width * width + 4 * width  # qkv and proj with biases
    merged = width * merge * merge
    merger = merger_norm + merged * merged + merged + merged * output + output
    return depth * block + channels * frames * patch * patch * width + merger
