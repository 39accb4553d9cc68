"""The layout `gpuplan plan` recommends, pasted into the spec, draws no warning or error of its own.

A recommendation that a second lint flags (a sharding kept on one GPU, a layout over a limit, tensor
parallelism over PCIe) would send a user round in circles; each example is planned, every job's `paste`
fragment merged into the spec as the user would (its `hardware` mapping replaces the declared one whole, as
docs/planning.md says), and the result linted again. Information findings (a quote's age) may remain, and
so may the budget's error where the plan itself says its recommendation is over budget (no sound layout
fits it). The examples of single findings (examples/findings/) keep what they were written to show (a
category mismatch stays one), so there the pasted spec may keep the original's findings, but gains none,
and draws none about its layout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLES, run_cli

SPECS = sorted(EXAMPLES.glob("*.yaml"))


FINDINGS = sorted((EXAMPLES / "findings").glob("*.yaml"))
# What a layout itself draws: needless or over-wide parallelism, TP over PCIe, a cheaper layout.
LAYOUT_CODES = {"GP302", "GP304", "GP306", "GP312", "GP507"}


def _merge(target: dict[str, Any], fragment: dict[str, Any]) -> None:
    for key, value in fragment.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict) and key != "hardware":
            _merge(target[key], value)
        else:
            target[key] = value


def _planned_job(path: Path, text: str) -> dict[str, Any]:
    """The one job of `gpuplan plan --format json` on a spec of ``text`` written at ``path``."""
    path.write_text(text, encoding="utf-8")
    _, out, _ = run_cli("plan", "--format", "json", str(path))
    (job,) = json.loads(out)["jobs"]
    return job


def _flagged(path: Path) -> list[tuple[str, str]]:
    _, out, _ = run_cli("lint", "--format", "json", str(path))
    return [(f["code"], f["message"]) for f in json.loads(out)["findings"] if f["severity"] in ("error", "warning")]


def _pasted_findings(path: Path) -> tuple[list[tuple[str, str]], set[str]] | None:
    """The errors and warnings of ``path`` with the plan's recommendations pasted, and the budget codes its
    plan said the recommendation breaks; None without a recommendation."""
    _, out, _ = run_cli("plan", "--format", "json", str(path))
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    recommended = [job["recommended"] for job in json.loads(out)["jobs"] if job["recommended"]]
    if not recommended:
        return None
    over_budget = {"GP501", "GP502"} if any(option["within_budget"] is False for option in recommended) else set()
    for option in recommended:
        _merge(spec, yaml.safe_load(option["yaml"]))
    pasted = path.parent / f".pasted-{path.name}"  # beside the example: its config.json paths resolve
    try:
        pasted.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
        return _flagged(pasted), over_budget
    finally:
        pasted.unlink()


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_the_pasted_recommendation_lints_without_warnings(path: Path):
    found = _pasted_findings(path)
    assert found is not None, path.name  # every bundled example has a sound layout to recommend
    flagged, over_budget = found
    assert [(code, message) for code, message in flagged if code not in over_budget] == []


@pytest.mark.parametrize("path", FINDINGS, ids=lambda p: p.stem)
def test_a_pasted_recommendation_adds_no_finding_and_none_about_its_layout(path: Path):
    found = _pasted_findings(path)
    if found is None:
        pytest.skip("no layout to recommend")
    flagged, over_budget = found
    before = {code for code, _ in _flagged(path)}
    added = [(code, message) for code, message in flagged if code not in before | over_budget]
    about_layout = [(code, message) for code, message in flagged if code in LAYOUT_CODES]
    assert (added, about_layout) == ([], [])


# Declared fields a paste must restate, since its hardware mapping replaces the declared one whole: the plan
# judged every layout with them (from a helper's hunt over 549 specs).
RESTATED = {
    # sequence parallelism declared with TP 2; the recommendation drops TP, and the paste left
    # `sequence_parallel: true` beside tensor_parallel 1: GP025, an error, and a spec plan refuses
    "sequence-parallel": (
        "finetune: {method: full, precision: bf16-mixed, optimizer: adamw-fused, seq_len: 4096, tokens: 100000000,"
        " sequence_parallel: true, hardware: {gpu: h100-sxm, count: 2, tensor_parallel: 2}}",
        "sequence_parallel: false",
    ),
    # a 10 Gb/s network between nodes: the paste dropped it, and the pasted spec, judged at the default 400 Gb/s,
    # drew GP507 for a 16-GPU ZeRO-3 layout whose gradient sync takes 17 times its compute at 10 Gb/s
    "network": (
        "finetune: {method: full, precision: bf16-mixed, optimizer: adamw-fused, seq_len: 4096,"
        " activation_checkpointing: full, tokens: 1000000000, sharding: fsdp,"
        " hardware: {gpu: h100-sxm, count: 32, network_gbps: 10}}",
        "network_gbps: 10",
    ),
}


@pytest.mark.parametrize("name", sorted(RESTATED))
def test_a_paste_restates_the_declared_fields_its_layout_was_judged_with(name, tmp_path):
    model = "llama-3.2-3b" if name == "sequence-parallel" else "llama-3.1-70b"
    job, restated = RESTATED[name]
    path = tmp_path / f"{name}.yaml"
    plan = _planned_job(path, f"version: 1\nname: {name}\nmodel: {{id: {model}}}\n{job}\n")
    assert restated in plan["recommended"]["yaml"]
    found = _pasted_findings(path)
    assert found is not None
    flagged, _ = found
    assert [(code, message) for code, message in flagged if code in LAYOUT_CODES or code == "GP025"] == []


def test_a_cost_tie_goes_to_the_smaller_split(tmp_path):
    # Gemma 2 27B on two H200 NVL cards (priced at 2.38 an hour), statically batched: one card holds a replica,
    # and two single-card replicas meet the SLOs at the same 3,475 USD/month as one TP-2 split. The planner broke
    # the tie on latency and recommended the split, which GP302 then flagged once pasted; the tie now goes to the
    # fewer GPUs per model copy.
    path = tmp_path / "tie.yaml"
    job = _planned_job(
        path,
        "version: 1\nname: tie\nmodel: {id: gemma-2-27b}\n"
        "serve: {context: 1024, output_tokens: 256, prompt_tokens: {mean: 76, p90: 152}, concurrency: 16,"
        " slo: {ttft_ms: 1000, tpot_ms: 100}, batching: static, hardware: {gpu: h100-sxm, count: 4}}\n"
        "budget: {prices: {h200-nvl: 2.38}, prices_date: '2026-11-20'}\n",
    )
    recommended = job["recommended"]
    assert (recommended["gpu"], recommended["gpus"], recommended["tensor_parallel"]) == ("h200-nvl", 2, 1)
    split = [o for o in job["options"] if o["gpu"] == "h200-nvl" and o["tensor_parallel"] == 2]
    assert split and split[0]["monthly_cost"] == recommended["monthly_cost"]  # the tie it broke
    found = _pasted_findings(path)
    assert found is not None
    flagged, _ = found
    assert [(code, message) for code, message in flagged if code in LAYOUT_CODES] == []


def test_a_steady_streams_recommendation_keeps_the_cap_and_plans_the_same_once_pasted(tmp_path):
    # Qwen3-14B in FP8 at 20 requests/s, at most 16 in flight per replica, declared on one MI300X (which completes
    # at most about 5 a second). `concurrency` caps each replica's engine under a steady stream (docs/spec.md); the
    # planner spread it as a total instead: 16 over 13 B200s ran 2 each (26 in flight, the rounding's), the paste
    # said `concurrency: 2`, and each paste planned again raised it further (a helper's hunt: 15 x 2, then 7 x 5,
    # then 4 x 9). Every replica keeps the cap now, the paste leaves it alone, and the pasted spec's plan is its
    # own declared layout.
    path = tmp_path / "stream.yaml"
    job = _planned_job(
        path,
        "version: 1\nname: stream\nmodel: {id: qwen3-14b}\n"
        "serve: {context: 4096, output_tokens: 256, concurrency: 16, arrival: steady, rate_rps: 20,"
        " quantization: fp8, hardware: {gpu: mi300x, count: 1}}\n",
    )
    recommended = job["recommended"]
    assert recommended["concurrency_per_replica"] == 16
    assert {option["concurrency_per_replica"] for option in job["options"]} == {16}
    assert "concurrency" not in recommended["yaml"]
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    _merge(spec, yaml.safe_load(recommended["yaml"]))
    again = _planned_job(path, yaml.safe_dump(spec, sort_keys=False))
    assert (again["recommended"]["gpu"], again["recommended"]["gpus"]) == (recommended["gpu"], recommended["gpus"])
    assert again["recommended"]["monthly_cost"] == again["declared"]["monthly_cost"]


def test_a_right_sizing_hint_names_the_layout_the_plan_recommends(tmp_path):
    # Llama 3.1 8B, 4 sequences, a 10 ms TPOT SLO, on 2 x H100 SXM at TP 2 (17% of each used). GP505 looked only at
    # cards with a lower hourly price and named 2 x h100-pcie at TP 2 (3,854 USD/month), while GP507 and the plan
    # named 1 x h100-sxm at 3,008; its hint pasted drew GP507 (a helper's hunt: 13 of 136 such specs). A cheaper
    # card is still what makes GP505 fire; the layout it names is the cheapest sound one of any card.
    path = tmp_path / "oversized.yaml"
    job = _planned_job(
        path,
        "version: 1\nname: oversized\nmodel: {id: llama-3.1-8b}\nserve: {context: 4096, concurrency: 4,"
        " slo: {tpot_ms: 10}, hardware: {gpu: h100-sxm, count: 2, tensor_parallel: 2}}\n",
    )
    _, out, _ = run_cli("lint", "--format", "json", str(path))
    hints = {f["code"]: f["hint"] for f in json.loads(out)["findings"] if f["code"] in ("GP505", "GP507")}
    assert hints["GP505"] == hints["GP507"] == "paste serve: {hardware: {gpu: h100-sxm, count: 1}}"
    assert yaml.safe_load(job["recommended"]["yaml"]) == {"serve": {"hardware": {"gpu": "h100-sxm", "count": 1}}}
