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
from gpuplan.estimate.training_memory import estimate_training
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
