"""The training speed model term by term on a toy GPU with round rates, each figure derived by hand.

The toy GPU (tests/toy_gpu.py, as in test_serving_speed.py): 1,000 FLOP/s bf16, 2,000 fp8, 1,000 B/s
HBM, MAMF ceiling 1/2 and FlashAttention-2 ceiling 1/2 (set below), NVLink 1,000 B/s one way over 8 GPUs.
Training calibration: GEMMs at the whole ceiling (500 FLOP/s), attention at 1/2 of it (250), HBM at 1/2
(500 B/s), links at 1/2 (500 B/s), half of a micro-batch's compute hides data-parallel traffic, and no
host time per kernel launch (the launch floor has its own tests).

TINY: 2 layers, hidden 8 (2 query heads and 1 KV head of 4), MLP 16, vocabulary 32: 1,704 parameters, 1,448
of them multiplied per token (all but the embedding), 1,152 decoder linears. A 4-token sequence's causal
attention: 10 pairs x 2 layers x 32 FLOPs = 640, i.e. 160 per token.

The jobs run ``framework: compiled`` (gpuplan/estimate/kernels.py), whose elementwise kernels are the
fewest to count by hand. Per layer and token, with 2-byte stream and activations: two fused residual-add +
RMSNorm kernels, forward 2 x (2 x 2 + 2 x 2) x 8 = 128 B, backward 2 x (3 x 2 + 2) x 8 = 128 B; rotary over q
(8) and k (4), 2 x 2 B each way: 48 + 48 B; SwiGLU over 16, 3 x 2 = 6 B forward and 5 x 2 = 10 B backward:
96 + 160 B; the input gradients of q, k, v, gate and up read by the norms' backward, 3 more readers x 8 x 2 B
= 48 B. Forward 272 B, backward 384 B: 656 B, x 2 layers x 4 tokens = 5,248 B. The compiled loss reads the
16-bit logits twice forward and writes and reads them once backward: 2 x 2 x 2 B x 32 x 4 = 1,024 B.
Together 6,272 B: 12.544 s at 500 B/s.
"""

from __future__ import annotations

import dataclasses

import pytest
from training_jobs import training_workload, vary_workload

from gpuplan.estimate import performance
from gpuplan.estimate.calibration import Calibration, ServingMechanisms, TrainingMechanisms
from gpuplan.estimate.performance import Efficiency
from gpuplan.estimate.training_speed import model_flops_per_token, training_speed
from tests.tiny_architectures import TINY
from tests.toy_gpu import GPU, unit_ceiling  # noqa: F401  (the autouse fixture)


@pytest.fixture(autouse=True)
def unit_attention_ceiling(monkeypatch):
    monkeypatch.setitem(performance.ATTENTION_CEILING, "flash", {"unit-gpu": 0.5})


CAL = Calibration(
    engines={},
    serving=ServingMechanisms(0.5, 0.0, 0.0, 0.0, 0.5, 2),
    training=TrainingMechanisms(
        gemm_efficiency=1.0,
        attention_efficiency=0.5,
        low_precision_gemm_factor=0.5,
        kernel_launch_s=0.0,
        bandwidth_efficiency=0.5,
        link_efficiency=0.5,
        overlap=0.5,
    ),
)
BASE = training_workload(
    TINY,
    GPU,
    1704,
    1000,
    method="full",
    precision="bf16",
    optimizer="adamw",
    checkpointing=False,
    seq_len=4,
    micro_batch=1,
    gradient_accumulation=1,
    sharding="none",
    framework="compiled",
    lora_rank=2,
    lora_targets=("q_proj", "v_proj"),
)
# LoRA rank 2 on q_proj (8 -> 8) and v_proj (8 -> 4): 2 x (16 + 12) = 56 adapter parameters a layer, 112 in all.
ADAPTERS = 112


def run(efficiency=None, **changes):
    return training_speed(vary_workload(BASE, **changes), efficiency, calibration=CAL)


def test_model_flops_per_token():
    # Full: 6 x 1,448 + 3 x 160 = 9,168. LoRA with 112 adapter parameters: 4 x 1,448 + 6 x 112 + 480 = 6,944.
    assert model_flops_per_token(TINY, "full", 4, 1704) == 9168
    assert model_flops_per_token(TINY, "lora", 4, 112) == 6944


