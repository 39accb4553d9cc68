"""The speed model: worked examples derived by hand, the new spec fields, and the calibration's wiring.

The worked examples pin a round-number calibration (TEST below), so that a refit of the shipped figures
does not move them: GEMMs at 50% of the GPU's MAMF ceiling, HBM at 80%, attention at 50%, a 1 ms step
overhead and nothing else, and a near-max roofline (p = 64).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import run_cli
from training_jobs import training_workload, vary_workload

from gpuplan.analysis import analyse
from gpuplan.architecture import Architecture
from gpuplan.catalog import get_gpu, get_model
from gpuplan.config import default_settings
from gpuplan.estimate import roots
from gpuplan.estimate import serving_speed as serving_speed_module
from gpuplan.estimate.calibration import (
    CALIBRATION,
    Calibration,
    EngineProfile,
    ServingMechanisms,
    TrainingMechanisms,
)
from gpuplan.estimate.lengths import lognormal_square_mean
from gpuplan.estimate.performance import (
    Efficiency,
    allreduce_time,
    attention_ceiling,
    attention_dims,
    attention_flops,
    causal_pairs,
    compute_dtype,
    decode_attention_flops,
    gather_time,
    group_bandwidth,
    link_bandwidth,
    lm_head_params,
    matmul_ceiling,
    matmul_params,
    on_fast_link,
)
from gpuplan.estimate.roots import bracketed_root
from gpuplan.estimate.serving_lockstep import burst_ttft
from gpuplan.estimate.serving_speed import queue_wait_factor, serving_speed
from gpuplan.estimate.serving_workload import ServingWorkload
from gpuplan.estimate.training import REGIMES
from gpuplan.estimate.training_speed import TrainingWorkload, training_speed
from gpuplan.estimate.weights import quant_linear_bytes, routed_expert_bytes, stage_weights
from gpuplan.linter import lint_bytes
from gpuplan.loader import load_bytes
from gpuplan.rules.context import efficiency_of
from gpuplan.spec import resolve, schema_default
from tests.tiny_architectures import HYBRID, TINY

TEST = Calibration(
    engines={"generic": EngineProfile("generic", "test engine", 0.5, 0.8, 1e-3, 0.0, 0.0, False, "")},
    serving=ServingMechanisms(
        attention_efficiency=0.5,
        layer_overhead_s=0.0,
        allreduce_latency_nvlink_s=10e-6,
        allreduce_latency_pcie_s=30e-6,
        link_efficiency=0.8,
        roofline_sharpness=64,
    ),
    training=TrainingMechanisms(
        gemm_efficiency=0.5,
        attention_efficiency=0.5,
        low_precision_gemm_factor=1.0,
        kernel_launch_s=0.0,
        bandwidth_efficiency=0.8,
        link_efficiency=0.8,
        overlap=1.0,
    ),
)
LLAMA8 = get_model("llama-3.1-8b").architecture
LLAMA70 = get_model("llama-3.1-70b").architecture
H100 = get_gpu("h100-sxm")


def workload(**changes) -> ServingWorkload:
    values = dict(
        architecture=LLAMA8,
        gpu=H100,
        weights_read=LLAMA8.params * 2,
        routed_expert_bytes=0.0,
        kv_dtype_bytes=2,
        kv_capacity_bytes=1e12,
        prompt_tokens=1024,
        prompt_p90=1024,
        full_prompt=1024,
        output_tokens=128,
        concurrency=1,
        quantization="none",
        engine="generic",
        batching="static",
        tensor_parallel=1,
        pipeline_parallel=1,
        expert_parallel=1,
        arrival="closed-loop",
        endpoint="offline",
        network_gbs=50.0,
        state_dtype_bytes=2,
    )
    values.update(changes)
    return ServingWorkload(**values)


def test_counts_the_hand_derivations_use():
    # Llama 3.1 8B: 8,030,261,248 parameters; the embedding (128,256 x 4,096 = 525,336,576) is a lookup,
    # so 7,504,924,672 parameters multiply per token, the untied LM head among them.
    assert LLAMA8.params == 8_030_261_248
    assert matmul_params(LLAMA8) == 8_030_261_248 - 525_336_576 == 7_504_924_672
    # H100 SXM: 989.5 dense BF16 TFLOPS, of which mamf-finder sustains 80.3%.
    assert matmul_ceiling(H100, "bf16") == 0.803
    # Causal pairs of a 4-token prompt: 1 + 2 + 3 + 4; with a window of 2: 1 + 2 + 2 + 2.
    assert causal_pairs(0, 4) == 10
    assert causal_pairs(0, 4, window=2) == 7


# -- the shared pieces on toy decoders: FLOP counts, links, collectives -----------------------------------
# TINY (tests/tiny_architectures.py): 2 layers, hidden 8, 2 heads of 4 (one KV head), gated MLP 16,
# vocabulary 32, untied: 1,704 parameters, 256 of them the embedding (a lookup, not a matmul). HYBRID: 7
# such layers, every third full attention (2), the other 5 a sliding window of 8. TIED: TINY with the
# head tied to the embedding. MLA: 2 heads, latent 16, rope 2, nope 4, values 4.
TIED = replace(TINY, tie_embeddings=True)
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


def test_decode_step_8b_on_h100_at_batch_1():
    # bf16 weights 2 x 8,030,261,248 = 16,060,522,496 B read once per step at 3.35 TB/s x 0.8 = 2.68 TB/s:
    # 5.99273 ms. KV of one sequence at its mean context 1,024 + 128/2 = 1,088 tokens: 32 layers x 2 x 8 KV
    # heads x 128 x 2 B = 131,072 B/token -> 142,606,336 B -> 0.05321 ms. The batch-1 GEMMs (2 x 7.505e9
    # FLOPs at 989.5e12 x 0.803 x 0.5 = 397.3 TFLOP/s: 0.038 ms) and attention FLOPs hide under the reads.
    # + 1 ms step overhead = 7.04594 ms.
    speed = serving_speed(workload(), Efficiency(), TEST)
    assert speed.tpot_s * 1000 == pytest.approx(5.99273 + 0.05321 + 1.0, abs=1e-4)
    assert speed.decode_bound == "memory"


def test_decode_step_8b_on_h100_at_batch_64():
    # Weights are still read once: 5.99273 ms (the 64-token GEMMs, 2.418 ms, hide under them). The KV of 64
    # sequences is 64 x 142,606,336 B = 9.1268 GB -> 3.40552 ms (their attention FLOPs, 0.092 ms, hide).
    # + 1 ms = 10.39825 ms: 64 times the tokens for 1.48 times the step.
    speed = serving_speed(workload(concurrency=64), Efficiency(), TEST)
    assert speed.tpot_s * 1000 == pytest.approx(5.99273 + 3.40552 + 1.0, abs=1e-4)
    single = serving_speed(workload(), Efficiency(), TEST)
    assert 64 / speed.tpot_s > 40 / single.tpot_s  # decode tokens per second of the batch: 6,155 vs 142


def test_tensor_parallel_all_reduce_70b_tp4():
    # Two all-reduces per layer of 64 tokens x 8,192 hidden x 2 B = 1,048,576 B over NVLink at 900/2 GB/s
    # per direction x 0.8: ring 2 x 3/4 x 1,048,576 / 360e9 = 4.369 us + 10 us latency = 14.369 us;
    # x 2 x 80 layers = 2.2991 ms per decode step. The step with an infinitely fast link differs by it.
    tp4 = workload(architecture=LLAMA70, weights_read=LLAMA70.params * 2 / 4, tensor_parallel=4, concurrency=64)
    free_link = replace(TEST, serving=replace(TEST.serving, link_efficiency=1e12, allreduce_latency_nvlink_s=0.0))
    extra = serving_speed(tp4, Efficiency(), TEST).tpot_s - serving_speed(tp4, Efficiency(), free_link).tpot_s
    assert extra * 1000 == pytest.approx(2.2991, abs=1e-4)
    assert allreduce_time(1_048_576, 4, 360e9, 10e-6) == pytest.approx(14.369e-6, rel=1e-4)
    assert link_bandwidth(H100, 8, 50.0) == 450e9 and link_bandwidth(H100, 16, 50.0) == 50e9  # NVLink, then a NIC


def test_steady_state_1000_in_1000_out_alone():
    # One client: its prefill runs alone, then 1,000 decode steps. Prefill of 1,000 tokens: GEMMs without the
    # LM head 2 x (7,504,924,672 - 525,336,576) x 1,000 = 13.959 TFLOP at 397.28 TFLOP/s = 35.136 ms, causal
    # attention 2 x 32 heads x 256 x 32 layers x 500,500 pairs = 262.4 GFLOP -> 0.661 ms, + 1 ms = 36.797 ms.
    # Each decode step at mean context 1,500: 5.99273 + 1,500 x 131,072 / 2.68e12 (0.07336) + 1 = 7.06609 ms.
    # Tokens/s = 1,000 / (0.036797 + 1,000 x 0.00706609) = 140.79.
    alone = workload(batching="continuous", prompt_tokens=1000, prompt_p90=1000, full_prompt=1000, output_tokens=1000)
    speed = serving_speed(alone, Efficiency(), TEST)
    assert speed.ttft_single_s * 1000 == pytest.approx(36.797, abs=1e-2)
    assert speed.tpot_s * 1000 == pytest.approx(7.06609, abs=1e-4)
    assert speed.tokens_per_s == pytest.approx(140.79, abs=0.05)


def test_steady_state_1000_in_1000_out_compute_bound():
    # When every step is compute-bound the GPU's GEMM rate is shared by prompt and output tokens: each
    # request costs 1,000 prompt tokens x 2 x 6.98e9 FLOPs + 1,000 output tokens x 2 x 7.50e9 FLOPs, so the
    # output rate is 397.28e12 x 1,000 / (13.959e12 + 15.010e12) = 13,714 tokens/s, half of what counting
    # decode alone would claim. A bandwidth-rich GPU and free attention isolate the GEMM balance.
    fast_memory = replace(H100, bandwidth_tbs=1e6)
    free_attention = replace(
        TEST,
        engines={"generic": replace(TEST.engines["generic"], step_overhead_s=0.0)},
        serving=replace(TEST.serving, attention_efficiency=1e9),
    )
    loaded = workload(
        gpu=fast_memory,
        batching="continuous",
        prompt_tokens=1000,
        prompt_p90=1000,
        full_prompt=1000,
        output_tokens=1000,
        concurrency=256,
        max_batched_tokens=100_000,
        max_sequences=100_000,
    )
    assert serving_speed(loaded, Efficiency(), free_attention).tokens_per_s == pytest.approx(13_714, rel=0.01)


def test_queueing_beyond_the_kv_cache_lengthens_ttft_not_tpot():
    # Room for 10 sequences (10 x 1,088 tokens x 131,072 B): 20 clients leave 10 waiting a whole cycle each.
    room = 10 * 1088 * 131072
    fits = serving_speed(workload(concurrency=10, kv_capacity_bytes=room), Efficiency(), TEST)
    crowded = serving_speed(workload(concurrency=20, kv_capacity_bytes=room), Efficiency(), TEST)
    assert crowded.running == fits.running == pytest.approx(10)
    assert crowded.limited_by == "kv-cache"
    assert crowded.tpot_s == fits.tpot_s
    cycle = 10 / fits.tokens_per_s * 128  # seconds per wave of 10 requests
    assert crowded.ttft_s - fits.ttft_s == pytest.approx(cycle, rel=1e-9)


# An engine whose prompt pass samples no token (TurboMind's context decoder stops one token short).
DECODE_FIRST = replace(TEST, engines={"generic": replace(TEST.engines["generic"], first_token_from_decode_step=True)})


def test_first_token_from_a_decode_step_after_the_prompt_pass():
    # The pass covers 1,023 of the 1,024 prompt tokens: GEMMs without the LM head 2 x 6,979,588,096 x 1,023
    # = 14.280 TFLOP at 397.284 TFLOP/s = 35.9446 ms (the 5.99 ms weight read hides under them), causal
    # attention 2 x 32 heads x 256 x 32 layers x 523,776 pairs = 274.6 GFLOP -> 0.6912 ms, + 1 ms = 37.6359 ms.
    # Then the decode step that feeds token 1,024 and samples the first output: weights 5.99273 ms + its KV
    # 1,024 x 131,072 B / 2.68e12 = 0.05008 ms + 1 ms = 7.04281 ms. TTFT 44.6787 ms, alone and (one
    # client, static batching) under load alike.
    speed = serving_speed(workload(), Efficiency(), DECODE_FIRST)
    assert speed.ttft_single_s * 1000 == pytest.approx(37.6359 + 7.04281, abs=1e-3)
    assert speed.ttft_s * 1000 == pytest.approx(37.6359 + 7.04281, abs=1e-3)
    # A 1-token prompt has no pass at all: one decode step at context 1, 5.99273 + 0.00005 + 1 = 6.99278 ms.
    one = workload(prompt_tokens=1, prompt_p90=1, full_prompt=1)
    assert serving_speed(one, Efficiency(), DECODE_FIRST).ttft_single_s * 1000 == pytest.approx(6.99278, abs=1e-4)
    # TPOT is the same decode step either way.
    assert speed.tpot_s == serving_speed(workload(), Efficiency(), TEST).tpot_s


def test_burst_ttft_first_arrival_runs_alone_and_admission_is_serial():
    # Four clients send a 1-token prompt together to an idle replica (0.5 ms of front-end work per request).
    # The first wakes the engine and runs alone: one decode step at batch 1, 6.99278 ms, + 0.5 = 7.49278 ms.
    # The other three arrive during it and share the next step: 5.99273 + 3 x 131,072 B / 2.68e12 (0.00015)
    # + 1 = 6.99288 ms, so they see 6.99278 + 6.99288 + 0.5 = 14.48566 ms. Mean of the passes
    # (7.49278 + 3 x 14.48566) / 4 = 12.73744 ms; the front end admits them one after another, the k-th
    # after k overheads: (4 - 1) / 2 x 0.5 = 0.75 ms more on average. 13.48744 ms.
    engine = replace(DECODE_FIRST.engines["generic"], request_overhead_s=0.5e-3)
    calibration = replace(DECODE_FIRST, engines={"generic": engine})
    burst = workload(prompt_tokens=1, prompt_p90=1, full_prompt=1, concurrency=4)
    assert burst_ttft(burst, Efficiency(), calibration) * 1000 == pytest.approx(13.48744, abs=1e-4)
    # A lone request pays the pass and one overhead: the single-request TTFT.
    lone = replace(burst, concurrency=1)
    assert burst_ttft(lone, Efficiency(), calibration) == serving_speed(lone, Efficiency(), calibration).ttft_single_s


def test_a_busy_replica_makes_a_new_request_wait_half_a_step():
    # Continuous batching, 1-token prompts, 1,000 output tokens: the other client is (almost) always
    # decoding, so the replica is busy when a request arrives and it waits half of the step in flight:
    # weights 5.99273 ms + 1 ms + the KV of both sequences at the mean context 500.5 (2 x 500.5 x 131,072 B
    # / 2.68e12 = 0.04895 ms) = 7.04168 ms, half of it 3.52084 ms (the other's prompts add 1/1,000 of a
    # token per step: nothing). Then its own 1-token prefill beside the other's decode: 5.99273 + 1 +
    # 0.02448 = 7.01721 ms. 10.53805 ms; alone the replica is idle and the prefill step is 6.99278 ms.
    short = dict(batching="continuous", prompt_tokens=1, prompt_p90=1, full_prompt=1, output_tokens=1000)
    alone = serving_speed(workload(**short), Efficiency(), TEST)
    pair = serving_speed(workload(concurrency=2, **short), Efficiency(), TEST)
    assert alone.ttft_s * 1000 == pytest.approx(6.99278, abs=1e-4)
    assert pair.ttft_s * 1000 == pytest.approx(3.52084 + 7.01721, abs=1e-3)


@pytest.mark.parametrize(
    ("function", "low", "high", "root"),
    [
        (lambda x: 0.3 - x, 0.0, 1.0, 0.3),
        (lambda x: (0.5 - x) ** 3, 0.0, 1.0, 0.5),  # flat at the root: plain false position crawls
        # Off-centre and flat: false position keeps moving one end, and only the Illinois halving of the
        # other end's value gets it there (the symmetric case above lands on 0.5 in one step).
        (lambda x: (0.3 - x) ** 3, 0.0, 1.0, 0.3),
        (lambda x: 1 / (x + 0.01) - 10, 0.0, 1.0, 0.09),  # 1 / 0.1 = 10: steep at low, flat at high
        (lambda x: (0.8 - x) ** 3, 0.0, 1.0, 0.8),  # stalls false position: finished by halving
        (lambda x: 0.01 if x < 0.61 else -5.0, 0.0, 1.0, 0.61),  # an uneven jump
        (lambda x: 1.0 if x < 0.4 else -1.0, 0.0, 1.0, 0.4),  # a jump (one more prefill chunk): its location
        # False position lands on (or rounds to) an end of the bracket: halved instead.
        (lambda x: 1e-20 if x < 0.7 else -1.0, 0.3, 1.0, 0.7),
        (lambda x: 1.0 if x < 0.3 else -1e-20, 0.0, 0.7, 0.3),
        (lambda x: -x, 0.0, 1.0, 0.0),  # already <= 0 at the low end
        (lambda x: 1.0, 0.0, 1.0, 1.0),  # still >= 0 at the high end
        (lambda x: 0.5, 0.0, 1.0, 1.0),
    ],
)
def test_bracketed_root_finds_the_sign_change(function, low, high, root):
    # Within the tolerance of the sign change, on its non-negative side, never evaluated outside the
    # bracket, and one of the points evaluated; the (0.8 - x)^3 case stalls false position for all its
    # steps and is finished by halving.
    seen: list[float] = []

    def recorded(x: float) -> float:
        seen.append(x)
        return function(x)

    found = bracketed_root(recorded, low, high)
    assert found == pytest.approx(root, abs=2e-9)
    assert function(found) >= 0
    assert all(low <= x <= high for x in seen)
    assert found in seen  # the steady state reads the balance it computed there


def test_bracketed_root_stops_once_within_the_tolerance():
    # A jump like one more prefill chunk: the bracket shrinks to 1e-9 within 30-odd evaluations and the
    # search stops there, rather than running all ROOT_STEPS (the speed model solves thousands of these).
    calls = []

    def jump(x: float) -> float:
        calls.append(x)
        return 1.0 if x < 0.4 else -1.0

    assert bracketed_root(jump, 0.0, 1.0) == pytest.approx(0.4, abs=2e-9)
    assert len(calls) <= 50


def test_overloaded_steady_state_is_converged(monkeypatch):
    # 8,000-token prompts from 512 clients through a 2,048-token budget: the budget is the bottleneck and
    # the prefill queue is long (the regime where a damped iteration used to stop unconverged). A bracket
    # a million times narrower moves nothing beyond that tolerance.
    heavy = workload(
        batching="continuous",
        prompt_tokens=8000,
        prompt_p90=8000,
        full_prompt=8000,
        output_tokens=64,
        concurrency=512,
        max_batched_tokens=2048,
        max_sequences=512,
    )
    shipped = serving_speed(heavy, Efficiency(), TEST)
    monkeypatch.setattr(roots, "PHI_TOLERANCE", 1e-15)
    tighter = serving_speed(heavy, Efficiency(), TEST)
    for field in ("ttft_s", "tpot_s", "tokens_per_s"):
        assert getattr(tighter, field) == pytest.approx(getattr(shipped, field), rel=1e-6)
    assert shipped.ttft_s > 10 * shipped.ttft_single_s  # overloaded indeed: the queue dominates


def test_prompt_length_spread_lengthens_the_queue_for_the_budget():
    # Pollaczek-Khinchine: at rho = 0.5 a fixed prompt length waits 0.5 / (2 x 0.5) = 0.5 services, so a
    # prefill takes 1.5 services; prompts whose E[P^2] is twice E[P]^2 wait twice as long: 2.0 services.
    assert queue_wait_factor(0.5, 1.0) == pytest.approx(1.5)
    assert queue_wait_factor(0.5, 2.0) == pytest.approx(2.0)
    assert queue_wait_factor(0.0, 3.0) == 1.0 and queue_wait_factor(1.0, 1.0) == float("inf")
    # Through the model: the same mean prompt with a p90 of 1.5 x the mean under a loaded budget queues
    # longer than a fixed length, and so reaches its first token later. The lognormal through both:
    # ln 1.5 = 0.40547 = 1.28155 sigma - sigma^2 / 2 -> sigma = 1.28155 - sqrt(1.64237 - 0.81093) = 0.36972,
    # E[P^2] / E[P]^2 = exp(sigma^2) = exp(0.13669) = 1.1465.
    loaded = dict(batching="continuous", concurrency=64, max_batched_tokens=2048, prompt_tokens=1024, full_prompt=1024)
    fixed = serving_speed(workload(prompt_p90=1024, **loaded), Efficiency(), TEST)
    spread = serving_speed(workload(prompt_p90=1536, **loaded), Efficiency(), TEST)
    assert lognormal_square_mean(1024, 1536) / 1024**2 == pytest.approx(1.1465, abs=1e-4)
    assert spread.ttft_s > fixed.ttft_s


def test_fp8_kv_halves_the_kv_read():
    # At batch 64 the KV read was 3.40552 ms in bf16; in fp8 it is half: 1.70276 ms.
    bf16 = serving_speed(workload(concurrency=64), Efficiency(), TEST).tpot_s
    fp8 = serving_speed(workload(concurrency=64, kv_dtype_bytes=1), Efficiency(), TEST).tpot_s
    assert (bf16 - fp8) * 1000 == pytest.approx(1.70276, abs=1e-4)


def test_moe_decode_reads_only_the_experts_the_batch_touches():
    # Mixtral 8x7B, 2 of 8 experts per token: one token touches 2/8 of the routed experts per layer; 64 tokens
    # touch 8 x (1 - (6/8)^64), effectively all 8.
    mixtral = get_model("mixtral-8x7b").architecture
    experts = routed_expert_bytes(mixtral, "none", 2)
    assert experts == 32 * 8 * 3 * 4096 * 14336 * 2
    # weights_read is what every step reads: all weights but the routed experts.
    base = workload(architecture=mixtral, weights_read=mixtral.params * 2 - experts, routed_expert_bytes=experts)
    one = serving_speed(base, Efficiency(), TEST).decode_bytes_per_step
    kv_one = 1088 * 32 * 2 * 8 * 128 * 2
    assert one - kv_one == pytest.approx(mixtral.params * 2 - experts * 6 / 8, rel=1e-9)


def test_sliding_window_layers_read_at_most_the_window():
    # Gemma 2 9B: half its 42 layers attend within 4,096 tokens, so at a 32k context those 21 layers read
    # 4,096 tokens of KV and the other 21 the full 32,768 + 64.
    gemma = get_model("gemma-2-9b").architecture
    long = workload(architecture=gemma, weights_read=gemma.params * 2, prompt_tokens=32768, full_prompt=32768)
    per_token_layer = 2 * 8 * 256 * 2
    kv = 21 * (32768 + 64) * per_token_layer + 21 * 4096 * per_token_layer
    read = serving_speed(long, Efficiency(), TEST).decode_bytes_per_step - gemma.params * 2
    assert read == pytest.approx(kv, rel=1e-9)
    assert attention_flops(gemma, 0, 8192) < 2 * 16 * 512 * 42 * causal_pairs(0, 8192)


def test_prompt_distribution_raises_the_attention_work():
    # A lognormal with p90 = 2 x mean: ln 2 = 1.28155 sigma - sigma^2 / 2 gives sigma = 1.28155 -
    # sqrt(1.28155^2 - 2 ln 2) = 0.7755, so E[P^2] = mean^2 x exp(0.6014) = 1.8247 x mean^2 (a fixed length:
    # mean^2). Attention of such traffic costs 82% more than the mean prompt suggests.
    assert lognormal_square_mean(1000, 1000) == pytest.approx(1e6)
    assert lognormal_square_mean(1000, 2000) == pytest.approx(1.8247e6, rel=1e-4)


def test_fp4_block_formats_carry_their_scales():
    # NVFP4: 4 bits + one fp8 scale per 16 values = 4.5 bits; MXFP4: 4 bits + one e8m0 scale per 32 = 4.25.
    assert quant_linear_bytes("nvfp4") == 4.5 / 8
    assert quant_linear_bytes("mxfp4") == 4.25 / 8
    # Only B200/GB200 have FP4 tensor cores: 9 and 10 dense PFLOPS; elsewhere FP4 weights compute in bf16.
    assert get_gpu("b200-hgx").peak_flops("fp4") == 9000e12
    assert H100.peak_flops("fp4") == H100.peak_flops("bf16")


def test_expert_parallel_holds_whole_experts():
    # Mixtral 8x7B bf16 on 8 GPUs: TP 8 gives every GPU 1/8 of each expert; EP 8 gives it one whole expert:
    # the same bytes. EP 3 (8 experts do not split evenly) puts ceil(8/3) = 3 experts on the busiest GPU.
    mixtral = get_model("mixtral-8x7b").architecture
    experts = routed_expert_bytes(mixtral, "none", 2)
    tp8 = per_gpu_weights(mixtral, "none", 2, 8, 1)
    assert per_gpu_weights(mixtral, "none", 2, 8, 1, ep=8) == pytest.approx(tp8)
    assert per_gpu_weights(mixtral, "none", 2, 8, 1, ep=4) - tp8 == pytest.approx(experts * (2 / 8 - 1 / 8))
    assert per_gpu_weights(mixtral, "none", 2, 1, 1, ep=3) == pytest.approx(
        per_gpu_weights(mixtral, "none", 2, 1, 1) - experts + experts * 3 / 8
    )


def per_gpu_weights(*args, **kwargs) -> float:
    """Weights on the most loaded GPU (one stage at PP 1)."""
    return max(stage_weights(*args, **kwargs))


TRAINING = training_workload(
    LLAMA8,
    H100,
    LLAMA8.params,
    10**9,
    method="full",
    precision="bf16",
    optimizer="adamw",
    checkpointing=False,
    seq_len=4096,
    micro_batch=1,
    gradient_accumulation=1,
    sharding="none",
)


def training(**changes) -> TrainingWorkload:
    return vary_workload(TRAINING, **changes)


# The eager layers' elementwise traffic of Llama-3.1-8B in bf16, full fine-tuning (gpuplan/estimate/kernels.py,
# h = q = 4,096, kv = 1,024, i = 14,336, 2-byte stream and activations, trained norm weights), per token and
# layer. Forward: two RMSNorms at 36 B per element (72h), two residual adds at 6 B (12h), rotary 20 B over q
# and over k (20q + 20kv), repeat_kv's copies of K and V 4 (kv + q), SiLU and the product 10 B over i:
# 84h + 24q + 24kv + 10i = 610,304 B. Backward: the norms 84 B each (168h), the residual sums 12h, rotary 30 B
# (30q + 30kv), repeat_kv's sums 4 (q + kv), the MLP's 18i, and the input gradients of q/k/v and gate/up summed
# (3 adds of 6 B: 18h): 198h + 34q + 34kv + 18i = 1,243,136 B. Over 32 layers x 4,096 tokens (131,072):
# 8.0e10 + 1.6294e11 = 2.4293e11 B at 3.35 TB/s x 0.8 = 2.68 TB/s: 0.029848 + 0.060797 = 0.090645 s. The eager
# loss moves 36 B per logit (upcast 6, log_softmax 8, its zero-filled gradient 4, backward 12, the cast back
# 6): 36 x 128,256 x 4,096 = 1.8912e10 B = 7.0568 ms.
EAGER_LAYERS_8B = 0.090645
EAGER_LAYERS_FORWARD_8B = 0.029848
EAGER_LOSS_8B = 0.0070568


def test_training_step_8b_on_one_h100():
    # GEMMs 3 x 2 x 7,504,924,672 x 4,096 = 1.8444e14 FLOPs at 989.5 x 0.803 x 0.5 = 397.28 TFLOP/s =
    # 0.46426 s; causal attention 3 x 524,288 x 8,390,656 pairs = 1.3197e13 at FlashAttention-2's H100
    # ceiling, 989.5 x 0.35 x 0.5 = 173.16 TFLOP/s -> 0.076212 s; the eager layers and loss (above) 0.090645
    # + 0.0070568 s; pure-bf16 AdamW moves 14 B x 8.03e9 parameters = 41.95 ms. Step 0.680124 s: 4,096 /
    # 0.680124 = 6,022 tokens/s.
    speed = training_speed(training(), Efficiency(), TEST)
    assert speed.step_s == pytest.approx(0.46426 + 0.076212 + EAGER_LAYERS_8B + EAGER_LOSS_8B + 0.04195, abs=2e-4)
    assert speed.tokens_per_s == pytest.approx(6022, abs=3)


def test_recompute_costs_time_not_model_flops():
    # Checkpointing replays the forward at the same rates: 2 x 7.505e9 x 4,096 = 6.1481e13 GEMM FLOPs at
    # 397.28 TFLOP/s = 0.154755 s, plus 4.399e12 attention FLOPs at 173.16 TFLOP/s = 0.025404 s, plus the
    # eager layers' forward bytes again (0.029848 s, above): 0.210008 s. The step grows by it, the model
    # FLOPs per token do not, so MFU falls by the same ratio.
    plain, recomputed = (training_speed(training(checkpointing=c), Efficiency(), TEST) for c in (False, True))
    assert recomputed.step_s - plain.step_s == pytest.approx(0.18016 + EAGER_LAYERS_FORWARD_8B, abs=1e-4)
    assert recomputed.flops_per_token == plain.flops_per_token
    assert recomputed.mfu / plain.mfu == pytest.approx(plain.step_s / recomputed.step_s)


def test_fsdp_moves_three_times_the_parameter_bytes_ddp_two():
    # 8 x H100 in one NVLink domain, nothing hidden (overlap 0): DDP all-reduces bf16 gradients once,
    # 2 x 7/8 x 16.0605 GB / (450 GB/s x 0.8) = 78.07 ms; FSDP gathers the parameters twice and
    # reduce-scatters the gradients on every micro-batch: 3 x 7/8 x 16.0605 GB / 360 GB/s = 117.11 ms.
    exposed = replace(TEST, training=replace(TEST.training, overlap=0.0))
    ddp = training_speed(training(gpus=8), Efficiency(), exposed).gradient_sync_s
    fsdp = training_speed(training(gpus=8, sharding="fsdp"), Efficiency(), exposed).gradient_sync_s
    assert ddp * 1000 == pytest.approx(78.07, abs=0.05)
    assert fsdp * 1000 == pytest.approx(117.11, abs=0.05)
    # With the calibrated overlap the compute hides it: the reported sync is only the exposed part.
    assert training_speed(training(gpus=8, sharding="fsdp"), Efficiency(), TEST).gradient_sync_s == 0.0


def test_fp8_mixed_runs_gemms_at_the_fp8_rate_where_the_gpu_has_it():
    h100 = training_speed(training(precision="fp8-mixed"), Efficiency(), TEST).step_s
    assert h100 < training_speed(training(precision="bf16-mixed"), Efficiency(), TEST).step_s
    a100 = get_gpu("a100-sxm-80gb")
    without_units = training_speed(training(precision="fp8-mixed", gpu=a100), Efficiency(), TEST).step_s
    assert without_units == pytest.approx(
        training_speed(training(precision="bf16-mixed", gpu=a100), Efficiency(), TEST).step_s
    )
    # Memory: fp8-mixed keeps bf16-mixed's fp32 master weights, gradients and states.
    assert REGIMES["fp8-mixed"] == REGIMES["bf16-mixed"]


def test_attention_runs_at_flashattention_s_ceiling_on_each_gpu():
    # FlashAttention-2 reaches 73% of A100's peak but 35% of H100's: its attention rate is 312 x 0.73 =
    # 227.8 TFLOP/s on A100 and 989.5 x 0.35 = 346.3 on H100, 1.52x, while GEMMs gain 989.5 x 0.803 /
    # (312 x 0.869) = 2.93x. A GPU without a measurement (B200) takes its MAMF ceiling x the lower measured
    # ratio, H100's 0.35 / 0.803 = 0.43587: 0.776 x 0.43587 = 0.33823.
    a100 = get_gpu("a100-sxm-80gb")
    assert attention_ceiling(a100) * a100.peak_flops("bf16") == pytest.approx(227.76e12)
    assert attention_ceiling(H100) * H100.peak_flops("bf16") == pytest.approx(346.325e12)
    assert attention_ceiling(get_gpu("b200-hgx")) == pytest.approx(0.33823, abs=1e-5)

    # So 32k-token sequences, where attention dominates, gain less from H100 than 2k-token ones do.
    def h100_gain(seq_len: int) -> float:
        runs = [training_speed(training(gpu=g, seq_len=seq_len), Efficiency(), TEST) for g in (a100, H100)]
        return runs[1].tokens_per_s / runs[0].tokens_per_s

    assert h100_gain(32768) < h100_gain(2048)


def test_the_attention_kernel_sets_the_attention_ceiling():
    # On H100: FlashAttention-3 75%; cuDNN fused attention (Transformer Engine's choice on Hopper) 35% x 1.75 =
    # 61.25%. FlashAttention-3 does not exist for A100: it keeps FlashAttention-2's 73% there.
    a100 = get_gpu("a100-sxm-80gb")
    assert attention_ceiling(H100, "flash3") == 0.75
    assert attention_ceiling(H100, "cudnn") == pytest.approx(0.6125)
    assert attention_ceiling(a100, "flash3") == attention_ceiling(a100, "cudnn") == 0.73
    assert attention_ceiling(H100, "eager") == 0.35  # timed as FlashAttention-2
    # The 8B step on one H100 (test_training_step_8b_on_one_h100) with cuDNN attention: 1.3197e13 FLOPs at
    # 989.5 x 0.6125 x 0.5 = 303.03 TFLOP/s = 0.043550 s instead of 0.076212 s; nothing else changes.
    cudnn = training_speed(training(attention="cudnn"), Efficiency(), TEST)
    assert cudnn.step_s == pytest.approx(0.46426 + 0.043550 + EAGER_LAYERS_8B + EAGER_LOSS_8B + 0.04195, abs=2e-4)


def test_attention_kernel_is_a_finetune_field_that_changes_speed_not_memory(tmp_path):
    def finetune(attention: str):
        text = FINETUNE.replace("HARDWARE", "").replace(
            "  method: full", f"  method: full\n  seq_len: 32768\n  attention: {attention}"
        )
        spec, findings = resolve(load_bytes("t.yaml", text.encode()), tmp_path)
        assert spec is not None and spec.finetune is not None, findings
        estimate = analyse(spec).finetune
        assert estimate is not None and estimate.speed is not None
        return estimate

    flash, cudnn = finetune("flash"), finetune("cudnn")
    assert cudnn.workload.setup.job.attention == "cudnn"
    assert cudnn.memory.per_gpu == flash.memory.per_gpu
    assert cudnn.speed.tokens_per_s > flash.speed.tokens_per_s


def test_data_parallel_across_nodes_moves_at_the_node_network_bandwidth():
    # Two DGX H100 nodes (16 GPUs, 8 per node, one 400 Gb/s = 50 GB/s NIC each): a data-parallel ring over
    # all 16 runs one ring per NIC, so 8 x 50 = 400 GB/s per GPU (below NVLink's 450); at 200 Gb/s per GPU
    # (llm-foundry's 1,600 Gb/s per node) 200 GB/s. Under TP 8 each DP group has one GPU per node: 50 GB/s.
    assert group_bandwidth(H100, 16, 1, 50.0) == pytest.approx(400e9)
    assert group_bandwidth(H100, 16, 1, 25.0) == pytest.approx(200e9)
    assert group_bandwidth(H100, 2, 8, 50.0) == pytest.approx(50e9)
    assert group_bandwidth(H100, 8, 1, 25.0) == link_bandwidth(H100, 8, 25.0)  # one node: NVLink, no network
    # FSDP on 16 GPUs, nothing hidden: 3 x 15/16 x 16.0605 GB / (400 GB/s x 0.8) = 141.16 ms per micro-batch;
    # at 200 Gb/s per GPU twice that.
    exposed = replace(TEST, training=replace(TEST.training, overlap=0.0))
    fsdp = training(gpus=16, sharding="fsdp")
    assert training_speed(fsdp, Efficiency(), exposed).gradient_sync_s * 1000 == pytest.approx(141.16, abs=0.05)
    slow = vary_workload(fsdp, network_gbs=25.0)
    assert training_speed(slow, Efficiency(), exposed).gradient_sync_s * 1000 == pytest.approx(282.32, abs=0.1)


FINETUNE = """\
version: 1
name: network
model: {id: llama-3.1-8b}
finetune:
  method: full
  sharding: fsdp
  tokens: 1000000000
  hardware: {gpu: h100-sxm, count: 32HARDWARE}
