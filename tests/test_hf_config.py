"""config.json read as transformers reads it: fixtures written from published configs, by hand-derived counts."""

from __future__ import annotations

import json
import math
import time

import pytest
from conftest import run_cli

from gpuplan.architecture import ArchitectureError
from gpuplan.catalog import UnknownNameError, get_model, model_catalog
from gpuplan.estimate.weights import weight_bytes
from gpuplan.hf_config import MODEL_TYPES, from_hf_config, read_hf_model

# google/gemma-2-9b config.json as published: no tie_word_embeddings key (GemmaConfig ties by default).
GEMMA2_9B = {
    "architectures": ["Gemma2ForCausalLM"],
    "attention_bias": False,
    "attn_logit_softcapping": 50.0,
    "cache_implementation": "hybrid",
    "final_logit_softcapping": 30.0,
    "head_dim": 256,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 3584,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "gemma2",
    "num_attention_heads": 16,
    "num_hidden_layers": 42,
    "num_key_value_heads": 8,
    "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06,
    "sliding_window": 4096,
    "torch_dtype": "float32",
    "vocab_size": 256000,
}

# google/gemma-3-27b-it config.json as published (multimodal; text_config omits vocab_size and the
# layout, which Gemma3TextConfig's defaults supply).
GEMMA3_27B = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {
        "head_dim": 128,
        "hidden_size": 5376,
        "intermediate_size": 21504,
        "model_type": "gemma3_text",
        "num_attention_heads": 32,
        "num_hidden_layers": 62,
        "num_key_value_heads": 16,
        "query_pre_attn_scalar": 168,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": 1024,
    },
    "torch_dtype": "bfloat16",
    "vision_config": {
        "hidden_size": 1152,
        "image_size": 896,
        "intermediate_size": 4304,
        "model_type": "siglip_vision_model",
        "num_attention_heads": 16,
        "num_hidden_layers": 27,
        "patch_size": 14,
        "vision_use_head": False,
    },
}

# meta-llama/Llama-4-Scout-17B-16E text_config as published: the shared expert has no n_shared_experts key.
LLAMA4_SCOUT_TEXT = {
    "attention_bias": False,
    "attention_chunk_size": 8192,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 5120,
    "interleave_moe_layer_step": 1,
    "intermediate_size": 8192,
    "intermediate_size_mlp": 16384,
    "max_position_embeddings": 10485760,
    "model_type": "llama4_text",
    "num_attention_heads": 40,
    "num_experts_per_tok": 1,
    "num_hidden_layers": 48,
    "num_key_value_heads": 8,
    "num_local_experts": 16,
    "tie_word_embeddings": False,
    "use_qk_norm": True,
    "vocab_size": 202048,
}

LLAMA_405B = {
    "model_type": "llama",
    "hidden_size": 16384,
    "intermediate_size": 53248,
    "num_attention_heads": 128,
    "num_hidden_layers": 126,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}


def _fp8_405b() -> dict:
    """meta-llama/Llama-3.1-405B-Instruct-FP8: fbgemm_fp8, every layer's attention, the first and last
    layers' MLP and the LM head listed in modules_to_not_convert (kept in bf16)."""
    keep = [f"model.layers.{i}.self_attn.{p}_proj" for i in range(126) for p in ("q", "k", "v", "o")]
    keep += [f"model.layers.{i}.mlp.{p}_proj" for i in (0, 125) for p in ("gate", "up", "down")]
    keep.append("lm_head")
    quant = {"activation_scale_ub": 1200.0, "modules_to_not_convert": keep, "quant_method": "fbgemm_fp8"}
    return {**LLAMA_405B, "quantization_config": quant}


def test_gemma2_without_a_tie_key_is_tied_as_transformers_reads_it():
    model = read_hf_model(GEMMA2_9B)
    arch = model.architecture
    assert arch.tie_embeddings
    # embedding 256,000 x 3,584 = 917,504,000; per layer q 3,584 x 4,096 + k, v 2 x 3,584 x 2,048 + o 4,096 x
    # 3,584 = 44,040,192, MLP 3 x 3,584 x 14,336 = 154,140,672, 4 norms 14,336: 198,195,200 x 42
    # = 8,324,198,400; final norm 3,584.
    assert arch.params == 917_504_000 + 8_324_198_400 + 3_584 == 9_241_705_984
    assert arch.sliding_window == 4096 and arch.sliding_layers == 2  # every other layer slides
    assert any("tie_word_embeddings absent" in note for note in model.notes)
    untied = read_hf_model({**GEMMA2_9B, "tie_word_embeddings": False}).architecture
    assert untied.params - arch.params == 917_504_000  # +9.9%: what an untied default would have added


