"""Training framework paths on real models, each figure counted by hand (issue 29): the LoRA adapters' GEMMs and
kernels on every linear of Llama-3.1-8B, the rate an fp32 fine-tune of Llama-3.2-3B runs at on an H200, and a
micro-batch small enough that the host's kernel launches pace it."""

from __future__ import annotations

import dataclasses

import pytest
from training_jobs import training_setup, training_workload

from gpuplan.catalog import get_gpu, get_model
from gpuplan.estimate.calibration import CALIBRATION, TrainingMechanisms
from gpuplan.estimate.kernels import adapter_work
from gpuplan.estimate.performance import Efficiency, fp32_matmul_peak
from gpuplan.estimate.training_speed import gemm_peak, training_speed

LLAMA8 = get_model("llama-3.1-8b").architecture
LLAMA3B = get_model("llama-3.2-3b").architecture
H200 = get_gpu("h200-sxm")
ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# Round training figures: GEMMs and attention at their whole ceilings x 1/2 of the attention's, HBM at 1/2.
ROUND = dataclasses.replace(
    CALIBRATION,
    training=TrainingMechanisms(
        gemm_efficiency=1.0,
        attention_efficiency=0.5,
        low_precision_gemm_factor=1.0,
        kernel_launch_s=0.0,
        bandwidth_efficiency=0.5,
        link_efficiency=0.5,
        overlap=1.0,
    ),
)


def test_lora_on_every_linear_of_llama_8b_against_a_hand_count():
    # Llama-3.1-8B (h 4,096, KV width 1,024, MLP 14,336, 32 layers), rank 16 on all seven linears, dropout
    # 0.05, the Hugging Face Trainer's path: bf16-mixed autocast over the bf16 base, peft's fp32 adapters.
    setup = training_setup(LLAMA8, method="lora", lora_rank=16, lora_targets=ALL_LINEAR, lora_dropout=0.05)
    work = adapter_work(setup, "eager", 2048, 1.0)
    # Adapter parameters per layer, r (d_in + d_out): q and o 16 x 8,192, k and v 16 x 5,120, gate, up and
    # down 16 x 18,432: 1,310,720; x 32 layers = 41,943,040. GEMM FLOPs of one 2,048-token micro-batch: x @ A
    # and @ B forward, the input and weight gradients of both backward, 6 x 41,943,040 x 2,048.
    assert work.gemm_flops == 6 * 41_943_040 * 2048 == 515_396_075_520
    # Six GEMMs per adapted linear: 6 x 7 x 32 = 1,344 launches.
    assert work.gemm_kernels == 1344
    # Their bytes: each reads or writes its d-wide operand once in bf16, 3 (d_in + d_out) x 2 B a token; the
    # seven linears' d_in sum to 38,912 and d_out to 43,008: 3 x 2 x 81,920 x 2,048 x 32 = 32,212,254,720 B.
    assert work.gemm_bytes == 32_212_254_720
    # Around each adapter (peft lora.Linear.forward), forward: the bf16 input cast to fp32, dropout (a
    # dropped copy and a mask), autocast's cast back to bf16 with its two weight casts, the scaling, the add
    # to the base output: 7 kernels; backward the scaling, the casts back (3), dropout's mask multiply, the
    # cast to bf16 and the input gradient's sum into the base layer's: 7. 14 x 7 x 32 = 3,136 launches.
    assert work.elementwise.kernels == 3136
    # Bytes per token: forward 6 + 9 + 6 = 21 B over d_in, 4 + 6 = 10 B over d_out; backward 6 + 9 + 6 + 6 =
    # 27 B over d_in, 4 B over d_out: 48 x 38,912 + 14 x 43,008 = 2,469,888 B a layer, x 32 x 2,048.
    assert work.elementwise.bytes == 2_469_888 * 32 * 2048
    # Without dropout the two dropout kernels and their 18 B over d_in go: 12 x 224 = 2,688 launches.
    plain = adapter_work(
        dataclasses.replace(setup, job=dataclasses.replace(setup.job, lora_dropout=0.0)), "eager", 2048, 1.0
    )
    assert plain.elementwise.kernels == 2688
    assert plain.elementwise.bytes == (30 * 38_912 + 14 * 43_008) * 32 * 2048
    # Unsloth's fast LoRA (fused, no dropout) folds the scaling and add into addmm_: no elementwise kernels.
    assert adapter_work(plain_setup(setup), "fused", 2048, 1.0).elementwise.kernels == 0


def test_lora_on_the_experts_of_an_moe_model_against_a_hand_count():
    # Qwen3-30B-A3B (h 2,048, 48 layers of 128 experts of width 768, each token routed to 8), rank 16 on
    # gate, up and down_proj of every expert (lora.experts all). A token passes through its 8 experts' adapters:
    # 6 x 16 x (2,048 + 768) x 3 matrices x 8 experts = 6,488,064 FLOPs a layer, x 48 layers x 2,048 tokens.
    # gpuplan priced one expert's adapters a token (1/8 of these FLOPs).
    moe = get_model("qwen3-30b-a3b").architecture
    setup = training_setup(moe, method="lora", lora_rank=16, lora_targets=("gate_proj", "up_proj", "down_proj"))
    work = adapter_work(plain_setup(setup), "eager", 2048, 1.0)
    assert work.gemm_flops == 6_488_064 * 48 * 2048 == 637_802_643_456
    # transformers runs the experts one after another: six GEMMs per adapted matrix of each of the 128 experts,
    # 6 x 3 x 128 x 48 = 110,592 launches.
    assert work.gemm_kernels == 110_592
    # Shared experts only (there are none in this model): nothing of the MLP is adapted.
    shared = dataclasses.replace(setup, job=dataclasses.replace(setup.job, lora_experts="shared", lora_dropout=0.0))
    assert adapter_work(shared, "eager", 2048, 1.0).gemm_flops == 0


