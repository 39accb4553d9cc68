"""Risks an approver accepts by signing, computed from the funded layouts' estimates and stress tests, the
prices they rest on and the run's configuration."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from gpuplan.analysis import FinetuneEstimate, ServeEstimate
from gpuplan.config import Settings
from gpuplan.decision.audit import ConfigRecord
from gpuplan.decision.prices import PriceBasis
from gpuplan.decision.sensitivity import (
    BASE,
    CONCURRENCY,
    PRICE_MOVE,
    PRICE_UP,
    SPEED_SLOW,
    Scenario,
    Sensitivity,
)
from gpuplan.findings import Finding, Severity
from gpuplan.layout import replicas
from gpuplan.linter import code_selected
from gpuplan.plan.evaluate import within_headroom
from gpuplan.records import record
from gpuplan.units import format_gib, format_gib_apart, format_latency_ms, format_money, plural


@record
class Risk:
    title: str
    detail: str


def _replicas(serve: Any) -> int:
    setup = serve.setup
    return replicas(serve.gpus, setup.tensor_parallel, setup.pipeline_parallel)


def compute_risks(
    analysis: Any,
    funded: Sequence[tuple[Any, Sensitivity | None]],
    findings: tuple[Finding, ...],
    bases: dict[str, PriceBasis],
    settings: Settings,
    record: ConfigRecord,
    today: datetime.date,
    idle: Sequence[tuple[str, int, int, float | None]] = (),
) -> list[Risk]:
    """Every risk that applies to the layouts the approver funds (``funded``: each job's estimate, the
    recommended layout's where a change is required, with its stress test), in a fixed order:
    availability, memory, latency, prices, runs, waivers, configuration. ``bases``: the price basis of
    each funded GPU. ``analysis`` (the declared estimates) is read only for what the configuration hid.
    ``idle``: per job billed by whole instances, (job, GPUs, GPUs billed, what the idle ones cost)."""
    risks: list[Risk] = []
    spec = analysis.spec if analysis else None
    currency = spec.budget.currency if spec else ""
    serve = next((e for e, _ in funded if isinstance(e, ServeEstimate)), None)
    finetune = next((e for e, _ in funded if isinstance(e, FinetuneEstimate)), None)
    stress = {("serve" if isinstance(e, ServeEstimate) else "finetune"): s for e, s in funded}
    if serve is not None and _replicas(serve) == 1:
        risks.append(
            Risk(
                "No N+1 redundancy",
                f"One replica on {plural(serve.gpus, 'GPU')}: a GPU or node failure stops the service until it is "
                "replaced; a second replica doubles the serving cost",
            )
        )
    confidence = spec.plan.confidence if spec else 0.0
    for estimate, capacity, figure, word in (
        (
            finetune,
            finetune.gpu.usable_bytes if finetune else 0,
            finetune.planned_bytes(confidence) if finetune else 0,
            f"Fine-tuning at {confidence:.0%} confidence in its memory estimate",
        ),
        (
            serve,
            serve.memory.budget if serve else 0,
            serve.planned_bytes(confidence) if serve else 0,
            f"Serving at {confidence:.0%} confidence in the KV cache its engine allocates",
        ),
    ):
        if estimate is None or not estimate.fits:
            continue
        if not within_headroom(figure, capacity, settings.headroom_pct):
            free = capacity - figure
            needs, has = format_gib_apart(figure, capacity)
            risks.append(
                Risk(
                    "Memory at risk" if figure > capacity else "Headroom under the margin",
                    f"{word} leaves {format_gib(free)} ({free / capacity:.0%}) free per GPU, under the configured "
                    f"{settings.headroom_pct:g}% margin: a longer prompt or a framework update can run out of memory"
                    if figure <= capacity
                    else f"{word} needs up to {needs} per GPU, more than the {has} it has: "
                    "runs like it have come in this high",
                )
            )
    risks.extend(_stress_risks(stress, currency))
    for job, gpus, billed, extra in idle:
        cost = "" if extra is None else f" (+{format_money(extra, currency)}{' a month' if job == 'serve' else ''})"
        risks.append(
            Risk(
                "Whole-instance billing",
                f"The {'serving' if job == 'serve' else 'fine-tuning'} quote is per instance: {plural(gpus, 'GPU')} "
                f"are billed as {billed}{cost} for GPUs left idle; the amount includes them, and a layout that uses "
                "them costs no more",
            )
        )
    for basis in bases.values():
        if basis.price is None:
            risks.append(Risk("Unpriced GPU", f"{basis.gpu}: {basis.text}; its cost is not in the amount"))
            continue
        if basis.date is None:
            risks.append(Risk("Undated price", f"{basis.gpu}: {basis.text}; its age cannot be checked"))
        elif (today - basis.date).days > settings.price_max_age_days:
            age = (today - basis.date).days
            risks.append(
                Risk(
                    "Stale price",
                    f"{basis.gpu}: quoted {basis.date.isoformat()}, {age} days ago (more than "
                    f"{settings.price_max_age_days}); rental prices move by tens of percent within a quarter",
                )
            )
        if basis.origin == "catalog" and len(basis.providers) == 1:
            risks.append(
                Risk(
                    "Single provider",
                    f"{basis.gpu}: the price rests on quotes from {basis.providers[0]} only; capacity and price "
                    "depend on one supplier",
                )
            )
    if finetune is not None and finetune.hours is not None:
        hours = finetune.hours
        if hours > settings.long_run_hours and finetune.job.checkpoint_every_hours is None:
            risks.append(
                Risk(
                    "Long run without checkpoints",
                    f"The fine-tuning run takes about {hours:,.0f} hours with no checkpoints declared: a failure late "
                    f"in the run repeats it (up to {format_money(finetune.cost, currency)})",
                )
            )
    for finding in findings:
        if finding.waiver is not None:
            waiver = finding.waiver
            who = f", approved by {waiver.approved_by}" if waiver.approved_by else ", approver not named"
            until = f", until {waiver.expires}" if waiver.expires else ", no expiry"
            risks.append(
                Risk(
                    f"Waiver in force: {finding.code}",
                    f"{finding.message} — accepted because {waiver.reason}{who}{until}",
                )
            )
    risks.extend(_configuration_risks(analysis, findings, record, currency))
    return risks


def _stress_risks(stress: dict[str, Sensitivity | None], currency: str) -> list[Risk]:
    """What the funded layouts' stress tests show: an SLO missed at the slow end of the speed band, twice
    the load not held, a price rise past the budget, a run that costs more at the slow end."""
    risks: list[Risk] = []
    serve, finetune = stress.get("serve"), stress.get("finetune")
    if serve is not None:
        base, slow = serve.scenario(BASE), serve.scenario(SPEED_SLOW)
        # met on the estimate, missed at the slow edge (the verdict's: base.slo_met is judged there)
        if base is not None and slow is not None and base.slo_estimate_met and slow.slo_met is False:
            figures = "; ".join(
                f"{name} {'no bound' if value is None else format_latency_ms(name.lower(), value) + ' ms'}"
                f" (SLO {limit * 1000:,g} ms)"  # the SLO as the spec states it
                for name, value, limit in (
                    ("TTFT", slow.ttft_s, serve.slo_ttft_s),
                    ("TPOT", slow.tpot_s, serve.slo_tpot_s),
                )
                if limit is not None
            )
            risks.append(
                Risk(
                    "Latency target at the slow edge",
                    f"At the slow end of the speed estimate's error band the service misses its latency target: "
                    f"{figures}",
                )
            )
        doubled = serve.scenario(CONCURRENCY)
        if base is not None and base.passes and doubled is not None and not doubled.passes:
            risks.append(
                Risk(
                    "No room for twice the load",
                    f"With twice the users per replica the layout {_why_not(doubled)}: more users "
                    "need more GPUs (the stress test prices twice the users)",
                )
            )
    for job, sensitivity in (("serving", serve), ("fine-tuning", finetune)):
        if sensitivity is None:
            continue
        base, up = sensitivity.scenario(BASE), sensitivity.scenario(PRICE_UP)
        if base is not None and up is not None and base.within_budget and up.within_budget is False:
            risks.append(
                Risk(
                    "A price rise breaks the budget",
                    f"With prices {PRICE_MOVE:.0%} higher, {job} costs {format_money(up.cost, currency)}, over its "
                    f"budget of {format_money(sensitivity.budget, currency)}",
                )
            )
    base = finetune.scenario(BASE) if finetune is not None else None
    slow = finetune.scenario(SPEED_SLOW) if finetune is not None else None
    if base and slow and base.cost is not None and slow.cost is not None and slow.cost > base.cost:
        risks.append(
            Risk(
                "The run may take longer",
                f"At the slow end of the speed estimate's error band the run takes {slow.hours or 0:,.1f} hours "
                f"and costs {format_money(slow.cost, currency)} against the estimate of "
                f"{format_money(base.cost, currency)}: the amount to sign allows for the slow end",
            )
        )
    return risks


_WHY_NOT = {
    "memory": "does not fit in memory",
    "start": "cannot start its engine",
    "margin": "fits without the configured memory margin",
    "rate": "cannot keep up with its request rate",
    "latency": "misses its latency target",
    "budget": "goes over the budget",
}


def _why_not(scenario: Scenario) -> str:
    return _WHY_NOT[scenario.first_broken]


def _configuration_risks(
    analysis: Any, findings: tuple[Finding, ...], record: ConfigRecord, currency: str
) -> list[Risk]:
    """Checks the configuration switched off, where the estimate shows what they would have said."""
    from gpuplan.codes import CODES

    risks: list[Risk] = []
    reported = {finding.code for finding in findings}
    off = [
        code
        for code, entry in CODES.items()
        if not code_selected(code, entry.name, record.select, record.ignore) and code not in reported
    ]
    if off:
        risks.append(
            Risk(
                "Rules ignored by configuration",
                f"{', '.join(off)} did not run ({record.path or 'command line'}); the verdict cannot reflect them",
            )
        )
    spec = analysis.spec if analysis else None
    if spec is None:
        return risks
    budget = spec.budget
    over = []
    for code, word, cost, limit, per in (
        ("GP502", "serving", analysis.serve.monthly_cost if analysis.serve else None, budget.serve_monthly, " a month"),
        ("GP501", "fine-tuning", analysis.finetune.cost if analysis.finetune else None, budget.finetune_total, ""),
    ):
        if cost is not None and limit is not None and cost > limit and code not in reported:
            over.append(
                f"{word} costs {format_money(cost, currency)}{per} against a budget of "
                f"{format_money(limit, currency)} ({code} off)"
            )
    if over:
        text = "; ".join(over)
        risks.append(Risk("Over budget with the budget check off", text[:1].upper() + text[1:]))
    for code, default, level in record.severities:
        if Severity(level).rank < Severity(default).rank:
            risks.append(Risk(f"Rule lowered: {code}", f"{CODES[code].name} reports at {level} instead of {default}"))
    return risks
