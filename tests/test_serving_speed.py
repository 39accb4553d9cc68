"""The serving speed model term by term on a toy GPU with round rates, each figure derived by hand.

The calibration tests compare with measurements within tens of per cent, so a term that is a few per
cent of a step is not pinned by them; here every term is exact. The GPU (tests/toy_gpu.py) computes
1,000 FLOP/s (bf16; fp8 2,000) and streams 1,000 B/s, its MAMF ceiling is 1/2 (fp8 1/4), and the
calibration is round: GEMMs at the whole ceiling (500 FLOP/s), HBM at 1/2 (500 B/s), attention at 1/2
of the ceiling (250 FLOP/s), links at 1/2, roofline sharpness 2 (so roofline(a, b) = hypot(a, b)),
all-reduce latency 0.5 s on NVLink, 1 s otherwise, engine overheads 1 ms per step, 0.1 ms per running
sequence and per layer, 10 ms per request.

TINY: 2 layers, hidden 8, 2 heads of 4 (one KV head), gated MLP 16, vocabulary 32: 1,448 matmul
parameters, of which the LM head 256: a decode token costs 2 x 1,448 = 2,896 FLOPs, a prefill token
2,896 - 512 = 2,384. KV: 2 x 4 x 2 B = 16 B per token per layer. Attention: 2 x 2 heads x (4 + 4) =
32 FLOPs per (query, key) pair.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from gpuplan.estimate.calibration import (
    Calibration,
    EngineProfile,
    ServingMechanisms,
    TrainingMechanisms,
)
from gpuplan.estimate.lengths import Lengths, lognormal_square_mean
from gpuplan.estimate.performance import Efficiency
from gpuplan.estimate.serving_bounds import latency_floors
from gpuplan.estimate.serving_lockstep import burst_ttft
from gpuplan.estimate.serving_speed import Deployment, _residual_step, serving_speed
from gpuplan.estimate.serving_workload import ServingWorkload
from gpuplan.records import evolve
from tests.tiny_architectures import HYBRID, MOE, TINY
from tests.toy_gpu import GPU, unit_ceiling  # noqa: F401  (the autouse fixture)

CAL = Calibration(
    engines={"vllm": EngineProfile("vllm", "unit engine", 1.0, 0.5, 1e-3, 1e-4, 1e-2, False, "unit")},
    serving=ServingMechanisms(
        attention_efficiency=0.5,
        layer_overhead_s=1e-4,
        allreduce_latency_nvlink_s=0.5,
        allreduce_latency_pcie_s=1.0,
        link_efficiency=0.5,
        roofline_sharpness=2,
    ),
    training=TrainingMechanisms(1.0, 0.5, 1.0, 0.0, 0.5, 0.5, 0.5),
)
# The same engine reserving KV for prompt + output at admission, and one whose prompt pass stops a token
# short so that the next decode step samples the first output (TurboMind's way).
RESERVING = dataclasses.replace(
    CAL, engines={"vllm": dataclasses.replace(CAL.engines["vllm"], reserves_full_context=True)}
)
DECODE_FIRST = dataclasses.replace(
    CAL, engines={"vllm": dataclasses.replace(CAL.engines["vllm"], first_token_from_decode_step=True)}
)


def workload(arch=TINY, **changes) -> ServingWorkload:
    fields = {
        "architecture": arch,
        "gpu": GPU,
        "weights_read": 4344.0,  # 4,344 / 500 B/s = 8.688 s: 3/4 of a 2-token decode's 11.584 s of GEMMs
        "routed_expert_bytes": 0.0,
        "kv_dtype_bytes": 2,
        "kv_capacity_bytes": 1e9,
        "prompt_tokens": 4,
        "prompt_p90": 4,
        "full_prompt": 4,
        "output_tokens": 4,
        "concurrency": 2,
        "quantization": "none",
        "engine": "vllm",
        "batching": "continuous",
        "tensor_parallel": 1,
        "pipeline_parallel": 1,
        "expert_parallel": 1,
        "arrival": "closed-loop",
        "endpoint": "offline",  # no front end: the engine's own figures
        "network_gbs": 50.0,
        "state_dtype_bytes": 2,
    }
    return ServingWorkload(**{**fields, **changes})


def deployment(arch=TINY, efficiency=None, **changes) -> Deployment:
    return Deployment(workload(arch, **changes), CAL, efficiency or Efficiency())


def test_decode_step():
    # 2 sequences at 10 cached tokens. GEMMs: (2 x 2,384 + 2 x 512) / 500 = 11.584 s against the weights'
    # 8.688 s: hypot = 14.48. KV: 2 x 16 x 2 layers x 10 = 640 B / 500 = 1.28 s against 2 x 20 keys x 32 /
    # 250 = 5.12 s: 1.28 x sqrt(17). Fixed: 1 ms + 2 layers x 0.1 ms; 2 sequences x 0.1 ms.
    step = deployment().step(2, 0, 10, 0.0)
    assert step.seconds == pytest.approx(14.48 + 1.28 * math.sqrt(17) + 0.0012 + 0.0002, rel=1e-12)
    assert not step.memory_bound  # 8.688 + 1.28 < 11.584 + 5.12
    assert step.bytes_read == 4344 + 640


def test_a_decode_step_memory_bound_only_through_its_kv_reads():
    # Attention at twice the calibrated share (1,000 FLOP/s) and a 4-byte KV cache: a cached token costs
    # 2 x 1 KV head x 4 x 4 B = 32 B per layer to read (0.064 s at 500 B/s) and 32 FLOPs to attend (0.032
    # s), so the attention is memory-bound. 2 sequences at 10 cached tokens: KV 2 x 2 layers x 10 x 32 B
    # = 1,280 B / 500 = 2.56 s; attention 2 x 20 keys x 32 / 1,000 = 1.28 s. Weights of 5,500 B take 11 s
    # against 11.584 s of GEMMs: the linears alone are compute-bound, and only with the KV reads is the
    # step's memory time (13.56 s) past its compute time (12.864 s).
    fast_attention = dataclasses.replace(CAL, serving=dataclasses.replace(CAL.serving, attention_efficiency=2.0))
    step = Deployment(workload(weights_read=5500.0, kv_dtype_bytes=4), fast_attention, Efficiency()).step(2, 0, 10, 0.0)
    assert step.memory_bound
    assert step.bytes_read == 5500 + 1280
    # 5,000 B of weights (10 s): 12.56 s of memory time against 12.864 s of compute.
    lighter = Deployment(workload(weights_read=5000.0, kv_dtype_bytes=4), fast_attention, Efficiency())
    assert not lighter.step(2, 0, 10, 0.0).memory_bound


def test_prefill_step_and_prompt_alone():
    d = deployment()
    # 4 prompt tokens: GEMMs 4 x 2,384 / 500 = 19.072 s beside 8.688 s of weights; no KV read; the
    # prompt's attention 640 FLOPs / 250 = 2.56 s; fixed 1.2 ms.
    assert d.step(0, 4, 0, 640.0).seconds == pytest.approx(math.hypot(8.688, 19.072) + 2.56 + 0.0012, rel=1e-12)
    # An 8-token prompt in chunks of 4: two steps of 4 tokens, each half of the prompt's 32 x 2 x 36 =
    # 2,304 attention FLOPs (1,152 / 250 = 4.608 s).
    chunk = math.hypot(8.688, 19.072) + 4.608 + 0.0012
    assert d.prefill_alone(8, 4) == pytest.approx(2 * chunk, rel=1e-12)
    # In one pass: 8 x 2,384 / 500 = 38.144 s, attention 2,304 / 250 = 9.216 s.
    assert d.prefill_alone(8, None) == pytest.approx(math.hypot(8.688, 38.144) + 9.216 + 0.0012, rel=1e-12)
    assert d.prompt_attention(8) == 2304


def test_pipeline_stage_halves_the_work_and_adds_hops():
    # PP 2: one layer per stage. Prefill token 2,896 / 2 - 256 = 1,192 FLOPs; fixed 1 ms + 0.1 ms.
    # An 8-token prompt in chunks of 4: the two chunks' times (their attention summed: the whole prompt's 1,152
    # FLOPs at the mean chunk's half), then the other stage's crossing of the longer chunk, the second, whose
    # causal attention covers positions 5 to 8 (5 + 6 + 7 + 8 = 26 of the prompt's 36 position sums: 832 FLOPs),
    # and one hand-over (0.5 s): a proportionate flow shop, sum p + (stages - 1) max p.
    d = deployment(pipeline_parallel=2, weights_read=2000.0)
    chunk = math.hypot(2000 / 500, 4 * 1192 / 500) + 1152 / 2 / 250 + 0.0011
    second = math.hypot(2000 / 500, 4 * 1192 / 500) + 1152 * 26 / 36 / 250 + 0.0011
    assert d.prefill_alone(8, 4) == pytest.approx(2 * chunk + second + 0.5, rel=1e-12)


def test_a_step_carrying_part_of_a_prompt_chunk_reads_the_experts_of_both_kinds_of_step():
    # 1 decode beside 1 prompt token on average, prompts arriving as chunks of 4: a quarter of the steps
    # carry a whole chunk. One token touches 2 experts (1,928 + 2 x 768 = 3,464 B); 5 tokens touch
    # 4 x (1 - (1/2)^5) = 3.875 (1,928 + 3.875 x 768 = 4,904 B): 3/4 x 3,464 + 1/4 x 4,904 = 3,824 B,
    # beside the KV of one sequence at 10 tokens (2 layers x 16 B x 10 = 320 B).
    d = deployment(MOE, weights_read=1928.0, routed_expert_bytes=3072.0)
    assert d.step(1, 1, 10, 0.0, 4).bytes_read == 3_824 + 320


def test_uneven_pipeline_stages_run_at_the_pace_of_the_stage_that_reads_most():
    # PP 2, the heavier stage reading 2,000 B of weights and the stages' mean 1,500 (weights_above_mean
    # 500): a decode token at 10 cached tokens costs 1,192 + 256 = 1,448 FLOPs per stage (2.896 s) against
    # 4 s of weights on the heavier stage, 3 s on the mean one; its KV, 1 layer x 16 B x 10 = 160 B
    # (0.32 s), against 20 keys x 16 FLOPs / 250 = 1.28 s; fixed 1 ms + 1 layer x 0.1 ms + 1 x 0.1 ms.
    d = deployment(pipeline_parallel=2, weights_read=2000.0, weights_above_mean=500.0)
    rest = 0.32 * math.sqrt(17) + 0.0012
    heavy, mean = math.hypot(4, 2.896) + rest, math.hypot(3, 2.896) + rest
    step = d.step(1, 0, 10, 0.0)
    assert (step.seconds, step.mean_seconds) == pytest.approx((heavy, mean), rel=1e-12)
    # One microbatch crosses both stages in turn (their sum) and hands over once (0.5 s); two keep the
    # heavier stage busy, each waiting for the other's turn there: 2 x its step.
    assert d.cycle(step, 1) == pytest.approx(2 * mean + 0.5, rel=1e-12)
    assert d.cycle(step, 2) == pytest.approx(2 * heavy + 0.5, rel=1e-12)
    # An 8-token prompt in chunks of 4: both at the heavier stage's pace (their attention summed, the mean
    # chunk's each), then the longer chunk's (the second's, 832 of the prompt's 1,152 attention FLOPs: see
    # above) crossing of the other stage: its time through both at their mean and the hand-over, less its pace.
    chunk_heavy = math.hypot(4, 4 * 1192 / 500) + 1152 / 2 / 250 + 0.0011
    second_heavy = math.hypot(4, 4 * 1192 / 500) + 1152 * 26 / 36 / 250 + 0.0011
    second_mean = math.hypot(3, 4 * 1192 / 500) + 1152 * 26 / 36 / 250 + 0.0011
    fill = 2 * second_mean + 0.5 - second_heavy
    assert d.prefill_alone(8, 4) == pytest.approx(2 * chunk_heavy + fill, rel=1e-12)
    # The latency floors (one sequence alone, the prompt's chunks without the pipeline fill) take the mean.
    _, tpot = latency_floors(workload(pipeline_parallel=2, weights_read=2000.0, weights_above_mean=500.0), None, CAL)
    assert tpot == pytest.approx(2 * d.step(1, 0, 6, 0.0).mean_seconds, rel=1e-12)


def test_efficiency_overrides_and_fp8():
    # Overrides are shares of the datasheet: GEMMs at 1/4 of 1,000 = 250 FLOP/s, HBM at 1/4 = 250 B/s.
    d = deployment(efficiency=Efficiency(prefill_mfu=0.25, decode_bandwidth=0.25))
    assert (d.gemm_rate, d.bandwidth) == pytest.approx((250, 250), rel=1e-12)
    # fp8 weights on a GPU with fp8 units: 2,000 FLOP/s x the fp8 ceiling 1/4 x 1.0.
    assert deployment(quantization="fp8").gemm_rate == pytest.approx(500, rel=1e-12)
    assert deployment().attention_rate == pytest.approx(250, rel=1e-12)


def test_kv_read_and_keys_with_sliding_layers():
    # HYBRID: 2 full layers, 5 sliding (window 8). At 20 tokens: 2 x 20 + 5 x 8 = 80 keys; at 5: 35.
    d = deployment(HYBRID)
    assert (d.decode_attention_keys(20), d.decode_attention_keys(5)) == (80, 35)
    assert (d.kv_read(20), d.kv_read(5)) == (16 * 80, 16 * 35)
    # PP 2: stages of 4 layers, at most ceil(5 / 2) = 3 sliding: 16 x (1 x 20 + 3 x 8) = 704.
    assert deployment(HYBRID, pipeline_parallel=2).kv_read(20) == 704


def test_tensor_and_expert_parallel_communication():
    # 4 tokens x 8 x 2 B = 64 B per all-reduce; ring over 2: 0.5 s + 2 x 1/2 x 64 / 500 = 0.628 s.
    # Dense TP 2: two per layer, 2 layers: 2.512 s.
    assert deployment(tensor_parallel=2).communication(4) == pytest.approx(4 * 0.628, rel=1e-12)
    # EP 2 alone: two all-to-alls per MoE layer of 64 x 2 routed x 1/2 remote = 64 B: 2 x 2 x 0.628.
    assert deployment(MOE, expert_parallel=2).communication(4) == pytest.approx(4 * 0.628, rel=1e-12)
    # TP 2 beside EP 2: one all-reduce per layer (2 x 0.628) plus the all-to-alls.
    both = deployment(MOE, tensor_parallel=2, expert_parallel=2).communication(4)
    assert both == pytest.approx(2 * 0.628 + 4 * 0.628, rel=1e-12)
    assert deployment().communication(4) == 0.0
    # Beyond the 8-GPU NVLink domain and the host: PCIe's 1 s latency, and the slower of the toy PCIe
    # (1,000 B/s one way) and the NIC (50 GB/s), at 1/2: 500 B/s.
    far = deployment(tensor_parallel=16)
    assert (far.tp_latency, far.tp_bandwidth) == (1.0, 500)


def test_a_layer_of_one_block_costs_half_a_decoder_layer():
    # Nemotron-H's layout: each layer holds its mixer or its MLP (separate_mlp). TINY's two decoder layers laid out
    # as four such layers (attention, MLP, attention, MLP) have the same four blocks: each block ends in one
    # row-parallel projection, one all-reduce under TP 2 (4 x 0.628 s, as TINY's 2 layers x 2), and the fixed cost
    # is per block, half a decoder layer's 0.1 ms (4 x 0.05 ms, as TINY's 2 x 0.1 ms). Counted per layer, as
    # before, it was 4 x 0.1 ms and 8 all-reduces: a 52-layer Nemotron 3 Nano's TPOT at one client read +115%.
    split = dataclasses.replace(TINY, layers=4, layer_pattern="A-", separate_mlp=True)
    assert (split.block_count(range(4)), TINY.block_count(range(2))) == (4, 4)
    assert split.block_count(range(1, 2)) == 1  # the MLP layer alone
    assert deployment(split).fixed == pytest.approx(deployment().fixed, rel=1e-12) == pytest.approx(0.0012)
    assert deployment(split, tensor_parallel=2).communication(4) == pytest.approx(4 * 0.628, rel=1e-12)
    # two stages: each carries two of the four layers, two blocks, half the all-reduces
    staged = deployment(split, tensor_parallel=2, pipeline_parallel=2)
    assert staged.communication(4) == pytest.approx(2 * 0.628, rel=1e-12)


def test_moe_weights_read_by_routed_tokens():
    # Routed experts 2 layers x 4 x 192 x 2 B = 3,072: 768 B per expert (both layers); every step reads
    # the 1,928 B of other weights (weights_read: the routed experts apart).
    d = deployment(MOE, weights_read=1928.0, routed_expert_bytes=3072.0)
    # One token touches 4 x (1 - (1 - 2/4)^1) = 2 experts: 1,928 + 2 x 768; two tokens 3.
    assert (d.weights_read(1), d.weights_read(2)) == (1928 + 1536, 1928 + 2304)
    # EP 2: 2 whole experts per GPU, tokens of 2 replicas reach them: 4 routed, per token
    # 2 x (1 - (1/2)^2) = 1.5 experts.
    ep = deployment(MOE, weights_read=3464.0, routed_expert_bytes=3072.0, expert_parallel=2)
    assert ep.weights_read(1) == 3464 + 1.5 * 768
    # TP 2: all 4 experts, half of each (384 B): one token touches 2.
    tp = deployment(MOE, weights_read=3464.0, routed_expert_bytes=3072.0, tensor_parallel=2)
    assert tp.weights_read(1) == 3464 + 2 * 384


def test_prompt_square_mean():
    # A fixed prompt: sigma 0, E[P^2] = P^2.
    assert lognormal_square_mean(100, 100) == 10000
    assert lognormal_square_mean(0, 0) == 0
    # p90 = 1.5 x mean: ln 1.5 = z sigma - sigma^2 / 2 -> sigma = z - sqrt(z^2 - 2 ln 1.5).
    z = 1.2815515655446004  # the standard normal's 90th percentile (Phi^-1(0.9))
    sigma = z - math.sqrt(z * z - 2 * math.log(1.5))
    assert lognormal_square_mean(100, 150) == pytest.approx(10000 * math.exp(sigma * sigma), rel=1e-12)
    # Beyond the lognormal's reach (3 x the mean): held at sigma = z.
    assert lognormal_square_mean(100, 300) == pytest.approx(10000 * math.exp(z * z), rel=1e-12)


def test_static_batching_end_to_end():
    # Two 4-token prompts prefill together: 8 x 2,384 / 500 = 38.144 s beside 8.688 s, attention
    # 2 x 640 / 250 = 5.12 s, fixed 1.2 ms: P. Then 2 sequences decode at 4 + 4/2 = 6 tokens: GEMMs 14.48 s,
    # KV 2 x 16 x 2 x 6 = 384 B (0.768 s) against 2 x 12 x 32 / 250 = 3.072 s: 0.768 sqrt(17); 1.4 ms: T.
    prefill = math.hypot(8.688, 38.144) + 5.12 + 0.0012
    tpot = 14.48 + 0.768 * math.sqrt(17) + 0.0014
    speed = serving_speed(workload(batching="static"), calibration=CAL)
    assert speed.tpot_s == pytest.approx(tpot, rel=1e-12)
    assert speed.tokens_per_s == pytest.approx(2 / (prefill + 4 * tpot) * 4, rel=1e-12)
    assert speed.ttft_s == pytest.approx(prefill + 0.01, rel=1e-12)
    # Alone, the 4-token prompt in one pass: 4 x 2,384 / 500 = 19.072 s, 640 / 250 = 2.56 s.
    assert speed.ttft_single_s == pytest.approx(math.hypot(8.688, 19.072) + 2.56 + 0.0012 + 0.01, rel=1e-12)
    assert (speed.running, speed.limited_by, speed.engine, speed.decode_bound) == (2, "concurrency", "vllm", "compute")
    assert speed.decode_bytes_per_step == 4344 + 384
    # The full prompt's FLOPs: 4 x 2,384 + 640.
    assert speed.prefill_flops == 4 * 2384 + 640


def test_running_slots_and_what_caps_them():
    # A sequence holds 4 + 4/2 = 6 tokens: 16 x 2 x 6 = 192 B. 400 B of KV hold 2.08 sequences.
    assert serving_speed(workload(concurrency=8, kv_capacity_bytes=400.0), calibration=CAL).limited_by == "kv-cache"
    capped = serving_speed(workload(concurrency=8, max_sequences=3), calibration=CAL)
    assert (capped.running, capped.limited_by) == (3, "engine")
    # Requests beyond the slots wait: TTFT grows by (8 - 3) / the request rate.
    alone = serving_speed(workload(concurrency=3, max_sequences=3), calibration=CAL)
    assert capped.ttft_s > alone.ttft_s


def test_answers_that_vary_hold_more_of_the_kv_cache():
    # Answers of mean 4, p90 8, none longer than the context of 24 leaves after the mean prompt of 4 (20):
    # sigma = 1.28155 - sqrt(1.28155^2 - 2 ln 2) = 0.7755, the classes 2, 4, 6, 10, 14, 20 tokens at shares 0.5,
    # 0.25, 0.15, 0.06, 0.03, 0.01 (mean 4.12 after rounding; the lengths tests work the classes out).
    # A running sequence holds 4 + E[O^2] / (2 E[O]) = 4 + (0.5 x 4 + 0.25 x 16 + 0.15 x 36 + 0.06 x 100
    # + 0.03 x 196 + 0.01 x 400) / (2 x 4.12) = 4 + 27.28 / 8.24 = 7.311 tokens, 32 B each: 4,000 B of KV
    # hold 17.10 sequences, where answers of 4 tokens each hold 4 + 2 = 6 tokens and 20.83 run.
    varied = serving_speed(
        workload(concurrency=50, kv_capacity_bytes=4000.0, full_prompt=20, output_p90=8),
        calibration=CAL,
    )
    fixed = serving_speed(workload(concurrency=50, kv_capacity_bytes=4000.0, full_prompt=20), calibration=CAL)
    assert (varied.limited_by, fixed.limited_by) == ("kv-cache", "kv-cache")
    assert varied.running == pytest.approx(4000 / (32 * (4 + 27.28 / 8.24)), rel=1e-9)
    assert fixed.running == pytest.approx(4000 / (32 * 6), rel=1e-9)


def test_continuous_batching_with_one_slot():
    # One running sequence: no other slot adds decodes or prefill chunks, the iteration stands at once.
    # Decode at 4 + 4/2 = 6 tokens: GEMMs 2,896 / 500 = 5.792 s against 8.688 s of weights (2.896 x
    # hypot(2, 3)); KV 16 x 2 x 6 = 192 B, 0.384 s, against 12 x 32 / 250 = 1.536 s (0.384 x sqrt(17));
    # 1 ms + 2 x 0.1 ms + 0.1 ms. The 4-token prompt fits the 8-token budget in one chunk: P.
    tpot = 2.896 * math.sqrt(13) + 0.384 * math.sqrt(17) + 0.0013
    prefill = math.hypot(8.688, 19.072) + 2.56 + 0.0012
    speed = serving_speed(workload(concurrency=1, max_batched_tokens=8), calibration=CAL)
    assert speed.tpot_s == pytest.approx(tpot, rel=1e-12)
    assert speed.tokens_per_s == pytest.approx(4 / (prefill + 4 * tpot), rel=1e-12)
    assert speed.ttft_s == pytest.approx(prefill + 0.01, rel=1e-12)
    assert speed.ttft_single_s == pytest.approx(prefill + 0.01, rel=1e-12)
    assert (speed.decode_bound, speed.decode_bytes_per_step, speed.running) == ("memory", 4344 + 192, 1)


def test_ttft_statistics_are_priced_at_the_stated_prompts(monkeypatch):
    # One slot, prompts of mean 4 and p90 8 (the full prompt 8), a budget of 8: no other slot, so each TTFT is
    # its prompt's pass alone, in one chunk, plus the 0.01 s request overhead.
    def alone(tokens: int) -> float:  # GEMMs 2,384 FLOPs a token / 500 beside 8.688 s of weights; attention
        pairs = tokens * (tokens + 1) // 2  # 32 FLOPs a (query, key) pair on each of 2 layers, at 250 FLOP/s
        return math.hypot(8.688, tokens * 2384 / 500) + 64 * pairs / 250 + 0.0012 + 0.01

    w = workload(concurrency=1, max_batched_tokens=8, prompt_tokens=4, prompt_p90=8, full_prompt=8)
    speed = serving_speed(w, calibration=CAL)
    # p90: the stated p90 itself, 8 tokens (the full prompt's figure: alone, as ttft_single_s).
    assert speed.ttft_p90_s == pytest.approx(alone(8), rel=1e-12) == pytest.approx(speed.ttft_single_s, rel=1e-12)
    # median: the lognormal through mean 4 and p90 8 has sigma = z90 - sqrt(z90^2 - 2 ln 2) = 1.28155 - 0.50605
    # = 0.77550, so its median is 4 exp(-0.77550^2 / 2) = 2.961: 3 tokens.
    assert speed.ttft_median_s == pytest.approx(alone(3), rel=1e-12)
    # Every prompt the stated mean where no p90 is stated: all three at 4 tokens, not at the full prompt's 8.
    fixed = serving_speed(evolve(w, prompt_p90=4), calibration=CAL)
    assert fixed.ttft_s == fixed.ttft_median_s == fixed.ttft_p90_s == pytest.approx(alone(4), rel=1e-12)
    # mean: each class of the prompts at its share; two classes set here, half 2 tokens and half 6.
    classes = ((0.5, 2), (0.5, 6))
    original = ServingWorkload.ttft_prompts
    monkeypatch.setattr(
        ServingWorkload, "ttft_prompts", lambda self, share: classes if share is None else original(self, share)
    )
    assert serving_speed(w, calibration=CAL).ttft_s == pytest.approx((alone(2) + alone(6)) / 2, rel=1e-12)


def test_an_arrival_waits_longer_for_steps_that_carry_whole_chunks():
    # One other sequence decoding (two with the tagged one) at 10 tokens of context, its prompts of 4 tokens
    # arriving at 1 token a step under a budget of 8: a step has room for 6, a prompt rides one step whole,
    # so one step in four carries a 4-token chunk and three carry none. The decode step: 14.48 s of GEMMs
    # with the weights, 1.28 x sqrt(17) of KV, 1.4 ms (test_decode_step). With the chunk: GEMMs (2 x 2,896 +
    # 4 x 2,384) / 500 = 30.656 s beside 8.688 s, the chunk's attention 640 / 250 = 2.56 s. An arrival lands
    # in a step in proportion to its length: E[S^2] / (2 E[S]), above the half of the even step.
    d = deployment(max_batched_tokens=8)
    plain = 14.48 + 1.28 * math.sqrt(17) + 0.0014
    carrying = math.hypot(8.688, 30.656) + 1.28 * math.sqrt(17) + 2.56 + 0.0014
    expected = (0.75 * plain**2 + 0.25 * carrying**2) / (0.75 * plain + 0.25 * carrying) / 2
    even = d.step(2, 1, 10, 160.0, 4)  # the average token a step carries, spread evenly

    def carrying(tokens: float) -> float:
        return d.step(2, tokens, 10, tokens / 4 * 640.0, 4).seconds

    assert _residual_step(even, 1.0, 4.0, 6.0, carrying) == pytest.approx(expected, rel=1e-12)
    assert expected > even.seconds / 2
    # Steps that each carry as many chunks as the budget holds are alike: half a step. No prompt: the same.
    full = d.step(2, 4, 10, 640.0, 4)
    assert _residual_step(full, 4.0, 4.0, 6.0, carrying) == full.seconds / 2
    assert _residual_step(full, 0.0, 0.0, 6.0, carrying) == full.seconds / 2


def test_no_step_carries_more_tokens_than_the_token_budget(monkeypatch):
    # The scheduler's budget caps every forward step: decodes plus prompt tokens <= max_batched_tokens.
    # 16 clients with 200-token prompts and 2-token outputs under a 64-token budget: the others' prompts
    # arrive at (running decodes) x 199 / 2 tokens per step, far more than the 64 - (1 + decodes) left,
    # so the decode steps are filled to the budget exactly (the capped regime this test must reach).
    sizes: list[float] = []
    step = Deployment.step

    def recorded(self, decode, prefill, context, prefill_attention, chunk=0.0):
        sizes.append(decode + prefill)
        return step(self, decode, prefill, context, prefill_attention, chunk)

    monkeypatch.setattr(Deployment, "step", recorded)
    w = workload(
        concurrency=16, prompt_tokens=200, prompt_p90=200, full_prompt=200, output_tokens=2, max_batched_tokens=64
    )
    serving_speed(w, calibration=CAL)
    assert max(sizes) <= 64 * (1 + 1e-12)
    assert max(sizes) == pytest.approx(64, rel=1e-9)


# -- static batching under pipeline parallelism, the first token from a decode step ---------------------
# PP 2 on TINY: one layer per stage (weights 2,000 B: 4 s). A prefill token costs 2,896 / 2 - 256 = 1,192
# FLOPs (2.384 s), a decode token 1,448 (2.896 s); a decoding sequence reads 16 B per cached token (its
# stage's layer) and computes half of the model's 64 FLOPs per cached token: 0.032 x sqrt(17) s per token
# of context; prompt attention is halved too. Fixed costs 1 ms + 1 layer x 0.1 ms, 0.1 ms per decoding
# sequence; the activations cross to the next stage in 0.5 s (the NVLink all-reduce latency).
def test_static_batching_under_two_stages_with_the_first_token_from_a_decode_step():
    # Two clients, 2-token prompts, 4 output tokens, static batching, an engine whose prompt pass stops
    # one token short. Each prompt passes 1 token; the two sequences are two microbatches.
    # A microbatch's pass: 1 token, 2.384 s beside 4 s; the batch's attention is the mean prompt's
    # 32 x 2 layers x 3 pairs = 192 FLOPs scaled by (1/2)^2 (quadratic in the tokens passed): 48, half of
    # it on a stage: 24 / 250 = 0.096 s; 1.1 ms. Two microbatches and one step of pipeline fill: 3 steps,
    # and the activations cross the stage boundary once (0.5 s), as in the pass alone below.
    microbatch = math.hypot(4, 2.384) + 0.096 + 0.0011
    prefill = 3 * microbatch + 0.5
    # Then the decode step that samples the first output: each microbatch one sequence at the 2 prompt
    # tokens (KV 32 B / 500 = 0.064 s against 64 / 250 = 0.256 s), crossing both stages and one hop.
    first = math.hypot(4, 2.896) + 0.064 * math.sqrt(17) + 0.0012
    # Decode at 2 + 4/2 = 4 tokens: one sequence per microbatch on each stage, a token crosses both.
    decode = math.hypot(4, 2.896) + 0.128 * math.sqrt(17) + 0.0012
    tpot = 2 * decode + 0.5
    w = workload(
        batching="static",
        pipeline_parallel=2,
        weights_read=2000.0,
        prompt_tokens=2,
        prompt_p90=2,
        full_prompt=2,
    )
    speed = serving_speed(w, calibration=DECODE_FIRST)
    assert speed.tpot_s == pytest.approx(tpot, rel=1e-12)
    assert speed.ttft_s == pytest.approx(prefill + 2 * first + 0.5 + 0.01, rel=1e-12)
    # A wave: the prefill, then 4 decode steps (the first of them samples the first token).
    assert speed.tokens_per_s == pytest.approx(2 / (prefill + 4 * tpot) * 4, rel=1e-12)
    # Alone: the 1-token pass crosses both stages (its exact attention, 1 pair x 2 layers x 32 / 2 = 32
    # FLOPs, 0.128 s) and a hop, then the same decode step as a batch of one, again across both stages.
    alone = math.hypot(4, 2.384) + 0.128 + 0.0011
    assert speed.ttft_single_s == pytest.approx(2 * alone + 0.5 + 2 * first + 0.5 + 0.01, rel=1e-12)


# -- a burst of requests on an idle replica (static batching keeps every pass closed form) ----------------
# PP 1: a prefill token 2,384 FLOPs (4.768 s), a decode token 2,896 (5.792 s), weights 8.688 s; a prompt
# of P tokens 32 x 2 layers x P(P + 1)/2 attention FLOPs at 250 FLOP/s; 32 B of KV per token (2 layers).
def pass_of(tokens: int, prompts: int = 1, gemm_rate: float = 500) -> float:
    """``prompts`` prompts of ``tokens`` tokens in one static prefill step (hand-derived terms above)."""
    gemms = prompts * tokens * 2384 / gemm_rate
    attention = prompts * 32 * tokens * (tokens + 1) / 250
    return math.hypot(8.688, gemms) + attention + 0.0012


def test_burst_admits_the_prompts_the_kv_cache_holds():
    # Five clients send 4-token prompts (8 output tokens) together; 512 B of KV cache. The engine
    # allocates KV as tokens arrive, so a request is admitted if its prompt fits: 512 / (4 x 32 B) = 4.
    # The first runs alone (S1, + the 10 ms request overhead); the other three arrive during it and
    # prefill together at the next step (12 tokens: S3), seeing S1 + S3 + 10 ms.
    s1, s3 = pass_of(4), pass_of(4, prompts=3)
    assert s3 == pytest.approx(math.hypot(8.688, 57.216) + 7.68 + 0.0012, rel=1e-12)
    # The fifth waits as in the steady state, which runs 512 / (32 B x (4 + 8/2)) = 2 sequences: waves of
    # a 2-prompt prefill (S2) and 8 decode steps of 2 sequences at 8 tokens: GEMMs 11.584 beside 8.688 s
    # (14.48 s), KV 2 x 32 x 8 = 512 B / 500 = 1.024 s against 2 x 16 keys x 32 / 250 = 4.096 s, 1.4 ms.
    # 2 requests per wave; the fifth waits (5 - 2) / 2 waves, then a prefill, then 10 ms.
    s2 = pass_of(4, prompts=2)
    wave = s2 + 8 * (14.48 + 1.024 * math.sqrt(17) + 0.0014)
    late = 3 / 2 * wave + s2 + 0.01
    # The front end admits them one after another: (5 - 1) / 2 x 10 ms more on average.
    expected = (s1 + 0.01 + 3 * (s1 + s3 + 0.01) + late) / 5 + 0.02
    w = workload(batching="static", concurrency=5, output_tokens=8, kv_capacity_bytes=512.0)
    assert burst_ttft(w, calibration=CAL) == pytest.approx(expected, rel=1e-12)


def test_burst_on_an_engine_reserving_whole_sequences():
    # Three clients, 4-token prompts, 4 output tokens, 512 B of KV: an engine reserving prompt + output
    # admits 512 / (8 x 32 B) = 2 (the prompt alone would let all 3 in). The first runs alone (S1), the
    # second prefills alone at the next step (S1 again). The third waits as in the steady state: 2
    # sequences (the same 8 tokens reserved each), waves of S2 and 4 decode steps at 4 + 4/2 = 6 tokens
    # (14.48 s; KV 2 x 32 x 6 = 384 B, 0.768 s against 3.072 s; 1.4 ms): it waits half a wave.
    s1, s2 = pass_of(4), pass_of(4, prompts=2)
    wave = s2 + 4 * (14.48 + 0.768 * math.sqrt(17) + 0.0014)
    expected = (s1 + 0.01 + (2 * s1 + 0.01) + (wave / 2 + s2 + 0.01)) / 3 + 0.01
    w = workload(batching="static", concurrency=3, kv_capacity_bytes=512.0)
    assert burst_ttft(w, calibration=RESERVING) == pytest.approx(expected, rel=1e-12)


def test_burst_of_one_token_prompts():
    # Two clients send a 1-token prompt; 64 B of KV hold 64 / 32 = 2 one-token prompts: both admitted.
    # A 1-token pass: 4.768 s beside 8.688 s, 64 / 250 = 0.256 s of attention, 1.2 ms. The first runs
    # alone, the second at the next step (again one token): S, 2S; 10 ms each, 0.5 x 10 ms front end.
    s = math.hypot(8.688, 4.768) + 0.256 + 0.0012
    w = workload(batching="static", prompt_tokens=1, prompt_p90=1, full_prompt=1, kv_capacity_bytes=64.0)
    assert burst_ttft(w, calibration=CAL) == pytest.approx((s + 0.01 + 2 * s + 0.01) / 2 + 0.005, rel=1e-12)


def test_burst_capped_by_the_engine_under_an_efficiency_override():
    # Three clients, 4-token prompts, 4 output tokens; the engine runs at most 2 sequences, and the
    # configuration sets GEMMs at 1/4 of the datasheet (250 FLOP/s), for every pass of the burst.
    # The first alone (S1), the second at the next step (S1); the third waits for the steady state's 2
    # slots: waves of S2 and 4 decode steps at 6 tokens: GEMMs 2 x 2,896 / 250 = 23.168 s beside 8.688 s
    # (2.896 x sqrt(73)), KV 0.768 x sqrt(17) s, 1.4 ms: half a wave, then S2.
    s1, s2 = pass_of(4, gemm_rate=250), pass_of(4, prompts=2, gemm_rate=250)
    wave = s2 + 4 * (2.896 * math.sqrt(73) + 0.768 * math.sqrt(17) + 0.0014)
    expected = (s1 + 0.01 + (2 * s1 + 0.01) + (wave / 2 + s2 + 0.01)) / 3 + 0.01
    w = workload(batching="static", concurrency=3, max_sequences=2)
    assert burst_ttft(w, Efficiency(prefill_mfu=0.25), CAL) == pytest.approx(expected, rel=1e-12)


def test_latency_floor_of_a_prompt_in_chunks():
    # An 8-token prompt under a 4-token budget: on an idle replica two chunks of 4 tokens, each with half
    # of the prompt's 2,304 attention FLOPs (4.608 s), + 10 ms; no load can make it faster.
    chunk = math.hypot(8.688, 19.072) + 4.608 + 0.0012
    # TPOT: one sequence at 8 + 4/2 = 10 tokens: 5.792 s beside 8.688 (2.896 x sqrt(13)), KV 320 B / 500 =
    # 0.64 s against 20 keys x 32 / 250 = 2.56 s, 1.3 ms.
    w = workload(prompt_tokens=8, prompt_p90=8, full_prompt=8, max_batched_tokens=4)
    ttft, tpot = latency_floors(w, calibration=CAL)
    assert ttft == pytest.approx(2 * chunk + 0.01, rel=1e-12)
    assert tpot == pytest.approx(2.896 * math.sqrt(13) + 0.64 * math.sqrt(17) + 0.0013, rel=1e-12)


def test_static_batching_decodes_until_the_longest_answer_and_a_client_waits_for_it(monkeypatch):
    # As test_static_batching_end_to_end, the answers half 2 tokens and half 6 (mean 4): a batch of two
    # decodes until its longest, 2 only when both are (1/4), so 2 x 1/4 + 6 x 3/4 = 5 steps, at
    # 4 + 5/2 = 6.5 tokens of context: KV 2 x 16 x 2 x 6.5 = 416 B (0.832 s) against 2 x 13 x 32 / 250 =
    # 3.328 s, 0.832 sqrt(17); GEMMs 14.48 s, 1.4 ms.
    monkeypatch.setattr(ServingWorkload, "outputs", lambda self: Lengths(((0.5, 2), (0.5, 6))))
    prefill = math.hypot(8.688, 38.144) + 5.12 + 0.0012
    tpot = 14.48 + 0.832 * math.sqrt(17) + 0.0014
    speed = serving_speed(workload(batching="static"), calibration=CAL)
    assert speed.tpot_s == pytest.approx(tpot, rel=1e-12)
    # Two requests a batch of prefill + 5 steps, 4 tokens each on average.
    assert speed.tokens_per_s == pytest.approx(2 / (prefill + 5 * tpot) * 4, rel=1e-12)
    # A client's next request waits for the batch's longest after its own: 5 - 4 = 1 step on average. The
    # wait is max(0, the other's answer - its own): 6 - 2 = 4 steps when its answer is short and the other's
    # long (1/4), else 0. So its median is 0 and its p90 4 steps (3/4 of the requests wait none).
    assert speed.ttft_s == pytest.approx(prefill + 0.01 + 1 * tpot, rel=1e-12)
    assert speed.ttft_median_s == pytest.approx(prefill + 0.01, rel=1e-12)
    assert speed.ttft_p90_s == pytest.approx(prefill + 0.01 + 4 * tpot, rel=1e-12)
    # One client alone waits for no one: its answer ends its batch.
    alone = serving_speed(workload(batching="static", concurrency=1), calibration=CAL)
    assert alone.ttft_s == alone.ttft_median_s == alone.ttft_p90_s


def test_a_static_batch_prices_a_long_prompt_among_mean_ones(monkeypatch):
    # Two clients, mean prompt 4 tokens, and TTFT priced at an 8-token prompt (the full prompt, as a p90 of
    # the prompts would be: ``ttft_prompts`` set to it, the load's prompts unchanged): the TTFT it sees is its
    # batch's prefill, its 8 tokens beside the other's 4: 12 x 2,384 / 500 = 57.216 s beside 8.688 s of
    # weights; attention 640 (the 4-token prompt, 2 x 10 pairs x 32) + 2 x 36 pairs x 32 = 2,304 for the
    # 8-token one: 2,944 / 250 = 11.776 s; fixed 1.2 ms. It was priced as the mean prompt's batch, 28 ms
    # below a full prompt alone on the real GPU.
    monkeypatch.setattr(ServingWorkload, "ttft_prompts", lambda self, share: ((1.0, 8),))
    full = math.hypot(8.688, 57.216) + 11.776 + 0.0012
    speed = serving_speed(workload(batching="static", full_prompt=8), calibration=CAL)
    assert speed.ttft_s == speed.ttft_median_s == speed.ttft_p90_s == pytest.approx(full + 0.01, rel=1e-12)
    assert speed.ttft_s >= speed.ttft_single_s
    # Over two stages (one layer each: 2,000 B of weights, 4 s; a prefill token 1,192 FLOPs, 2.384 s; half the
    # attention) the two sequences are two microbatches: the 8-token prompt's alone (19.072 s of GEMMs beside
    # 4 s, 2,304 / 2 / 250 = 4.608 s of attention) and the 4-token one's (9.536 s beside 4 s, 1.28 s). A
    # pipeline of microbatches that take the same time on each stage ends after their sum plus the longest
    # once more per stage beyond the first, and one hop: it was both spread evenly (6 tokens each), below the
    # 8-token prompt's pass alone.
    heavy = math.hypot(4, 19.072) + 4.608 + 0.0011
    light = math.hypot(4, 9.536) + 1.28 + 0.0011
    piped = serving_speed(
        workload(batching="static", full_prompt=8, pipeline_parallel=2, weights_read=2000.0), calibration=CAL
    )
    assert piped.ttft_s == pytest.approx(heavy + light + heavy + 0.5 + 0.01, rel=1e-12)
    assert piped.ttft_s >= piped.ttft_single_s
