"""Rules: messages with their numbers, each comparison at its threshold, configuration, waivers, and
consistency properties."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import re
import textwrap
from pathlib import Path

import yaml
from conftest import EXAMPLES, run_cli
from hypothesis import given
from hypothesis import strategies as st
from test_memory_bands import BANDS, kv_low_ratio, shipped

from gpuplan.catalog import gpu_catalog
from gpuplan.config import Settings, default_settings
from gpuplan.linter import LintOptions, LintResult, lint_bytes
from gpuplan.plan.configured import planner_for
from gpuplan.rules.form_factor import _siblings
from gpuplan.units import format_gib, format_gib_difference, format_latency_ms, format_ms, format_share_under

SERVING_LOGS = BANDS["memory"]["serving"]["kv_pool"]["records"]

TODAY = datetime.date(2026, 12, 2)


def lint(text: str, **options) -> LintResult:
    """The lint result of a spec's text (its common indentation removed), judged on TODAY."""
    return lint_bytes("spec.yaml", textwrap.dedent(text).encode(), LintOptions(today=TODAY, **options))


def lint_text(text: str, **options) -> list:
    return list(lint(text, **options).findings)


def findings(text: str, *codes: str, catalog_hints: bool = False):
    """The findings of the rules ``codes`` on a spec's text."""
    return lint(text, select=codes, catalog_hints=catalog_hints).findings


def spec(serve: dict | None = None, finetune: dict | None = None, model: str = "llama-3.1-8b", **extra) -> str:
    document = {"version": 1, "name": "t", "model": {"id": model}}
    if serve:
        document["serve"] = serve
    if finetune:
        document["finetune"] = finetune
    document.update(extra)
    return yaml.safe_dump(document, sort_keys=False)


def test_parallelism_needed_quotes_numbers_and_layout():
    (finding,) = lint_text(
        spec({"context": 8192, "concurrency": 8, "hardware": {"gpu": "h100-sxm"}}, model="llama-3.1-70b"),
        ignore=("GP504",),  # the catalog's H100 quotes are older than 90 days on TODAY
    )
    assert finding.code == "GP301" and finding.pointer == "/serve/hardware"
    assert "GiB on one h100-sxm" in finding.message and "4 x h100-sxm, tensor_parallel 4 fits" in finding.message


def test_kv_capacity_gives_max_concurrency_and_context():
    (finding,) = lint_text(
        spec({"context": 131072, "concurrency": 16, "category": "long-context", "hardware": {"gpu": "l40s"}}),
        ignore=("GP504",),
    )
    assert finding.code == "GP203" and finding.line == 7
    # L40S (44.49 GiB usable, under vLLM's 70 GiB line): 2,048 batched tokens, 256 sequences. Budget
    # 0.9 x 47,770,773,750 = 42,993,696,375 B; weights 8,030,261,248 x 2 + rope cache 131,072 x 128 x 2
    # = 16,094,076,928; reserve max(2,048 x 118,784 forward, 256 x 128,256 x 14 + 2,048 x 4,096 x 2
    # sampler) = 476,446,720; runtime 0.25 GiB. Left 26,154,737,271 B / (16 x 131,072 B per token) =
    # 12,471.8 tokens, i.e. 779 whole 16-token blocks = 12,464 tokens per sequence.
    assert "at most 1 sequence at 131,072 tokens, or 12,464 tokens at 16" in finding.message


def test_explain_prints_three_codes():
    for code, title in (
        ("GP201", "does-not-fit"),
        ("GP302", "parallelism-not-needed"),
        ("GP402", "evidence-out-of-category"),
    ):
        exit_code, out, _ = run_cli("explain", code)
        assert exit_code == 0 and out.startswith(f"{code} {title}")


def test_rules_listing_json():
    code, out, _ = run_cli("rules", "--format", "json")
    rows = json.loads(out)
    assert code == 0 and {"GP201", "GP310", "GP505", "GP601", "GP701"} <= {row["code"] for row in rows}


def test_config_file_found_upward_changes_thresholds_and_severity(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.gpuplan]\nignore = ["GP505"]\n\n[tool.gpuplan.thresholds]\nheadroom_pct = 50\n'
    )
    specs = tmp_path / "specs"
    specs.mkdir()
    path = specs / "a.yaml"
    path.write_text(spec({"context": 8192, "concurrency": 8, "hardware": {"gpu": "l40s"}}))
    code, out, _ = run_cli("lint", str(path))
    assert "GP202 [warning]" in out and "GP505" not in out and code == 0
    (tmp_path / ".gpuplan.yaml").write_text("severity: {low-headroom: error}\nthresholds: {headroom_pct: 50}\n")
    code, out, _ = run_cli("lint", str(path))
    assert "GP202 [error]" in out and code == 1


def test_config_unknown_keys_are_errors_with_positions(tmp_path: Path):
    config = tmp_path / "pyproject.toml"
    config.write_text('[project]\nname = "x"\n\n[tool.gpuplan]\nselekt = ["GP2"]\n')
    path = tmp_path / "a.yaml"
    path.write_text(spec({"context": 8192, "concurrency": 8, "hardware": {"gpu": "l40s"}}))
    code, _, err = run_cli("lint", "--config", str(config), str(path))
    assert code == 2
    assert f"{config}:5:1: unknown key 'selekt' in the top level — did you mean 'select'?" in err


def test_config_rule_names_are_checked_against_the_code_table(tmp_path: Path):
    """A misspelt code in select/ignore/severity would silently select nothing; it is an error at its line."""
    config = tmp_path / ".gpuplan.yaml"
    config.write_text(
        "select: [GP2]\nignore: [GP5O5, oversized-serving-gpu]\nseverity: {low-headroom: error, GP9: info}\n"
    )
    path = tmp_path / "a.yaml"
    path.write_text(spec({"context": 8192, "concurrency": 8, "hardware": {"gpu": "l40s"}}))
    code, out, err = run_cli("lint", str(path))
    # The spec is not checked under a configuration that is wrong: GP012 on the spec, exit 2.
    assert (code, err) == (2, "")
    assert out.startswith(f"{path}:1:1: GP012 [error] not checked: its configuration {config} is invalid: ")
    assert f"{config}:2:10: ignore: unknown rule 'GP5O5'; did you mean GP505" in out
    assert f"{config}:3:33: severity: unknown rule 'GP9'" in out
    assert "GP2'" not in out and "oversized-serving-gpu" not in out and "low-headroom" not in out
    code, _, err = run_cli("lint", "--config", str(config), str(path))  # named explicitly: a usage error
    assert code == 2 and err.startswith("gpuplan: error: invalid configuration:\n")
    assert f"  {config}:2:10: ignore: unknown rule 'GP5O5'; did you mean GP505" in err
    # One problem (an unreadable file) is one line on stderr, as every other usage error.
    code, _, err = run_cli("lint", "--config", str(tmp_path / "missing.yaml"), str(path))
    assert (code, err) == (
        2,
        f"gpuplan: error: invalid configuration: {tmp_path / 'missing.yaml'}: cannot read it: no such file\n",
    )


def test_waivers_are_reported_and_can_be_ignored():
    path = EXAMPLES / "findings" / "waivers.yaml"
    code, out, _ = run_cli("lint", "--format", "json", str(path))
    findings = json.loads(out)["findings"]
    waived = [f for f in findings if f["waived"]]
    assert [f["code"] for f in waived] == ["GP302"]
    assert waived[0]["waiver"]["approved_by"] == "platform-lead"
    code, out, _ = run_cli("lint", "--no-waivers", "--format", "json", str(path))
    assert code == 0  # GP302 unwaived is a warning; the default fail level is error
    codes = sorted(f["code"] for f in json.loads(out)["findings"])
    assert codes == ["GP302", "GP504", "GP505", "GP507"] and not any(f["waived"] for f in json.loads(out)["findings"])


