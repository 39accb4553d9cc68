"""The rules' planner takes the declared layouts' estimates from the spec's analysis instead of
estimating them again, and only where the analysis estimated exactly what the planner would.

The planner derives its own job from a layout (expert parallelism 1, a nominal token count for a
fine-tune without `tokens`); when that job is not the declared one, the analysis's estimate is of
something else and must not be taken.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import make_spec

from gpuplan.analysis import analyse
from gpuplan.config import default_settings
from gpuplan.plan.configured import efficiency_of, planner_for

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").rglob("*.yaml"))


def planners(spec):
    settings = default_settings()
    analysis = analyse(spec, efficiency_of(settings))
    return planner_for(spec, settings, analysis=analysis), planner_for(spec, settings)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_declared_option_is_the_same_with_or_without_the_analysis(example: Path):
    spec = make_spec(example.read_text(), example.parent)
    reusing, fresh = planners(spec)
    for kind in ("serve", "finetune"):
        planner = reusing.job(kind)
        if planner is None:
            continue
        assert planner.declared() == fresh.job(kind).declared(), kind


SERVE = """
    version: 1
    name: t
    model: {id: mixtral-8x7b}
    serve: {context: 8192, concurrency: 8, hardware: {gpu: h100-sxm, count: 2, tensor_parallel: 2%s}}
"""
FINETUNE = """
    version: 1
    name: t
    model: {id: llama-3.1-8b}
    finetune: {method: lora, seq_len: 4096, micro_batch: 2, hardware: {gpu: h100-sxm}%s}
"""


@pytest.mark.parametrize(
    ("text", "kind", "taken"),
    [
        (SERVE % "", "serve", True),
        # The declared layout keeps its expert parallelism (the planner proposes none, but judges what is declared).
        (SERVE % ", expert_parallel: 2", "serve", True),
        (FINETUNE % ", tokens: 100000000", "finetune", True),
        # Without a token count the planner estimates a nominal one; the analysis estimated none.
        (FINETUNE % "", "finetune", False),
    ],
    ids=["serve", "serve-expert-parallel", "finetune", "finetune-without-tokens"],
)
def test_the_analysis_is_taken_only_for_the_job_the_planner_would_estimate(text: str, kind: str, taken: bool):
    spec = make_spec(textwrap.dedent(text))
    reusing, fresh = planners(spec)
    planner = reusing.job(kind)
    assert planner is not None
    assert (planner.evaluator.known is not None) is taken
    assert planner.declared() == fresh.job(kind).declared()


@pytest.mark.parametrize("tokens", [", tokens: 100000000", ""], ids=["tokens", "without-tokens"])
def test_the_cost_floor_is_the_full_estimates_cost_per_million_tokens(tokens: str):
    # floor_rate computes only the speed and the price of the floor job on each GPU kind (no memory
    # estimate); the full estimate of the same job on the same GPU gives the same cost (one price per GPU-hour
    # from the catalog in USD; None where the catalog has no price).
    from gpuplan.analysis import estimate_finetune
    from gpuplan.catalog import gpu_catalog
    from gpuplan.plan.evaluate import NOMINAL_TOKENS

    spec = make_spec(textwrap.dedent(FINETUNE % tokens))
    evaluator = planners(spec)[1].job("finetune").evaluator
    priced = unpriced = 0
    for gpu in gpu_catalog().values():
        floor = evaluator.floor_rate(gpu)
        job, _ = evaluator._floor_job
        estimate = estimate_finetune(spec, job, evaluator.efficiency, gpu=gpu)
        expected = None if estimate.cost is None else estimate.cost / (job.tokens or NOMINAL_TOKENS) * 1e6
        assert floor == expected, gpu.id
        priced += floor is not None
        unpriced += floor is None
    assert priced and unpriced  # both branches reached
