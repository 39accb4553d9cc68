"""Fine-tuning memory setting by setting, derived by hand: through the spec path on Llama-3-8B, and to
the byte on a tiny decoder.

Llama-3-8B: P = 8,030,261,248 parameters, 32 layers, hidden 4,096, 8 KV heads of 128, MLP 14,336,
vocabulary 128,256; the largest single matrix is the LM head (128,256 x 4,096 = 525,336,576).

The ground-truth tests hold within a few per cent, so a changed coefficient in a term that is a small
share of an 8B model's peak goes unseen there; on the tiny decoder every phase's parts are exact, on a
model small enough to add up on paper. TINY (tests/tiny_architectures.py): 2 layers, hidden 8, 2 heads
of 4 (one KV head), gated MLP 16 wide, vocabulary 32, RMSNorm, untied. Per layer: q 8x8 = 64, k 8x4 =
32, v 32, o 64 (attention 192), gate/up/down 3 x 8 x 16 = 384, two norms 16: 592. Embedding 32 x 8 =
256, LM head 256, final norm 8. Parameters: 2 x 592 + 520 = 1,704; decoder linears 2 x (192 + 384) =
1,152; the layers' share before the first layer's gradient (layer 0 + embedding over layers + embedding
+ head) = (592 + 256) / 1,696 = 1/2.
"""

from __future__ import annotations

import dataclasses
import datetime
import json

import pytest
import yaml
from conftest import make_spec, run_cli
from training_jobs import training_setup, vary

from gpuplan.architecture import Architecture
from gpuplan.catalog import gpu_catalog
from gpuplan.config import default_settings
from gpuplan.estimate.training import TrainingSetup
from gpuplan.estimate.training_activations import layer_activation_bytes_per_token, selective_layer_bytes_per_token
from gpuplan.estimate.training_memory import estimate_training
from gpuplan.linter import LintOptions, lint_bytes
from gpuplan.output.estimate_json import estimate_document
from gpuplan.plan.configured import planner_for
from gpuplan.plan.space import Layout, TrainingSettings
from tests.tiny_architectures import MOE, TINY

P = 8_030_261_248
HEAD = 128_256 * 4096
GIB = 2**30


def run(finetune: dict, model: str = "llama-3-8b") -> tuple[dict, list[str]]:
    document = {"version": 1, "name": "t", "model": {"id": model}, "finetune": {"method": "full", **finetune}}
    document["finetune"].setdefault("hardware", {"gpu": "h200-sxm"})
    text = yaml.safe_dump(document, sort_keys=False)
    result = lint_bytes("t.yaml", text.encode(), LintOptions(today=datetime.date(2026, 12, 1)))
    codes = [finding.code for finding in result.findings]
    return (estimate_document(result.analysis)["finetune"] if result.analysis else {}), codes


def step(job: dict) -> dict:
    return job["phases"]["optimizer_step"]


def test_optimizer_offload_moves_zero_offload_states_to_the_host():
    # bf16-mixed without autocast (DeepSpeed bf16), an in-place Adam: GPU keeps 2 B weights + 2 B gradients
    # per parameter; the host keeps fp32 master 4 + Adam states 8 + the fp32 gradient copy 4 = 16 B/param,
    # DeepSpeed's own estimator figure for ZeRO-2 offload.
    base = {"precision": "bf16-mixed", "autocast": False, "optimizer": "adamw-fused"}
    kept, _ = run(base)
    moved, _ = run({**base, "offload": {"optimizer": "cpu"}})
    assert step(kept)["optimizer"] == 12 * P
    # The default manual loop still holds the step's bf16 logits, 2 B x 128,256 x 2,048 tokens.
    assert step(moved) == {"weights": 2 * P, "gradients": 2 * P, "model_outputs": 2 * 128_256 * 2048}
    assert moved["host_bytes_per_gpu"] == 16 * P == moved["host_bytes"]  # one GPU: the node holds one share
    assert moved["per_gpu_bytes"] < kept["per_gpu_bytes"]
    on_nvme, _ = run({**base, "offload": {"optimizer": "nvme"}})
    assert on_nvme["nvme_bytes_per_gpu"] == 16 * P and on_nvme["host_bytes"] == 0
    # torch's foreach AdamW stepping CPU tensors (FSDP cpu_offload) adds its fp32 temporary on the host.
    foreach, _ = run({**base, "optimizer": "adamw", "offload": {"optimizer": "cpu"}})
    assert foreach["host_bytes_per_gpu"] == 20 * P


def test_parameter_offload_under_zero3_keeps_only_the_gathered_units():
    # ZeRO-3 over 8 GPUs, bf16: each GPU's bf16 shard (2P/8) moves to the host; what stays is the unit in
    # use and the prefetched one (the LM head / embedding, 525,336,576 parameters, is the largest unit:
    # 2 x 2 B each) and the current unit's bf16 gradient (2 B).
    settings = {"precision": "bf16", "sharding": "zero3", "hardware": {"gpu": "h200-sxm", "count": 8}}
    kept, _ = run(settings)
    moved, _ = run({**settings, "offload": {"parameters": "cpu"}})
    assert step(kept)["weights"] == pytest.approx(2 * P / 8, abs=1)
    assert "weights" not in step(moved)
    assert moved["phases"]["backward"]["gathered_parameters"] == 2 * 2 * HEAD + 2 * HEAD
    # the step releases every gathered parameter first (stage3.py step: _partition_all_parameters)
    assert "gathered_parameters" not in step(moved)
    assert moved["host_bytes_per_gpu"] == pytest.approx(2 * P / 8, abs=1)
    assert moved["host_bytes"] == pytest.approx(8 * 2 * P / 8, abs=8)  # 8 GPUs per node


def test_optimizer_in_backward_never_holds_all_gradients():
    # torchtune optimizer_in_bwd, pure bf16: each parameter is stepped when its gradient is complete; the
    # largest gradient alive is the LM head's (2 B x 525,336,576) and there is no optimizer-step phase.
    job, codes = run({"precision": "bf16", "optimizer_in_backward": True})
    assert codes == [] or "GP025" not in codes
    assert set(job["phases"]) == {"forward", "backward"}
    assert all(parts.get("gradients", 0) <= 2 * HEAD for parts in job["phases"].values())
    plain, _ = run({"precision": "bf16"})
    assert job["per_gpu_bytes"] < plain["per_gpu_bytes"]
    _, codes = run({"precision": "bf16", "optimizer_in_backward": True, "gradient_accumulation": 4})
    assert codes == ["GP025"]


def test_paged_8bit_adamw_states_are_on_the_gpu_only_for_the_step():
    # Two 1-byte states + one fp32 absmax per 2,048-value block and state: P x (2 + 8/2,048) bytes.
    job, _ = run({"precision": "bf16", "optimizer": "adamw-8bit-paged"})
    assert step(job)["paged_optimizer_states"] == pytest.approx(P * (2 + 8 / 2048), abs=1)
    assert "optimizer" not in job["phases"]["forward"] and "optimizer" not in job["phases"]["backward"]
    resident, _ = run({"precision": "bf16", "optimizer": "adamw-8bit"})
    assert resident["phases"]["forward"]["optimizer"] == step(job)["paged_optimizer_states"]
    assert "unified memory" in job["assumptions"]["optimizer"]


def test_selective_checkpointing_keeps_matmul_and_attention_outputs():
    # Per token and layer (bf16): the layer input, o_proj and down_proj outputs (3 x 2 x 4,096), gate and up
    # outputs (2 x 2 x 14,336), q, k, v and the SDPA output (2 x (2 x 4,096 + 2 x 1,024)) and the fp32
    # logsumexp of 32 heads (128): 24,576 + 57,344 + 20,480 + 128 = 102,528 bytes.
    none, _ = run({"precision": "bf16", "loop": "trainer"})
    selective, _ = run({"precision": "bf16", "loop": "trainer", "activation_checkpointing": "selective"})
    full, _ = run({"precision": "bf16", "loop": "trainer", "activation_checkpointing": True})
    alias, _ = run({"precision": "bf16", "loop": "trainer", "activation_checkpointing": "full"})
    tokens = 2048
    forward = {name: job["phases"]["forward"]["activations"] for name, job in (("s", selective), ("f", full))}
    assert forward["s"] - forward["f"] == 32 * tokens * (102_528 - 2 * 4096)
    assert none["phases"]["forward"]["activations"] > forward["s"]
    assert full == alias  # true is read as full
    off, _ = run({"precision": "bf16", "loop": "trainer", "activation_checkpointing": False})
    assert off == none


def test_selective_checkpointing_of_lora_keeps_the_adapters_matmul_outputs_not_their_inputs():
    # The save list keeps matmul outputs; an adapter's input (the norm output, or peft's cast of it) is no
    # matmul's output, so SAC recomputes it as it does for the frozen linears' own weight gradients. Per token and
    # layer, LoRA with bf16 adapters on its default targets (all seven linears, rank 16) keeps the full
    # fine-tune's 102,528 bytes plus each adapter's rank-16 intermediate, 7 x 16 x 2 = 224 bytes, against full
    # recompute's layer input (2 x 4,096). It kept the two norm outputs too (2 x 2 x 4,096 = 16,384 bytes more a
    # layer-token), and a LoRA of Llama 3.1 8B then needed more memory than its full fine-tune.
    lora = {"method": "lora", "lora": {"dtype": "bf16"}, "precision": "bf16", "loop": "trainer"}
    selective, _ = run({**lora, "activation_checkpointing": "selective"})
    full, _ = run({**lora, "activation_checkpointing": "full"})
    forward = selective["phases"]["forward"]["activations"] - full["phases"]["forward"]["activations"]
    tokens = 2048
    assert forward == 32 * tokens * (102_528 + 224 - 2 * 4096)
    full_tune, _ = run({"precision": "bf16", "loop": "trainer", "activation_checkpointing": "selective"})
    assert selective["per_gpu_bytes"] < full_tune["per_gpu_bytes"]


def test_activation_offloading_keeps_two_layers_on_the_gpu():
    settings = {"method": "lora", "precision": "bf16", "loop": "trainer"}
    kept, _ = run(settings)
    moved, _ = run({**settings, "activation_offloading": True})
    moved_bytes = kept["phases"]["forward"]["activations"] - moved["phases"]["forward"]["activations"]
    assert moved["host_bytes_per_gpu"] == pytest.approx(moved_bytes, abs=2)  # moved, not deleted
    per_layer = moved_bytes / 30  # 32 layers, two kept on the GPU
    assert per_layer == pytest.approx(moved_bytes / (32 - 2))
    assert moved["per_gpu_bytes"] < kept["per_gpu_bytes"]


