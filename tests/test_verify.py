"""gpuplan verify: the term table, the comparison arithmetic, end to end on written excerpts, properties."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import run_cli
from evidence_samples import GIB, RankMemory, VllmRun, torch_memory_json, vllm_failed_start, vllm_log
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpuplan.catalog import get_model
from gpuplan.config import default_settings
from gpuplan.evidence.model import (
    BYTES,
    CUDA_GRAPHS,
    KV_POOL,
    KV_TOKENS,
    MAX_CONCURRENCY,
    NON_TORCH,
    PEAK_ALLOCATED,
    PEAK_RESERVED,
    SEQUENCES,
    TOKENS,
    TORCH_PEAK,
    WEIGHTS,
    Evidence,
    Measurement,
    Setting,
)
from gpuplan.linter import lint_bytes
from gpuplan.units import format_gib
from gpuplan.verify.compare import OVER, UNDER, WITHIN, classify, verify_run
from gpuplan.verify.terms import SERVE_NOT_MEASURED, SERVE_ROWS, USAGE, serve_estimate_terms

SERVE_SPEC = """\
version: 1
name: chat-8b
model:
  id: llama-3.1-8b
serve:
  context: 8192
  concurrency: 32
  kv_cache_dtype: auto
  memory_utilization: 0.95
  hardware: {gpu: h100-sxm, count: 1}