def test_multimodal_config_counts_the_vision_tower_apart():
    model = read_hf_model(GEMMA3_27B)
    arch = model.architecture
    # Text: embedding 262,208 x 5,376 = 1,409,630,208 (vocab from Gemma3TextConfig's default); per layer
    # q/k/v/o 4 x 22,020,096, MLP 3 x 5,376 x 21,504 = 346,816,512, 4 norms 21,504, q/k norms 2 x 128:
    # 412,898,560 x 62 = 25,599,710,720; final norm 5,376.
    assert arch.text_params == 1_409_630_208 + 25_599_710_720 + 5_376
    # SigLIP: per layer 4 x (1,152^2 + 1,152) + 2 x 1,152 x 4,304 + 4,304 + 1,152 + 2 LayerNorms 4,608 =
    # 15,239,504, x 27 = 411,466,608; patch conv 3 x 14^2 x 1,152 + 1,152 = 678,528; 64^2 positions x 1,152 =
    # 4,718,592; post-LayerNorm 2,304; projector 1,152 x 5,376 + soft-embedding norm 1,152 = 6,194,304.
    assert arch.vision_params == 411_466_608 + 678_528 + 4_718_592 + 2_304 + 6_194_304 == 423_060_336
    assert arch.params == arch.text_params + arch.vision_params
    assert arch.tie_embeddings and arch.sliding_window == 1024 and arch.sliding_layers == 6
    assert arch.sliding_layer_count == 52  # 62 layers, every 6th global: 10 full, 52 local


def test_llama4_shared_expert_and_chunked_attention():
    arch = read_hf_model({"model_type": "llama4", "text_config": LLAMA4_SCOUT_TEXT}).architecture
    assert arch.shared_experts == 1 and arch.expert_width == 8192 and arch.intermediate == 16384
    assert arch.attention_chunk == 8192 and arch.sliding_layers == 4  # 3 of 4 layers chunked
    # Per layer: attention 62,914,560; 16 experts x 3 x 5,120 x 8,192 = 2,013,265,920; the shared expert
    # 125,829,120; router 81,920; norms 10,240 -> 2,202,101,760 x 48; untied embeddings 2 x 1,034,485,760.
    assert arch.params == 2_202_101_760 * 48 + 2 * 1_034_485_760 + 5_120
    without_shared = read_hf_model({**LLAMA4_SCOUT_TEXT, "model_type": "llama"})
    assert arch.params - without_shared.architecture.params >= 48 * 125_829_120


def test_llama4_pixel_shuffle_keeps_at_least_one_patch_a_side():
    # meta-llama/Llama-4-Scout-17B-16E's vision_config: 336-pixel images in 14-pixel patches, a 24 x 24 grid that
    # the pixel shuffle cuts by its ratio each side (0.5: 12 x 12, each token four patches' channels). A ratio
    # under 1 / 24 leaves no patch; 1e-200 squared is 0.0, which divided the projector's width by zero.
    vision = {
        "model_type": "llama4_vision_model", "hidden_size": 1408, "num_hidden_layers": 34, "intermediate_size": 5632,
        "image_size": 336, "patch_size": 14, "projector_input_dim": 4096, "vision_output_dim": 4096,
    }  # fmt: skip
    config = {"model_type": "llama4", "text_config": LLAMA4_SCOUT_TEXT}
    for ratio in (0.5, 1 / 24, 1.0):
        read_hf_model({**config, "vision_config": {**vision, "pixel_shuffle_ratio": ratio}})
    for ratio in (1e-200, 1 / 25, 0, -0.5, 1.5, True, "0.5"):
        with pytest.raises(ArchitectureError, match=r"24 patches a side .*: 1 / 24 or more"):
            read_hf_model({**config, "vision_config": {**vision, "pixel_shuffle_ratio": ratio}})
    with pytest.raises(ArchitectureError, match="the image holds none"):
        read_hf_model({**config, "vision_config": {**vision, "patch_size": 400}})


