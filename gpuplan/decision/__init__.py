"""The decision a procurement review signs: a verdict with a one-sentence reason, and the amount requested.

The verdict is computed from the same findings, fail level (``--fail-on``), configuration (select, ignore,
severity) and waiver mode as the exit code, so a report never disagrees with its run:

- a run that exits 1 is never APPROVE, and REJECT always exits 1 (its deciding findings are at or above
  the fail level);
- CANNOT APPROVE also comes from a fact rather than a finding: an amount that cannot be stated (no price, or
  no token count for a fine-tuning run) cannot be signed, whatever the severity of GP503.

Order of precedence, worst first:

1. no estimate (the spec did not load, validate or resolve) -> CANNOT APPROVE;
2. a finding at or above the fail level that says the declared plan cannot work (does not fit, cannot run
   as declared, misses an SLO, over budget) -> REJECT;
3. a finding at or above the fail level that says information is missing (input and schema errors, a
   missing or stale price), or an amount that cannot be stated -> CANNOT APPROVE;
4. any other finding at or above the fail level, or a finding below it that says the declared layout is
   not sound (low headroom, gradient sync, a cheaper sound layout, a layout outside the plan's limits, a
   reject-class finding re-levelled below the fail level) -> APPROVE WITH CHANGES;
5. otherwise APPROVE.

An APPROVE WITH CHANGES and a REJECT of an estimated spec name the way forward: the planner's recommended
layout (gpuplan.plan, the same search GP507 asks) with its cost and what it saves against the declared one.

This module imports no Jinja or WeasyPrint: ``gpuplan diff`` compares verdicts with it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gpuplan.codes import CODES, Approval, approval_of
from gpuplan.findings import Finding, Severity
from gpuplan.layout import replicas as layout_replicas
from gpuplan.records import record
from gpuplan.units import Shown, money_sum, money_times, shown_money

if TYPE_CHECKING:  # the planner is imported only where a change is built (lint never needs it)
    from gpuplan.plan.describe import Saving


class Verdict(str, enum.Enum):
    """The four answers a report gives; ``rank`` orders them from best (0) to worst (3)."""

    APPROVE = "APPROVE"
    APPROVE_WITH_CHANGES = "APPROVE WITH CHANGES"
    CANNOT_APPROVE = "CANNOT APPROVE"
    REJECT = "REJECT"

    @property
    def rank(self) -> int:
        return list(Verdict).index(self)

    @property
    def signable(self) -> bool:
        """Whether the decision record may show names as approvals (never under REJECT or CANNOT APPROVE)."""
        return self in (Verdict.APPROVE, Verdict.APPROVE_WITH_CHANGES)

    @property
    def slug(self) -> str:
        return self.value.lower().replace(" ", "-")


@record
class Amount:
    """What the spec asks to spend: the one-off fine-tuning run plus serving for ``term_months``.

    ``unknown`` says why a part could not be priced; the total is then None, never a partial sum.
    """

    currency: str
    term_months: int
    finetune_run: float | None = None  # None: no fine-tuning job, or unpriced (see ``unknown``)
    serve_monthly: float | None = None  # None: no serving job, or unpriced (see ``unknown``)
    unknown: tuple[str, ...] = ()

    @property
    def serve_term(self) -> float | None:
        """The monthly cost as every report prints it, times the term, so the product checks by hand."""
        return None if self.serve_monthly is None else money_times(self.serve_monthly, self.term_months).value

    @property
    def total_shown(self) -> Shown | None:
        """The run as printed plus the term's serving as printed (gpuplan.units: the sum of shown amounts)."""
        if self.unknown:
            return None
        parts = [shown_money(self.finetune_run)] if self.finetune_run is not None else []
        if self.serve_monthly is not None:
            parts.append(money_times(self.serve_monthly, self.term_months))
        return money_sum(*parts)

    @property
    def total(self) -> float | None:
        total = self.total_shown
        return None if total is None else total.value


@record
class Decision:
    verdict: Verdict
    reason: str  # one sentence, ending with a full stop
    deciding: tuple[Finding, ...]  # the findings the verdict rests on (empty for APPROVE, and for a missing amount)
    amount: Amount | None  # None when there is no estimate
    fail_on: Severity
    exit_code: int  # the run's exit code under the same findings and fail level
    changes: tuple[Change, ...] = ()  # the planner's recommended layout per job where it differs from the declared
    # APPROVE: the waived findings it rests on, ones that would have kept the layout from approval (``CLAIMS``)
    waived: tuple[Finding, ...] = ()

    @property
    def amount_with_changes(self) -> Amount | None:
        """The amount once every required layout replaces the declared one, priced the same way (None:
        no change, no amount, or a required layout without a cost): what a signer of an APPROVE WITH
        CHANGES actually commits to, beside the declared amount the spec asks for."""
        if self.amount is None or not self.changes or any(change.amount is None for change in self.changes):
            return None
        parts = {"finetune": self.amount.finetune_run, "serve": self.amount.serve_monthly}
        for change in self.changes:
            parts[change.job] = change.amount
        return replace(self.amount, finetune_run=parts["finetune"], serve_monthly=parts["serve"])


