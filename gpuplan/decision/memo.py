"""The decision memo: everything a decision report states, computed once, in one place.

``build_memo`` takes a linted spec (gpuplan.linter.LintResult) and the planner's answer for it
(gpuplan.plan.SpecPlanner, built with the run's settings when not given) and returns a ``Memo``: the
verdict and its reason (gpuplan.decision.decide, the same call ``gpuplan diff`` makes), the amount to sign as
a ceiling over its term, and per job the planner's plan, the layout the approver funds, its budget check
against the cheapest sound layout, its stress test beside the declared layout's, the prices it rests on;
then the risks of what is funded, the date the approval lapses and the audit record. The report (Markdown,
HTML, PDF) and ``gpuplan plan`` only format a Memo: nothing in them decides, estimates or searches.

The amount to sign is a ceiling: the funded layouts' amount (the declared one's under APPROVE), with a
fine-tuning run at the slow end of its speed band (its hours are an estimate with a measured error; a
month of serving is GPUs x price x 730 hours, known once the price is), so the run's stress test never
shows a cost above what was signed.

The funded layout is the one the approver's signature pays for: the planner's recommendation for a job
whose change the verdict requires (``Decision.changes``), else the declared layout. Its stress test runs the
same scenarios as the declared layout's (gpuplan.decision.sensitivity); the scenarios the funded layout
fails and the declared one passes are named (``JobMemo.weaker``), so a recommendation never hides a
weakness the declared layout did not have.

The term runs from ``budget.term_start`` (default: the report's date) for ``budget.term_months`` months; it
ends the day before the same day of the month that many months later (2026-12-02 for 12 months: to
2027-12-01), or on the last day of that month when it has no such day (2027-01-31 for one month: to
2027-02-28). A spec with no serving job has no term: its run is one-off.
"""

from __future__ import annotations

import calendar
import datetime
from dataclasses import replace
from typing import Any

from gpuplan.analysis import FinetuneEstimate, estimate_finetune
from gpuplan.config import Settings, default_settings
from gpuplan.decision import Amount, Decision, Verdict, decide
from gpuplan.decision.acquisition import Acquisition, acquisitions
from gpuplan.decision.audit import (
    ConfigRecord,
    Expiry,
    GitState,
    WaiverEntry,
    approval_expiry,
    approved_data,
    config_record,
    content_hash,
    git_state,
    waiver_entries,
)
from gpuplan.decision.prices import CatalogQuote, PriceBasis, catalog_quotes, price_basis
from gpuplan.decision.risks import Risk, compute_risks
from gpuplan.decision.sensitivity import SPEED_SLOW, Scenario, Sensitivity, more_users, sensitivity
from gpuplan.findings import Severity
from gpuplan.plan.configured import efficiency_of, planner_for
from gpuplan.plan.evaluate import Option
from gpuplan.plan.spec_planner import JobPlan, SpecPlanner
from gpuplan.records import record
from gpuplan.spec import HOURS_PER_MONTH
from gpuplan.units import Shown, money_difference

GROWTH = 2  # "2x users": the demand the growth line prices


@record
class Term:
    """What the serving amount covers: ``months`` months from ``start`` to ``end`` (inclusive)."""

    start: datetime.date
    end: datetime.date
    months: int


def add_months(day: datetime.date, months: int) -> datetime.date:
    """``day`` ``months`` later, on the month's last day where the day of the month does not exist."""
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    return datetime.date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def term_of(start: datetime.date, months: int) -> Term:
    later = add_months(start, months)
    # The same day of the month, that many months on, is the next term's first day; a month without that
    # day (the 31st in February) ends the term on its last day.
    end = later if later.day < start.day else later - datetime.timedelta(days=1)
    return Term(start, end, months)


@record
class Growth:
    """Serving: what ``factor`` times the users would cost, on the funded layout's GPU kind when it can."""

    factor: int
    option: Option | None  # the cheapest sound layout for that demand; None: none within the plan's limits
    extra: Shown | None  # per month over the funded layout (never below 0); None: unpriced, or no layout


@record
class Stress:
    """One layout's stress test: ``label`` is "declared", "recommended" or "declared and recommended"."""

    label: str
    option: Option
    sensitivity: Sensitivity
    growth: Growth | None = None