def test_sequence_parallel_shards_the_checkpointed_inputs():
    # Llama-3-70B, bf16, TP 8, full checkpointing: each of 80 layers keeps its input, 2 x 8,192 bytes per
    # token without SP and 1/8 of it with SP: 80 x 2,048 x 16,384 x 7/8 bytes fewer.
    settings = {
        "precision": "bf16",
        "activation_checkpointing": "full",
        "loop": "trainer",
        "hardware": {"gpu": "h200-sxm", "count": 8, "tensor_parallel": 8},
    }
    plain, _ = run(settings, "llama-3-70b")
    split, codes = run({**settings, "sequence_parallel": True}, "llama-3-70b")
    assert codes.count("GP025") == 0
    saved = plain["phases"]["forward"]["activations"] - split["phases"]["forward"]["activations"]
    inputs = 80 * 2048 * 2 * 8192 * 7 / 8
    final_norm = 2048 * (4 * 8192 + 2 * 2 * 8192) * 7 / 8  # the final RMSNorm's fp32 input and output
    assert saved == pytest.approx(inputs + final_norm, abs=2)
    _, codes = run({**settings, "sequence_parallel": True, "hardware": {"gpu": "h200-sxm"}}, "llama-3-70b")
    assert codes.count("GP025") == 1


def test_autocast_false_is_bf16_activations_with_zero_convention_states():
    mixed, _ = run({"precision": "bf16-mixed", "autocast": False, "loop": "trainer"})
    bf16, _ = run({"precision": "bf16", "loop": "trainer"})
    autocast, _ = run({"precision": "bf16-mixed", "loop": "trainer"})
    assert mixed["phases"]["forward"]["activations"] == bf16["phases"]["forward"]["activations"]
    assert "autocast_weight_copies" not in mixed["phases"]["forward"]
    assert autocast["phases"]["forward"]["autocast_weight_copies"] > 0
    # 2 B weights + 2 B gradients + (4 master + 8 Adam) + 4 B foreach temporary = 20 B/param at the step.
    assert sum(step(mixed).values()) == 20 * P


def test_dora_adds_magnitudes_and_saved_outputs():
    # LoRA r16 on q/k/v/o: 16 x ((4,096 + 4,096) + 2 x (4,096 + 1,024) + (4,096 + 4,096)) = 425,984 per layer;
    # DoRA adds one magnitude per output: 4,096 + 1,024 + 1,024 + 4,096 = 10,240 per layer.
    lora = {"rank": 16, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]}
    plain, _ = run({"method": "lora", "precision": "bf16", "lora": lora})
    dora, _ = run({"method": "lora", "precision": "bf16", "lora": {**lora, "variant": "dora"}})
    assert plain["trainable_params"] == 32 * 425_984
    assert dora["trainable_params"] == 32 * (425_984 + 10_240)
    # Saved per token and layer: base and adapter outputs in fp32 (peft's default adapter dtype), 2 x 4 x 10,240.
    extra = dora["phases"]["forward"]["activations"] - plain["phases"]["forward"]["activations"]
    assert extra == pytest.approx(32 * 2048 * 2 * 4 * 10_240, abs=2)
    _, codes = run({"method": "full", "lora": {"variant": "dora"}})
    assert codes == ["GP025"]


def test_sgd_without_momentum_keeps_no_state():
    momentum, _ = run({"precision": "bf16", "optimizer": "sgd"})
    plain, _ = run({"precision": "bf16", "optimizer": "sgd", "momentum": 0})
    assert step(momentum)["optimizer"] == 2 * P  # one bf16 momentum buffer
    assert "optimizer" not in step(plain)
    assert momentum["checkpoint_bytes"] - plain["checkpoint_bytes"] == 2 * P


def test_training_loop_that_keeps_outputs_holds_the_logits_through_backward():
    # The bf16 logits of 2,048 tokens: 2 x 128,256 x 2,048 bytes, live at the start of backward.
    manual, _ = run({"method": "lora", "precision": "bf16"})
    trainer, _ = run({"method": "lora", "precision": "bf16", "loop": "trainer"})
    assert manual["allocated_bytes"] - trainer["allocated_bytes"] == 2 * 128_256 * 2048


def test_a_returned_kv_cache_outlives_its_layer_under_recompute():
    # Llama-2-7B (32 layers, 32 KV heads of 128: MHA), 4 x 2,048 tokens, bf16: the key and value states of
    # every layer, 2 x 32 x 8,192 x 4,096 x 2 B = 4,294,967,296 (llama-recipes PR #165: "saves ~4 GB").
    base = {
        "method": "lora",
        "precision": "bf16",
        "micro_batch": 4,
        "activation_checkpointing": "full",
        "loop": "trainer",
        "hardware": {"gpu": "h100-sxm"},
    }
    plain, _ = run(base, "llama-2-7b")
    cached, _ = run({**base, "use_cache": True}, "llama-2-7b")
    cache = 2 * 32 * 8192 * 4096 * 2
    forward = cached["phases"]["forward"]["activations"] - plain["phases"]["forward"]["activations"]
    assert forward == cache
    # The Trainer drops the outputs before backward: the backward and the step are as without it.
    assert cached["phases"]["optimizer_step"] == plain["phases"]["optimizer_step"]
    # A loop that holds the outputs holds the cache with the bf16 logits (2 x 32,000 x 8,192 = 524,288,000),
    # beside the next forward: the forward peak rises by both.
    manual, _ = run({**base, "use_cache": True, "loop": "manual"}, "llama-2-7b")
    assert manual["phases"]["forward"]["model_outputs"] == cache + 2 * 32_000 * 8192
    assert manual["allocated_bytes"] - cached["allocated_bytes"] == cache + 2 * 32_000 * 8192
    # Without recompute a multi-head layer saves those very tensors for its backward: nothing more.
    no_recompute = {**base, "activation_checkpointing": "none"}
    assert run({**no_recompute, "use_cache": True}, "llama-2-7b")[0] == run(no_recompute, "llama-2-7b")[0]
    # A GQA layer under SDPA (attention: flash names it too) saves the K and V repeat_kv made: the returned
    # ones (Llama-3-8B: 8 KV heads of 128; one sequence of 2,048: 2 x 32 x 2,048 x 1,024 x 2 B) are extra;
    # FlashAttention-3 takes them unrepeated and saves the returned ones.
    gqa = {"method": "lora", "precision": "bf16", "loop": "trainer", "hardware": {"gpu": "h100-sxm"}}
    extra = (
        run({**gqa, "use_cache": True})[0]["phases"]["forward"]["activations"]
        - run(gqa)[0]["phases"]["forward"]["activations"]
    )
    assert extra == 2 * 32 * 2048 * 1024 * 2
    fa3 = {**gqa, "attention": "flash3"}
    assert run({**fa3, "use_cache": True})[0] == run(fa3)[0]


def test_when_the_loop_drops_the_outputs():
    # TINY, bf16, 4 tokens: the returned logits are 2 x 32 x 4 = 256 B. manual holds them beside the next
    # forward and through backward and the step; after-step (`output = None` before the next forward) through
    # backward and the step only; trainer releases them before backward.
    held = {v: phases(bf16(loop=v)) for v in ("manual", "after-step", "trainer")}
    assert [held[v]["forward"].get("model_outputs", 0) for v in held] == [256, 0, 0]
    assert [held[v]["optimizer_step"].get("model_outputs", 0) for v in held] == [256, 256, 0]
    assert [held[v]["backward"].get("model_outputs", 0) for v in held] == [256, 256, 0]


def test_lora_dropout_keeps_a_mask_and_a_copy_per_adapter():
    # bf16 adapters on q and v share the norm output (2 x 4,096 B per token) without dropout; with dropout
    # each keeps a 1-byte mask and its own 2-byte dropped copy: 2 x 3 x 4,096 = 24,576 B, 16,384 B more.
    lora = {"rank": 8, "targets": ["q_proj", "v_proj"], "dtype": "bf16"}
    base = {"method": "lora", "precision": "bf16", "loop": "trainer"}
    plain, _ = run({**base, "lora": lora})
    dropped, _ = run({**base, "lora": {**lora, "dropout": 0.05}})
    extra = dropped["phases"]["forward"]["activations"] - plain["phases"]["forward"]["activations"]
    assert extra == 32 * 2048 * 16_384


def test_double_quantization_of_the_nf4_base():
    # NF4 without double quantization stores an fp32 absmax per 64 weights (0.5625 B/weight); with it,
    # 8-bit absmaxes + fp32 per 256 blocks (0.5 + 1/64 + 4/16,384 B): the linears are 6,979,321,856 weights.
    dq, _ = run({"method": "qlora", "precision": "bf16"})
    plain, _ = run({"method": "qlora", "precision": "bf16", "double_quant": False})
    linear = 6_979_321_856
    difference = step(plain)["weights"] - step(dq)["weights"]
    assert difference == pytest.approx(linear * (0.0625 - 1 / 64 - 4 / 16384), abs=2)


def test_host_bytes_are_reported_in_the_text_output(tmp_path):
    from conftest import run_cli

    spec = tmp_path / "s.yaml"
    spec.write_text(
        "version: 1\nname: t\nmodel: {id: llama-3-8b}\n"
        "finetune: {method: full, precision: bf16-mixed, autocast: false, optimizer: adamw-fused,"
        " offload: {optimizer: cpu},"
        " hardware: {gpu: h100-sxm, count: 8}, sharding: zero2}\n"
    )
    code, out, _ = run_cli("estimate", str(spec))
    assert code == 0 and "offloaded per GPU: host" in out and "per node of 8 GPUs" in out
    assert f"{16 * P / 8 / GIB:,.2f} GiB" in out  # 16 B/param over 8 data-parallel shards


def test_adafactor_checkpoint_keeps_its_factored_state():
    # Adafactor keeps one fp32 row and one fp32 column per matrix: per layer (3h + q + 2kv) for the attention
    # and 3 (h + i) for the MLP = 18,432 + 55,296 = 73,728 values, x 32 layers; the embedding and LM head
    # factors (vocab + hidden) once: 2,491,648 values x 4 B = 9,966,592 B beside the 2-byte weights.
    job, _ = run({"precision": "bf16", "optimizer": "adafactor"})
    assert job["checkpoint_bytes"] == 2 * P + 9_966_592


# -- to the byte on the tiny decoder ---------------------------------------------------------------------


def phases(setup: TrainingSetup) -> dict[str, dict[str, int]]:
    return estimate_training(setup, overhead=0).phases


