"""GP501-GP504: costs against budgets and price records, hand-derived (mutation campaign)."""

from __future__ import annotations

import datetime

import yaml

from gpuplan.linter import LintOptions, lint_bytes

TODAY = datetime.date(2026, 12, 2)


def lint(budget: dict, select: tuple[str, ...], serve_gpu: str = "h100-sxm", finetune: bool = False):
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
    return lint_bytes("spec.yaml", yaml.safe_dump(document).encode(), LintOptions(today=TODAY, select=select))


PRICED = {"currency": "USD", "prices": {"h100-sxm": 2.0}, "prices_date": "2026-11-30"}


def test_serving_over_budget():
    # 2 replicas x 1 H100 at 2.00 per GPU-hour x 730 hours a month = 2,920 USD.
    (finding,) = lint({**PRICED, "serve_monthly": 2000}, ("GP502",)).findings
    assert finding.pointer == "/budget/serve_monthly"
    assert finding.message == (
        "serving costs 2,920 USD a month (2 x h100-sxm at 2.00/GPU-hour x 730 h) — over the budget of 2,000 USD by "
        "920 USD"
    )
    assert lint({**PRICED, "serve_monthly": 2920}, ("GP502",)).findings == ()  # at the budget: not over it
    assert lint(PRICED, ("GP502",)).findings == ()  # no budget declared


def test_finetune_over_budget():
    result = lint({**PRICED, "finetune_total": 1}, ("GP501",), finetune=True)
    (finding,) = result.findings
    f = result.analysis.finetune
    # Cost = hours x 1 GPU x 2.00: the figures come from the speed model (pinned elsewhere).
    assert f.cost == f.speed.hours * 1 * 2.0
    assert finding.pointer == "/budget/finetune_total"
    # Amounts under 100 are shown to the cent, and the overrun is the difference of the amounts shown:
    # 3.99 - 1.00 = 2.99 (the old message said "about 4 USD ... over the budget of 1 by 3").
    assert round(f.cost, 2) == 3.99
    assert finding.message == (
        "fine-tuning costs about 3.99 USD (2.0 h x 1 x h100-sxm at 2.00/GPU-hour) "
        "— over the budget of 1.00 USD by 2.99 USD"
    )
    assert lint({**PRICED, "finetune_total": f.cost}, ("GP501",), finetune=True).findings == ()


def test_missing_and_stale_prices():
    # An unknown currency leaves the catalog GPU unpriced: both jobs' GPUs are reported.
    findings = lint({"currency": "XTS"}, ("GP503",), finetune=True).findings
    assert [(x.pointer, x.message) for x in findings] == [
        ("/finetune/hardware/gpu", "no price per GPU-hour for h100-sxm in XTS: cost and budget are unchecked"),
        ("/serve/hardware/gpu", "no price per GPU-hour for h100-sxm in XTS: cost and budget are unchecked"),
    ]
    assert findings[0].hint == "add budget.prices: {h100-sxm: <price>} with prices_date"
    # A declared price quoted 2026-09-03 is 90 days old on 2026-12-02: at the limit, not over it.
    assert lint({**PRICED, "prices_date": "2026-09-03"}, ("GP504",)).findings == ()
    (stale,) = lint({**PRICED, "prices_date": "2026-09-02"}, ("GP504",), finetune=True).findings
    assert stale.pointer == "/budget/prices_date"  # one finding for the GPU both jobs use
    assert (
        stale.message == "the h100-sxm price (2.00/GPU-hour, quoted 2026-09-02) rests on a quote 91 days old (limit 90)"
    )
    assert stale.hint == "refresh budget.prices with a current quote"
    (undated,) = lint({"currency": "USD", "prices": {"h100-sxm": 2.0}}, ("GP504",)).findings
    assert undated.pointer == "/budget/prices/h100-sxm"
    assert undated.message == "the h100-sxm price (2.00/GPU-hour) is undated: its age cannot be checked"
    assert undated.hint == "add budget.prices_date: YYYY-MM-DD, the day the prices were quoted"