def test_qwen_moe_shared_expert_and_phi2_biases():
    qwen = read_hf_model(
        {
            "model_type": "qwen2_moe",
            "hidden_size": 2048,
            "intermediate_size": 5632,
            "moe_intermediate_size": 1408,
            "shared_expert_intermediate_size": 5632,
            "num_experts": 60,
            "num_experts_per_tok": 4,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "num_attention_heads": 16,
            "num_key_value_heads": 16,
            "num_hidden_layers": 24,
            "vocab_size": 151936,
            "tie_word_embeddings": False,
        }
    ).architecture
    # Per layer: q/k/v/o 4 x 2,048^2 + q/k/v biases 3 x 2,048 = 16,783,360; 60 experts x 3 x 2,048 x 1,408 =
    # 519,045,120; shared expert 3 x 2,048 x 5,632 = 34,603,008 and its gate 2,048; router 122,880; norms
    # 4,096 -> 570,560,512 x 24; embeddings 2 x 311,164,928; final norm 2,048. Qwen1.5-MoE-A2.7B: "14.3B".
    assert qwen.params == 570_560_512 * 24 + 2 * 311_164_928 + 2_048 == 14_315_784_192
    assert qwen.params == get_model("Qwen/Qwen1.5-MoE-A2.7B").architecture.params
    phi2 = read_hf_model(
        {
            "model_type": "phi",
            "hidden_size": 2560,
            "intermediate_size": 10240,
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 32,
            "vocab_size": 51200,
            "partial_rotary_factor": 0.4,
            "hidden_act": "gelu_new",
            "tie_word_embeddings": False,
        }
    ).architecture
    # Per layer: biased q/k/v/dense 4 x (2,560^2 + 2,560), biased fc1/fc2 2 x 2,560 x 10,240 + 10,240 + 2,560,
    # one LayerNorm 5,120 = 78,671,360 x 32; embedding and biased LM head 2 x 131,072,000 + 51,200; final LN.
    assert phi2.params == 78_671_360 * 32 + 2 * 131_072_000 + 51_200 + 5_120 == 2_779_683_840


def test_fp8_checkpoint_keeps_its_ignore_list_in_bf16():
    model = read_hf_model(_fp8_405b())
    arch = model.architecture
    assert model.checkpoint.quantization == "fp8"
    # Only the MLPs of layers 1..124 are FP8: 124 x 3 x 16,384 x 53,248 weights.
    assert model.checkpoint.quantized_params == 124 * 3 * 16384 * 53248 == 324_538_466_304
    as_stored = weight_bytes(arch, "fp8", 2, 128, model.checkpoint.quantized_params)
    all_fp8 = weight_bytes(arch, "fp8", 2)
    assert as_stored == 324_538_466_304 + (arch.params - 324_538_466_304) * 2
    assert 0.15 < 1 - all_fp8 / as_stored < 0.18  # "counted as all-FP8 it is 17% low"


def test_compressed_tensors_regex_ignore_and_gptq_per_channel():
    base = {**LLAMA_405B, "num_hidden_layers": 4}
    quant = {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}, "targets": ["Linear"]}},
        "ignore": ["lm_head", "re:.*self_attn.*"],
    }
    model = read_hf_model({**base, "quantization_config": quant})
    assert model.checkpoint.quantization == "fp8"
    assert model.checkpoint.quantized_params == 4 * 3 * 16384 * 53248  # attention kept in 16-bit
    gptq = read_hf_model({**base, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1}})
    assert (gptq.checkpoint.quantization, gptq.checkpoint.group_size) == ("int4-gptq", 0)
    # One fp16 scale + 4-bit zero per output channel, over a row of 16,384 inputs: 4 + 20/16,384 bits.
    linear = gptq.architecture.linear_params()
    expected = linear * (4 + 20 / 16384) / 8 + (gptq.architecture.params - linear) * 2
    assert weight_bytes(gptq.architecture, "int4-gptq", 2, 0) == pytest.approx(expected, rel=1e-12)


def test_mxfp4_experts_sized_exactly():
    config = {
        "model_type": "gpt_oss",
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "num_hidden_layers": 24,
        "num_local_experts": 32,
        "num_experts_per_tok": 4,
        "experts_per_token": 4,
        "vocab_size": 201088,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 12,
        "tie_word_embeddings": False,
        "quantization_config": {
            "quant_method": "mxfp4",
            "modules_to_not_convert": [
                "model.layers.*.self_attn",
                "model.layers.*.mlp.router",
                "model.embed_tokens",
                "lm_head",
            ],
        },
    }
    model = read_hf_model(config)
    arch = model.architecture
    assert arch.params == get_model("openai/gpt-oss-20b").architecture.params
    experts = 24 * 32 * 3 * 2880 * 2880  # gate_up (2 x 2,880) and down (2,880) per expert
    assert model.checkpoint.quantized_params == experts == 19_110_297_600
    # MXFP4: 32 e2m1 values (16 bytes) + one e8m0 scale byte per block = 17/32 bytes per weight.
    bytes_ = weight_bytes(arch, "mxfp4", 2, 32, experts)
    assert bytes_ == experts * 17 / 32 + (arch.params - experts) * 2
    assert arch.sliding_layers == 2 and arch.attention_sinks and arch.router_bias


