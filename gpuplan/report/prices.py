"""Where each price a report uses comes from, in the words the first page prints.

An approver signs an amount, so the report says per GPU what the price per GPU-hour rests on: the
provider quotes behind a catalog median (how many, their range, who quoted, when), the spec's own override
and the date it was quoted, or that there is none. The facts are the price record's
(gpuplan.catalog.Price, resolved by Spec.price_record); the date that ages a price is the one GP504
judges: a catalog median is as old as its oldest quote.
"""

from __future__ import annotations

import datetime

from gpuplan.catalog import Gpu
from gpuplan.records import record
from gpuplan.spec import Spec


@record
class PriceBasis:
    gpu: str
    price: float | None  # per GPU-hour in the spec's currency
    origin: str  # the record's origin ("catalog", "budget.prices", "gpus"), or "none"
    text: str  # one line for people
    date: datetime.date | None  # when the price was quoted (the oldest quote); None: undated or unknown
    providers: tuple[str, ...]  # who quoted it (catalog quotes); empty for the spec's own prices


def _date(text: str | None) -> datetime.date | None:
    try:
        return datetime.date.fromisoformat(str(text))
    except ValueError:
        return None


def price_basis(spec: Spec, gpu: Gpu) -> PriceBasis:
    """The basis of ``gpu``'s price in ``spec``."""
    currency = spec.budget.currency
    record = spec.price_record(gpu)
    if record is None:
        reason = (
            "no price: the catalog has no quote for it"
            if gpu.price_per_hour is None
            else f"no price in {currency}: catalog prices are USD; give budget.prices"
        )
        return PriceBasis(gpu.id, None, "none", reason, None, ())
    per_hour = f"{record.per_hour:.2f} {currency}/GPU-hour"
    date = _date(record.quoted_from)
    if record.origin == "budget.prices":
        dated = f"dated {date.isoformat()}" if date else "undated (budget.prices_date is not given)"
        return PriceBasis(gpu.id, record.per_hour, record.origin, f"spec override {per_hour}, {dated}", date, ())
    if record.origin == "gpus":
        return PriceBasis(gpu.id, record.per_hour, record.origin, f"spec gpus section {per_hour}, undated", None, ())
    noun = "quote" if record.quotes == 1 else "quotes"
    spread = (
        f" ({record.low:.2f}–{record.high:.2f})"
        if record.low is not None and record.high is not None and record.high != record.low
        else ""
    )
    if record.quoted_from and record.quoted_to and record.quoted_to != record.quoted_from:
        when = f"quoted {record.quoted_from} to {record.quoted_to}"
    else:
        when = f"quoted {record.quoted_from}" if record.quoted_from else "undated"
    undated = f", {record.undated_quotes} more undated" if record.undated_quotes else ""
    text = (
        f"catalog median {per_hour} of {record.quotes} {noun}{spread} from {', '.join(record.providers)}; "
        f"{when}{undated}"
    )
    return PriceBasis(gpu.id, record.per_hour, record.origin, text, date, record.providers)


def price_bases(spec: Spec, gpus: list[Gpu]) -> dict[str, PriceBasis]:
    """The basis of every GPU in ``gpus``."""
    return {gpu.id: price_basis(spec, gpu) for gpu in gpus}
