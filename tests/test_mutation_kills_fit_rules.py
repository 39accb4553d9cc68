"""GP202/GP203/GP204/GP205: each rule's comparison at its threshold and its message (mutation campaign).

A rule compares an estimate (pinned elsewhere: test_mutation_kills_training.py, _serving.py) with a
threshold. These tests take the estimate as the input and move the threshold to either side of it, so
a flipped comparison, a lost factor of 100 or a changed share is caught; messages are compared whole.
"""

from __future__ import annotations

import dataclasses
import datetime

import yaml

from gpuplan.linter import LintOptions, lint_bytes
from gpuplan.units import format_gib

TODAY = datetime.date(2026, 12, 2)
SPEC = {
    "version": 1,
    "name": "t",
    "model": {"id": "llama-3.1-8b"},
    "finetune": {"method": "lora", "seq_len": 2048, "hardware": {"gpu": "h100-sxm"}},
    "serve": {"context": 8192, "concurrency": 8, "hardware": {"gpu": "h100-sxm"}},
}


def lint(select: tuple[str, ...], document: dict = SPEC, **thresholds):
    first = lint_bytes("spec.yaml", yaml.safe_dump(document).encode(), LintOptions(today=TODAY, select=select))
    settings = dataclasses.replace(first.settings, **thresholds) if thresholds else first.settings
    return lint_bytes(
        "spec.yaml", yaml.safe_dump(document).encode(), LintOptions(today=TODAY, select=select, settings=settings)
    )


def test_low_headroom_at_the_margin():
    analysis = lint(("GP202",)).analysis
    f, s = analysis.finetune, analysis.serve
    train_free = (f.gpu.usable_bytes - f.memory.per_gpu) / f.gpu.usable_bytes  # about 0.50
    serve_free = (s.memory.budget - s.memory.per_gpu) / s.memory.budget  # about 0.65
    assert lint(("GP202",)).findings == ()  # the 10% default margin
    # A margin just above the fine-tuning job's free share (in per cent) reports it, not the serving job.
    (finding,) = lint(("GP202",), headroom_pct=train_free * 100 * 1.001).findings
    free = f.gpu.usable_bytes - f.memory.per_gpu
    assert finding.pointer == "/finetune/hardware/gpu"
    assert finding.message == (
        f"fine-tuning leaves {format_gib(free)} of {format_gib(f.gpu.usable_bytes)} free on h100-sxm "
        f"({train_free:.0%}, margin {train_free * 1.001:.0%})"
    )
    assert finding.hint == "activation checkpointing, a fused loss or shorter sequences buy headroom"
    # Just above the serving job's share reports both; just below it, only fine-tuning.
    both = lint(("GP202",), headroom_pct=serve_free * 100 * 1.001).findings
    assert [x.pointer for x in both] == ["/finetune/hardware/gpu", "/serve/concurrency"]
    assert both[1].message == (
        f"serving leaves {format_gib(s.memory.budget - s.memory.per_gpu)} of the {format_gib(s.memory.budget)} "
        f"engine budget free on h100-sxm ({serve_free:.0%}, margin {serve_free * 1.001:.0%})"
    )
    assert both[1].hint == "an fp8 KV cache halves the cache; or lower concurrency or context"
    assert len(lint(("GP202",), headroom_pct=serve_free * 100 * 0.999).findings) == 1


def test_activations_share_at_the_threshold():
    # Peak phase of the LoRA job: backward, activations + temporaries over the per-GPU peak that the estimate
    # and GP201 state (framework overhead included; about 60%).
    f = lint(("GP205",)).analysis.finetune
    phase = f.memory.phases[f.memory.peak_phase]
    share = (phase["activations"] + phase["temporaries"]) / f.memory.per_gpu
    assert lint(("GP205",), activations_share=share).findings == ()  # at the threshold: not above it
    # Between the share of the whole peak and the share of the tensors alone (without the 1 GiB overhead):
    # silent, so the share is of the peak the reader sees.
    tensor_share = (phase["activations"] + phase["temporaries"]) / f.memory.tensor_peak
    assert lint(("GP205",), activations_share=(share + tensor_share) / 2).findings == ()
    (finding,) = lint(("GP205",), activations_share=share * 0.999).findings
    assert finding.pointer == "/finetune/seq_len"
    assert finding.message == (
        f"activations and loss temporaries are {share:.0%} of the {format_gib(f.memory.per_gpu)} peak per GPU"
    )
    assert finding.hint == (
        "try activation_checkpointing: full, fused_loss: true, a shorter seq_len than 2,048 or a smaller micro_batch"
    )
    # Switches already on are not suggested again.
    document = {**SPEC, "finetune": {**SPEC["finetune"], "activation_checkpointing": True, "fused_loss": True}}
    hints = [x.hint for x in lint(("GP205",), document, activations_share=0.0).findings]
    assert hints == ["try a shorter seq_len than 2,048 or a smaller micro_batch"]


