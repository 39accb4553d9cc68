"""An evaluation forward between training steps (finetune.evaluation), derived by hand.

Llama 3.1 8B (vocabulary 128,256), LoRA on a bf16 base, bf16-mixed, one GPU, 2,048-token sequences, the
Trainer's loop. The Trainer evaluates under torch.no_grad() with its own batch (per_device_eval_batch_size,
8 by default): nothing is saved for backward, so its activations are the larger of one layer's tensors and the
loss's moment, where the bf16 logits (2 B), their fp32 copy (4 B, ForCausalLMLoss's ``logits.float()``) and
cross_entropy's fp32 log-softmax (4 B) are live at once: 10 bytes a token and vocabulary entry.
"""

from __future__ import annotations

import datetime

from training_jobs import training_setup

from gpuplan.catalog import get_model
from gpuplan.estimate.training_memory import _step_read, estimate_training
from gpuplan.estimate.training_step import SimulatedStep
from gpuplan.linter import LintOptions, lint_bytes

VOCAB = 128_256


def _lora(**changes: object):
    arch = get_model("llama-3.1-8b").architecture
    settings = {"method": "lora", "precision": "bf16-mixed", "seq_len": 2048, "loop": "trainer"}
    return training_setup(architecture=arch, model_dtype_bytes=2, **{**settings, **changes})


def test_the_evaluation_holds_the_logits_of_its_own_batch_and_no_gradient():
    # 8 sequences x 2,048 tokens = 16,384 tokens x 128,256 x 10 B = 21,013,463,040 bytes at the loss, beside the
    # same weights and optimizer states as the training forward, and no gradient (the step freed them).
    memory = estimate_training(_lora(eval_micro_batch=8), 0)
    evaluation, forward = memory.phases["evaluation"], memory.phases["forward"]
    assert evaluation["activations"] == 16_384 * VOCAB * 10 == 21_013_463_040
    assert (evaluation["weights"], evaluation["optimizer"]) == (forward["weights"], forward["optimizer"])
    assert "gradients" not in evaluation
    # Its own sequence length: 8 x 512 = 4,096 tokens, a quarter of that.
    shorter = estimate_training(_lora(eval_micro_batch=8, eval_seq_len=512), 0).phases["evaluation"]
    assert shorter["activations"] == 4_096 * VOCAB * 10
    # Without an evaluation there is no such phase, and the training phases are the same either way.
    plain = estimate_training(_lora(), 0).phases
    assert "evaluation" not in plain and {k: v for k, v in memory.phases.items() if k != "evaluation"} == plain


def test_zero3_keeps_its_gradient_buffer_through_the_evaluation():
    # ZeRO-3's flat gradient buffer lives from the optimizer's initialisation (stage3.py grad_partitions_flat_buffer)
    # and its units are gathered for the forward: the evaluation holds both, as the training forward does.
    arch = get_model("llama-3.1-8b").architecture
    full = {"method": "full", "precision": "bf16-mixed", "autocast": False, "sharding": "zero3", "gpus": 8}
    memory = estimate_training(training_setup(architecture=arch, eval_micro_batch=8, **full), 0)
    evaluation, forward = memory.phases["evaluation"], memory.phases["forward"]
    assert evaluation["gradients"] == forward["gradients"] == 2 * 8_030_261_248 // 8
    assert evaluation["gathered_parameters"] == forward["gathered_parameters"]


SPEC = """\
version: 1
name: eval
model: {id: llama-3.1-8b}
finetune:
  method: lora
  precision: bf16-mixed
  seq_len: 4096
  activation_checkpointing: full
  loop: trainer
  evaluation: {}
  hardware: {gpu: l40s, count: 1}
"""


def test_a_spec_evaluating_at_the_trainers_default_batch_peaks_there():
    # evaluation: {} takes the Trainer's batch of 8 (the schema's default) at the training seq_len: 32,768 tokens x
    # 128,256 x 10 B = 42,026,926,080 bytes of logits and loss copies, far above the checkpointed training step's
    # peak; the findings say where the peak is and point at the evaluation.
    result = lint_bytes("spec.yaml", SPEC.encode(), LintOptions(today=datetime.date(2026, 12, 6)))
    memory = result.analysis.finetune.memory
    assert memory.peak_phase == "evaluation"
    assert memory.phases["evaluation"]["activations"] == 32_768 * VOCAB * 10
    by_code = {finding.code: finding for finding in result.findings}
    assert "at the evaluation peak" in by_code["GP201"].message
    assert by_code["GP205"].pointer == "/finetune/evaluation"
    assert by_code["GP205"].hint == "try fused_loss: true, a smaller evaluation.micro_batch than 8"
    smaller = SPEC.replace("evaluation: {}", "evaluation: {micro_batch: 1}")
    memory = lint_bytes("spec.yaml", smaller.encode(), LintOptions(today=datetime.date(2026, 12, 6)))
    assert memory.analysis.finetune.memory.peak_phase != "evaluation"


def _simulated_reserved(setup, evaluation: bool) -> int:
    states, acts, evaluated = _step_read(setup)[:3]
    step = SimulatedStep(setup, states, acts, evaluated if evaluation else None)
    step.run()
    return step.cache.reserved_peak()


def test_the_evaluations_logits_take_segments_of_their_own_beside_the_cache_training_left():
    # The caching allocator keeps the steps' freed blocks reserved, and a block serves only a request it can hold:
    # trained at 2 x 4,096 tokens with full recompute, the largest block training frees is its fp32 logits copy,
    # 8,192 x 128,256 x 4 B = 4,202,692,608 B; the evaluation of 8 x 4,096 = 32,768 tokens holds its bf16 logits
    # (8,405,385,216 B), their fp32 copy and the log-softmax (16,810,770,432 B each) at once, none of which fits
    # there, each a whole number of 2 MiB pages (128,256 x 65,536 B = 4,008 x 2 MiB): they add exactly their
    # 32,768 x 128,256 x 10 = 42,026,926,080 B to the reserved peak. A layer's tensors in the evaluation forward
    # (the largest, an MLP activation, 32,768 x 14,336 x 2 B = 939,524,096 B) are cut from blocks training left
    # and freed whole again before the loss, so they add nothing.
    setup = _lora(micro_batch=2, seq_len=4096, checkpointing="full", eval_micro_batch=8)
    assert _simulated_reserved(setup, True) - _simulated_reserved(setup, False) == 32_768 * VOCAB * 10
    assert 32_768 * VOCAB * 10 == 42_026_926_080
    # At the training's own batch every tensor the evaluation takes fits a block the steps left: nothing is added.
    same = _lora(micro_batch=2, seq_len=4096, checkpointing="full", eval_micro_batch=2)
    assert _simulated_reserved(same, True) == _simulated_reserved(same, False)
    # The device figure holds them: the allocator's cache above the evaluation's peak is what training left,
    # where it was the evaluation's live bytes above training's peak that the phase model alone could count.
    memory = estimate_training(setup, 0)
    assert memory.peak_phase == "evaluation"
    assert memory.reserved >= _simulated_reserved(setup, True)