@record
class Change:
    """The planner's recommended layout for one job that the declared layout should become."""

    job: str  # "serve" | "finetune"
    layout: str  # the recommended layout in the planner's words (``2 x h200-sxm, tensor_parallel 2``)
    cost: str  # its cost (``6,636 USD/month``)
    saving: Saving | None  # per month (serving) or per run / per 1M tokens (fine-tuning); None: unpriced or unsound
    fragment: str  # the spec fields to paste
    amount: float | None = None  # its cost in the amount's terms: a month of serving, or the run; None: unknown

    def sentence(self, currency: str) -> str:
        word = "serving" if self.job == "serve" else "fine-tuning"
        text = f"{word} on {self.layout} ({self.cost})"
        if self.saving is not None and self.saving.positive:
            text += f", saving {self.saving.text(currency)}"
        return text


def amount_of(analysis: Any) -> Amount:
    """The amount requested by an analysed spec (gpuplan.analysis.Analysis)."""
    budget = analysis.spec.budget
    unknown: list[str] = []
    finetune_run = serve_monthly = None
    if analysis.finetune is not None:
        f = analysis.finetune
        finetune_run = f.cost
        if f.price_per_hour is None:
            unknown.append(f"no price per GPU-hour for {f.gpu.id} in {budget.currency}")
        elif f.hours is None:
            unknown.append("finetune.tokens is not given, so the run's length is unknown")
    if analysis.serve is not None:
        s = analysis.serve
        serve_monthly = s.monthly_cost
        if s.price_per_hour is None:
            unknown.append(f"no price per GPU-hour for {s.gpu.id} in {budget.currency}")
    return Amount(budget.currency, budget.term_months, finetune_run, serve_monthly, tuple(dict.fromkeys(unknown)))


def recommended_changes(analysis: Any, planner: Any) -> tuple[Change, ...]:
    """Per job, the planner's recommended layout when it is not the declared one (gpuplan.plan.SpecPlanner)."""
    from gpuplan.plan.describe import cost_text, paste_line

    currency = analysis.spec.budget.currency
    changes = []
    for kind, estimate in (("finetune", analysis.finetune), ("serve", analysis.serve)):
        plan = planner.plan(kind) if estimate is not None else None
        if plan is None or plan.recommended is None or plan.recommended.layout.key == plan.declared.layout.key:
            continue
        option = plan.recommended
        changes.append(
            Change(
                kind,
                option.layout.describe(),
                cost_text(option, currency),
                plan.saving,
                paste_line(option.fragment),
                option.cost,
            )
        )
    return tuple(changes)