def test_one_gpu_full_fine_tuning():
    # A micro-batch: GEMMs 3 passes x 2 x 1,448 x 4 = 34,752 / 500 = 69.504 s; attention 3 x 640 / 250 =
    # 7.68 s; the layers' and the loss's elementwise bytes 12.544 s (above): 89.728 s. The AdamW step reads
    # and writes weights and two states, reads the gradient: (2 x 2 + 2 + 2 x 4) = 14 B x 1,704 / 500 =
    # 47.712 s. Step 137.44 s for 4 tokens.
    speed = run()
    assert speed.flops_per_token == 9168
    assert speed.micro_batch_s == pytest.approx(89.728, rel=1e-12)
    assert speed.step_compute_s == pytest.approx(137.44, rel=1e-12)
    assert speed.step_s == pytest.approx(137.44, rel=1e-12)
    assert speed.gradient_sync_s == 0
    assert speed.tokens_per_s == speed.tokens_per_s_per_gpu == pytest.approx(4 / 137.44, rel=1e-12)
    assert speed.hours == pytest.approx(1000 / (4 / 137.44) / 3600, rel=1e-12)
    assert speed.mfu == pytest.approx(9168 * 4 / 137.44 / 1000, rel=1e-12)


def test_lora_with_recompute_tensor_and_pipeline_parallel():
    # TP 2 x PP 2 on 8 GPUs: DP 2; one layer per stage, a quarter of the model per GPU. bf16-mixed over a
    # 16-bit base: autocast, a 2-byte stream, the fp32 adapters' GEMMs in bf16. Micro-batch:
    # - GEMMs (2 passes + 1 recompute) x 2 x 1,448 / 4 x 4 = 8,688 / 500 = 17.376 s;
    # - attention (3 + 1) x 160 = 640 / 250 = 2.56 s;
    # - the layer per token on a TP rank (stream 8, q 4, kv 4, MLP 8): norms 2 x 8 x 8 = 128 B forward and
    #   2 x 8 x 8 = 128 B backward, rotary (4 + 4) x 4 = 32 B each way, SwiGLU 6 x 8 = 48 B and 10 x 8 = 80 B,
    #   the three extra readers 3 x 8 x 2 = 48 B: 208 B forward, 288 B backward; x 4 tokens: 832 + 1,152 B,
    #   and the recomputed forward 832 B again: 2,816 B (a fused loss moves nothing);
    # - adapters on the rank: q_proj 4 -> 4 and v_proj 4 -> 2, rank 2: 6 x 2 x 14 = 168 FLOPs a token,
    #   x 4 = 672 FLOPs at 500 FLOP/s = 1.344 s, above their bytes (3 x 2 B x 14 x 4 = 336 B: 0.672 s),
    #   x (1 + 1/3 recomputed forward) = 1.792 s; around them, compiled: the scaled add forward (2 x 2 + 2
    #   B over d_out: 24 + 12 B) and backward the scaling (4 B over d_out) and the input gradient's sum
    #   (6 B over d_in): 16 + 24 + 8 + 24 = 72 B; 108 B a token, x 4 = 432 B, the forward's 144 B again:
    #   576 B;
    # - the fused loss over the rank's 4 x 32 / 2 = 64 logits, read twice and its gradient written, 3 x 2 B:
    #   384 B. Elementwise 3,776 B / 500 = 7.552 s.
    # Micro-batch 17.376 + 2.56 + 7.552 + 1.792 = 29.28 s. TP: (4 + 2 with recompute) all-reduces of
    # 4 x 8 x 2 = 64 B, 64 / 500 = 0.128 s each: 0.768 s. Optimizer: 8-bit Adam on 112 / 4 = 28 fp32
    # adapters: (2 x 4 + 4 + 2 x 2 + 2) = 18 B x 28 / 500 = 1.008 s. Step: (2 micro-batches + 1 bubble) x
    # 29.28 + 2 x 0.768 + 1.008 = 90.384 s; the gradients (28 x 4 B over 500 B/s: 0.224 s) hide behind compute.
    speed = run(
        method="lora",
        precision="bf16-mixed",
        optimizer="adamw-8bit",
        checkpointing=True,
        tensor_parallel=2,
        pipeline_parallel=2,
        gpus=8,
        gradient_accumulation=2,
        fused_loss=True,
        trainable_params=ADAPTERS,
    )
    assert speed.micro_batch_s == pytest.approx(29.28, rel=1e-12)
    assert speed.step_compute_s == pytest.approx(90.384, rel=1e-12)
    assert speed.gradient_sync_s == 0
    # 2 x 4 tokens per step over TP x PP = 4 GPUs: 2 tokens per GPU; 8 GPUs together.
    assert speed.tokens_per_s_per_gpu == pytest.approx(2 / speed.step_s, rel=1e-12)
    assert speed.tokens_per_s == pytest.approx(8 * 2 / speed.step_s, rel=1e-12)
    assert speed.flops_per_token == 6944


