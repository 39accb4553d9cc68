"""Sensitivity of the declared layout: what happens to fit, SLO and cost when the assumptions move.

Each scenario re-runs the estimate of the declared layout with one input changed: the workload doubled
(serving: concurrency, then context; fine-tuning: micro-batch, then sequence length), prices moved by
±20%, and the speed model's efficiency at either end of its documented range. Nothing is searched: the
question is how close the plan as declared sits to each of its limits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gpuplan.analysis import FinetuneEstimate, ServeEstimate, estimate_finetune, estimate_serve
from gpuplan.config import Settings
from gpuplan.estimate.performance import Efficiency
from gpuplan.rules.context import comfortable, efficiency_of

PRICE_MOVE = 0.20  # ±20%: GPU rental prices move by tens of percent within a quarter (GP504's rationale)
# The speed model's documented range of achieved efficiency (gpuplan.estimate.performance.Efficiency):
# prefill MFU 0.4-0.7 (llm-analysis README), decode HBM bandwidth 0.7-0.9, training MFU 0.25-0.45
# (estimation.md 2.10). The low end makes every time longer, the high end shorter.
EFFICIENCY_LOW = {"prefill_mfu": 0.4, "decode_bandwidth": 0.7, "training_mfu": 0.25}
EFFICIENCY_HIGH = {"prefill_mfu": 0.7, "decode_bandwidth": 0.9, "training_mfu": 0.45}


@dataclass(frozen=True)
class Scenario:
    name: str
    per_gpu: int  # bytes per GPU
    capacity: int  # bytes: the engine budget (serving) or usable memory (fine-tuning)
    fits: bool  # holds at all
    comfortable: bool  # holds with the configured headroom
    ttft_s: float | None = None  # serving
    tpot_s: float | None = None  # serving
    hours: float | None = None  # fine-tuning
    cost: float | None = None  # per month (serving) or per run (fine-tuning), spec currency
    slo_met: bool | None = None  # None: no SLO declared (or fine-tuning)
    within_budget: bool | None = None  # None: no budget or no price


@dataclass(frozen=True)
class Sensitivity:
    job: str  # "serve" | "finetune"
    scenarios: tuple[Scenario, ...]
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    budget: float | None


def _efficiency(settings: Settings, end: dict[str, float]) -> Efficiency:
    return replace(efficiency_of(settings), **end)


def _serve_scenario(
    name: str, estimate: ServeEstimate, settings: Settings, budget: float | None, price_factor: float = 1.0
) -> Scenario:
    job = estimate.job
    slo_met = None
    if job.ttft_ms is not None or job.tpot_ms is not None:
        slo_met = (job.ttft_ms is None or estimate.speed.ttft_s * 1000 <= job.ttft_ms) and (
            job.tpot_ms is None or estimate.speed.tpot_s * 1000 <= job.tpot_ms
        )
    cost = None if estimate.monthly_cost is None else estimate.monthly_cost * price_factor
    return Scenario(
        name,
        estimate.memory.per_gpu,
        estimate.memory.budget,
        estimate.fits,
        estimate.fits and comfortable(estimate.memory.per_gpu, estimate.memory.budget, settings),
        ttft_s=estimate.speed.ttft_s,
        tpot_s=estimate.speed.tpot_s,
        cost=cost,
        slo_met=slo_met,
        within_budget=None if cost is None or budget is None else cost <= budget,
    )


def _cases(
    spec: Any, base: Any, settings: Settings, estimate: Any, workload: list[tuple[str, Any]]
) -> list[tuple[str, Any, float]]:
    """(name, estimate, price factor) per scenario: as declared, ``workload`` changes, prices, speed model."""
    efficiency = efficiency_of(settings)
    return [
        ("as declared", base, 1.0),
        *((name, estimate(spec, job, efficiency), 1.0) for name, job in workload),
        (f"prices +{PRICE_MOVE:.0%}", base, 1 + PRICE_MOVE),
        (f"prices -{PRICE_MOVE:.0%}", base, 1 - PRICE_MOVE),
        ("speed model, low end", estimate(spec, base.job, _efficiency(settings, EFFICIENCY_LOW)), 1.0),
        ("speed model, high end", estimate(spec, base.job, _efficiency(settings, EFFICIENCY_HIGH)), 1.0),
    ]


def _finetune_scenario(
    name: str, estimate: FinetuneEstimate, settings: Settings, budget: float | None, price_factor: float = 1.0
) -> Scenario:
    cost = None if estimate.cost is None else estimate.cost * price_factor
    usable = estimate.gpu.usable_bytes
    return Scenario(
        name,
        estimate.memory.per_gpu,
        usable,
        estimate.fits,
        estimate.fits and comfortable(estimate.memory.per_gpu, usable, settings),
        hours=None if estimate.speed is None else estimate.speed.hours,
        cost=cost,
        within_budget=None if cost is None or budget is None else cost <= budget,
    )


def sensitivity(spec: Any, base: FinetuneEstimate | ServeEstimate, settings: Settings) -> Sensitivity:
    """The declared layout of one job (its estimate ``base``) under each scenario."""
    slo: tuple[float | None, float | None] = (None, None)
    estimate_fn: Any
    scenario_fn: Any
    workload: list[tuple[str, Any]]
    if isinstance(base, ServeEstimate):
        serve = base.job
        kind, budget, estimate_fn, scenario_fn = "serve", spec.budget.serve_monthly, estimate_serve, _serve_scenario
        workload = [
            (f"concurrency x2 ({serve.concurrency * 2:,})", replace(serve, concurrency=serve.concurrency * 2)),
            (f"context x2 ({serve.context * 2:,} tokens)", replace(serve, context=serve.context * 2)),
        ]
        slo = (
            None if serve.ttft_ms is None else serve.ttft_ms / 1000,
            None if serve.tpot_ms is None else serve.tpot_ms / 1000,
        )
    else:
        train = base.job
        kind, budget, estimate_fn, scenario_fn = (
            "finetune",
            spec.budget.finetune_total,
            estimate_finetune,
            _finetune_scenario,
        )
        workload = [
            (f"micro-batch x2 ({train.micro_batch * 2})", replace(train, micro_batch=train.micro_batch * 2)),
            (f"sequence x2 ({train.seq_len * 2:,} tokens)", replace(train, seq_len=train.seq_len * 2)),
        ]
    cases = _cases(spec, base, settings, estimate_fn, workload)
    scenarios = tuple(scenario_fn(name, estimate, settings, budget, factor) for name, estimate, factor in cases)
    return Sensitivity(kind, scenarios, slo[0], slo[1], budget)