def test_full_fine_tune_that_fits_as_an_adapter():
    # Full fine-tuning of the 8B on 8 H100s: LoRA of the same shape fits one H100; one finding, LoRA's.
    document = {
        "version": 1,
        "name": "t",
        "model": {"id": "llama-3.1-8b"},
        "finetune": {
            "method": "full",
            "seq_len": 2048,
            "sharding": "zero3",
            "hardware": {"gpu": "h100-sxm", "count": 8},
        },
    }
    (finding,) = lint(("GP204",), document).findings
    assert finding.pointer == "/finetune/method"
    assert finding.hint == "consider method: lora if adapter quality suffices"
    assert (
        finding.message.startswith("full fine-tuning needs ")
        and " per GPU on 8 x h100-sxm; lora (rank 16) needs " in finding.message
    )
    assert finding.message.endswith(" on 1 x h100-sxm")
    # A LoRA job, or a full one that fits its single GPU, is not reported.
    assert lint(("GP204",)).findings == ()
    small = {
        **document,
        "model": {"id": "llama-3.2-1b"},
        "finetune": {"method": "full", "seq_len": 512, "hardware": {"gpu": "h100-sxm"}},
    }
    assert lint(("GP204",), small).findings == ()


def test_kv_capacity_message():
    # Weights fit but 64 sequences of 131,072 tokens do not: the message names what is left and what fits.
    document = {**SPEC, "serve": {"context": 131072, "concurrency": 64, "hardware": {"gpu": "h100-sxm"}}}
    result = lint(("GP203",), document)
    (finding,) = result.findings
    s = result.analysis.serve
    assert finding.pointer == "/serve/concurrency"
    assert finding.message == (
        f"64 x 131,072 tokens need {format_gib(s.memory.kv_cache)} of KV cache per GPU; "
        f"{format_gib(s.memory.kv_available)} is left after weights and runtime on h100-sxm — at most "
        f"{s.max_concurrency} sequences at 131,072 tokens, or {s.max_context:,} tokens at 64"
    )
    assert s.max_concurrency == 3  # the plural the message words: 3 sequences
    assert lint(("GP203",)).findings == ()  # 8 x 8,192 fits


def test_does_not_fit_messages_name_the_peak_the_shortfall_and_the_hint():
    # Full fine-tuning of Llama-3.1-70B on 2 x h100-sxm (TP 2): about 16 B per parameter of weights,
    # gradients and Adam states over two ranks (70.6e9 x 16 / 2 = 564 GB = 526 GiB) plus activations,
    # peaking at the optimizer step: far over 79.2 GiB. Serving it on 2 x l4 (TP 2): its 141 GB of
    # weights alone are over the two cards' engine budgets. The figures are the estimate's (pinned in
    # test_mutation_kills_training.py / _serving.py); these pin how the messages use them.
    document = {
        **SPEC,
        "model": {"id": "llama-3.1-70b"},
        "finetune": {
            "method": "full",
            "seq_len": 2048,
            "hardware": {"gpu": "h100-sxm", "count": 2, "tensor_parallel": 2},
        },
        "serve": {"context": 8192, "concurrency": 8, "hardware": {"gpu": "l4", "count": 2, "tensor_parallel": 2}},
    }
    result = lint(("GP201",), document)
    f, s = result.analysis.finetune, result.analysis.serve
    finetune, serve = sorted(result.findings, key=lambda finding: finding.pointer)
    assert f.memory.peak_phase == "optimizer_step"  # the message spells it with a space
    assert finetune.pointer == "/finetune/hardware/gpu"
    assert finetune.message == (
        f"fine-tuning needs {format_gib(f.memory.per_gpu)} per GPU at the optimizer step peak; h100-sxm has "
        f"79.2 GiB usable — short by {format_gib(f.memory.per_gpu - f.gpu.usable_bytes)}"
    )
    assert finetune.hint.startswith("on h100-sxm: ") and "gpuplan plan compares every allowed GPU" in finetune.hint
    # Before any KV cache: the whole per-GPU figure less the KV cache the 8 sequences would need.
    assert s.memory.kv_cache > 0 and serve.pointer == "/serve/hardware/gpu"
    assert serve.message.startswith(
        f"serving needs {format_gib(s.memory.per_gpu - s.memory.kv_cache)} per GPU before any KV cache "
        f"(weights {format_gib(s.memory.weights)}); l4 gives the engine {format_gib(s.memory.budget)}"
    )
    assert serve.hint.startswith("on l4: ")


def test_one_gpu_that_more_of_the_same_would_hold_is_gp301_not_gp201():
    # Full fine-tuning of Llama-3.1-8B on one h100-sxm: about 16 B per parameter (8.0e9 x 16 = 128 GB,
    # 150.6 GiB with activations) against 79.2 GiB usable; more h100-sxm with sharding hold it, so the
    # finding is GP301 (parallelism needed), and GP201 (a GPU too small at any count) stays silent.
    document = {**SPEC, "finetune": {"method": "full", "seq_len": 2048, "hardware": {"gpu": "h100-sxm"}}}
    document.pop("serve")
    assert [finding.code for finding in lint(("GP201", "GP301"), document).findings] == ["GP301"]