"""
LOG_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
LOG_QUANTIZATION = {"none": "None", "fp8": "fp8", "int8": "compressed-tensors", "int4-awq": "awq_marlin"}


# The engine reports 167,936 tokens = 20.5 x 8,192: room for 20.50 sequences, not the declared 32.
SHORT_POOL = VllmRun(
    ranks={"": RankMemory(weights=14.99, torch_peak=1.89, non_torch=0.25, graphs=0.91, kv_pool=20.5)},
    kv_tokens=167_936,
    concurrency=20.5,
)


def log_file(tmp_path, text: str):
    path = tmp_path / "vllm.log"
    path.write_text(text)
    return path


def analysis_of(text: str, name: str = "spec.yaml"):
    result = lint_bytes(name, text.encode())
    assert result.analysis is not None, [f.message for f in result.findings]
    return result


def equal_run(result, scale: float = 1.0) -> VllmRun:
    """The vLLM log of an engine that allocated exactly what the estimate says (usage terms x ``scale``)."""
    estimate = result.analysis.serve
    terms = serve_estimate_terms(estimate)
    setup, job = estimate.setup, estimate.job
    memory = RankMemory(
        weights=terms["weights"] * scale / GIB,
        torch_peak=terms["activations"] * scale / GIB,
        non_torch=terms["runtime"] * scale / GIB,
        graphs=terms["cuda_graphs"] * scale / GIB,
        kv_pool=terms["kv_pool"] / GIB,
        requested=estimate.memory.budget / GIB,
        total=estimate.gpu.usable_bytes / GIB,
    )
    ranks = (
        {"": memory}
        if setup.tensor_parallel * setup.pipeline_parallel == 1
        else {
            f"PP{stage}_TP{rank}" if setup.pipeline_parallel > 1 else f"TP{rank}": memory
            for stage in range(setup.pipeline_parallel)
            for rank in range(setup.tensor_parallel)
        }
    )
    spec = result.analysis.spec
    return VllmRun(
        ranks=ranks,
        kv_tokens=int(terms["kv_tokens"]),
        concurrency=terms["max_concurrency"],
        max_model_len=job.context,
        tp=setup.tensor_parallel,
        pp=setup.pipeline_parallel,
        dtype=LOG_NAMES[spec.model.dtype],
        kv_cache_dtype=LOG_NAMES.get(job.kv_cache_dtype, job.kv_cache_dtype),
        quantization=LOG_QUANTIZATION[job.quantization],
        utilization=job.memory_utilization,
        model=get_model(spec.model.label).hf_ids[0],  # the log names the checkpoint the spec's catalog id is
    )


def verify_text(result, log: str, tmp_path, tolerance: float = 10.0):
    from gpuplan.evidence.read import read_evidence

    path = tmp_path / "run.log"
    path.write_text(log)
    evidence = read_evidence(str(path))
    return verify_run(result.analysis, result.document, evidence, default_settings(), tolerance)


def codes(run) -> list[str]:
    return [finding.code for finding in run.findings]


# -- the table and the arithmetic ----------------------------------------------------------------


def test_every_serving_breakdown_key_is_mapped_exactly_once():
    """Adapting to a refined estimate is a change to the table: this fails until the table knows each key."""
    with_tenant = SERVE_SPEC + "  tenants:\n    - {name: small, model: {id: llama-3.2-1b}, concurrency: 4}\n"
    for text in (SERVE_SPEC, with_tenant):
        breakdown = analysis_of(text).analysis.serve.memory.breakdown
        for key in breakdown:
            rows = [row for row in SERVE_ROWS if row.direction == USAGE and key in row.estimate]
            assert len(rows) + (key in SERVE_NOT_MEASURED) == 1, key
    # Every row is estimated for the engines whose logs it reads (every engine where it names none), and
    # an engine-specific row for no other engine.
    memory_utilization = {"vllm": 0.95, "sglang": 0.88, "trtllm": 0.9}
    for engine, fraction in memory_utilization.items():
        text = SERVE_SPEC.replace("memory_utilization: 0.95", f"memory_utilization: {fraction}\n  engine: {engine}")
        terms = serve_estimate_terms(analysis_of(text).analysis.serve)
        for row in SERVE_ROWS:
            assert all(name in terms for name in row.estimate) == (not row.kinds or engine in row.kinds), row.name


@pytest.mark.parametrize(
    "estimate, measured, resolution, expected",
    [
        # allowed = 10% x 10 GiB + 0.005 GiB = 1.005 GiB
        (10.0, 11.0, 0.005, WITHIN),
        (10.0, 11.01, 0.005, OVER),
        (10.0, 8.996, 0.005, WITHIN),  # 1.004 below: within 1.005
        (10.0, 8.996, 0.0, UNDER),  # without the rounding allowance: 1.004 > 1.0
        (10.0, 8.99, 0.005, UNDER),  # 1.01 > 1.005
        (0.25, 0.27, 0.005, WITHIN),  # 0.02 <= 0.025 + 0.005
        (0.25, 0.29, 0.005, OVER),  # 0.04 > 0.03
    ],
)
def test_classification_boundaries_by_hand(estimate, measured, resolution, expected):
    assert classify(estimate * GIB, measured * GIB, resolution * GIB, 0.10) == expected


def synthetic(job: str, measurements: dict[str, tuple[str, float]], settings: dict[str, object]) -> Evidence:
    units = {KV_TOKENS: TOKENS, MAX_CONCURRENCY: SEQUENCES}
    return Evidence(
        path="synthetic",
        kind="vllm" if job == "serve" else "torch-memory",
        job=job,
        engine="synthetic",
        settings={name: Setting(name, value, 1) for name, value in settings.items()},
        measurements={
            term: Measurement(term, units.get(term, BYTES), ((rank, value),), 0.0, 1, term)
            for term, (rank, value) in measurements.items()
        },
    )


def serve_evidence_equal_to(result, scale: float = 1.0) -> Evidence:
    estimate = result.analysis.serve
    terms = serve_estimate_terms(estimate)
    job, spec = estimate.job, result.analysis.spec
    usage = {WEIGHTS: "weights", TORCH_PEAK: "activations", NON_TORCH: "runtime", CUDA_GRAPHS: "cuda_graphs"}
    measured = {term: ("0", terms[key] * scale) for term, key in usage.items()}
    measured |= {KV_POOL: ("0", terms["kv_pool"])}
    measured |= {KV_TOKENS: ("0", terms["kv_tokens"]), MAX_CONCURRENCY: ("0", terms["max_concurrency"])}
    return synthetic(
        "serve",
        measured,
        {
            "max_model_len": job.context,
            "concurrency_context": job.context,
            "tensor_parallel": estimate.setup.tensor_parallel,
            "pipeline_parallel": estimate.setup.pipeline_parallel,
            "dtype": spec.model.dtype,
            "kv_cache_dtype": job.kv_cache_dtype,
            "quantization": job.quantization,
            "memory_utilization": job.memory_utilization,
        },
    )


# -- end to end on the command line -----------------------------------------------------------------


def test_estimate_and_log_agree_exit_0(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC)
    log = log_file(tmp_path, vllm_log(equal_run(analysis_of(SERVE_SPEC))))
    code, out, err = run_cli("verify", str(spec), "--run", str(log))
    assert (code, err) == (0, "")
    assert "compared with the spec's estimate; tolerance 10%" in out
    assert out.rstrip().endswith("passed: 0 errors, 0 warnings, 0 info in 1 run")
    assert " over" not in out and " under" not in out


def test_kv_pool_below_the_declared_concurrency_is_gp803_exit_1(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC)
    log = log_file(tmp_path, vllm_log(SHORT_POOL))
    code, out, _ = run_cli("verify", str(spec), "--run", str(log), "--format", "json")
    assert code == 1
    document = json.loads(out)
    findings = document["runs"][0]["findings"]
    gp803 = [f for f in findings if f["code"] == "GP803"]
    assert len(gp803) == 1 and gp803[0]["severity"] == "error"
    assert (gp803[0]["line"], gp803[0]["col"]) == (7, 16)  # `concurrency: 32` is line 7, its value at column 16
    assert gp803[0]["message"].startswith("the engine holds 20.50 sequences of 8,192 tokens")
    assert "requests beyond 20 wait" in gp803[0]["message"]


def test_an_estimate_with_no_room_for_a_kv_pool_shows_none_not_a_negative_pool(tmp_path, write_spec):
    # At memory_utilization 0.1, 8 GiB of an H100 hold no pool beside 15 GiB of weights: the estimate's pool
    # is negative (the engine cannot start). Verified against a log at the same setting, the row showed
    # -9.10 GiB and a ratio of -6.4; it shows none, and JSON holds 0 and no ratio.
    spec = write_spec(SERVE_SPEC.replace("memory_utilization: 0.95", "memory_utilization: 0.1"))
    log = log_file(tmp_path, vllm_log(replace(SHORT_POOL, utilization=0.1)))
    _, out, _ = run_cli("verify", str(spec), "--run", str(log), "--format", "json")
    (pool,) = [t for t in json.loads(out)["runs"][0]["terms"] if t["term"] == "KV cache pool"]
    assert (pool["estimate"], pool["ratio"]) == (0.0, None)
    _, text, _ = run_cli("verify", str(spec), "--run", str(log))
    assert "-9." not in text and "KV cache pool             0.00 GiB" in text


def test_capacity_is_derived_from_kv_tokens_when_the_log_ran_another_context(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC)
    # max_model_len 4096 (GP802); 98,304 KV tokens / the spec's 8,192 = 12.00 sequences < 32.
    run = VllmRun(
        ranks={"": RankMemory(weights=14.99, torch_peak=1.89, non_torch=0.25, graphs=0.91, kv_pool=12.0)},
        kv_tokens=98_304,
        concurrency=24.0,
        max_model_len=4096,
    )
    log = log_file(tmp_path, vllm_log(run))
    code, out, _ = run_cli("verify", str(spec), "--run", str(log))
    assert code == 1
    assert "GP803 [error] the engine holds 12.00 sequences of 8,192 tokens (98,304 KV tokens / 8,192" in out
    assert "spec.yaml:6:12: GP802 [error] the run used max_model_len 4096" in out
    assert "compared with the estimate recomputed at the run's settings" in out


def test_the_kv_meaning_and_gp803_count_the_same_sequences(tmp_path, write_spec):
    """A TP 2 log against the TP 1 spec: the engine holds 36.60 sequences of 8,192 tokens (its 'Maximum
    concurrency'), at least the declared 32, so no GP803; its 19.5 GiB pool (the smaller rank's) holds them at
    19.5 / 36.6 = 0.53 GiB a sequence, so the 32 take 17.05 GiB (17.1 from that published figure) and leave
    19.5 x (1 - 32 / 36.6) = 2.45 GiB. The line said "need 32.0 GiB ... short by 12.5 GiB": the spec's TP 1
    bytes against a TP 2 rank's pool."""
    spec = write_spec(SERVE_SPEC)
    run = VllmRun(
        ranks={"TP0": RankMemory(7.5, 1.9, 2.07, 0.76, 20.0), "TP1": RankMemory(7.5, 1.9, 2.07, 0.76, 19.5)},
        kv_tokens=300_000,
        concurrency=36.6,
        tp=2,
    )
    code, out, _ = run_cli("verify", str(spec), "--run", str(log_file(tmp_path, vllm_log(run))))
    assert code == 1 and "GP802" in out and "GP803" not in out and "short by" not in out
    assert (
        "the declared 32 x 8,192 tokens need 17.1 GiB of KV cache per GPU; the run's pool holds 19.5 GiB, 36.60 "
        "sequences at 0.53 GiB each: 2.5 GiB to spare (the estimate at the run's settings planned"
    ) in out
    # Below the declared load, the same basis says "short by" and GP803 fires: 20.5 GiB holds 20.50 sequences
    # at 1.00 GiB each; the 32 need 32.0 GiB, 11.5 GiB more than the pool.
    _, out, _ = run_cli("verify", str(spec), "--run", str(log_file(tmp_path, vllm_log(SHORT_POOL))))
    assert "the run's pool holds 20.5 GiB, 20.50 sequences at 1.00 GiB each: short by 11.5 GiB" in out
    assert "GP803 [error]" in out