def test_full_bf16_adamw_manual_loop():
    # bf16: 2 B weights, gradients, Adam states. weights 1,704 x 2 = 3,408; Adam 2 states x 2 B x 1,704
    # = 6,816; foreach temporary 2 B x 1,704 = 3,408; gradients 3,408.
    # Per token per layer: each RMSNorm saves its fp32 input 4 x 8 = 32 and, its weight being trainable,
    # the bf16 output for the weight gradient, 2 x 2 x 8 = 32: 64 each, 128;
    # SDPA: 2 x (2 x 8 q + 2 x 4 kv) + 4 B x 2 heads = 56;
    # gated MLP 4 x 2 B x 16 = 128. 312 B x 4 tokens = 1,248 per layer, 2,496 for both.
    # Logits 2 x 32 x 4 = 256 returned, fp32 log-softmax 4 x 32 x 4 = 512, upcast 512; final norm 64 x 4
    # = 256. Saved: 2,496 + 256 + 256 + 512 = 3,520. Loss gradients 2 x 4 x 32 x 4 = 1,024.
    # The manual loop holds the returned logits (256) until the next step's forward returns: beside that
    # forward (the last step's, model_outputs), through backward and the optimizer step.
    # Backward at its start: 3,408 + 6,816 + 3,264 + 256 + 1,024 = 14,768; in the last layer, the first one
    # backward runs (the loss gradients, the log-softmax and the final norm's input freed with their backward):
    # the LM head's and that layer's gradients, (256 + 592) / 1,704 of the 3,408 = 1,696, beside both layers'
    # 2,496, its MLP backward 3 x 2 x 16 x 4 = 384 and the held 256 -> 15,056; in the first layer: all but its
    # and the embedding's gradients, 856 / 1,704 of 3,408 = 1,712 + one layer 1,248 + 384 + 256 -> 13,824; at
    # its end 13,888. Optimizer step: 3,408 + 6,816 + 3,408 + 3,408 + 256 = 17,296, the peak.
    memory = estimate_training(training_setup(architecture=TINY, precision="bf16", seq_len=4), overhead=100)
    assert memory.phases == {
        "forward": {"weights": 3408, "optimizer": 6816, "activations": 3520, "temporaries": 512, "model_outputs": 256},
        "backward": {
            "weights": 3408,
            "optimizer": 6816,
            "gradients": 1696,
            "activations": 2496,
            "model_outputs": 256,
            "temporaries": 384,
        },
        "optimizer_step": {
            "weights": 3408,
            "optimizer": 6816,
            "gradients": 3408,
            "optimizer_step_temporaries": 3408,
            "model_outputs": 256,
        },
    }
    assert (memory.params, memory.trainable_params) == (1704, 1704)
    assert memory.peak_phase == "optimizer_step"
    assert memory.allocated == 17296
    # + the allocator's cache (every tensor is under 1 MiB: one 2 MiB small-pool segment less what it holds)
    # + the 100 B overhead
    assert 0 < memory.allocator_cache < 2**21
    assert memory.per_gpu == 17296 + memory.allocator_cache + 100
    assert memory.breakdown["framework_overhead"] == 100
    assert sum(memory.breakdown.values()) == memory.per_gpu


def test_mixed_precision_eager_accumulating_trainer_loop():
    # bf16-mixed with autocast: fp32 weights/gradients/states (4 B): weights 6,816, Adam 13,632, temporary
    # 6,816, gradients 6,816, kept across micro-batches (accumulation 2). bf16 copies of the linears and
    # the head: 2 x (1,152 + 256) = 2,816. Tokens 2 x 4 = 8.
    # Per token per layer: autocast norms 2 x (4 x 8 + 4 x 8) + 5 readers x 2 x 8 = 208; eager attention
    # 2 x 4 x 8 + (4 + 2) x 2 heads x 4 keys = 112; MLP 128: 448 B x 8 = 3,584 per layer, 7,168 both.
    # Logits 2 x 32 x 8 = 512, log-softmax 1,024, upcast 1,024; final norm 64 x 8 = 512.
    # Saved 7,168 + 512 + 512 + 1,024 = 9,216. Forward temporaries max(upcast 1,024, 2 B x scores
    # 2 x 4^2 x 2 = 64) = 1,024. The trainer loop drops the returned logits before backward: 8,704, with
    # the loss gradients 2 x 4 x 32 x 8 = 2,048. Peak: 6,816 + 13,632 + 6,816 + 2,816 + 8,704 + 2,048 = 40,832.
    memory = estimate_training(
        training_setup(
            architecture=TINY,
            precision="bf16-mixed",
            micro_batch=2,
            seq_len=4,
            gradient_accumulation=2,
            attention="eager",
            loop="trainer",
        ),
        overhead=0,
    )
    fixed = {"weights": 6816, "optimizer": 13632, "gradients": 6816, "autocast_weight_copies": 2816}
    assert memory.phases == {
        "forward": {**fixed, "activations": 9216, "temporaries": 1024},
        "backward": {**fixed, "activations": 8704, "temporaries": 2048},
        "optimizer_step": {"weights": 6816, "optimizer": 13632, "gradients": 6816, "optimizer_step_temporaries": 6816},
    }
    assert memory.allocated == 40832


def test_lora_with_dropout_full_checkpointing_fused_loss():
    # LoRA r=2 on q (8 -> 8) and v (8 -> 4): 2 x 16 + 2 x 12 = 56 per layer, 112 trainable, fp32.
    # Weights 1,704 x 2 + 112 x 4 = 3,856; Adam 2 x 4 x 112 = 896; temporary 448; gradients 448.
    # Per token per layer: norms save only the fp32 input (frozen weight) 2 x 32 = 64; SDPA 56; MLP with
    # down_proj frozen 3 x 2 x 16 = 96; adapters: r-dim outputs 4 x 2 x 2 = 16 plus, with dropout, a mask
    # and a dropped fp32 copy of each input (1 + 4) x 8 x 2 = 80: 96. 312 x 4 tokens = 1,248 per layer.
    # Full checkpointing keeps each layer's input 2 x 8 x 4 = 64: 128 for both; final norm 32 x 4 = 128;
    # fused loss: no logits saved, one fp32 chunk and its gradient 2 x 4 x 32 x 4 = 1,024 of temporaries.
    # Backward peaks in the last layer, the first it runs: both layers' inputs 128 still kept (the final
    # norm's went with its backward) beside its recomputed 1,248 (1,376), its MLP backward 384 and the
    # adapters' gradients 448: 3,856 + 896 + 448 + 1,376 + 384 = 6,960; in the first layer 3,856 + 896 + 448 +
    # (1,248 + 64) + 384 = 6,896.
    memory = estimate_training(
        training_setup(
            architecture=TINY,
            method="lora",
            precision="bf16",
            lora_rank=2,
            lora_targets=("q_proj", "v_proj"),
            lora_dropout=0.1,
            checkpointing="full",
            fused_loss=True,
            seq_len=4,
        ),
        overhead=0,
    )
    assert memory.trainable_params == 112
    assert memory.phases == {
        "forward": {"weights": 3856, "optimizer": 896, "activations": 256, "temporaries": 1024},
        "backward": {"weights": 3856, "optimizer": 896, "gradients": 448, "activations": 1376, "temporaries": 384},
        "optimizer_step": {"weights": 3856, "optimizer": 896, "gradients": 448, "optimizer_step_temporaries": 448},
    }


def test_qlora_dora_selective_checkpointing_8bit_adam():
    # QLoRA + DoRA r=1 on all seven linears: r x (d_in + d_out) = 16 + 12 + 12 + 16 + 24 + 24 + 24 = 128
    # plus a magnitude per output 8 + 4 + 4 + 8 + 16 + 16 + 8 = 64: 192 per layer, 384 trainable (bf16).
    # Weights: NF4 without double quantization 0.5 + 4/64 = 0.5625 B x 1,152 = 648, the rest 552 x 2 =
    # 1,104, adapters 384 x 2 = 768: 2,520. 8-bit Adam 384 x (2 + 8/2048) = 769.5; gradients 768.
    # Selective checkpointing per token per layer: input and row outputs 3 x 2 x 8 = 48, gate and up
    # 2 x 2 x 16 = 64, SDPA 56, the adapters' matmul outputs (r outputs 2 x 1 x 7 = 14; DoRA outputs
    # 2 x 2 x 64 = 256; their inputs, the norm outputs, are recomputed): 270 -> 438 x 4 tokens x 2 layers =
    # 3,504. Final norm 128, logits 256 + 512 + upcast 512. Saved 4,400.
    # Forward temporaries: DoRA's weight norm of down_proj (16^2 + 3 x 16 x 8) x 2 B = 1,280, above the
    # upcast 512 and the NF4 dequantization 2 x 8 x 16 = 256. Peak forward: 2,520 + 769.5 + 4,400 +
    # 1,280 + the last step's logits the manual loop holds, 256 = 9,225.5 -> 9,226 once each part is rounded up.
    # Backward, in the last layer: both layers' kept 3,504 (the logits, log-softmax and final norm gone with
    # their backward) and what selective checkpointing did not keep of it, recomputed: the layer saves 550 B
    # a token without checkpointing, 438 with it: 112 x 4 = 448; its backward's MLP gradients 3 x 2 x 16 x 4
    # = 384, the NF4 dequantization 256 and DoRA's weight norm 1,280 (1,920); the adapters' gradients 768 and
    # the held logits 256: 2,520 + 770 + 768 + 3,952 + 1,920 + 256 = 10,186, the peak.
    memory = estimate_training(
        training_setup(
            architecture=TINY,
            method="qlora",
            precision="bf16",
            lora_rank=1,
            lora_bytes=2,
            lora_variant="dora",
            double_quant=False,
            checkpointing="selective",
            optimizer="adamw-8bit",
            seq_len=4,
        ),
        overhead=0,
    )
    assert memory.trainable_params == 384
    assert memory.phases == {
        "forward": {"weights": 2520, "optimizer": 770, "activations": 4400, "temporaries": 1280, "model_outputs": 256},
        "backward": {
            "weights": 2520,
            "optimizer": 770,
            "gradients": 768,
            "activations": 3952,
            "model_outputs": 256,
            "temporaries": 1920,
        },
        "optimizer_step": {"weights": 2520, "optimizer": 770, "gradients": 768, "model_outputs": 256},
    }