def test_an_expired_waiver_says_whether_its_finding_applies_again():
    # waivers.yaml: the expired waiver of GP311 matches no finding (the spec draws no GP311); expired on GP302,
    # which fires, the finding applies again.
    text = (EXAMPLES / "findings" / "waivers.yaml").read_text()
    messages = {
        f.message for f in lint_bytes("w.yaml", text.encode(), LintOptions(today=datetime.date(2026, 12, 6))).findings
    }
    assert "the waiver of GP311 expired on 2026-01-31; it matches no finding in this spec now" in messages
    again = text.replace("approved_by: platform-lead}", "approved_by: platform-lead, expires: 2026-02-01}", 1)
    messages = {
        f.message for f in lint_bytes("w.yaml", again.encode(), LintOptions(today=datetime.date(2026, 12, 6))).findings
    }
    assert "the waiver of GP302 expired on 2026-02-01; its finding applies again" in messages


def test_sarif_marks_waived_findings_as_suppressed():
    code, out, _ = run_cli("lint", "--format", "sarif", str(EXAMPLES / "findings" / "waivers.yaml"))
    assert code == 0
    results = json.loads(out)["runs"][0]["results"]
    suppressed = [r for r in results if r.get("suppressions")]
    assert [r["ruleId"] for r in suppressed] == ["GP302"]


FIT_CODES = {"GP201", "GP203", "GP301"}
GPUS = ["l4", "a10g", "l40s", "a100-pcie-40gb", "h100-pcie", "h100-sxm", "h100-nvl", "h200-sxm", "b200-hgx"]


@given(
    st.sampled_from(["llama-3.2-1b", "llama-3.1-8b", "qwen2.5-14b", "llama-3.1-70b"]),
    st.integers(512, 65536),
    st.integers(1, 128),
    st.sampled_from(GPUS),
    st.sampled_from(["auto", "fp8"]),
)
def test_fit_findings_agree_with_the_estimate_and_bigger_gpus_never_add_them(model, context, concurrency, gpu, kv):
    serve = {"context": context, "concurrency": concurrency, "kv_cache_dtype": kv, "hardware": {"gpu": gpu}}
    result = lint_bytes("s.yaml", spec(serve, model=model).encode(), LintOptions(today=TODAY))
    fit_errors = {f.code for f in result.findings} & FIT_CODES
    assert bool(fit_errors) == (not result.analysis.serve.fits)
    usable = result.analysis.serve.gpu.usable_bytes
    for bigger in GPUS:
        other = lint_bytes(
            "s.yaml", spec({**serve, "hardware": {"gpu": bigger}}, model=model).encode(), LintOptions(today=TODAY)
        )
        if other.analysis.serve.gpu.usable_bytes >= usable and not fit_errors:
            assert not ({f.code for f in other.findings} & FIT_CODES)


@given(st.integers(1, 10**9), st.integers(0, 100_000), st.integers(1, 10**7))
def test_raising_the_budget_never_adds_budget_errors(tokens, monthly, extra):
    finetune = {"method": "lora", "tokens": tokens, "hardware": {"gpu": "h100-sxm"}}
    serve = {"context": 8192, "concurrency": 8, "hardware": {"gpu": "l40s"}}
    low = {"finetune_total": monthly, "serve_monthly": monthly}
    high = {"finetune_total": monthly + extra, "serve_monthly": monthly + extra}
    codes_low = {f.code for f in lint_text(spec(serve, finetune, budget=low))}
    codes_high = {f.code for f in lint_text(spec(serve, finetune, budget=high))}
    assert codes_high & {"GP501", "GP502"} <= codes_low & {"GP501", "GP502"}


def test_settings_feed_the_estimate():
    text = spec({"context": 8192, "concurrency": 8, "slo": {"ttft_ms": 1000}, "hardware": {"gpu": "l40s"}})
    fast = {f.code for f in lint_text(text, settings=Settings.from_thresholds({"prefill_mfu": 1.0}))}
    slow = {f.code for f in lint_text(text, settings=Settings.from_thresholds({"prefill_mfu": 0.05}))}
    assert "GP403" in slow and "GP403" not in fast


def test_stale_price_judges_a_median_by_the_quotes_it_is_and_reports_undated_overrides():
    serve = {"context": 8192, "concurrency": 8, "hardware": {"gpu": "h100-sxm"}}
    # The catalog's h100-sxm price is the median of 8 quotes (gpu_sources.yaml): by price 2.69, 3.49, 3.85,
    # 3.95 (Modal, 2026-05-07), 4.29 (Lambda, 2026-09-25), 6.155, 6.88, 12.29; the median 4.12 is the mean
    # of the middle two, so it is as old as the older of them: 209 days on TODAY (2026-12-02).
    (stale,) = [f for f in lint_text(spec(serve)) if f.code == "GP504"]
    assert stale.message == (
        "the h100-sxm price (4.12/GPU-hour, the median of 8 quotes, set by Modal (serverless, per-second) on "
        "2026-05-07 and Lambda (1x H100 SXM) on 2026-09-25) rests on a quote 209 days old (limit 90)"
    )
    # The L4's three quotes: RunPod 0.44 (2025-04-09), Modal 0.7992 (2026-05-07), AWS 0.8048 (undated). The
    # median is Modal's quote, 209 days old; the oldest quote, 602 days, is far from it and dates nothing.
    l4 = {**serve, "hardware": {"gpu": "l4"}}
    (stale,) = [f for f in lint_text(spec(l4)) if f.code == "GP504"]
    assert stale.message.endswith("set by Modal (serverless) on 2026-05-07) rests on a quote 209 days old (limit 90)")
    assert stale.pointer == "/serve/hardware/gpu"
    undated = spec(serve, budget={"prices": {"h100-sxm": 2.5}})
    (finding,) = [f for f in lint_text(undated) if f.code == "GP504"]
    assert finding.pointer == "/budget/prices/h100-sxm"
    assert finding.message == "the h100-sxm price (2.50/GPU-hour) is undated: its age cannot be checked"
    dated = spec(serve, budget={"prices": {"h100-sxm": 2.5}, "prices_date": "2026-09-03"})  # 90 days: not stale
    assert [f.code for f in lint_text(dated) if f.code == "GP504"] == []
    older = spec(serve, budget={"prices": {"h100-sxm": 2.5}, "prices_date": "2026-09-02"})  # 91 days
    (finding,) = [f for f in lint_text(older) if f.code == "GP504"]
    assert "quoted 2026-09-02) rests on a quote 91 days old" in finding.message


def test_the_long_context_category_starts_at_its_threshold():
    # Prompts of context - output_tokens tokens: 8,192 (the default threshold) is long-context, 8,191 is
    # not (and 4 sequences are below the 32 of high-throughput): GP401 reports a declared category that
    # differs, naming the derived one.
    def derived(context: int) -> str:
        serve = {"context": context, "output_tokens": 256, "concurrency": 4, "category": "high-throughput"}
        (finding,) = lint_text(spec({**serve, "hardware": {"gpu": "h200-sxm"}}), select=("GP401",))
        return finding.message

    assert derived(8192 + 256) == (
        "declared category high-throughput, but the workload is long-context: 8,192-token prompts; "
        "long-context from 8,192"
    )
    assert derived(8191 + 256) == (
        "declared category high-throughput, but the workload is short-fast: 8,191-token prompts and 4 "
        "sequences in flight; below 8,192 tokens and 32 sequences"
    )


def test_a_two_gpu_answer_is_parallelism_needed_not_does_not_fit():
    # Qwen2.5-14B's bf16 weights (14.8B parameters x 2 B, about 27.5 GiB) exceed one L4's engine budget
    # (19.8 GiB) but not two: the fewest L4s that hold it are 2, so it is GP301 (more of the same GPU),
    # and GP201 stays silent for a single-GPU layout that two GPUs fix.
    findings = lint_text(spec({"context": 4096, "concurrency": 4, "hardware": {"gpu": "l4"}}, model="qwen2.5-14b"))
    fit = [f for f in findings if f.code in ("GP201", "GP203", "GP301")]
    assert [f.code for f in fit] == ["GP301"]
    assert "on one l4 (engine budget 19.8 GiB)" in fit[0].message and ": 2 x l4, " in fit[0].message