@pytest.mark.parametrize(
    "quant, word",
    [
        ({"quant_method": "hqq", "nbits": 4}, "hqq"),
        ({"quant_method": "aqlm"}, "aqlm"),
        ({"quant_method": "gptq", "bits": 3}, "3-bit gptq"),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "bitsandbytes 4-bit"),
        ({"bits": 4}, "no quant_method"),
    ],
)
def test_unknown_quantization_formats_are_refused_by_name(quant, word):
    with pytest.raises(ArchitectureError, match=word):
        read_hf_model({**LLAMA_405B, "quantization_config": quant})


BAD_VALUES = [0, -4, float("nan"), 2.5, [32], "32", 1e30, True, None]


@pytest.mark.parametrize("key", ["num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size"])
@pytest.mark.parametrize("value", BAD_VALUES)
def test_bad_dimensions_name_the_key(key, value):
    config = {**LLAMA_405B, key: value}
    if value is None:
        with pytest.raises(ArchitectureError, match="lacks"):
            read_hf_model(config)
        return
    with pytest.raises(ArchitectureError, match=key):
        read_hf_model(config)


def test_bad_nested_and_list_values_are_findings_not_tracebacks(tmp_path):
    cases = {
        "a.json": {**GEMMA3_27B, "text_config": {**GEMMA3_27B["text_config"], "num_hidden_layers": 1e30}},
        "b.json": {**GEMMA3_27B, "vision_config": {**GEMMA3_27B["vision_config"], "hidden_size": float("inf")}},
        "c.json": {**GEMMA2_9B, "layer_types": ["sliding_attention", 7]},
        "d.json": {**LLAMA_405B, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 0}},
        "e.json": {**LLAMA_405B, "quantization_config": {"quant_method": "fp8", "ignore": "lm_head"}},
        "f.json": {**LLAMA_405B, "quantization_config": {"quant_method": "fp8", "ignore": ["re:(a+)+$"]}},
        "g.json": {**LLAMA_405B, "tie_word_embeddings": "yes"},
        "h.json": {**LLAMA_405B, "text_config": [1, 2]},
        "i.json": {**LLAMA_405B, "architectures": ["LlamaForCausalLM\x1b[2J"]},  # not a class name
        "j.json": {**LLAMA_405B, "architectures": "LlamaForCausalLM"},  # not a list
    }
    for name, config in cases.items():
        (tmp_path / name).write_text(json.dumps(config))
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(
            f"version: 1\nname: t\nmodel: {{config: {name}}}\n"
            "serve: {context: 4096, concurrency: 1, hardware: {gpu: h100-sxm}}\n"
        )
        started = time.perf_counter()
        code, out, err = run_cli("lint", "--format", "json", str(spec))
        assert time.perf_counter() - started < 10, name  # never a hang
        findings = json.loads(out)["findings"]
        assert code == 1 and [f["code"] for f in findings] == ["GP021"], (name, out, err)
        assert "Traceback" not in out + err and "\x1b" not in out + err


def test_the_modelling_class_is_read_from_architectures_and_the_catalog_lists_each_models():
    # vLLM picks its model runner by config.json "architectures" (VllmConfig.use_v2_model_runner).
    assert read_hf_model(GEMMA2_9B).classes == ("Gemma2ForCausalLM",)
    assert read_hf_model({key: value for key, value in GEMMA2_9B.items() if key != "architectures"}).classes == ()
    for model in model_catalog().values():
        assert model.classes and all(name.isidentifier() for name in model.classes), model.id
    assert get_model("qwen3-8b").classes == ("Qwen3ForCausalLM",)
    assert get_model("qwen1.5-moe-a2.7b").classes == ("Qwen2MoeForCausalLM",)


def test_model_types_table_covers_the_documented_ones():
    assert {"gemma2", "gemma3_text", "llama4_text", "qwen2_moe", "phi", "gpt_oss", "deepseek_v3"} <= set(MODEL_TYPES)


@pytest.mark.parametrize(
    "given, catalog_id",
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("google/gemma-2-9b", "gemma-2-9b"),
        ("GOOGLE/GEMMA-2-9B-IT", "gemma-2-9b"),
        ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b"),
        ("LLAMA-3.1-70B", "llama-3.1-70b"),
        ("tiiuae/falcon-7b-chat", "falcon-7b"),  # an unlisted chat variant of a listed base
    ],
)
def test_hugging_face_ids_are_aliases(given, catalog_id):
    assert get_model(given).id == catalog_id


def test_unknown_hugging_face_id_suggests_listed_ones():
    with pytest.raises(UnknownNameError, match="unknown model"):
        get_model("google/gemma-7-9b")


def test_architecture_counts_are_memoised():
    arch = get_model("deepseek-v3").architecture
    first = arch.params
    assert "params" in vars(arch) and "_layer_params" in vars(arch)  # computed once, kept on the instance
    assert arch.params is first and arch.layer_params(5) == arch._layer_params[5]
    assert math.isclose(arch.params, 671_026_419_200)


