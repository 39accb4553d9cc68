"""Figures the decision report states about gpuplan itself, held to the measurements they come from."""

from __future__ import annotations

import json
import math

from conftest import EXAMPLES, run_cli
from test_memory_bands import BANDS, kv_low_ratio, shipped

from gpuplan.units import rounded

GIB = 2**30


def test_the_reports_memory_band_is_the_out_of_sample_edge():
    # finetune-then-serve: a full fine-tune, judged by the full-fine-tuning band (19 full runs of its own,
    # not pooled); serving by its KV cache at the low edge. The row states the edges of the layouts the approver
    # funds (the plan's recommendation for the fine-tune, 4 x b200-hgx; the declared deployment, kept), recomputed
    # here from `plan` and `estimate` and the generated file, and no in-sample claim.
    _, plan, _ = run_cli("plan", "--format", "json", str(EXAMPLES / "finetune-then-serve.yaml"))
    (funded,) = [job["recommended"] for job in json.loads(plan)["jobs"] if job["job"] == "finetune"]
    assert (funded["gpu"], funded["gpus"]) == ("b200-hgx", 4)
    per_gpu = funded["per_gpu_bytes"]
    band = BANDS["memory"]["full"]["device"]
    assert not band["pooled"] and band["records"] == 19
    ratio = shipped("full", 0.9)
    edge = math.ceil(per_gpu * ratio)
    _, out, _ = run_cli("report", str(EXAMPLES / "finetune-then-serve.yaml"), "-o", "-")
    (row,) = [line for line in out.splitlines() if line.startswith("| Error bands |")]
    # Read at one decimal from its published figure at two, as a reader checks it against `gpuplan plan`
    # (gpuplan.units.gib).
    published = rounded(edge / GIB, 2)
    assert (
        f"fine-tuning memory: up to {rounded(published, 1):.1f} GiB per GPU at 90% confidence (x {ratio:.2f} over "
        f"{band['records']} published full fine-tuning runs not used to tune the model)"
    ) in row
    # Serving: the KV cache the engine allocates at its low edge, the ceil(0.1 x n)-th smallest ratio.
    _, estimate, _ = run_cli("estimate", "--format", "json", str(EXAMPLES / "finetune-then-serve.yaml"))
    pool = json.loads(estimate)["serve"]["kv_pool_bytes"]
    logs = BANDS["memory"]["serving"]["kv_pool"]["records"]
    assert (
        f"serving KV cache: as little as {math.floor(pool * kv_low_ratio(0.9)) / GIB:.1f} GiB per GPU at 90% "
        f"confidence (x {kv_low_ratio(0.9):.2f} over {logs} published engine startup logs not used to tune the model)"
    ) in row
    assert "in sample" not in out and "calibrated on" not in out


def test_a_fine_tune_without_tokens_quotes_no_run_time_or_cost_in_the_estimate_appendix():
    # fit-training-kv-cache has no finetune.tokens: the planner prices each layout over 1M tokens, and Appendix E
    # quoted that as the run ("Training time 0.0 h (0.1 GPU-hours)", "Cost of the run 0.26 USD"). The time and the
    # cost of the run are unknown; the cost per 1M training tokens is what Appendix B's options table shows.
    _, out, _ = run_cli("report", str(EXAMPLES / "findings" / "fit-training-kv-cache.yaml"), "-o", "-")
    before, appendix = out.split("**Fine-tuning: memory, time and cost**")  # Appendix E's table, in Markdown
    appendix = appendix.split("\n\n**")[0]
    assert "| Training time | n/a (finetune.tokens is not given) |" in appendix
    assert "| Cost of the run | n/a (finetune.tokens is not given) |" in appendix
    (options_row,) = [line for line in before.splitlines() if line.startswith("| Cost per 1M training tokens |")]
    funded = options_row.split(" | ")[1]  # the first option is the funded layout
    assert f"| Cost per 1M training tokens | {funded} |" in appendix
    assert " h (" not in appendix.split("| Training time |")[1].split("\n")[0]


def test_a_deployment_with_no_room_for_a_kv_cache_quotes_none_not_a_negative_size(write_spec):
    # Qwen2.5-14B's 27.5 GiB of bf16 weights on one L4 (22 GiB usable): the pool the engine would allocate is
    # negative (serve.kv_pool_bytes is signed by design); the report printed "as little as -8.5 GiB per GPU".
    # plan.gpu and max_gpus leave no other layout: the declared one is the one the report shows (REJECT).
    spec = write_spec("version: 1\nname: neg-kv\nmodel: {id: qwen2.5-14b}\n"
                      "serve: {context: 8192, concurrency: 4, hardware: {gpu: l4, count: 1}}\n"
                      "plan: {gpu: [l4], max_gpus: 1}\n")  # fmt: skip
    _, estimate, _ = run_cli("estimate", "--format", "json", str(spec))
    assert json.loads(estimate)["serve"]["kv_pool_bytes"] < 0
    _, out, _ = run_cli("report", str(spec), "-o", "-")
    (row,) = [line for line in out.splitlines() if line.startswith("| Error bands |")]
    assert "serving KV cache: none: the weights and the engine's reserves take the whole budget" in row
    assert "as little as -" not in out


def test_lint_and_the_report_state_one_headroom_figure():
    # finetune-then-serve's declared fine-tune: 79.15 GiB usable, 74.51 GiB at the 90% edge. GP202 said "4.6 GiB"
    # (the exact 4.64) beside the report's "4.7 GiB" (79.2 - 74.5, the figures it shows): both now say the latter.
    _, lint, _ = run_cli("lint", str(EXAMPLES / "finetune-then-serve.yaml"))
    _, report, _ = run_cli("report", str(EXAMPLES / "finetune-then-serve.yaml"), "-o", "-")
    assert "fine-tuning leaves 4.7 GiB of 79.2 GiB free on h100-sxm" in lint
    assert "| Headroom per GPU at 90% confidence | 4.7 GiB (6%) |" in report