def test_ttft_slo_message_names_the_prompt_the_load_and_the_idle_figure():
    # 8 sequences of 32,768-token contexts on one l40s with a TTFT SLO of 1 ms: missed by any GPU. The
    # prompt is the context less the 256 output tokens (32,768 - 256 = 32,512); "alone" is the TTFT of
    # one request on an idle replica, in ms (the speed model's figures, pinned in test_speed.py): about
    # 5 s here, so a wrong scale shows even in its third digit.
    text = spec(
        {"context": 32768, "output_tokens": 256, "concurrency": 8, "slo": {"ttft_ms": 1}, "hardware": {"gpu": "l40s"}}
    )
    result = lint_bytes("spec.yaml", text.encode(), LintOptions(today=TODAY, select=("GP403",)))
    (finding,) = result.findings
    speed = result.analysis.serve.speed
    assert 1 < speed.ttft_single_s < speed.ttft_s
    assert finding.pointer == "/serve/slo/ttft_ms"
    # Each figure is rounded from the one `estimate --format json` publishes (ttft_single_ms 5,109.5 reads
    # 5,110, not the 5,109 of the unrounded 5,109.45...).
    # The SLO bounds the p90 by default (serve.slo.ttft_statistic), and the message names it.
    assert finding.message == (
        f"estimated p90 TTFT {format_ms(speed.ttft_p90_s, 0)} ms for a prompt of 32,512 tokens at 8 in flight on l40s "
        f"(TP 1; alone {format_ms(speed.ttft_single_s, 0)} ms) exceeds the SLO of 1 ms"
    )
    assert finding.hint == "more TP, a faster GPU, or shorter prompts"


# -- GP2: fit -------------------------------------------------------------------------------------------
# A rule compares an estimate (pinned in test_finetune_settings.py and test_vllm_memory.py) with a
# threshold. These tests take the estimate as the input and move the threshold to either side of it, so
# that a flipped comparison, a lost factor of 100 or a changed share fails them; messages are compared
# whole.
TWO_JOBS = {
    "version": 1,
    "name": "t",
    "model": {"id": "llama-3.1-8b"},
    "finetune": {"method": "lora", "seq_len": 2048, "hardware": {"gpu": "h100-sxm"}},
    "serve": {"context": 8192, "concurrency": 8, "hardware": {"gpu": "h100-sxm"}},
}


def lint_at(select: tuple[str, ...], document: dict = TWO_JOBS, **thresholds):
    """The rules ``select`` on ``document`` under the default thresholds with ``thresholds`` changed."""
    first = lint(yaml.safe_dump(document), select=select)
    settings = dataclasses.replace(first.settings, **thresholds) if thresholds else first.settings
    return lint(yaml.safe_dump(document), select=select, settings=settings)


def test_low_headroom_at_the_margin():
    analysis = lint_at(("GP202",)).analysis
    f, s = analysis.finetune, analysis.serve
    # Fine-tuning is judged at its pessimistic edge: the LoRA estimate (about 39.7 GiB) times the 0.9 ratio
    # of the 21 LoRA runs (about 1.33), about 53 GiB of 79.2: about 33% free.
    ratio = shipped("lora", 0.9)
    planned = math.ceil(f.memory.per_gpu * ratio)
    train_free = (f.gpu.usable_bytes - planned) / f.gpu.usable_bytes
    # Serving is judged at the KV cache's low edge: the pool may come short by pool - floor(pool x r), r the
    # ceil(0.1 x n)-th smallest of the n shipped serving ratios; the per-GPU figure grows by that much (about
    # 0.53 free).
    pool = s.memory.kv_available
    serve_planned = s.memory.per_gpu + pool - math.floor(pool * kv_low_ratio(0.9))
    serve_free = (s.memory.budget - serve_planned) / s.memory.budget
    assert lint_at(("GP202",)).findings == ()  # the 10% default margin
    # A margin just above the fine-tuning job's free share (in per cent) reports it, not the serving job.
    (finding,) = lint_at(("GP202",), headroom_pct=train_free * 100 * 1.001).findings
    assert finding.pointer == "/finetune/hardware/gpu"
    assert finding.message == (
        # the free memory as the difference of the two figures the report shows (usable, planned), each at 0.1 GiB
        f"fine-tuning leaves {format_gib_difference(f.gpu.usable_bytes, planned)} of {format_gib(f.gpu.usable_bytes)}"
        " free on h100-sxm "
        f"({format_share_under(train_free, train_free * 1.001)}, margin {train_free * 100.1:g}%) at 90% confidence "
        f"({format_gib(f.memory.per_gpu)} "
        f"estimated x {ratio:.2f}, the ratio measured / estimate that 90% of 21 published LoRA runs not used to "
        "tune the model stayed within)"
    )
    assert finding.hint == "activation checkpointing, a fused loss or shorter sequences buy headroom"
    # Just above the serving job's share reports both; just below it, only fine-tuning.
    both = lint_at(("GP202",), headroom_pct=serve_free * 100 * 1.001).findings
    assert [x.pointer for x in both] == ["/finetune/hardware/gpu", "/serve/concurrency"]
    assert both[1].message == (
        f"serving leaves {format_gib_difference(s.memory.budget, serve_planned)} of the {format_gib(s.memory.budget)} "
        f"engine budget free on h100-sxm ({format_share_under(serve_free, serve_free * 1.001)}, margin "
        f"{serve_free * 100.1:g}%) at 90% confidence "
        f"(the engine's KV cache {format_gib(pool)} estimated x {kv_low_ratio(0.9):.2f}, the ratio measured / "
        f"estimate that 90% of {SERVING_LOGS} published engine startup logs not used to tune the model stayed at or "
        "above)"
    )
    assert both[1].hint == "an fp8 KV cache halves the cache; or lower concurrency or context"
    assert len(lint_at(("GP202",), headroom_pct=serve_free * 100 * 0.999).findings) == 1


def test_activations_share_at_the_threshold():
    # Peak phase of the LoRA job: backward, activations + temporaries over the per-GPU peak that the estimate
    # and GP201 state (framework overhead included; about 60%).
    f = lint_at(("GP205",)).analysis.finetune
    phase = f.memory.phases[f.memory.peak_phase]
    share = (phase["activations"] + phase["temporaries"]) / f.memory.per_gpu
    assert lint_at(("GP205",), activations_share=share).findings == ()  # at the threshold: not above it
    # Between the share of the whole peak and the share of the tensors alone (without the 1 GiB overhead):
    # silent, so the share is of the peak the reader sees.
    tensor_share = (phase["activations"] + phase["temporaries"]) / f.memory.allocated
    assert lint_at(("GP205",), activations_share=(share + tensor_share) / 2).findings == ()
    (finding,) = lint_at(("GP205",), activations_share=share * 0.999).findings
    assert finding.pointer == "/finetune/seq_len"
    assert finding.message == (
        f"activations and loss temporaries are {share:.0%} of the {format_gib(f.memory.per_gpu)} peak per GPU"
    )
    assert finding.hint == (
        "try activation_checkpointing: full, fused_loss: true, a shorter seq_len than 2,048 or a smaller micro_batch"
    )
    # Switches already on are not suggested again.
    document = {**TWO_JOBS, "finetune": {**TWO_JOBS["finetune"], "activation_checkpointing": True, "fused_loss": True}}
    hints = [x.hint for x in lint_at(("GP205",), document, activations_share=0.0).findings]
    assert hints == ["try a shorter seq_len than 2,048 or a smaller micro_batch"]