def test_the_kv_meaning_of_an_fp8_kv_trtllm_run_counts_the_tokens_it_logged(write_spec):
    """TensorRT-LLM stored 263,008 tokens (fp8 KV, which its log does not name) in 16.05 GiB: 32.11 sequences of
    8,192 tokens, so the declared 32 fit (no GP803) with 16.05 x (1 - 32 / 32.11) = 0.05 GiB to spare; the
    line said "need 32.0 GiB ... short by 16.0 GiB" from the spec's bf16 KV bytes. (The estimate at the run's
    settings, bf16 KV on the RTX 5090, planned short: that is the estimate's plan, said as such.)"""
    from conftest import ROOT

    spec = write_spec(
        "version: 1\nname: t\nmodel: {id: llama-3.1-8b}\nserve: {context: 8192, concurrency: 32, engine: trtllm,"
        " quantization: fp8, hardware: {gpu: h100-sxm}}\n"
    )
    log = ROOT / "tests" / "fixtures" / "engine_logs" / "trtllm-4275-llama-3.1-8b-fp8-rtx5090.log"
    _, out, _ = run_cli("verify", str(spec), "--run", str(log))
    assert "GP803" not in out
    assert "the run's pool holds 16.1 GiB, 32.11 sequences at 0.50 GiB each: 0.1 GiB to spare (the estimate at" in out


def test_settings_mismatch_points_at_the_specs_line(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC)
    run = replace(equal_run(analysis_of(SERVE_SPEC)), kv_cache_dtype="fp8", utilization=0.9)
    log = log_file(tmp_path, vllm_log(run))
    code, out, _ = run_cli("verify", str(spec), "--run", str(log), "--format", "json")
    assert code == 1
    gp802 = {f["pointer"]: f for f in json.loads(out)["runs"][0]["findings"] if f["code"] == "GP802"}
    assert set(gp802) == {"/serve/kv_cache_dtype", "/serve/memory_utilization"}
    assert (gp802["/serve/kv_cache_dtype"]["line"], gp802["/serve/kv_cache_dtype"]["col"]) == (8, 19)
    assert gp802["/serve/kv_cache_dtype"]["message"].startswith("the run used kv_cache_dtype fp8 (")
    assert (gp802["/serve/memory_utilization"]["line"], gp802["/serve/memory_utilization"]["col"]) == (9, 23)
    settings = {s["setting"]: s for s in json.loads(out)["runs"][0]["settings"]}
    assert settings["kv_cache_dtype"]["matches"] is False and settings["max_model_len"]["matches"] is True


def test_a_default_the_spec_does_not_write_is_reported_at_its_section(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC.replace("  memory_utilization: 0.95\n", ""))
    log = log_file(tmp_path, vllm_log(equal_run(analysis_of(SERVE_SPEC))))
    code, out, _ = run_cli("verify", str(spec), "--run", str(log))
    assert code == 1
    assert "spec.yaml:5:1: GP802 [error] the run used gpu_memory_utilization 0.95" in out
    assert "the spec declares serve.memory_utilization 0.9 (its default)" in out


def test_json_gives_estimate_measured_delta_and_ratio_per_term(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC)
    run = equal_run(analysis_of(SERVE_SPEC))
    log = log_file(tmp_path, vllm_log(run))
    code, out, _ = run_cli("verify", str(spec), "--run", str(log), "--format", "json")
    document = json.loads(out)
    assert code == 0 and document["format_version"] == 1 and document["tolerance_pct"] == 10
    assert document["summary"] == {
        "runs": 1,
        "errors": 0,
        "warnings": 0,
        "infos": 0,
        "fail_on": "error",
        "exit_code": 0,
    }
    terms = {t["term"]: t for t in document["runs"][0]["terms"]}
    assert set(terms) == {row.name for row in SERVE_ROWS if not row.kinds} | {"non-KV total"}
    weights = terms["weights"]
    assert weights["measured"] == round(run.ranks[""].weights, 2) * GIB
    assert weights["delta"] == pytest.approx(weights["measured"] - weights["estimate"])
    assert weights["ratio"] == pytest.approx(weights["measured"] / weights["estimate"], abs=1e-6)
    assert weights["per_rank"] == {"0": weights["measured"]} and weights["unit"] == "bytes"
    assert terms["KV cache tokens"]["measured"] == run.kv_tokens and terms["KV cache tokens"]["unit"] == "tokens"
    assert document["runs"][0]["evidence"]["kind"] == "vllm" and document["runs"][0]["basis"] == "spec"


