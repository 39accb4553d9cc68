"""A change is recommended only when it saves enough to be worth making (gpuplan/plan/materiality.py)."""

from __future__ import annotations

import json

from conftest import EXAMPLES, run_cli


def plan_json(path, *args: str) -> dict:
    _, out, _ = run_cli("plan", "--format", "json", *args, str(path))
    (job,) = json.loads(out)["jobs"]
    return job


def test_a_cost_tie_keeps_the_declared_layout(tmp_path):
    # Three GPU kinds at one price: one L40S, one L40 and one H100 PCIe each hold Llama 3.1 8B at 4 x 4K and
    # cost 1.00 x 730 = 730 USD a month. The H100 is faster, but saves nothing: the declared L40S stays.
    spec = tmp_path / "tie.yaml"
    spec.write_text(
        "version: 1\nname: tie\nmodel: {id: llama-3.1-8b}\n"
        "serve: {context: 4096, concurrency: 4, hardware: {gpu: l40s, count: 1}}\n"
        "budget: {currency: USD, prices: {l40s: 1.0, l40: 1.0, h100-pcie: 1.0}, prices_date: 2026-12-01}\n"
        "plan: {gpu: [l40s, l40, h100-pcie]}\n"
    )
    job = plan_json(spec)
    assert job["declared"]["monthly_cost"] == job["recommended"]["monthly_cost"] == 730
    assert job["recommended"]["gpu"] == "l40s" and job["kept_over"] is None
    assert job["saving"] == {"amount": 0.0, "share": 0.0, "per": "month"}
    code, out, _ = run_cli("lint", "--format", "json", str(spec))
    assert code == 0 and not [f for f in json.loads(out)["findings"] if f["code"] == "GP507"]


def test_a_small_saving_is_a_note_and_a_material_one_a_change(tmp_path):
    # The QLoRA example: 91.58 USD a run on one H200 SXM, 76.03 on one B200: 15.55 USD (17.0%) is neither more
    # than 20% (another GPU kind) nor 100 USD, so the declared layout stays and the B200 is named as kept over.
    job = plan_json(EXAMPLES / "qlora-llama-70b.yaml")
    assert job["recommended"]["gpu"] == "h200-sxm" and job["saving"]["amount"] == 0.0
    kept = job["kept_over"]
    assert kept["option"]["gpu"] == "b200-hgx" and kept["saving"] == {"amount": 15.55, "share": 0.1698, "per": "run"}
    # With thresholds of 5% and no minimum amount the same saving is material: the B200 is recommended, and
    # GP507 names it, as the plan does.
    (tmp_path / ".gpuplan.yaml").write_text("thresholds: {cheaper_layout_share: 0.05, min_saving: 0}\n")
    spec = tmp_path / "qlora.yaml"
    spec.write_text((EXAMPLES / "qlora-llama-70b.yaml").read_text())
    job = plan_json(spec)
    assert job["recommended"]["gpu"] == "b200-hgx" and job["kept_over"] is None
    assert job["saving"] == {"amount": 15.55, "share": 0.1698, "per": "run"}
    _, out, _ = run_cli("lint", "--format", "json", str(spec))
    (gp507,) = [f for f in json.loads(out)["findings"] if f["code"] == "GP507"]
    assert gp507["message"].startswith("1 x b200-hgx") and "saving about 15.55 USD per run (17%)" in gp507["message"]


def test_the_text_says_why_the_declared_layout_is_kept():
    _, out, _ = run_cli("plan", str(EXAMPLES / "finetune-llama-8b-lora.yaml"))
    assert (
        "recommended  1 x h100-sxm, 93.28 USD/run — kept: 1 x b200-hgx would save 44.47 USD per run (48%); a change "
        "must save more than 10% on the same GPU kind or 20% on another, and at least 100 USD"
    ) in out


def test_the_threshold_is_printed_rounded_half_up(tmp_path):
    # A min_saving of 5,394.5 USD printed as "at least 5,394 USD" (format's .0f rounds a half to even) beside a
    # saving of 5,394 USD that it kept the declared layout over: the note contradicted itself.
    (tmp_path / "c.yaml").write_text("thresholds: {min_saving: 5394.5}\n")
    job = plan_json(EXAMPLES / "serve-llama-70b.yaml", "--config", str(tmp_path / "c.yaml"))
    assert job["kept_over"]["threshold"].endswith("and at least 5,395 USD")
