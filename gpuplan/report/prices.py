"""Where each price a report uses comes from: a spec override with its date, or the catalog's quotes.

An approver signs an amount, so the report says per GPU what the price per GPU-hour rests on: the
provider quotes behind a catalog median (how many, their range, the latest date), or the spec's own
override and the date it was quoted. The date that ages a price is the one GP504 judges.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from gpuplan.catalog import Gpu, gpu_sources
from gpuplan.spec import Spec


@dataclass(frozen=True)
class PriceBasis:
    gpu: str
    price: float | None  # per GPU-hour in the spec's currency
    origin: str  # "spec" (budget.prices) | "custom" (the spec's gpus section) | "catalog" | "none"
    text: str  # one line for people
    date: datetime.date | None  # when the price was quoted (None: undated or unknown)
    providers: tuple[str, ...]  # who quoted it (catalog quotes); empty for spec prices


def _date(text: Any) -> datetime.date | None:
    try:
        return datetime.date.fromisoformat(str(text))
    except ValueError:
        return None


def _provider(name: str) -> str:
    """'RunPod (Secure Cloud)' -> 'RunPod': the company, so one provider's two tiers count once."""
    return name.split(" (")[0].split()[0]


def price_basis(spec: Spec, gpu: Gpu, quotes: dict[str, list[dict[str, Any]]]) -> PriceBasis:
    """The basis of ``gpu``'s price in ``spec``; ``quotes`` is GPU id -> the catalog's dated quotes."""
    currency = spec.budget.currency
    price, _ = spec.price(gpu)
    if gpu.id in spec.budget.prices:
        date = _date(spec.budget.prices_date)
        dated = f"dated {date.isoformat()}" if date else "undated (budget.prices_date is not given)"
        return PriceBasis(gpu.id, price, "spec", f"spec override {price:.2f} {currency}/GPU-hour, {dated}", date, ())
    if price is not None and gpu.custom:
        return PriceBasis(
            gpu.id, price, "custom", f"spec gpus section {price:.2f} {currency}/GPU-hour, undated", None, ()
        )
    if price is None:
        reason = (
            "no price: the catalog has no quote for it"
            if gpu.price_per_hour is None
            else f"no price in {currency}: catalog prices are USD; give budget.prices"
        )
        return PriceBasis(gpu.id, None, "none", reason, None, ())
    listed = quotes.get(gpu.id, [])
    amounts = [float(q["usd"]) for q in listed if isinstance(q.get("usd"), int | float)]
    providers = tuple(dict.fromkeys(_provider(str(q.get("provider", "?"))) for q in listed))
    date = _date(gpu.price_date)
    if not amounts:
        text = f"catalog {price:.2f} {currency}/GPU-hour, " + (f"quoted {date.isoformat()}" if date else "undated")
        return PriceBasis(gpu.id, price, "catalog", text, date, providers)
    count = len(amounts)
    spread = f"{min(amounts):.2f}–{max(amounts):.2f}" if count > 1 else f"{amounts[0]:.2f}"
    noun = "quote" if count == 1 else "quotes"
    latest = f"latest {date.isoformat()}" if date else "undated"
    text = (
        f"catalog median {price:.2f} {currency}/GPU-hour of {count} {noun} ({spread}) from "
        f"{', '.join(providers)}; {latest}"
    )
    return PriceBasis(gpu.id, price, "catalog", text, date, providers)


def price_bases(spec: Spec, gpus: list[Gpu]) -> dict[str, PriceBasis]:
    """The basis of every GPU in ``gpus`` (catalog provenance read once)."""
    sources = gpu_sources()
    quotes = {gpu_id: list(entry.get("price_quotes") or []) for gpu_id, entry in sources.items()}
    return {gpu.id: price_basis(spec, gpu, quotes) for gpu in gpus}