def test_markdown_is_a_pull_request_comment(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC)
    log = tmp_path / "a|b.log"
    log.write_text(vllm_log(equal_run(analysis_of(SERVE_SPEC))))
    code, out, _ = run_cli("verify", str(spec), "--run", str(log), "--format", "markdown")
    assert code == 0
    assert out.startswith("## gpuplan verify: ")
    assert "| term | estimate | measured | delta | ratio | status |" in out
    assert "a\\|b.log" in out  # a file name cannot break the table


def test_failed_start_is_gp804_with_its_cause(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC)
    cause = "ValueError: No available memory for the cache blocks."
    log = log_file(tmp_path, vllm_failed_start(equal_run(analysis_of(SERVE_SPEC)), cause))
    code, out, _ = run_cli("verify", str(spec), "--run", str(log))
    assert code == 1
    assert (
        "spec.yaml:5:1: GP804 [error] the run failed to start: ValueError: No available memory for the cache blocks."
        in out
    )
    # The start died before it logged a memory term: no measured term can show what the estimate missed.
    assert "hint: out of memory before the run logged what it used: hold the cause's figures" in out
    assert "the terms above" not in out
    # A start that loaded its weights first has a measured term to point at.
    loaded = vllm_log(SHORT_POOL, stop_after_loading=True) + (
        "(EngineCore pid=242) ERROR 04-22 00:04:21 [v1/engine/core.py:1108] torch.OutOfMemoryError: CUDA out of "
        "memory. Tried to allocate 1.96 GiB.\n"
    )
    _, out, _ = run_cli("verify", str(spec), "--run", str(log_file(tmp_path, loaded)))
    assert "hint: out of memory: the measured terms show which part the estimate missed" in out


def test_an_out_of_memory_error_while_serving_is_gp804_whatever_lines_say_the_engine_is_up(tmp_path, write_spec):
    # A whole start (KV cache reported), then the engine's OOM under load. Without vLLM's 'init engine ... took'
    # line the OOM was dropped and the run passed with exit 0; an OOM anywhere in the log is GP804.
    spec = write_spec(SERVE_SPEC)
    oom = (
        "(EngineCore pid=242) ERROR 04-22 01:10:00 [v1/engine/core.py:800] torch.OutOfMemoryError: CUDA out of "
        "memory. Tried to allocate 2.00 GiB.\n"
    )
    whole = vllm_log(equal_run(analysis_of(SERVE_SPEC)))
    for up in ("init engine (profile", "Starting vLLM server"):
        whole = "".join(line for line in whole.splitlines(keepends=True) if up not in line)
    up = (
        "(APIServer pid=1) INFO 04-22 00:05:00 [api_server.py:1945] Starting vLLM API server 0 on http://0.0.0.0:8000\n"
    )
    for text in (whole + oom, whole + up + oom):
        code, out, _ = run_cli("verify", str(spec), "--run", str(log_file(tmp_path, text)))
        assert code == 1
        assert "spec.yaml:5:1: GP804 [error] the run ran out of memory while running: torch.OutOfMemoryError" in out
        assert "hint: out of memory: the measured terms show which part the estimate missed" in out


