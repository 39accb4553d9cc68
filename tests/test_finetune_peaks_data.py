"""The out-of-sample fine-tuning peaks (benchmarks/data/published_finetune_peaks.yaml) are well formed: every
record cites a source, names its counter, kind and outcome from the allowed sets, converts GB (1e9 B) to GiB
right, and carries a spec fragment that gpuplan resolves without an input or schema finding."""

from __future__ import annotations

import re
import sys
from collections import Counter

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from accuracy import estimate
from finetune_peaks import DATA, load

REQUIRED = ("id", "source", "group", "kind", "counter", "outcome", "measured_gib", "reported", "unit", "compare")
KINDS = {"full", "lora", "qlora"}
COUNTERS = {"allocated", "reserved", "device", "unknown"}
OUTCOMES = {"ran", "oom"}
UNITS = {"GB", "GiB", "B", "percent"}
COMPARE = {"allocated": "finetune_tensor_peak"}  # every other counter: finetune_per_gpu
GB_PER_GIB = 2**30 / 1e9

DOCUMENT = load(DATA)
RECORDS = DOCUMENT["records"]


def test_enough_records_from_enough_sources():
    ran = [record for record in RECORDS if record["outcome"] == "ran"]
    assert len(ran) >= 40
    assert len({record["group"] for record in ran}) >= 5
    assert any(record["outcome"] == "oom" for record in RECORDS)


def test_ids_are_unique():
    ids = [record["id"] for record in RECORDS] + [item["id"] for item in DOCUMENT.get("not_expressible", [])]
    assert not [record_id for record_id, count in Counter(ids).items() if count > 1]


@pytest.mark.parametrize("record", RECORDS, ids=lambda record: record["id"])
def test_record_fields(record):
    missing = [key for key in REQUIRED if key not in record]
    assert not missing, missing
    assert isinstance(record["source"], str) and len(record["source"]) > 20
    assert record["kind"] in KINDS
    assert record["counter"] in COUNTERS
    assert record["outcome"] in OUTCOMES
    assert record["unit"] in (UNITS if record["outcome"] == "ran" else {"none"})
    assert record["compare"] == COMPARE.get(record["counter"], "finetune_per_gpu")
    assert record["what"]
    if record["outcome"] == "oom":
        assert record["measured_gib"] is None
    else:
        assert record["measured_gib"] > 0
    method = record["spec"]["finetune"]["method"]
    assert method == record["kind"], f"kind {record['kind']} but the spec's method is {method}"
    assert all(isinstance(gap, str) and gap for gap in record.get("gaps", []))


@pytest.mark.parametrize(
    "record", [record for record in RECORDS if record["unit"] in ("GB", "B")], ids=lambda record: record["id"]
)
def test_units_are_converted(record):
    """GB (1e9 B) divided by 1.0737 gives GiB; bytes divided by 2^30."""
    number = float(re.search(r"[0-9]+(?:\.[0-9]+)?", record["reported"]).group())
    expected = number / GB_PER_GIB if record["unit"] == "GB" else number / 2**30
    assert record["measured_gib"] == pytest.approx(expected, rel=0.002, abs=0.002)


@pytest.mark.parametrize("record", RECORDS, ids=lambda record: record["id"])
def test_spec_resolves_without_input_or_schema_findings(record):
    result, codes = estimate(record["id"], record["spec"])
    bad = [code for code in codes if code.startswith(("GP0", "GP1"))]
    assert not bad, bad
    assert result is not None and result.get("finetune") is not None


def test_the_gib_records_are_not_gb_in_disguise():
    """A figure printed in GiB is kept as printed (no conversion applied twice)."""
    for record in RECORDS:
        if record["unit"] == "GiB" and record["outcome"] == "ran":
            number = float(re.search(r"[0-9]+(?:\.[0-9]+)?", record["reported"]).group())
            assert record["measured_gib"] == pytest.approx(number, abs=0.005), record["id"]