def test_zero3_over_four_gpus():
    # ZeRO-3, bf16-mixed, 4 ranks: 16-bit working weights 1,704 x 2 / 4 = 852; fp32 master 4 x 1,704 =
    # 6,816 joins Adam's 13,632: 20,448 / 4 = 5,112; gradients 1,704 / 4 x 2 = 852; temporary 6,816 / 4 =
    # 1,704. Gathered: the largest unit (a layer, 592 > 256) twice in 16-bit, 2 x 2 x 592 = 2,368, plus
    # its full 16-bit gradient 1,184: 3,552. No autocast copies once sharded.
    # Activations as the bf16 case but with autocast norms: (208 + 56 + 128) x 4 = 1,568 per layer, saved
    # 3,136 + 256 + 256 + 512 = 4,160, of which the manual loop holds the logits as model_outputs from backward
    # on, in fp32 as autocast's framework hands them back (accelerate's convert_outputs_to_fp32): 2 x 256 = 512.
    # DeepSpeed's gradient bucket, 100 elements in the 16-bit working dtype, 200, from the optimizer's
    # initialisation on: in every phase, as is the flat buffer its gradients are reduced into (stage3.py
    # grad_partitions_flat_buffer, 852). Backward start: 852 + 5,112 + 200 + 3,552 + 852 + 3,904 + 512 + 1,024
    # = 16,008.
    # The step (zero_step): the norm copies the largest gradient piece in fp64, the embedding's partition 256 / 4
    # x 8 = 512; the flatten copies the partition, 426 x 2 = 852, and casts it to fp32, 426 x 4 = 1,704; the
    # update keeps the buffer, 852, beside the fp32 gradient 1,704 and the foreach temporary 1,704. The moments:
    # 852 + 512, 852 + 852 + 1,704 and 852 + 3,408: the update's is the step's peak. The step releases the
    # gathered units first (stage3.py step: _partition_all_parameters).
    fixed = {"weights": 852, "optimizer": 5112, "gradient_buckets": 200, "gathered_parameters": 3552, "gradients": 852}
    released = {key: value for key, value in fixed.items() if key != "gathered_parameters"}
    zero3 = training_setup(
        architecture=TINY, precision="bf16-mixed", sharding="zero3", gpus=4, seq_len=4, reduce_bucket_size=100
    )
    assert phases(zero3) == {
        "forward": {**fixed, "activations": 4160, "temporaries": 512, "model_outputs": 512},
        "backward": {**fixed, "activations": 3904, "model_outputs": 512, "temporaries": 1024},
        "optimizer_step": {**released, "optimizer_step_temporaries": 3408, "model_outputs": 512},
    }
    # Without autocast (16-bit working weights) the outputs stay bf16: 256.
    plain = phases(vary(zero3, autocast=False))
    assert plain["backward"]["model_outputs"] == 256


def test_zero2_with_optimizer_on_nvme_and_parameters_on_host():
    # ZeRO-2 over 2 ranks, bf16, SGD with momentum: DeepSpeed steps its fp32 partition whatever the precision, so
    # one fp32 state and the fp32 master, 852 elements x (4 + 4) = 6,816; gradients 852 elements x 2 B = 1,704.
    # Optimizer offload to NVMe moves those plus an fp32 gradient copy: 6,816 + 4 x 852 = 10,224. Parameter offload
    # to the host moves the weights, 3,408: ZeRO-2 under optimizer offload keeps no gradient (each goes to the host as
    # its bucket is reduced). (A spec pairing ZeRO-2 with parameter offload is GP025, DeepSpeed offloading parameters
    # at stage 3 alone; this pins the estimator's arithmetic.) What stays is the streamed layer, 2 x 2 B x 592 =
    # 2,368, the logits (256) the manual loop holds, ZeRO-Offload's buffer of the largest parameter (the 32 x 8
    # embedding, 256 x 2 B = 512) and, through backward alone, DeepSpeed's gradient bucket, 100 elements x 2 B = 200.
    # Backward peaks at its last layer: the layer's transients (3 x 4 tokens x 16 x 2 B = 384) beside the overflow
    # check of the largest gradient (11 x 256 = 2,816), the activations the start's 3,264 less the log-softmax
    # (4 x 32 x 4 B = 512) and the final norm's saved input and output (4 x (8 x 4 + 2 x 2 x 8) = 256).
    memory = estimate_training(
        training_setup(
            architecture=TINY,
            precision="bf16",
            sharding="zero2",
            gpus=2,
            offload_optimizer="nvme",
            offload_parameters="cpu",
            optimizer="sgd",
            seq_len=4,
            reduce_bucket_size=100,
        ),
        overhead=0,
    )
    assert memory.phases == {
        "forward": {
            "optimizer": 512,
            "gathered_parameters": 2368,
            "activations": 3520,
            "temporaries": 512,
            "model_outputs": 256,
        },
        "backward": {
            "optimizer": 512,
            "gathered_parameters": 2368,
            "activations": 2496,
            "model_outputs": 256,
            "temporaries": 384 + 2816,
            "gradient_buckets": 200,
        },
        "optimizer_step": {"optimizer": 512, "gathered_parameters": 2368, "model_outputs": 256},
    }
    assert (memory.host, memory.nvme) == (3408, 10224)


def test_deepspeed_buckets_by_stage_and_setting():
    """DeepSpeed's gradient buckets, hand-counted from its sources (training.reduce_bucket_bytes cites them): the
    bucket's elements x the trainable dtype's bytes, on each GPU, whatever the world size."""

    def buckets(**changes) -> dict[str, int]:
        setup = training_setup(**{"architecture": TINY, "precision": "bf16-mixed", "seq_len": 4, "gpus": 2, **changes})
        return {phase: parts.get("gradient_buckets", 0) for phase, parts in phases(setup).items()}

    # DeepSpeed's default, 500,000,000 elements, in the 16-bit working dtype: 1e9 B, ZeRO-3's from the optimizer's
    # initialisation, so in the forward and the optimizer step as well; on one GPU too, where DeepSpeed builds its
    # ZeRO optimizer all the same (partition_count 1).
    assert buckets(sharding="zero3") == {"forward": 10**9, "backward": 10**9, "optimizer_step": 10**9}
    assert buckets(sharding="zero3", gpus=1) == {"forward": 10**9, "backward": 10**9, "optimizer_step": 10**9}
    # "auto": hidden_size squared, 8 x 8 = 64 elements, 128 B; fp32 training keeps them in fp32: 256 B.
    assert buckets(sharding="zero3", reduce_bucket_size=None)["forward"] == 128
    assert buckets(sharding="zero3", reduce_bucket_size=None, precision="fp32")["forward"] == 256
    # ZeRO-2: through backward only; overlap_comm doubles them, 2 x 100 x 2 = 400 (ZeRO-3 keeps one either way).
    assert buckets(sharding="zero2", reduce_bucket_size=100) == {"forward": 0, "backward": 200, "optimizer_step": 0}
    assert buckets(sharding="zero2", reduce_bucket_size=100, overlap_comm=True)["backward"] == 400
    assert buckets(sharding="zero3", reduce_bucket_size=100, overlap_comm=True)["backward"] == 200
    # ZeRO-1 reduces at the accumulation boundary only: a micro-batch's bucket lives on through the next forward.
    assert buckets(sharding="zero1", reduce_bucket_size=100)["forward"] == 0
    assert buckets(sharding="zero1", reduce_bucket_size=100, gradient_accumulation=4)["forward"] == 200
    assert buckets(sharding="zero2", reduce_bucket_size=100, gradient_accumulation=4)["forward"] == 0
    # Megatron's zero1 (its distributed optimizer) and FSDP have no such buckets (DDP's: the next test).
    for changes in ({"sharding": "zero1", "framework": "megatron"}, {"sharding": "fsdp"}):
        assert set(buckets(**changes).values()) == {0}


def test_ddp_buckets_hold_the_trainable_bytes_again_all_step():
    # Plain data parallelism over several ranks is PyTorch DDP, whose buckets hold every trainable parameter in
    # its dtype from the wrap on (reducer.cpp, Reducer::initialize_buckets), beside the gradients: TINY's 1,704
    # parameters x 2 B = 3,408 under bf16, x 4 B = 6,816 under bf16-mixed with autocast (fp32 parameters). One
    # GPU is not wrapped; Megatron keeps its gradients in a buffer of its own.
    def buckets(**changes) -> set[int]:
        setup = training_setup(**{"architecture": TINY, "precision": "bf16", "seq_len": 4, "gpus": 2, **changes})
        return {parts.get("gradient_buckets", 0) for parts in phases(setup).values()}

    assert buckets() == {3408}
    assert buckets(precision="bf16-mixed") == {6816}
    # LoRA: the adapters alone are trainable, rank 1 on TINY's seven linears, 128 a layer, 256 x 2 B = 512.
    assert buckets(method="lora", lora_rank=1, lora_bytes=2) == {512}
    assert buckets(gpus=1) == buckets(framework="megatron") == {0}
    # gradient_as_bucket_view: the gradients are views into the buckets, so no gradient tensor of their own at the
    # optimizer step (where plain DDP holds 3,408 beside the buckets' 3,408), the buckets as before.
    viewed = phases(
        training_setup(architecture=TINY, precision="bf16", seq_len=4, gpus=2, gradient_as_bucket_view=True)
    )
    assert {parts.get("gradient_buckets", 0) for parts in viewed.values()} == {3408}
    assert "gradients" not in viewed["optimizer_step"]
    assert (
        phases(training_setup(architecture=TINY, precision="bf16", seq_len=4, gpus=2))["optimizer_step"]["gradients"]
        == 3408
    )


# -- one setting changed from test_full_bf16_adamw_manual_loop ------------------------------------
# Base: weights 3,408, AdamW 6,816, its temporary 3,408, gradients 3,408, saved activations 3,520 (the
# returned logits 256 among them), forward temporaries 512, loss gradients 1,024; the manual loop holds the
# logits (model_outputs 256) beside the next forward and through backward and the optimizer step.
HELD = {"model_outputs": 256}
BASE_FORWARD = {"weights": 3408, "optimizer": 6816, "activations": 3520, "temporaries": 512, **HELD}


def bf16(**changes) -> TrainingSetup:
    return training_setup(**{"architecture": TINY, "precision": "bf16", "seq_len": 4, **changes})


def test_optimizers():
    # Fused AdamW: no foreach temporary.
    assert phases(bf16(optimizer="adamw-fused"))["optimizer_step"] == {
        "weights": 3408,
        "optimizer": 6816,
        "gradients": 3408,
        **HELD,
    }
    # Paged 8-bit Adam: 1,704 x (2 + 2 x 4 / 2048) = 3,414.66 B, on the GPU only for the step.
    paged = phases(bf16(optimizer="adamw-8bit-paged"))
    assert paged["forward"] == {"weights": 3408, "activations": 3520, "temporaries": 512, **HELD}
    assert paged["optimizer_step"] == {"weights": 3408, "gradients": 3408, "paged_optimizer_states": 3415, **HELD}
    # SGD without momentum keeps no state.
    assert phases(bf16(optimizer="sgd", momentum=0.0))["optimizer_step"] == {"weights": 3408, "gradients": 3408, **HELD}
    # Adafactor: per layer the factored rows and columns 3 x 8 + 8 + 2 x 4 + 3 x (8 + 16) = 112, x 2 layers,
    # plus vocabulary 32 and hidden 8: 264 fp32 values = 1,056 B; two fp32 temporaries of the largest
    # matrix (the 32 x 8 embedding/head, 256): 2,048 B.
    assert phases(bf16(optimizer="adafactor"))["optimizer_step"] == {
        "weights": 3408,
        "optimizer": 1056,
        "gradients": 3408,
        "optimizer_step_temporaries": 2048,
        **HELD,
    }