def test_full_fine_tune_that_fits_as_an_adapter():
    # Full fine-tuning of the 8B on 8 H100s: LoRA of the same shape fits one H100; one finding, LoRA's.
    document = {
        "version": 1,
        "name": "t",
        "model": {"id": "llama-3.1-8b"},
        "finetune": {
            "method": "full",
            "seq_len": 2048,
            "sharding": "zero3",
            "hardware": {"gpu": "h100-sxm", "count": 8},
        },
    }
    (finding,) = lint_at(("GP204",), document).findings
    assert finding.pointer == "/finetune/method"
    assert finding.hint == "consider method: lora if adapter quality suffices"
    assert (
        finding.message.startswith("full fine-tuning needs ")
        and " per GPU on 8 x h100-sxm; lora (rank 16) needs " in finding.message
    )
    assert finding.message.endswith(" on 1 x h100-sxm")
    # A LoRA job, or a full one that fits its single GPU, is not reported.
    assert lint_at(("GP204",)).findings == ()
    small = {
        **document,
        "model": {"id": "llama-3.2-1b"},
        "finetune": {"method": "full", "seq_len": 512, "hardware": {"gpu": "h100-sxm"}},
    }
    assert lint_at(("GP204",), small).findings == ()


def test_kv_capacity_message():
    # Weights fit but 64 sequences of 131,072 tokens do not: the message names what is left and what fits.
    document = {**TWO_JOBS, "serve": {"context": 131072, "concurrency": 64, "hardware": {"gpu": "h100-sxm"}}}
    result = lint_at(("GP203",), document)
    (finding,) = result.findings
    s = result.analysis.serve
    assert finding.pointer == "/serve/concurrency"
    assert finding.message == (
        f"64 x 131,072 tokens need {format_gib(s.memory.kv_cache)} of KV cache per GPU; "
        f"{format_gib(s.memory.kv_available)} is left after weights and runtime on h100-sxm — at most "
        f"{s.max_concurrency} sequences at 131,072 tokens, or {s.max_context:,} tokens at 64"
    )
    assert s.max_concurrency == 3  # the plural the message words: 3 sequences
    assert lint_at(("GP203",)).findings == ()  # 8 x 8,192 fits


def test_does_not_fit_messages_name_the_peak_the_shortfall_and_the_hint():
    # Full fine-tuning of Llama-3.1-70B on 2 x h100-sxm (TP 2): about 16 B per parameter of weights,
    # gradients and Adam states over two ranks (70.6e9 x 16 / 2 = 564 GB = 526 GiB) plus activations,
    # peaking at the optimizer step: far over 79.2 GiB. Serving it on 2 x l4 (TP 2): its 141 GB of
    # weights alone are over the two cards' engine budgets. The figures are the estimate's (pinned in
    # test_finetune_settings.py / test_vllm_memory.py); these pin how the messages use them.
    document = {
        **TWO_JOBS,
        "model": {"id": "llama-3.1-70b"},
        "finetune": {
            "method": "full",
            "seq_len": 2048,
            "hardware": {"gpu": "h100-sxm", "count": 2, "tensor_parallel": 2},
        },
        "serve": {"context": 8192, "concurrency": 8, "hardware": {"gpu": "l4", "count": 2, "tensor_parallel": 2}},
    }
    result = lint_at(("GP201",), document)
    f, s = result.analysis.finetune, result.analysis.serve
    finetune, serve = sorted(result.findings, key=lambda finding: finding.pointer)
    assert f.memory.peak_phase == "optimizer_step"  # the message spells it with a space
    assert finetune.pointer == "/finetune/hardware/gpu"
    assert finetune.message == (
        f"fine-tuning needs {format_gib(f.memory.per_gpu)} per GPU at the optimizer step peak; h100-sxm has "
        # the shortfall is the difference of the two figures as shown (units.format_gib_difference)
        f"79.2 GiB usable — short by {format_gib_difference(f.memory.per_gpu, f.gpu.usable_bytes)}"
    )
    assert finetune.hint.startswith("on h100-sxm: ") and "gpuplan plan compares every allowed GPU" in finetune.hint
    # Before any KV cache: the whole per-GPU figure less the KV cache the 8 sequences would need.
    assert s.memory.kv_cache > 0 and serve.pointer == "/serve/hardware/gpu"
    assert serve.message.startswith(
        f"serving needs {format_gib(s.memory.per_gpu - s.memory.kv_cache)} per GPU before any KV cache "
        f"(weights {format_gib(s.memory.weights)}); l4 gives the engine {format_gib(s.memory.budget)}"
    )
    # No layout of L4s holds it: the planner spreads a model over cards without NVLink by pipeline stages
    # alone (TP over PCIe draws GP312), and 8 stages leave each card 131.4 / 8 = 16.4 GiB of weights beside
    # 8 x 8,192 tokens of KV (20 GiB over the 8): past the margin of an L4's budget.
    assert serve.hint.startswith("no layout of l4 within 64 GPUs and 8 nodes holds it soundly")


def test_one_gpu_that_more_of_the_same_would_hold_is_gp301_not_gp201():
    # Full fine-tuning of Llama-3.1-8B on one h100-sxm: about 16 B per parameter (8.0e9 x 16 = 128 GB,
    # 150.6 GiB with activations) against 79.2 GiB usable; more h100-sxm with sharding hold it, so the
    # finding is GP301 (parallelism needed), and GP201 (a GPU too small at any count) stays silent.
    document = {**TWO_JOBS, "finetune": {"method": "full", "seq_len": 2048, "hardware": {"gpu": "h100-sxm"}}}
    document.pop("serve")
    assert [finding.code for finding in lint_at(("GP201", "GP301"), document).findings] == ["GP301"]


def test_four_gpus_as_tp2_by_pp2_are_not_one_gpu():
    # TP 2 x PP 2 is four GPUs, not one (although tp / pp is 1). Llama 3.1 405B in bf16 is
    # 405,853,388,800 x 2 B = 756 GiB, 189.0 GiB per GPU of four: the weights do not fit (GP201); GP301
    # ("one GPU cannot hold it") is for one GPU only.
    found = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-405b}
        serve:
          context: 8192
          concurrency: 8
          hardware: {gpu: h100-sxm, count: 4, tensor_parallel: 2, pipeline_parallel: 2}
        """,
        "GP201",
        "GP301",
    )
    assert [f.code for f in found] == ["GP201"]
    assert "(weights 189.0 GiB)" in found[0].message


# -- GP3: parallelism and form factor ---------------------------------------------------------------------
SHARDED_LORA = """\
version: 1
name: t
model: {id: llama-3.2-1b}
finetune:
  method: lora
  seq_len: 2048
  sharding: %s
  hardware:
    gpu: h100-sxm
    count: 2
    tensor_parallel: %d