@record
class BudgetCheck:
    """The funded layout's cost against the job's budget, and the cheapest sound layout beside it."""

    job: str  # "serve" (per month) | "finetune" (per run)
    limit: float | None  # None: no budget declared for the job
    cost: float | None  # the funded layout's; None: unpriced (or a run without finetune.tokens)
    cheapest: Option | None  # the cheapest sound, priced layout the planner finds; None: there is none

    @property
    def within(self) -> bool | None:
        return None if self.limit is None or self.cost is None else self.cost <= self.limit

    @property
    def overrun(self) -> Shown | None:
        """By how much the funded layout is over the budget (as the amounts are shown); None: within."""
        if self.limit is None or self.cost is None or self.cost <= self.limit:
            return None
        return money_difference(self.cost, self.limit)

    @property
    def nothing_fits(self) -> bool:
        """Whether no sound layout the planner may propose fits the budget (its cheapest is over it)."""
        cheapest = None if self.cheapest is None else self.cheapest.cost
        return self.limit is not None and cheapest is not None and cheapest > self.limit

    @property
    def cheapest_overrun(self) -> Shown | None:
        if self.limit is None or self.cheapest is None or self.cheapest.cost is None or not self.nothing_fits:
            return None
        return money_difference(self.cheapest.cost, self.limit)


@record
class Billing:
    """A layout priced by an instance-hour quote is billed by whole instances: the GPUs it leaves idle in
    its last instance are paid for too. The estimate prices the whole instances (``paid_gpus``), so the
    amount, the budget check, the verdict and the planner's costs include them; the report says what the
    idle GPUs add, beside the price and as a risk."""

    instance_gpus: int
    gpus: int  # the layout's
    billed_gpus: int  # the whole instances' GPUs
    extra: float | None  # what the idle GPUs cost, per month (serving) or per run; None: no run length

    @property
    def idle(self) -> int:
        return self.billed_gpus - self.gpus