def test_fp32_and_mixed_without_autocast():
    # fp32: 4 B everything. Activations at 4 B per token per layer: norms 2 x (4 x 8 + 2 x 4 x 8) = 192,
    # SDPA 4 x 24 + 8 = 104, MLP 4 x 4 x 16 = 256: 552 x 4 = 2,208 per layer; logits 4 x 32 x 4 = 512
    # returned and 512 log-softmax, no upcast; final norm 96 x 4 = 384: saved 4,416 + 384 + 1,024 = 5,824.
    # The manual loop holds the 512 B of logits: backward's start 20,448 + 5,312 + 512 + 1,024 = 27,296 and
    # its end, the gradients 6,816 beside them (27,776), are below its last layer, the first it runs: the LM
    # head's and that layer's gradients (256 + 592) / 1,704 of 6,816 = 3,392, both layers' 4,416 (the logits,
    # log-softmax and final norm gone with their backward) and the MLP backward 3 x 4 x 16 x 4 = 768: 20,448 +
    # 3,392 + 4,416 + 768 + 512 = 29,536.
    held = {"model_outputs": 512}
    assert phases(bf16(precision="fp32")) == {
        "forward": {"weights": 6816, "optimizer": 13632, "activations": 5824, **held},
        "backward": {
            "weights": 6816,
            "optimizer": 13632,
            "gradients": 3392,
            "activations": 4416,
            "temporaries": 768,
            **held,
        },
        "optimizer_step": {
            "weights": 6816,
            "optimizer": 13632,
            "gradients": 6816,
            "optimizer_step_temporaries": 6816,
            **held,
        },
    }
    # bf16-mixed without autocast (the ZeRO convention): 2 B working weights and gradients, the fp32
    # master 4 x 1,704 = 6,816 joins the fp32 Adam states 13,632: 20,448; temporary 4 x 1,704 = 6,816.
    assert phases(bf16(precision="bf16-mixed", autocast=False))["optimizer_step"] == {
        "weights": 3408,
        "optimizer": 20448,
        "gradients": 3408,
        "optimizer_step_temporaries": 6816,
        **HELD,
    }


def test_full_checkpointing_peaks_in_the_last_layer_with_every_input_beside_its_recomputed_tensors():
    # Two sequences of 4 (8 tokens). Kept: each layer's input 2 x 8 x 8 = 128 (256 for both) + final norm
    # 64 x 8 = 512 + logits 512 + 1,024 = 2,304. Backward start 3,408 + 6,816 + 2,304 + 2 x 4 x 32 x 8 =
    # 14,576; end 3,408 + 6,816 + 3,408 = 13,632; in the first layer: half the gradients 1,704 + the
    # recomputed layer 312 x 8 = 2,496 + its input 128 + MLP backward 3 x 2 x 16 x 8 = 768 + the logits the
    # manual loop holds, 512 (with the first layer's and the embedding's gradients not yet made, 856 / 1,704
    # of 3,408 = 1,712): 15,840. In the last layer, the first backward runs, both inputs 256 are still kept
    # beside its recomputed 2,496 (2,752), with the LM head's and its gradients (256 + 592) / 1,704 of 3,408 =
    # 1,696, 768 and 512: 15,952.
    assert phases(bf16(checkpointing="full", micro_batch=2))["backward"] == {
        "weights": 3408,
        "optimizer": 6816,
        "gradients": 1696,
        "activations": 2752,
        "model_outputs": 512,
        "temporaries": 768,
    }
    # Eager attention with full checkpointing: masked scores, their fp32 upcast and the softmax coexist,
    # 10 B x 2 heads x 4^2 = 320, below the logits upcast 512; the score gradients 6 x 32 = 192 below the
    # MLP's 384.
    assert phases(bf16(checkpointing="full", attention="eager"))["forward"]["temporaries"] == 512


def test_optimizer_in_backward():
    # Each gradient is applied at once: no optimizer-step phase; at most the largest matrix's gradient
    # (256 x 2 B = 512) and its step temporary (3,408 x 256 / 1,704 = 512). In the first layer 3,408 + 6,816 +
    # 512 + 1,248 + 384 + 512 + the held logits 256 = 13,136; in the last layer both layers' 2,496 beside them:
    # 3,408 + 6,816 + 512 + 2,496 + (384 + 512) + 256 = 14,384; both below the backward's start, 3,408 +
    # 6,816 + 3,264 + 256 + the loss gradients 1,024 = 14,768.
    assert phases(bf16(optimizer_in_backward=True)) == {
        "forward": BASE_FORWARD,
        "backward": {"weights": 3408, "optimizer": 6816, "activations": 3264, **HELD, "temporaries": 1024},
    }


def test_activation_offloading_keeps_two_layers():
    # Three layers (2,296 parameters: weights 4,592, Adam 9,184): two layers' 1,248 B stay, the third
    # goes to the host. Saved 2,496 + 256 + 256 + 512 = 3,520; backward ends with all gradients 4,592
    # (18,624 with the held logits), the backward's peak: its last layer, the first it runs, holds the two
    # layers' kept 2,496, the MLP backward 384 and the LM head's and that layer's gradients, (256 + 592) /
    # 2,296 of 4,592 = 1,696: 18,608 with the held logits.
    three = Architecture(layers=3, hidden=8, heads=2, kv_heads=1, intermediate=16, vocab=32)
    memory = estimate_training(bf16(architecture=three, activation_offloading=True), overhead=0)
    assert memory.host == 1248
    assert memory.phases["forward"] == {
        "weights": 4592,
        "optimizer": 9184,
        "activations": 3520,
        "temporaries": 512,
        **HELD,
    }
    assert memory.phases["backward"] == {"weights": 4592, "optimizer": 9184, "gradients": 4592, **HELD}


def test_tensor_parallel_with_sequence_parallelism():
    # TP 2: half the layers' 1,184 and half the embedding and head 520: 852 parameters, 1,704 B.
    # Per token per layer: norms split over 2 ranks (64 / 2 x 2 = 64); SDPA with 4 query columns, the one
    # KV head replicated (4), 1 head: 2 x (8 + 8) + 4 = 36; MLP 8 wide: 4 x 2 x 8 = 64; 164 x 4 = 656.
    # Logits over 16 of the vocabulary: 128 + 256 + upcast 256; final norm 32 x 4: saved 1,312 + 128 +
    # 384 = 1,824. Loss gradients 2 x 4 x 16 x 4 = 512. The manual loop holds this rank's logits, 128.
    # Backward's start 1,704 + 3,408 + 1,696 + 128 + 512 = 7,448; its last layer, the first it runs: the LM
    # head's and that layer's gradients, (592 + 256) / 2 of this rank's 852 parameters, 1,704 x 424 / 852 =
    # 848, beside both layers' 1,312 and the MLP backward 3 x 2 x 8 x 4 = 192: 7,592.
    held = {"model_outputs": 128}
    assert phases(bf16(tensor_parallel=2, gpus=2, sequence_parallel=True)) == {
        "forward": {"weights": 1704, "optimizer": 3408, "activations": 1824, "temporaries": 256, **held},
        "backward": {
            "weights": 1704,
            "optimizer": 3408,
            "gradients": 848,
            "activations": 1312,
            **held,
            "temporaries": 192,
        },
        "optimizer_step": {
            "weights": 1704,
            "optimizer": 3408,
            "gradients": 1704,
            "optimizer_step_temporaries": 1704,
            **held,
        },
    }


def test_pipeline_parallel_first_stage():
    # PP 2: one layer (592) plus the larger edge, the head and final norm (264) over the embedding (256):
    # 856 parameters, 1,712 B; 1F1B keeps both layers' activations on the first stage (3,520).
    assert phases(bf16(pipeline_parallel=2, gpus=2))["optimizer_step"] == {
        "weights": 1712,
        "optimizer": 3424,
        "gradients": 1712,
        "optimizer_step_temporaries": 1712,
        **HELD,
    }
    assert phases(bf16(pipeline_parallel=2, gpus=2))["forward"]["activations"] == 3520


# Six 4-wide query heads over three KV heads (not a multiple of TP 2: GP303's case, still estimated),
# hidden 8, a plain 16-wide MLP.
ODD = Architecture(layers=2, hidden=8, heads=6, kv_heads=3, head_dim=4, intermediate=16, vocab=32, mlp="plain")


def test_layer_bytes_per_token_under_tensor_parallelism():
    odd = bf16(architecture=ODD, tensor_parallel=2, gpus=2)
    # Per GPU: 24 / 2 = 12 query columns, 3 // 2 = 1 KV head of 4, 3 heads, MLP 8 wide.
    # Norms 2 x (4 x 8 + 2 x 2 x 8) = 128; SDPA 2 x (2 x 12 + 2 x 4) + 4 x 3 = 76; plain MLP 2 x 2 x 8 = 32.
    assert layer_activation_bytes_per_token(odd) == 236
    # Eager: q, repeated k and v and the o_proj input 2 x 4 x 12 = 96, fp32 probabilities and their bf16
    # cast (4 + 2) x 3 heads x 4 keys = 72.
    assert layer_activation_bytes_per_token(vary(odd, attention="eager")) == 128 + 168 + 32
    # LayerNorm saves its bf16 input (2 x 8) instead of an fp32 copy: 2 x (16 + 32) = 96.
    layer_norm = dataclasses.replace(ODD, norm="layer")
    assert layer_activation_bytes_per_token(dataclasses.replace(odd, architecture=layer_norm)) == 96 + 76 + 32
    # A fused QKV projection keeps its whole output: 2 x (12 + 4) = 32 more.
    fused = dataclasses.replace(ODD, fused_qkv=True)
    assert layer_activation_bytes_per_token(dataclasses.replace(odd, architecture=fused)) == 236 + 32
    # Selective checkpointing keeps the layer input and the row outputs 3 x 2 x 8 = 48, the one column
    # matrix of a plain MLP 2 x 8 = 16, and q, k, v, SDPA output and logsumexp 2 x 32 + 4 x 6 / 2 = 76.
    assert selective_layer_bytes_per_token(odd) == 48 + 16 + 76


