"""An evaluation forward between training steps (finetune.evaluation), derived by hand.

Llama 3.1 8B (vocabulary 128,256), LoRA on a bf16 base, bf16-mixed, one GPU, 2,048-token sequences, the
Trainer's loop. The Trainer evaluates under torch.no_grad() with its own batch (per_device_eval_batch_size,
8 by default): nothing is saved for backward, so its activations are the larger of one layer's tensors and the
loss's moment, where the bf16 logits (2 B), their fp32 copy (4 B, ForCausalLMLoss's ``logits.float()``) and
cross_entropy's fp32 log-softmax (4 B) are live at once: 10 bytes a token and vocabulary entry.
"""

from __future__ import annotations

import datetime

from hypothesis import given, settings
from hypothesis import strategies as st
from test_properties_memory import varied_setups
from training_jobs import training_setup, vary

from gpuplan.catalog import get_model
from gpuplan.estimate.training_memory import _step_read, estimate_training
from gpuplan.estimate.training_step import SimulatedStep
from gpuplan.linter import LintOptions, lint_bytes

VOCAB = 128_256
# A full fine-tune under DeepSpeed ZeRO-3 over eight GPUs, which casts the model itself (no autocast).
ZERO3_8_GPUS = {"method": "full", "precision": "bf16-mixed", "autocast": False, "sharding": "zero3", "gpus": 8}


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


def test_a_fused_loss_does_not_run_in_the_evaluation():
    # Liger's fused linear cross-entropy skips the logits only in training mode (lce_forward: skip_logits =
    # self.training and labels is not None): the evaluation makes them and the loss's fp32 copies as without it,
    # 16,384 x 128,256 x 10 B, while the training step's loss shrinks to a chunk.
    fused = estimate_training(_lora(eval_micro_batch=8, fused_loss=True), 0).phases
    assert fused["evaluation"]["activations"] == 16_384 * VOCAB * 10
    plain = estimate_training(_lora(eval_micro_batch=8), 0).phases
    assert sum(fused["forward"].values()) < sum(plain["forward"].values())


def test_zero3_keeps_its_gradient_buffer_through_the_evaluation():
    # ZeRO-3's flat gradient buffer lives from the optimizer's initialisation (stage3.py grad_partitions_flat_buffer)
    # and its units are gathered for the forward: the evaluation holds both, as the training forward does.
    arch = get_model("llama-3.1-8b").architecture
    memory = estimate_training(training_setup(architecture=arch, eval_micro_batch=8, **ZERO3_8_GPUS), 0)
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
    # peak; the findings point at the evaluation. One L40S cannot hold it at any setting the planner tries (no fused
    # loss runs in evaluation), so GP301 names the parallel layout that can, and where the one GPU falls short.
    result = lint_bytes("spec.yaml", SPEC.encode(), LintOptions(today=datetime.date(2026, 12, 6)))
    memory = result.analysis.finetune.memory
    assert memory.peak_phase == "evaluation"
    assert memory.phases["evaluation"]["activations"] == 32_768 * VOCAB * 10
    by_code = {finding.code: finding for finding in result.findings}
    assert "GP201" not in by_code and " at the evaluation peak on one l40s " in by_code["GP301"].message
    assert by_code["GP205"].pointer == "/finetune/evaluation"
    assert by_code["GP205"].hint == "try a smaller evaluation.micro_batch than 8"
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


# compute_metrics: the Trainer's evaluation_loop keeps each batch's predictions and labels, gathered from every rank
# (gather_for_metrics), concatenated on the GPU (EvalLoopContainer.add -> nested_concat -> torch.cat). Under autocast
# (these jobs: bf16-mixed) accelerate hands the model's logits back in fp32 (convert_outputs_to_fp32). One GPU's batch
# of 8 x 2,048 tokens: fp32 logits and int64 labels, 16,384 x (128,256 x 4 + 8) = 8,405,516,288 B.
BATCH = 8 * 2048 * (VOCAB * 4 + 8)
LOSS_MOMENT = 8 * 2048 * VOCAB * 10  # the evaluation forward's loss moment (the first test): 21,013,463,040 B


