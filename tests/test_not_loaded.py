"""A serving layout that cannot start (no KV cache room for one full-context sequence) states no speed and no
cost per token: "n/a (the engine cannot start)" in text and reports, null in JSON with ``loads: false``."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from conftest import EXAMPLES, run_cli

from gpuplan.linter import lint_path

NOT_FITTING = EXAMPLES / "findings" / "fit-70b-on-one-h100.yaml"
SPEED_KEYS = ("ttft_ms", "ttft_single_ms", "tpot_ms", "tokens_per_s", "running_sequences", "cost_per_million_tokens")


def test_loads_from_one_full_context_sequence():
    # Llama 3.1 70B with an fp8 KV cache: 80 layers x 8 KV heads x 128 x (K + V) x 1 B = 163,840 B per token,
    # x 8,192 tokens = 1,342,177,280 B per sequence. A budget one byte short of that over the rest does not
    # start; exactly that starts.
    serve = lint_path(str(NOT_FITTING)).analysis.serve
    memory = serve.memory
    assert memory.kv_bytes_per_sequence == 163_840 * 8_192 == 1_342_177_280
    rest = memory.budget - memory.kv_available  # weights, activation reserve and runtime
    short = dataclasses.replace(serve, memory=dataclasses.replace(memory, budget=rest + 1_342_177_279))
    exact = dataclasses.replace(serve, memory=dataclasses.replace(memory, budget=rest + 1_342_177_280))
    assert (serve.loads, short.loads, exact.loads) == (False, False, True)
    assert serve.not_loaded_reason.startswith("the weights and the engine's reserves leave no room for a KV cache")
    # 1,342,177,279 B of KV pool: 16-token blocks of 16 x 163,840 B = 2,621,440 B: 511 whole blocks, 8,176 tokens.
    assert short.not_loaded_reason == (
        "the KV cache holds 8,176 tokens, less than one 8,192-token sequence, so the engine cannot start"
    )
    assert short.cost_per_million_tokens is None and exact.cost_per_million_tokens is not None


def test_estimate_text_says_not_applicable():
    code, out, _ = run_cli("estimate", str(NOT_FITTING))
    assert code == 1  # GP301
    assert (
        "  TTFT, TPOT and output tokens/s: n/a (the engine cannot start): the weights and the engine's reserves leave"
        " no room for a KV cache, so the engine cannot start\n" in out
    )
    # The monthly price stands: 1 GPU x 4.12 USD/GPU-hour (the catalog median) x 730 hours = 3,007.6 USD.
    assert "  cost: 3,008 USD per month; per 1M output tokens n/a (the engine cannot start)\n" in out
    assert not re.search(r"TTFT [\d,]+ ms|TPOT [\d.]+ ms|[\d,]+ output tokens/s|USD per 1M", out)
    assert "steady state: n/a (the engine cannot start)" in out


def test_estimate_json_nulls_the_speed_of_a_layout_that_cannot_start():
    code, out, _ = run_cli("estimate", "--format", "json", str(NOT_FITTING))
    serve = json.loads(out)["serve"]
    assert code == 1
    assert serve["loads"] is False and serve["fits"] is False
    assert {key: serve[key] for key in SPEED_KEYS} == dict.fromkeys(SPEED_KEYS)
    assert serve["monthly_cost"] == 3007.6  # 4.12 x 730
    _, out, _ = run_cli("estimate", "--format", "json", str(EXAMPLES / "serve-llama-70b.yaml"))
    fitting = json.loads(out)["serve"]
    assert fitting["loads"] is True
    assert all(isinstance(fitting[key], float) and fitting[key] > 0 for key in SPEED_KEYS)


def test_report_shows_no_speed_and_no_negative_free_share(tmp_path: Path):
    # Appendix E details the layout the memo funds (here the planner's 1 x b200-hgx) with the declared one's
    # verdict beside it; confined to one H100 the plan has nothing better, and the declared layout itself,
    # which cannot start, is detailed with no speed.
    code, out, err = run_cli("report", "--md", "-o", "-", str(NOT_FITTING))
    assert code == 1, err
    assert "The declared layout (1 x h100-sxm): does not fit, 143.5 GiB per GPU estimated" in out
    confined = tmp_path / "confined.yaml"
    confined.write_text(NOT_FITTING.read_text() + "plan: {gpu: [h100-sxm], max_gpus: 1}\n")
    _, alone, _ = run_cli("report", "--md", "-o", "-", str(confined))
    assert "E. Serving: the estimate of 1 x h100-sxm (does not fit)" in alone
    assert "| Latency | n/a (the engine cannot start): the weights and the engine's reserves" in alone
    assert "| Throughput | n/a (the engine cannot start) |" in alone
    assert "| Cost per 1M output tokens | n/a (the engine cannot start) |" in alone
    # The planner's table: no free share ("none", not 1 - 143.54 / 71.24 = -101%) and no speed; the side-by-side
    # table says by how much it is short: 143.54 GiB needed - 71.24 GiB engine budget = 72.3 GiB.
    assert "| declared | 1 x h100-sxm | none | n/a | 4.12 |" in out
    assert "| Headroom per GPU at 90% confidence | none: short by 72.3 GiB |" in out
    assert not re.search(r"\| -\d+% \|", out)
    assert "104,160" not in out and "65.26" not in out  # the old TTFT and cost per 1M tokens of the dead engine
    # The stress test sets the funded layout (1 x b200-hgx) beside the declared one, which does not start:
    # it fails every scenario with no latency quoted.
    assert "| as planned | holds | fails: does not fit |" in out
    assert "TTFT 104" not in out


def test_diff_between_a_fitting_and_a_non_fitting_layout(tmp_path: Path):
    fitting = tmp_path / "fits.yaml"
    fitting.write_text(NOT_FITTING.read_text().replace("count: 1}", "count: 4, tensor_parallel: 4}"))
    code, out, err = run_cli("diff", str(fitting), str(NOT_FITTING))
    assert code == 1, err  # the new GP301 error fails the guardrail
    assert re.search(r"TTFT \(the SLO's statistic\)\s+[\d,]+ ms\s+n/a\n", out), out
    assert re.search(r"TTFT at the slow edge\s+[\d,]+ ms\s+n/a\n", out), out  # no edge for a dead engine
    assert re.search(r"Cost per 1M output tokens\s+[\d.,]+ USD\s+n/a\n", out), out
    code, out, err = run_cli("diff", "--format", "json", str(NOT_FITTING), str(fitting))
    assert code == 0, err
    assert "null" in out  # the non-fitting side's speed figures