"""


def lint_sharded(sharding: str, tensor_parallel: int):
    return lint(SHARDED_LORA % (sharding, tensor_parallel), select=("GP302",)).findings


def test_unneeded_sharding_points_at_sharding():
    # A 1B LoRA job fits one H100 many times over: ZeRO-3 over 2 GPUs only adds traffic.
    (finding,) = lint_sharded("zero3", 1)
    assert finding.pointer == "/finetune/sharding"
    assert (finding.line, finding.col) == (7, 13)  # the value on the key's line
    assert finding.message.startswith("sharding zero3 is not needed: plain data parallelism on 2 x h100-sxm needs ")
    assert finding.hint == "drop it; it only adds communication"


def test_unneeded_sharding_on_one_gpu_names_what_deepspeed_adds_there():
    # ZeRO-2 on one H100: nothing to shard, but DeepSpeed's optimizer runs all the same (runs_deepspeed_zero), so
    # the declared figure carries its gradient bucket (500,000,000 elements x 2 B, 0.93 GiB) and the step's flat
    # copies, which plain training does not: the hint says how much more the declared layout needs. Here both
    # live peaks are backward's start, the declared one the bucket's 1,000,000,000 bytes more; the device figures
    # differ by that less the cache plain training's kept adapter gradients leave (small-pool blocks DeepSpeed
    # frees as it copies them into the bucket).
    text = SHARDED_LORA.replace("count: 2", "count: 1") % ("zero2", 1)
    result = lint(text, select=("GP302",))
    (finding,) = result.findings
    declared = result.analysis.finetune.memory.per_gpu
    plain = float(finding.message.split(" needs ")[1].split(" GiB")[0]) * 2**30
    assert finding.message.startswith("sharding zero2 is not needed: plain training on 1 x h100-sxm needs ")
    assert finding.hint.startswith("drop it: one GPU shards nothing, and DeepSpeed's ZeRO optimizer adds ")
    added = float(finding.hint.split(" adds ")[1].split(" GiB")[0])
    plain_memory = lint(text.replace("sharding: zero2", "sharding: none")).analysis.finetune.memory
    assert result.analysis.finetune.memory.allocated - plain_memory.allocated == 1_000_000_000
    assert added >= 0.8
    assert abs(added * 2**30 - (declared - plain)) <= 0.06 * 2**30  # both printed to a tenth


def test_a_sharding_an_offload_rests_on_is_not_called_needless():
    # DeepSpeed and FSDP offload through their sharded optimizers (the Trainer has no optimizer offload without
    # them), so ZeRO-2 with its optimizer on the host, one GPU, draws no GP302; and ZeRO-1/2 offload no
    # parameters on any number of GPUs (DeepSpeed reads offload_param at stage 3 alone): GP025, on one GPU too.
    text = SHARDED_LORA.replace("count: 2", "count: 1") % ("zero2", 1)
    offloaded = text.replace("  sharding: zero2\n", "  sharding: zero2\n  offload: {optimizer: cpu}\n")
    assert offloaded != text
    assert not lint(offloaded, select=("GP302",)).findings
    parameters = text.replace("  sharding: zero2\n", "  sharding: zero2\n  offload: {parameters: cpu}\n")
    (conflict,) = lint(parameters, select=("GP025",)).findings
    assert "offloading parameters needs them sharded (ZeRO-3 or FSDP); sharding is zero2" in conflict.message


SHARDED_FULL = """\
version: 1
name: t
model: {architecture: {layers: 48, hidden: 4096, heads: 32, kv_heads: 8, intermediate: 12288, vocab: 32000}}
finetune:
  method: full
  precision: bf16
  optimizer: adafactor
  micro_batch: 1
  seq_len: 2048
  activation_checkpointing: true
  tokens: 100000000
  sharding: %s
  hardware: {gpu: h200-sxm, count: 8}
"""


def test_a_sharding_that_speeds_the_run_is_not_needless():
    # A 10B full fine-tune on 8 H200s: plain data parallelism fits (58.3 GiB), but every rank then runs the whole
    # optimizer step, which FSDP shards eight ways: the sharded run is the faster (40,329 against 37,899 tokens/s),
    # so GP302 ("drop it; it only adds communication") would cost 6%. The planner judges it so (its paste keeps
    # FSDP), and GP302 is its judgement (FinetunePlanner.unsharded): silent. Judged on memory alone, it fired.
    fsdp = lint(SHARDED_FULL % "fsdp")
    plain = lint(SHARDED_FULL % "none")
    assert plain.analysis.finetune.speed.tokens_per_s < fsdp.analysis.finetune.speed.tokens_per_s * 0.995
    assert [f.code for f in fsdp.findings if f.code == "GP302"] == []


def test_a_kept_layout_drops_the_sharding_it_does_not_need(tmp_path):
    # ZeRO-3 on one A100 shards nothing and runs no faster: the plan keeps the declared layout (no cheaper one is
    # material) without the sharding, and the paste says so; pasted, GP302 is gone (it stayed, the plan having
    # recommended the declared layout as it was).
    spec = tmp_path / "z3.yaml"
    text = (
        "version: 1\nname: t\nmodel: {id: falcon-7b}\nfinetune: {method: lora, precision: bf16, optimizer: adamw-8bit,"
        " seq_len: 2048, activation_checkpointing: full, tokens: 20000000, sharding: %s,"
        " hardware: {gpu: a100-sxm-40gb, count: 1}}\n"
    )
    spec.write_text(text % "zero3")
    assert [f.code for f in lint(spec.read_text()).findings if f.code == "GP302"] == ["GP302"]
    _, out, _ = run_cli("plan", str(spec))
    assert "recommended  1 x a100-sxm-40gb" in out and "without a sharding it does not need (GP302)" in out
    _, out, _ = run_cli("plan", "--format", "json", str(spec))
    (job,) = json.loads(out)["jobs"]
    assert job["recommended"]["changes"] == ["finetune.sharding"] and "sharding: none" in job["recommended"]["yaml"]
    spec.write_text(text % "none")
    assert [f.code for f in lint(spec.read_text()).findings if f.code in ("GP302", "GP507")] == []


def test_a_needless_sharding_dropped_at_a_tie_states_no_negative_saving():
    # A one-layer toy on 8 H100s under ZeRO-3: plain data parallelism holds it and runs 1e-6 of its time longer
    # (ZeRO-3 shards a step of almost nothing): a tie, so the plan keeps the declared layout without the sharding.
    # Its run then costs a millionth more: no saving, where plan --format json stated a share of -0.0000 (a
    # generated-spec property test found -0.0001 on a llava config.json).
    text = (
        "version: 1\nname: tiny\nmodel: {architecture: {layers: 1, hidden: 4, heads: 1, intermediate: 1, vocab: 1}}\n"
        "finetune: {method: full, optimizer: adamw-fused, seq_len: 4096, activation_checkpointing: true,"
        " fused_loss: true, sharding: zero3, tokens: 2000000000, hardware: {gpu: h100-sxm, count: 8}}\n"
    )
    result = lint(text)
    plan = planner_for(result.analysis.spec, default_settings()).plan("finetune")
    assert plan.recommended.changes == ("finetune.sharding",)
    assert 0 < plan.recommended.rate - plan.declared.rate < plan.declared.rate * 1e-5
    assert plan.saving is None


def test_unneeded_tensor_parallelism_points_at_tensor_parallel_and_names_the_planners_layout():
    # A 1B LoRA job at TP 2: the planner's fewest H100s that hold it are one GPU, unsplit (GP306, the planner's own
    # model_parallelism judgement); GP302 (sharding) has nothing to say of a job that shards nothing.
    text = SHARDED_LORA % ("none", 2)
    assert lint(text, select=("GP302",)).findings == ()
    result = lint(text, select=("GP306",))
    (finding,) = result.findings
    assert finding.pointer == "/finetune/hardware/tensor_parallel"
    assert (finding.line, finding.col) == (11, 22)  # the value of `tensor_parallel: 2`
    assert finding.message.startswith("tensor_parallel 2 is not needed: 1 x h100-sxm")
    assert "hardware: {gpu: h100-sxm, count: 1}" in finding.hint


def test_a_model_split_the_planner_calls_needless_is_a_change_the_approval_asks_for(tmp_path):
    # The declared 4 x PP 4 fits, yet two H100 NVL sharding with FSDP hold the job: `plan` marks the declared
    # layout `model_parallelism` and recommends its cheapest sound layout (two B200s), lint says the split is not
    # needed (GP306, naming the two H100 NVL), and the decision follows: APPROVE WITH CHANGES funding the plan's
    # layout, where it approved the split as declared (GP507 stays silent: the saving is below min_saving).
    spec = tmp_path / "split.yaml"
    spec.write_text((EXAMPLES / "findings" / "parallelism-model-split-not-needed.yaml").read_text())
    _, out, _ = run_cli("plan", "--format", "json", str(spec))
    (job,) = json.loads(out)["jobs"]
    assert job["declared"]["meets"]["model_parallelism"] is False
    assert (job["recommended"]["gpu"], job["recommended"]["gpus"]) == ("b200-hgx", 2)
    _, out, _ = run_cli("lint", "--format", "json", str(spec))
    (split,) = [f for f in json.loads(out)["findings"] if f["code"] == "GP306"]
    assert split["message"].startswith("pipeline_parallel 4 is not needed: 2 x h100-nvl, sharding fsdp")
    # FSDP over the declared one data-parallel rank shards nothing, yet GP302 stays silent: its "drop it" taken
    # first would leave GP306's two GPUs (which keep the declared sharding) without the FSDP they need
    assert "GP302" not in {f["code"] for f in json.loads(out)["findings"]}
    run_cli("report", str(spec), "-o", str(tmp_path / "r.md"))
    page = (tmp_path / "r.md").read_text()
    assert page.startswith("## APPROVE WITH CHANGES") and "on 2 x b200-hgx instead of 4 x h100-nvl" in page


def test_parallelism_needed_names_the_parallelism_of_the_layout_it_found():
    # The message names what the layout found uses: 70B serving on H100s tensor parallelism (4 x TP 4); on L40S,
    # without NVLink, pipeline parallelism (8 x PP 8: the planner keeps TP inside an NVLink domain); a 70B full
    # fine-tune on H100s both (32 x TP 8 x PP 4).
    (serve,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-70b}
        serve: {context: 8192, concurrency: 8, hardware: {gpu: h100-sxm, count: 1}}
        """,
        "GP301",
    )
    assert "; tensor parallelism is needed: " in serve.message
    (finetune,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-70b}
        finetune: {method: full, seq_len: 2048, hardware: {gpu: h100-sxm, count: 1}}
        """,
        "GP301",
    )
    assert "; tensor and pipeline parallelism are needed: 32 x h100-sxm, tensor_parallel 8, pipeline_parallel 4" in (
        finetune.message
    )
    (pipelined,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-70b}
        serve: {context: 8192, concurrency: 8, hardware: {gpu: l40s, count: 1}}
        """,
        "GP301",
    )
    assert "; pipeline parallelism is needed: 8 x l40s, pipeline_parallel 8 fits" in pipelined.message
    # ... and each at its own job's hardware, named as the job it is.
    assert (serve.pointer, finetune.pointer) == ("/serve/hardware", "/finetune/hardware")
    assert serve.message.startswith("serving needs ") and finetune.message.startswith("fine-tuning needs ")
    assert "(79.2 GiB usable)" in finetune.message  # the catalog's usable bytes of h100-sxm, not the engine budget


