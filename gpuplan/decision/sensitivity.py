"""The stress test of one layout: what happens to fit, SLO and cost when the assumptions move.

Each scenario re-runs the estimate of the layout (the declared one, or the planner's option the approver
funds) with one input changed: the workload doubled (serving: the users, ``more_users``, then context;
fine-tuning: micro-batch, then sequence length), prices moved by ±20%, the speed figures at either edge of
their measured band, and (fine-tuning) the memory at either edge of its measured band. Nothing is
searched here: the question is how close the layout sits to each of its limits. A scenario holds as the
verdict judges a layout: memory at the edge of its band, an SLO at the slow edge of its latency's band
(the speed rows: at the figures of their edge), and a steady stream kept up with.

The bands are the estimate's (``bands``; gpuplan/estimate/bands.py): the ratios measured / estimate of runs
not used to tune the model. At ``plan.confidence`` c the slow edge of a time is the estimate times the ratio
that c of the runs stayed at or below, the fast edge the one at 1 - c; a throughput the other way round.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from gpuplan.analysis import FinetuneEstimate, ServeEstimate, estimate_finetune, estimate_serve
from gpuplan.config import Settings
from gpuplan.estimate.bands import capacity_band
from gpuplan.plan.configured import efficiency_of
from gpuplan.plan.evaluate import capacity_factor, slo_figure, slow_factor, stream_outrun, within_headroom
from gpuplan.records import record
from gpuplan.units import format_number

PRICE_MOVE = 0.20  # ±20%: GPU rental prices move by tens of percent within a quarter (GP504's rationale)
SLOW, FAST = "slow", "fast"


def band_factor(band: Any, end: str, confidence: float) -> float:
    """What a figure is multiplied by at one ``end`` (slow or fast) of its measured band at ``confidence``; the
    slow end as a decision plans for it (``slow_factor``: never below the estimate, so the stress test's slow
    row judges as its "as planned" row and the verdict do)."""
    return slow_factor(band, confidence) if end == SLOW else float(band.fast_ratio(confidence))


def _per_second(rate: float) -> str:
    """A rate in plain figures (``:g`` wrote 1.2e+06 of the schema's largest doubled): 200, 2.5, 0.0002."""
    text = format_number(rate, 4)
    return text.rstrip("0").rstrip(".")


def more_users(serve: Any, factor: int) -> Any:
    """The serving job with ``factor`` times its users: a closed loop's clients and a burst's requests, or a
    steady stream's requests a second. A stream's ``concurrency`` caps each replica's engine (docs/spec.md), a
    setting more users do not change: its requests in flight grow with the rate (Little's law)."""
    if serve.arrival == "steady" and serve.rate_rps is not None:
        return replace(serve, rate_rps=serve.rate_rps * factor)
    return replace(serve, concurrency=serve.concurrency * factor)


# Scenario keys, in the order they are run; the same key means the same change on every layout, so a
# funded layout and the declared one are compared scenario by scenario.
BASE, CONCURRENCY, CONTEXT, MICRO_BATCH, SEQUENCE = "base", "concurrency", "context", "micro_batch", "sequence"
PRICE_UP, PRICE_DOWN, SPEED_SLOW, SPEED_FAST = "price_up", "price_down", "speed_slow", "speed_fast"
MEMORY_LOW, MEMORY_HIGH = "memory_low", "memory_high"


@record
class Scenario:
    key: str  # one of the keys above
    name: str
    per_gpu: int  # bytes per GPU as the verdict judges them: at plan.confidence (the memory rows: their edge)
    capacity: int  # bytes: the engine budget (serving) or usable memory (fine-tuning)
    fits: bool  # holds at all
    comfortable: bool  # holds with the configured headroom
    estimated: int = 0  # bytes per GPU on the point estimate (the memory rows: their edge, as per_gpu)
    ttft_s: float | None = None  # serving, the estimate (the speed rows: their edge's)
    tpot_s: float | None = None  # serving
    hours: float | None = None  # fine-tuning
    cost: float | None = None  # per month (serving) or per run (fine-tuning), spec currency
    loads: bool = True  # serving: the engine starts (ServeEstimate.loads); else it has no speed to state
    slo_met: bool | None = None  # None: no SLO declared (or fine-tuning); else at the slow edge, as the verdict
    slo_estimate_met: bool | None = None  # the same on the estimate itself (met there, missed at the edge: at risk)
    keeps_up: bool = True  # serving: a steady stream's requests are completed as fast as they arrive (at the edge)
    keeps_up_estimate: bool = True  # the same on the estimate itself (kept up with there, not at the edge: at risk)
    # serving: what the verdict multiplies TTFT and TPOT by (their bands' slow edge; 1 in a speed row, whose
    # figures are already at its edge)
    edge: tuple[float, float] = (1.0, 1.0)
    within_budget: bool | None = None  # None: no budget or no price

    @property
    def passes(self) -> bool:
        """Whether the layout holds in this scenario: it starts, fits with the configured headroom, keeps up
        with its requests, meets the SLO and stays within the budget (a limit not declared is not broken)."""
        return (
            self.comfortable
            and self.loads
            and self.keeps_up
            and self.slo_met is not False
            and self.within_budget is not False
        )

    @property
    def first_broken(self) -> str:
        """The first limit the layout breaks here, in the order an approver reads them: memory (it does not
        fit), start (it fits, and its engine still cannot start: a context longer than the model takes), margin
        (it fits without the headroom), rate (it cannot keep up with a steady stream), latency (it misses the SLO),
        budget."""
        if not self.fits:
            return "memory"
        if not self.loads:
            return "start"
        if not self.comfortable:
            return "margin"
        if not self.keeps_up:
            return "rate"
        if self.slo_met is False:
            return "latency"
        return "budget"


@record
class Sensitivity:
    job: str  # "serve" | "finetune"
    scenarios: tuple[Scenario, ...]
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    budget: float | None

    def scenario(self, key: str) -> Scenario | None:
        return next((scenario for scenario in self.scenarios if scenario.key == key), None)

    @property
    def failed(self) -> tuple[Scenario, ...]:
        return tuple(scenario for scenario in self.scenarios if not scenario.passes)


def _serve_scenario(
    key: str,
    name: str,
    estimate: ServeEstimate,
    settings: Settings,
    budget: float | None,
    price_factor: float = 1.0,
    end: str | None = None,
    confidence: float = 0.9,
) -> Scenario:
    job = estimate.job
    # TTFT at the statistic the SLO bounds (serve.slo.ttft_statistic); none where a stream saturates.
    figure = slo_figure(job, estimate.speed, "ttft")
    ttft: float | None = figure if math.isfinite(figure) else None
    tpot: float | None = estimate.speed.tpot_s
    if end is not None:  # the speed figures at one edge of their measured bands; memory and cost do not move
        ttft = None if ttft is None else ttft * band_factor(estimate.bands["ttft"], end, confidence)
        tpot = estimate.speed.tpot_s * band_factor(estimate.bands["tpot"], end, confidence)
    if not estimate.loads:  # an engine that cannot start has no latency, and meets no SLO
        ttft = tpot = None

    def met(ttft_factor: float, tpot_factor: float) -> bool | None:
        """Whether the SLO holds with the figures times these factors; None without an SLO."""
        if job.ttft_ms is None and job.tpot_ms is None:
            return None
        ttft_ok = job.ttft_ms is None or (ttft is not None and ttft * ttft_factor * 1000 <= job.ttft_ms)
        return ttft_ok and (job.tpot_ms is None or (tpot is not None and tpot * tpot_factor * 1000 <= job.tpot_ms))

    slo_estimate_met = met(1.0, 1.0)
    # Judged as the verdict judges a layout: at the slow edge of each latency's band (plan.evaluate.slo_miss);
    # a speed row's figures are already at their edge.
    edge = (
        (1.0, 1.0) if end is not None else tuple(slow_factor(estimate.bands[m], confidence) for m in ("ttft", "tpot"))
    )
    slo_met = met(*edge)
    # A steady stream kept up with as the verdict judges it: at the slow edge of the most the deployment completes
    # (plan.evaluate.capacity_factor), a speed row at its own edge.
    rate_edge = capacity_factor(confidence) if end is None else band_factor(capacity_band(), end, confidence)
    cost = None if estimate.monthly_cost is None else estimate.monthly_cost * price_factor
    planned = estimate.planned_bytes(confidence)  # memory judged as the verdict judges it (KV band's edge)
    return Scenario(
        key,
        name,
        planned,
        estimate.memory.budget,
        estimate.fits_at(confidence),
        estimate.fits_at(confidence) and within_headroom(planned, estimate.memory.budget, settings.headroom_pct),
        estimated=estimate.memory.per_gpu,
        ttft_s=ttft,
        tpot_s=tpot,
        cost=cost,
        slo_met=slo_met,
        slo_estimate_met=slo_estimate_met,
        keeps_up=not (estimate.loads and stream_outrun(job, estimate.speed.stream_capacity_rps, rate_edge)),
        keeps_up_estimate=not (estimate.loads and estimate.speed.saturated),
        edge=(edge[0], edge[1]),
        within_budget=None if cost is None or budget is None else cost <= budget,
        loads=estimate.loads,
    )


def _cases(
    spec: Any,
    base: Any,
    settings: Settings,
    estimate: Any,
    workload: list[tuple[str, str, Any]],
    bands: list[tuple[str, str]],
) -> list[tuple[str, str, Any, float, str | None]]:
    """(key, name, estimate, price factor, band end) per scenario: as planned, ``workload`` changes (key,
    name, job), prices, speed."""
    efficiency = efficiency_of(settings)
    confidence = spec.plan.confidence

    def spread(end: str) -> str:
        factors = (f"{label} x {band_factor(base.bands[metric], end, confidence):.2f}" for label, metric in bands)
        return f" ({', '.join(factors)})"

    return [
        (BASE, "as planned", base, 1.0, None),
        *((key, name, estimate(spec, job, efficiency), 1.0, None) for key, name, job in workload),
        (PRICE_UP, f"prices +{PRICE_MOVE:.0%}", base, 1 + PRICE_MOVE, None),
        (PRICE_DOWN, f"prices -{PRICE_MOVE:.0%}", base, 1 - PRICE_MOVE, None),
        (SPEED_SLOW, f"speed, slow edge of the bands at {confidence:.0%}{spread(SLOW)}", base, 1.0, SLOW),
        (SPEED_FAST, f"speed, fast edge of the bands at {confidence:.0%}{spread(FAST)}", base, 1.0, FAST),
    ]


def _finetune_scenario(
    key: str,
    name: str,
    estimate: FinetuneEstimate,
    settings: Settings,
    budget: float | None,
    price_factor: float = 1.0,
    end: str | None = None,
    confidence: float = 0.9,
) -> Scenario:
    hours = estimate.hours
    cost = None if estimate.cost is None else estimate.cost * price_factor
    if end is not None and hours is not None:
        # Hours run inversely to throughput: at the slow edge the run takes 1 / (that edge's ratio) as long.
        factor = 1 / band_factor(estimate.bands["training_tokens_per_s"], end, confidence)
        hours *= factor
        cost = None if cost is None else cost * factor
    usable = estimate.gpu.usable_bytes
    planned = estimate.planned_bytes(confidence)  # memory judged as the verdict judges it (the band's edge)
    return Scenario(
        key,
        name,
        planned,
        usable,
        planned <= usable,
        within_headroom(planned, usable, settings.headroom_pct),
        estimated=estimate.memory.per_gpu,
        hours=hours,
        cost=cost,
        within_budget=None if cost is None or budget is None else cost <= budget,
    )


def sensitivity(spec: Any, base: FinetuneEstimate | ServeEstimate, settings: Settings) -> Sensitivity:
    """One layout of one job (its estimate ``base``: the declared layout's, or a planner option's) under
    each scenario. A fine-tuning ``base`` without ``finetune.tokens`` has no hours or cost to move."""
    slo: tuple[float | None, float | None] = (None, None)
    estimate_fn: Any
    scenario_fn: Any
    workload: list[tuple[str, str, Any]]
    if isinstance(base, ServeEstimate):
        serve = base.job
        kind, budget, estimate_fn, scenario_fn = "serve", spec.budget.serve_monthly, estimate_serve, _serve_scenario
        grown = more_users(serve, 2)
        rate = "" if grown.rate_rps is None else f", {_per_second(grown.rate_rps)} requests/s"
        workload = [
            (CONCURRENCY, f"users x2 ({grown.concurrency:,} per replica{rate})", grown),
            (CONTEXT, f"context x2 ({serve.context * 2:,} tokens)", replace(serve, context=serve.context * 2)),
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
            (
                MICRO_BATCH,
                f"micro-batch x2 ({train.micro_batch * 2})",
                replace(train, micro_batch=train.micro_batch * 2),
            ),
            (SEQUENCE, f"sequence x2 ({train.seq_len * 2:,} tokens)", replace(train, seq_len=train.seq_len * 2)),
        ]
    bands = [("TTFT", "ttft"), ("TPOT", "tpot")] if kind == "serve" else [("throughput", "training_tokens_per_s")]
    cases = _cases(spec, base, settings, estimate_fn, workload, bands)
    scenarios = tuple(
        scenario_fn(key, name, estimate, settings, budget, factor, end, spec.plan.confidence)
        for key, name, estimate, factor, end in cases
    )
    if isinstance(base, FinetuneEstimate):
        scenarios += _memory_edges(base, settings, budget, spec.plan.confidence)
    return Sensitivity(kind, scenarios, slo[0], slo[1], budget)


def _memory_edges(
    estimate: FinetuneEstimate, settings: Settings, budget: float | None, confidence: float
) -> tuple[Scenario, ...]:
    """The layout at both edges of the memory band: the figure measured runs of this kind came in at, at
    1 - ``confidence`` and at ``confidence`` of them (the second is what the fit verdict judges)."""
    planned = _finetune_scenario("", "", estimate, settings, budget, confidence=confidence)
    low, high = estimate.memory_band.edges(estimate.memory.per_gpu, confidence)
    usable, runs = estimate.gpu.usable_bytes, estimate.memory_band.records
    return tuple(
        replace(
            planned,
            key=key,
            name=f"memory x {ratio:.2f} ({word} edge: {share:.0%} of {runs} runs not used to tune the model)",
            per_gpu=figure,
            estimated=figure,
            fits=figure <= usable,
            comfortable=within_headroom(figure, usable, settings.headroom_pct),
        )
        for key, word, figure, ratio, share in (
            (MEMORY_LOW, "low", math.floor(low), low / estimate.memory.per_gpu, 1 - confidence),
            (MEMORY_HIGH, "high", math.ceil(high), high / estimate.memory.per_gpu, confidence),
        )
    )
