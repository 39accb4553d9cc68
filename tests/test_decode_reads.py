"""Which weight bytes a decode step reads (``decode_weight_reads``), hand-derived from the architectures.

A decode step streams every linear it multiplies by, but of the embedding table it gathers only its
tokens' rows, and a vision tower runs only in the prefill of prompts with images; under pipeline
parallelism every stage steps once per token, so the stage that reads the most paces the pipeline.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tiny_architectures import TINY

from gpuplan.analysis import analyse
from gpuplan.architecture import Architecture
from gpuplan.catalog import get_model
from gpuplan.estimate.serving import ServingSetup, decode_weight_reads, model_stage_weights
from gpuplan.loader import load_bytes
from gpuplan.spec import resolve


def reads(model: str | Architecture, tp: int = 1, pp: int = 1) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(the weight bytes a decode step reads, the weights held) on one GPU of each stage, bf16 weights."""
    arch = get_model(model).architecture if isinstance(model, str) else model
    setup = ServingSetup(arch, context=1, concurrency=1, tensor_parallel=tp, pipeline_parallel=pp)
    return decode_weight_reads(setup), model_stage_weights(setup)


def test_an_untied_embedding_table_is_gathered_not_read():
    # Llama-3.1-8B: 128,256 x 4,096 bf16 embedding entries = 1,050,673,152 bytes stay unread by a step.
    (read,), (stage,) = reads("llama-3.1-8b")
    assert stage - read == 128_256 * 4_096 * 2 == 1_050_673_152
    # Split over two TP ranks, each GPU leaves half of it unread.
    (read,), (stage,) = reads("llama-3.1-8b", tp=2)
    assert stage - read == 1_050_673_152 / 2


def test_a_tied_table_on_one_gpu_is_the_head_and_is_read_whole():
    # Llama-3.2-1B ties its head to the embedding: on one stage the head's matmul reads the whole table.
    read, stages = reads("llama-3.2-1b")
    assert read == stages


def test_the_head_stage_of_a_pipeline_reads_the_head():
    # Llama-3.2-1B on two stages: 8 layers each; the first keeps the table (gathered), the last a copy of
    # it as the head (read whole) and the final norm. The last reads more than the first by that copy
    # (128,256 x 2,048 x 2 bytes = 525,336,576) and the norm (2,048 x 2 bytes).
    (first_read, last_read), (first, last) = reads("llama-3.2-1b", pp=2)
    table = 128_256 * 2_048 * 2
    assert (first_read, last_read) == (first - table, last)
    assert last_read - first_read == table + 2_048 * 2 == 525_340_672


def test_a_tied_table_on_the_first_of_several_stages_is_only_gathered():
    # TINY with 3 layers, tied, on two stages: vLLM's split gives the first stage 2 layers, the last 1.
    # A layer is 592 parameters (q 64, k 32, v 32, o 64, gated MLP 3 x 8 x 16, two norms of 8): 1,184
    # bytes. The first stage holds 2 layers (2,368), the 32 x 8 table (512) and the rotary cache (64
    # positions x 4 x 2 bytes, 512): 3,392; the last 1 layer, the head's copy of the table, the final norm
    # (16) and the cache: 2,224. The head reads its copy; the first stage's table is only gathered, so
    # the first stage reads 2,880, more than the last.
    read, stages = reads(dataclasses.replace(TINY, layers=3, tie_embeddings=True), pp=2)
    assert stages == (3_392, 2_224)
    assert read == (2_880, 2_224)


def test_a_vision_tower_is_not_read_by_a_decode_step():
    # Gemma-3-27B (tied, so its table is the head): only the 423,060,336-parameter vision tower is unread.
    (read,), (stage,) = reads("gemma-3-27b")
    assert stage - read == 423_060_336 * 2
    # Llama-4-Scout (untied): its 202,048 x 5,120 table and its 871,933,824-parameter tower; and, apart
    # from what every step reads, its routed experts (48 layers x 16 experts x 3 x 5,120 x 8,192 bf16 =
    # 193,273,528,320 bytes), of which a step reads those its tokens touch (the speed model's count).
    (read,), (stage,) = reads("llama-4-scout")
    routed = 48 * 16 * 3 * 5_120 * 8_192 * 2
    assert stage - read - routed == (202_048 * 5_120 + 871_933_824) * 2 == 3_812_839_168


def test_the_serving_estimate_reads_what_a_decode_step_reads():
    # Through a spec as a user writes it: the speed model's weights are the memory estimate's weights (the
    # checkpoint as loaded, rounded up to a byte) less the 1,050,673,152-byte table.
    text = b"""
version: 1
name: t
model: {id: llama-3.1-8b}
serve: {context: 4096, concurrency: 1, hardware: {gpu: h100-sxm, count: 1}}
"""
    spec, findings = resolve(load_bytes("t.yaml", text), Path("."))
    assert spec is not None, findings
    estimate = analyse(spec).serve
    assert estimate is not None
    assert 0 <= estimate.memory.weights - 1_050_673_152 - estimate.workload.weights_read < 1
    assert estimate.workload.weights_above_mean == 0


def test_a_pipeline_paces_at_its_heaviest_stage_and_sums_its_mean():
    # Llama-3.2-1B on two L4 stages (see above): the last stage reads 525,340,672 bytes more than the
    # first, so the heavier reads half of that above the two stages' mean.
    text = b"""
version: 1
name: t
model: {id: llama-3.2-1b}
serve: {context: 4096, concurrency: 8, hardware: {gpu: l4, count: 2, pipeline_parallel: 2}}
"""
    spec, findings = resolve(load_bytes("t.yaml", text), Path("."))
    assert spec is not None, findings
    estimate = analyse(spec).serve
    assert estimate is not None
    (_, last), _ = reads("llama-3.2-1b", pp=2)
    assert estimate.workload.weights_read == last
    assert estimate.workload.weights_above_mean == 525_340_672 / 2


def test_the_unread_table_is_counted_in_the_dtype_it_is_stored_in():
    # TINY's 32 x 8 table: 1,024 bytes in an fp32 checkpoint; under AWQ the table stays 16-bit (512 bytes)
    # whatever the model dtype, as stage_weights stores it.
    fp32 = ServingSetup(TINY, context=1, concurrency=1, model_dtype_bytes=4)
    awq = ServingSetup(TINY, context=1, concurrency=1, model_dtype_bytes=4, quantization="awq")
    for setup, table in ((fp32, 1_024), (awq, 512)):
        (read,), (stage,) = decode_weight_reads(setup), model_stage_weights(setup)
        assert stage - read == table
