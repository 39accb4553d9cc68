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
"""


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
    ]  # fmt: skip


def test_a_mixture_of_experts_is_split_by_tensor_parallelism():
    # DeepSeek-R1-0528 on 8 H200 at TP 8, EP 1 (SGLang): aiconfigurator's bundled DeepSeek-R1 (the same
    # architecture), its experts split 8 ways by TP as the engine does without expert parallelism.
    peer, _ = peer_speed.peer_input(BY_ID["ix-dsr1-fp8-8xh200-sglang-tp8-1k1k-c4"])
    assert peer is not None
    command = peer.command()
    assert command[command.index("--model-path") + 1] == "deepseek-ai/DeepSeek-R1"
    assert command[-4:] == ["--moe-tp-size", "8", "--moe-ep-size", "1"]


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


def test_the_printed_figures_are_read_thousands_separators_and_all():
    assert peer_speed.parse(PRINTED) == {
        "ttft_ms": 54.274,
        "tpot_ms": 6.844,
        "output_tokens_per_s": 1128.30,
        "requests_per_s": 5.129,
        "aiconfigurator": "0.12.0",
        "database": "vllm 0.24.0 on h100_sxm",
    }


def test_a_stored_figure_made_for_other_inputs_or_no_record_is_reported():
    _, stored = peer_speed.load_stored()
    name = "gs-qwen3-8b-h100sxm-vllm-sharegpt-c4"
    changed = {**stored, name: {**stored[name], "command": stored[name]["command"].replace("233", "232")}}
    changed["gone-record"] = {"id": "gone-record", "command": "aiconfigurator cli estimate"}
    problems = peer_speed.check(RECORDS, changed)
    assert any(p.startswith(f"{name}: stored for") for p in problems)
    assert "gone-record: stored, but no such closed-loop record" in problems
    missing = {k: v for k, v in stored.items() if k != name}
    assert any(p.startswith(f"{name}: no stored") for p in peer_speed.check(RECORDS, missing))


def test_both_tools_are_scored_on_the_same_figures():
    # The c4 run measured a mean TTFT of 64.0 ms; the peer's stored figure is scored against the very same
    # measurement gpuplan's is, so the two lists pair figure for figure.
    record = BY_ID["gs-qwen3-8b-h100sxm-vllm-sharegpt-c4"]
    stored = {record["id"]: {"command": "", "ttft_ms": 48.0, "tpot_ms": 7.0, "output_tokens_per_s": 500.0}}
    ours, theirs = peer_speed.compared([record], stored)
    assert [(r.metric, r.statistic, r.measured) for r in ours] == [(r.metric, r.statistic, r.measured) for r in theirs]
    mean_ttft = next(r for r in theirs if (r.metric, r.statistic) == ("ttft_ms", "mean"))
    assert mean_ttft.measured == 64.0 and mean_ttft.error == pytest.approx(48.0 / 64.0 - 1)
    assert not any(r.metric == "requests_per_s" for r in theirs)  # not stored: not scored for either


def test_pipeline_stages_and_a_stated_fp8_kv_cache_are_told_too():
    # A closed loop on two pipeline stages of one GPU each with an fp8 KV cache: one replica of two stages
    # (not two replicas), and the cache dtype the record states; a record over more GPUs than one replica
    # holds is left out.
    base = BY_ID["gs-qwen3-8b-h100sxm-vllm-sharegpt-c4"]
    staged = {**base, "gpus": 2, "pipeline_parallel": 2, "kv_dtype": "fp8 (stated)"}
    peer, why = peer_speed.peer_input(staged)
    assert why == "" and peer is not None
    assert peer.command()[-4:] == ["--pp-size", "2", "--kvcache-quant-mode", "fp8"]
    replicas = {**base, "gpus": 2}
    assert peer_speed.peer_input(replicas) == (None, "more than one replica")
