"""The speed model's shared pieces, pinned by hand (mutation campaign): FLOP counts, links, collectives.

TINY: 2 layers, hidden 8, 2 heads of 4 (one KV head), gated MLP 16, vocabulary 32, untied: 1,704
parameters, 256 of them the embedding (a lookup, not a matmul). HYBRID: 7 such layers, every third
full attention (2), the other 5 a sliding window of 8.
"""

from __future__ import annotations

import pytest

from gpuplan.architecture import Architecture
from gpuplan.catalog import get_gpu
from gpuplan.estimate.performance import (
    allreduce_time,
    attention_dims,
    attention_flops,
    causal_pairs,
    compute_dtype,
    decode_attention_flops,
    gather_time,
    link_bandwidth,
    lm_head_params,
    matmul_ceiling,
    matmul_params,
    on_fast_link,
)

TINY = Architecture(layers=2, hidden=8, heads=2, kv_heads=1, intermediate=16, vocab=32, max_position=64)
TIED = Architecture(layers=2, hidden=8, heads=2, kv_heads=1, intermediate=16, vocab=32, tie_embeddings=True)
HYBRID = Architecture(
    layers=7, hidden=8, heads=2, kv_heads=1, intermediate=16, vocab=32, sliding_window=8, sliding_layers=3
)
# MLA: 2 heads, latent 16, rope 2, nope 4, values 4.
MLA = Architecture(
    layers=2,
    hidden=8,
    heads=2,
    intermediate=16,
    vocab=32,
    kv_lora_rank=16,
    qk_rope_head_dim=2,
    qk_nope_head_dim=4,
    v_head_dim=4,
)


def test_matmul_parameters():
    # Untied: 1,704 - 256 embedding = 1,448 (the head multiplies, the embedding looks up). Tied: 1,448
    # parameters, no head of its own, but the tied matrix still multiplies: 1,448 - 256 + 256 = 1,448.
    assert matmul_params(TINY) == 1448
    assert TIED.params == 1448
    assert matmul_params(TIED) == 1448
    assert lm_head_params(TINY) == 32 * 8


def test_attention_dims():
    assert attention_dims(TINY) == attention_dims(TINY, decode=True) == (4, 4)
    # MLA prefill: nope + rope = 6 per query, values 4; decode attends over latent + rope = 18, values 16.
    assert attention_dims(MLA) == (6, 4)
    assert attention_dims(MLA, decode=True) == (18, 16)


@pytest.mark.parametrize(
    "start, end, window, pairs",
    [
        (0, 4, 0, 10),  # 1 + 2 + 3 + 4
        (2, 4, 0, 7),  # 3 + 4
        (4, 4, 0, 0),
        (5, 4, 0, 0),
        (0, 3, 3, 6),  # 1 + 2 + 3, the window not yet reached
        (0, 4, 3, 9),  # 1 + 2 + 3 + 3
        (0, 6, 3, 15),  # 1 + 2 + 3 + 3 + 3 + 3
        (4, 6, 3, 6),  # 3 + 3
    ],
)
def test_causal_pairs(start, end, window, pairs):
    assert causal_pairs(start, end, window) == pairs


def test_attention_flops():
    # 2 FLOPs x 2 heads x (4 + 4) per (query, key) pair = 32; 4 queries of one sequence: 10 pairs x 2 layers.
    assert attention_flops(TINY, 0, 4) == 32 * 20
    # HYBRID, 10 queries: 2 full layers x 55 pairs + 5 windowed layers x (36 + 2 x 8 = 52): 370 x 32.
    assert attention_flops(HYBRID, 0, 10) == 32 * 370
    # Queries 8-9 only: full 9 + 10 = 19, windowed 8 + 8 = 16: 2 x 19 + 5 x 16 = 118.
    assert attention_flops(HYBRID, 8, 10) == 32 * 118


def test_decode_attention_flops():
    # One token at 10 cached keys: 2 layers x 10 keys x 32 FLOPs.
    assert decode_attention_flops(TINY, 10) == 32 * 20
    # HYBRID at 20: 2 x 20 + 5 x 8 = 80 keys; at 5, below the window: 7 x 5 = 35.
    assert decode_attention_flops(HYBRID, 20) == 32 * 80
    assert decode_attention_flops(HYBRID, 5) == 32 * 35
    # MLA decode: 2 x 2 heads x (18 + 16) x 2 layers x 10 keys.
    assert decode_attention_flops(MLA, 10) == 2 * 2 * 34 * 20


def test_matmul_ceiling_and_compute_dtype():
    h100, l4, a100, b200 = (get_gpu(g) for g in ("h100-sxm", "l4", "a100-sxm-80gb", "b200-hgx"))
    assert matmul_ceiling(h100, "bf16") == matmul_ceiling(h100, "fp16") == 0.803
    assert matmul_ceiling(h100, "fp8") == matmul_ceiling(h100, "int8") == 0.709
    assert (matmul_ceiling(l4, "bf16"), matmul_ceiling(l4, "fp8")) == (0.803, 0.728)  # unmeasured: medians
    assert matmul_ceiling(get_gpu("mi300x"), "fp8") == 0.728  # measured for bf16 only
    assert compute_dtype("fp8", h100) == "fp8"
    assert compute_dtype("fp8", a100) == "bf16"  # no fp8 units
    assert compute_dtype("int8", a100) == "int8"
    assert compute_dtype("awq", h100) == "bf16"  # weight-only
    assert compute_dtype("nvfp4", b200) == "fp4"
    assert compute_dtype("nvfp4", h100) == "bf16"


def test_link_bandwidth():
    h100, pcie, l40s = get_gpu("h100-sxm"), get_gpu("h100-pcie"), get_gpu("l40s")
    # NVLink 900 GB/s bidirectional: 450e9 one way within the 8-GPU domain.
    assert link_bandwidth(h100, 8, 50.0) == 450e9 and on_fast_link(h100, 8)
    # Beyond the domain and the host: the NIC, 50 GB/s, below PCIe's 64.
    assert link_bandwidth(h100, 16, 50.0) == 50e9 and not on_fast_link(h100, 9)
    # An NVLink bridge pairs two H100 PCIe cards (600 -> 300e9); four, or all 8 of a host, go through
    # PCIe 128 -> 64e9 (above the NIC's 50: the host boundary is at 8 GPUs inclusive).
    assert (link_bandwidth(pcie, 2, 50.0), link_bandwidth(pcie, 4, 50.0), link_bandwidth(pcie, 8, 50.0)) == (
        300e9,
        64e9,
        64e9,
    )
    assert link_bandwidth(pcie, 9, 50.0) == 50e9
    # No NVLink: PCIe 64 -> 32e9 within the host and beyond it (below the NIC's 50).
    assert link_bandwidth(l40s, 8, 50.0) == link_bandwidth(l40s, 9, 50.0) == 32e9
    assert not on_fast_link(l40s, 2)


def test_collectives():
    # Ring all-reduce: latency + 2 (n - 1) / n x S / B = 0.5 + 2 x 3/4 x 1000 / 100 = 15.5.
    assert allreduce_time(1000, 4, 100, 0.5) == 15.5
    assert allreduce_time(1000, 1, 100, 0.5) == 0.0
    # All-gather: (n - 1) / n x S / B = 3/4 x 10 = 7.5; 1/2 x 10 = 5.
    assert gather_time(1000, 4, 100) == 7.5
    assert gather_time(1000, 2, 100) == 5.0
    assert gather_time(1000, 1, 100) == 0.0
