"""Hybrid models: Gated DeltaNet (Qwen3-Next) and Mamba-2 (Nemotron-H) layers beside attention.

Every figure is derived by hand in the comments, from the two models' published config.json and the code
that sizes them: parameters from transformers' modeling_qwen3_next.py (Qwen3NextGatedDeltaNet,
Qwen3NextAttention, Qwen3NextSparseMoeBlock) and modeling_nemotron_h.py (NemotronHMamba2Mixer); the state
one sequence keeps from vLLM's MambaStateShapeCalculator (vllm/model_executor/layers/mamba/mamba_utils.py)
and its page from HybridAttentionMambaModelConfig (vllm/model_executor/models/config.py, v0.19, no prefix
caching); the KV-cache groups from _get_kv_cache_groups_uniform_page_size (vllm/v1/core/kv_cache_utils.py).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import make_spec, run_cli
from training_jobs import training_setup

from gpuplan.architecture import Architecture, ArchitectureError, make_architecture
from gpuplan.catalog import get_model
from gpuplan.estimate.serving import (
    BLOCK_TOKENS,
    KvLayout,
    ServingMemory,
    kv_bytes_per_sequence,
    kv_layout,
    kv_pages,
    max_concurrency,
)
from gpuplan.estimate.training import trainable_params
from gpuplan.estimate.training_activations import (
    largest_layer_activation_bytes_per_token,
    layer_activation_bytes_per_token,
)
from gpuplan.hf_config import read_hf_model
from gpuplan.plan.space import tensor_parallel_problem
from gpuplan.units import GIB

# Qwen/Qwen3-Next-80B-A3B-Instruct config.json (the keys gpuplan reads, as published).
QWEN3_NEXT = {
    "architectures": ["Qwen3NextForCausalLM"],
    "decoder_sparse_step": 1,
    "full_attention_interval": 4,
    "head_dim": 256,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 5120,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_value_head_dim": 128,
    "max_position_embeddings": 262144,
    "mlp_only_layers": [],
    "model_type": "qwen3_next",
    "moe_intermediate_size": 512,
    "norm_topk_prob": True,
    "num_attention_heads": 16,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "num_hidden_layers": 48,
    "num_key_value_heads": 2,
    "partial_rotary_factor": 0.25,
    "rope_scaling": None,
    "rope_theta": 10000000,
    "shared_expert_intermediate_size": 512,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_sliding_window": False,
    "vocab_size": 151936,
}
# nvidia/Nemotron-H-8B-Base-8K config.json (the keys gpuplan reads, as published).
NEMOTRON_H_8B = {
    "architectures": ["NemotronHForCausalLM"],
    "attention_bias": False,
    "attention_head_dim": 128,
    "chunk_size": 128,
    "conv_kernel": 4,
    "expand": 2,
    "hidden_act": "relu2",
    "hidden_size": 4096,
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
    "intermediate_size": 21504,
    "mamba_head_dim": 64,
    "mamba_num_heads": 128,
    "mamba_proj_bias": False,
    "max_position_embeddings": 8192,
    "mlp_bias": False,
    "model_type": "nemotron_h",
    "n_groups": 8,
    "num_attention_heads": 32,
    "num_hidden_layers": 52,
    "num_key_value_heads": 8,
    "ssm_state_size": 128,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_bias": False,
    "use_conv_bias": True,
    "vocab_size": 131072,
}
# nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config.json (the keys gpuplan reads): 23 Mamba-2 (M), 23 mixture-of-experts
# (E) and 6 attention (*) layers; NVIDIA gives 31.6B parameters, 3.6B active with the embeddings.
NEMOTRON_3_NANO = {
    "architectures": ["NemotronHForCausalLM"],
    "attention_bias": False,
    "chunk_size": 128,
    "conv_kernel": 4,
    "expand": 2,
    "head_dim": 128,
    "hidden_size": 2688,
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    "intermediate_size": 1856,
    "mamba_head_dim": 64,
    "mamba_num_heads": 64,
    "mamba_proj_bias": False,
    "max_position_embeddings": 262144,
    "mlp_bias": False,
    "mlp_hidden_act": "relu2",
    "model_type": "nemotron_h",
    "moe_intermediate_size": 1856,
    "moe_shared_expert_intermediate_size": 3712,
    "n_group": 1,
    "n_groups": 8,
    "n_routed_experts": 128,
    "n_shared_experts": 1,
    "num_attention_heads": 32,
    "num_experts_per_tok": 6,
    "num_hidden_layers": 52,
    "num_key_value_heads": 2,
    "ssm_state_size": 128,
    "tie_word_embeddings": False,
    "topk_group": 1,
    "use_bias": False,
    "use_conv_bias": True,
    "vocab_size": 131072,
}
QWEN = get_model("qwen3-next-80b-a3b").architecture
NEMOTRON = get_model("nemotron-h-8b").architecture


def test_config_json_reads_as_the_catalog_entry():
    # The catalog entries are these config.json files, as gpuplan reads them: the same architecture.
    assert read_hf_model(QWEN3_NEXT).architecture == QWEN
    assert read_hf_model(NEMOTRON_3_NANO).architecture == get_model("nemotron-3-nano-30b-a3b").architecture
    nemotron = read_hf_model(NEMOTRON_H_8B)
    assert nemotron.architecture == NEMOTRON
    # 4 x M-: the pattern repeats no shorter prefix of it a whole number of times, so it is kept whole.
    assert NEMOTRON.layer_pattern == NEMOTRON_H_8B["hybrid_override_pattern"].replace("*", "A")
    assert QWEN.layer_pattern == "LLLA"  # full_attention_interval 4: layer i is full attention when (i + 1) % 4 == 0
    assert (QWEN.attention_layers, QWEN.state_layers, QWEN.mlp_layers) == (12, 36, 48)
    assert (NEMOTRON.attention_layers, NEMOTRON.state_layers, NEMOTRON.mlp_layers) == (4, 24, 24)
    # No mamba_ssm_cache_dtype in the file: NemotronHConfig's default, float32, which vLLM keeps the state in.
    assert NEMOTRON.state_fp32 and any("mamba_ssm_cache_dtype absent" in note for note in nemotron.notes)


@pytest.mark.parametrize(
    "keys",
    [("mamba_num_heads",), ("mamba_head_dim",), ("ssm_state_size",), ("n_groups",), ("conv_kernel",)],
)
def test_a_mamba_dimension_stated_null_is_named_not_an_internal_error(keys):
    # Absent, each size of the Mamba-2 layers takes NemotronHConfig's default (a note says so); stated null it is
    # no size, and it was a StopIteration reported as an internal error (GP010). Its legacy spelling alone reads
    # as its name does.
    (key,) = keys
    legacy = {"n_groups": "mamba_n_groups", "conv_kernel": "mamba_d_conv"}.get(key)
    with pytest.raises(ArchitectureError, match=f"config.json {key}: null, where the Mamba-2"):
        read_hf_model({**NEMOTRON_H_8B, key: None})
    if legacy:
        with pytest.raises(ArchitectureError, match=f"config.json {key} and {legacy}: null, where the Mamba-2"):
            read_hf_model({**NEMOTRON_H_8B, key: None, legacy: None})
    absent = read_hf_model({k: v for k, v in NEMOTRON_H_8B.items() if k != key})
    assert f"{key} absent: {NEMOTRON_H_8B[key]} (config-class default)" in absent.notes
    assert absent.architecture == NEMOTRON
    if legacy:
        renamed = {**NEMOTRON_H_8B, key: None, legacy: NEMOTRON_H_8B[key]}
        assert read_hf_model(renamed).architecture == NEMOTRON


def test_nemotron_h_mixture_of_experts_layers_are_read():
    # Nemotron 3 Nano's E layers: NemotronHMoE, 128 routed relu2 experts (up and down, 2 x 2,688 x 1,856 =
    # 9,977,856 each), one shared expert of 3,712 (2 x 2,688 x 3,712 = 19,955,712), a router (128 x 2,688 =
    # 344,064) with its score-correction bias (128) and one RMSNorm (2,688): 1,297,468,160 a layer, x 23.
    # M layers: in_proj 2,688 x (2 x 4,096 + 2 x 8 x 128 + 64) = 27,697,152, conv1d (4,096 + 2,048) x 4 + 6,144 =
    # 30,720, dt_bias, A_log and D 3 x 64, the gated norm 4,096, out_proj 4,096 x 2,688 = 11,010,048, the RMSNorm:
    # 38,744,896, x 23. * layers: q and o 2 x 2,688 x 4,096 = 22,020,096, k and v 2 x 2,688 x 256 = 1,376,256, the
    # RMSNorm: 23,399,040, x 6. Untied embeddings 2 x 131,072 x 2,688 = 704,643,072, the final norm 2,688.
    # Total 31,577,940,288: NVIDIA's 31.6B. Active: 6 of 128 experts, 3,580,076,352 (NVIDIA: 3.6B with embeddings).
    arch = read_hf_model(NEMOTRON_3_NANO).architecture
    assert (arch.attention_layers, arch.state_layers, arch.mlp_layers, arch.moe_layers) == (6, 23, 23, 23)
    assert (arch.experts, arch.experts_per_token, arch.expert_width, arch.shared_experts, arch.shared_width) == (
        128,
        6,
        1856,
        1,
        3712,
    )
    assert arch.params == 23 * 1_297_468_160 + 23 * 38_744_896 + 6 * 23_399_040 + 704_643_072 + 2_688
    assert arch.params == 31_577_940_288
    unused = 23 * (128 - 6) * 9_977_856
    assert arch.active_params == arch.params - unused == 3_580_076_352
    # A pattern mixing dense MLP (-) and MoE (E) layers, a latent MoE, or E layers without experts are refused.
    for config, refusal in (
        ({**NEMOTRON_3_NANO, "hybrid_override_pattern": "M-M*" + "EMEM" * 12}, "layer pattern mixes dense MLP"),
        ({**NEMOTRON_3_NANO, "moe_latent_size": 1024}, "latent mixture of experts"),
        ({k: v for k, v in NEMOTRON_3_NANO.items() if k != "n_routed_experts"}, "lacks n_routed_experts"),
        # absent, these took the dense MLP's width (1,856 here; 5,000 gave 81.3B parameters) and no shared expert
        ({k: v for k, v in NEMOTRON_3_NANO.items() if k != "moe_intermediate_size"}, "lacks moe_intermediate_size"),
        ({k: v for k, v in NEMOTRON_3_NANO.items() if k != "n_shared_experts"}, "lacks n_shared_experts"),
        (
            {k: v for k, v in NEMOTRON_3_NANO.items() if k != "moe_shared_expert_intermediate_size"},
            "lacks moe_shared_expert_intermediate_size",
        ),
    ):
        with pytest.raises(ArchitectureError, match=refusal):
            read_hf_model(config)


def test_nemotron_h_layer_lists_that_disagree_are_refused():
    # transformers v4's NemotronHConfig reads hybrid_override_pattern, v5's layers_block_type: a file stating both
    # is read alike only when they agree (gpuplan read the pattern and left the list unread).
    pattern = NEMOTRON_H_8B["hybrid_override_pattern"]
    kinds = {"M": "mamba", "*": "attention", "-": "mlp"}
    agreeing = [kinds[letter] for letter in pattern]
    assert read_hf_model({**NEMOTRON_H_8B, "layers_block_type": agreeing}).architecture == NEMOTRON
    swapped = ["attention", *agreeing[1:]]  # the first layer, Mamba-2 in the pattern, listed as attention
    assert pattern[0] == "M"
    with pytest.raises(ArchitectureError, match="hybrid_override_pattern and layers_block_type state different") as e:
        read_hf_model({**NEMOTRON_H_8B, "layers_block_type": swapped})
    assert f'"{pattern[:10]}' in str(e.value) and f'against "*{pattern[1:10]}' in str(e.value)  # the list, as letters


def test_nemotron_3_nano_checkpoints_read_their_format_and_16_bit_modules():
    # NVIDIA publishes Nemotron 3 Nano as ModelOpt checkpoints: quant_algo names the format (ModelOpt was read as
    # FP8 whatever it named: an NVFP4 checkpoint came out at the fp8 size). Its E layers' modules are
    # backbone.layers.N.mixer.experts / .shared_experts: kept 16-bit by modules_to_not_convert, they were counted
    # quantized (the names listed only mlp.* and feed_forward.*).
    def checkpoint(quantization_config: dict) -> tuple[str, int, int | None]:
        read = read_hf_model({**NEMOTRON_3_NANO, "quantization_config": quantization_config})
        return read.checkpoint.quantization, read.checkpoint.group_size, read.checkpoint.quantized_params

    fp8 = checkpoint({"quant_method": "modelopt", "quant_algo": "FP8"})
    assert fp8[:2] == ("fp8", 128) and checkpoint({"quant_method": "fp8"}) == fp8
    assert checkpoint({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16})[:2] == ("nvfp4", 16)
    with pytest.raises(ArchitectureError, match="quant_algo 'W4A16_AWQ': a ModelOpt format gpuplan cannot size"):
        checkpoint({"quant_method": "modelopt", "quant_algo": "W4A16_AWQ"})
    # Experts and shared experts kept in 16-bit: of the 23 E layers' 29.8B, 23 x (1,277,165,568 + 19,955,712) stay
    # out of the quantized count.
    kept = checkpoint({"quant_method": "fp8", "modules_to_not_convert": ["mixer.experts", "mixer.shared_experts"]})
    every = checkpoint({"quant_method": "fp8", "modules_to_not_convert": ["lm_head"]})  # no decoder linear kept
    assert kept[2] is not None and every[2] is not None
    assert every[2] - kept[2] == 23 * (1_277_165_568 + 19_955_712)


def test_a_nemotron_3_nano_spec_estimates_serving_and_fine_tuning(tmp_path):
    # From its config.json: served on one H100 (bf16 weights 58.8 GiB) and LoRA fine-tuned on one H200 (every
    # expert's adapters, with their gradients and AdamW states, on top of the weights), each estimated without an
    # internal error, the MoE hybrid's KV cache holding attention layers' K and V and the Mamba state.
    (tmp_path / "config.json").write_text(json.dumps(NEMOTRON_3_NANO))
    for job in (
        "serve: {context: 8192, concurrency: 8, hardware: {gpu: h100-sxm}}",
        "finetune: {method: lora, lora: {rank: 16}, seq_len: 2048, hardware: {gpu: h200-sxm}}",
    ):
        spec = tmp_path / "spec.yaml"
        spec.write_text(f"version: 1\nname: nano\nmodel: {{config: config.json}}\n{job}\n")
        code, out, err = run_cli("estimate", str(spec))
        assert code == 0, out + err  # no error finding: the serving fits, the fine-tune is at risk (a warning)
        assert "internal error" not in out + err and "GP010" not in out, out + err
        assert "31,577,940,288 parameters" in out, out


def test_parameters_against_the_published_totals():
    # Qwen3-Next-80B-A3B (transformers modeling_qwen3_next.py):
    #   embedding + untied LM head 2 x 151,936 x 2,048 = 622,329,856; final norm 2,048.
    #   Every layer (48): two RMSNorms 2 x 2,048 = 4,096 and Qwen3NextSparseMoeBlock: experts
    #     512 x 3 x 2,048 x 512 = 1,610,612,736, shared expert 3 x 2,048 x 512 = 3,145,728, router
    #     512 x 2,048 = 1,048,576, shared-expert gate 2,048: 1,614,809,088 (+ 4,096 = 1,614,813,184).
    #   12 Qwen3NextAttention layers: q_proj 2,048 x (16 x 256 x 2, the output gate) = 16,777,216, k_proj and
    #     v_proj 2,048 x 2 x 256 = 1,048,576 each, o_proj 4,096 x 2,048 = 8,388,608, q/k norms 2 x 256 = 512:
    #     27,263,488.
    #   36 Qwen3NextGatedDeltaNet layers: in_proj_qkvz 2,048 x (2 x 2,048 + 2 x 4,096) = 25,165,824,
    #     in_proj_ba 2,048 x 2 x 32 = 131,072, conv1d (no bias) (2 x 2,048 + 4,096) x 4 = 32,768, dt_bias and
    #     A_log 2 x 32 = 64, gated norm 128, out_proj 4,096 x 2,048 = 8,388,608: 33,718,464.
    #   622,329,856 + 2,048 + 48 x 1,614,813,184 + 12 x 27,263,488 + 36 x 33,718,464 = 79,674,391,296.
    assert QWEN.params == 79_674_391_296
    # Published: "80B total parameters" (Qwen3-Next model card; transformers docs model_doc/qwen3_next.md),
    # the multi-token-prediction module apart: within 1% (0.41% under).
    assert abs(QWEN.params / 80e9 - 1) < 0.01
    # Nemotron-H-8B (transformers modeling_nemotron_h.py; one RMSNorm of 4,096 per block):
    #   embedding + untied LM head 2 x 131,072 x 4,096 = 1,073,741,824; final norm 4,096.
    #   24 NemotronHMamba2Mixer blocks (d_inner 128 x 64 = 8,192): in_proj 4,096 x (2 x 8,192 + 2 x 8 x 128
    #     + 128) = 4,096 x 18,560 = 76,021,760; conv1d (8,192 + 2 x 8 x 128) x 4 + 10,240 bias = 51,200;
    #     dt_bias, A_log, D 3 x 128 = 384; gated norm 8,192; out_proj 8,192 x 4,096 = 33,554,432; + norm:
    #     109,640,064.
    #   4 attention blocks: q and o 4,096 x 4,096 = 16,777,216 each, k and v 4,096 x 8 x 128 = 4,194,304 each,
    #     + norm: 41,947,136. 24 MLP blocks (relu2, up and down): 2 x 4,096 x 21,504 = 176,160,768 + norm =
    #     176,164,864.
    #   1,073,741,824 + 4,096 + 24 x 109,640,064 + 4 x 41,947,136 + 24 x 176,164,864 = 8,100,852,736.
    assert NEMOTRON.params == 8_100_852_736
    # Published: "8B" (Nemotron-H-8B-Base-8K model card): within 2% (1.26% over).
    assert abs(NEMOTRON.params / 8e9 - 1) < 0.02
    # Active: 10 of 512 experts, 48 MoE layers: 79,674,391,296 - 48 x 502 x 3 x 2,048 x 512 = 3,874,929,408.
    assert QWEN.active_params == 3_874_929_408


def test_state_one_sequence_keeps_hand_derived():
    # Gated DeltaNet (gated_delta_net_state_shape): conv (4 - 1) x (2 x 16 x 128 + 32 x 128) = 3 x 8,192 = 24,576;
    # recurrent 32 value heads x 128 x 128 = 524,288; both bf16: 2 x 548,864 = 1,097,728 B per layer.
    assert QWEN.state_elements(1) == (24_576, 524_288)
    assert QWEN.state_bytes_per_layer(2, 1) == 1_097_728
    # TP 4: conv 3 x 8,192 / 4 = 6,144; recurrent 8 x 128 x 128 = 131,072; 2 x 137,216 = 274,432 B.
    assert QWEN.state_elements(4) == (6_144, 131_072)
    assert QWEN.state_bytes_per_layer(2, 4) == 274_432
    # Mamba-2 (mamba2_state_shape): conv 3 x (128 x 64 + 2 x 8 x 128) = 3 x 10,240 = 30,720 (bf16);
    # recurrent 128 x 64 x 128 = 1,048,576 in fp32: 61,440 + 4,194,304 = 4,255,744 B per layer.
    assert NEMOTRON.state_elements(1) == (30_720, 1_048_576)
    assert NEMOTRON.state_bytes_per_layer(2, 1) == 4_255_744
    # TP 16 pads the 8 groups to 16 (extra_groups_for_head_shards: 16 - 8): conv 3 x (8,192 + 2 x 16 x 128) / 16
    # = 3 x 768 = 2,304; recurrent 128 / 16 = 8 heads x 64 x 128 = 65,536.
    assert NEMOTRON.state_elements(16) == (2_304, 65_536)
    # The KV cache dtype does not reach the state (mamba_cache_dtype auto: the model dtype).
    assert dataclasses.replace(NEMOTRON, state_fp32=False).state_bytes_per_layer(2, 1) == 2 * (30_720 + 1_048_576)


def test_vllm_pages_hold_one_state():
    # Qwen3-Next, TP 1: 2 KV heads x 256 x 2 (K and V) x 2 B = 2,048 B per token and layer; the block grows to
    # 16 x ceil(1,097,728 / (16 x 2,048)) = 16 x 34 = 544 tokens (vLLM: "Setting attention block size to 544
    # tokens"), a page of 544 x 2,048 = 1,114,112 B, the state padded by 16,384 B (1.49%).
    assert kv_pages(QWEN, 2, 1, 2, 262_144) == (544, 1_114_112)
    # TP 4: one KV head per rank (replicated): 1,024 B/token; 16 x ceil(274,432 / 16,384) = 272; 272 x 1,024.
    assert kv_pages(QWEN, 2, 4, 2, 262_144) == (272, 278_528)
    # Nemotron-H: 8 x 128 x 2 x 2 = 4,096 B/token; 16 x ceil(4,255,744 / 65,536) = 16 x 65 = 1,040; 4,259,840 B.
    assert kv_pages(NEMOTRON, 2, 1, 2, 8192) == (1040, 4_259_840)
    # fp8 KV halves the token bytes, not the state: 16 x ceil(4,255,744 / (16 x 2,048)) = 16 x 130 = 2,080.
    assert kv_pages(NEMOTRON, 1, 1, 2, 8192) == (2080, 4_259_840)
    # A model without state layers keeps 16-token blocks.
    assert kv_pages(get_model("llama-3.1-8b").architecture, 2, 1, 2, 8192)[0] == BLOCK_TOKENS


def test_one_sequence_of_each_model():
    # Qwen3-Next: 12 full-attention layers and 36 state layers; 36 >= 1.25 x 12, so groups of 12: 1 + 3 groups.
    assert kv_layout(QWEN, range(48)) == KvLayout(12, 0, 12, 4, 36)
    # At 262,144 tokens: ceil(262,144 / 544) = 482 blocks in each attention layer, one page in each state layer:
    # (12 x 482 + 36) x 1,114,112 = 5,820 x 1,114,112 = 6,484,131,840 B.
    assert kv_bytes_per_sequence(QWEN, 262_144, 2, 1, 1, state_dtype_bytes=2) == 6_484_131_840
    # Nemotron-H: 4 attention and 24 Mamba layers (MLP layers cache nothing): groups of 4, 1 + 6 = 7 groups.
    assert kv_layout(NEMOTRON, range(52)) == KvLayout(4, 0, 4, 7, 24)
    # At 8,192 tokens: ceil(8,192 / 1,040) = 8 blocks x 4 layers + 24 pages: 56 x 4,259,840 = 238,551,040 B.
    assert kv_bytes_per_sequence(NEMOTRON, 8192, 2, 1, 1, state_dtype_bytes=2) == 238_551_040
    # The state does not grow with the context: at 1,040 tokens (1 block) 28 x 4,259,840 = 119,275,520 B.
    assert kv_bytes_per_sequence(NEMOTRON, 1040, 2, 1, 1, state_dtype_bytes=2) == 119_275_520


def test_state_layers_raise_concurrency_at_long_context():
    attention_only = dataclasses.replace(
        QWEN, layer_pattern="", linear_key_heads=0, linear_value_heads=0, linear_key_head_dim=0, linear_value_head_dim=0
    )
    # The same 48 layers all attention: 48 x 262,144 x 2,048 = 25,769,803,776 B a sequence (16-token blocks).
    assert kv_bytes_per_sequence(attention_only, 262_144, 2, 1, 1, state_dtype_bytes=2) == 25_769_803_776
    hybrid_seq, attention_seq = 6_484_131_840, 25_769_803_776
    # 100 GiB of KV room: 107,374,182,400 // 6,484,131,840 = 16 sequences against // 25,769,803,776 = 4.
    room = 100 * GIB
    memory = ServingMemory(
        weights=0,
        kv_cache=0,
        activation_reserve=0,
        runtime=0,
        tenant_weights=0,
        tenant_kv_cache=0,
        budget=room,
        kv_bytes_per_sequence=hybrid_seq,
        kv_bytes_per_token=QWEN.kv_bytes_per_token(2),
        kv_page_bytes=1_114_112,
        kv_group_size=12,
        kv_groups=4,
        kv_block_tokens=544,
        state_bytes_per_sequence=36 * 1_114_112,
    )
    assert max_concurrency(memory) == 16
    assert max_concurrency(dataclasses.replace(memory, kv_bytes_per_sequence=attention_seq)) == 4
    # vLLM's "GPU KV cache size": 107,374,182,400 // (1,114,112 x 12) = 8,031 blocks; // 4 groups = 2,007
    # x 544 tokens = 1,091,808 tokens.
    assert memory.kv_cache_tokens == 1_091_808
    # Only the 12 attention layers cache per token: 12 x 2,048 = 24,576 B.
    assert QWEN.kv_bytes_per_token(2) == 24_576


def test_a_published_vllm_log_of_qwen3_next():
    # A vLLM startup log of Qwen3-Next-80B-A3B-Instruct on 2 x H200 at TP 2, max model len 262,144, no prefix
    # caching (vLLM 0.10.2, public, Oct 2025; the mechanism is v0.19's): "Setting attention block size to 544
    # tokens", "Padding mamba page size by 1.49%", "Available KV cache memory: 44.59 GiB", "GPU KV cache size:
    # 973,760 tokens", "Maximum concurrency for 262,144 tokens per request: 14.77x".
    # TP 2: one KV head per rank, 1,024 B/token; the state 548,864 B; 16 x ceil(548,864 / 16,384) = 544 tokens,
    # a page of 557,056 B: (557,056 - 548,864) / 548,864 = 1.49% of padding.
    assert kv_pages(QWEN, 2, 2, 2, 262_144) == (544, 557_056)
    # One sequence: (12 x 482 + 36) x 557,056 = 3,242,065,920 B.
    per_sequence = kv_bytes_per_sequence(QWEN, 262_144, 2, 2, 1, state_dtype_bytes=2)
    assert per_sequence == 3_242_065_920
    memory = ServingMemory(
        weights=0,
        kv_cache=0,
        activation_reserve=0,
        runtime=0,
        tenant_weights=0,
        tenant_kv_cache=0,
        budget=round(44.59 * GIB),
        kv_bytes_per_sequence=per_sequence,
        kv_bytes_per_token=QWEN.kv_bytes_per_token(2, 2),
        kv_page_bytes=557_056,
        kv_group_size=12,
        kv_groups=4,
        kv_block_tokens=544,
        state_bytes_per_sequence=36 * 557_056,
    )
    # 47,878,147,932 B // (557,056 x 12) = 7,162 blocks; // 4 groups = 1,790 x 544 = 973,760 tokens, as logged.
    assert memory.kv_cache_tokens == 973_760
    # vLLM: 7,162 blocks / (482 + 3 x 1 blocks a request) = 14.77x; whole sequences: 14.
    assert round(memory.kv_available / per_sequence, 2) == 14.77
    assert max_concurrency(memory) == 14


def test_estimate_says_what_it_assumes(tmp_path: Path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "version: 1\nname: t\nmodel: {id: nemotron-h-8b}\n"
        "finetune: {method: lora, hardware: {gpu: h100-sxm}}\n"
        "serve: {context: 8192, concurrency: 8, hardware: {gpu: h100-sxm}}\n"
    )
    _, out, _ = run_cli("estimate", "--format", "json", str(spec))
    result = json.loads(out)
    assumptions = result["finetune"]["assumptions"]
    assert "24 of 52 layers are Mamba-2" in assumptions["hybrid layers"]
    serve = result["serve"]["assumptions"]
    assert "4,255,744 B per sequence" in serve["recurrent state"]
    assert "1,040 tokens (4,259,840 B)" in serve["recurrent state"]
    assert "1,040-token KV blocks" in serve["memory model"]
    _, text, _ = run_cli("estimate", str(spec))
    assert "+ 97.5 MiB recurrent state per sequence" in text  # 24 x 4,259,840 B = 97.5 MiB


def test_lora_adapts_only_the_layers_that_have_its_targets():
    # Qwen3-Next, rank 16 on q/k/v/o: only the 12 attention layers have them: q 16 x (2,048 + 8,192) = 163,840,
    # k and v 16 x (2,048 + 512) = 40,960 each, o 16 x (4,096 + 2,048) = 98,304: 344,064 x 12 = 4,128,768.
    setup = training_setup(QWEN, method="lora", lora_rank=16, lora_targets=("q_proj", "k_proj", "v_proj", "o_proj"))
    assert trainable_params(setup) == 4_128_768
    # Nemotron-H's MLP has no gate_proj: up 16 x (4,096 + 21,504) = 409,600 and down the same, in 24 MLP layers:
    # 24 x 819,200 = 19,660,800.
    setup = training_setup(NEMOTRON, method="lora", lora_rank=16, lora_targets=("gate_proj", "up_proj", "down_proj"))
    assert trainable_params(setup) == 19_660_800


def test_mamba_layer_activations_hand_derived():
    tiny = make_architecture(
        {
            "layers": 2,
            "hidden": 16,
            "heads": 2,
            "intermediate": 32,
            "vocab": 64,
            "mlp": "plain",
            "norms_per_layer": 1,
            "layer_pattern": "M-",
            "separate_mlp": True,
            "mamba_heads": 4,
            "mamba_head_dim": 8,
            "ssm_state": 4,
            "ssm_groups": 2,
        }
    )
    setup = training_setup(tiny, method="full", precision="bf16")
    # Both layers: one RMSNorm saving its fp32 input and (trainable) its 16-bit output: 4 x 16 + 2 x 2 x 16 = 128.
    # Mamba-2 layer (MambaSplitConv1dScanCombinedFn): zxbcdt 2 x 32 + 2 x 2 x 4 + 4 = 84 and out_x 32, bf16:
    # 2 x 116 = 232, + fp32 rstd per group 4 x 2 = 8: 240. Layer: 368.
    # MLP layer (plain, trainable down_proj): up output and activation 2 x 2 x 32 = 128. Layer: 256.
    assert layer_activation_bytes_per_token(setup) == (368 + 256) / 2
    assert largest_layer_activation_bytes_per_token(setup) == 368


def test_gp021_names_an_unknown_layer_kind(tmp_path: Path, write_spec):
    cases = {
        "pattern.json": ({**NEMOTRON_H_8B, "hybrid_override_pattern": "M-X*" + "M-" * 24}, "names 'X'"),
        "moe.json": ({**NEMOTRON_H_8B, "hybrid_override_pattern": "ME" * 26}, "lacks n_routed_experts"),
        "types.json": ({**QWEN3_NEXT, "layer_types": ["linear_attention"] * 47 + ["mamba"]}, "names mamba"),
        "blocks.json": ({**NEMOTRON_H_8B, "layers_block_type": ["mamba", "moe"] * 26}, "lacks n_routed_experts"),
        "kinds.json": ({**NEMOTRON_H_8B, "layers_block_type": ["mamba", "conv"] * 26}, "names conv"),
        "jamba.json": ({"model_type": "jamba", "hidden_size": 64}, "Jamba's Mamba-1 layers"),
        "other.json": ({"model_type": "acme", "hidden_size": 64, "ssm_state_size": 16}, "ssm_state_size"),
        "count.json": ({**NEMOTRON_H_8B, "num_hidden_layers": 50}, "num_hidden_layers 50 but the layer pattern has 52"),
    }
    for name, (config, words) in cases.items():
        if name in ("blocks.json", "kinds.json"):
            config = {k: v for k, v in config.items() if k != "hybrid_override_pattern"}
        (tmp_path / name).write_text(json.dumps(config))
        spec = write_spec(
            f"version: 1\nname: t\nmodel: {{config: {name}}}\n"
            "serve: {context: 4096, concurrency: 1, hardware: {gpu: h100-sxm}}\n",
            f"{name}.yaml",
        )
        code, out, _ = run_cli("lint", "--format", "json", str(spec))
        findings = json.loads(out)["findings"]
        assert code == 1 and [f["code"] for f in findings] == ["GP021"], (name, out)
        assert words in findings[0]["message"], (name, findings[0]["message"])
        assert (findings[0]["line"], findings[0]["pointer"]) == (3, "/model/config")


def test_each_new_field_is_a_finding_at_its_line(write_spec):
    base = (
        "version: 1\nname: t\nmodel:\n  architecture:\n    layers: 4\n    hidden: 64\n    heads: 4\n"
        "    intermediate: 128\n    vocab: 100\n"
    )
    serve = "serve: {context: 4096, concurrency: 1, hardware: {gpu: h100-sxm}}\n"
    cases = [
        # The schema's checks at the field's line: a letter outside the alphabet (GP106), a bound, a type.
        ("    layer_pattern: LLXA\n", "GP106", 10, "layer_pattern"),
        ("    layer_pattern: LLLA\n    linear_key_heads: 0\n", "GP103", 11, "linear_key_heads"),  # out of range
        ("    layer_pattern: M-\n    ssm_state: 1.5\n", "GP102", 11, "ssm_state"),  # not an integer
        # Consistency (GP021) at the line of the field at fault.
        ("    layer_pattern: LLLA\n", "GP021", 10, "layer_pattern"),
        (
            "    layer_pattern: LLLA\n    linear_key_heads: 3\n    linear_value_heads: 4\n"
            "    linear_key_head_dim: 8\n    linear_value_head_dim: 8\n",
            "GP021",
            12,
            "linear_value_heads",
        ),
        ("    mamba_heads: 8\n", "GP021", 10, "mamba_heads"),
        ("    layer_pattern: AAAAA\n", "GP021", 10, "layer_pattern"),
        ("    separate_mlp: true\n", "GP021", 10, "separate_mlp"),
    ]
    for index, (fields, code, line, pointer) in enumerate(cases):
        spec = write_spec(base + fields + serve, f"s{index}.yaml")
        _, out, _ = run_cli("lint", "--format", "json", str(spec))
        findings = json.loads(out)["findings"]
        assert [(f["code"], f["line"], f["pointer"]) for f in findings] == [
            (code, line, f"/model/architecture/{pointer}")
        ], (fields, findings)


def test_tensor_parallel_must_divide_the_state_heads():
    arch = make_architecture(
        {
            "layers": 4,
            "hidden": 64,
            "heads": 8,
            "kv_heads": 8,
            "intermediate": 128,
            "vocab": 128,
            "layer_pattern": "LLLA",
            "linear_key_heads": 2,
            "linear_value_heads": 4,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
        }
    )
    assert tensor_parallel_problem(arch, 2, serving=True) is None
    problem = tensor_parallel_problem(arch, 4, serving=True)  # 8 attention heads split, 2 key heads do not
    assert problem is not None and "2 linear-attention key and 4 value heads" in problem
    assert tensor_parallel_problem(NEMOTRON, 8, serving=True) is None  # 128 Mamba heads, 32 heads, 8 KV heads


def test_any_windowed_mix_is_a_layer_pattern():
    # Five layers, windowed except layers 1 and 4: no period reproduces it, so it becomes S/A letters (it was
    # GP021 before). Layer 0 slides: KV of the 2 full layers per token, the 3 windowed ones the window.
    config = {
        "model_type": "gemma2",
        "num_hidden_layers": 5,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 16,
        "intermediate_size": 128,
        "vocab_size": 100,
        "sliding_window": 32,
        "layer_types": [
            "sliding_attention",
            "full_attention",
            "sliding_attention",
            "sliding_attention",
            "full_attention",
        ],
    }
    arch = read_hf_model(config).architecture
    assert (arch.layer_pattern, arch.sliding_layer_count, arch.sliding_layers) == ("SASSA", 3, 0)
    # 2 full and 3 windowed layers: 3 < 1.25 x 2 is false (3 >= 2.5), so groups of 2: 1 + 2 groups, 4 windowed slots.
    assert kv_layout(arch, range(5)) == KvLayout(2, 4, 2, 3, 0)
    # A periodic mix keeps its period (every 2nd layer full): sliding_layers 2, no pattern.
    periodic = read_hf_model(
        {**config, "num_hidden_layers": 4, "layer_types": ["sliding_attention", "full_attention"] * 2}
    )
    assert (periodic.architecture.layer_pattern, periodic.architecture.sliding_layers) == ("", 2)


def test_plain_models_are_unchanged():
    # Without a layer pattern every layer is attention with an MLP, as before.
    llama = get_model("llama-3.1-8b").architecture
    assert (llama.attention_layers, llama.state_layers, llama.mlp_layers, llama.hybrid) == (32, 0, 32, False)
    assert llama.state_elements(1) == (0, 0)
    with pytest.raises(ArchitectureError, match="mixes linear-attention"):
        make_architecture(
            {**_fields(QWEN), "layer_pattern": "LMLA", "mamba_heads": 4, "mamba_head_dim": 4, "ssm_state": 4}
        )


def test_spec_with_a_hybrid_catalog_model_resolves():
    spec = make_spec("version: 1\nname: t\nmodel: {id: Qwen/Qwen3-Next-80B-A3B-Instruct}\n")
    assert spec.model.architecture == QWEN


def _fields(arch: Architecture) -> dict[str, object]:
    return {f.name: getattr(arch, f.name) for f in dataclasses.fields(arch) if getattr(arch, f.name) != f.default}


@pytest.mark.parametrize("engine", ["sglang", "trtllm", "vllm"])
def test_a_model_of_mlp_only_layers_caches_nothing_on_every_engine(engine):
    # layer_pattern '-': no attention and no state layer, so no KV cache to size (SGLang and TensorRT-LLM size
    # the pool on the stage with the least room; here 0 bytes a token): an estimate, not an internal error.
    from gpuplan.linter import lint_bytes

    text = (
        "version: 1\nname: mlp\nmodel:\n  architecture: {layers: 2, hidden: 64, heads: 1, intermediate: 128,"
        " vocab: 256, layer_pattern: '-'}\n"
        f"serve: {{context: 16, output_tokens: 4, concurrency: 1, engine: {engine}, hardware: {{gpu: l4}}}}\n"
    )
    result = lint_bytes("mlp.yaml", text.encode())
    assert not [f for f in result.findings if f.code == "GP010"]
    assert result.analysis is not None and result.analysis.serve is not None
    memory = result.analysis.serve.memory
    assert memory.kv_bytes_per_token == 0 and memory.kv_bytes_per_sequence == 0