def _kept(**evaluation: object):
    settings = {"seq_len": 2048, "checkpointing": "full", "eval_micro_batch": 8, "eval_samples": 100}
    return estimate_training(_lora(**{**settings, **evaluation}), 0).phases["evaluation"]


def test_compute_metrics_keeps_every_batchs_logits_until_the_evaluation_ends():
    # 100 samples in batches of 8: 13 batches. At the last one the 12 kept batches, the gathered 13th and their
    # concatenation (13 batches) live at once: 26 x 8,405,516,288 = 218,543,423,488 B, above the last forward's
    # moment (its loss, 21,013,463,040 B, beside the 12 kept), which then holds none of its own.
    assert BATCH == 8_405_516_288
    phase = _kept(eval_predictions="logits")
    assert phase["predictions"] == 26 * BATCH == 218_543_423_488
    assert "activations" not in phase and "autocast_weight_copies" not in phase
    # Moved to the host every 2 batches: the second's concatenation holds 1 + 1 + 2 batches, 33,622,065,152 B, above
    # the forward's moment beside one kept batch (21,013,463,040 + 8,405,516,288 = 29,418,979,328 B).
    phase = _kept(eval_predictions="logits", eval_accumulation_steps=2)
    assert (phase["predictions"], "activations" in phase) == (4 * BATCH, False)
    # Every batch: a window's first batch is kept as it is (no concatenation), and on one GPU the gather hands it
    # back: one batch, below the forward's moment, which holds nothing kept.
    phase = _kept(eval_predictions="logits", eval_accumulation_steps=1)
    assert (phase["activations"], "predictions" in phase) == (LOSS_MOMENT, False)
    # Token ids (preprocess_logits_for_metrics returning argmax) and labels: 8 + 8 B a token, 262,144 B a batch, never
    # widened; the forward's moment keeps 12 of them.
    phase = _kept(eval_predictions="argmax")
    assert (phase["activations"], phase["predictions"]) == (LOSS_MOMENT, 12 * 16 * 8 * 2048)
    # Without compute_metrics nothing is kept, whatever the set's size.
    assert "predictions" not in _kept(eval_predictions="none")


def test_every_rank_keeps_all_ranks_predictions():
    # Four data-parallel GPUs: a batch step evaluates 4 x 8 sequences, ceil(100 / 32) = 4 batches, and gathers all
    # four ranks' logits and labels onto each: 4 x 8,405,516,288 B a batch; the last concatenation holds 2 x 4 of them.
    phase = _kept(eval_predictions="logits", gpus=4)
    assert phase["predictions"] == 2 * 4 * 4 * BATCH
    # Every batch moved to the host: the gather copies the rank's own batch into the four ranks' one, 5 batches' bytes.
    phase = _kept(eval_predictions="logits", gpus=4, eval_accumulation_steps=1)
    assert phase["predictions"] == 5 * BATCH


def test_the_kept_predictions_and_their_concatenation_map_segments_of_their_own():
    # In the allocator's model the 12 kept batches are one tensor, taken before the last batch's forward, where no
    # cached block holds it: 12 x 8,405,516,288 = 100,866,195,456 B, a segment of 48,097 pages of 2 MiB. The forward's
    # logits, fp32 copy and log-softmax map theirs as without predictions; once freed, the gathered batch is 131,072 B
    # (its labels) larger than the freed fp32 blocks (16,384 x 128,256 x 4 B: 4,008 pages exactly), so it maps 4,009
    # pages, and the concatenation of 13 batches, 109,271,711,744 B, 52,105 pages.
    kept = _lora(seq_len=2048, checkpointing="full", eval_micro_batch=8, eval_samples=100, eval_predictions="logits")
    plain = _lora(seq_len=2048, checkpointing="full", eval_micro_batch=8, eval_samples=100)
    pages = 2 * 1024 * 1024
    assert (12 * BATCH, 13 * BATCH) == (100_866_195_456, 109_271_711_744)
    assert _simulated_reserved(kept, True) - _simulated_reserved(plain, True) == (48_097 + 4_009 + 52_105) * pages


