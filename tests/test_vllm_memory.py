"""Serving memory as vLLM (v0.19) accounts for it, worked by hand: published models from the
mechanisms its startup logs expose, and tiny decoders to the byte.

The startup-log tests hold within a few per cent of an 8B-70B model, where a term of a few MiB goes
unseen; on the tiny decoders each term of vLLM's accounting is exact, on a model small enough to add up.

TINY (tests/tiny_architectures.py): 2 layers, hidden 8, 2 heads of 4 (one KV head), gated MLP 16 wide,
vocabulary 32, RMSNorm, untied, 64 positions: 1,704 parameters (per layer 592: attention 192, MLP 384,
norms 16; embedding 256, head 256, final norm 8), 1,152 of them decoder linears; norms 2 x 2 x 8 + 8 = 40.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from gpuplan.architecture import Architecture
from gpuplan.catalog import get_gpu, get_model
from gpuplan.estimate.serving import (
    NON_TORCH_PP,
    NON_TORCH_SINGLE,
    NON_TORCH_TP,
    ServingMemory,
    ServingSetup,
    Tenant,
    cuda_graph_bytes,
    decode_weight_reads,
    engine_batch_limits,
    estimate_serving,
    kv_bytes_per_sequence,
    kv_layout,
    max_concurrency,
    max_context,
    model_stage_weights,
    serving_shape,
)
from gpuplan.estimate.weights import (
    mxfp4_moe_alignment,
    padded_expert_bytes,
    quant_linear_bytes,
    rope_cache_bytes,
    routed_expert_bytes,
    stage_weights,
)
from gpuplan.units import GIB, MIB
from tests.tiny_architectures import HYBRID, MOE, TINY

H100 = get_gpu("h100-sxm")
LLAMA = get_model("meta-llama/Llama-3.1-8B-Instruct").architecture


def test_llama_8b_startup_by_hand():
    # Log: weights 14.99 GiB, torch peak 1.89, non-torch 0.25, non-KV 17.12, 476,016 KV tokens.
    setup = ServingSetup(architecture=LLAMA, context=8192, concurrency=1, memory_utilization=0.95)
    memory = estimate_serving(setup, H100.usable_bytes)
    # Weights 8,030,261,248 x 2 + the rotary cache 131,072 positions x 128 x 2 bytes = 16,094,076,928.
    assert memory.weights == 16_060_522_496 + 33_554_432
    # Torch peak: max(8,192 tokens x (8 x 4,096 + 6 x 14,336) = 973,078,528 B forward, sampler 1,024 requests
    # x 128,256 x 14 B + the dummy batch's hidden states 8,192 x 4,096 x 2 = 1,905,786,880 B).
    assert memory.activation_reserve == 1_024 * 128_256 * 14 + 8_192 * 4_096 * 2 == 1_905_786_880
    assert memory.runtime == NON_TORCH_SINGLE
    assert memory.non_kv / 2**30 == pytest.approx(17.12, rel=0.015)
    # Budget int(0.95 x 84,986,665,370) = 80,737,332,101; KV room 62,469,032,837 B; one block of 16 tokens
    # over 32 layers = 32 x 16 x 2 x 8 x 128 x 2 = 2,097,152 B -> 29,787 blocks = 476,592 tokens (+0.1%).
    assert memory.budget == 80_737_332_101
    assert memory.kv_cache_tokens == (80_737_332_101 - memory.non_kv) // 2_097_152 * 16 == 476_592
    assert memory.kv_cache_tokens == pytest.approx(476_016, rel=0.003)


def test_engine_defaults_follow_the_gpu():
    assert engine_batch_limits(H100.usable_bytes, H100.id) == (8192, 1024)
    assert engine_batch_limits(get_gpu("a100-sxm-80gb").usable_bytes, "a100-sxm-80gb") == (2048, 256)
    assert engine_batch_limits(get_gpu("l40s").usable_bytes, "l40s") == (2048, 256)


def test_runtime_per_parallel_rank():
    tp = estimate_serving(
        ServingSetup(architecture=LLAMA, context=8192, concurrency=1, tensor_parallel=2), H100.usable_bytes
    )
    pp = estimate_serving(
        ServingSetup(architecture=LLAMA, context=8192, concurrency=1, pipeline_parallel=2), H100.usable_bytes
    )
    assert (tp.runtime, pp.runtime) == (NON_TORCH_TP, NON_TORCH_PP)  # 2.07 and 0.07 GiB in the logs


def test_pipeline_stages_first_without_sampler_last_with_it():
    # Llama-3.1-8B over 2 stages: 16 layers each; the first holds the embedding, the last the LM head and
    # final norm (each 525,336,576 x 2 B); both the rotary cache. Layer bytes: (P - 2 x head - norms) / 32.
    first, last = stage_weights(LLAMA, "none", 2, 1, 2)
    layer = (8_030_261_248 - 2 * 525_336_576 - 4_096 - 32 * 8_192) * 2 / 32
    norms = 32 * 8_192 * 2 / 32
    rope = 131_072 * 128 * 2
    assert first == pytest.approx(16 * (layer + norms) + 525_336_576 * 2 + rope)
    assert last == pytest.approx(16 * (layer + norms) + 525_336_576 * 2 + 4_096 * 2 + rope)
    setup = ServingSetup(architecture=LLAMA, context=8192, concurrency=1, memory_utilization=0.95, pipeline_parallel=2)
    memory = estimate_serving(setup, H100.usable_bytes)
    # The last stage limits the KV cache: sampler + the received hidden state and residual (2 x 8,192 x 4,096 x 2).
    assert memory.activation_reserve == 1_905_786_880 + 2 * 8_192 * 4_096 * 2
    assert memory.kv_cache_tokens == pytest.approx(1_075_312, rel=0.003)  # the log's figure


def test_gemma3_groups_its_62_layers_into_70_slots():
    arch = get_model("google/gemma-3-27b-it").architecture
    layout = kv_layout(arch, range(arch.layers))
    # 10 full-attention layers (every 6th) and 52 sliding ones: groups of 10 layers; the sliding kind needs
    # 6 groups (60 slots for 52 layers), 7 groups and 70 slots in all.
    assert (layout.full_slots, layout.windowed_slots, layout.group_size, layout.groups) == (10, 60, 10, 7)
    # One 32k sequence: full layers keep 32,768 tokens; sliding ones (cdiv(1,023 + 8,192, 16) + 1) x 16 =
    # 9,232 tokens; per slot and token 2 x 16 heads x 128 x 2 bytes = 8,192.
    per_sequence = kv_bytes_per_sequence(arch, 32768, 2, 1, 1, state_dtype_bytes=2)
    assert per_sequence == 8_192 * (10 * 32_768 + 60 * 9_232)
    memory = estimate_serving(
        ServingSetup(architecture=arch, context=32768, concurrency=1), get_gpu("h200-sxm").usable_bytes
    )
    blocks = memory.kv_available // (16 * 8_192 * 10)  # 16-token pages for each of the 10 slots of a group
    assert memory.kv_cache_tokens == blocks // 7 * 16


def test_chunked_attention_reserves_chunk_plus_batch():
    arch = get_model("llama-4-scout").architecture
    # Llama 4: 36 chunked layers reserve cdiv(min(8,192 + 8,192, 65,536), 16) x 16 = 16,384 tokens; 12 full
    # layers 65,536 (groups of 12: 12 full slots, 36 chunked slots, no padding).
    per_slot_token = 2 * 8 * 128 * 2
    assert kv_bytes_per_sequence(arch, 65536, 2, 1, 1, state_dtype_bytes=2) == per_slot_token * (
        12 * 65_536 + 36 * 16_384
    )


def test_cuda_graphs_sit_outside_the_budget():
    # 51 capture sizes x 2 modes: two first captures of 200 MiB and 100 further graphs of 6 MiB.
    assert cuda_graph_bytes(1024, 8192) == 2 * 200 * 2**20 + 100 * 6 * 2**20
    # The engine fills its budget with the KV pool before it captures the graphs, so they need the rest of
    # the GPU beside the whole budget: at 0.99 of 84,986,665,370 B the budget is 84,136,798,716 B, and with
    # the 1,048,576,000 B of graphs 85,185,374,716 B: more than the GPU, although the declared sequence fits
    # the budget. At 0.95 the budget is 80,737,332,101 B, and 81,785,908,101 B with the graphs fit.
    setup = ServingSetup(architecture=LLAMA, context=8192, concurrency=1, memory_utilization=0.99)
    memory = estimate_serving(setup, H100.usable_bytes)
    assert memory.per_gpu <= memory.budget == 84_136_798_716  # the budget holds weights, reserve, runtime and KV
    assert math.isclose(memory.capacity, H100.usable_bytes) and H100.usable_bytes == 84_986_665_370
    assert memory.kv_cache <= memory.kv_available and not memory.fits
    roomier = estimate_serving(dataclasses.replace(setup, memory_utilization=0.95), H100.usable_bytes)
    assert roomier.budget == 80_737_332_101 and roomier.fits


# -- to the byte on tiny decoders --------------------------------------------------------------------------


def test_one_gpu_every_term():
    # Weights: 1,704 x 2 = 3,408 plus the rotary cache 64 positions x 4 dims x 2 B = 512: 3,920.
    # KV per layer and token: K and V of one 4-wide head, 2 x 4 x 2 B = 16; 20 tokens fill two 16-token
    # blocks: 16 x 2 layers x 32 = 1,024 per sequence, x 400 = 409,600.
    # Torch peak: the forward of 8 tokens x (8 x 8 residual + 6 x 16 MLP = 160) = 1,280 loses to the
    # sampler warm-up over 4 requests, which v0.19 samples by PyTorch's sort below 8 (the Triton kernel
    # from 8): per logit bf16 2 + fp32 4 + sorted values 4 and int64 indices 8 + the sort's two int2 arrays
    # 16 and CUB's alternate buffers 4 + 8 = 46, so 4 x 32 x 46 + 8 x 8 x 2 = 6,016. Non-torch: 0.25 GiB.
    # per_gpu 3,920 + 409,600 + 6,016 + 268,435,456 = 268,854,992 within the budget 0.9 x 3e8 = 2.7e8;
    # KV available 2.7e8 - 268,445,392 = 1,554,608: 1,554,608 // (256 B page x 2 layers) = 3,036 blocks
    # = 48,576 tokens; 1,554,608 // 1,024 = 1,518 sequences; at 400 sequences a sequence may hold
    # 1,554,608 / (400 x 512) = 7.6 -> 7 blocks = 112 tokens.
    # CUDA graphs for 4 sequences: PIECEWISE for sizes 1, 2, 4, 8 and FULL for those up to 4 (1, 2, 4):
    # 2 first captures of 200 MiB + (3 + 2) x 6 MiB = 430 MiB,
    # which do not fit beside 268.9 MB in 300 MB.
    setup = ServingSetup(architecture=TINY, context=20, concurrency=400, max_batched_tokens=8, max_num_seqs=4)
    memory = estimate_serving(setup, usable_bytes=300_000_000)
    assert (memory.weights, memory.kv_cache, memory.activation_reserve, memory.runtime) == (
        3920,
        409600,
        6016,
        NON_TORCH_SINGLE,
    )
    assert NON_TORCH_SINGLE == 268_435_456
    assert (memory.tenant_weights, memory.tenant_kv_cache, memory.budget) == (0, 0, 270_000_000)
    assert (memory.kv_bytes_per_sequence, memory.kv_bytes_per_token) == (1024, 32.0)
    assert (memory.kv_page_bytes, memory.kv_group_size, memory.kv_groups) == (256, 2, 1)
    assert (memory.cuda_graphs, memory.capacity, memory.vision_weights) == (430 * MIB, 300_000_000, 0)
    assert memory.breakdown == {"weights": 3920, "kv_cache": 409600, "activations": 6016, "runtime": 268_435_456}
    assert (memory.per_gpu, memory.non_kv, memory.kv_available) == (268_854_992, 268_445_392, 1_554_608)
    assert memory.kv_cache_tokens == 48_576
    assert max_concurrency(memory) == 1518
    assert max_context(setup, memory) == 112
    assert not memory.fits  # the graphs do not fit beside it
    # The graphs sit beside the whole budget the engine fills: 0.9 x 5e9 + 450,887,680 = 4,950,887,680 <= 5e9.
    roomy = estimate_serving(setup, usable_bytes=5_000_000_000)
    assert roomy.fits and not estimate_serving(setup, usable_bytes=4_500_000_000).fits  # 4.05e9 + 4.5e8 > 4.5e9


def test_quantized_pipeline_and_tensor_parallel():
    # AWQ with groups of 4: (4 + 20/4) / 8 = 1.125 B per linear weight: 1,152 x 1.125 + 552 x 2 = 2,400.
    # Per layer: (2,400 - 512 embedding - 512 head - 80 norms) / 2 = 648 linear over TP 2 = 324, plus
    # (80 - 16 final norm) / 2 = 32 of norms. Stage 0: 356 + 512 / 2 embedding + 512 rotary = 1,124;
    # stage 1: 356 + 512 / 2 head + 16 final norm + 512 = 1,140.
    # Torch peak on stage 1 (last): sampler 6,016 (test_one_gpu_every_term) over the forward 8 x (64 +
    # 6 x 16 / 2) = 896, plus the hidden state and residual passed between stages 2 x 8 x 8 x 2 = 256:
    # 6,272; stage 0: 896 + 256 =
    # 1,152. Stage 1 has the least room: it is reported. KV: one layer, 1 B per value, the single KV head
    # replicated over TP: 2 x 4 x 1 = 8 B per token, 32 tokens: 256. Per token, all layers, per stage: 16 / 2.
    setup = ServingSetup(
        architecture=TINY,
        context=20,
        concurrency=1,
        quantization="awq",
        group_size=4,
        tensor_parallel=2,
        pipeline_parallel=2,
        kv_dtype_bytes=1,
        max_batched_tokens=8,
        max_num_seqs=4,
    )
    assert stage_weights(TINY, "awq", 2, 2, 2, 4) == (1124.0, 1140.0)
    memory = estimate_serving(setup, usable_bytes=4 * GIB)
    assert (memory.weights, memory.activation_reserve, memory.runtime) == (1140, 6272, NON_TORCH_TP)
    assert (memory.kv_cache, memory.kv_bytes_per_sequence, memory.kv_bytes_per_token) == (256, 256, 8.0)
    assert (memory.kv_page_bytes, memory.kv_group_size, memory.kv_groups) == (128, 1, 1)
    assert memory.budget == int(0.9 * 4 * GIB)


def test_pipeline_stages_hold_their_own_layers_when_layers_differ():
    # MOE (tiny_architectures) with its first layer dense, as DeepSeek-V3's first three: layer 0 holds
    # 592 parameters (attention 192, gated MLP 384, norms 16), layer 1 1,008 (attention 192, 4 experts
    # x 3 x 8 x 8 = 768, router 8 x 4 = 32, norms 16). On two stages each holds its own layer, not half
    # of the 1,600: stage 0 592 x 2 B + the 32 x 8 table (512) + the rotary cache (512) = 2,208; stage 1
    # 1,008 x 2 + the head (512) + the final norm (16) + the cache = 3,056 (an even share would give both
    # 1,600 B of layers, 10% short on the stage that peaks). A decode step reads stage 0 less its table
    # (1,696) and stage 1 less its 1,536 B of routed experts (1,520), the experts it touches apart.
    arch = dataclasses.replace(MOE, dense_layers=1)
    assert [arch.layer_params(index) for index in range(2)] == [592, 1008]
    setup = ServingSetup(arch, context=1, concurrency=1, pipeline_parallel=2)
    assert model_stage_weights(setup) == (2_208, 3_056)
    assert decode_weight_reads(setup) == (1_696, 1_520)
    # Under EP 2 each GPU holds 2 whole experts of layer 1 (768 B of the 1,536): stage 1 holds 2,288 and
    # a step reads the same 1,520 beside the experts it touches.
    setup = ServingSetup(arch, context=1, concurrency=1, pipeline_parallel=2, expert_parallel=2)
    assert model_stage_weights(setup) == (2_208, 2_288)
    assert decode_weight_reads(setup) == (1_696, 1_520)


def test_stages_keep_embeddings_and_norms_in_their_stored_dtype():
    # TINY in fp32 on two stages: 1,152 linear parameters x 4 B = 4,608, 2,304 a stage; the layers' norms
    # (2 x 2 x 8) x 4 = 128, 64 a stage. Stage 0: + the table 256 x 4 + the rotary cache 512 = 3,904;
    # stage 1: + the head 1,024 + the final norm 32 + the cache = 3,936. Under AWQ (groups of 4) the
    # linears take 1.125 B a weight (1,296, 648 a stage) and everything else stays 16-bit whatever the
    # model dtype: 648 + 32 + 512 + 512 = 1,704 and 648 + 32 + 512 + 16 + 512 = 1,720.
    assert stage_weights(TINY, "none", 4, 1, 2) == (3_904, 3_936)
    assert stage_weights(TINY, "awq", 4, 1, 2, 4) == (1_704, 1_720)


def test_the_vision_tower_is_reported_on_the_first_stage():
    # The binding stage's vision_weights are the tower's when it holds it. One stage: the binding stage
    # is stage 0, which holds the tower: 1,000 parameters x 2 B (bf16) = 2,000 B; without a tower, 0.
    tiny = TINY
    setup = ServingSetup(architecture=dataclasses.replace(tiny, vision_params=1000), context=16, concurrency=1)
    assert serving_shape(setup, 10**9).at(1).vision_weights == 2000
    plain = ServingSetup(architecture=tiny, context=16, concurrency=1)
    assert serving_shape(plain, 10**9).at(1).vision_weights == 0


def test_the_stages_hold_every_parameter_once_and_the_tied_heads_copy():
    # Gemma-3-27B (a vision tower, a tied head) on two stages: 27,432,406,640 parameters x 2 B, the last
    # stage's copy of the 262,208 x 5,376 table, and a rotary cache on each GPU, nothing else.
    arch = get_model("gemma-3-27b").architecture
    stages = model_stage_weights(ServingSetup(arch, context=1, concurrency=1, pipeline_parallel=2))
    assert arch.params == 27_432_406_640
    assert sum(stages) == 27_432_406_640 * 2 + 262_208 * 5_376 * 2 + 2 * rope_cache_bytes(arch)
    # The first stage holds its 31 layers' parameters, the table and the 423,060,336-parameter tower.
    linear, small = arch.stage_params(range(31))
    expected = (linear + small + 262_208 * 5_376 + 423_060_336) * 2 + rope_cache_bytes(arch)
    assert stages[0] == pytest.approx(expected, rel=1e-12)


def test_tenants_share_the_gpu():
    # A second TINY tenant at 36 tokens (3 blocks: 16 x 2 x 48 = 1,536 B) x 2 sequences = 3,072 B of KV
    # and its 3,920 B of weights; the torch peak is the larger of the two models' (equal here: 6,016).
    tenant = Tenant("second", TINY, "none", context=36, concurrency=2)
    setup = ServingSetup(
        architecture=TINY, context=20, concurrency=1, max_batched_tokens=8, max_num_seqs=4, tenants=(tenant,)
    )
    memory = estimate_serving(setup, usable_bytes=300_000_000)
    assert (memory.tenant_weights, memory.tenant_kv_cache) == (3920, 3072)
    assert memory.breakdown == {
        "weights": 3920,
        "kv_cache": 1024,
        "activations": 6016,
        "runtime": NON_TORCH_SINGLE,
        "tenant_weights": 3920,
        "tenant_kv_cache": 3072,
    }
    # non-KV: per_gpu less both caches: 3,920 + 6,016 + 268,435,456 + 3,920.
    assert memory.non_kv == 268_449_312
    # KV the engine can allocate: 2.7e8 less everything but its own cache (the tenant's cache included):
    # 2.7e8 - 268,449,312 - 3,072 = 1,547,616. The engine's pool is that, once: 1,547,616 // 1,024 B per
    # sequence = 1,511 sequences (1,508 when the tenant's cache was subtracted a second time); blocks of
    # 256 B x 2 layers: 1,547,616 // 512 = 3,022 blocks of 16 tokens = 48,352 tokens.
    assert memory.kv_available == 1_547_616
    assert max_concurrency(memory) == 1511
    assert memory.kv_cache_tokens == 48_352


def test_hybrid_kv_groups_pad_the_windowed_kind():
    # (full slots, windowed slots, group size, groups); the fifth field, state slots, is 0 without L/M layers.
    # 2 full layers, 5 sliding: groups of 2 (1.25 x 2 < 5), the sliding kind padded to 3 groups = 6 slots.
    assert tuple(vars(kv_layout(HYBRID, range(7))).values()) == (2, 6, 2, 4, 0)
    # Layers 0-3: 1 full (layer 2), 3 sliding; 3 >= 1.25 x 1, so groups of 1: 1 + 3 slots, 4 groups.
    assert tuple(vars(kv_layout(HYBRID, range(4))).values()) == (1, 3, 1, 4, 0)
    # Layers 1-2 of HYBRID: 1 full, 1 sliding; 1 < 1.25 x 1: groups of 1, 2 groups.
    assert tuple(vars(kv_layout(HYBRID, range(1, 3))).values()) == (1, 1, 1, 2, 0)
    # Layers 0-5 without padding: 2 full, 4 sliding: groups of 2, 1 + 2 groups, 6 slots.
    assert tuple(vars(kv_layout(HYBRID, range(6))).values()) == (2, 4, 2, 3, 0)
    # One kind only: one group of all its layers.
    assert tuple(vars(kv_layout(TINY, range(2))).values()) == (2, 0, 2, 1, 0)
    # Full layers keep 40 tokens in 3 blocks (48); sliding layers min(8 - 1 + 8 batched, 40) = 15 tokens,
    # 1 block + 1 = 32. 16 B x (2 x 48 + 6 x 32) = 4,608.
    assert kv_bytes_per_sequence(HYBRID, 40, 2, 1, 1, 8, state_dtype_bytes=2) == 4608
    # The window's 7 earlier tokens beside a 10-token batch: 17 tokens, one past a block, 2 blocks + 1 = 48
    # (as many as the full layers' 40): 16 x 8 slots x 48 = 6,144.
    assert kv_bytes_per_sequence(HYBRID, 40, 2, 1, 1, 10, state_dtype_bytes=2) == 6144
    # Chunked attention (chunk 8): min(8 + 8, 40) = 16 tokens, one block: 16 x (2 x 48 + 6 x 16) = 3,072.
    chunked = Architecture(
        layers=7, hidden=8, heads=2, kv_heads=1, intermediate=16, vocab=32, attention_chunk=8, sliding_layers=3
    )
    assert kv_bytes_per_sequence(chunked, 40, 2, 1, 1, 8, state_dtype_bytes=2) == 3072


def test_expert_parallel_holds_whole_experts():
    # Per layer: attention 192, router 8 x 4 = 32, 4 experts x 3 x 8 x 8 = 768, norms 16: 1,008.
    # Routed experts: 2 layers x 4 x 192 x 2 B = 3,072. 16-bit total 2 x 2,536 = 5,072; the router and
    # norms are replicated: (2 x 32 + 40) x 2 = 208; decoder linears 5,072 - 512 - 512 - 208 = 3,840.
    assert routed_expert_bytes(MOE, "none", 2) == 3072
    assert routed_expert_bytes(TINY, "none", 2) == 0
    # TP 2: 3,840 / 2 + replicated 192 + embedding 256 + head 256 + final norm 16 + rotary 512 = 3,152.
    assert stage_weights(MOE, "none", 2, 2, 1) == (3152.0,)
    # EP 4 beside TP 2: one whole expert per GPU per layer, 3,072 / 4 = 768, the rest split by TP:
    # (3,840 - 3,072) / 2 = 384; 384 + 768 + 192 + 256 + 256 + 16 + 512 = 2,384.
    assert stage_weights(MOE, "none", 2, 2, 1, ep=4) == (2384.0,)
    # fp8 experts: 1 B each: 1,536.
    assert routed_expert_bytes(MOE, "fp8", 2) == 1536


def test_expert_parallel_holds_whole_quantized_experts_at_their_group_size():
    # AWQ with groups of 4: (4 + 20/4) / 8 = 1.125 B per linear weight. MOE's decoder linears (attention
    # 2 x 192, experts 2 x 768) are 1,920 weights: 2,160 B; the other 616 parameters (embedding 256, head
    # 256, router 2 x 32, norms 40) stay 16-bit: 1,232 B; with the rotary cache 512 B, one GPU holds 3,904.
    # The routed experts are 2 layers x 4 x 192 x 1.125 = 1,728 B; under EP 2 without TP each GPU holds
    # 2 of the 4 experts of each layer (half of them): 3,904 - 864 = 3,040. At groups of 128 the experts
    # would be 797.8 B and the saving 398.9.
    assert routed_expert_bytes(MOE, "awq", 2, 4) == 1728
    assert stage_weights(MOE, "awq", 2, 1, 1, 4) == (3904.0,)
    assert stage_weights(MOE, "awq", 2, 1, 1, 4, ep=2) == (3040.0,)


def test_a_decode_step_reads_no_resident_quantized_expert_at_their_group_size():
    # The same AWQ model (groups of 4) on one GPU: a step reads its 3,904 B less the gathered embedding
    # (256 x 2 B) and the 1,728 B of routed experts (the speed model counts the experts a step touches).
    setup = ServingSetup(MOE, context=1, concurrency=1, quantization="awq", group_size=4)
    assert decode_weight_reads(setup) == (3904 - 512 - 1728,)


@pytest.mark.parametrize(
    "quantization, group, row, expected",
    [
        ("fp8", 128, 4096, 1.0),
        ("int8", 128, 4096, 1.0),
        ("nvfp4", 128, 4096, 4.5 / 8),  # 4 bits + an 8-bit scale per 16
        ("mxfp4", 128, 4096, 4.25 / 8),  # 4 bits + an 8-bit scale per 32
        ("awq", 128, 4096, (4 + 20 / 128) / 8),
        ("gptq", 0, 1024, (4 + 20 / 1024) / 8),  # per output channel: once per row
    ],
)
def test_quantized_linear_bytes(quantization, group, row, expected):
    assert quant_linear_bytes(quantization, group, row) == pytest.approx(expected, rel=1e-12)


GPT_OSS_20B = get_model("gpt-oss-20b").architecture  # 24 layers, 32 experts of width 2,880, hidden 2,880


@pytest.mark.parametrize(
    "arch, tp, ep, added",
    [
        # Hopper, Ampere, Ada: Marlin's padding, intermediate to 128, hidden to 256: an expert of 2,880 x 2,880
        # holds 3 x 2,880 x 2,880 x 17/32 = 13,219,200 B of 4-bit values and scales, and 2 x (2 x 2,880 +
        # 2,880) = 17,280 B of bias: 13,236,480; at 2,944 x 3,072, 14,413,824 + 17,920 = 14,431,744, so
        # 1,195,264 more per expert, 32 experts a layer.
        ("sm90", 1, 1, 32 * 1_195_264),
        ("sm80", 1, 1, 32 * 1_195_264),
        # TP 2: each expert's width is 1,440 per GPU, padded to 1,536: 6,621,120 B -> 7,532,544 B.
        ("sm90", 2, 1, 32 * 911_424),
        # EP 2: 16 whole experts a GPU, each padded as at TP 1.
        ("sm90", 1, 2, 16 * 1_195_264),
        # Blackwell (FlashInfer, both to 256): 3,072 x 3,072, 15,040,512 + 18,432 = 15,058,944 B.
        ("sm100", 1, 1, 32 * 1_822_464),
        # MI300X pads both to 128: 2,944 x 2,944, 13,813,248 + 17,664 = 13,830,912 B; T4 and Gaudi run no
        # MXFP4 MoE kernel of vLLM's (nothing padded).
        ("gfx942", 1, 1, 32 * 594_432),
        ("sm75", 1, 1, 0),
        ("gaudi3", 1, 1, 0),
        # A custom GPU of unknown architecture, or an NVIDIA one gpuplan has no rule for, takes the largest
        # padding, Blackwell's.
        ("", 1, 1, 32 * 1_822_464),
        ("sm110", 1, 1, 32 * 1_822_464),
    ],
)
def test_vllm_pads_mxfp4_experts_for_its_moe_kernels(arch, tp, ep, added):
    assert padded_expert_bytes(GPT_OSS_20B, tp, ep, mxfp4_moe_alignment(arch)) == added


def test_gpt_oss_weights_are_counted_as_vllm_pads_them():
    # gpt-oss-120b on one H100: 36 MoE layers x 128 experts x 1,195,264 B = 5,507,776,512 B (5.13 GiB) above
    # the checkpoint's layout, the "about 5 GiB more weight" of the engine start that failed; the same
    # model served by another engine, or with its experts unpadded, is the stored size.
    arch = get_model("gpt-oss-120b").architecture
    stored = ServingSetup(arch, context=8192, concurrency=1, quantization="mxfp4")
    padded = dataclasses.replace(stored, expert_alignment=mxfp4_moe_alignment(H100.arch))
    assert model_stage_weights(padded)[0] - model_stage_weights(stored)[0] == 36 * 128 * 1_195_264
    # Another quantization of the same model is not MXFP4: nothing padded.
    fp8 = dataclasses.replace(padded, quantization="fp8")
    assert model_stage_weights(fp8) == model_stage_weights(dataclasses.replace(fp8, expert_alignment=(1, 1)))


def _serving_setup(text: str) -> ServingSetup:
    from gpuplan.linter import LintOptions, lint_bytes

    result = lint_bytes("spec.yaml", text.encode(), LintOptions())
    assert result.analysis is not None and result.analysis.serve is not None
    return result.analysis.serve.setup


def test_the_padding_follows_the_engine_the_quantization_and_the_gpu():
    # gpt-oss-20b is stored MXFP4: served by vLLM on an H100 its experts take Marlin's padding (128, 256);
    # the same on a B200 takes FlashInfer's (256, 256); SGLang is not modelled as padding; the model served
    # in fp8 (a quantization of the spec's own) has no MXFP4 experts to pad.
    def setup(gpu: str, extra: str = "") -> ServingSetup:
        return _serving_setup(
            "version: 1\nname: t\nmodel: {id: gpt-oss-20b}\nserve:\n  context: 8192\n  concurrency: 1\n"
            f"{extra}  hardware: {{gpu: {gpu}}}\n"
        )

    assert setup("h100-sxm").expert_alignment == (128, 256)
    assert setup("b200-hgx").expert_alignment == (256, 256)
    assert setup("h100-sxm", "  engine: sglang\n").expert_alignment == (1, 1)
    assert setup("h100-sxm", "  quantization: fp8\n").expert_alignment == (1, 1)


@pytest.mark.parametrize(
    "max_num_seqs, mib",
    [
        # PIECEWISE for the sizes up to min(2 x seqs, 512), FULL for those up to seqs; 2 first captures
        (1, 2 * 200 + (1 + 0) * 6),  # PIECEWISE 1, 2; FULL 1
        (100, 2 * 200 + (27 + 14) * 6),  # PIECEWISE 1, 2, 4 + 8..200 (28 sizes); FULL 1, 2, 4 + 8..96 (15)
        (128, 2 * 200 + (34 + 18) * 6),  # PIECEWISE 1, 2, 4 + 8..248 + 256 (35); FULL 1, 2, 4 + 8..128 (19)
        (1024, 2 * 200 + (50 + 50) * 6),  # capped at 512: 3 + 31 + 17 = 51 sizes in both
    ],
)
def test_cuda_graph_sizes(max_num_seqs, mib):
    assert cuda_graph_bytes(max_num_seqs, 8192) == mib * MIB


def test_engine_batch_limits_and_runtime():
    assert engine_batch_limits(70 * GIB, "H100 SXM") == (8192, 1024)
    assert engine_batch_limits(70 * GIB - 1, "H100 SXM") == (2048, 256)
    assert engine_batch_limits(80 * GIB, "NVIDIA A100 80GB") == (2048, 256)
    # The startup logs' non-torch increase: 0.25 GiB alone, 0.07 GiB per pipeline rank, 2.07 GiB with TP.
    assert (NON_TORCH_PP, NON_TORCH_TP) == (75_161_928, 2_222_645_576)  # 0.07 x 2^30, 2.07 x 2^30 rounded
    setups = {(1, 1): NON_TORCH_SINGLE, (1, 2): NON_TORCH_PP, (2, 1): NON_TORCH_TP, (2, 2): NON_TORCH_TP}
    for (tp, pp), expected in setups.items():
        memory = estimate_serving(
            ServingSetup(architecture=TINY, context=16, concurrency=1, tensor_parallel=tp, pipeline_parallel=pp),
            usable_bytes=8 * GIB,
        )
        assert memory.runtime == expected


def test_rope_cache():
    # 64 positions x 4 rotary dims x 2 B; learned positions have none; MLA rotates only its rope dims.
    assert rope_cache_bytes(TINY) == 512
    learned = Architecture(
        layers=2, hidden=8, heads=2, intermediate=16, vocab=32, position_embeddings=64, max_position=64
    )
    assert rope_cache_bytes(learned) == 0


def memory_of(budget: int, per_gpu_parts: tuple[int, int, int, int], cuda_graphs: int = 0, capacity: int = 0):
    weights, kv_cache, reserve, runtime = per_gpu_parts
    return ServingMemory(
        weights=weights,
        kv_cache=kv_cache,
        activation_reserve=reserve,
        runtime=runtime,
        tenant_weights=0,
        tenant_kv_cache=0,
        budget=budget,
        kv_bytes_per_sequence=512,
        kv_bytes_per_token=32.0,
        cuda_graphs=cuda_graphs,
        capacity=capacity,
        kv_page_bytes=256,
        kv_group_size=2,
    )


def test_fits_at_the_budget_and_capacity_edges():
    # 600 + 300 + 50 + 50 = 1,000 B within a 1,000 B budget: fits exactly; 999 does not.
    assert memory_of(1000, (600, 300, 50, 50)).fits
    assert not memory_of(999, (600, 300, 50, 50)).fits
    # The CUDA graphs must fit beside it in the GPU: 1,000 + 100 <= 1,100, but not + 101.
    assert memory_of(1000, (600, 300, 50, 50), cuda_graphs=100, capacity=1100).fits
    assert not memory_of(1000, (600, 300, 50, 50), cuda_graphs=101, capacity=1100).fits


def test_max_context_when_the_cache_is_exactly_full():
    # Nothing but KV: 1,024 B available. TINY at one sequence needs 16 B x 2 layers x 16 tokens = 512 B
    # per block: two blocks, 32 tokens, fill it exactly and still fit.
    setup = ServingSetup(architecture=TINY, context=20, concurrency=1)
    memory = memory_of(1024, (0, 0, 0, 0))
    assert memory.kv_available == 1024
    assert max_context(setup, memory) == 32
    # Whole blocks: 1,024 // (256 x 2) = 2 blocks of 16 tokens; 1,024 // 512 = 2 sequences.
    assert (memory.kv_cache_tokens, max_concurrency(memory)) == (32, 2)
    assert max_context(setup, memory_of(1023, (0, 0, 0, 0))) == 16
    assert max_context(setup, memory_of(0, (0, 0, 0, 0))) == 0


def test_a_pool_smaller_than_one_sequence_holds_none():
    # Not at least one: test_one_gpu_every_term's one-GPU TINY deployment leaves 1,554,608 B of KV pool
    # for 1,024 B sequences (1,518 of them); with a budget 1,554,108 B smaller the pool is 500 B, less
    # than one sequence: 0, which GP203 reports as "at most 0".
    setup = ServingSetup(architecture=TINY, context=20, concurrency=400, max_batched_tokens=8, max_num_seqs=4)
    memory = estimate_serving(setup, usable_bytes=300_000_000)
    assert (memory.kv_available, memory.kv_bytes_per_sequence, max_concurrency(memory)) == (1_554_608, 1024, 1518)
    starved = dataclasses.replace(memory, budget=memory.budget - 1_554_108)
    assert (starved.kv_available, max_concurrency(starved)) == (500, 0)


# -- the engine's limits as the spec sets them --------------------------------------------------------------

LIMITS_SPEC = """\
version: 1
name: limits
model: {{id: llama-3.1-8b}}
serve:
  context: 8192
  output_tokens: 256
  concurrency: 4
{extra}  hardware: {{gpu: h100-sxm}}
"""


def _serve(extra: str = ""):
    from gpuplan.linter import lint_bytes

    result = lint_bytes("limits.yaml", LIMITS_SPEC.format(extra=extra).encode())
    assert result.analysis is not None and result.analysis.serve is not None
    return result.analysis.serve


def test_the_spec_batch_limits_size_the_profiled_reserve_and_the_graphs():
    # vLLM profiles with the limits it is started with (profile_run: a dummy forward of
    # max_num_batched_tokens over min(tokens, max_num_seqs) requests, then one sampled token per request),
    # so serve.max_batched_tokens and max_sequences move the activation reserve and the KV cache left.
    # Llama-3.1-8B on one H100: 4,096 hidden, 14,336 MLP, 128,256 vocabulary.
    default = _serve()
    # Defaults (8,192 tokens, 1,024 sequences): the sampler wins, 1,024 x 128,256 x 14 + 8,192 x 4,096 x 2.
    assert default.memory.activation_reserve == 1_905_786_880
    # 2,048 tokens over 64 sequences: forward 2,048 x (8 x 4,096 + 6 x 14,336) = 243,269,632 B beats the
    # sampler 64 x 128,256 x 14 + 2,048 x 4,096 x 2 = 131,694,592 B.
    small = _serve("  max_batched_tokens: 2048\n  max_sequences: 64\n")
    assert small.memory.activation_reserve == 2_048 * (8 * 4_096 + 6 * 14_336) == 243_269_632
    assert small.setup.max_batched_tokens == 2_048 and small.setup.max_num_seqs == 64
    # The KV cache gains what the reserve gave back (weights and runtime do not move).
    assert small.memory.kv_available - default.memory.kv_available == 1_905_786_880 - 243_269_632
    # CUDA graphs: PIECEWISE for sizes up to min(2 x 64, 512, 2,048) = 128: 1, 2, 4 + 8..128 step 8 = 19;
    # FULL up to 64: 1, 2, 4 + 8..64 = 11; 2 first captures of 200 MiB + (18 + 10) x 6 MiB.
    assert small.memory.cuda_graphs == (2 * 200 + 28 * 6) * MIB
    assert default.memory.cuda_graphs == (2 * 200 + 100 * 6) * MIB
    # Fewer tokens than sequences: vLLM's dummy run spreads 512 tokens over min(512, 1,024) = 512 requests;
    # the sampler warm-up 512 x 128,256 x 14 + 512 x 4,096 x 2 = 923,533,312 B beats the forward
    # 512 x 118,784 = 60,817,408 B. Graph sizes stop at min(2,048, 512, 512) = 512: the default 51 sizes.
    tokens_only = _serve("  max_batched_tokens: 512\n")
    assert tokens_only.memory.activation_reserve == 512 * 128_256 * 14 + 512 * 4_096 * 2 == 923_533_312
    assert tokens_only.memory.cuda_graphs == default.memory.cuda_graphs
    # The assumption says where the limits came from.
    reserve = dict(small.assumptions)["activation reserve"]
    assert "2,048 tokens" in reserve and "64 requests" in reserve
    assert "serve.max_batched_tokens and serve.max_sequences" in reserve
