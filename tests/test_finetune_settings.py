"""Worked examples for each fine-tuning setting of round two, through the spec path, by hand arithmetic.

Llama-3-8B throughout: P = 8,030,261,248 parameters, 32 layers, hidden 4,096, 8 KV heads of 128, MLP
14,336, vocabulary 128,256; the largest single matrix is the LM head (128,256 x 4,096 = 525,336,576).
"""

from __future__ import annotations

import datetime

import pytest
import yaml

from gpuplan.analysis import to_dict
from gpuplan.linter import LintOptions, lint_bytes

P = 8_030_261_248
HEAD = 128_256 * 4096
GIB = 2**30


def run(finetune: dict, model: str = "llama-3-8b") -> tuple[dict, list[str]]:
    document = {"version": 1, "name": "t", "model": {"id": model}, "finetune": {"method": "full", **finetune}}
    document["finetune"].setdefault("hardware", {"gpu": "h200-sxm"})
    text = yaml.safe_dump(document, sort_keys=False)
    result = lint_bytes("t.yaml", text.encode(), LintOptions(today=datetime.date(2026, 12, 1)))
    codes = [finding.code for finding in result.findings]
    return (to_dict(result.analysis)["finetune"] if result.analysis else {}), codes


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
    assert step(moved) == {"weights": 2 * P, "gradients": 2 * P}
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
    assert step(moved)["gathered_parameters"] == 2 * 2 * HEAD + 2 * HEAD
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
    assert manual["per_gpu_bytes"] - trainer["per_gpu_bytes"] == 2 * 128_256 * 2048


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
