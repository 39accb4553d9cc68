"""Properties of gpuplan diff over generated specs: diff(A, A) is empty, diff(B, A) undoes diff(A, B), and
totals are the sums of the per-spec figures.

The strategy reaches the hard estimator cases: MoE (Mixtral), MLA (DeepSeek-V3), sliding windows (Gemma 2,
Mistral v0.1), tied embeddings (Llama 3.2 1B), pipeline parallelism, gradient accumulation, a fused loss,
sharding, unpriced GPUs and specs that do not fit or do not resolve.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.diff.build import diff_files
from gpuplan.diff.guardrails import Guardrails, breaches
from gpuplan.diff.model import COSTS, DiffResult

MODELS = ("llama-3.2-1b", "llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "gemma-2-9b", "mistral-7b-v0.1", "phi-4")
GPUS = ("h100-sxm", "h200-sxm", "l40s", "l4", "a100-sxm-80gb", "mi300x", "no-such-gpu")  # mi300x has no price


@st.composite
def specs(draw: st.DrawFn) -> str:
    model = draw(st.sampled_from(MODELS))
    lines = ["version: 1", "name: generated", f"model: {{id: {model}}}"]
    if draw(st.booleans()):
        pp = draw(st.sampled_from((1, 1, 2)))
        tp = draw(st.sampled_from((1, 2, 4)))
        count = tp * pp * draw(st.sampled_from((1, 2)))
        lines += [
            "finetune:",
            f"  method: {draw(st.sampled_from(('full', 'lora', 'qlora')))}",
            f"  seq_len: {draw(st.sampled_from((512, 2048, 8192)))}",
            f"  micro_batch: {draw(st.integers(1, 4))}",
            f"  gradient_accumulation: {draw(st.sampled_from((1, 8)))}",
            f"  activation_checkpointing: {str(draw(st.booleans())).lower()}",
            f"  fused_loss: {str(draw(st.booleans())).lower()}",
            f"  sharding: {draw(st.sampled_from(('none', 'zero3')))}",
        ]
        if draw(st.booleans()):
            lines.append(f"  tokens: {draw(st.sampled_from((10**7, 10**9)))}")
        gpu = draw(st.sampled_from(GPUS))
        lines.append(f"  hardware: {{gpu: {gpu}, count: {count}, tensor_parallel: {tp}, pipeline_parallel: {pp}}}")
    if draw(st.booleans()) or lines[-1].startswith("model"):
        tp = draw(st.sampled_from((1, 2, 4, 8)))
        lines += [
            "serve:",
            f"  context: {draw(st.sampled_from((2048, 8192, 32768)))}",
            f"  concurrency: {draw(st.sampled_from((1, 8, 64)))}",
            f"  kv_cache_dtype: {draw(st.sampled_from(('auto', 'fp8')))}",
            f"  quantization: {draw(st.sampled_from(('none', 'fp8', 'int4-awq')))}",
            f"  hardware: {{gpu: {draw(st.sampled_from(GPUS))}, count: {tp * draw(st.sampled_from((1, 2)))}, "
            f"tensor_parallel: {tp}}}",
        ]
    budget = []
    if draw(st.booleans()):
        budget.append(f"prices: {{h100-sxm: {draw(st.sampled_from((1.5, 2.75, 4.12)))}}}")
    if draw(st.booleans()):
        budget.append(f"term_months: {draw(st.sampled_from((1, 12, 36)))}")  # the term cost's multiplier
    if budget:
        lines.append(f"budget: {{{', '.join(budget)}}}")
    return "\n".join(lines) + "\n"


def diff_texts(*pairs: tuple[str, str]) -> DiffResult:
    """One diff per pair of spec texts, merged into a single result (as several specs of one change)."""
    changes = []
    with tempfile.TemporaryDirectory() as folder:
        for index, (old, new) in enumerate(pairs):
            base, head = Path(folder, f"base{index}.yaml"), Path(folder, f"head{index}.yaml")
            base.write_text(old)
            head.write_text(new)
            result = diff_files(str(base), str(head))
            changes.extend(result.changes)
    return DiffResult(result.base, result.head, tuple(changes))


NO_GUARDRAILS = Guardrails(None, None, True, True, "always")


@settings(max_examples=25)
@given(specs())
def test_diff_of_a_spec_with_itself_has_no_deltas(spec: str):
    result = diff_texts((spec, spec))
    (change,) = result.changes
    assert change.status == "unchanged" and not change.material
    assert not change.findings_added and not change.findings_resolved and not change.fields_changed
    for key in COSTS:
        assert change.cost_delta(key) in (0, None)
    for job, figures in (change.after.jobs if change.after else {}).items():
        for key in figures:
            assert change.figure_delta(job, key) in (0, None)
    assert breaches(result, NO_GUARDRAILS) == []  # exit 0 under every guardrail


@settings(max_examples=25)
@given(specs(), specs())
def test_reversed_diff_has_opposite_deltas(old: str, new: str):
    (forward,) = diff_texts((old, new)).changes
    (backward,) = diff_texts((new, old)).changes
    for key in COSTS:
        there, back = forward.cost_delta(key), backward.cost_delta(key)
        assert (there is None) == (back is None)
        assert there is None or there == -back
    for job in {*forward.before.jobs, *forward.after.jobs}:
        figures = (forward.after.jobs.get(job) or forward.before.jobs[job]).keys()
        for key in figures:
            there, back = forward.figure_delta(job, key), backward.figure_delta(job, key)
            assert there is None or there == -back, (job, key)
    # the verdicts are totally ordered: a change of verdict is worse one way and better the other
    assert (backward.verdict_before, backward.verdict_after) == (forward.verdict_after, forward.verdict_before)
    if forward.verdict_before == forward.verdict_after:
        assert not forward.verdict_worsened and not backward.verdict_worsened
    else:
        assert forward.verdict_worsened != backward.verdict_worsened
    assert {(f.code, f.pointer) for f in forward.findings_added} == {
        (f.code, f.pointer) for f in backward.findings_resolved
    }
    assert [(f.json_pointer, f.before, f.after) for f in forward.fields_changed] == [
        (f.json_pointer, f.after, f.before) for f in backward.fields_changed
    ] or {f.json_pointer for f in forward.fields_changed} == {f.json_pointer for f in backward.fields_changed}


@settings(max_examples=15)
@given(st.lists(st.tuples(specs(), specs()), min_size=1, max_size=4))
def test_totals_are_the_sums_of_the_parts(pairs: list[tuple[str, str]]):
    result = diff_texts(*pairs)
    (totals,) = result.totals  # all generated specs are in USD
    for figure, key in ((totals.monthly, "monthly_cost"), (totals.run, "run_cost"), (totals.term, "term_cost")):
        costed = [c for c in result.changes if c.cost_before(key) is not None and c.cost_after(key) is not None]
        assert figure.before == round(sum(c.cost_before(key) for c in costed), 2)
        assert figure.after == round(sum(c.cost_after(key) for c in costed), 2)
        assert figure.delta == round(figure.after - figure.before, 2)
        assert set(figure.uncosted) == {c.path for c in result.changes} - {c.path for c in costed}