"""


def test_network_gbps_is_a_hardware_field_with_the_schema_default(tmp_path):
    def finetune(hardware: str):
        document = load_bytes("t.yaml", FINETUNE.replace("HARDWARE", hardware).encode())
        spec, findings = resolve(document, tmp_path)
        assert spec is not None and spec.finetune is not None, findings
        estimate = analyse(spec).finetune
        assert estimate is not None and estimate.speed is not None
        return spec.finetune.hardware, estimate

    hardware, default = finetune("")
    assert hardware.network_gbps == schema_default("finetune", "hardware", "network_gbps") == 400
    assert default.workload.setup.job.hardware.network_gbs == 50.0  # 400 Gb/s = 50 GB/s
    _, slow = finetune(", network_gbps: 100")
    assert slow.workload.setup.job.hardware.network_gbs == 12.5
    assert slow.speed.tokens_per_s <= default.speed.tokens_per_s


def test_threshold_overrides_replace_the_calibrated_figures():
    assert default_settings().prefill_mfu is None and efficiency_of(default_settings()) == Efficiency()
    slow = serving_speed(workload(concurrency=64), Efficiency(decode_bandwidth=0.4), TEST).tpot_s
    assert (slow - 1e-3) == pytest.approx(
        2 * (serving_speed(workload(concurrency=64), Efficiency(), TEST).tpot_s - 1e-3)
    )
    # training_mfu fixes the utilisation of all compute: 6N + attention at 35% of 989.5 TFLOP/s, the
    # optimizer step (41.95 ms) on top.
    fixed = training_speed(training(), Efficiency(training_mfu=0.35), TEST)
    compute = fixed.flops_per_token * 4096 / (989.5e12 * 0.35)
    assert fixed.step_s == pytest.approx(compute + 0.04195, abs=2e-4)


def test_every_configured_efficiency_reaches_the_estimator():
    # Each of the three configured figures arrives in the Efficiency the estimator and the planner use;
    # unset, each stays None (the calibrated figures apply).
    configured = replace(default_settings(), prefill_mfu=0.31, decode_bandwidth=0.62, training_mfu=0.27)
    efficiency = efficiency_of(configured)
    assert (efficiency.prefill_mfu, efficiency.decode_bandwidth, efficiency.training_mfu) == (0.31, 0.62, 0.27)
    unset = efficiency_of(default_settings())
    assert (unset.prefill_mfu, unset.decode_bandwidth, unset.training_mfu) == (None, None, None)


SPEC = """\
version: 1
name: speed
model: {{id: {model}}}
serve:
  context: 4096
  output_tokens: 256
  concurrency: 16
{extra}  hardware: {{gpu: h100-sxm, count: {count}, tensor_parallel: {tp}{hw}}}
"""


def lint(model="llama-3.1-8b", extra="", count=1, tp=1, hw=""):
    return lint_bytes("s.yaml", SPEC.format(model=model, extra=extra, count=count, tp=tp, hw=hw).encode())


def test_new_serve_fields_resolve_and_change_the_estimate():
    plain = lint()
    tuned = lint(
        extra="  engine: trtllm\n  batching: static\n  prompt_tokens: {mean: 1000, p90: 3000}\n"
        "  max_batched_tokens: 4096\n  max_sequences: 8\n  quantization: nvfp4\n"
    )
    assert not [f for f in plain.findings if f.severity.value == "error"]
    spec = tuned.analysis.spec.serve
    assert (spec.engine, spec.batching, spec.prompt_mean, spec.prompt_p90) == ("trtllm", "static", 1000, 3000)
    assert tuned.analysis.serve.speed.running == 8  # max_sequences caps the 16 clients
    assert tuned.analysis.serve.speed.engine == "trtllm"
    assert tuned.analysis.serve.memory.weights < plain.analysis.serve.memory.weights


def test_answers_that_vary_resolve_and_are_stated_as_an_assumption():
    plain = lint(extra="  prompt_tokens: {mean: 1000}\n")
    varied = lint(extra="  prompt_tokens: {mean: 1000}\n  output_tokens_p90: 700\n")
    assert not [f for f in varied.findings if f.severity.value == "error"]
    assert (plain.analysis.spec.serve.output_p90, varied.analysis.spec.serve.output_p90) == (None, 700)
    # 16 clients, concurrency-bound either way: the same sequences run, each holding more KV, read every step
    assert varied.analysis.serve.speed.running == plain.analysis.serve.speed.running == 16
    assert varied.analysis.serve.speed.tpot_s > plain.analysis.serve.speed.tpot_s
    notes = " ".join(text for _, text in varied.analysis.serve.assumptions)
    assert "answers of mean 256, p90 700 tokens (a lognormal, none longer than 3,096)" in notes
    # A p90 past 2.27 x the mean (256 x 2.273 = 582) is beyond any lognormal of that mean: said, as is how
    # long a static batch of 16 decodes. Its classes (tokens at the cumulative share: 53 to 0.5, 182 to 0.75,
    # 402 to 0.9, 795 to 0.96, 1,511 to 0.99, 3,070 to 0.998, 3,096 to 1) and F^16 at those shares (1.5e-5,
    # 0.01002, 0.18530, 0.52040, 0.85146, 0.96848, 1): 1.8 + 70.5 + 266.4 + 500.2 + 359.3 + 97.6 = 1,296.
    wide = lint(extra="  batching: static\n  prompt_tokens: {mean: 1000}\n  output_tokens_p90: 2000\n")
    notes = " ".join(text for _, text in wide.analysis.serve.assumptions)
    assert "no lognormal of that mean has a p90 above 582: the spread is held at that" in notes
    assert "a static batch of 16 decodes until its longest answer ends: 1,296 tokens on average" in notes


@pytest.mark.parametrize(
    "extra, hw, model, count, code, pointer",
    [
        ("", ", expert_parallel: 2", "mixtral-8x7b", 3, "GP023", "/serve/hardware/expert_parallel"),
        ("", ", expert_parallel: 3", "mixtral-8x7b", 4, "GP023", "/serve/hardware/expert_parallel"),
        ("", ", expert_parallel: 2", "llama-3.1-8b", 2, "GP023", "/serve/hardware/expert_parallel"),
        ("", ", expert_parallel: 16", "mixtral-8x7b", 16, "GP023", "/serve/hardware/expert_parallel"),
        ("  prompt_tokens: {mean: 2000, p90: 1000}\n", "", "llama-3.1-8b", 1, "GP024", "/serve/prompt_tokens/p90"),
        ("  prompt_tokens: {mean: 4000}\n", "", "llama-3.1-8b", 1, "GP024", "/serve/prompt_tokens/mean"),
        # answers' p90 below their mean (256), with no prompt_tokens to leave room for longer answers, and
        # longer than the 4,096 - 3,800 = 296 tokens the mean prompt leaves
        ("  output_tokens_p90: 100\n", "", "llama-3.1-8b", 1, "GP024", "/serve/output_tokens_p90"),
        ("  output_tokens_p90: 4096\n", "", "llama-3.1-8b", 1, "GP024", "/serve/output_tokens_p90"),
        ("  output_tokens_p90: 600\n", "", "llama-3.1-8b", 1, "GP024", "/serve/output_tokens_p90"),
        (
            "  prompt_tokens: {mean: 3800}\n  output_tokens_p90: 600\n",
            "",
            "llama-3.1-8b",
            1,
            "GP024",
            "/serve/output_tokens_p90",
        ),
        ("  engine: tgi\n", "", "llama-3.1-8b", 1, "GP105", "/serve/engine"),
        # a prompt p90 longer than the 4,096 - 256 = 3,840 tokens the context leaves beside the answer
        ("  prompt_tokens: {mean: 1000, p90: 3841}\n", "", "llama-3.1-8b", 1, "GP024", "/serve/prompt_tokens/p90"),
        # static batching is estimated for a closed loop: a stream's or a burst's static batches are not
        ("  batching: static\n  arrival: steady\n  rate_rps: 1\n", "", "llama-3.1-8b", 1, "GP024", "/serve/batching"),
        ("  batching: static\n  arrival: burst\n", "", "llama-3.1-8b", 1, "GP024", "/serve/batching"),
    ],
)
def test_inconsistent_speed_fields_are_findings_at_the_field(extra, hw, model, count, code, pointer):
    result = lint(model=model, extra=extra, count=count, hw=hw)
    codes = {(f.code, f.pointer) for f in result.findings}
    assert (code, pointer) in codes, result.findings
    assert result.analysis is None


def test_expert_parallel_is_rejected_for_fine_tuning(tmp_path):
    spec = tmp_path / "ft.yaml"
    spec.write_text(
        "version: 1\nname: ft\nmodel: {id: mixtral-8x7b}\nfinetune:\n  method: lora\n"
        "  hardware: {gpu: h100-sxm, count: 8, expert_parallel: 8}\n"
    )
    code, out, _ = run_cli("lint", str(spec))
    assert code == 1
    assert "GP023" in out and "serving only" in out


def test_estimate_prints_engine_bands_and_the_single_request_ttft(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.format(model="llama-3.1-8b", extra="  engine: sglang\n", count=1, tp=1, hw=""))
    code, out, _ = run_cli("estimate", str(spec))
    assert code == 0
    assert "SGLang" in out and "(alone" in out and "output tokens/s" in out
    # Each speed figure's band under the job's load shape (closed-loop by default), and its basis.
    assert out.count("measured runs (closed-loop) not used to tune the model") == 3
    code, out, _ = run_cli("estimate", "--format", "json", str(spec))
    assert code == 0
    assert '"engine": "sglang"' in out and '"ttft_single_ms"' in out and '"tpot_ms_band"' in out


def test_calibrated_analysis_uses_the_engine_the_spec_names():
    base = lint().analysis.spec
    vllm = analyse(base, calibration=CALIBRATION).serve
    assert vllm is not None and vllm.speed.engine == "vllm"
    assert set(CALIBRATION.engines) == {"vllm", "sglang", "trtllm", "lmdeploy", "generic"}


def test_every_steady_state_of_the_examples_solves_in_few_balances(monkeypatch):
    # The speed model solves a root per layout the planner tries (thousands in a large repository's lint,
    # 36 for the examples). Illinois false position needs at most 11 balances on each of the examples'
    # roots today (superlinear on these monotone shares with jumps); a solver whose halving broke would
    # crawl to the step limit and finish by halving, with the same answer and over 100 balances a root,
    # so the count is what this pins.
    from gpuplan.linter import LintOptions, lint_bytes

    counts: list[int] = []
    original = serving_speed_module.bracketed_root

    def counted(function, low, high):
        calls = [0]

        def wrapped(x):
            calls[0] += 1
            return function(x)

        result = original(wrapped, low, high)
        counts.append(calls[0])
        return result

    monkeypatch.setattr(serving_speed_module, "bracketed_root", counted)
    examples = Path(__file__).resolve().parent.parent / "examples"
    for example in sorted(examples.rglob("*.yaml")):
        lint_bytes(str(example), example.read_bytes(), LintOptions())
    assert len(counts) > 30 and max(counts) <= 20, (len(counts), max(counts))


def test_tensor_parallelism_beyond_a_node_moves_at_the_specs_network():
    # TP 16 over two DGX H100 nodes, the test calibration (link efficiency 0.8, recompute off, one
    # micro-batch of 4,096 tokens): four all-reduces per layer of 4,096 x 4,096 x 2 B = 33,554,432 B, each
    # 2 x 15/16 x S / (min(PCIe's 64, network) GB/s x 0.8). At 50 GB/s per GPU: 32 layers x 4 x
    # 1.572864 ms = 201.33 ms; at 25 GB/s twice that. Before, TP ignored the spec's network (always 50).
    fast = training_speed(training(gpus=16, tensor_parallel=16, network_gbs=50.0), Efficiency(), TEST)
    slow = training_speed(training(gpus=16, tensor_parallel=16, network_gbs=25.0), Efficiency(), TEST)
    per_all_reduce = 2 * 15 / 16 * 33_554_432 / (50e9 * 0.8)
    assert per_all_reduce * 1000 == pytest.approx(1.572864)
    assert (slow.step_compute_s - fast.step_compute_s) * 1000 == pytest.approx(32 * 4 * per_all_reduce * 1000)


def test_bridged_pcie_cards_in_one_host_sync_over_pcie_not_the_network():
    # 4 H100 PCIe in one host, bridged in pairs: a ring over all 4 crosses between pairs on PCIe (64 GB/s
    # one direction), not on the network. The estimate once took each bridged pair for a node and charged
    # 2 NICs x 50 GB/s = 100 GB/s, more than the host's own PCIe link carries.
    pcie = get_gpu("h100-pcie")
    assert group_bandwidth(pcie, 4, 1, 50.0) == pytest.approx(64e9)
    assert group_bandwidth(pcie, 2, 1, 50.0) == pytest.approx(300e9)  # one bridged pair: NVLink
    assert group_bandwidth(pcie, 16, 1, 50.0) == pytest.approx(64e9)  # 2 hosts: 8 NICs each, PCIe-bound
    # A data-parallel pair under TP 4 on H200 NVL (bridged in fours, 8 per host): ranks 0 and 4 sit on
    # different bridges of one host, so they meet over PCIe, 64 GB/s; under TP 2 ranks 0 and 2 share a bridge.
    nvl = get_gpu("h200-nvl")
    assert group_bandwidth(nvl, 2, 4, 50.0) == pytest.approx(64e9)
    assert group_bandwidth(nvl, 2, 2, 50.0) == pytest.approx(450e9)
    # TP 2 x DP 8 over two hosts of H100 PCIe: a data-parallel group has 8 / 2 = 4 members per host, so 4 NICs
    # (4 x 50 = 200 GB/s) carry its ring, capped by the PCIe link those 4 ranks 2 apart span in a host (they
    # sit on 4 different bridges): 64 GB/s, not a bridge's 300.
    assert group_bandwidth(pcie, 8, 2, 50.0) == 64e9


def test_a_group_with_one_member_per_node_reaches_the_network_through_pcie():
    # DP 2 under TP 8 on two DGX H100: one member per node, so one NIC, reached through the GPU's own PCIe
    # x16 (128 GB/s both ways: 64 one way). An 800 Gb/s (100 GB/s) NIC is held to 64 GB/s; a 400 Gb/s one
    # (50 GB/s) is the limit itself.
    assert group_bandwidth(H100, 2, 8, 100.0) == 64e9
    assert group_bandwidth(H100, 2, 8, 50.0) == 50e9


def test_a_rack_scale_nvlink_domain_is_one_node():
    # GB200 NVL72: 72 GPUs on one NVLink domain. A 16-GPU ring stays on NVLink (1,800 GB/s both ways: 900
    # one way); over 128 GPUs under TP 16, a rack holds 72 // 16 = 4 whole TP groups, so each data-parallel
    # group has 4 members (and NICs) per rack: 4 x 50 = 200 GB/s, under NVLink.
    gb200 = get_gpu("gb200")
    assert group_bandwidth(gb200, 16, 1, 50.0) == 900e9
    assert group_bandwidth(gb200, 8, 16, 50.0) == 200e9


def test_the_70b_offload_example_pays_for_its_cpu_optimizer_step():
    # examples/finetune-70b-fsdp-offload.yaml: Llama-3.1-70B (70,553,706,496 parameters), full bf16-mixed
    # AdamW, FSDP over 8 x H100 SXM, the optimizer offloaded to the CPU, 200M tokens of 4,096 per step
    # and GPU. Each GPU steps its 70,553,706,496 / 8 = 8,819,213,312 parameters: 30 B each (fp32 master
    # read and written 8, fp32 gradient 4, two fp32 states read and written 16, the bf16 copy written 2)
    # = 264,576,399,360 B, through its share of the host's 614.4 GB/s (offload.host_memory_gbs, default):
    # 76.8 GB/s, 3.4450052 s. The GPU no longer streams those bytes at 3.35 TB/s x the calibrated HBM
    # share. The copies move at PCIe 5.0's 64 GB/s each way: the fp32 gradients out, 35.3 GB in 0.55 s,
    # behind the 2.9 s backward; the bf16 parameters back, 17.6 GB in 0.28 s, beside the CPU step.
    path = Path(__file__).resolve().parent.parent / "examples" / "finetune-70b-fsdp-offload.yaml"
    spec = lint_bytes(str(path), path.read_bytes()).analysis.spec
    offloaded = analyse(spec).finetune
    plain = analyse(replace(spec, finetune=replace(spec.finetune, offload_optimizer="none"))).finetune
    moved = 70_553_706_496 // 8 * 30
    assert moved == 264_576_399_360
    cpu_step = moved / (614.4e9 / 8)
    assert cpu_step == pytest.approx(3.4450052, rel=1e-7)
    gpu_pass = moved / (3.35e12 * CALIBRATION.training.bandwidth_efficiency)
    assert offloaded.speed.host_step_s == pytest.approx(cpu_step, rel=1e-12)
    assert offloaded.speed.offload_s == pytest.approx(cpu_step, rel=1e-12)
    assert offloaded.speed.step_s - plain.speed.step_s == pytest.approx(cpu_step - gpu_pass, rel=1e-9)
    # The run: 200,000,000 tokens at 8 x 4,096 tokens per step; the cost at 4.12 USD per GPU-hour (the
    # catalog median the example prices at).
    steps = 200_000_000 / (8 * 4_096)
    assert offloaded.hours == pytest.approx(steps * offloaded.speed.step_s / 3600, rel=1e-12)
    assert offloaded.hours - plain.hours == pytest.approx(steps * (cpu_step - gpu_pass) / 3600, rel=1e-9)
    assert offloaded.cost == pytest.approx(offloaded.hours * 8 * offloaded.price_per_hour, rel=1e-12)
    assert offloaded.price_per_hour == 4.12
    # The planner prices the declared layout with the same speed.
    code, out, _ = run_cli("plan", str(path))
    assert code == 0
    assert f"declared     8 x h100-sxm, {offloaded.cost:,.0f} USD/run" in out


def test_a_request_rate_too_small_to_mean_traffic_is_refused_at_its_line(tmp_path):
    # rate_rps 1e-300 was taken: the cost per 1M tokens printed some 300 digits. The schema's minimum is one
    # request in under three hours.
    spec = tmp_path / "r.yaml"
    spec.write_text(
        SPEC.format(model="llama-3.1-8b", extra="  arrival: steady\n  rate_rps: 1.0e-300\n", count=1, tp=1, hw="")
    )
    code, out, _ = run_cli("lint", str(spec))
    assert code == 1 and ":9:13: GP103 [error] serve.rate_rps must be at least 0.0001, got 1e-300" in out
