"""Multi-LoRA serving and speculative decoding (issue 31, item 5): memory counted by hand from the models'
dimensions and vLLM's allocations, the expected-tokens formula, the speed hook, and bad input at its line.

Sources of the hand counts: vLLM's LoRA layers (``create_lora_weights`` of base_linear.py,
vocab_parallel_embedding.py, logits_processor.py: A (rank x in) and B (out x rank) per slot and output
slice), the EAGLE head of ``EagleLlamaForCausalLM`` (one Llama decoder layer and a 2h x h fc), and Leviathan
et al. 2023 eq. 1 for the tokens a verify step yields.
"""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from gpuplan.catalog import get_model
from gpuplan.estimate.calibration import CALIBRATION
from gpuplan.estimate.lora_serving import LoraSlots, host_bytes, slot_stage_bytes
from gpuplan.estimate.performance import Efficiency, decode_attention_flops, matmul_params
from gpuplan.estimate.serving_bounds import latency_floors
from gpuplan.estimate.serving_speed import Deployment, serving_speed
from gpuplan.estimate.speculative import expected_tokens
from gpuplan.linter import lint_bytes

LLAMA_8B = get_model("llama-3.1-8b").architecture


def spec(extra: str = "", concurrency: int = 1, tp: int = 1, model: str = "llama-3.1-8b") -> str:
    return (
        f"version: 1\nname: features\nmodel: {{id: {model}}}\nserve:\n  context: 8192\n  concurrency: {concurrency}\n"
        f"{extra}  hardware: {{gpu: h100-sxm, count: {tp}, tensor_parallel: {tp}}}\n"
    )


def analysis(text: str):
    result = lint_bytes("spec.yaml", text.encode())
    assert result.analysis is not None, [finding.message for finding in result.findings]
    return result.analysis


# -- multi-LoRA: the slots, by hand --------------------------------------------------------------------

# Llama-3.1-8B: hidden 4,096, 32 query heads and 8 KV heads of 128 (q 4,096 wide, k and v 1,024), MLP
# 14,336, vocabulary 128,256, 32 layers. One slot at rank 16, TP 1, elements (A: rank x in per slice, B:
# out x rank):
#   qkv (3 slices)  A 3 x 16 x 4,096 = 196,608        B 16 x (4,096 + 1,024 + 1,024) = 98,304
#   o_proj          A 16 x 4,096     =  65,536        B 4,096 x 16                   = 65,536
#   gate_up (2)     A 2 x 16 x 4,096 = 131,072        B 2 x 14,336 x 16              = 458,752
#   down_proj       A 16 x 14,336    = 229,376        B 4,096 x 16                   = 65,536
#   a layer: 1,310,720 (= 16 x the 81,920 inputs and outputs of its seven matrices); 32 layers: 41,943,040
#   embedding       A 128,256 x 16   = 2,052,096      B 4,096 x 16                   = 65,536
#   LM head         A 16 x 4,096     =    65,536      B 128,256 x 16                 = 2,052,096
#   a slot: 41,943,040 + 2 x 2,117,632 = 46,178,304 elements; 4 slots in bf16: 4 x 2 x 46,178,304 B.
SLOT_ELEMENTS_TP1 = 46_178_304
SLOTS_4_RANK_16 = 4 * 2 * SLOT_ELEMENTS_TP1  # 369,426,432 B = 352.3 MiB


def test_lora_slots_of_llama_8b_counted_by_hand():
    lora = LoraSlots(max_adapters=4, max_rank=16, max_cpu_adapters=4)
    assert slot_stage_bytes(LLAMA_8B, lora, 2, 1, 1) == (SLOTS_4_RANK_16,) == (369_426_432,)
    # TP 2: column-parallel outputs and row-parallel inputs halve, the rest stays whole on each rank:
    # qkv B 16 x (2,048 + 512 + 512) = 49,152; o A 16 x 2,048 = 32,768; gate_up B 2 x 7,168 x 16 = 229,376;
    # down A 16 x 7,168 = 114,688: a layer 196,608 + 49,152 + 32,768 + 65,536 + 131,072 + 229,376 + 114,688
    # + 65,536 = 884,736; 32 layers 28,311,552; with embedding and head 32,546,816 elements.
    assert slot_stage_bytes(LLAMA_8B, lora, 2, 2, 1) == (4 * 2 * 32_546_816,)
    # Two pipeline stages of 16 layers: the embedding on the first, the head on the second.
    first, second = slot_stage_bytes(LLAMA_8B, lora, 2, 1, 2)
    assert (first, second) == (8 * (16 * 1_310_720 + 2_117_632), 8 * (16 * 1_310_720 + 2_117_632))
    # The host cache: max_cpu_adapters whole adapters (TP 1) per worker.
    assert host_bytes(LLAMA_8B, LoraSlots(4, 16, 10), 2) == 10 * 2 * SLOT_ELEMENTS_TP1


