"""The speed benchmark's data and mapping: every published record is a spec or a stated reason."""

from __future__ import annotations

import sys

import pytest
import yaml
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import speed_accuracy

DATA = yaml.safe_load(speed_accuracy.DATA.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def records():
    return {record.id: record for record in speed_accuracy.load_records()}


def test_every_record_keeps_its_source_and_is_a_spec_or_a_reason():
    entries = DATA["serving"] + DATA["training"]
    assert len({entry["id"] for entry in entries}) == len(entries)
    for entry in entries:
        assert {"repo", "path", "commit", "section"} <= set(entry["source"]), entry["id"]
        if "unexpressible" in entry:
            assert len(entry["unexpressible"]) > 20 and "spec" not in entry
        else:
            assert entry["spec"] and entry["measured"], entry["id"]
            for figure in entry["measured"].values():
                assert figure["value"] > 0 and figure["statistic"], entry["id"]


def test_the_data_does_not_point_outside_the_repository():
    # Every record cites a public repository (owner/name, path, commit); no local path, relative
    # ("../") or absolute, may stand anywhere in the file.
    text = speed_accuracy.DATA.read_text(encoding="utf-8")
    assert "../" not in text and "/work/" not in text


def test_trtllm_bench_chooses_batch_and_budget_as_its_tuning_heuristic():
    # tensorrt_llm/bench/build/tuning.py finetune_setting: 1,000 requests fit -> raw batch 1,000, rounded up to
    # a multiple of 128 = 1,024; tokens 1,000 x (1 + 128/128) = 2,000 -> at least 2,048.
    assert speed_accuracy.trtllm_bench_settings(1000, 128, 128) == (1024, 2048)
    # 100 fit at 5,000/500: batch max(64, 32 x ceil(100/32)) = 128; tokens 100 x 11 = 1,100 -> 2,048.
    assert speed_accuracy.trtllm_bench_settings(100, 5000, 500) == (128, 2048)
    # 5,000 fit: the batch is capped at 4,096; tokens 4,096 x 2 = 8,192, a multiple of 1,024.
    assert speed_accuracy.trtllm_bench_settings(5000, 1000, 1000) == (4096, 8192)


def test_a_single_request_ttft_row_maps_to_its_spec(records):
    record = records["trtllm-perfmd-ttft-h100-llama7b-tp1-2048"]
    serve = record.spec.serve
    assert record.spec.model.label == "llama-2-7b"
    assert (serve.context, serve.output_tokens, serve.concurrency, serve.batching) == (2049, 1, 1, "static")
    assert (serve.quantization, serve.kv_cache_dtype, serve.engine) == ("fp8", "fp8", "trtllm")
    assert record.measured["ttft_ms"]["value"] == 36


def test_a_throughput_row_takes_trtllm_bench_settings_from_the_kv_capacity(records):
    record = records["trtllm-v1.0-llama-3.1-8b-h100-tp1-fp8-1000-1000"]
    serve = record.spec.serve
    assert record.load.startswith("trtllm-bench")
    assert serve.concurrency == serve.max_sequences and serve.concurrency % 128 == 0
    assert serve.max_batched_tokens >= 2048 and serve.memory_utilization == 0.95


def test_derived_figures_keep_their_arithmetic(records):
    # The vLLM post publishes a fitted line: 6.58 ms + 2.37e-5 ms x context, read at 2,048 + 128 tokens.
    line = records["vllm-blog-fp8kv-fit-llama-3.1-8b-h100-kvfp8-at-2048"]
    assert line.measured["tpot_ms"]["value"] == pytest.approx(6.58 + 2.37e-5 * 2176, abs=1e-3)
    # LMDeploy's request-throughput row: output 3,387.419 / 14.556 req/s = 233 tokens per request, input
    # (6,981.159 - 3,387.419) / 14.556 = 247.
    sharegpt = records["lmdeploy-v0.2.0-reqthroughput-a100-llama2-7b-tp1-maxbs256"].spec.serve
    assert (sharegpt.output_tokens, sharegpt.full_prompt) == (233, 247)


def test_unexpressible_records_are_listed_with_reasons(records):
    missing = {rid: r.reason for rid, r in records.items() if r.spec is None}
    assert "context parallelism" in missing["torchtitan-2412-t2-llama3.1-8b-cp2-s65536"]
    assert "MXFP4" in missing["vllm-blog-fp8kv-gpt-oss-20b-h100-c8-20k-2k-kvfp8skip-sw"]
    assert all(reason for reason in missing.values())


def test_held_out_halves_split_sources_of_both_kinds(records):
    first, second = speed_accuracy.halves(list(records.values()))
    assert not first & second
    for half in (first, second):
        kinds = {r.kind for r in records.values() if r.source in half and r.spec is not None}
        assert kinds == {"serving", "training"}


def test_summary_statistics_by_hand():
    # Errors -30%, -10%, 0%, +20%, +40%: median |error| 20%, signed median 0%, 3 of 5 within +-20%.
    summary = speed_accuracy.summarise([-0.3, -0.1, 0.0, 0.2, 0.4])
    assert (summary.median_abs, summary.signed_median, summary.within_20, summary.worst) == (0.2, 0.0, 0.6, 0.4)


def test_profile_generation_rows_average_the_harness_rounds(records):
    # LMDeploy's profile_generation.py: `batch` threads start together, each sends 3 identical requests in
    # turn. While the KV cache holds the batch every round reaches an idle engine together (a burst); when
    # it does not, only the first round is a burst and the other two queue as the steady state does.
    calibration = speed_accuracy.CALIBRATION
    fits = records["lmdeploy-v0.1.0a1-static-a100-llama2-13b-tp1-bs16-128-128"]
    crowded = records["lmdeploy-v0.1.0a1-static-a100-llama2-13b-tp1-bs64-128-2048"]
    assert fits.load.startswith("lmdeploy-profile-generation") and crowded.load.startswith(
        "lmdeploy-profile-generation"
    )
    assert records["trtllm-perfmd-ttft-h100-llama7b-tp1-2048"].load is None
    burst = speed_accuracy.burst_ttft(fits.workload, None, calibration)
    assert speed_accuracy.harness_ttft(fits.workload, calibration) == pytest.approx(burst * 1000)
    steady = speed_accuracy.serving_speed(crowded.workload, None, calibration)
    assert steady.running < crowded.workload.concurrency  # 64 threads, room for fewer
    first = speed_accuracy.burst_ttft(crowded.workload, None, calibration)
    expected = (first + 2 * steady.ttft_s) / 3 * 1000
    assert speed_accuracy.harness_ttft(crowded.workload, calibration) == pytest.approx(expected)
    assert first < steady.ttft_s  # the burst admits every prompt; the later rounds wait for the cache


def test_training_rows_state_the_cluster_network_and_the_attention_kernel(records):
    # llm-foundry's A100 section heading: "1600 Gbps node-node interconnect" over 8 GPUs a node = 200 Gb/s
    # per GPU = 25 GB/s; its H100 sections state none and keep the 400 Gb/s default.
    a100 = records["llmfoundry-a100-40gb-mpt70b-s2048-g64-mb2"]
    assert a100.spec.finetune.hardware.network_gbps == 200 and a100.workload.setup.job.hardware.network_gbs == 25.0
    h100 = records["llmfoundry-h100-bf16-mpt13b-s2048-g32-mb2"]
    assert h100.spec.finetune.hardware.network_gbps == 400
    # Transformer Engine runs cuDNN fused attention on Hopper+: NeMo and Megatron-Bridge rows say so;
    # torchtitan (PyTorch SDPA) keeps the FlashAttention-2 default; llm-foundry's tables ran its Triton
    # FlashAttention (sweep.sh passes no --attn_impl, submit_benchmarks.py defaults it to triton).
    assert records["nemo-24.07-sft-llama2-7b-8gpu"].workload.setup.job.attention == "cudnn"
    assert records["mbridge-26.04.01-dgx-h100-llama3-70b-fp8-64gpu"].workload.setup.job.attention == "cudnn"
    assert records["torchtitan-2412-t1-llama3.1-8b-8gpu-1"].workload.setup.job.attention == "flash"
    assert h100.workload.setup.job.attention == "triton"


def test_training_rows_state_the_framework_path_their_source_ran(records):
    # issue 29: llm-foundry eager (Composer), torchtitan and torchtune compiled, NeMo and Megatron-Bridge megatron;
    # FSDP and Megatron mixed precision with 16-bit working weights (no autocast over fp32 weights).
    expected = {"llm-foundry": "eager", "torchtitan": "compiled", "torchtune": "compiled"}
    expected |= {"NeMo": "megatron", "Megatron-Bridge": "megatron"}
    for record in records.values():
        if record.kind != "training" or record.spec is None:
            continue
        job = record.workload.setup.job
        framework = next(value for key, value in expected.items() if f"/{key}/" in f"/{record.source}")
        # torchtune's "+ Packed Dataset" row runs before the table adds torch.compile: the one eager torchtune row.
        assert job.framework == ("eager" if record.id == "torchtune-llama3.2-3b-optflags-01" else framework), record.id
        if job.precision in ("bf16-mixed", "fp8-mixed"):
            assert not job.autocast, record.id


# -- the calibration fit (scipy.optimize.least_squares) ----------------------------------------------------


def test_the_fit_minimises_the_reported_objective_a_weighted_huber_of_log_ratios():
    # scipy's cost is 0.5 x sum(rho(f^2)); rho is chosen so that this is sum(weight x Huber(f, delta)): the
    # objective the benchmark reports (``loss``: each metric weighted equally), plus plain squares (the
    # engines' ridge) where delta is infinite. Residuals inside and beyond delta = 0.25, both signs.
    import numpy as np

    f = np.array([0.1, -0.2, 0.6, -1.5, 0.3])
    weights = [0.5, 0.25, 0.25, 1.0, 1.0]
    deltas = [0.25, 0.25, 0.25, 0.25, float("inf")]
    rho = speed_accuracy.weighted_huber(weights, deltas)(f**2)
    expected = sum(w * speed_accuracy.huber(x) for w, x in zip(weights[:4], f[:4], strict=True)) + 0.3**2 / 2
    assert 0.5 * rho[0].sum() == pytest.approx(expected)
    # rho' and rho'' (in z = f^2) are the derivatives of rho[0]: the solver's Gauss-Newton model relies on them.
    step = 1e-6
    ahead = speed_accuracy.weighted_huber(weights, deltas)(f**2 + step)
    assert rho[1] == pytest.approx((ahead[0] - rho[0]) / step, rel=1e-4)
    assert rho[2][2] == pytest.approx((ahead[1][2] - rho[1][2]) / step, rel=1e-3)


def test_metric_weights_give_each_metric_an_equal_share(records):
    results = speed_accuracy.evaluate_fast(
        [records["trtllm-perfmd-ttft-h100-llama7b-tp1-2048"], records["nemo-24.07-sft-llama2-7b-8gpu"]],
        speed_accuracy.CALIBRATION,
    )
    weights = speed_accuracy.metric_weights(results)
    total = sum(w * speed_accuracy.huber(speed_accuracy.log_ratio(r)) for w, r in zip(weights, results, strict=True))
    assert total == pytest.approx(speed_accuracy.loss(results))


def test_a_fitted_figure_keeps_its_unit_and_its_bounds_in_the_fitted_coordinate():
    efficiency = speed_accuracy.Parameter("trtllm", "gemm_efficiency", (0.2, 1.0))
    overhead = speed_accuracy.Parameter("trtllm", "step_overhead_s", (0.0, 4e-3))
    assert efficiency.logarithmic and not overhead.logarithmic  # a factor; quarters of the upper bound
    assert efficiency.value(efficiency.coordinate(0.79)) == pytest.approx(0.79)
    assert overhead.coordinate(1e-3) == pytest.approx(1.0) and overhead.coordinate_bounds == (0.0, 4.0)
    assert efficiency.coordinate(5.0) == 0.0  # outside the bounds -> the bound
    assert efficiency.name == "trtllm.gemm_efficiency"


def test_a_fit_reports_convergence_and_every_figure_left_at_a_bound():
    # Three figures: one whose optimum (2.0) lies past its upper bound (1.0), one with an interior optimum,
    # and one no residual depends on. The report says converged, names the first at its bound and the
    # third as held by no record, and its cost is the objective at the fitted figures.
    import math

    at_bound = speed_accuracy.Parameter("serving", "link_efficiency", (0.3, 1.0))
    inside = speed_accuracy.Parameter("serving", "layer_overhead_s", (0.0, 80e-6))
    unused = speed_accuracy.Parameter("serving", "roofline_sharpness", (1.0, 12.0))

    def residuals(values):
        return [math.log(values[0] / 2.0), (values[1] - 30e-6) / 10e-6, 0.1]

    values, report = speed_accuracy.least_squares_fit(
        "toy", [at_bound, inside, unused], [0.5, 10e-6, 2.0], residuals, [1.0, 1.0, 1.0], [0.25, 0.25, 0.25], None
    )
    assert report.converged and report.status > 0 and report.nfev > 0 and report.evaluations >= report.nfev
    assert values[0] == pytest.approx(1.0) and values[1] == pytest.approx(30e-6, rel=1e-3) and values[2] == 2.0
    assert [(hit.parameter.name, hit.side, hit.bound) for hit in report.at_bounds] == [
        ("serving.link_efficiency", "upper", 1.0)
    ]
    assert [p.name for p in report.undetermined] == ["serving.roofline_sharpness"]
    expected = speed_accuracy.huber(math.log(0.5)) + speed_accuracy.huber(0.1)
    assert report.cost == pytest.approx(expected, rel=1e-6) and report.cost < report.start_cost
    lines = report.lines()
    assert lines[0].startswith("toy: converged (status ")
    assert "WARNING: toy: serving.link_efficiency = 1 is at its upper bound 1" in lines[1]
    assert "no estimate depends on serving.roofline_sharpness" in lines[2]


def test_the_training_fit_converges_and_reports_the_figures_on_their_bounds(records):
    # The shipped training figures are the optimum's neighbourhood: the fit converges and says that overlap
    # sits on its upper bound of 1 (data-parallel communication fully hidden) and bandwidth_efficiency on
    # its lower bound of 0.4 (the records, llm-foundry's most, want more time outside the GEMMs than the
    # counted elementwise bytes take at any plausible share of HBM bandwidth), rather than leaving them there
    # silently.
    calibration, report = speed_accuracy.fit_training(list(records.values()), speed_accuracy.CALIBRATION)
    assert report.converged and report.cost <= report.start_cost
    assert {hit.parameter.key: hit.side for hit in report.at_bounds} == {
        "bandwidth_efficiency": "lower",
        "overlap": "upper",
    }
    assert calibration.training.overlap == 1.0 and calibration.training.bandwidth_efficiency == 0.4
    assert calibration.serving == speed_accuracy.CALIBRATION.serving


def test_a_folds_stored_figures_rebuild_the_calibration_they_were_fitted_to(records):
    # benchmarks/bands.py keeps each leave-one-source-out fold as {block.key: value} and re-scores it from
    # those alone: every fitted figure of the shipped calibration, stored and rebuilt, gives it back.
    calibration = speed_accuracy.CALIBRATION
    parameters = speed_accuracy.serving_parameters([r for r in records.values() if r.kind == "serving"])
    parameters += [speed_accuracy.Parameter("training", key, b) for key, b in speed_accuracy.TRAINING_FIGURES.items()]
    figures = {p.name: speed_accuracy.current(calibration, p) for p in parameters}
    assert speed_accuracy.with_figures(calibration, figures) == calibration
    # One figure moved moves that figure only.
    moved = speed_accuracy.with_figures(calibration, {**figures, "vllm.gemm_efficiency": 0.5})
    assert moved.engines["vllm"].gemm_efficiency == 0.5
    assert moved.engines["trtllm"] == calibration.engines["trtllm"] and moved.training == calibration.training