def test_pipeline_only_parallelism_not_needed_names_the_stages_not_all_reduces():
    # Two stages are already a pipeline to name. Llama 3.1 8B at 8 x 8K fits one H100 (25.0 GiB); the
    # declared PP 2 has no all-reduces (TP 1): each token passes the two stages in turn, and the advice
    # is to drop pipeline_parallel, not tensor_parallel.
    (finding,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-8b}
        serve: {context: 8192, concurrency: 8, hardware: {gpu: h100-sxm, count: 2, pipeline_parallel: 2}}
        """,
        "GP302",
    )
    assert finding.pointer == "/serve/hardware/pipeline_parallel"
    assert finding.message.endswith(
        " ms with tensor_parallel 1 x pipeline_parallel 2 (every token passes 2 pipeline stages in turn)"
    )
    assert finding.hint.startswith("use pipeline_parallel: 1 and count for replicas: paste serve: {concurrency: 4, ")


# examples/findings/form-factor-pcie-tp.yaml: TP 2 over PCIe, where one A100 PCIe 80GB holds it.
GEMMA_ON_TWO_L40S = """
version: 1
name: t
model: {id: gemma-2-27b}
serve:
  context: 4096
  concurrency: 4
  kv_cache_dtype: fp8
  hardware: {gpu: l40s, count: 2, tensor_parallel: 2}
"""


def test_nvl_and_pcie_cards_are_the_siblings_of_an_sxm_module():
    # The catalog's H200 has an NVL card; its H100 both an NVL and a PCIe card.
    catalog = gpu_catalog()
    assert _siblings(catalog["h200-sxm"]) == ["h200-nvl"]
    assert sorted(_siblings(catalog["h100-sxm"])) == ["h100-nvl", "h100-pcie"]


def test_pcie_tensor_parallel_message_counts_the_all_reduces():
    # Gemma-2-27B has 46 layers: two all-reduces each (attention and MLP outputs) = 92 per output token.
    (finding,) = findings(
        GEMMA_ON_TWO_L40S,
        "GP312",
    )
    assert finding.message.startswith("tensor_parallel 2 on l40s (PCIe only) puts 92 all-reduces over PCIe")
    assert "on every output token (TPOT estimate " in finding.message


def test_a_larger_gpu_instead_of_tp_gives_the_layout_to_paste():
    # The same deployment fits one A100 PCIe 80GB: the hint is the layout to paste.
    (finding,) = findings(
        GEMMA_ON_TWO_L40S,
        "GP305",
    )
    assert finding.hint == "paste serve: {hardware: {gpu: a100-pcie-80gb, count: 1}}"


# -- GP4: service levels ----------------------------------------------------------------------------------


# -- GP5: budget ------------------------------------------------------------------------------------------
def lint_budget(budget: dict, select: tuple[str, ...], serve_gpu: str = "h100-sxm", finetune: bool = False):
    document: dict = {
        "version": 1,
        "name": "t",
        "model": {"id": "llama-3.1-8b"},
        "serve": {"context": 8192, "concurrency": 8, "hardware": {"gpu": serve_gpu, "count": 2}},
        "budget": budget,
    }
    if finetune:
        document["finetune"] = {
            "method": "lora",
            "seq_len": 2048,
            "tokens": 100_000_000,
            "hardware": {"gpu": "h100-sxm"},
        }
    return lint(yaml.safe_dump(document), select=select)


PRICED = {"currency": "USD", "prices": {"h100-sxm": 2.0}, "prices_date": "2026-11-30"}


def test_serving_over_budget():
    # 2 replicas x 1 H100 at 2.00 per GPU-hour x 730 hours a month = 2,920 USD.
    (finding,) = lint_budget({**PRICED, "serve_monthly": 2000}, ("GP502",)).findings
    assert finding.pointer == "/budget/serve_monthly"
    assert finding.message == (
        "serving costs 2,920 USD a month (2 x h100-sxm at 2.00/GPU-hour x 730 h) — over the budget of 2,000 USD by "
        "920 USD"
    )
    assert lint_budget({**PRICED, "serve_monthly": 2920}, ("GP502",)).findings == ()  # at the budget: not over it
    assert lint_budget(PRICED, ("GP502",)).findings == ()  # no budget declared


def test_finetune_over_budget():
    result = lint_budget({**PRICED, "finetune_total": 1}, ("GP501",), finetune=True)
    (finding,) = result.findings
    f = result.analysis.finetune
    # Cost = hours x 1 GPU x 2.00: the figures come from the speed model (pinned elsewhere).
    assert f.cost == f.speed.hours * 1 * 2.0
    assert finding.pointer == "/budget/finetune_total"
    # Amounts under 100 are shown to the cent, and the overrun is the difference of the amounts shown:
    # 8.70 - 1.00 = 7.70 (the old message said "about 4 USD ... over the budget of 1 by 3").
    assert round(f.cost, 2) == 8.70
    assert finding.message == (
        "fine-tuning costs about 8.70 USD (4.4 h x 1 x h100-sxm at 2.00/GPU-hour) "
        "— over the budget of 1.00 USD by 7.70 USD"
    )
    assert lint_budget({**PRICED, "finetune_total": f.cost}, ("GP501",), finetune=True).findings == ()


def test_missing_and_stale_prices():
    # An unknown currency leaves the catalog GPU unpriced: both jobs' GPUs are reported.
    unpriced = lint_budget({"currency": "XTS"}, ("GP503",), finetune=True).findings
    assert [(x.pointer, x.message) for x in unpriced] == [
        ("/finetune/hardware/gpu", "no price per GPU-hour for h100-sxm in XTS: cost and budget are unchecked"),
        ("/serve/hardware/gpu", "no price per GPU-hour for h100-sxm in XTS: cost and budget are unchecked"),
    ]
    assert unpriced[0].hint == "add budget.prices: {h100-sxm: <price>} with prices_date"
    # A declared price quoted 2026-09-03 is 90 days old on 2026-12-02: at the limit, not over it.
    assert lint_budget({**PRICED, "prices_date": "2026-09-03"}, ("GP504",)).findings == ()
    (stale,) = lint_budget({**PRICED, "prices_date": "2026-09-02"}, ("GP504",), finetune=True).findings
    assert stale.pointer == "/budget/prices_date"  # one finding for the GPU both jobs use
    assert (
        stale.message == "the h100-sxm price (2.00/GPU-hour, quoted 2026-09-02) rests on a quote 91 days old (limit 90)"
    )
    assert stale.hint == "refresh budget.prices with a current quote"
    (undated,) = lint_budget({"currency": "USD", "prices": {"h100-sxm": 2.0}}, ("GP504",)).findings
    assert undated.pointer == "/budget/prices/h100-sxm"
    assert undated.message == "the h100-sxm price (2.00/GPU-hour) is undated: its age cannot be checked"
    assert undated.hint == "add budget.prices_date: YYYY-MM-DD, the day the prices were quoted"


def test_a_run_without_tokens_saves_per_million_tokens():
    # A fine-tune with no finetune.tokens has no run cost, so GP507 compares $/1M tokens and says "per
    # 1M tokens".
    (finding,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-8b}
        finetune:
          method: lora
          seq_len: 4096
          micro_batch: 2
          activation_checkpointing: true
          hardware: {gpu: h100-sxm, count: 1}
        """,
        "GP507",
    )
    assert " USD per 1M tokens (" in finding.message