def test_catalog_checkpoints_are_served_as_published(tmp_path):
    # gpt-oss is published with MXFP4 experts (attention, router, embeddings in bf16): 24 x 32 x 3 x 2,880^2
    # expert weights at 17/32 bytes, the other 1,804,459,584 parameters at 2 bytes, plus the rotary cache
    # (131,072 positions x 64 x 2 bytes), plus vLLM's padding of the experts on an H100 (to 2,944 x 3,072:
    # 1,195,264 B more per expert, 24 x 32 of them; tests/test_vllm_memory.py).
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "version: 1\nname: t\nmodel: {id: openai/gpt-oss-20b}\n"
        "serve: {context: 8192, concurrency: 1, hardware: {gpu: h100-sxm}}\n"
    )
    code, out, _ = run_cli("estimate", "--format", "json", str(spec))
    serve = json.loads(out)["serve"]
    experts = 19_110_297_600
    other = get_model("gpt-oss-20b").architecture.params - experts
    assert code == 0 and other == 1_804_459_584
    padding = 24 * 32 * 1_195_264
    assert serve["breakdown"]["weights"] == math.ceil(experts * 17 / 32 + other * 2 + 131_072 * 64 * 2 + padding)
    assert "mxfp4" in serve["assumptions"]
    assert get_model("deepseek-ai/DeepSeek-V3").quantization == "fp8"


def test_a_qwen2_moe_shared_expert_of_width_zero_is_none_not_a_bad_dimension():
    # Qwen2-MoE builds its shared expert at shared_expert_intermediate_size: 0 is no shared expert (it was
    # refused as GP021). Against width 64 on 2 layers of hidden 64, the shared expert's gated MLP is
    # 3 x 64 x 64 per layer and its sigmoid gate 64 weights: 2 x (12,288 + 64) = 24,704 parameters.
    base = {
        "model_type": "qwen2_moe",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "vocab_size": 100,
    }
    none = from_hf_config({**base, "shared_expert_intermediate_size": 0})
    one = from_hf_config({**base, "shared_expert_intermediate_size": 64})
    assert (none.shared_experts, none.shared_expert_gate) == (0, False)
    assert one.shared_experts == 1
    assert one.params - none.params == 24_704


_MIXTRAL = {
    "model_type": "mixtral",
    "num_hidden_layers": 4,
    "hidden_size": 512,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "intermediate_size": 1024,
    "vocab_size": 1000,
}


@pytest.mark.parametrize(
    ("config", "words"),
    [
        # the consistency checks name the keys the file states, not gpuplan's field names
        ({**_MIXTRAL, "num_local_experts": 4, "num_experts_per_tok": 8}, "num_experts_per_tok 8 exceeds config.json "),
        ({**_MIXTRAL, "num_local_experts": 4}, "which needs config.json num_experts_per_tok"),
        (
            {
                **_MIXTRAL,
                "model_type": "qwen3_moe",
                "num_experts": 8,
                "num_experts_per_tok": 2,
                "mlp_only_layers": [0, 1, 2, 3],
            },
            "config.json mlp_only_layers' count 4 leaves no mixture-of-experts layer of 4",
        ),
        # a model type whose every MoE layer routes (MixtralSparseMoeBlock, GptOssMLP, Llama4TextMoe,
        # DeepseekV3MoE) with no expert count is no model: it was sized as a dense one
        (dict(_MIXTRAL), "num_local_experts: null, where every mixture-of-experts layer of Mixtral routes"),
        ({**_MIXTRAL, "num_local_experts": 0}, "num_local_experts: 0, where"),
        ({**_MIXTRAL, "model_type": "gpt_oss", "num_local_experts": 0}, "of gpt-oss routes"),
        ({**_MIXTRAL, "model_type": "llama4_text", "num_experts_per_tok": 1}, "of Llama 4 routes"),
        ({**_MIXTRAL, "model_type": "deepseek_v3", "n_routed_experts": 0}, "n_routed_experts: 0, where"),
    ],
)
def test_moe_key_errors_name_the_config_json_keys(config, words):
    with pytest.raises(ArchitectureError) as error:
        read_hf_model(config)
    assert words in str(error.value)


def test_qwen_moe_with_no_experts_is_dense_as_transformers_builds_it():
    # Qwen3MoeDecoderLayer uses its sparse block only where config.num_experts > 0: with none, every layer has
    # the dense MLP of intermediate_size, so the model counts as a dense one (4 layers of 3 x 512 x 1,024).
    dense = read_hf_model({**_MIXTRAL, "model_type": "qwen3_moe", "num_experts": 0}).architecture
    llama = read_hf_model({**_MIXTRAL, "model_type": "qwen3"}).architecture
    assert not dense.is_moe and dense.params == llama.params