def billing_of(option: Option, spec: Any) -> Billing | None:
    """Whole-instance billing of ``option`` under its GPU's quote; None for a price per GPU-hour."""
    record = spec.price_record(option.layout.gpu)
    if record is None or not record.instance_gpus:
        return None
    size, gpus = record.instance_gpus, option.gpus
    billed = -(-gpus // size) * size
    estimate = option.estimate
    hours = HOURS_PER_MONTH if option.kind == "serve" else (estimate.hours if option.tokens_known else None)
    extra = None if hours is None else (billed - gpus) * record.per_hour * hours
    return Billing(size, gpus, billed, extra)


@record
class Ways:
    """Renting on demand, reserving or buying one layout's GPUs (gpuplan.decision.acquisition), over the
    term (serving) or the run (fine-tuning), when the spec prices more than one way."""

    label: str  # "declared" | "recommended"
    hours: float | None  # the run's hours (fine-tuning); None for serving (the term)
    ways: tuple[Acquisition, ...]


def ways_of(option: Option, label: str, spec: Any) -> Ways | None:
    estimate = option.estimate
    gpu, count, price = option.layout.gpu.id, option.gpus, option.price_per_hour
    if option.kind == "serve":
        found = acquisitions(spec, gpu, count, price, months=spec.budget.term_months, billed=estimate.paid_gpus)
        hours = None
    elif option.tokens_known and estimate.hours is not None:
        hours = estimate.hours
        found = acquisitions(spec, gpu, count, price, hours=hours, billed=estimate.paid_gpus)
    else:
        return None
    return Ways(label, hours, tuple(found)) if found else None


@record
class JobMemo:
    """One job of the memo."""

    kind: str  # "serve" | "finetune"
    plan: JobPlan
    funded: Option  # the layout the approver funds
    budget: BudgetCheck
    stresses: tuple[Stress, ...]  # the funded layout's first, then the declared one's when it differs
    price: PriceBasis  # of the funded GPU
    declared_price: PriceBasis
    billing: Billing | None = None  # the funded layout billed by whole instances (an instance-hour quote)
    ways: tuple[Ways, ...] = ()  # rent, reserve or buy: the declared layout's, then the funded one's

    @property
    def changed(self) -> bool:
        return self.funded.layout.key != self.plan.declared.layout.key

    @property
    def run_ceiling(self) -> float | None:
        """Fine-tuning: what the funded run costs at the slow end of its speed band, the most the amount to
        sign allows for it (a run's length is an estimate; a month of serving is not); None otherwise."""
        return self._slow_cost(self.stresses[0])

    @property
    def declared_run_ceiling(self) -> float | None:
        """``run_ceiling`` of the declared layout: the declared amount on the amount to sign's basis."""
        return self._slow_cost(self.stresses[-1])

    def _slow_cost(self, stress: Stress) -> float | None:
        if self.kind != "finetune":
            return None
        slow = stress.sensitivity.scenario(SPEED_SLOW)
        return None if slow is None else slow.cost

    @property
    def weaker(self) -> tuple[Scenario, ...]:
        """The scenarios the funded layout fails and the declared one passes (none when they are one)."""
        if len(self.stresses) < 2:
            return ()
        funded, declared = self.stresses[0].sensitivity, self.stresses[1].sensitivity
        return tuple(
            scenario
            for scenario in funded.scenarios
            if not scenario.passes and (other := declared.scenario(scenario.key)) is not None and other.passes
        )


@record
class UnitPrice:
    """A GPU's unit price as the decision record lists it: the basis used and the quotes behind it."""

    gpu: str
    basis: PriceBasis
    quotes: tuple[CatalogQuote, ...]  # the catalog's, for a market median; empty for the spec's own price


@record
class Audit:
    """What the decision record needs to be checked later: what was reviewed, as what, under what."""

    spec_file: str
    file_sha256: str
    content_hash: str | None  # of the spec as declared (gpuplan.decision.audit.CONTENT_HASH_DEFINITION)
    approved_hash: str | None  # of the spec as approved, the required changes applied; None: nothing approved
    git: GitState | None
    config: ConfigRecord
    waivers: tuple[WaiverEntry, ...]
    prices: tuple[UnitPrice, ...]


@record
class Memo:
    """The decision for one linted spec, with everything a report shows about it."""

    decision: Decision
    generated: datetime.date
    settings: Settings
    spec: Any  # gpuplan.spec.Spec, or None when the spec did not resolve
    jobs: tuple[JobMemo, ...]
    ceiling: Amount | None  # the amount to sign; None under REJECT and CANNOT APPROVE
    term: Term | None  # None without a serving job (a one-off run)
    expiry: Expiry
    risks: tuple[Risk, ...]
    audit: Audit
    # the declared layouts' amount on the same basis as ``ceiling`` (the run at its slow end), which an
    # APPROVE WITH CHANGES sets beside it and a REJECT states; None without an amount
    declared_ceiling: Amount | None = None

    @property
    def verdict(self) -> Verdict:
        return self.decision.verdict

    def job(self, kind: str) -> JobMemo | None:
        return next((job for job in self.jobs if job.kind == kind), None)


def build_memo(
    result: Any,
    generated: datetime.date,
    fail_on: Severity = Severity.ERROR,
    settings: Settings | None = None,
    planner: SpecPlanner | None = None,
) -> Memo:
    """The memo of one linted spec under the run's fail level (``settings``: the run's, by default)."""
    import hashlib
    from pathlib import Path

    settings = settings or result.settings or default_settings()
    analysis = result.analysis
    spec = analysis.spec if analysis is not None else None
    if spec is not None and planner is None:
        planner = planner_for(spec, settings)
    decision = decide(result, fail_on, planner=planner)
    jobs: list[JobMemo] = []
    if spec is not None and planner is not None:
        changed = {change.job for change in decision.changes}
        for kind, estimate in (("finetune", analysis.finetune), ("serve", analysis.serve)):
            plan = planner.plan(kind) if estimate is not None else None
            if plan is not None:
                jobs.append(_job_memo(spec, planner, plan, kind in changed, settings))
    funded_bases = {job.price.gpu: job.price for job in jobs}
    waivers_in_force = {f.code: f.waiver.expires for f in result.findings if f.waiver and f.waiver.expires}
    expiry = approval_expiry(
        generated,
        {gpu_id: basis.date for gpu_id, basis in funded_bases.items() if basis.date},
        waivers_in_force,
        settings.price_max_age_days,
    )
    config = config_record(result.options, result.path)
    funded = [(_estimate_of(job.funded, spec, settings), job.stresses[0].sensitivity) for job in jobs]
    idle = [
        (job.kind, job.billing.gpus, job.billing.billed_gpus, job.billing.extra)
        for job in jobs
        if job.billing is not None and job.billing.idle
    ]
    risks = compute_risks(analysis, funded, result.findings, funded_bases, settings, config, generated, idle)
    signable = decision.verdict.signable
    ceiling = declared_ceiling = None
    if decision.amount is not None:
        finetune = next((job for job in jobs if job.kind == "finetune"), None)
        # what the declared layouts cost on the amount's basis: beside an approval, and in a rejection's words
        declared_ceiling = _allowing_slow_run(decision.amount, finetune.declared_run_ceiling if finetune else None)
        if signable:
            ceiling = decision.amount_with_changes if decision.changes else decision.amount
            ceiling = _allowing_slow_run(ceiling, finetune.run_ceiling if finetune else None)
    term = None
    if spec is not None and spec.serve is not None:
        start = spec.budget.term_start or generated
        term = term_of(start, spec.budget.term_months)
    raw = result.document.raw if result.document else b""
    data = result.document.data if result.document else None
    approved = None
    if signable and data is not None:
        fragments = [job.funded.fragment for job in jobs if job.changed]
        approved = content_hash(approved_data(data, fragments))
    bases = {job.declared_price.gpu: job.declared_price for job in jobs} | funded_bases
    audit = Audit(
        Path(result.path).name,
        hashlib.sha256(raw).hexdigest(),
        content_hash(data),
        approved,
        git_state(Path(result.path)) if result.document else None,
        config,
        waiver_entries(spec.waivers if spec else (), result.findings, config.waivers),
        tuple(
            UnitPrice(gpu, basis, catalog_quotes(gpu) if basis.origin == "catalog" else ())
            for gpu, basis in sorted(bases.items())
        ),
    )
    return Memo(
        decision, generated, settings, spec, tuple(jobs), ceiling, term, expiry, tuple(risks), audit, declared_ceiling
    )


def _allowing_slow_run(amount: Amount | None, slow_run: float | None) -> Amount | None:
    """``amount`` with its fine-tuning run at the slow end of its speed band where that costs more: a run's
    length is an estimate, so the amount to sign (and the declared amount beside it) allows for it."""
    if amount is None or slow_run is None or amount.finetune_run is None:
        return amount
    return replace(amount, finetune_run=max(amount.finetune_run, slow_run))


def _job_memo(spec: Any, planner: SpecPlanner, plan: JobPlan, change: bool, settings: Settings) -> JobMemo:
    declared = plan.declared
    funded = plan.recommended if change and plan.recommended is not None else declared
    job_planner = planner.job(plan.kind)
    cheapest = job_planner.cheapest() if job_planner is not None else None
    billing = billing_of(funded, spec)
    budget = BudgetCheck(plan.kind, budget_limit(spec, plan.kind), funded.cost, cheapest)
    same = funded.layout.key == declared.layout.key
    if not same:
        label = "recommended"
    elif plan.recommended is not None and plan.recommended.layout.key == declared.layout.key:
        label = "declared and recommended"
    else:
        label = "declared"
    stresses = [_stress(spec, planner, funded, label, settings)]
    if not same:
        stresses.append(_stress(spec, planner, declared, "declared", settings, growth=False))
    return JobMemo(
        plan.kind,
        plan,
        funded,
        budget,
        tuple(stresses),
        price_basis(spec, funded.layout.gpu),
        price_basis(spec, declared.layout.gpu),
        billing,
        tuple(
            found
            for option, word in ((declared, "declared"), *(((funded, "recommended"),) if not same else ()))
            if (found := ways_of(option, word, spec)) is not None
        ),
    )


def _estimate_of(option: Option, spec: Any, settings: Settings) -> Any:
    """The option's estimate as the job runs it: a fine-tuning option the planner costed over its nominal
    1M tokens (``finetune.tokens`` not given) is estimated again without a token count, so no hours or run
    cost are stated for it (as for the declared layout)."""
    estimate = option.estimate
    if isinstance(estimate, FinetuneEstimate) and not option.tokens_known:
        return estimate_finetune(spec, replace(estimate.job, tokens=None), efficiency_of(settings))
    return estimate


def _stress(
    spec: Any, planner: SpecPlanner, option: Option, label: str, settings: Settings, *, growth: bool = True
) -> Stress:
    moved = sensitivity(spec, _estimate_of(option, spec, settings), settings)
    grown = _growth(spec, planner, option, settings) if growth and option.kind == "serve" else None
    return Stress(label, option, moved, grown)


def _growth(spec: Any, planner: SpecPlanner, option: Option, settings: Settings) -> Growth:
    """The cheapest sound layout for ``GROWTH`` times the declared users (``more_users``: a closed loop's
    clients, a burst's requests or a steady stream's rate), on the option's GPU kind, else on any allowed kind
    (where no sound layout is priced: the fewest GPUs of the option's kind that hold them); and what it adds a
    month."""
    grown = replace(spec, serve=more_users(spec.serve, GROWTH))
    job = planner_for(grown, settings, planner.limits).job("serve")
    gpu = option.layout.gpu.id
    found = None
    if job is not None:
        found = job.cheapest(where=lambda kind, tp, pp: kind.id == gpu, tag=f"on {gpu}") or job.cheapest()
        # nothing priced holds it: the fewest GPUs of the same kind that do (unpriced: no amount to add)
        found = found or job.fewest_gpus_on(option.layout.gpu)
    extra = None
    if found is not None and found.cost is not None and option.cost is not None:
        extra = money_difference(found.cost, option.cost)
        if extra.value < 0:
            extra = Shown(0.0, extra.decimals)
    return Growth(GROWTH, found, extra)


def budget_limit(spec: Any, kind: str) -> float | None:
    """The job's budget: per month for serving, per run for fine-tuning; None when none is declared."""
    return spec.budget.serve_monthly if kind == "serve" else spec.budget.finetune_total


def within_budget(option: Option, spec: Any) -> bool | None:
    """Whether ``option`` costs no more than its job's budget; None without a budget or a cost."""
    limit, cost = budget_limit(spec, option.kind), option.cost
    return None if limit is None or cost is None else cost <= limit


def meets_everything(option: Option, spec: Any) -> bool:
    """Sound (every planner constraint) and not over the budget: what "meets every constraint" says."""
    return option.sound and within_budget(option, spec) is not False