def test_zero3_fp8_with_an_mfu_override_exposes_its_traffic():
    # Override: model FLOPs at 1.0 of the fp8 peak, 2,000 FLOP/s: 9,168 x 4 / 2,000 = 18.336 s.
    # ZeRO-3 over 2: gather bf16 parameters twice (3,408 B) and reduce-scatter bf16 gradients (3,408 B):
    # 3 x 1/2 x 3,408 / 500 = 10.224 s, half a micro-batch (9.168 s) hides: 1.056 s exposed.
    # Optimizer on half of the fp32 states: (2 x 4 + 4 + 2 x 2 x 4 + 2) = 30 B x 852 / 500 = 51.12 s.
    speed = run(Efficiency(training_mfu=1.0), precision="fp8-mixed", sharding="zero3", gpus=2)
    assert speed.gradient_sync_s == pytest.approx(1.056, rel=1e-12)
    assert speed.step_compute_s == pytest.approx(18.336 + 51.12, rel=1e-12)
    assert speed.step_s == pytest.approx(18.336 + 51.12 + 1.056, rel=1e-12)
    assert speed.tokens_per_s == pytest.approx(2 * 4 / speed.step_s, rel=1e-12)


def test_fp8_gemms_and_qlora_dequantization():
    # fp8-mixed without autocast (16-bit working weights, as Transformer Engine runs them) and without
    # override: GEMMs at 2,000 x the fp8 ceiling 1/4 x 1.0 x the low-precision factor 1/2 = 250 FLOP/s:
    # 34,752 / 250 = 139.008 s (attention and elementwise as bf16: 7.68 + 12.544 s). Optimizer: 30 B x
    # 1,704 / 500 = 102.24 s.
    speed = run(precision="fp8-mixed", autocast=False)
    assert speed.step_compute_s == pytest.approx(139.008 + 7.68 + 12.544 + 102.24, rel=1e-12)
    # QLoRA over 2 GPUs, pure bf16: GEMMs 2 x 11,584 = 23,168 / 500 = 46.336 s; the fp32 adapters run
    # without autocast in fp32 (the toy GPU has no fp32 figure: its 16-bit rate, 500 FLOP/s): 6 x 112 x 4
    # = 2,688 FLOPs = 5.376 s, their bytes 3 x 4 B x 28 x 4 x 2 layers = 2,688 B = 5.376 s as well;
    # attention 3 x 640 / 250 = 7.68 s. Elementwise: the layers 5,248 B and the loss 1,024 B as above,
    # dequantizing 1,152 NF4 weights twice at 2.5 B = 5,760 B, and around the adapters (fp32 output, 2-byte
    # input) the scaled add 2 x 2 + 4 = 8 B over d_out forward, the scaling 8 B over d_out and the input
    # gradient's sum 6 B over d_in backward: q (8 -> 8) 64 + 112 B, v (8 -> 4) 32 + 80 B, 288 B a token
    # and layer, x 8 = 2,304 B: 14,336 B / 500 = 28.672 s. Micro-batch 46.336 + 5.376 + 7.68 + 28.672 =
    # 88.064 s; optimizer 14 B x 112 / 500 = 3.136 s.
    qlora = run(method="qlora", trainable_params=ADAPTERS, gpus=2)
    assert qlora.micro_batch_s == pytest.approx(88.064, rel=1e-12)
    assert qlora.step_compute_s == pytest.approx(88.064 + 3.136, rel=1e-12)
    # The adapters' fp32 gradients (112 x 4 B, 448 / 500 = 0.896 s) hide behind 2/3 of the micro-batch.
    assert qlora.gradient_sync_s == 0


def test_mfu_override_with_recompute():
    # Model FLOPs 9,168 x 4 = 36,672 plus the recomputed forward (GEMMs 2 x 1,448 x 4 = 11,584 and
    # attention 640), at 1.0 x the bf16 peak: 48,896 / 1,000 = 48.896 s; optimizer 47.712 s.
    speed = run(Efficiency(training_mfu=1.0), checkpointing=True)
    assert speed.step_compute_s == pytest.approx(48.896 + 47.712, rel=1e-12)
    assert speed.flops_per_token == 9168  # recompute is not model FLOPs