def test_an_explicit_architecture_error_points_at_the_field_it_names(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "version: 1\nname: t\nmodel:\n  architecture:\n    layers: 2\n    hidden: 64\n    heads: 4\n"
        "    intermediate: 128\n    vocab: 100\n    experts: 4\n    experts_per_token: 8\n"
        "serve: {context: 1024, concurrency: 1, hardware: {gpu: l4}}\n"
    )
    code, out, _ = run_cli("lint", "--format", "json", str(spec))
    (finding,) = json.loads(out)["findings"]
    assert code == 1 and finding["code"] == "GP021" and finding["line"] == 11  # experts_per_token's line
    assert finding["message"] == "model.architecture: experts_per_token 8 exceeds experts 4"


# Qwen/Qwen3-30B-A3B config.json as published (the keys gpuplan reads; rope and token ids left out).
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "decoder_sparse_step": 1,
    "head_dim": 128,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "max_position_embeddings": 40960,
    "mlp_only_layers": [],
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 768,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
# Qwen/Qwen3-235B-A22B and Qwen/Qwen3-32B config.json: the keys that differ from the above.
QWEN3_235B_A22B = {
    **QWEN3_30B_A3B,
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "moe_intermediate_size": 1536,
    "num_attention_heads": 64,
    "num_hidden_layers": 94,
}
QWEN3_32B = {
    **{key: value for key, value in QWEN3_30B_A3B.items() if "expert" not in key and key != "decoder_sparse_step"},
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 5120,
    "intermediate_size": 25600,
    "num_attention_heads": 64,
    "num_hidden_layers": 64,
    "num_key_value_heads": 8,
}
del QWEN3_32B["mlp_only_layers"]


@pytest.mark.parametrize(
    "catalog_id, config",
    [("qwen3-32b", QWEN3_32B), ("qwen3-30b-a3b", QWEN3_30B_A3B), ("qwen3-235b-a22b", QWEN3_235B_A22B)],
)
def test_qwen3_catalog_entries_are_their_published_config(catalog_id, config):
    # The catalog's entry and the model's config.json (model.config) describe one architecture.
    assert get_model(catalog_id).architecture == from_hf_config(config)
    assert get_model(catalog_id).classes == tuple(config["architectures"])


def test_qwen3_30b_a3b_parameters_by_hand():
    # Per layer: attention q 2048x4096 + k, v 2048x512 each + o 4096x2048 = 18,874,368, q/k norms 2 x 128;
    # router 2048x128 = 262,144; 128 experts x 3 x 2048 x 768 = 603,979,776; two RMSNorms 2 x 2048:
    # 623,120,640 a layer, x 48 = 29,909,790,720; untied embeddings and LM head 2 x 151,936 x 2048 =
    # 622,329,856; final norm 2048: 30,532,122,624 (the model card's "30.5B").
    assert get_model("qwen3-30b-a3b").architecture.params == 30_532_122_624


def _lint_config(tmp_path, config: dict) -> list[dict]:
    """The findings of linting a serving spec whose model is ``config`` (a config.json beside it)."""
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "version: 1\nname: t\nmodel: {config: config.json}\n"
        "serve: {context: 4096, concurrency: 1, hardware: {gpu: h100-sxm, count: 8, tensor_parallel: 8}}\n"
    )
    _, out, _ = run_cli("lint", "--format", "json", str(spec))
    findings: list[dict] = json.loads(out)["findings"]
    return findings


# deepseek-ai/DeepSeek-V3 config.json as published, less its MLA keys (q_lora_rank 1536, kv_lora_rank 512,
# qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128: DeepseekV3Config's defaults) and rope keys.
DEEPSEEK_V3_WITHOUT_MLA = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "first_k_dense_replace": 3,
    "intermediate_size": 18432,
    "vocab_size": 129280,
    "tie_word_embeddings": False,
}


@pytest.mark.parametrize("model_type", ["deepseek_v2", "deepseek_v3", "kimi_k2"])
def test_deepseek_without_mla_keys_takes_the_config_class_defaults_not_full_attention(model_type):
    model = read_hf_model({**DEEPSEEK_V3_WITHOUT_MLA, "model_type": model_type})
    arch = model.architecture
    assert (arch.q_lora_rank, arch.kv_lora_rank, arch.qk_nope_head_dim, arch.qk_rope_head_dim, arch.v_head_dim) == (
        1536, 512, 128, 64, 128,
    )  # fmt: skip
    # MLA caches the latent and the RoPE key: (512 + 64) x 61 layers x 2 bytes = 70,272 B a token. Read as full
    # attention it was 2 x 128 heads x 56 (7,168 / 128) x 61 x 2 = 1,748,992 B, 25x too much.
    assert arch.kv_bytes_per_token(2) == 70_272
    assert any("kv_lora_rank absent: 512" in note for note in model.notes)
    if model_type == "deepseek_v3":  # the catalog's DeepSeek-V3, whose config states the keys
        assert arch.params == get_model("deepseek-v3").architecture.params == 671_026_419_200