def test_pipelining_over_fsdp_accumulates_gradients_unsharded():
    # TINY in bf16-mixed, FSDP: with PP 2 each stage holds one layer (592 parameters) and the larger edge,
    # the LM head and final norm (264): 856. Over 2 micro-batches the pipeline schedule defers FSDP's
    # reduce-scatter to the last one, so the stage's gradients accumulate unsharded, in fp32 (FSDP2's reduce
    # dtype): 856 x 4 = 3,424 B, live through the second micro-batch's forward.
    piped = training_setup(
        architecture=TINY,
        method="full",
        precision="bf16-mixed",
        seq_len=4,
        sharding="fsdp",
        gpus=4,
        pipeline_parallel=2,
        gradient_accumulation=2,
    )
    assert phases(piped)["forward"]["gradients"] == 856 * 4
    # Without pipelining the gradients are reduce-scattered every micro-batch: 1,704 / 2 ranks x 2 B.
    assert phases(vary(piped, gpus=2, pipeline_parallel=1))["forward"]["gradients"] == 1704
    # One micro-batch: nothing accumulates before the forward pass.
    assert "gradients" not in phases(vary(piped, gradient_accumulation=1))["forward"]


def test_pipelining_over_fsdp_keeps_the_stage_gathered():
    # TINY with 8 layers, PP 2: a stage holds 4 layers (4 x 592 = 2,368) and the head with the final norm
    # (264): 2,632 parameters, 5,264 B in bf16. Without pipelining FSDP holds in forward its root unit (the
    # embedding 256, the head 256 and the final norm 8: 520 x 2 = 1,040 B) and one layer (2 x 592 = 1,184):
    # 2,224 B. Pipelining keeps the whole stage gathered from forward to backward, with one micro-batch
    # too: 5,264 B.
    eight = dataclasses.replace(TINY, layers=8)
    flat = training_setup(architecture=eight, method="full", precision="bf16-mixed", seq_len=4, sharding="fsdp", gpus=2)
    assert phases(flat)["forward"]["gathered_parameters"] == 2224
    piped = vary(flat, gpus=4, pipeline_parallel=2)
    assert phases(piped)["forward"]["gathered_parameters"] == 5264


def test_qlora_quantization_constants_stay_whole_on_every_rank():
    # QLoRA r=1 on all seven linears of TINY (128 adapter parameters a layer, 256 in bf16: 512 B). The NF4
    # codes, 0.5 B x 1,152 = 576, are the Params4bit data; without double quantization the fp32 absmax per
    # 64 weights is 1,152 x 4 / 64 = 72 B, in each parameter's quant_state. The rest is 16-bit: 552 x 2 =
    # 1,104. On one GPU: 576 + 72 + 1,104 + 512 = 2,264.
    one = bf16(method="qlora", lora_rank=1, lora_bytes=2, double_quant=False)
    assert phases(one)["forward"]["weights"] == 2264
    # FSDP over 2 ranks shards the parameters (576 + 1,104 + 512) / 2 = 1,096, not the quant_state: + 72.
    fsdp = vary(one, gpus=2, sharding="fsdp")
    assert phases(fsdp)["forward"]["weights"] == 1096 + 72
    # FSDP gathers as stored: in forward its root unit, which is not quantized (the embedding, the head and
    # the final norm, 520 x 2 = 1,040 B; fp32 under PEFT's preparation, 2,080), and one decoder layer, whose
    # NF4 codes are 592 x 0.5 = 296 B.
    assert phases(fsdp)["forward"]["gathered_parameters"] == 1040 + 296
    assert phases(vary(fsdp, kbit_preparation="peft"))["forward"]["gathered_parameters"] == 2080 + 296
    # CPU offload moves the sharded parameters to the host; the constants stay on the GPU.
    offloaded = vary(fsdp, offload_parameters="cpu")
    assert phases(offloaded)["forward"]["weights"] == 72


def test_moe_and_qlora_layer_bytes():
    # MoE, per token per layer: norms 128, SDPA 56; per routed expert its gated MLP 4 x 2 x 8 = 64 plus the
    # gathered token and weighted output 2 x 2 x 8 = 32, for 2 experts = 192; the router's fp32 logits,
    # softmax and top-k weights 3 x 4 B x 4 experts = 48. 128 + 56 + 240 = 424.
    assert layer_activation_bytes_per_token(bf16(architecture=MOE)) == 424
    # LoRA without down_proj: each expert keeps 3 x 2 x 8 = 48 + 32: 2 x 80 + 48 = 208; norms save only
    # their fp32 input (frozen weights) 2 x 32 = 64; adapters on q, v at rank 2: r outputs 4 x 2 x 2 = 16
    # and fp32 casts of their (norm) inputs 2 x 4 x 8 = 64.
    lora = bf16(architecture=MOE, method="lora", lora_rank=2, lora_targets=("q_proj", "v_proj"))
    assert layer_activation_bytes_per_token(lora) == 64 + 56 + 208 + 80
    # QLoRA on TINY with the same adapters, bitsandbytes 0.43.1: it also saves each 4-bit linear's input, both
    # norm outputs 2 x 2 x 8 = 32 (the fp32 adapters keep their own casts), the attention output 2 x 8 = 16
    # and, down_proj not being adapted, its input 2 x 16 = 32. 64 + 56 + 96 (frozen-down MLP) + 80 + 80 = 376.
    old = bf16(method="qlora", lora_rank=2, lora_targets=("q_proj", "v_proj"), bitsandbytes_version="0.43.1")
    assert layer_activation_bytes_per_token(old) == 376
    # From 0.43.2 (and unstated) none of the 80: 296. An uncast adapter on o_proj keeps SDPA's output, which
    # SDPA itself keeps (counted in its 56): rank outputs 2 x 2 = 4 alone, 64 + 56 + 96 + 4 = 220, as LoRA.
    assert layer_activation_bytes_per_token(vary(old, bitsandbytes_version="0.43.2")) == 296
    assert layer_activation_bytes_per_token(vary(old, bitsandbytes_version=None)) == 296
    o_proj = vary(old, bitsandbytes_version=None, lora_targets=("o_proj",), lora_bytes=2, lora_dropout=0.0)
    assert layer_activation_bytes_per_token(o_proj) == 220


def test_shared_experts_keep_a_gated_mlp_of_activations():
    # A shared expert of width 8 keeps gate, up, silu(gate) and the down_proj input: 4 x 2 B x 8 = 64 B
    # per token and layer in bf16, on top of the routed experts (MOE's 424, test_moe_and_qlora_layer_bytes).
    moe = MOE
    setup = training_setup(
        architecture=moe,
        method="full",
        precision="bf16",
        optimizer="adamw",
        micro_batch=1,
        seq_len=64,
        checkpointing="none",
    )
    shared = dataclasses.replace(
        setup, architecture=dataclasses.replace(moe, shared_experts=1, shared_expert_intermediate=8)
    )
    assert layer_activation_bytes_per_token(shared) - layer_activation_bytes_per_token(setup) == 64


def test_fp32_adapter_base_under_autocast_caches_bf16_copies():
    # LoRA over an fp32 base under bf16-mixed: each linear and the LM head cast to bf16 and kept until
    # backward, 2 x (1,152 + 256) = 2,816 B.
    setup = bf16(precision="bf16-mixed", method="lora", model_dtype_bytes=4, lora_rank=2, lora_targets=("q_proj",))
    assert phases(setup)["forward"]["autocast_weight_copies"] == 2816


def test_fused_loss_leaves_no_loss_gradients():
    # Two sequences of 4: layers 2 x 312 x 8 = 4,992 + final norm 512, no logits: 5,504 saved; the backward
    # start (3,408 + 6,816 + 5,504 = 15,728) holds no loss temporaries; the last layer, the first backward
    # runs, holds both layers' 4,992 (the final norm's went with its backward), the MLP backward 3 x 2 x 16 x 8
    # = 768 and the LM head's and that layer's gradients, 1,696: 17,680, above the first layer (10,224 +
    # 1,712 + 2,496 + 768 = 15,200).
    assert phases(bf16(fused_loss=True, micro_batch=2))["backward"] == {
        "weights": 3408,
        "optimizer": 6816,
        "gradients": 1696,
        "activations": 4992,
        "temporaries": 768,
    }


def test_data_parallel_degree_rounds_down():
    # 3 GPUs at TP 2: one data-parallel replica (the third GPU idles), not 1.5.
    assert bf16(gpus=3, tensor_parallel=2).data_parallel == 1
    assert bf16(gpus=8, tensor_parallel=2, pipeline_parallel=2).data_parallel == 2


def test_autocast_norms_of_a_plain_mlp_have_one_reader_fewer():
    # Under autocast each norm saves x and x_hat in fp32 (2 x (4 x 8 + 4 x 8) = 128 B per token at hidden 8)
    # and every linear that reads the norm's output saves its own bf16 cast (2 x 8 = 16 B): q, k and v
    # read the first norm; gate and up read the second in a gated MLP (5 readers: 208 B), up alone in a
    # plain one (4 readers: 192 B).
    from gpuplan.estimate.training_activations import _autocast_norm_bytes

    gated = training_setup(architecture=TINY, precision="bf16-mixed")
    plain = training_setup(architecture=dataclasses.replace(TINY, mlp="plain"), precision="bf16-mixed")
    assert (_autocast_norm_bytes(gated), _autocast_norm_bytes(plain)) == (208, 192)


def test_a_gpu_without_bf16_units_runs_16_bit_work_at_its_fp16_rate_and_refuses_bf16_precisions():
    from training_jobs import default_job

    from gpuplan.catalog import get_gpu
    from gpuplan.conflicts import finetune_conflicts
    from gpuplan.records import evolve

    turing = dataclasses.replace(
        get_gpu("l4"), id="no-bf16", tflops={"bf16": None, "fp16": 65.0, "fp8": None, "int8": 130.0}
    )
    assert not turing.has_bf16 and get_gpu("l4").has_bf16
    # 16-bit work (and fp8 work, which falls back to it) at the fp16 tensor rate, never at zero.
    assert turing.peak_flops("bf16") == turing.peak_flops("fp16") == turing.peak_flops("fp8") == 65e12
    assert turing.peak_flops("int8") == 130e12
    job = default_job()
    on_turing = evolve(job, hardware=evolve(job.hardware, gpu=turing))
    for precision in ("bf16", "bf16-mixed", "fp8-mixed"):
        problems = finetune_conflicts(evolve(on_turing, precision=precision))
        assert [(pointer, hint) for pointer, _, hint in problems] == [(("precision",), "set precision: fp16-mixed")]
        assert "no-bf16 has no bf16 tensor cores" in problems[0][1]
    for precision in ("fp16-mixed", "fp32"):
        assert finetune_conflicts(evolve(on_turing, precision=precision)) == []
    assert finetune_conflicts(job) == []  # bf16-mixed on a GPU with bf16 units