def decide(result: Any, fail_on: Severity, *, planner: Any = None) -> Decision:
    """The verdict of one linted spec (gpuplan.linter.LintResult) under the run's fail level.

    ``planner`` (gpuplan.plan.SpecPlanner for the spec, optional) is asked for the recommended layout an
    APPROVE WITH CHANGES or a REJECT quotes; without one, it is built from the run's settings when needed.
    """
    active = [f for f in result.findings if not f.waived]
    blocking = [f for f in active if f.severity.rank >= fail_on.rank]
    exit_code = 1 if blocking else 0
    analysis = result.analysis

    def verdict(kind: Verdict, reason: str, deciding: list[Finding], amount: Amount | None) -> Decision:
        changes: tuple[Change, ...] = ()
        # The planner is quoted when the verdict is about the layout (its memory, speed, cost or budget).
        if analysis is not None and any(_unsound(f.code) for f in deciding):
            changes = recommended_changes(analysis, planner or _planner(analysis, result.settings))
            quoted = [change for change in changes if f"{change.layout} (" not in reason]  # not said twice
            if quoted:
                currency = analysis.spec.budget.currency
                reason = f"{reason.rstrip('.')}; the planner recommends " + " and ".join(
                    change.sentence(currency) for change in quoted
                )
        return Decision(kind, _sentence(reason), tuple(deciding), amount, fail_on, exit_code, changes)

    if analysis is None:
        first = next((f for f in active if f.severity is Severity.ERROR), active[0] if active else None)
        detail = f": {first.message}" if first else ""
        return verdict(
            Verdict.CANNOT_APPROVE, f"The spec could not be estimated{detail}", [first] if first else [], None
        )
    amount = amount_of(analysis)
    rejecting = [f for f in blocking if approval_of(f.code) is Approval.REJECTS]
    if rejecting:
        first = rejecting[0]
        others = sorted({f"{f.code} ({f.name})" for f in rejecting if f.code != first.code})
        more = f"; also {', '.join(others)}" if others else ""
        return verdict(
            Verdict.REJECT,
            f"The declared {_job_word(first)} {CODES[first.code].rejects_because}: {first.message}{more}",
            rejecting,
            amount,
        )
    missing = [f for f in blocking if approval_of(f.code) is Approval.NEEDS_INFORMATION]
    if missing:
        return verdict(Verdict.CANNOT_APPROVE, f"Information is missing: {missing[0].message}", missing, amount)
    if amount.unknown:
        return verdict(Verdict.CANNOT_APPROVE, f"No amount can be stated: {'; '.join(amount.unknown)}", [], amount)
    if blocking:
        first = blocking[0]
        return verdict(
            Verdict.APPROVE_WITH_CHANGES,
            f"Approve once this is resolved ({first.code}, {first.severity.value} at --fail-on "
            f"{fail_on.value}): {first.message}",
            blocking,
            amount,
        )
    unsound = [f for f in active if _unsound(f.code)]
    if unsound:
        # The declared layout's own problem before a saving (GP507 fires beside a layout that must change too:
        # "the declared layout works" must not stand next to what breaks it)
        first = next((f for f in unsound if not CODES[f.code].planner_judged), unsound[0])
        if CODES[first.code].planner_judged:  # the planner's sentence below quotes both layouts and the saving
            # what the plan holds against the declared layout, as the options table states it first: also what
            # no finding reports (plan limits, a split the model cannot take)
            declared = _plan_declared(analysis, planner or _planner(analysis, result.settings), first)
            saving = "GP507" in {f.code for f in unsound}
            reason = (
                f"The declared layout is not sound as it stands ({declared.reasons[0]})"
                + (", and a sound layout costs less (GP507)" if saving else f" ({first.code})")
                if declared is not None and declared.reasons
                else f"The declared layout works, but a sound layout costs less ({first.code})"
            )
        else:
            relevelled = (
                f", re-levelled to {first.severity.value}" if approval_of(first.code) is Approval.REJECTS else ""
            )
            reason = f"The declared layout is not sound as it stands ({first.code}{relevelled}): {first.message}"
        plan = _job_plan(planner or _planner(analysis, result.settings), first)
        if plan is not None and plan.recommended is None:  # no change to approve with: nothing sound to fund
            confidence = analysis.spec.plan.confidence
            return verdict(
                Verdict.REJECT,
                f"{reason.rstrip('.')}; and no layout within the plan's limits meets every constraint at"
                f" {confidence:.0%} confidence (gpuplan plan recommends none), so no change makes it sound",
                unsound,
                amount,
            )
        return verdict(Verdict.APPROVE_WITH_CHANGES, reason, unsound, amount)
    overridden = [f for f in result.findings if f.waived and _unsound(f.code)]
    approved = verdict(Verdict.APPROVE, _approval_reason(analysis, overridden), [], amount)
    return replace(approved, waived=tuple(overridden))


def _planner(analysis: Any, settings: Any) -> Any:
    from gpuplan.config import default_settings
    from gpuplan.plan.configured import planner_for

    return planner_for(analysis.spec, settings or default_settings())


def _plan_declared(analysis: Any, planner: Any, finding: Finding) -> Any:
    """The plan's verdict on the declared layout of the job ``finding`` is about (None without a plan)."""
    plan = _job_plan(planner, finding)
    return None if plan is None else plan.declared


def _job_plan(planner: Any, finding: Finding) -> Any:
    """The plan of the job ``finding`` is about (gpuplan.plan.JobPlan; None without one)."""
    return planner.plan("finetune" if finding.pointer.startswith("/finetune") else "serve")


def _unsound(code: str) -> bool:
    """A finding that makes the declared layout unsound even below the fail level: the approver is told
    what to change rather than asked to sign it as it is (a rejecting finding re-levelled, low headroom,
    a cheaper sound layout)."""
    return approval_of(code) in (Approval.REJECTS, Approval.NEEDS_CHANGE)


def _job_word(finding: Finding) -> str:
    if finding.pointer.startswith("/finetune") or finding.code in ("GP501", "GP601"):
        return "fine-tuning run"
    if finding.pointer.startswith("/serve") or finding.code == "GP502":
        return "deployment"
    return "plan"