def test_lora_slots_take_gpu_memory_and_kv_room():
    plain = analysis(spec()).serve
    served = analysis(spec("  lora: {max_adapters: 4, max_rank: 16}\n")).serve
    assert served.memory.breakdown["lora_slots"] == SLOTS_4_RANK_16
    assert "lora_slots" not in plain.memory.breakdown
    # vLLM loads the slots with the weights, before it sizes the KV cache: the pool shrinks by as much.
    assert plain.memory.kv_available - served.memory.kv_available == SLOTS_4_RANK_16
    figures = json.loads(run_cli_json(spec("  lora: {max_adapters: 4, max_rank: 16}\n")))["serve"]
    assert figures["lora_slot_bytes"] == SLOTS_4_RANK_16
    assert figures["lora_host_bytes_per_gpu"] == SLOTS_4_RANK_16  # max_cpu_adapters defaults to max_adapters


def test_each_decode_step_reads_the_adapters_in_its_batch():
    # The batched LoRA kernels read each adapter's A and B once per step, one adapter per decoding sequence
    # up to the 4 slots: a step of 16 sequences reads all four slots more than without LoRA, one of 2 two,
    # a prompt's pass (no decodes) one. One slot: SLOTS_4_RANK_16 / 4 bytes (one stage).
    plain, served = (
        Deployment(analysis(spec(extra, 16)).serve.workload, CALIBRATION, Efficiency())
        for extra in ("", "  lora: {max_adapters: 4, max_rank: 16}\n")
    )
    for decode, prefill, adapters in ((16, 0, 4), (2, 0, 2), (0, 512, 1)):
        read = served.step(decode, prefill, 4096, 0.0).bytes_read - plain.step(decode, prefill, 4096, 0.0).bytes_read
        assert read == pytest.approx(adapters * SLOTS_4_RANK_16 / 4)
    assert (
        analysis(spec("  lora: {max_adapters: 4}\n", 16)).serve.speed.tpot_s > analysis(spec("", 16)).serve.speed.tpot_s
    )


# -- speculative decoding -------------------------------------------------------------------------------


def test_expected_tokens_per_step_hand_derived():
    # Leviathan et al. 2023 eq. 1 at a = 0.8, k = 4: (1 - 0.8^5) / (1 - 0.8) = (1 - 0.32768) / 0.2 = 3.3616.
    assert expected_tokens(0.8, 4) == pytest.approx(3.3616)
    assert expected_tokens(1.0, 4) == 5  # every draft accepted: k + 1
    assert expected_tokens(0.0, 4) == 1  # none: the model's own token only
    assert expected_tokens(0.5, 1) == pytest.approx(1.5)  # (1 - 0.25) / 0.5


EAGLE = "  speculative: {method: eagle, num_tokens: 4, acceptance_rate: 0.8}\n"


def test_eagle_head_memory_of_llama_8b_by_hand():
    served = analysis(spec(EAGLE)).serve
    plain = analysis(spec()).serve
    # One Llama-3.1-8B decoder layer: attention 4,096 x (4,096 + 1,024 + 1,024) + 4,096 x 4,096 = 41,943,040,
    # MLP 3 x 4,096 x 14,336 = 176,160,768, two norms 8,192: 218,112,000; the fc 2 x 4,096 x 4,096 =
    # 33,554,432; in bf16 2 x 251,666,432 = 503,332,864 B. Embedding and LM head are the model's.
    assert served.memory.breakdown["draft_weights"] == 503_332_864
    # Its one layer of KV beside the model's 32: 2 x 8 x 128 x 2 B = 4,096 B per token more.
    assert served.memory.kv_bytes_per_token - plain.memory.kv_bytes_per_token == 4_096
    assert served.memory.kv_bytes_per_sequence - plain.memory.kv_bytes_per_sequence == 4_096 * 8192


def test_draft_model_memory_by_hand():
    draft = "  speculative: {method: draft, draft_model: llama-3.2-1b, num_tokens: 4, acceptance_rate: 0.8}\n"
    served = analysis(spec(draft)).serve
    # Llama-3.2-1B whole: 1,235,814,400 parameters in bf16 (tied head) + its rotary cache of 131,072
    # positions x 64 x 2 B = 2,471,628,800 + 16,777,216 B; its 16 layers of 2 x 8 x 64 x 2 B KV per token.
    assert served.memory.breakdown["draft_weights"] == 2_471_628_800 + 16_777_216
    assert served.memory.kv_bytes_per_token == 131_072 + 16 * 2_048