def test_qlora_dequantizes_only_its_stage():
    # PP 2 on 2 GPUs: half the model per GPU (test_fp8_gemms_and_qlora_dequantization halved where the layer
    # is): GEMMs 11,584 / 500 = 23.168 s; adapters 1,344 FLOPs and 1,344 B: 2.688 s; attention 3 x 320 / 250
    # = 3.84 s; elementwise: the layer 2,624 B, the loss 1,024 B (the whole vocabulary on this GPU), the
    # stage's dequantization 1,152 / 2 x 2.5 x 2 = 2,880 B and its adapters' 1,152 B: 7,680 B / 500 =
    # 15.36 s. Micro-batch 45.056 s, twice (one of them the bubble); optimizer 14 B x 56 / 500 = 1.568 s.
    speed = run(method="qlora", trainable_params=ADAPTERS, pipeline_parallel=2, gpus=2)
    assert speed.step_compute_s == pytest.approx(2 * 45.056 + 1.568, rel=1e-12)


def test_attention_runs_at_the_kernel_s_ceiling_of_the_gpu(monkeypatch):
    # A cuDNN ceiling of 4/5 on the toy GPU: attention 3 x 640 FLOPs at 1,000 x 0.8 x 0.5 = 400 FLOP/s =
    # 4.8 s instead of 7.68 s; a kernel the GPU has no figure for (flash3) keeps FlashAttention-2's 1/2.
    monkeypatch.setitem(performance.ATTENTION_CEILING, "cudnn", {"unit-gpu": 0.8})
    assert run(attention="cudnn").step_compute_s == pytest.approx(137.44 - 7.68 + 4.8, rel=1e-12)
    assert run(attention="flash3").step_compute_s == pytest.approx(137.44, rel=1e-12)


def test_data_parallel_traffic_across_nodes_moves_at_the_node_network(monkeypatch):
    # DDP over 16 toy GPUs (two nodes of 8, one NIC per GPU at 100 B/s): a ring at 8 x 100 = 800 B/s per
    # GPU, below NVLink's 1,000, x link efficiency 1/2 = 400 B/s. bf16 gradients 3,408 B all-reduced:
    # 2 x 15/16 x 3,408 / 400 = 15.975 s, of which 2/3 x 1/2 x 89.728 = 29.9093 s of backward hides all.
    # At 10 B/s per NIC: 80 x 1/2 = 40 B/s: 159.75 s, 129.8407 s exposed.
    assert run(gpus=16, network_gbs=100e-9).gradient_sync_s == 0
    assert run(gpus=16, network_gbs=10e-9).gradient_sync_s == pytest.approx(159.75 - 89.728 / 3, rel=1e-12)


def test_mfu_override_counts_only_this_stages_share_of_the_model_flops():
    # PP 2 on 2 GPUs, bf16, training_mfu 1.0: this GPU holds one of the 2 layers, so its share of the
    # model FLOPs of a micro-batch is 9,168 x 1/2 x 4 = 18,336 at 1,000 FLOP/s: 18.336 s, twice (one of
    # them the bubble). Optimizer (bf16 AdamW, 14 B per parameter) on the stage's 1,704 / 2 = 852
    # parameters: 14 x 852 / 500 = 23.856 s. (Dividing by the share instead would give 73.344 s.)
    speed = run(Efficiency(training_mfu=1.0), pipeline_parallel=2, gpus=2)
    assert speed.step_compute_s == pytest.approx(2 * 18.336 + 23.856, rel=1e-12)


# -- offload: the host's side of the step ------------------------------------------------------------------
# bf16-mixed AdamW, ZeRO-2 over 2 GPUs: each GPU's optimizer partition is 1,704 / 2 = 852 parameters. The
# optimizer step moves 2 x 4 (fp32 master read and written) + 4 (fp32 gradient) + 2 x 2 x 4 (two states
# read and written) + 2 (the 16-bit copy written) = 30 B per parameter: 852 x 30 = 25,560 B, which the GPU
# streams at 500 B/s (51.12 s; test_zero3_fp8_...). Without autocast (16-bit working weights, as DeepSpeed
# and FSDP run mixed precision) a micro-batch computes 89.728 s (test_one_gpu_...), half of which (44.864 s)
# hides copies; a gradient copy hides behind its backward, 2/3 of that: 29.9093 s.
OFFLOADED = dict(precision="bf16-mixed", autocast=False, sharding="zero2", gpus=2)