def test_a_t4_fine_tunes_in_fp16_mixed_and_refuses_bf16():
    # Turing has no bf16 tensor cores: older Trainers refuse bf16 there, newer ones emulate it far below the
    # fp16 rate (GP025: no run to estimate at a speed that means anything), and
    # fp16-mixed runs at the T4's 65 TFLOPS fp16 rate, not at zero (peak_flops used to fall back to bf16's None).
    lora = {"method": "lora", "micro_batch": 1, "seq_len": 1024, "activation_checkpointing": True, "tokens": 10**6}
    refused, codes = run({**lora, "hardware": {"gpu": "t4"}}, model="llama-3.2-1b")  # bf16-mixed by default
    assert codes.count("GP025") == 1 and refused == {}
    estimate, codes = run({**lora, "precision": "fp16-mixed", "hardware": {"gpu": "t4"}}, model="llama-3.2-1b")
    assert "GP025" not in codes and estimate["gpu"] == "t4" and estimate["tokens_per_s"] > 0
    on_l4, _ = run({**lora, "precision": "fp16-mixed", "hardware": {"gpu": "l4"}}, model="llama-3.2-1b")
    assert estimate["tokens_per_s"] < on_l4["tokens_per_s"]  # 65 against 121 TFLOPS


def test_qlora_under_megatron_runs_neither_fsdp_nor_tensor_parallelism():
    # NeMo's QLoRA (the NF4 wrappers of NeMo 24.07: "Tensor Parallel is not supported"; Megatron's
    # distributed optimizer shards the optimizer states only): ZeRO-3 and TP 2 are each GP025 at their field.
    # zero1 over two GPUs is not, and neither is ZeRO-3 under the eager stack (Hugging Face FSDP-QLoRA).
    megatron = {"method": "qlora", "framework": "megatron", "hardware": {"gpu": "h200-sxm", "count": 2}}
    for changes, field in (
        ({"sharding": "zero3"}, "sharding zero3"),
        ({"hardware": {"gpu": "h200-sxm", "count": 2, "tensor_parallel": 2}}, "tensor parallelism"),
    ):
        document = {"version": 1, "name": "t", "model": {"id": "llama-3-8b"}, "finetune": {**megatron, **changes}}
        text = yaml.safe_dump(document, sort_keys=False)
        result = lint_bytes("t.yaml", text.encode(), LintOptions(today=datetime.date(2026, 12, 1)))
        (finding,) = [f for f in result.findings if f.code == "GP025"]
        assert field in finding.message
    _, codes = run({**megatron, "sharding": "zero1"})
    assert "GP025" not in codes
    _, codes = run({**megatron, "framework": "eager", "sharding": "zero3"})
    assert "GP025" not in codes


def test_qlora_runs_tensor_parallelism_under_unsloth_alone():
    # Of the stacks `framework` stands for, only Unsloth (fused) shards the 4-bit NF4 weights over tensor-parallel
    # ranks (its 2026.10 tp_native); Transformers' bitsandbytes quantizer keeps each rank's whole weight under a
    # tp_plan and torchtune's LoRA recipe refuses tensor_parallel_dim > 1. QLoRA at TP 2 is GP025 at the field under
    # eager and compiled (the hint: FSDP-QLoRA over the data-parallel ranks), not under fused; LoRA at TP 2 runs.
    two = {"gpu": "h200-sxm", "count": 2, "tensor_parallel": 2}
    for framework in ("eager", "compiled"):
        document = {"version": 1, "name": "t", "model": {"id": "llama-3-8b"},
                    "finetune": {"method": "qlora", "framework": framework, "hardware": two}}  # fmt: skip
        text = yaml.safe_dump(document, sort_keys=False)
        result = lint_bytes("t.yaml", text.encode(), LintOptions(today=datetime.date(2026, 12, 1)))
        (finding,) = [f for f in result.findings if f.code == "GP025"]
        assert finding.pointer == "/finetune/hardware/tensor_parallel"
        assert f"do not run with tensor parallelism under framework {framework}" in finding.message
        assert "FSDP-QLoRA" in finding.hint
    _, codes = run({"method": "qlora", "framework": "fused", "hardware": two})
    assert "GP025" not in codes
    _, codes = run({"method": "lora", "framework": "eager", "hardware": two})
    assert "GP025" not in codes


def test_kbit_preparation_holds_where_the_stack_runs_it():
    # TRL and Axolotl skip their preparation when FSDP or ZeRO-3 shards the 4-bit weights over several GPUs
    # (TRL's is_sharded_qlora); ZeRO-2 leaves each rank the whole model. PEFT's is what a loop calls, sharded
    # or not. Only QLoRA has one; unstated, none.
    trl = bf16(method="qlora", kbit_preparation="trl")
    assert trl.kbit_preparation == "trl" and bf16(method="qlora").kbit_preparation == "none"
    assert vary(trl, gpus=2, sharding="fsdp").kbit_preparation == "none"
    assert vary(trl, gpus=2, sharding="zero3").kbit_preparation == "none"
    assert vary(trl, gpus=2, sharding="zero2").kbit_preparation == "trl"
    # TRL casts back under args.bf16 only: in another precision the embeddings stay fp32, as PEFT leaves them.
    assert vary(trl, precision="fp16-mixed").kbit_preparation == "peft"
    assert vary(trl, kbit_preparation="axolotl", gpus=2, sharding="fsdp").kbit_preparation == "none"
    assert vary(trl, kbit_preparation="axolotl").kbit_preparation == "axolotl"
    assert vary(trl, kbit_preparation="peft", gpus=2, sharding="fsdp").kbit_preparation == "peft"
    assert vary(trl, method="lora").kbit_preparation == "none"


def test_the_assumptions_say_why_a_stated_preparation_does_not_hold():
    qlora = {"method": "qlora", "kbit_preparation": "trl", "precision": "bf16-mixed", "seq_len": 512}
    sharded, _ = run({**qlora, "sharding": "fsdp", "hardware": {"gpu": "h100-sxm", "count": 2}})
    assert sharded["assumptions"]["qlora base"].startswith(
        "NF4 + double quantization: 0.516 B/param for linears; embeddings, LM head and norms in 16-bit (no k-bit "
        "preparation) (stated trl: TRL skips its preparation when fsdp shards the 4-bit weights over several GPUs)"
    )
    fp16, _ = run({**qlora, "precision": "fp16-mixed"})
    assert (
        "(stated trl: TRL casts back in bf16 only, and this job trains in fp16-mixed)"
        in fp16["assumptions"]["qlora base"]
    )
    held, _ = run(qlora)
    assert "stated" not in held["assumptions"]["qlora base"]


def test_kbit_preparation_weights_and_layer_bytes():
    # TINY QLoRA r=1 on all seven linears, adapters bf16, no dropout, bf16, bitsandbytes 0.43.1 (each 4-bit
    # linear saves its input; from 0.43.2, at the end, none does): unprepared the weights hold the
    # embedding, LM head and norms in 16 bits (552 x 2 B). peft keeps all 552 in fp32: + 552 x 2 = 1,104 B;
    # trl casts the embedding and head (512) back to bf16 and keeps the norms (40) fp32: + 40 x 2 = 80 B.
    setup = bf16(
        method="qlora",
        lora_rank=1,
        lora_bytes=2,
        lora_dropout=0.0,
        kbit_preparation="none",
        bitsandbytes_version="0.43.1",
    )
    weights = phases(setup)["forward"]["weights"]
    assert phases(vary(setup, kbit_preparation="peft"))["forward"]["weights"] == weights + 1104
    assert phases(vary(setup, kbit_preparation="trl"))["forward"]["weights"] == weights + 80
    # Axolotl casts the norms back too: the weights are as loaded, and so is every activation below.
    axolotl = vary(setup, kbit_preparation="axolotl")
    assert phases(axolotl)["forward"]["weights"] == weights
    assert layer_activation_bytes_per_token(axolotl) == 310
    # Saved bytes per token per layer, unprepared: norms 2 x 4 x 8 = 64 (RMSNorm's fp32 input), SDPA 56, the
    # MLP's gate, up, SiLU and down input 4 x 2 x 16 = 128, adapters' rank outputs 2 x 1 x 7 = 14 and their
    # shared bf16 norm outputs 2 x 8 x 2 = 32, the 4-bit o_proj's input 2 x 8 = 16 (the rest shared): 310.
    assert layer_activation_bytes_per_token(setup) == 310
    # trl, the norms' fp32 outputs and the fp32 MLP: each 4-bit linear saves its own bf16 cast of an fp32
    # input, q/k/v 3 x 2 x 8 = 48, gate/up 2 x 2 x 8 = 32, down 2 x 16 = 32; o_proj's bf16 input 16; gate, up
    # and SiLU in fp32 3 x 4 x 16 = 192; adapters: rank outputs 14, their own bf16 casts of the fp32 inputs (q,
    # k, v 48; gate, up 32; down 32) and none for o_proj (SDPA's bf16 output): 112. 64 + 56 + 112 + 16 + 192 +
    # 14 + 112 = 566.
    assert layer_activation_bytes_per_token(vary(setup, kbit_preparation="trl")) == 566
    # peft without autocast also runs attention in fp32: SDPA keeps q, k, v and its output at 4 B, 4 x (2 x 8 +
    # 2 x 4) + logsumexp 4 x 2 = 104; o_proj's fp32 input 4 x 8 = 32 and its adapter's own bf16 cast 2 x 8 =
    # 16. 64 + 104 + 112 + 32 + 192 + 14 + 128 = 646.
    assert layer_activation_bytes_per_token(vary(setup, kbit_preparation="peft")) == 646
    # fp32 adapters on the fp32 inputs save each input itself, once per input: the two norm outputs 4 x 8 x 2 =
    # 64 and the down_proj input 4 x 16 = 64, rank outputs 4 x 7 = 28; o_proj's adapter casts SDPA's bf16 output
    # to fp32, 4 x 8 = 32: 188 where the bf16 adapters took 126 (14 + 112). trl: 566 - 126 + 188 = 628.
    assert layer_activation_bytes_per_token(vary(setup, kbit_preparation="trl", lora_bytes=4)) == 628
    # MoE (2 of 4 experts of width 8), trl: a token's fp32 norm output is cast by the gate and up of each of its
    # 2 experts, 4 x 2 x 8 = 64, beside q/k/v 48 and the experts' down inputs 2 x 16 = 32; o_proj's input 16;
    # the routed MLP in fp32, 2 x (3 x 4 x 8 + 2 x 4 x 8 gathered token and output) + router 12 x 4 = 368;
    # adapters: rank outputs of q/k/v/o and of gate/up/down in each of the token's 2 experts, 2 x 1 x (4 + 3 x 2)
    # = 20, + 48 + 32 + 32 = 132. 64 + 56 + 144 + 16 + 368 + 132 = 780.
    assert layer_activation_bytes_per_token(vary(setup, architecture=MOE, kbit_preparation="trl")) == 780
    # From bitsandbytes 0.43.2 no 4-bit linear saves its input: trl loses the per-linear casts (112) and
    # o_proj's input (16: its uncast adapter keeps SDPA's output, counted with attention), 566 - 128 = 438;
    # peft loses them and o_proj's fp32 input (32), its adapter keeping its own cast: 646 - 112 - 32 = 502.
    current = vary(setup, bitsandbytes_version=None)
    assert layer_activation_bytes_per_token(vary(current, kbit_preparation="trl")) == 438
    assert layer_activation_bytes_per_token(vary(current, kbit_preparation="peft")) == 502


