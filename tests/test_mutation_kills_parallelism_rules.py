"""GP302 for fine-tuning: which setting the finding points at, and where (mutation campaign)."""

from __future__ import annotations

import datetime

from gpuplan.linter import LintOptions, lint_bytes

TODAY = datetime.date(2026, 12, 2)
SPEC = """\
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


def lint(sharding: str, tensor_parallel: int):
    text = SPEC % (sharding, tensor_parallel)
    return lint_bytes("spec.yaml", text.encode(), LintOptions(today=TODAY, select=("GP302",))).findings


def test_unneeded_sharding_points_at_sharding():
    # A 1B LoRA job fits one H100 many times over: ZeRO-3 over 2 GPUs only adds traffic.
    (finding,) = lint("zero3", 1)
    assert finding.pointer == "/finetune/sharding"
    assert (finding.line, finding.col) == (7, 13)  # the value on the key's line
    assert finding.message.startswith("sharding zero3 is not needed: plain data parallelism on 2 x h100-sxm needs ")
    assert finding.hint == "drop it; it only adds communication"


def test_unneeded_tensor_parallelism_points_at_the_hardware_block():
    (finding,) = lint("none", 2)
    assert finding.pointer == "/finetune/hardware"
    # The hardware mapping spans lines 9-11: the finding sits on its key, line 8, column 3.
    assert (finding.line, finding.col) == (8, 3)
    assert finding.message.startswith("tensor_parallel 2 is not needed: plain data parallelism on 2 x h100-sxm")