def plain_setup(setup):
    return dataclasses.replace(setup, job=dataclasses.replace(setup.job, lora_dropout=0.0))


def test_fp32_runs_on_the_cuda_cores_unless_tf32_is_allowed():
    # H200 SXM: fp32 67 TFLOPS on the CUDA cores (no TF32: PyTorch's default "highest" precision); TF32 tensor
    # cores 494.5 dense (the H100's 989 with sparsity, halved); bf16 989.5. T4 has no TF32 units: fp32 either way.
    assert fp32_matmul_peak(H200, False) == (67e12, "CUDA cores (fp32, no TF32)")
    assert fp32_matmul_peak(H200, True) == (494.5e12, "TF32 tensor cores")
    t4 = get_gpu("t4")
    assert fp32_matmul_peak(t4, True)[0] == fp32_matmul_peak(t4, False)[0] == 8.1e12
    job = training_setup(LLAMA3B, method="full", precision="fp32").job
    assert gemm_peak(dataclasses.replace(job, hardware=dataclasses.replace(job.hardware, gpu=H200)), H200)[0] == 67e12


def test_a_llama_3b_fp32_step_on_h200_by_hand():
    # Llama-3.2-3B: 28 layers of 100,663,296 linear weights (q and o 3,072 x 3,072, k and v 3,072 x 1,024, gate,
    # up and down 3,072 x 8,192) and the tied head 128,256 x 3,072 = 394,002,432, with the 57 norms of 3,072:
    # 3,212,749,824 parameters, all of which matmul_params counts (the embedding lookup aside, the tied head
    # once, the norms' 175,104 with them). Full fine-tuning in fp32, one 2,048-token
    # sequence, compiled, on one H200 at the round figures (GEMMs at the MAMF ceiling 0.803, attention at 1/2
    # of FlashAttention-2's 0.35, HBM at 1/2: 2.4 TB/s):
    # - GEMMs 6 x 3,212,749,824 x 2,048 = 3.94783e13 FLOPs at 67 x 0.803 = 53.801 TFLOP/s: 0.733783 s
    #   (at the TF32 rate, 494.5 x 0.803 = 397.08 TFLOP/s: 0.099421 s);
    # - causal attention 3 x 28 layers x 2 x 24 heads x 256 x 2,098,176 pairs = 2.16574e12 FLOPs on the CUDA
    #   cores, 67 x 0.35 x 0.5 = 11.725 TFLOP/s: 0.184711 s, with TF32 or not;
    # - the compiled layers' elementwise traffic with 4-byte stream and activations, per token and layer:
    #   forward two residual-add + norm kernels 2 x 16 x 3,072, rotary 8 x (3,072 + 1,024), SwiGLU 12 x 8,192
    #   (229,376 B); backward the norms 2 x 16 x 3,072, rotary again, 20 x 8,192, three extra readers
    #   3 x 4 x 3,072 (331,776 B): 561,152 B x 28 x 2,048 = 3.21787e10 B; the loss 2 x 2 x 4 B x 128,256
    #   logits x 2,048 = 4.20269e9 B: 3.63814e10 B / 2.4 TB/s = 0.015159 s;
    # - fp32 AdamW: weights and two states read and written, the gradient read, 28 B x 3,212,749,824 =
    #   8.99570e10 B / 2.4 TB/s = 0.037482 s.
    # Step 0.971135 s: 2,109 tokens/s; with TF32 0.336773 s: 6,081 tokens/s.
    def step(tf32: bool) -> float:
        w = training_workload(
            LLAMA3B,
            H200,
            LLAMA3B.params,
            10**9,
            method="full",
            precision="fp32",
            tf32=tf32,
            framework="compiled",
            seq_len=2048,
            micro_batch=1,
        )
        return training_speed(w, Efficiency(), ROUND).step_s

    assert LLAMA3B.params == 3_212_749_824
    assert step(False) == pytest.approx(0.733783 + 0.184711 + 0.015159 + 0.037482, rel=1e-5)
    assert step(True) == pytest.approx(0.099421 + 0.184711 + 0.015159 + 0.037482, rel=1e-5)


def test_a_small_micro_batch_is_paced_by_its_launches():
    # Llama-3.1-8B, LoRA rank 16 on every linear (no dropout), bf16-mixed over the bf16 base, eager, 64 tokens
    # on an H200, 10 us of host time per launch. Launches per layer: two RMSNorms 8 forward + 13 backward
    # each (42), two residual adds and their gradient sums (4), rotary over q and k 5 + 9 each (28),
    # repeat_kv's copies and sums (4), SiLU x up 2 + 3 (5), the summed input gradients of q/k/v and gate/up
    # (3), 7 GEMMs forward and 7 input-gradient GEMMs backward (frozen base), the attention 1 + 3: 104; the
    # adapters 12 elementwise and 6 GEMMs on each of 7 linears (126): 230, x 32 = 7,360, and the loss's 7:
    # 7,367 launches, 73.67 ms, far above the GPU's few milliseconds for 64 tokens.
    calibration = dataclasses.replace(ROUND, training=dataclasses.replace(ROUND.training, kernel_launch_s=10e-6))
    w = training_workload(
        LLAMA8, H200, 41_943_040, 10**9, method="lora", lora_targets=ALL_LINEAR, seq_len=64, micro_batch=1
    )
    speed = training_speed(w, Efficiency(), calibration)
    assert speed.kernels == 7367
    assert speed.micro_batch_s == speed.launch_s == pytest.approx(7367 * 10e-6)
