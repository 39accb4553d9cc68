"""Where each price a report uses comes from, in the words the first page prints.

An approver signs an amount, so the report says per GPU what the price per GPU-hour rests on: the spec's
own price and the date it was quoted, or a catalog median, which is no quote at all: it is labelled "market
median, not a quote" beside its range (how many on-demand quotes, from whom, when), or that there
is none. The facts are the price record's (gpuplan.catalog.Price, resolved by Spec.price_record); the date
that ages a price is the one GP504 judges: a catalog median is as old as the quote(s) it is. The catalog's
quotes themselves (provider, price, date, source) are listed for the decision record (``catalog_quotes``).
"""

from __future__ import annotations

import datetime

from gpuplan.catalog import Gpu
from gpuplan.records import record
from gpuplan.spec import Spec
from gpuplan.units import format_price, plural

MARKET_MEDIAN = "market median, not a quote"


@record
class PriceBasis:
    gpu: str
    price: float | None  # per GPU-hour in the spec's currency
    origin: str  # the record's origin ("catalog", "budget.prices", "gpus"), or "none"
    text: str  # one line for people
    date: datetime.date | None  # when what the price rests on was quoted (Price.dated); None: undated
    providers: tuple[str, ...]  # who quoted it (catalog quotes); empty for the spec's own prices
    short: str = ""  # a few words for a table cell

    @property
    def is_quote(self) -> bool:
        """Whether the price is a vendor's quote (``budget.quotes``), not the spec's own figure or the
        catalog's market median."""
        return self.origin == "budget.quotes"


@record
class CatalogQuote:
    """One provider's on-demand price behind a catalog median (gpuplan/catalog/gpu_sources.yaml)."""

    provider: str
    usd_per_hour: float
    date: str  # YYYY-MM-DD, or "" when undated
    source: str


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
        return PriceBasis(gpu.id, None, "none", reason, None, (), "no price")
    per_hour = f"{format_price(record.per_hour)} {currency}/GPU-hour"
    date = _date(record.dated)
    if record.origin == "budget.quotes":
        provider = record.providers[0]
        unit = (
            f" ({format_price(record.instance_price)} {currency} per instance-hour of {record.instance_gpus} GPUs, "
            "billed by whole instances)"
            if record.instance_gpus and record.instance_price is not None
            else ""
        )
        dated = f"quoted {date.isoformat()}" if date else "undated"
        reference = f", reference {record.reference}" if record.reference else ""
        text = f"quote from {provider}: {per_hour}{unit}, {dated}{reference}"
        return PriceBasis(
            gpu.id, record.per_hour, record.origin, text, date, (provider,), f"{provider} quote, {date or 'undated'}"
        )
    if record.origin == "budget.prices":
        dated = f"dated {date.isoformat()}" if date else "undated (budget.prices_date is not given)"
        text = f"spec price (budget.prices) {per_hour}, {dated}"
        return PriceBasis(gpu.id, record.per_hour, record.origin, text, date, (), f"spec price, {date or 'undated'}")
    if record.origin == "gpus":
        text = f"spec price (gpus section) {per_hour}, undated"
        return PriceBasis(gpu.id, record.per_hour, record.origin, text, None, (), "spec price, undated")
    spread = (
        f", range {format_price(record.low)}–{format_price(record.high)}"
        if record.low is not None and record.high is not None and record.high != record.low
        else ""
    )
    if record.quoted_from and record.quoted_to and record.quoted_to != record.quoted_from:
        when = f"quoted {record.quoted_from} to {record.quoted_to}"
    else:
        when = f"quoted {record.quoted_from}" if record.quoted_from else "undated"
    undated = f", {record.undated_quotes} more undated" if record.undated_quotes else ""
    # counted as quotes: a provider may quote twice (RunPod's Community and Secure clouds)
    providers = plural(record.quotes, "on-demand quote")
    set_by = f"; the median rests on {' and '.join(record.median_set_by)}" if record.median_set_by else ""
    text = f"{MARKET_MEDIAN}: {per_hour}, the median of {providers}{spread}; {when}{undated}{set_by}"
    short = f"{MARKET_MEDIAN} ({plural(record.quotes, 'quote')}{spread}); {when}"
    return PriceBasis(gpu.id, record.per_hour, record.origin, text, date, record.providers, short)


def price_bases(spec: Spec, gpus: list[Gpu]) -> dict[str, PriceBasis]:
    """The basis of every GPU in ``gpus``."""
    return {gpu.id: price_basis(spec, gpu) for gpu in gpus}


def catalog_quotes(gpu_id: str) -> tuple[CatalogQuote, ...]:
    """The provider quotes the catalog's median for ``gpu_id`` rests on (empty for a GPU without any)."""
    from gpuplan.catalog import gpu_sources

    entry = gpu_sources().get(gpu_id, {})
    return tuple(
        CatalogQuote(str(q["provider"]), float(q["usd"]), str(q.get("date") or ""), str(q.get("source") or ""))
        for q in entry.get("price_quotes", [])
    )