def test_an_offloaded_optimizer_steps_on_the_host_at_its_memory_bandwidth():
    # offload.host_memory_gbs 2e-6 GB/s = 2,000 B/s per node, shared by its 2 GPUs: 1,000 B/s each. The
    # step on the CPU: 25,560 B / 1,000 = 25.56 s, in place of the GPU's 51.12 s. The copies move at the
    # GPU's link, 1,000 B/s one way (pcie 2,000 bidirectional), no slower than the host share: the fp32
    # gradients out (852 x 4 = 3,408 B: 3.408 s) hide behind the 31.36 s backward; the 16-bit parameters
    # back (852 x 2 = 1,704 B: 1.704 s) run beside the 25.56 s CPU step.
    plain = run(**OFFLOADED)
    offloaded = run(**OFFLOADED, offload_optimizer="cpu", offload_host_gbs=2e-6)
    assert plain.offload_s == plain.host_step_s == 0
    assert offloaded.host_step_s == pytest.approx(25.56, rel=1e-12)
    assert offloaded.offload_s == pytest.approx(25.56, rel=1e-12)
    assert offloaded.step_compute_s == pytest.approx(plain.step_compute_s - 51.12, rel=1e-12)
    assert offloaded.step_s == pytest.approx(plain.step_s - 51.12 + 25.56, rel=1e-12)
    assert offloaded.tokens_per_s == pytest.approx(2 * 4 / offloaded.step_s, rel=1e-12)


def test_offload_copies_beyond_the_backward_are_exposed():
    # A 10 B/s host link (pcie 2e-8 GB/s) and a fast host (2e-3 GB/s per node: 1e6 B/s per GPU), two
    # micro-batches. Micro-batch 1 sends its 16-bit running sum out: 852 x 2 / 10 = 170.4 s, 29.9093 s of
    # it hidden: 140.4907 s. Micro-batch 2 brings the sum back (170.4 s) while sending the fp32 gradients out
    # (852 x 4 / 10 = 340.8 s; the two directions at once): 340.8 - 29.9093 = 310.8907 s. The CPU step takes
    # 25,560 / 1e6 = 0.02556 s, the parameters' copy back 170.4 s: the step's host side is 170.4 s.
    slow = dataclasses.replace(GPU, pcie_gbs=2e-8)
    speed = run(**OFFLOADED, gradient_accumulation=2, offload_optimizer="cpu", offload_host_gbs=2e-3, gpu=slow)
    hidden = 89.728 / 3
    assert speed.host_step_s == pytest.approx(170.4, rel=1e-12)
    assert speed.offload_s == pytest.approx((170.4 - hidden) + (340.8 - hidden) + 170.4, rel=1e-12)


def test_nvme_swaps_the_optimizer_states_around_the_host_step():
    # NVMe at 2e-6 GB/s per node, 1,000 B/s per GPU: the fp32 master and the two states (4 + 2 x 4 = 12 B per
    # parameter, 852 x 12 = 10,224 B) read in before the step and written back after: 20.448 s, on top of
    # the 25.56 s CPU step (host 2e-6 GB/s as above).
    speed = run(**OFFLOADED, offload_optimizer="nvme", offload_host_gbs=2e-6, offload_nvme_gbs=2e-6)
    assert speed.host_step_s == pytest.approx(25.56 + 20.448, rel=1e-12)
    assert speed.offload_s == pytest.approx(25.56 + 20.448, rel=1e-12)


def test_offloaded_parameters_are_fetched_for_every_forward_and_backward():
    # ZeRO-3 over 2 GPUs, parameters on the host, optimizer on the GPU, a 10 B/s link: each micro-batch
    # fetches the GPU's 852-parameter shard in 16 bits for forward and again for backward, 2 x 852 x 2 / 10
    # = 340.8 s, half the 89.728 s micro-batch (44.864 s) hiding it: 295.936 s. After the GPU's optimizer
    # step the updated shard goes back out: 852 x 2 / 10 = 170.4 s. Nothing runs on the CPU.
    slow = dataclasses.replace(GPU, pcie_gbs=2e-8)
    plain = run(precision="bf16-mixed", autocast=False, sharding="zero3", gpus=2, gpu=slow)
    speed = run(precision="bf16-mixed", autocast=False, sharding="zero3", gpus=2, gpu=slow, offload_parameters="cpu")
    assert speed.host_step_s == 0
    assert speed.offload_s == pytest.approx(295.936 + 170.4, rel=1e-12)
    assert speed.step_s == pytest.approx(plain.step_s + 295.936 + 170.4, rel=1e-12)


