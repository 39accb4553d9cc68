"""The spec's ``budget`` section as records: the currency and caps, the prices (on demand, reserved, quoted) and
the GPUs bought instead of rented (``budget_from`` builds them from the validated mapping)."""

from __future__ import annotations

import datetime
from dataclasses import field
from typing import Any

from gpuplan.records import record


@record
class Purchase:
    """Buying one GPU instead of renting it (``budget.purchase.<gpu>``), in the spec's currency."""

    price_per_gpu: float
    amortisation_months: int
    hosting_per_gpu_month: float
    date: str | None

    @property
    def monthly(self) -> float:
        """What one owned GPU costs a month: its price written off over the amortisation, plus hosting."""
        return self.price_per_gpu / self.amortisation_months + self.hosting_per_gpu_month


@record
class Reserved:
    """Committed-use prices per GPU-hour (``budget.reserved``)."""

    prices: dict[str, float]
    commitment_months: int
    prices_date: str | None


@record
class Quote:
    """A vendor's quote for one GPU (``budget.quotes``): per GPU-hour, or per instance-hour of
    ``instance_gpus`` GPUs."""

    provider: str
    price: float
    instance_gpus: int | None
    date: str | None
    reference: str

    @property
    def per_gpu_hour(self) -> float:
        return self.price / self.instance_gpus if self.instance_gpus else self.price


@record
class Budget:
    currency: str
    finetune_total: float | None
    serve_monthly: float | None
    prices: dict[str, float]
    prices_date: str | None
    term_months: int
    reserved: Reserved | None = None
    purchase: dict[str, Purchase] = field(default_factory=dict)
    term_start: datetime.date | None = None  # the first day the term covers; None: the report's date
    quotes: dict[str, Quote] = field(default_factory=dict)  # budget.quotes, by GPU id


def budget_from(data: dict[str, Any]) -> Budget:
    """The ``budget`` section, validated and with the schema's defaults applied."""
    return Budget(
        currency=data["currency"],
        finetune_total=data.get("finetune_total"),
        serve_monthly=data.get("serve_monthly"),
        prices=dict(data.get("prices", {})),
        prices_date=data.get("prices_date"),
        term_months=data["term_months"],
        reserved=_reserved(data.get("reserved")),
        purchase={
            gpu_id: Purchase(
                entry["price_per_gpu"], entry["amortisation_months"], entry["hosting_per_gpu_month"], entry.get("date")
            )
            for gpu_id, entry in data.get("purchase", {}).items()
        },
        term_start=_date(data.get("term_start")),
        quotes={
            gpu_id: Quote(
                entry["provider"],
                entry["price"],
                entry.get("instance_gpus"),
                None if entry.get("date") is None else str(entry["date"]),
                entry.get("reference", ""),
            )
            for gpu_id, entry in data.get("quotes", {}).items()
        },
    )


def _date(value: Any) -> datetime.date | None:
    """A validated date field (YYYY-MM-DD, as a string or as YAML's date), or None when absent."""
    return None if value is None else datetime.date.fromisoformat(str(value))


def _reserved(data: dict[str, Any] | None) -> Reserved | None:
    return None if data is None else Reserved(dict(data["prices"]), data["commitment_months"], data.get("prices_date"))