# What an APPROVE states of the declared layouts, and the code families whose findings say otherwise. A waiver lets
# a run pass with such a finding; the verdict then says what was waived, never the claim the finding denies.
CLAIMS = {"memory": ("fit", "parallelism"), "latency": ("benchmark",), "budget": ("budget", "storage")}


def denying(findings: Iterable[Finding], claim: str) -> list[Finding]:
    """Of the waived ``findings``, those that deny ``claim`` (a key of ``CLAIMS``) and would have kept the layout
    from approval as declared, in code order."""
    families = CLAIMS[claim]
    found = (f for f in findings if _unsound(f.code) and f.code in CODES and CODES[f.code].family in families)
    return sorted(found, key=lambda f: f.code)


def finding_words(code: str) -> str:
    """What a finding of ``code`` says of the layout, in words that follow "it" (a verdict's, page one's)."""
    entry = CODES[code]
    if entry.rejects_because:
        return entry.rejects_because
    if entry.edge_missed:
        return f"holds on the estimate only ({entry.edge_missed})"
    return entry.summary.rstrip(".").removeprefix("The job ").lower()


def denial(code: str) -> str:
    """What a waived finding of ``code`` says of the layout, in words that follow "it", with the code."""
    return f"{finding_words(code)} ({code}, waived)"


def _approval_reason(analysis: Any, overridden: list[Finding]) -> str:
    """An APPROVE's reason: each job's fit (the estimate's own verdict), latency and money, as they stand, and the
    waived findings the approval rests on (``overridden``: ones that would have kept the layout from approval)."""
    parts = []
    confidence = analysis.spec.plan.confidence
    at = f"at {confidence:.0%} confidence"  # memory as the plan judges it: at its band's pessimistic edge
    for word, job, estimate, usable in (
        ("fine-tuning", "fine-tuning run", analysis.finetune, lambda e: e.gpu.usable_bytes),
        ("serving", "deployment", analysis.serve, lambda e: e.memory.budget),
    ):
        if estimate is None:
            continue
        waived = [f for f in overridden if _job_word(f) == job]
        fit = estimate.fit_verdict(confidence)
        memory = denying(waived, "memory")
        if fit == "fits" and not memory:
            fit = f"fits with {1 - estimate.planned_bytes(confidence) / usable(estimate):.0%} headroom {at}"
        elif memory:
            fit = "; ".join(denial(f.code) for f in memory)
        elif fit != "does not fit":  # at risk, its finding not selected
            fit = f"is {fit}"
        part = f"{word} on {layout_text(estimate)} {fit}"
        if word == "serving":
            late = "; ".join(denial(f.code) for f in denying(waived, "latency"))
            slo = "meets its latency SLOs" if estimate.job.has_latency_slo else "declares no latency SLO"
            part += f" and {late or slo}"
        parts.append(part)
    budget = analysis.spec.budget
    declared = budget.finetune_total is not None or budget.serve_monthly is not None
    money = "within the declared budget" if declared else "priced (no budget is declared to check against)"
    over = denying(overridden, "budget")
    costs = "; ".join(f"the {_job_word(f)} {denial(f.code)}" for f in over) if over else f"every job is {money}"
    reason = f"The declared {' and '.join(parts)}; {costs}"
    if overridden:
        reason += "; approved on waivers: " + "; ".join(
            f"{f.code} ({f.waiver.reason})" if f.waiver is not None and f.waiver.reason else f.code
            for f in sorted(overridden, key=lambda f: f.code)
        )
    return reason


def layout_text(estimate: Any) -> str:
    """A job's layout as people say it: ``4 x h100-sxm (TP 4)``, ``8 x h100-sxm (TP 2, PP 2, 2 replicas)``."""
    setup = estimate.setup
    parts = []
    if setup.tensor_parallel > 1:
        parts.append(f"TP {setup.tensor_parallel}")
    if setup.pipeline_parallel > 1:
        parts.append(f"PP {setup.pipeline_parallel}")
    sharding = getattr(estimate.job, "sharding", "none")  # a fine-tune's (serving has none)
    if sharding != "none":
        parts.append({"zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "ZeRO-3", "fsdp": "FSDP"}.get(sharding, sharding))
    replicas = layout_replicas(estimate.gpus, setup.tensor_parallel, setup.pipeline_parallel)
    if hasattr(estimate, "monthly_cost") and replicas > 1:
        parts.append(f"{replicas} replicas")
    detail = f" ({', '.join(parts)})" if parts else ""
    return f"{estimate.gpus:,} x {estimate.gpu.id}{detail}"


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text if text.endswith((".", "!", "?")) else text + "."