def test_trl_preparation_leaves_its_fp32_copies_in_the_allocator_cache():
    # Two layers of 1,024 wide (8 heads of 128, MLP 4,096), a 32,768-token vocabulary: the embedding and the
    # untied LM head have n = 33,554,432 elements each (64 MiB in bf16, 128 MiB in fp32). QLoRA r=1 on all
    # seven linears in bf16, one token, so that every tensor of the step but the weights is small.
    # Weights as trained: NF4 with double quantization 0.5 + 1/64 + 4/16,384 B x 33,554,432 linears =
    # 17,309,696; embedding and head bf16 2 x 2 x n = 134,217,728; norms fp32 5 x 1,024 x 4 = 20,480;
    # adapters 2 x 23,552 x 2 B = 94,208: W = 151,642,112 B.
    wide = Architecture(layers=2, hidden=1024, heads=8, kv_heads=8, intermediate=4096, vocab=32768, max_position=64)
    n, mib = 33_554_432, 2**20
    setup = training_setup(
        architecture=wide,
        method="qlora",
        precision="bf16-mixed",
        kbit_preparation="trl",
        lora_rank=1,
        lora_bytes=2,
        lora_dropout=0.0,
        seq_len=1,
        optimizer="adamw",
    )
    assert setup.kbit_preparation == "trl"
    memory = estimate_training(setup, overhead=0)
    weights = 151_642_112
    assert memory.phases["loading"]["weights"] == weights
    # Loading: the embedding's fp32 copy (4n) is taken beside both bf16 tensors, then its bf16 one freed (+2n
    # held); the head's fp32 copy takes 4n more: 6n above W at the peak, which max_memory_allocated counts.
    assert memory.phases["loading"]["kbit_preparation_copies"] == 6 * n
    assert memory.allocated == weights + 6 * n
    # PEFT alone keeps the fp32 copies (W + 4n): the live bytes peak once the head's fp32 copy is taken beside
    # its bf16 one, 2n above the prepared weights.
    peft = estimate_training(vary(setup, kbit_preparation="peft"), overhead=0)
    assert peft.phases["loading"] == {"weights": weights + 4 * n, "kbit_preparation_copies": 2 * n}
    # Reserved: the rest of the model, W - 4n = 17,424,384 B, in one segment rounded to 2 MiB (18 MiB); the
    # two bf16 tensors (64 MiB each), which the bf16 copies TRL casts back take again; the two fp32 copies
    # (128 MiB each), freed and cached; the small pool's one 2 MiB segment. 18 + 128 + 256 + 2 = 404 MiB, and
    # the step's own blocks come out of the cached fp32 ones.
    assert memory.per_gpu == 404 * mib
    # Unprepared (norms bf16: W - 5 x 1,024 x 2 B), nothing is loaded twice and no fp32 copy is cached: the
    # device figure stays below the weights and one fp32 copy.
    unprepared = estimate_training(vary(setup, kbit_preparation="none"), overhead=0)
    assert "loading" not in unprepared.phases and unprepared.phases["forward"]["weights"] == weights - 10_240
    assert unprepared.per_gpu < weights - 10_240 + 4 * n


def test_the_gradients_made_by_backwards_last_and_first_layers_follow_the_gpus_parameters():
    # Of this GPU's gradients: the share made once its last layer's backward runs, and before its first
    # layer's. TINY untied on one stage: 1,704 parameters (embedding 256, head 256, two layers of 592, final
    # norm 8): the head's and the last layer's (256 + 592) / 1,704; all but the first layer's and the
    # embedding's 856 / 1,704. Tied: 1,448 parameters; the LM head's gradient of the shared weight waits in
    # its input buffer for the embedding's backward, so it is made at the last layer, and not subtracted
    # before the first: (592 + 256) / 1,448 and (1,448 - 592) / 1,448. Two stages: the most loaded GPU holds a
    # layer and the head and final norm (264 > the embedding's 256): 856 parameters, (592 + 256) / 856 at the
    # last layer, (856 - 592) / 856 before the first (no embedding on this stage).
    from gpuplan.estimate.training import gradient_shares

    assert gradient_shares(bf16()) == pytest.approx((848 / 1704, 856 / 1704), rel=1e-12)
    tied = dataclasses.replace(TINY, tie_embeddings=True)
    assert gradient_shares(bf16(architecture=tied)) == pytest.approx((848 / 1448, 856 / 1448), rel=1e-12)
    two = bf16(pipeline_parallel=2, gpus=2)
    assert gradient_shares(two) == pytest.approx((848 / 856, 264 / 856), rel=1e-12)


def test_deepspeed_zero2_and_zero3_do_not_pipeline():
    # DeepSpeed's pipeline engine takes ZeRO-1 alone ("ZeRO-2 and ZeRO-3 are incompatible with pipeline
    # parallelism"): GP025 at finetune.sharding; ZeRO-1 and FSDP (torchtitan pipelines over FSDP2) pipeline.
    hardware = {"gpu": "h100-sxm", "count": 4, "pipeline_parallel": 2}
    for sharding, codes in (("zero2", ["GP025"]), ("zero3", ["GP025"]), ("zero1", []), ("fsdp", [])):
        _, found = run({"precision": "bf16-mixed", "sharding": sharding, "hardware": hardware})
        assert [c for c in found if c == "GP025"] == codes, sharding
    # The planner never proposes one: a layout of either over several stages is not sound.
    spec = make_spec(
        "version: 1\nname: p\nmodel: {id: llama-3.1-8b}\nfinetune: {method: full, hardware: {gpu: h100-sxm, count: "
        "4}}\n"
    )
    job = planner_for(spec, default_settings()).finetune
    assert job is not None
    gpu = gpu_catalog()["h100-sxm"]
    for sharding in ("zero2", "zero3"):
        settings = TrainingSettings("full", False, sharding, 1, 1)
        assert "pipeline_parallel" in job.evaluator.evaluate(Layout(gpu, 1, 2, 2, settings=settings)).broken
    settings = TrainingSettings("full", False, "zero1", 1, 1)
    assert "pipeline_parallel" not in job.evaluator.evaluate(Layout(gpu, 1, 2, 2, settings=settings)).broken


def test_the_precision_assumption_states_the_bytes_a_sharded_full_fine_tune_holds():
    # bf16-mixed under autocast keeps fp32 weights and gradients (4, 4) unsharded. Under DeepSpeed ZeRO (over 2 GPUs,
    # and on one, where it runs all the same) the working weights and gradients are 16-bit beside an fp32 master
    # copy and fp32 states in its partition, whatever the precision (pure bf16 too: its states are fp32), and no
    # autocast runs (accelerate sets none under DeepSpeed): (2, 2, 4, 2). It said "(4, 4, 4, 2); torch.autocast over
    # fp32 weights" for all of them, and "(2, 2, 2, 2)" for pure bf16. FSDP's mixed precision keeps fp32 shards.
    plain, _ = run({"precision": "bf16-mixed", "hardware": {"gpu": "h200-sxm", "count": 2}})
    assert plain["assumptions"]["precision"].startswith(
        "bf16-mixed: weights/grads/states/activations bytes (4, 4, 4, 2); torch.autocast over fp32 weights"
    )
    for precision, count in (("bf16-mixed", 1), ("bf16-mixed", 2), ("bf16", 1)):
        hardware = {"gpu": "h200-sxm", "count": count}
        sharded, _ = run({"precision": precision, "sharding": "zero2", "hardware": hardware})
        assert sharded["assumptions"]["precision"].startswith(
            f"{precision}: weights/grads/states/activations bytes (2, 2, 4, 2); DeepSpeed zero2: working weights and "
            "gradients in the training dtype, fp32 master weights and fp32 optimizer states in its partition"
        ), (precision, count)
    fsdp, _ = run({"precision": "bf16-mixed", "sharding": "fsdp", "hardware": {"gpu": "h200-sxm", "count": 2}})
    assert "fsdp mixed precision: fp32 sharded parameters and gradients" in fsdp["assumptions"]["precision"]
    lora, _ = run(
        {"method": "lora", "precision": "bf16-mixed", "sharding": "fsdp", "hardware": {"gpu": "h200-sxm", "count": 2}}
    )
    assert "torch.autocast over fp32 weights" in lora["assumptions"]["precision"]


def test_a_full_fine_tune_of_a_packed_int4_checkpoint_is_refused(tmp_path):
    # A config.json with an AWQ or GPTQ 4-bit quantization_config stores the linears as packed integers that
    # Transformers loads without dequantizing; the Hugging Face Trainer refuses a quantized model without adapters
    # ("You cannot perform fine-tuning on purely quantized models", transformers 4.57 trainer.py). A full fine-tune
    # was estimated on 16-bit weights with no finding; LoRA over the quantized base runs (peft's AWQ and GPTQ
    # layers), and a GPT-OSS-style MXFP4 checkpoint loads dequantized where asked, so neither is refused.
    base = {
        "model_type": "llama", "hidden_size": 512, "intermediate_size": 1024, "num_hidden_layers": 2,
        "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 1000, "max_position_embeddings": 4096,
    }  # fmt: skip
    for method, quant, refused in (
        ("full", {"quant_method": "awq", "bits": 4, "group_size": 128}, True),
        ("full", {"quant_method": "gptq", "bits": 4, "group_size": 128}, True),
        ("lora", {"quant_method": "awq", "bits": 4, "group_size": 128}, False),
        ("full", None, False),
    ):
        (tmp_path / "config.json").write_text(json.dumps({**base, **({"quantization_config": quant} if quant else {})}))
        spec = tmp_path / "spec.yaml"
        spec.write_text(
            f"version: 1\nname: q\nmodel: {{config: config.json}}\nfinetune:\n  method: {method}\n"
            "  seq_len: 512\n  hardware: {gpu: h100-sxm}\n"
        )
        _, out, _ = run_cli("lint", "--select", "GP025", str(spec))
        assert ("spec.yaml:5:11: GP025" in out) is refused, (method, quant, out)