def test_a_kv_pool_below_the_low_edge_of_the_estimates_band_is_a_gp806_warning(tmp_path, write_spec):
    # SERVE_SPEC's estimate is a 58.18 GiB pool (docs/verify.md's example run: 58.11 GiB measured). The serving band
    # (gpuplan/estimate/memory_bands.json, 17 engine start-up logs) has ratios measured / estimate 0.822, 0.9566, ...:
    # at plan.confidence 0.9 (the default) its low edge is x 0.9566, 58.18 x 0.9566 = 55.65 GiB; at 0.95, x 0.822,
    # 47.8 GiB. A pool of 55.50 GiB (454,656 tokens at Llama 3.1 8B's 128 KiB a token: 55.50 sequences of 8,192,
    # more than the declared 32, so no GP803) is below the first edge and above the second. A pool of 45 GiB (the
    # hunt's log, 23% under the estimate) passed with no finding, as one 5% under does, GP803 firing only below 32.
    spec = write_spec(SERVE_SPEC)
    run = equal_run(analysis_of(SERVE_SPEC))

    def pool(gib: float) -> VllmRun:
        tokens = int(gib * GIB // (128 * 1024)) // 16 * 16
        return replace(run, ranks={"": replace(run.ranks[""], kv_pool=gib)}, kv_tokens=tokens, concurrency=gib)

    code, out, _ = run_cli("verify", str(spec), "--run", str(log_file(tmp_path, vllm_log(pool(55.5)))))
    assert code == 0  # a warning
    assert (
        "spec.yaml:7:16: GP806 [warning] KV cache pool: the run allocated 55.5 GiB per GPU, below 55.7 GiB, the low "
        "edge at 90% confidence (the engine's KV cache 58.2 GiB estimated x 0.96, the ratio measured / estimate that "
        "90% of 17 published engine startup logs not used to tune the model stayed at or above)" in out
    )
    assert "GP803" not in out
    _, out, _ = run_cli("verify", str(spec), "--run", str(log_file(tmp_path, vllm_log(pool(45.0)))))
    assert "GP806 [warning] KV cache pool: the run allocated 45.0 GiB per GPU, below 55.7 GiB" in out
    # Above the edge (55.80 GiB), or below the estimate at a confidence whose edge is lower: no finding.
    assert "GP806" not in run_cli("verify", str(spec), "--run", str(log_file(tmp_path, vllm_log(pool(55.8)))))[1]
    spec = write_spec(SERVE_SPEC + "plan: {confidence: 0.95}\n")
    assert "GP806" not in run_cli("verify", str(spec), "--run", str(log_file(tmp_path, vllm_log(pool(55.5)))))[1]
    _, out, _ = run_cli("verify", str(spec), "--run", str(log_file(tmp_path, vllm_log(pool(45.0)))))
    assert "GP806 [warning] KV cache pool: the run allocated 45.0 GiB per GPU, below 47.8 GiB" in out


def test_the_gp802_hint_does_not_say_where_the_terms_are_printed(tmp_path, write_spec):
    # Text prints the findings after the table ("the terms below" pointed up), JSON in another list.
    spec = write_spec(SERVE_SPEC)
    run = replace(equal_run(analysis_of(SERVE_SPEC)), utilization=0.9)
    _, out, _ = run_cli("verify", str(spec), "--run", str(log_file(tmp_path, vllm_log(run))))
    assert "GP802 [error]" in out and "below" not in out and "above" not in out
    assert "hint: make the spec say what runs, or rerun with the spec's settings; the terms are compared" in out


def test_truncated_log_is_a_gp805_warning(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC)
    log = log_file(tmp_path, vllm_log(equal_run(analysis_of(SERVE_SPEC)), stop_after_loading=True))
    code, out, _ = run_cli("verify", str(spec), "--run", str(log))
    assert code == 0
    assert "GP805 [warning]" in out and "not in the evidence: 'Available KV cache memory'" in out
    assert run_cli("verify", str(spec), "--run", str(log), "--fail-on", "warning")[0] == 1


def test_more_memory_than_estimated_is_gp801_a_warning_while_headroom_remains(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC)
    run = equal_run(analysis_of(SERVE_SPEC))
    memory = run.ranks[""]
    # Activations 1.5x the estimate; the pool still holds the declared 32 x 8,192 tokens with room to spare.
    run = replace(run, ranks={"": replace(memory, torch_peak=memory.torch_peak * 1.5)})
    log = log_file(tmp_path, vllm_log(run))
    code, out, _ = run_cli("verify", str(spec), "--run", str(log))
    assert code == 0
    assert "spec.yaml:10:19: GP801 [warning] activations: the run used" in out and "(+50%; tolerance 10%)" in out
    relaxed = tmp_path / ".gpuplan.yaml"
    relaxed.write_text("thresholds: {verify_tolerance_pct: 60}\n")
    assert "GP801" not in run_cli("verify", str(spec), "--run", str(log))[1]
    assert "GP801" not in run_cli("verify", str(spec), "--run", str(log), "--tolerance", "55")[1]
    relaxed.write_text("severity: {measured-exceeds-estimate: info}\n")
    assert "GP801 [info]" in run_cli("verify", str(spec), "--run", str(log))[1]


def test_gp801_is_an_error_when_the_headroom_is_gone(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC.replace("concurrency: 32", "concurrency: 52"))
    run = equal_run(analysis_of(SERVE_SPEC))
    memory = run.ranks[""]
    # Weights 20% over and a pool that still holds 52 x 8 GiB = 52 GiB plus 2 GiB: under 10% of the budget.
    run = replace(
        run,
        ranks={"": replace(memory, weights=memory.weights * 1.2, kv_pool=54.0)},
        kv_tokens=442_368,
        concurrency=54.0,
    )
    log = log_file(tmp_path, vllm_log(run))
    code, out, _ = run_cli("verify", str(spec), "--run", str(log))
    assert code == 1
    assert "GP801 [error] weights: the run used" in out and "and the headroom is gone" in out
    assert "GP803" not in out  # 54.00 sequences fit: capacity is not below the declared 52


LORA_8B_ONE_H100 = """\
version: 1
name: lora-8b
model: {id: llama-3.1-8b}
finetune:
  method: lora
  precision: bf16
  micro_batch: 2
  seq_len: 4096
  hardware: {gpu: h100-sxm, count: 1}
"""


def test_training_run_against_a_finetune_spec(tmp_path, write_spec):
    text = LORA_8B_ONE_H100
    spec = write_spec(text)
    estimate = analysis_of(text).analysis.finetune
    usable = estimate.gpu.usable_bytes
    stats = tmp_path / "stats.json"
    # The run used micro_batch 4 (GP802) and peaked 0.5 GiB under the GPU's memory: no room for another micro-batch.
    stats.write_text(
        torch_memory_json(usable - GIB, usable - GIB // 2, total_memory=usable, run={"micro_batch": 4, "seq_len": 4096})
    )
    code, out, _ = run_cli("verify", str(spec), "--run", str(stats))
    assert code == 1
    assert "spec.yaml:7:16: GP802 [error] the run used micro_batch 4" in out
    assert "one micro-batch more (micro_batch 5) adds about" in out
    assert "one batch-size step from out-of-memory" in out


def test_out_of_memory_errors_in_a_training_run_are_gp804_and_the_run_does_not_pass(tmp_path, write_spec):
    # A loop whose allocator raised 3 OutOfMemoryErrors (num_ooms) and kept going: its peaks are within the
    # estimate, and it passed with exit 0 and a note. GP804 is "the run failed to start, or ran out of memory".
    text = LORA_8B_ONE_H100
    spec = write_spec(text)
    memory = analysis_of(text).analysis.finetune.memory
    stats = tmp_path / "stats.json"
    stats.write_text(torch_memory_json(memory.allocated, memory.reserved, num_ooms=3, num_alloc_retries=12))
    code, out, _ = run_cli("verify", str(spec), "--run", str(stats))
    assert code == 1
    assert (
        "spec.yaml:4:1: GP804 [error] the run ran out of memory while running: PyTorch's allocator raised 3 "
        "out-of-memory errors (num_ooms on rank 0)" in out
    )
    assert "GP801" not in out  # the peaks themselves are the estimate's
    # Retries alone (allocations that succeeded after the cache was freed) are pressure, not a failure.
    stats.write_text(torch_memory_json(memory.allocated, memory.reserved, num_alloc_retries=12))
    code, out, _ = run_cli("verify", str(spec), "--run", str(stats))
    assert code == 0 and "GP804" not in out and "12 allocations retried" in out


def test_a_list_of_more_rank_records_than_the_specs_gpus_is_gp802_as_world_size_is(tmp_path, write_spec):
    # Two ranks' statistics in one list against a spec of 1 GPU: the run had at least 2 GPUs. With "world_size": 2
    # in the records it was GP802; without it, nothing was said and the peaks were held to a 1-GPU estimate.
    text = LORA_8B_ONE_H100
    spec = write_spec(text)
    memory = analysis_of(text).analysis.finetune.memory
    rank = {"max_memory_allocated": memory.allocated, "max_memory_reserved": memory.reserved}
    stats = tmp_path / "stats.json"
    expected = "spec.yaml:9:36: GP802 [error] the run used world_size 2"
    for records in ([rank, rank], [rank | {"world_size": 2}, rank | {"world_size": 2}]):
        stats.write_text(json.dumps(records))
        code, out, _ = run_cli("verify", str(spec), "--run", str(stats))
        assert code == 1 and expected in out and "the spec declares finetune.hardware.count 1" in out
    stats.write_text(json.dumps([rank, rank]))  # the difference says where the world size comes from
    assert "world_size 2 (2 rank records)" in run_cli("verify", str(spec), "--run", str(stats))[1]
    # Fewer records than the spec's GPUs are a subset of its ranks (one rank's file): no difference.
    spec = write_spec(text.replace("count: 1", "count: 4"))
    code, out, _ = run_cli("verify", str(spec), "--run", str(stats))
    assert "GP802" not in out and "world_size" not in out


def test_a_counter_that_starts_with_training_is_held_to_the_steps_not_to_the_loading_peak(tmp_path, write_spec):
    # TRL's preparation of a small QLoRA model (64-token batches): its loading copies are the tensor peak, which
    # PyTorch's own counters since the start include and the Trainer's memory metrics do not (its tracker resets
    # the peak as each stage starts, and SFTTrainer prepares the model before Trainer.__init__'s stage begins).
    text = """\
version: 1
name: qlora-1b
model: {id: llama-3.2-1b}
finetune:
  method: qlora
  kbit_preparation: trl
  precision: bf16-mixed
  loop: trainer
  seq_len: 64
  hardware: {gpu: h100-sxm, count: 1}
"""
    spec = write_spec(text)
    memory = analysis_of(text).analysis.finetune.memory
    assert memory.peak_phase == "loading" and memory.step_allocated < memory.allocated
    # all_results.json's exact bytes: the steps' peak, all of it in the train stage's deltas.
    trainer = tmp_path / "all_results.json"
    trainer.write_text(
        json.dumps(
            {
                "before_init_mem_gpu": 0,
                "init_mem_gpu_alloc_delta": 0,
                "train_mem_gpu_alloc_delta": 0,
                "train_mem_gpu_peaked_delta": memory.step_allocated,
            }
        )
    )
    code, out, _ = run_cli("verify", str(spec), "--run", str(trainer))
    assert code == 0 and "1.000  within" in out, out
    assert f"the estimate planned {format_gib(memory.step_allocated)} for that counter" in out
    # PyTorch's max_memory_allocated since the start, equal to the steps' peak, is below the loading peak.
    stats = tmp_path / "stats.json"
    stats.write_text(torch_memory_json(memory.step_allocated))
    code, out, _ = run_cli("verify", str(spec), "--run", str(stats))
    assert code == 0 and "under" in out and f"the estimate planned {format_gib(memory.allocated)} for that" in out


def test_evidence_for_a_job_the_spec_does_not_have_is_exit_2(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC)
    stats = tmp_path / "stats.json"
    stats.write_text(torch_memory_json(10 * GIB, 11 * GIB))
    code, _, err = run_cli("verify", str(spec), "--run", str(stats))
    assert code == 2 and "has no finetune: section" in err


def test_a_spec_that_cannot_be_estimated_is_exit_2_with_its_problems(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC.replace("llama-3.1-8b", "llama-9"))
    log = log_file(tmp_path, "x\n")
    code, out, err = run_cli("verify", str(spec), "--run", str(log))
    assert (code, out) == (2, "")
    assert (
        "GP020 [error] unknown model 'llama-9'" in err
        and "cannot be verified until the problems above are fixed" in err
    )


def test_unreadable_evidence_is_exit_2(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC)
    code, out, err = run_cli("verify", str(spec), "--run", str(tmp_path / "absent.log"))
    assert (code, out) == (2, "") and "cannot read run evidence" in err
    code, _, err = run_cli("verify", str(spec), "--run", "/dev/null")
    assert code == 2 and "not a regular file (a character device)" in err


def test_training_evidence_in_gib_or_mb_is_exit_2_not_a_pass(tmp_path, write_spec):
    """A person writing GiB (40.5) or copying the Trainer's printed MB into all_results.json (15,000 + 2,000 +
    20,000 = 37,000) gives peaks of 40 and 37,000 bytes: read as bytes they were 0.00 GiB, "under", exit 0."""
    spec = write_spec(
        "version: 1\nname: ft\nmodel: {id: llama-3.1-8b}\nfinetune:\n  method: lora\n  hardware: {gpu: h100-sxm}\n"
    )
    for name, document, unit in (
        ("stats.json", {"max_memory_allocated": 40.5}, "GiB"),
        (
            "all_results.json",
            {
                "init_mem_gpu_alloc_delta": 15_000,
                "train_mem_gpu_alloc_delta": 2_000,
                "train_mem_gpu_peaked_delta": 20_000,
            },
            "MB",
        ),
    ):
        evidence = tmp_path / name
        evidence.write_text(json.dumps(document))
        code, out, err = run_cli("verify", str(spec), "--run", str(evidence))
        assert (code, out) == (2, "") and f"it looks like {unit}" in err, err


def test_the_same_evidence_given_twice_is_refused_not_counted_twice(tmp_path, write_spec):
    # It counted "2 runs" with every finding twice; a second spelling of the same file is the same run.
    spec = write_spec(SERVE_SPEC)
    log = log_file(tmp_path, vllm_log(SHORT_POOL))
    for again in (str(log), f"{tmp_path}/./{log.name}"):
        code, out, err = run_cli("verify", str(spec), "--run", str(log), "--run", again)
        assert (code, out) == (2, "") and f"--run names {log} twice" in err, err
    code, _, err = run_cli("report", str(spec), "--run", str(log), "--run", str(log))
    assert code == 2 and "twice" in err


def test_explain_documents_the_verify_codes():
    for code, name in (
        ("GP801", "measured-exceeds-estimate"),
        ("GP802", "run-settings-differ"),
        ("GP803", "measured-capacity-below-declared"),
    ):
        exit_code, out, _ = run_cli("explain", code)
        assert exit_code == 0 and out.startswith(f"{code} {name} (verify, default severity")


def test_report_gains_a_verified_section(tmp_path, write_spec):
    spec = write_spec(SERVE_SPEC)
    log = log_file(tmp_path, vllm_log(SHORT_POOL))
    code, plain, _ = run_cli("report", str(spec))
    assert code == 0 and "Verified against a run" not in plain
    code, out, _ = run_cli("report", str(spec), "--run", str(log))
    assert code == 1  # the verify error counts, as in the findings table
    assert "<summary>G. Verified against a run (1)</summary>" in out and "| KV cache tokens |" in out
    assert "| GP803 |" in out
    # A real run that holds fewer sequences than declared disproves the declared plan: the report rejects it
    # (it read APPROVE WITH CHANGES with an amount to sign for that layout, the rule's summary as the change).
    assert out.startswith("## REJECT:"), out[:200]
    assert "holds fewer sequences in a real run than it declares" in out
    assert "none: the declared plan is rejected" in out


# -- properties ---------------------------------------------------------------------------------------

serve_specs = st.builds(
    lambda model, gpu, tp, pp, context, concurrency, kv, quantization, utilization: (
        f"""\
version: 1
name: property
model: {{id: {model}}}
serve:
  context: {context}
  concurrency: {concurrency}
  kv_cache_dtype: {kv}
  quantization: {quantization}
  memory_utilization: {utilization}
  hardware: {{gpu: {gpu}, count: {tp * pp}, tensor_parallel: {tp}, pipeline_parallel: {pp}}}
"""
    ),
    # dense GQA, MoE, MLA, sliding windows (alternating and all-layer), tied embeddings, multi-head
    st.sampled_from(
        ["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "gemma-2-9b", "mistral-7b-v0.1", "llama-3.2-1b", "llama-2-7b"]
    ),
    st.sampled_from(["h100-sxm", "h200-sxm", "a100-sxm-80gb", "l40s", "b200-hgx"]),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, 2]),
    st.sampled_from([2048, 4096, 8192, 32768]),
    st.integers(1, 256),
    st.sampled_from(["auto", "fp8"]),
    st.sampled_from(["none", "fp8", "int8", "int4-awq"]),
    st.sampled_from([0.85, 0.9, 0.95]),
)


def _startable(result) -> bool:
    serve = result.analysis.serve
    return serve.memory.kv_available > serve.memory.kv_bytes_per_sequence  # vLLM refuses to start otherwise


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
@given(serve_specs)
def test_a_run_equal_to_the_estimate_has_no_findings_but_the_capacity_one_it_predicts(text):
    result = analysis_of(text)
    assume(_startable(result))
    run = verify_run(result.analysis, result.document, serve_evidence_equal_to(result), default_settings(), 10.0)
    estimate = result.analysis.serve
    capacity = serve_estimate_terms(estimate)["max_concurrency"]
    assert codes(run) == (["GP803"] if capacity < estimate.job.concurrency else [])
    assert all(term.status == WITHIN for term in run.terms)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
@given(serve_specs)
def test_the_same_through_a_written_log_rounded_as_vllm_prints_it(tmp_path_factory, text):
    result = analysis_of(text)
    assume(_startable(result))
    run = verify_text(result, vllm_log(equal_run(result)), tmp_path_factory.mktemp("log"))
    estimate = result.analysis.serve
    printed = round(serve_estimate_terms(estimate)["max_concurrency"], 2)
    assert [c for c in codes(run) if c != "GP803"] == []
    assert ("GP803" in codes(run)) == (printed < estimate.job.concurrency)


@settings(max_examples=40, suppress_health_check=[HealthCheck.filter_too_much])
@given(serve_specs, st.floats(1.101, 3.0))
def test_scaling_every_measured_term_beyond_the_tolerance_yields_gp801(text, scale):
    result = analysis_of(text)
    assume(_startable(result))
    run = verify_run(result.analysis, result.document, serve_evidence_equal_to(result, scale), default_settings(), 10.0)
    over = {f.message.split(":")[0] for f in run.findings if f.code == "GP801"}
    usage = {
        term.name for term in run.terms if term.direction == USAGE and term.estimate and term.name != "non-KV total"
    }
    assert over == usage and over


finetune_specs = st.builds(
    lambda model, method, precision, batch, seq, accumulation, checkpointing, fused, layout: (
        f"""\
version: 1
name: property
model: {{id: {model}}}
finetune:
  method: {method}
  precision: {precision}
  micro_batch: {batch}
  seq_len: {seq}
  gradient_accumulation: {accumulation}
  activation_checkpointing: {str(checkpointing).lower()}
  fused_loss: {str(fused).lower()}
  {"framework: fused" + chr(10) + "  " if method == "qlora" and "tensor_parallel" in layout else ""}{layout}
"""
    ),  # QLoRA over tensor-parallel ranks runs under Unsloth (framework: fused) alone (gpuplan.conflicts)
    st.sampled_from(["llama-3.2-1b", "llama-3.1-8b", "mixtral-8x7b", "gemma-2-9b", "qwen2.5-7b"]),
    st.sampled_from(["full", "lora", "qlora"]),
    st.sampled_from(["bf16", "bf16-mixed"]),
    st.integers(1, 8),
    st.sampled_from([512, 2048, 8192]),
    st.integers(1, 16),
    st.booleans(),
    st.booleans(),
    st.sampled_from(
        [
            "hardware: {gpu: h100-sxm, count: 1}",
            "sharding: zero3\n  hardware: {gpu: h100-sxm, count: 8}",
            "hardware: {gpu: h200-sxm, count: 4, tensor_parallel: 2, pipeline_parallel: 2}",
        ]
    ),
)


@settings(max_examples=40)
@given(finetune_specs, st.one_of(st.just(1.0), st.floats(0.5, 1.099), st.floats(1.101, 3.0)))
def test_training_runs_equal_to_or_scaled_from_the_estimate(text, scale):
    """Equal (or lower) peaks: no findings; both peaks beyond the 10% tolerance: GP801 for each."""
    result = analysis_of(text)
    estimate = result.analysis.finetune
    evidence = synthetic(
        "finetune",
        {
            PEAK_ALLOCATED: ("rank 0", estimate.memory.allocated * scale),
            PEAK_RESERVED: ("rank 0", estimate.memory.reserved * scale),
        },
        {},
    )
    run = verify_run(result.analysis, result.document, evidence, default_settings(), 10.0)
    expected = ["GP801", "GP801"] if scale > 1.1 else []
    assert codes(run) == expected


def test_lint_loads_no_evidence_reader_and_verify_no_report_machinery(tmp_path, write_spec):
    """lint is a pre-commit hook: verify's readers stay out of it; verify itself renders without Jinja."""
    import subprocess
    import sys

    spec = write_spec(SERVE_SPEC)
    log = log_file(tmp_path, vllm_log(SHORT_POOL))
    probe = (
        "import sys\n"
        "from gpuplan.cli import cli\n"
        "try:\n    cli(sys.argv[1:])\nexcept SystemExit as exit:\n    print('EXIT', exit.code)\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith(('gpuplan.verify', 'gpuplan.evidence.', "
        "'jinja2', 'weasyprint')) and m != 'gpuplan.evidence.model'))\n"
    )
    lint = subprocess.run([sys.executable, "-c", probe, "lint", str(spec)], capture_output=True, text=True).stdout
    assert "EXIT 0" in lint and "LOADED []" in lint
    verify = subprocess.run(
        [sys.executable, "-c", probe, "verify", str(spec), "--run", str(log)], capture_output=True, text=True
    ).stdout
    assert "EXIT 1" in verify and "'gpuplan.evidence.vllm'" in verify and "jinja2" not in verify


def test_a_log_cut_after_its_kv_pool_is_gp805_and_checks_the_declared_load_against_that_pool(tmp_path, write_spec):
    # SHORT_POOL's start, cut after 'Available KV cache memory: 20.5 GiB' (before 'GPU KV cache size' and
    # 'Maximum concurrency'): it passed with exit 0 and "the run does not state its KV capacity". The pool
    # it states holds 20.5 GiB / 1 GiB per 8,192-token sequence of Llama 3.1 8B (32 layers x 8 KV heads x
    # 128 x 2 x 2 B = 128 KiB a token) = 20.50 sequences, under the declared 32: GP803, and GP805 says the log
    # is cut.
    spec = write_spec(SERVE_SPEC)
    whole = vllm_log(SHORT_POOL)
    lines = whole.splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "Available KV cache memory" in line)
    log = log_file(tmp_path, "".join(lines[: cut + 1]))
    code, out, _ = run_cli("verify", str(spec), "--run", str(log))
    assert code == 1
    assert "GP805 [warning]" in out and "before the engine reported the size of its KV cache" in out
    assert "GP803 [error] the engine holds 20.50 sequences of 8,192 tokens (the 20.5 GiB pool / 1.0 GiB per" in out