def test_a_cheaper_layout_names_the_constraints_of_its_job():
    # A serving layout meets the SLO where one is declared (here none: memory and headroom), a fine-tuning
    # one "gradient sync" (a run of 10B tokens, so that the saving is material: at least 100 USD; with full
    # checkpointing, so that the declared layout is sound at the memory band's edge).
    (serve,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-8b}
        serve: {context: 8192, concurrency: 4, hardware: {gpu: h100-sxm, count: 2, tensor_parallel: 2}}
        """,
        "GP507",
    )
    assert " meets memory and headroom for " in serve.message
    (with_slo,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-8b}
        serve: {context: 8192, concurrency: 4, slo: {tpot_ms: 200},
                hardware: {gpu: h100-sxm, count: 2, tensor_parallel: 2}}
        """,
        "GP507",
    )
    assert " meets memory, headroom and the SLO for " in with_slo.message
    (finetune,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-8b}
        finetune: {method: lora, seq_len: 4096, tokens: 10000000000, activation_checkpointing: full,
                   hardware: {gpu: h100-sxm, count: 1}}
        """,
        "GP507",
    )
    assert " meets memory, headroom and gradient sync for " in finetune.message


def test_right_sizing_costs_are_in_the_spec_currency():
    # The option's cost is in the spec's currency. Llama 3.2 1B at 4 x 4K uses 4% of an H200; one L4 at
    # 0.5 EUR/h is 0.5 x 730 = 365 EUR/month against 4.0 x 730 = 2,920: 2,555 EUR saved, 2,555 / 2,920 =
    # 87.5%, shown as 88%. No SLO is declared, so none is said to be met.
    (finding,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.2-1b}
        serve: {context: 4096, concurrency: 4, hardware: {gpu: h200-sxm}}
        budget: {currency: EUR, prices: {h200-sxm: 4.0, l4: 0.5}, prices_date: 2026-11-30}
        """,
        "GP505",
    )
    assert finding.message.endswith("(3.5 GiB of 19.8 GiB) for 365 EUR/month, saving about 2,555 EUR a month (88%)")


# -- GP6: storage -----------------------------------------------------------------------------------------
def lint_checkpoints(checkpoints: dict | None, tokens: int = 500_000_000, settings: Settings | None = None):
    finetune = {
        "method": "full",
        "precision": "bf16-mixed",
        "seq_len": 2048,
        "activation_checkpointing": True,
        "sharding": "zero3",
        "tokens": tokens,
        "hardware": {"gpu": "h100-sxm", "count": 8},
    }
    if checkpoints is not None:
        finetune["checkpoints"] = checkpoints
    text = yaml.safe_dump({"version": 1, "name": "t", "model": {"id": "llama-3.1-8b"}, "finetune": finetune})
    return lint(text, select=("GP601", "GP602"), settings=settings)


def test_checkpoint_storage_message():
    # Llama 3.1 8B: 8,030,261,248 parameters x (2 B bf16 weights + 4 B fp32 master + 2 x 4 B AdamW states)
    # = 14 B each: 112,423,657,472 B = 112.4 GB a checkpoint; three 337,270,972,416 B = 337.3 GB; with 10%
    # spare 371.0 GB.
    (finding,) = lint_checkpoints({"every_hours": 1, "keep": 3, "storage_gb": 200}).findings
    assert finding.code == "GP601" and finding.pointer == "/finetune/checkpoints/storage_gb"
    assert finding.message == "3 resumable checkpoints of 112.4 GB need 337.3 GB; 200 GB is declared"
    assert finding.hint == "storage_gb: 371 (10% spare), or keep fewer"


def test_checkpoint_storage_keeps_one_by_default():
    # No keep: one checkpoint, 112.4 GB, over 100 GB; 112.4 x 1.1 = 123.7 -> 124.
    (finding,) = lint_checkpoints({"every_hours": 1, "storage_gb": 100}).findings
    assert finding.message == "1 resumable checkpoints of 112.4 GB need 112.4 GB; 100 GB is declared"
    assert finding.hint == "storage_gb: 124 (10% spare), or keep fewer"
    assert lint_checkpoints({"every_hours": 1, "storage_gb": 113}).findings == ()  # 112.4 GB fits in 113
    assert lint_checkpoints({"every_hours": 1}).findings == ()  # no storage declared: nothing to compare


def test_checkpoints_that_exactly_fill_the_storage_fit():
    # GP601 is for checkpoints over the storage, not at it. Llama 3.1 8B full bf16-mixed AdamW: 14 B a
    # parameter x 8,030,261,248 = 112,423,657,472 B, exactly 112.423657472 GB (a float that round-trips).
    exact = {"every_hours": 1, "keep": 1, "storage_gb": 112.423657472}
    assert lint_checkpoints(exact).findings == ()
    (finding,) = lint_checkpoints({**exact, "storage_gb": 112.423657471}).findings
    assert finding.message.startswith("1 resumable checkpoints of 112.4 GB need 112.4 GB")


def test_long_run_without_checkpoints_at_the_threshold():
    result = lint_checkpoints(None)
    hours = result.analysis.finetune.speed.hours
    settings = result.settings
    # Just under the run's hours: reported, with the hours rounded and the layout named.
    (finding,) = lint_checkpoints(None, settings=dataclasses.replace(settings, long_run_hours=hours * 0.999)).findings
    assert finding.code == "GP602" and finding.pointer == "/finetune/tokens"
    assert finding.message == f"the run takes about {hours:,.0f} hours on 8 x h100-sxm with no checkpoints declared"
    assert finding.hint == "add checkpoints: {every_hours: ..., keep: ..., storage_gb: ...}"
    # Exactly at the threshold (not above it) and with checkpoints declared: nothing.
    assert lint_checkpoints(None, settings=dataclasses.replace(settings, long_run_hours=hours)).findings == ()
    assert (
        lint_checkpoints(
            {"every_hours": 1}, settings=dataclasses.replace(settings, long_run_hours=hours * 0.999)
        ).findings
        == ()
    )


