"""GP601/GP602 messages and boundaries with hand-derived figures (mutation campaign)."""

from __future__ import annotations

import dataclasses
import datetime

import yaml

from gpuplan.config import Settings
from gpuplan.linter import LintOptions, lint_bytes

TODAY = datetime.date(2026, 12, 2)


def lint(checkpoints: dict | None, tokens: int = 500_000_000, settings: Settings | None = None):
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
    options = LintOptions(today=TODAY, select=("GP601", "GP602"), settings=settings)
    return lint_bytes("spec.yaml", text.encode(), options)


def test_checkpoint_storage_message():
    # Llama 3.1 8B: 8,030,261,248 parameters x (2 B bf16 weights + 4 B fp32 master + 2 x 4 B AdamW states)
    # = 14 B each: 112,423,657,472 B = 112.4 GB a checkpoint; three 337,270,972,416 B = 337.3 GB; with 10%
    # spare 371.0 GB.
    (finding,) = lint({"every_hours": 1, "keep": 3, "storage_gb": 200}).findings
    assert finding.code == "GP601" and finding.pointer == "/finetune/checkpoints/storage_gb"
    assert finding.message == "3 resumable checkpoints of 112.4 GB need 337.3 GB; 200 GB is declared"
    assert finding.hint == "storage_gb: 371 (10% spare), or keep fewer"


def test_checkpoint_storage_keeps_one_by_default():
    # No keep: one checkpoint, 112.4 GB, over 100 GB; 112.4 x 1.1 = 123.7 -> 124.
    (finding,) = lint({"every_hours": 1, "storage_gb": 100}).findings
    assert finding.message == "1 resumable checkpoints of 112.4 GB need 112.4 GB; 100 GB is declared"
    assert finding.hint == "storage_gb: 124 (10% spare), or keep fewer"
    assert lint({"every_hours": 1, "storage_gb": 113}).findings == ()  # 112.4 GB fits in 113
    assert lint({"every_hours": 1}).findings == ()  # no storage declared: nothing to compare


def test_long_run_without_checkpoints_at_the_threshold():
    result = lint(None)
    hours = result.analysis.finetune.speed.hours
    settings = result.settings
    # Just under the run's hours: reported, with the hours rounded and the layout named.
    (finding,) = lint(None, settings=dataclasses.replace(settings, long_run_hours=hours * 0.999)).findings
    assert finding.code == "GP602" and finding.pointer == "/finetune/tokens"
    assert finding.message == f"the run takes about {hours:,.0f} hours on 8 x h100-sxm with no checkpoints declared"
    assert finding.hint == "add checkpoints: {every_hours: ..., keep: ..., storage_gb: ...}"
    # Exactly at the threshold (not above it) and with checkpoints declared: nothing.
    assert lint(None, settings=dataclasses.replace(settings, long_run_hours=hours)).findings == ()
    assert lint({"every_hours": 1}, settings=dataclasses.replace(settings, long_run_hours=hours * 0.999)).findings == ()