# -- framework paths: launches and recompute ----------------------------------------------------------------
# Launches of the compiled full fine-tune of TINY (module docstring), per layer: forward 2 norm + 2 rotary + 1
# SwiGLU kernels, 7 GEMMs and the attention; backward 2 norms (each with its weight-gradient reduction: 4),
# 2 rotary, 1 SwiGLU, 14 GEMMs (input and weight gradients) and FlashAttention-2's 3: 5 + 8 + 7 + 17 = 37,
# x 2 layers = 74, and the compiled loss's 2: 76 launches a micro-batch.


def test_a_micro_batch_takes_at_least_its_launches():
    assert run().kernels == 76
    slow_host = dataclasses.replace(CAL, training=dataclasses.replace(CAL.training, kernel_launch_s=1.0))
    # 76 launches at 1 s each: 76 s, under the GPU's 89.728 s: the GPU paces the micro-batch.
    paced_by_gpu = training_speed(BASE, None, calibration=slow_host)
    assert paced_by_gpu.launch_s == pytest.approx(76.0)
    assert paced_by_gpu.micro_batch_s == pytest.approx(89.728, rel=1e-12)
    # At 2 s each: 152 s, over the GPU's time: the host paces it.
    slower = dataclasses.replace(CAL, training=dataclasses.replace(CAL.training, kernel_launch_s=2.0))
    paced_by_host = training_speed(BASE, None, calibration=slower)
    assert paced_by_host.micro_batch_s == pytest.approx(152.0, rel=1e-12)
    assert paced_by_host.step_s == pytest.approx(152.0 + 47.712, rel=1e-12)


def test_selective_recompute_is_priced_per_framework():
    # compiled: the forward's elementwise bytes again (272 B a layer and token, x 8 = 2,176 B / 500 = 4.352 s;
    # Inductor fuses the recomputed pointwise work into the backward's kernels: no launches).
    compiled = run(checkpointing="selective").micro_batch_s - run().micro_batch_s
    assert compiled == pytest.approx(4.352, rel=1e-9)
    # megatron: core attention again (Korthikanti et al. 2022): 640 forward FLOPs / 250 = 2.56 s.
    megatron = run(framework="megatron", checkpointing="selective").micro_batch_s
    assert megatron - run(framework="megatron").micro_batch_s == pytest.approx(2.56, rel=1e-9)
    # eager: the forward's elementwise bytes of the eager layer again. Per token: two RMSNorms at 36 B over
    # 8 (576 B), two residual adds at 6 B (96 B), rotary 20 B over q 8 and k 4 (240 B), repeat_kv's copies of
    # K and V to both query heads, 2 x (4 + 8) x 2 B (48 B), SiLU and the product 10 B over 16 (160 B): 1,120 B,
    # x 2 layers x 4 tokens = 8,960 B / 500 = 17.92 s.
    eager = run(framework="eager", checkpointing="selective").micro_batch_s - run(framework="eager").micro_batch_s
    assert eager == pytest.approx(17.92, rel=1e-9)
    # full recompute runs the whole forward again whatever the framework: GEMMs 2 x 1,448 x 4 = 11,584 FLOPs /
    # 500 = 23.168 s, attention 640 / 250 = 2.56 s, and the compiled forward's elementwise 4.352 s.
    full = run(checkpointing="full").micro_batch_s - run().micro_batch_s
    assert full == pytest.approx(23.168 + 2.56 + 4.352, rel=1e-9)


@pytest.mark.parametrize("method", ["full", "lora"])
def test_fused_and_compiled_paths_never_cost_more_than_eager(method):
    # Per operation the fused and compiled kernels read and write no more than the eager ones they replace.
    eager = run(framework="eager", method=method, trainable_params=ADAPTERS)
    for framework in ("compiled", "fused"):
        other = run(framework=framework, method=method, trainable_params=ADAPTERS)
        assert other.micro_batch_s <= eager.micro_batch_s
        assert other.kernels <= eager.kernels
