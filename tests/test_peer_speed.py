"""The side-by-side benchmark against aiconfigurator: same inputs to both tools, stored peer figures in step."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import load_accuracy  # noqa: E402
import peer_speed  # noqa: E402

RECORDS = yaml.safe_load(load_accuracy.DATA.read_text(encoding="utf-8"))
BY_ID = {r["id"]: r for r in RECORDS}

# What `aiconfigurator cli estimate --estimate-mode agg` prints (0.12.0), trimmed to the lines read.
PRINTED = """\
17:02:43 [aiconfigurator] [I] [main.py:3154] Loading AIConfigurator version: 0.12.0
17:02:43 [aiconfigurator] [I] [perf_database.py:1314] Loading database for system='h100_sxm', backend='vllm', version='0.24.0'
  Performance Estimate (agg)
  TTFT:             54.274 ms
  TPOT:             6.844 ms
  Request Latency:  1559.862 ms
  tokens/s:         1,128.30
  tokens/s/gpu:     1,128.30
  tokens/s/user:    146.12
  seq/s:            5.129
"""  # noqa: E501 (a verbatim log line)
QUANT = (
    "17:02:44 [aiconfigurator] [I] [helpers.py:772] Resolved quant modes for GptOssForCausalLM: "
    "gemm=GEMMQuantMode.bfloat16 moe=MoEQuantMode.w4a16_mxfp4 kvcache=KVCacheQuantMode.bfloat16 "
    "fmha=FMHAQuantMode.bfloat16 comm=CommQuantMode.half\n"
)


def test_the_stored_peer_figures_answer_every_record_it_can_be_told_of():
    problems = peer_speed.check(RECORDS, peer_speed.load_stored()[1])
    assert problems == []


def test_aiconfigurator_is_told_what_the_record_states():
    # gs-qwen3-8b c4: 100 ShareGPT prompts of 23,260 input and 22,061 output tokens in all (233 and 221 each,
    # rounded), 4 clients, one H100 SXM, vLLM: a batch of 4 at TP 1; a dense model gets no MoE split.
    peer, why = peer_speed.peer_input(BY_ID["gs-qwen3-8b-h100sxm-vllm-sharegpt-c4"])
    assert why == "" and peer is not None
    assert peer.command() == [
        "cli", "estimate", "--model-path", "Qwen/Qwen3-8B", "--system", "h100_sxm", "--backend", "vllm",
        "--estimate-mode", "agg", "--isl", "233", "--osl", "221", "--batch-size", "4", "--tp-size", "1",
        "--kvcache-quant-mode", "bfloat16",  # the engine's "auto": the model's 16 bits, as gpuplan takes it
    ]  # fmt: skip


def test_the_prompt_is_the_one_gpuplan_is_told():
    # gpt-oss-120b at four clients: 22,946 prompt tokens over 100 prompts is 229.46 a prompt; gpuplan's spec
    # states a context of ceil(229.46) = 230 + 217 output tokens, so aiconfigurator is told 230, not 229.
    peer, _ = peer_speed.peer_input(BY_ID["gs-gpt-oss-120b-h100-vllm-tp1-sharegpt-c4"])
    assert peer is not None and (peer.isl, peer.osl) == (230, 217)


def test_a_mixture_of_experts_is_split_by_tensor_parallelism():
    # DeepSeek-R1-0528 on 8 H200 at TP 8, EP 1 (SGLang): aiconfigurator's bundled DeepSeek-R1 (the same
    # architecture), its experts split 8 ways by TP as the engine does without expert parallelism.
    peer, _ = peer_speed.peer_input(BY_ID["ix-dsr1-fp8-8xh200-sglang-tp8-1k1k-c4"])
    assert peer is not None
    command = peer.command()
    assert command[command.index("--model-path") + 1] == "deepseek-ai/DeepSeek-R1"
    assert command[-6:-2] == ["--moe-tp-size", "8", "--moe-ep-size", "1"]
    # With expert parallelism over the 8 ranks the experts are split by expert, not by width.
    spread = {**BY_ID["ix-dsr1-fp8-8xh200-sglang-tp8-1k1k-c4"], "expert_parallel": 8}
    peer, _ = peer_speed.peer_input(spread)
    assert peer is not None and peer.command()[-6:-2] == ["--moe-tp-size", "1", "--moe-ep-size", "8"]


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ("gs-gpt-oss-120b-h100-vllm-tp1-sharegpt-burst", "not a closed loop"),
        ("nim-llama33-70b-2xh100-fp8-tp2-5000x500-c100", "does not say which engine"),
        ("vllm-i18725-qwq-32b-h200-sharegpt-c1", "tensor parallelism not stated"),
    ],
)
def test_a_record_either_tool_cannot_state_is_left_with_its_reason(record, reason):
    peer, why = peer_speed.peer_input(BY_ID[record])
    assert peer is None and reason in why


def test_a_model_or_gpu_aiconfigurator_has_not_measured_is_left_with_its_reason():
    base = BY_ID["gs-qwen3-8b-h100sxm-vllm-sharegpt-c4"]
    assert peer_speed.peer_input({**base, "model": "Qwen/Qwen3-14B"}) == (
        None,
        "aiconfigurator does not bundle Qwen/Qwen3-14B",
    )
    assert peer_speed.peer_input({**base, "gpu": "h100-pcie"}) == (
        None,
        "aiconfigurator has no measurements of h100-pcie",
    )


def test_the_printed_figures_are_read_thousands_separators_and_all():
    assert peer_speed.parse(PRINTED + QUANT) == {
        "ttft_ms": 54.274,
        "tpot_ms": 6.844,
        "output_tokens_per_s": 1128.30,
        "requests_per_s": 5.129,
        "aiconfigurator": "0.12.0",
        "database": "vllm 0.24.0 on h100_sxm",
        "quant": "gemm bfloat16, moe w4a16_mxfp4, kvcache bfloat16",
    }


def test_aiconfigurator_must_run_the_weights_gpuplan_estimates():
    # gpt-oss's MXFP4 experts, DeepSeek's fp8 blocks, a 16-bit dense model: each as aiconfigurator resolved
    # them; a bf16 model stated with fp8 weights (or 16-bit weights read as fp8) would compare two deployments.
    assert peer_speed.agrees("mxfp4", "gemm bfloat16, moe w4a16_mxfp4, kvcache bfloat16")
    assert peer_speed.agrees("fp8", "gemm fp8_block, moe fp8_block, kvcache bfloat16")
    assert peer_speed.agrees("none", "gemm bfloat16, moe bfloat16, kvcache bfloat16")
    assert not peer_speed.agrees("fp8", "gemm bfloat16, moe bfloat16, kvcache bfloat16")
    assert not peer_speed.agrees("none", "gemm fp8_block, moe fp8_block, kvcache bfloat16")
    _, stored = peer_speed.load_stored()
    name = "ix-dsr1-fp8-8xh200-sglang-tp8-1k1k-c4"
    mismatched = {**stored, name: {**stored[name], "quant": "gemm bfloat16, moe bfloat16, kvcache bfloat16"}}
    assert any(p.startswith(f"{name}: aiconfigurator ran gemm bfloat16") for p in peer_speed.check(RECORDS, mismatched))


def test_a_stored_figure_made_for_other_inputs_or_no_record_is_reported():
    _, stored = peer_speed.load_stored()
    name = "gs-qwen3-8b-h100sxm-vllm-sharegpt-c4"
    changed = {**stored, name: {**stored[name], "command": stored[name]["command"].replace("233", "232")}}
    changed["gone-record"] = {"id": "gone-record", "command": "aiconfigurator cli estimate"}
    problems = peer_speed.check(RECORDS, changed)
    assert any(p.startswith(f"{name}: stored for") for p in problems)
    assert "gone-record: stored, but no such record" in problems
    # A record still in the file that can no longer be stated to aiconfigurator (now a burst).
    burst = [{**r, "load": {**r["load"], "arrival": "burst"}} if r["id"] == name else r for r in RECORDS]
    assert f"{name}: stored, but no longer stated" in peer_speed.check(burst, stored)
    missing = {k: v for k, v in stored.items() if k != name}
    assert any(p.startswith(f"{name}: no stored") for p in peer_speed.check(RECORDS, missing))


def test_both_tools_are_scored_on_the_same_figures_record_by_record():
    # Two records, each with its own stored figures: every pair is one record's one figure, measured once;
    # c4 measured a mean TTFT of 64.0 ms and c8 74.57 ms, each scored against its own stored peer figure.
    c4, c8 = BY_ID["gs-qwen3-8b-h100sxm-vllm-sharegpt-c4"], BY_ID["gs-qwen3-8b-h100sxm-vllm-sharegpt-c8"]
    stored = {
        c4["id"]: {"command": "", "ttft_ms": 48.0, "tpot_ms": 7.0, "output_tokens_per_s": 500.0},
        c8["id"]: {"command": "", "ttft_ms": 60.0, "tpot_ms": 8.0, "output_tokens_per_s": 900.0},
    }
    ours, theirs, left = peer_speed.compared([c4, c8], stored)
    assert left == []
    assert [(r.record, r.metric, r.statistic, r.measured) for r in ours] == [
        (r.record, r.metric, r.statistic, r.measured) for r in theirs
    ]
    ttft = {(r.record, r.statistic): r.error for r in theirs if r.metric == "ttft_ms"}
    assert ttft[(c4["id"], "mean")] == pytest.approx(48.0 / 64.0 - 1)
    assert ttft[(c8["id"], "mean")] == pytest.approx(60.0 / 74.57 - 1)
    assert not any(r.metric == "requests_per_s" for r in theirs + ours)  # not stored: scored for neither


def test_a_figure_gpuplan_does_not_score_is_listed_for_both():
    # A closed loop on one GPU that cannot hold DeepSeek-R1: gpuplan says the engine does not start, so the
    # record is in neither tool's figures and the list says why.
    record = {**BY_ID["ix-dsr1-fp8-8xh200-sglang-tp8-1k1k-c4"], "gpus": 1, "tensor_parallel": 1}
    ours, theirs, left = peer_speed.compared([record], {record["id"]: {"command": "", "ttft_ms": 1.0}})
    assert ours == theirs == [] and left and left[0][0] == record["id"] and left[0][1].startswith("gpuplan: ")