def test_the_evaluation_builds_the_key_value_cache_the_config_keeps():
    # Eval mode leaves config.use_cache on (transformers drops it under gradient checkpointing in training alone), so
    # the forward builds every layer's keys and values: Llama 3.1 8B, 32 layers x 16,384 tokens x 2 x 1,024 (8 KV
    # heads x 128) x 2 B = 2,147,483,648 B beside the loss's moment, whatever the training step's recompute saved.
    phase = _kept(use_cache=True)
    assert phase["activations"] == LOSS_MOMENT + 32 * 16_384 * 2 * 1_024 * 2 == 23_160_946_688


def test_the_concatenation_holds_what_stays_between_steps():
    # After the evaluation's forward the units are as between steps and ZeRO-3's gradient buffer stays. Without
    # autocast (DeepSpeed casts the model itself) the logits come back in bf16: 16,384 x (128,256 x 2 + 8) =
    # 4,202,823,680 B a rank's batch. Eight ranks: 1,000 samples make ceil(1,000 / 64) = 16 batches of 8 of them on
    # each GPU; the last concatenation holds 2 x 16.
    arch = get_model("llama-3.1-8b").architecture
    evaluation = {"eval_micro_batch": 8, "eval_samples": 1000, "eval_predictions": "logits", "seq_len": 2048}
    phases = estimate_training(training_setup(architecture=arch, **ZERO3_8_GPUS, **evaluation), 0).phases
    phase = phases["evaluation"]
    assert phase["predictions"] == 2 * 16 * 8 * 4_202_823_680
    assert "gathered_parameters" not in phase and "gathered_parameters" not in phases["optimizer_step"]
    assert phase["gradients"] == phases["optimizer_step"]["gradients"] == 2 * 8_030_261_248 // 8


def test_predictions_kept_without_the_sets_size_are_refused():
    spec = SPEC.replace("evaluation: {}", "evaluation: {predictions: logits}")
    result = lint_bytes("spec.yaml", spec.encode(), LintOptions(today=datetime.date(2026, 12, 7)))
    assert [(f.code, f.pointer) for f in result.findings if f.code == "GP025"] == [
        ("GP025", "/finetune/evaluation/predictions")
    ]
    assert "evaluation.samples" in next(f.hint for f in result.findings if f.code == "GP025")
    spec = SPEC.replace("evaluation: {}", "evaluation: {predictions: logits, samples: 64}")
    result = lint_bytes("spec.yaml", spec.encode(), LintOptions(today=datetime.date(2026, 12, 7)))
    by_code = {finding.code: finding for finding in result.findings}
    assert "GP025" not in by_code
    assert "predictions the evaluation keeps" in by_code["GP205"].message
    assert by_code["GP205"].hint.startswith("try evaluation.accumulation_steps: 1, evaluation.predictions: argmax")


@settings(max_examples=60, deadline=None)
@given(varied_setups(), st.sampled_from([1, 8]), st.sampled_from([1, 9, 1000]))
def test_keeping_more_predictions_never_lowers_the_evaluation(setup, micro_batch, samples):
    # Across the strategies' models (MoE, MLA, hybrids, tied heads, pipelines, sharding): the evaluation keeps
    # nothing without compute_metrics, token ids below logits, and a window cut short by accumulation_steps below
    # the whole evaluation. (The device figure adds the allocator's cache, which blocks held longer can shrink a
    # little, SimulatedStep's docstring says why: the phase is held.)
    def evaluation(**changes: object) -> int:
        memory = estimate_training(vary(setup, eval_micro_batch=micro_batch, eval_samples=samples, **changes), 0)
        return sum(memory.phases["evaluation"].values())

    plain, argmax, logits = (evaluation(eval_predictions=kept) for kept in ("none", "argmax", "logits"))
    flushed = evaluation(eval_predictions="logits", eval_accumulation_steps=1)
    assert plain <= argmax <= logits
    assert plain <= flushed <= logits