@pytest.mark.parametrize(
    "extra, key",
    [
        ({"kv_lora_rank": None}, "kv_lora_rank: null"),
        ({"kv_lora_rank": 0}, "kv_lora_rank: 0"),
        ({"qk_rope_head_dim": None}, "qk_rope_head_dim: null"),
        ({"v_head_dim": None}, "v_head_dim: null"),
    ],
)
def test_deepseek_with_a_null_mla_rank_is_gp021_not_full_attention(tmp_path, extra, key):
    # DeepseekV2Attention always builds its latent projections (kv_a_proj_with_mqa: kv_lora_rank + qk_rope_head_dim
    # outputs): a null rank builds no model. It was read as multi-head attention.
    config = {**DEEPSEEK_V3_WITHOUT_MLA, **extra}
    with pytest.raises(ArchitectureError, match=f"{key}, where every attention layer of DeepSeek-V3"):
        read_hf_model(config)
    [finding] = _lint_config(tmp_path, config)
    assert finding["code"] == "GP021" and finding["line"] == 3 and key in finding["message"]
    # q_lora_rank null is DeepSeek-V2-Lite's q_proj without a low-rank factor: a model, read as such.
    assert read_hf_model({**DEEPSEEK_V3_WITHOUT_MLA, "q_lora_rank": None}).architecture.q_lora_rank == 0


# CohereForAI/c4ai-command-r-v01 config.json as published (the keys gpuplan reads): no tie_word_embeddings key.
COMMAND_R = {
    "architectures": ["CohereForCausalLM"],
    "model_type": "cohere",
    "hidden_size": 8192,
    "num_hidden_layers": 40,
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "intermediate_size": 22528,
    "vocab_size": 256000,
    "logit_scale": 0.0625,
    "use_qk_norm": False,
    "max_position_embeddings": 8192,
}


def test_cohere_ties_its_embeddings_and_has_one_norm_a_layer():
    # CohereConfig ties by default; CohereDecoderLayer has one input_layernorm (weight only) feeding attention and
    # the MLP in parallel. Per layer q/k/v/o 4 x 8,192^2 = 268,435,456, MLP 3 x 8,192 x 22,528 = 553,648,128, one
    # norm 8,192: 822,091,776 x 40 = 32,883,671,040; embedding 256,000 x 8,192 = 2,097,152,000, tied; final norm
    # 8,192. It was read untied with two norms a layer: 2,097,152,000 + 40 x 8,192 more.
    model = read_hf_model(COMMAND_R)
    arch = model.architecture
    assert arch.tie_embeddings and arch.norms_per_layer == 1
    assert arch.params == 32_883_671_040 + 2_097_152_000 + 8_192 == 34_980_831_232
    assert any("tie_word_embeddings absent" in note for note in model.notes)
    untied = read_hf_model({**COMMAND_R, "tie_word_embeddings": False}).architecture
    assert untied.params - arch.params == 2_097_152_000
    plus = read_hf_model({**COMMAND_R, "use_qk_norm": True})  # Command-R+: per-head norms, not counted, said so
    assert plus.architecture == arch and any("use_qk_norm" in note for note in plus.notes)


@pytest.mark.parametrize("count", [10, 41, 43])
def test_layer_types_of_another_length_than_the_layers_is_gp021(tmp_path, count):
    # transformers' layer_type_validation refuses a layer_types list whose length is not num_hidden_layers. Gemma-2
    # 9B's 42 layers alternate sliding and full; a list of 10 was read as that period and passed.
    kinds = ["sliding_attention", "full_attention"] * 22
    config = {**GEMMA2_9B, "layer_types": kinds[:count]}
    words = f"layer_types lists {count} layers, where num_hidden_layers is 42"
    with pytest.raises(ArchitectureError, match=words):
        read_hf_model(config)
    [finding] = _lint_config(tmp_path, config)
    assert finding["code"] == "GP021" and finding["line"] == 3 and words in finding["message"]
    whole = read_hf_model({**GEMMA2_9B, "layer_types": kinds[:42]}).architecture
    assert whole == read_hf_model(GEMMA2_9B).architecture  # every other layer slides, as the list says