def test_a_returned_kv_cache_under_recompute_is_gp211_at_use_cache():
    # Llama-2-7B (32 layers of 32 KV heads x 128), 4 x 2,048 tokens in bf16, full checkpointing: every
    # layer's K and V, 2 x 32 x 8,192 x 4,096 x 2 B = 4,294,967,296 B = 4.0 GiB per micro-batch.
    job = {
        "method": "lora",
        "precision": "bf16",
        "micro_batch": 4,
        "activation_checkpointing": "full",
        "use_cache": True,
        "hardware": {"gpu": "h100-sxm"},
    }
    text = spec(finetune=job, model="llama-2-7b")
    (finding,) = findings(text, "GP211")
    assert finding.pointer == "/finetune/use_cache" and finding.line == text.splitlines().index("  use_cache: true") + 1
    assert finding.message.startswith(
        "the model returns every layer's key and value states, 4.0 GiB per GPU and micro-batch that training"
        " never reads, held until the next step's forward returns (through backward and the optimizer step, and"
        " beside it); the peak is "
    )
    assert "use_cache=False" in finding.hint
    # Off, or without recompute on a multi-head model (attention saves those very tensors): nothing to say.
    assert not findings(spec(finetune={**job, "use_cache": False}, model="llama-2-7b"), "GP211")
    no_recompute = {**job, "activation_checkpointing": "none", "micro_batch": 1}
    assert not findings(spec(finetune=no_recompute, model="llama-2-7b"), "GP211")
    # The Trainer drops the outputs before backward: held to the end of the forward only.
    (trainer,) = findings(spec(finetune={**job, "loop": "trainer"}, model="llama-2-7b"), "GP211")
    assert "held to the end of the forward (released before backward, as the Trainer does);" in trainer.message


def test_what_sits_beside_the_budget_is_named_when_it_is_what_does_not_fit():
    # Gemma-3-27B over four H200 pipeline stages at vLLM 0.25 and utilization 0.97: the KV cache of 4 x 8,192
    # tokens fits the 135.70 GiB budget, but model runner V2's sampler state (vocabulary 262,208:
    # 4 x 4,096 x 262,208 + 2 x 4 x 4,096 x 8,194 = 4,564,516,864 B, 4.25 GiB) sits beside it: 139.95 GiB
    # against the 139.90 usable.
    serve = {
        "engine_version": "0.25.0",
        "context": 8192,
        "concurrency": 4,
        "max_sequences": 4096,
        "memory_utilization": 0.97,
        "hardware": {"gpu": "h200-sxm", "count": 4, "pipeline_parallel": 4},
    }
    (finding,) = findings(spec(serve=serve, model="gemma-3-27b"), "GP203")
    assert finding.message == (
        "the KV cache fits the engine's budget of 135.7 GiB, but with the 4.3 GiB of model runner V2's sampler"
        " state the engine holds beside it that is 140.0 GiB per GPU, more than the 139.9 GiB of h200-sxm: it"
        " runs out of memory as it starts"
    )
    assert finding.hint.startswith("lower serve.memory_utilization")


def test_a_pool_share_of_nothing_is_not_a_negative_shortfall():
    # TensorRT-LLM gives its KV pool free_gpu_memory_fraction of the memory left (serve.memory_utilization):
    # at 1e-15 of the ~21 GiB an L4 leaves beside Llama-3.2-1B, the pool is under one byte. The job's memory is
    # not short ("short by -x GiB" was printed): the pool's share of what is left is the reason.
    serve = {
        "engine": "trtllm",
        "memory_utilization": 1e-15,
        "context": 4096,
        "concurrency": 1,
        "hardware": {"gpu": "l4"},
    }
    (finding,) = findings(spec(serve=serve, model="llama-3.2-1b"), "GP201")
    assert "and its KV pool takes 0.0 GiB of the" in finding.message and "short by" not in finding.message


def test_hints_leave_out_what_the_spec_already_has():
    # GP404 on an h100-sxm at 8 sequences of 2,048 tokens (memory-bound: each step reads the 16 GB of
    # weights) asks for more bandwidth than the h100-sxm's, fp8 weights and KV cache, or fewer sequences;
    # with both fp8 ones declared, neither is asked for again. Compute-bound (128 sequences of 8,192 tokens:
    # the attention's and GEMMs' FLOPs), no fp8 KV cache is offered: the step waits on compute, not on bytes.
    base = {"context": 2048, "concurrency": 8, "slo": {"tpot_ms": 2}, "hardware": {"gpu": "h100-sxm"}}
    (plain,) = findings(spec(base), "GP404")
    assert "memory-bound" in plain.message
    assert plain.hint == (
        "a GPU with more memory bandwidth than h100-sxm's, fp8 weights, an fp8 KV cache or fewer sequences per replica"
    )
    (done,) = findings(spec({**base, "quantization": "fp8", "kv_cache_dtype": "fp8"}), "GP404")
    assert done.hint == "a GPU with more memory bandwidth than h100-sxm's or fewer sequences per replica"
    (bound,) = findings(spec({**base, "context": 8192, "concurrency": 128}), "GP404")
    assert "compute-bound" in bound.message
    assert bound.hint == (
        "a GPU that computes faster than h100-sxm, fp8 weights (fp8 GEMMs on a GPU that has them) or fewer "
        "sequences per replica"
    )
    # GP202 (92 sequences of 8,192 tokens leave under 10% of an h100-sxm's budget): on a bf16 cache it offers
    # fp8, on a cache already fp8 it does not offer to halve it again.
    tight = {"context": 8192, "concurrency": 92, "hardware": {"gpu": "h100-sxm"}}
    (bf16,) = findings(spec({**tight, "concurrency": 46}), "GP202")
    assert bf16.hint == "an fp8 KV cache halves the cache; or lower concurrency or context"
    (fp8,) = findings(spec({**tight, "kv_cache_dtype": "fp8"}), "GP202")
    assert fp8.hint == "lower concurrency or context"


def test_an_instance_quote_is_priced_for_the_gpus_paid_for_and_says_so():
    # 2 x h100-sxm under a quote of 20.00 per 8-GPU instance-hour (2.50 a GPU-hour): one whole instance is
    # paid for, 8 x 2.50 x 730 = 14,600 a month, not 2 x 2.50 x 730 = 3,650. GP502 names the 8 paid for.
    text = spec(
        {"context": 4096, "concurrency": 8, "hardware": {"gpu": "h100-sxm", "count": 2}},
        budget={
            "serve_monthly": 8000,
            "quotes": {"h100-sxm": {"provider": "Acme", "price": 20.0, "instance_gpus": 8, "date": "2026-11-30"}},
        },
    )
    (finding,) = findings(text, "GP502")
    assert finding.message.startswith(
        "serving costs 14,600 USD a month (8 x h100-sxm paid for, whole instances for the 2 used, at "
        "2.50/GPU-hour x 730 h) — over the budget of 8,000 USD by 6,600 USD"
    )


def test_a_tp_that_does_not_divide_on_a_card_without_nvlink_is_told_tp_1():
    # GP303's hint listed every TP degree the heads allow (1, 2, 4, 8 on an L40S), which GP312 then warns of:
    # on a card without NVLink the planner proposes TP 1, in pipeline stages where one card cannot hold it.
    (finding,) = findings(
        spec({"context": 4096, "concurrency": 4, "hardware": {"gpu": "l40s", "count": 3, "tensor_parallel": 3}}),
        "GP303",
    )
    assert finding.hint == "use tensor_parallel 1 on l40s, with pipeline_parallel where one card cannot hold a replica"


def test_gp405_states_its_figures_as_estimate_prints_them():
    # The at-risk example's p90 TTFT reads in whole milliseconds, as `gpuplan estimate` prints it (a reader once
    # saw 1,175.5 ms in the finding beside 1,176 ms in the estimate), and so does its slow edge.
    text = (EXAMPLES / "findings" / "benchmark-slo-at-risk.yaml").read_bytes()
    (finding,) = [f for f in lint_bytes("s.yaml", text, LintOptions(today=TODAY)).findings if f.code == "GP405"]
    pattern = r"estimated p90 TTFT [\d,]+ ms meets the SLO of [\d,]+ ms, but not at 90% confidence: up to [\d,]+ ms .*"
    assert re.fullmatch(pattern, finding.message), finding.message
    # One helper for every text: a TTFT in whole ms, a TPOT to a tenth (the plan's rejected rows too).
    assert (format_latency_ms("ttft", 1.0273), format_latency_ms("tpot", 0.04644)) == ("1,027", "46.4")
