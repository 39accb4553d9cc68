"""Free GPUs: a price of 0 (the schema allows it: owned or donated cards) for the declared GPU of each job kind.

Nothing can be cheaper than free, so against a free declared layout there is no saving and no share of one:
``plan`` (text, Markdown, JSON), ``report``, GP507 and ``diff`` all say so, and none of them divides by the
declared cost (``plan`` used to stop with ``internal error: ZeroDivisionError``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import EXAMPLES, make_spec, run_cli

from gpuplan.config import default_settings
from gpuplan.plan.configured import planner_for
from gpuplan.plan.describe import saving_between

# (example, the price line it gets, the job whose declared GPU becomes free)
CASES = {
    # Serving only: 4 x h100-sxm TP 4 holds Llama 3.1 70B; two cannot hold its 131 GiB of weights, so
    # every sound layout on the free card still needs 4 of them and costs 0.
    "serve": ("serve-llama-70b.yaml", "  prices: {h100-sxm: 0}\n", "serve"),
    # Fine-tuning only: the declared 1 x h100-sxm LoRA run (sound at its memory edge) becomes free.
    "finetune": ("finetune-llama-8b-lora.yaml", "  prices: {h100-sxm: 0}\n", "finetune"),
    # Both jobs in one spec: the serving GPU (one L4) is free, fine-tuning stays on priced H100s.
    "both": ("finetune-then-serve.yaml", "  prices: {l4: 0, h100-sxm: 4.12}\n", "serve"),
}


def free_spec(tmp_path: Path, case: str) -> tuple[Path, str]:
    """The example with its declared GPU's price set to 0 (a ``budget.prices`` line replaced or added)."""
    example, prices, job = CASES[case]
    text = (EXAMPLES / example).read_text(encoding="utf-8")
    if re.search(r"^  prices:", text, flags=re.M):
        text = re.sub(r"^  prices:.*\n", prices, text, flags=re.M)
    else:
        assert re.search(r"^budget:\n", text, flags=re.M), example
        text = text.replace("budget:\n", "budget:\n" + prices, 1)
    path = tmp_path / example
    path.write_text(text, encoding="utf-8")
    return path, job


@pytest.mark.parametrize("case", sorted(CASES))
def test_plan_against_a_free_declared_layout_states_no_saving(tmp_path, case):
    path, job = free_spec(tmp_path, case)
    code, out, err = run_cli("plan", "--format", "json", str(path))
    assert code == 0, err
    jobs = {entry["job"]: entry for entry in json.loads(out)["jobs"]}
    free = jobs[job]
    cost_key = "monthly_cost" if job == "serve" else "run_cost"
    assert free["declared"]["price_per_gpu_hour"] == 0 and free["declared"][cost_key] == 0
    # The recommendation is the cheapest sound layout: free too (0 - 0 = 0), with no share of a free cost.
    assert free["recommended"][cost_key] == 0
    assert free["saving"] == {"amount": 0.0, "share": 0.0, "per": "month" if job == "serve" else "run"}
    code, out, err = run_cli("plan", str(path))
    assert code == 0 and "internal error" not in err
    assert "the declared layout is the cheapest sound one" in out
    code, out, err = run_cli("plan", "--format", "markdown", str(path))
    assert code == 0 and "internal error" not in err
    assert "- **Recommended**:" in out and "the declared layout is the cheapest sound one" in out


@pytest.mark.parametrize("case", sorted(CASES))
def test_report_lint_and_diff_against_a_free_declared_layout(tmp_path, case):
    path, job = free_spec(tmp_path, case)
    code, out, err = run_cli("report", str(path), "-o", "-")
    assert code in (0, 1) and "internal error" not in err, err
    # GP507 never claims a saving against a free layout (its ceiling is 0 x (1 - 20%) = 0: nothing is below).
    code, out, err = run_cli("lint", "--format", "json", str(path))
    assert code in (0, 1) and "internal error" not in err
    hardware = f"/{job}/hardware"
    assert not [f for f in json.loads(out)["findings"] if f["code"] == "GP507" and f["pointer"] == hardware]
    example = EXAMPLES / CASES[case][0]
    for output_format in ("text", "markdown", "json"):
        code, out, err = run_cli("diff", str(example), str(path), "--format", output_format)
        assert code == 0 and "internal error" not in err, err


def test_a_free_declared_layout_has_no_share_to_save(tmp_path):
    path, _ = free_spec(tmp_path, "both")
    # At 4,608 tokens a sequence the fine-tune's 4 x h100-sxm keep 8% free at the 0.9 edge (58.75 GiB x 1.2461 =
    # 73.2 of 79.2 GiB), inside the 10% margin (test_memo); the example's own 4,096 hold it.
    text = path.read_text(encoding="utf-8").replace("  seq_len: 4096", "  seq_len: 4608")
    spec = make_spec(text, EXAMPLES)
    planner = planner_for(spec, default_settings(), spec.plan)
    finetune, serve = planner.plan("finetune"), planner.plan("serve")
    assert serve is not None and serve.recommended is not None and serve.declared.rate == 0
    saving = saving_between(serve.declared, serve.recommended)
    assert saving is not None and saving.share == 0.0 and not saving.positive
    # Fine-tuning is declared on priced H100s (4 x 4.12 USD/h), not soundly at the 0.9 memory edge (GP202):
    # the free L4s that hold it soundly are recommended, and no saving is claimed against an unsound layout.
    assert finetune is not None and finetune.recommended is not None and not finetune.declared.sound
    assert finetune.recommended.layout.gpu.id == "l4" and finetune.recommended.rate == 0
    assert finetune.saving is None