# Qwen/Qwen2.5-VL-7B-Instruct config.json as published (the keys gpuplan reads): the text model's keys at the top
# level, the vision tower's depth and width spelled depth and hidden_size.
QWEN25_VL_7B = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "model_type": "qwen2_5_vl",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 128000,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "sliding_window": 32768,
    "use_sliding_window": False,
    "tie_word_embeddings": False,
    "vision_config": {
        "depth": 32, "hidden_act": "silu", "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
        "in_chans": 3, "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
        "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2,
        "temporal_patch_size": 2,
    },
}  # fmt: skip
# Qwen/Qwen2-VL-7B-Instruct: the same text model; its vision_config spells the width embed_dim and the MLP mlp_ratio.
QWEN2_VL_7B = {
    **QWEN25_VL_7B,
    "architectures": ["Qwen2VLForConditionalGeneration"],
    "model_type": "qwen2_vl",
    "max_position_embeddings": 32768,
    "vision_config": {
        "depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3, "hidden_size": 3584,
        "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14, "temporal_patch_size": 2,
    },
}  # fmt: skip


def test_qwen_vl_reads_its_vision_tower_and_a_qwen2_text_model():
    # Text (Qwen2-7B): per layer q and o 2 x 3,584^2 + k, v 2 x 3,584 x 512 = 29,360,128, q/k/v biases 3,584 + 2 x
    # 512 = 4,608, MLP 3 x 3,584 x 18,944 = 203,685,888, two norms 7,168: 233,057,792 x 28 = 6,525,618,176;
    # untied embeddings 2 x 152,064 x 3,584 = 1,089,994,752; final norm 3,584: 7,615,616,512.
    # Qwen2.5-VL's tower: per block qkv + proj 4 x 1,280^2 + 4 x 1,280 = 6,558,720, gated MLP with biases 3 x 1,280 x
    # 3,420 + 2 x 3,420 + 1,280 = 13,140,920, two RMSNorms 2,560: 19,702,200 x 32 = 630,470,400; patch Conv3d
    # 3 x 2 x 14^2 x 1,280 = 1,505,280; merger RMSNorm 1,280 + 5,120^2 + 5,120 + 5,120 x 3,584 + 3,584 = 44,574,464.
    # Total 8,292,166,656: Qwen2.5-VL-7B-Instruct's published parameter count.
    model = read_hf_model(QWEN25_VL_7B)
    arch = model.architecture
    assert arch.text_params == 6_525_618_176 + 1_089_994_752 + 3_584 == 7_615_616_512
    assert arch.vision_params == 630_470_400 + 1_505_280 + 44_574_464 == 676_550_144
    assert arch.params == 8_292_166_656
    assert arch.attention_bias and not arch.sliding_window and model.model_type == "qwen2_5_vl"
    # Qwen2-VL's tower: per block qkv + proj 6,558,720, two-matrix MLP with biases 2 x 1,280 x 5,120 + 5,120 +
    # 1,280 = 13,113,600, two LayerNorms 4 x 1,280: 19,677,440 x 32 = 629,678,080; patch Conv3d 1,505,280; merger
    # LayerNorm 2,560 + 26,219,520 + 18,353,664 = 44,575,744.
    qwen2_vl = read_hf_model(QWEN2_VL_7B).architecture
    assert qwen2_vl.vision_params == 629_678_080 + 1_505_280 + 44_575_744 == 675_759_104
    assert qwen2_vl.text_params == arch.text_params
    # Saved by a newer transformers, the text keys sit in text_config (model_type qwen2_5_vl_text): the same model.
    text = {key: value for key, value in QWEN25_VL_7B.items() if key not in ("architectures", "vision_config")}
    nested = {
        "model_type": "qwen2_5_vl",
        "vision_config": QWEN25_VL_7B["vision_config"],
        "text_config": {**text, "model_type": "qwen2_5_vl_text"},
    }
    assert read_hf_model(nested).architecture == arch


@pytest.mark.parametrize(
    "config, key, value",
    [
        (QWEN2_VL_7B, "mlp_ratio", "4"),
        (QWEN2_VL_7B, "mlp_ratio", 0),
        (QWEN2_VL_7B, "mlp_ratio", True),
        (QWEN2_VL_7B, "embed_dim", 1e30),
        (QWEN25_VL_7B, "depth", 0),
        (QWEN25_VL_7B, "intermediate_size", -1),
        (QWEN25_VL_7B, "out_hidden_size", [3584]),
    ],
)
def test_bad_qwen_vl_vision_values_name_the_key(config, key, value):
    with pytest.raises(ArchitectureError, match=f"vision_config.{key} must be"):
        read_hf_model({**config, "vision_config": {**config["vision_config"], key: value}})