def test_a_setting_name_as_long_as_its_column_keeps_a_space_before_its_value(write_spec):
    # TensorRT-LLM's free_gpu_memory_fraction is 24 characters, the width the settings column had: the
    # line read "free_gpu_memory_fraction0.8". The column is as wide as its longest name and a space.
    from conftest import ROOT

    spec = write_spec(
        "version: 1\nname: t\nmodel: {id: llama-3.1-8b}\nserve: {context: 8192, concurrency: 16, engine: trtllm,"
        " quantization: fp8, kv_cache_dtype: fp8, hardware: {gpu: h100-sxm}}\n"
    )
    log = ROOT / "tests" / "fixtures" / "engine_logs" / "trtllm-6294-llama-3.1-8b-fp8-h100.log"
    _, out, _ = run_cli("verify", str(spec), "--run", str(log))
    line = next(line for line in out.splitlines() if "free_gpu_memory_fraction" in line)
    assert line.split()[:2] == ["free_gpu_memory_fraction", "0.8"]


def test_an_auto_kv_cache_that_resolves_differently_says_to_what(tmp_path, write_spec):
    # A run whose model dtype was fp16 with kv_cache_dtype auto, against a bf16 spec with auto: the GP802 read
    # "the run used kv_cache_dtype auto ...; the spec declares serve.kv_cache_dtype auto", a difference that
    # did not show. Each auto is said with the dtype it resolves to.
    spec = write_spec(SERVE_SPEC)
    run = replace(equal_run(analysis_of(SERVE_SPEC)), dtype="float16")
    log = log_file(tmp_path, vllm_log(run))
    _, out, _ = run_cli("verify", str(spec), "--run", str(log), "--format", "json")
    gp802 = {f["pointer"]: f for f in json.loads(out)["runs"][0]["findings"] if f["code"] == "GP802"}
    message = gp802["/serve/kv_cache_dtype"]["message"]
    assert message.startswith("the run used kv_cache_dtype auto (fp16, the run's model dtype) (")
    assert message.endswith("the spec declares serve.kv_cache_dtype auto (bf16, the model's dtype)")
