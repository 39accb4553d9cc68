"""vLLM v0.19 startup memory, worked by hand from the mechanisms its logs expose."""

from __future__ import annotations

import math

import pytest

from gpuplan.catalog import get_gpu, get_model
from gpuplan.estimate.serving import (
    NON_TORCH_PP,
    NON_TORCH_SINGLE,
    NON_TORCH_TP,
    ServingSetup,
    cuda_graph_bytes,
    engine_batch_limits,
    estimate_serving,
    kv_bytes_per_sequence,
    kv_layout,
    stage_weights,
)

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
    per_sequence = kv_bytes_per_sequence(arch, 32768, 2, 1, 1)
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
    assert kv_bytes_per_sequence(arch, 65536, 2, 1, 1) == per_slot_token * (12 * 65_536 + 36 * 16_384)


def test_cuda_graphs_sit_outside_the_budget():
    # 51 capture sizes x 2 modes: two first captures of 200 MiB and 100 further graphs of 6 MiB.
    assert cuda_graph_bytes(1024) == 2 * 200 * 2**20 + 100 * 6 * 2**20
    setup = ServingSetup(architecture=LLAMA, context=8192, concurrency=1, memory_utilization=0.99)
    memory = estimate_serving(setup, H100.usable_bytes)
    assert memory.per_gpu <= memory.budget  # the budget holds weights, reserve, runtime and KV
    assert math.isclose(memory.capacity, H100.usable_bytes)
    assert memory.fits == (memory.per_gpu + memory.cuda_graphs <= memory.capacity)