def test_speculative_tpot_is_a_round_over_the_expected_tokens():
    # One sequence, nothing else in flight: TPOT is one round (the verify pass of 1 + 4 positions and four
    # EAGLE-head steps) over E = 3.3616 tokens. The round's parts are the speed model's own step functions:
    # the drafted positions ride the step as prompt tokens (their LM head FLOPs folded in), attending at the
    # decode context (the prompt, 8,192 - 256 tokens, and half the output).
    served = analysis(spec(EAGLE)).serve
    workload = served.workload
    assert workload.speculation is not None
    d = Deployment(workload, CALIBRATION, Efficiency())
    context = 8192 - 256 + 256 / 2
    total = matmul_params(LLAMA_8B)
    with_head = total / (total - LLAMA_8B.vocab * LLAMA_8B.hidden)
    verify = d.step(1, 4 * with_head, context, 4 * decode_attention_flops(LLAMA_8B, context)).seconds
    head = Deployment(workload.speculation.proposer, CALIBRATION, Efficiency()).step(1, 0, context, 0.0).seconds
    assert served.speed.tpot_s == pytest.approx((verify + 4 * head) / 3.3616, rel=1e-9)
    # Speculation is worth it here: a plain step is more than twice a round over E ...
    plain = analysis(spec()).serve
    assert served.speed.tpot_s < plain.speed.tpot_s / 2
    # ... and not at a low acceptance rate, where a round costs more than the tokens it yields.
    poor = analysis(spec("  speculative: {method: eagle, num_tokens: 4, acceptance_rate: 0.1}\n")).serve
    assert poor.speed.tpot_s > plain.speed.tpot_s
    # Memory does not depend on the acceptance rate; output tokens/s follow the TPOT.
    assert poor.memory == served.memory
    assert served.speed.tokens_per_s > plain.speed.tokens_per_s > poor.speed.tokens_per_s


def test_latency_floor_holds_with_speculation():
    for concurrency in (1, 16, 64):
        workload = analysis(spec(EAGLE, concurrency)).serve.workload
        _, floor = latency_floors(workload)
        assert floor <= serving_speed(workload).tpot_s


def test_mtp_layer_of_a_moe_model_is_a_moe_layer():
    # Qwen3-Next's MTP layer is one decoder layer of its own kind: attention and 512 experts of 512 wide
    # with a shared expert; an EAGLE head of the same model is a dense layer of its intermediate (5,120).
    arch = get_model("qwen3-next-80b-a3b").architecture
    text = "  speculative: {{method: {}, num_tokens: 2, acceptance_rate: 0.8}}\n"
    mtp = analysis(spec(text.format("mtp"), tp=4, model="qwen3-next-80b-a3b")).serve.memory.breakdown
    eagle = analysis(spec(text.format("eagle"), tp=4, model="qwen3-next-80b-a3b")).serve.memory.breakdown
    experts = 512 * 3 * arch.hidden * 512  # every routed expert of the layer, gated
    assert mtp["draft_weights"] > eagle["draft_weights"]
    assert mtp["draft_weights"] * 4 / 2 > experts  # over TP 4, in bf16


# -- bad input, at its line ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra, code, line",
    [
        ("  lora: {max_adapters: 8, max_cpu_adapters: 4}\n", "GP027", 7),
        ("  lora:\n    max_adapters: 8\n    max_cpu_adapters: 4\n", "GP027", 9),
        ("  lora:\n    max_rank: 24\n", "GP105", 8),  # not a rank vLLM takes
        ("  lora:\n    max_adapters: 0\n", "GP103", 8),
        ("  speculative:\n    method: draft\n    num_tokens: 4\n    acceptance_rate: 0.8\n", "GP027", 8),
        (
            "  speculative:\n    method: eagle\n    draft_model: llama-3.2-1b\n    num_tokens: 4\n"
            "    acceptance_rate: 0.8\n",
            "GP027",
            9,
        ),
        (  # Llama 2's 32,000-token vocabulary against Llama 3.1's 128,256
            "  speculative:\n    method: draft\n    draft_model: llama-2-7b\n    num_tokens: 4\n"
            "    acceptance_rate: 0.8\n",
            "GP027",
            9,
        ),
        (
            "  speculative:\n    method: draft\n    draft_model: tiny-llama-9\n    num_tokens: 4\n"
            "    acceptance_rate: 0.8\n",
            "GP020",
            9,
        ),
        ("  speculative:\n    method: eagle\n    num_tokens: 4\n    acceptance_rate: 1.5\n", "GP103", 10),
        ("  speculative:\n    method: medusa\n    num_tokens: 4\n    acceptance_rate: 0.5\n", "GP105", 8),
        ("  speculative:\n    method: eagle\n    num_tokens: 0\n    acceptance_rate: 0.5\n", "GP103", 9),
        ("  speculative:\n    method: eagle\n    num_tokens: 4\n", "GP104", 7),  # no acceptance rate
    ],
)
def test_bad_lora_and_speculative_settings_are_findings_at_their_line(extra, code, line):
    result = lint_bytes("spec.yaml", spec(extra).encode())
    found = [(finding.code, finding.line) for finding in result.findings if finding.code.startswith("GP")]
    assert (code, line) in found, found


def run_cli_json(text: str) -> str:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spec.yaml"
        path.write_text(text, encoding="utf-8")
        code, out, _ = run_cli("estimate", str(path), "--format", "json")
        assert code == 0, out
        return out
