"""The out-of-sample load-shape benchmark: every published record is compared or listed with its reason."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import load_accuracy  # noqa: E402

RECORDS = yaml.safe_load(load_accuracy.DATA.read_text(encoding="utf-8"))


def test_every_record_names_its_source_and_load_shape():
    assert len({r["id"] for r in RECORDS}) == len(RECORDS)
    for record in RECORDS:
        assert record["source"] and record["load"]["arrival"] in ("closed-loop", "steady", "burst"), record["id"]


def test_each_record_is_stated_as_a_spec_or_says_why_not():
    for record in RECORDS:
        spec, why = load_accuracy.spec_for(record)
        assert (spec is None) == bool(why), record["id"]
        if spec is not None:
            assert spec["serve"]["arrival"] == record["load"]["arrival"]
            assert ("rate_rps" in spec["serve"]) == (record["load"]["arrival"] == "steady")


def test_lengths_from_a_runs_totals():
    # 1,000 ShareGPT prompts of 217,393 input and 201,422 output tokens in all: 217.393 and 201.422 each.
    first = next(r for r in RECORDS if r["id"] == "gs-qwen3-32b-h100-vllm-sharegpt-burst")
    assert load_accuracy.lengths(first) == pytest.approx((217.393, 201.422))


def test_a_finite_steady_run_divides_its_prompts_by_its_duration():
    # 200 prompts at 4/s arrive over 50 s; the last one's latency is TTFT 0.1 s + 99 tokens x 0.02 s = 2.08 s:
    # 200 / 52.08 requests/s, and 100 output tokens each.
    speed = SimpleNamespace(saturated=False, tokens_per_s=400.0, requests_per_s=4.0, ttft_s=0.1, tpot_s=0.02)
    record = {"load": {"arrival": "steady", "num_prompts": 200, "rate_rps": 4.0}}
    assert load_accuracy.finite_run(speed, record, 4.0, "requests_per_s") == pytest.approx(200 / 52.08)
    assert load_accuracy.finite_run(speed, record, 400.0, "output_tokens_per_s") == pytest.approx(20000 / 52.08)


def test_the_benchmark_compares_records_of_every_shape():
    stated = [r for r in RECORDS if r["id"].startswith(("iog-llama3-8b", "kvcached", "gs-qwen3-8b"))]
    results, _ = load_accuracy.evaluate(stated)
    assert {r.arrival for r in results} == {"closed-loop", "steady", "burst"}
    assert all(r.measured > 0 and r.estimated > 0 for r in results)
