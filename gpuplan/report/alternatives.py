"""The alternatives table across catalog GPUs (the search main had before the planner, issue 11).

Kept apart from the report model so that the planner's options replace it in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from gpuplan.analysis import FinetuneEstimate, ServeEstimate
from gpuplan.catalog import Gpu, gpu_catalog
from gpuplan.config import Settings
from gpuplan.layout import Layout, finetune_at, serve_at, tp_degrees
from gpuplan.rules.context import efficiency_of
from gpuplan.spec import Spec
from gpuplan.units import format_money

MAX_ALTERNATIVE_GPUS = 8  # rows in the alternatives table: cheapest first, so a reader sees the real choices


def _candidate_gpus(current_id: str) -> list[Any]:
    gpus = [g for g in gpu_catalog().values() if g.suggestable]
    gpus.sort(key=lambda g: (g.id != current_id, g.usable_bytes))
    return gpus


def _alternatives(
    spec: Spec,
    current: Gpu,
    layouts: Callable[[Gpu], Any],
    describe: Callable[[Any], tuple[str, str, float | None]],
    currency: str,
    per: str,
) -> list[dict[str, Any]]:
    """One row per catalog GPU: the first fitting layout ``layouts`` yields, described and priced, cheapest first.

    ``layouts(gpu)`` yields (gpus, estimate) candidates in order; ``describe(estimate)`` gives
    (tp, speed, cost amount or ""), cost in the spec's currency for ``per`` (month or run).
    """
    rows = []
    for gpu in _candidate_gpus(current.id):
        price, _ = spec.price(gpu)
        found = next(((count, estimate) for count, estimate in layouts(gpu) if estimate.fits), None)
        row = {
            "gpu": gpu.id,
            "fits": "no",
            "gpus": "-",
            "tp": "-",
            "speed": "-",
            "price": "n/a" if price is None else f"{price:.2f}",
            "cost": "-",
            "sort": (2, 0.0),
        }
        if found is not None:
            count, estimate = found
            tp, speed, cost = describe(estimate)
            row.update(
                fits="yes",
                gpus=str(count),
                tp=tp,
                speed=speed,
                cost="n/a" if cost is None else f"{format_money(cost, currency)} /{per}",
                sort=(0 if cost is not None else 1, cost or 0.0),
            )
        rows.append(row)
    rows.sort(key=lambda row: row["sort"])
    return [{k: v for k, v in row.items() if k != "sort"} for row in rows[:MAX_ALTERNATIVE_GPUS]]


def serve_alternatives(spec: Spec, s: ServeEstimate, currency: str, settings: Settings) -> list[dict[str, Any]]:
    efficiency = efficiency_of(settings)

    def layouts(gpu: Gpu) -> Iterator[tuple[int, ServeEstimate]]:
        for tp in tp_degrees(spec, gpu):
            yield tp, serve_at(spec, s.job, Layout(gpu, tp, tp), efficiency)

    def describe(estimate: ServeEstimate) -> tuple[str, str, float | None]:
        return str(estimate.setup.tensor_parallel), f"{estimate.speed.tokens_per_s:,.0f}", estimate.monthly_cost

    return _alternatives(spec, s.gpu, layouts, describe, currency, "month")


def finetune_alternatives(spec: Spec, f: FinetuneEstimate, currency: str, settings: Settings) -> list[dict[str, Any]]:
    efficiency = efficiency_of(settings)
    job = f.job
    sharded = job.sharding if job.sharding != "none" else "zero3"

    def layouts(gpu: Gpu) -> Iterator[tuple[int, FinetuneEstimate]]:
        for count in (1, 2, 4, 8):
            yield count, finetune_at(spec, job, Layout(gpu, count, 1, "none" if count == 1 else sharded), efficiency)

    def describe(estimate: FinetuneEstimate) -> tuple[str, str, float | None]:
        hours = "n/a" if estimate.speed is None else f"{estimate.speed.hours:,.1f}"
        return "1", hours, estimate.cost

    return _alternatives(spec, f.gpu, layouts, describe, currency, "run")
