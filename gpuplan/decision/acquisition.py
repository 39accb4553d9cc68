"""Renting on demand, reserving or buying the same GPUs, over the same hours.

Given when the spec has the figures: ``budget.reserved`` (committed prices per GPU-hour) and
``budget.purchase`` (price per GPU, amortisation months, power and hosting per GPU-month). Serving runs for
the term (730 hours a month); a fine-tuning run for its estimated hours.
"""

from __future__ import annotations

from gpuplan.records import record
from gpuplan.spec import HOURS_PER_MONTH, Spec
from gpuplan.units import format_price, money_times


@record
class Acquisition:
    way: str  # "on demand" | "reserved" | "bought"
    gpu: str
    gpus: int
    hours: float  # hours the job runs over the term (serving) or the run (fine-tuning)
    cost: float  # what those hours cost this way (amortised for a purchase)
    cash: float  # money committed or paid out: a reservation's whole commitment, a purchase's price
    note: str


def acquisitions(
    spec: Spec,
    gpu: str,
    gpus: int,
    on_demand: float | None,
    *,
    months: int | None = None,
    hours: float = 0.0,
    billed: int | None = None,
) -> list[Acquisition]:
    """Every way the spec prices ``gpus`` x ``gpu``: for ``months`` of serving (each month's cost in whole
    units times the months, as the amount requested counts it) or for a run of ``hours``; empty when only one
    way is known. ``billed``: the GPUs the on-demand price is paid for (whole instances under an instance-hour
    quote, as the estimate and the amount count them); default ``gpus``."""
    currency = spec.budget.currency
    if months is not None:
        hours = months * HOURS_PER_MONTH

    def over(per_hour: float, count: int = gpus) -> float:
        """``count`` GPUs at ``per_hour`` each for the hours, counted as the amount requested counts them."""
        if months is None:
            return count * per_hour * hours
        return money_times(count * per_hour * HOURS_PER_MONTH, months).value

    found = []
    if on_demand is not None:
        paid = billed or gpus
        cost = over(on_demand, paid)
        note = f"{format_price(on_demand)} {currency} per GPU-hour"
        if paid != gpus:
            note += f", billed by whole instances: {paid} GPUs paid for"
        found.append(Acquisition("on demand", gpu, paid, hours, cost, cost, note))
    reserved = spec.budget.reserved
    if reserved is not None and gpu in reserved.prices:
        rate = reserved.prices[gpu]
        commitment = reserved.commitment_months
        committed = (
            over(rate) if months is not None and months >= commitment else gpus * rate * commitment * HOURS_PER_MONTH
        )
        found.append(
            Acquisition(
                "reserved",
                gpu,
                gpus,
                hours,
                over(rate),
                max(over(rate), committed),
                f"{format_price(rate)} {currency} per GPU-hour, {commitment}-month commitment",
            )
        )
    purchase = spec.budget.purchase.get(gpu)
    if purchase is not None:
        owned = purchase.monthly / HOURS_PER_MONTH  # per GPU-hour of ownership
        found.append(
            Acquisition(
                "bought",
                gpu,
                gpus,
                hours,
                over(owned),
                gpus * (purchase.price_per_gpu + purchase.hosting_per_gpu_month * hours / HOURS_PER_MONTH),
                f"{purchase.price_per_gpu:,.0f} {currency} per GPU over {purchase.amortisation_months} months "
                f"+ {purchase.hosting_per_gpu_month:,.0f} {currency} per GPU-month for power and hosting",
            )
        )
    return found if len(found) > 1 else []
