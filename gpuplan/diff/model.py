"""What a diff holds: each spec's figures on both sides, what changed, and the totals across specs.

Plain frozen data built from lint results; the formats (text, markdown, json, github) only read it.
Money is rounded to cents once, here, so that totals are exactly the sums of the figures shown.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import field
from pathlib import Path
from typing import Any

from gpuplan.analysis import Analysis
from gpuplan.decision import Amount
from gpuplan.defaults import property_node
from gpuplan.diff.fields import FieldChange, changed_fields
from gpuplan.diff.verdict import spec_decision, worsened
from gpuplan.findings import Finding, Severity
from gpuplan.linter import LintResult
from gpuplan.loader import Pointer, Position
from gpuplan.output.estimate_json import estimate_document
from gpuplan.plan.evaluate import TTFT_FIGURES
from gpuplan.records import record
from gpuplan.units import CENT_DIGITS, rounded
from gpuplan.visible import visible

ADDED, REMOVED, MODIFIED, UNCHANGED = "added", "removed", "modified", "unchanged"
JOBS = ("finetune", "serve")
COSTS = ("monthly_cost", "run_cost", "term_cost")

Value = str | int | float | bool | None


@record
class Metric:
    """One figure of a job: its key in the JSON, its label for people, and how to show it."""

    key: str
    label: str
    kind: str  # text | bytes | pct | count | tokens | ms | rate | hours | money
    # Free memory: negative means the layout is over its memory, which people read as "none" (a share) or
    # "none: short by X GiB" (an amount), as the decision report and the planner's table say it.
    free: bool = False


# The rows every format shows, per job, in this order (the JSON carries these and a few more).
SERVE_METRICS = (
    Metric("layout", "Layout", "text"),
    Metric("workload", "Workload", "text"),
    Metric("per_gpu_bytes", "Memory per GPU", "bytes"),
    Metric("planned_bytes", "Memory per GPU at the high edge", "bytes"),
    Metric("headroom_bytes", "Headroom per GPU", "bytes", free=True),
    Metric("headroom_pct", "Headroom share", "pct", free=True),
    Metric("max_concurrency", "Max sequences at the context", "count"),
    Metric("max_context", "Max context at the concurrency", "tokens"),
    Metric("ttft_ms", "TTFT (the SLO's statistic)", "ms"),
    Metric("ttft_slow_ms", "TTFT at the slow edge", "ms"),
    Metric("tpot_ms", "TPOT", "ms"),
    Metric("tpot_slow_ms", "TPOT at the slow edge", "ms"),
    Metric("tokens_per_s", "Output tokens/s", "rate"),
    Metric("tokens_per_s_slow", "Output tokens/s at the slow edge", "rate"),
    Metric("monthly_cost", "Cost per month", "money"),
    Metric("term_cost", "Cost over the term", "money"),
    Metric("cost_per_million_tokens", "Cost per 1M output tokens", "money"),
)
FINETUNE_METRICS = (
    Metric("layout", "Layout", "text"),
    Metric("per_gpu_bytes", "Memory per GPU", "bytes"),
    Metric("planned_bytes", "Memory per GPU at the high edge", "bytes"),
    Metric("headroom_bytes", "Headroom per GPU", "bytes", free=True),
    Metric("headroom_pct", "Headroom share", "pct", free=True),
    Metric("tokens_per_s", "Training tokens/s", "rate"),
    Metric("tokens_per_s_slow", "Training tokens/s at the slow edge", "rate"),
    Metric("training_hours", "Training time", "hours"),
    Metric("run_cost", "Cost of the run", "money"),
    Metric("cost_per_million_tokens", "Cost per 1M training tokens", "money"),
)
METRICS = {"finetune": FINETUNE_METRICS, "serve": SERVE_METRICS}
# A job's figures in its spec's currency: across a change of currency no difference of them is known.
MONEY_FIGURES = frozenset(m.key for metrics in METRICS.values() for m in metrics if m.kind == "money") | {
    "price_per_gpu_hour"
}


def cents(value: float | None) -> float | None:
    return None if value is None else rounded(value, CENT_DIGITS)


@record
class SpecSide:
    """One spec at one revision: the decision, costs, per-job figures, active findings and the loaded data."""

    path: str
    verdict: str
    reason: str  # the decision's one sentence (gpuplan report prints the same)
    currency: str
    term_months: int
    monthly_cost: float | None  # 0 without a serving job; None when unpriced or not estimated
    run_cost: float | None  # 0 without a fine-tuning job; None when unpriced, without tokens or not estimated
    jobs: dict[str, dict[str, Value]]
    findings: tuple[Finding, ...]
    amount: Amount | None = None  # the amount the report requests; None when not estimated
    data: Any = None
    positions: dict[Pointer, Position] = field(default_factory=dict)

    @property
    def estimated(self) -> bool:
        return bool(self.jobs)

    @property
    def term_cost(self) -> float | None:
        """The declared layout over the term, at its estimate: the run plus the monthly cost (whole units) times
        the term (``decision.amount``; the report's amount to sign allows for the speed band's slow end and
        funds the planner's layout under APPROVE WITH CHANGES, so it can differ)."""
        total = self.amount.total if self.amount is not None else None
        return cents(total)

    def cost(self, key: str) -> float | None:
        value: float | None = getattr(self, key)
        return value

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)


def side_from_result(path: str, result: LintResult, fail_on: Severity) -> SpecSide:
    """The figures of one linted spec, decided under ``fail_on``; a spec that did not resolve has a
    decision and findings only."""
    active = tuple(f for f in result.findings if not f.waived)
    document = result.document
    data = document.data if document is not None else None
    positions = document.positions if document is not None else {}
    decision = spec_decision(result, fail_on)
    verdict, reason = decision.verdict.value, decision.reason
    analysis: Analysis | None = result.analysis
    amount = decision.amount
    if analysis is None or amount is None:
        currency, term = _declared_budget(data)
        return SpecSide(path, verdict, reason, currency, term, None, None, {}, active, None, data, positions)
    jobs = _job_figures(analysis, amount)
    serve, finetune = jobs.get("serve"), jobs.get("finetune")
    monthly = _number(serve["monthly_cost"]) if serve else 0.0
    run = _number(finetune["run_cost"]) if finetune else 0.0
    return SpecSide(
        path, verdict, reason, amount.currency, amount.term_months, monthly, run, jobs, active, amount, data, positions
    )


def _number(value: Value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _declared_budget(data: Any) -> tuple[str, int]:
    """The currency and term a spec that did not resolve declares (for grouping it), else the schema's defaults."""
    from gpuplan.validate import load_schema

    budget = data.get("budget") if isinstance(data, dict) else None
    declared = budget if isinstance(budget, dict) else {}
    schema = load_schema()
    currency, term = declared.get("currency"), declared.get("term_months")
    if not isinstance(currency, str) or not currency:
        currency = property_node(schema, "budget", "currency")["default"]
    term_field = property_node(schema, "budget", "term_months")
    if not (
        isinstance(term, int) and not isinstance(term, bool) and term_field["minimum"] <= term <= term_field["maximum"]
    ):
        term = int(term_field["default"])
    return visible(str(currency)), term


def _job_figures(analysis: Analysis, amount: Amount) -> dict[str, dict[str, Value]]:
    """Per job: the estimate's documented figures (``gpuplan estimate --format json``) plus layout and term."""
    estimate = estimate_document(analysis)
    jobs: dict[str, dict[str, Value]] = {}
    if analysis.finetune is not None:
        f, shown = analysis.finetune, estimate["finetune"]
        training = f.setup
        layout = f"{f.gpus:,} x {f.gpu.id}, TP {training.tensor_parallel}, PP {training.pipeline_parallel}"
        tokens = f.job.tokens
        cost = cents(shown["cost"])
        jobs["finetune"] = {
            "layout": layout + (f", sharding {training.job.sharding}" if training.job.sharding != "none" else ""),
            "gpu": f.gpu.id,
            "gpus": f.gpus,
            "tensor_parallel": training.tensor_parallel,
            "pipeline_parallel": training.pipeline_parallel,
            "sharding": training.job.sharding,
            "fits": f.fits,
            **_memory(shown["per_gpu_bytes"], shown["usable_bytes"]),
            # The edges at plan.confidence the fit verdict and the planner judge (estimate --format json).
            "planned_bytes": shown["per_gpu_bytes_band"]["high"],
            "tokens": tokens,
            "tokens_per_s": shown["tokens_per_s"],  # a rate: stated with or without finetune.tokens
            "tokens_per_s_slow": _slow_edge(shown["tokens_per_s_band"]),
            "training_hours": shown["training_hours"],
            "price_per_gpu_hour": shown["price_per_gpu_hour"],
            "run_cost": cost,
            "cost_per_million_tokens": None if cost is None or not tokens else round(cost / tokens * 1e6, 4),
        }
    if analysis.serve is not None:
        s, shown = analysis.serve, estimate["serve"]
        setup = s.setup
        monthly = cents(shown["monthly_cost"])
        jobs["serve"] = {
            "layout": f"{s.gpus:,} x {s.gpu.id}, TP {setup.tensor_parallel}, PP {setup.pipeline_parallel}",
            "workload": f"{'a burst of ' if setup.burst else ''}{setup.concurrency:,} x {setup.context:,} tokens",
            "gpu": s.gpu.id,
            "gpus": s.gpus,
            "tensor_parallel": setup.tensor_parallel,
            "pipeline_parallel": setup.pipeline_parallel,
            "replicas": s.job.hardware.replicas,
            "fits": s.fits,
            **_memory(shown["per_gpu_bytes"], shown["usable_bytes"]),
            # The per-GPU figure at the KV band's low edge, which the fit verdict and the planner judge.
            "planned_bytes": shown["per_gpu_bytes_band"]["high"],
            "context": setup.context,
            "concurrency": setup.concurrency,
            "max_concurrency": shown["max_concurrency"],
            "max_context": shown["max_context"],
            # TTFT at the statistic the SLO bounds (serve.slo.ttft_statistic), and each speed figure's slow edge
            # at plan.confidence, as the SLO rules and the planner judge it.
            "ttft_ms": shown[_slo_ttft_key(s.job.ttft_statistic)],
            "ttft_slow_ms": _slow_edge(shown[f"{_slo_ttft_key(s.job.ttft_statistic)}_band"]),
            "saturated": shown["saturated"],  # a steady stream that outruns the deployment: TTFT without bound
            "tpot_ms": shown["tpot_ms"],
            "tpot_slow_ms": _slow_edge(shown["tpot_ms_band"]),
            "tokens_per_s": shown["tokens_per_s"],
            "tokens_per_s_slow": _slow_edge(shown["tokens_per_s_band"]),
            "price_per_gpu_hour": shown["price_per_gpu_hour"],
            "monthly_cost": monthly,
            "term_cost": cents(amount.serve_term),
            "cost_per_million_tokens": shown["cost_per_million_tokens"],
        }
    return jobs


def _slo_ttft_key(statistic: str) -> str:
    """The estimate JSON's TTFT figure at the statistic an SLO bounds (ttft_p90_s -> ttft_p90_ms)."""
    return TTFT_FIGURES[statistic].removesuffix("_s") + "_ms"


def _slow_edge(band: dict[str, Any] | None) -> Value:
    """A speed figure's slow edge from its band in the estimate JSON; None where the figure is not stated."""
    return None if band is None else band[band["slow"]]


def _memory(per_gpu: int, capacity: int) -> dict[str, Value]:
    """Per-GPU peak, the capacity it is held against (usable memory, or the serving engine's budget), headroom."""
    headroom = capacity - per_gpu
    return {
        "per_gpu_bytes": per_gpu,
        "budget_bytes": capacity,
        "headroom_bytes": headroom,
        "headroom_pct": round(headroom / capacity * 100, 1) if capacity else None,
    }


@record
class SpecChange:
    """One spec across the diff: its two sides and what differs between them."""

    path: str
    old_path: str | None
    status: str
    before: SpecSide | None
    after: SpecSide | None
    findings_added: tuple[Finding, ...] = ()
    findings_resolved: tuple[Finding, ...] = ()
    fields_changed: tuple[FieldChange, ...] = ()
    inputs_changed: tuple[str, ...] = ()  # files the spec reads (model.config) that changed, its bytes or not

    @property
    def currency(self) -> str:
        side = self.after or self.before
        assert side is not None, "a change has at least one side"
        return side.currency

    @property
    def currencies(self) -> tuple[str, str]:
        """The currency of each side's figures (a side that is not there: the other's)."""
        return (self.before.currency if self.before else self.currency), self.currency

    @property
    def verdict_before(self) -> str | None:
        return self.before.verdict if self.before else None

    @property
    def verdict_after(self) -> str | None:
        return self.after.verdict if self.after else None

    @property
    def verdict_worsened(self) -> bool:
        return worsened(self.verdict_before, self.verdict_after)

    @property
    def new_errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings_added if f.severity is Severity.ERROR)

    def line_of(self, pointer: Pointer) -> int | None:
        """A field's line on the new side: a removed field's nearest enclosing field that is still there
        (the old side's line when the whole spec was removed)."""
        side = self.after or self.before
        if side is None or not side.positions:
            return None
        for end in range(len(pointer), -1, -1):
            found = side.positions.get(pointer[:end])
            if found is not None:
                return found.line
        return None

    def cost_before(self, key: str) -> float | None:
        """A cost on the old side; 0 for a spec that did not exist (an added spec counts in full as +)."""
        return self.before.cost(key) if self.before else 0.0

    def cost_after(self, key: str) -> float | None:
        return self.after.cost(key) if self.after else 0.0

    def cost_delta(self, key: str) -> float | None:
        """After minus before; None when either is unknown, or in another currency (no rate between them is
        known: the amounts are not comparable)."""
        old, new = self.cost_before(key), self.cost_after(key)
        if old is None or new is None or self.currency_changed:
            return None
        return cents(new - old)

    def figure_pair(self, job: str, key: str) -> tuple[Value, Value]:
        """A job's figure before and after; a job that appears (disappears) from an estimated side, or with its
        whole spec, counts its costs from (to) zero."""
        old = self.before.jobs.get(job) if self.before else None
        new = self.after.jobs.get(job) if self.after else None
        old_value = old.get(key) if old else None
        new_value = new.get(key) if new else None
        # A side without an estimate (a spec that does not load or resolve) has unknown jobs, not none.
        if key in COSTS and (old is None) != (new is None):
            if old is None and new_value is not None and (self.before is None or self.before.estimated):
                old_value = 0.0
            if new is None and old_value is not None and (self.after is None or self.after.estimated):
                new_value = 0.0
        return old_value, new_value

    @property
    def currency_changed(self) -> bool:
        """Whether the two sides state their amounts in different currencies (none is comparable)."""
        return self.currencies[0] != self.currencies[1]

    def figure_delta(self, job: str, key: str) -> Value:
        """After minus before, for a numeric figure known on both sides (see ``figure_pair``); no amount
        across a change of currency."""
        if key in MONEY_FIGURES and self.currency_changed:
            return None
        old_value, new_value = self.figure_pair(job, key)
        old_number, new_number = _number(old_value), _number(new_value)
        if old_number is None or new_number is None:
            return None
        if isinstance(old_value, int) and isinstance(new_value, int):
            return new_value - old_value
        return round(new_number - old_number, 4)

    @property
    def unjudged(self) -> bool:
        """Whether the spec's bytes changed where a side did not load (it does not parse, is not UTF-8, cannot be
        read): what changed cannot be told, so it is never a change in comments or layout only (a 4 -> 64 GPU
        change between two files that both failed to parse read so, and passed every guardrail)."""
        sides = (self.before, self.after)
        return self.status == MODIFIED and any(side is not None and side.data is None for side in sides)

    @property
    def material(self) -> bool:
        """Whether the change matters: a spec added or removed, or a verdict, figure, finding or field that differs."""
        if self.status in (ADDED, REMOVED) or self.unjudged:
            return True
        assert self.before is not None and self.after is not None
        return bool(
            self.findings_added
            or self.findings_resolved
            or self.fields_changed
            or self.before.verdict != self.after.verdict
            or self.before.jobs != self.after.jobs
            or any(self.cost_delta(key) for key in COSTS)
        )


def compare(
    path: str,
    old_path: str | None,
    before: SpecSide | None,
    after: SpecSide | None,
    same_bytes: bool,
    inputs_changed: tuple[str, ...] = (),
) -> SpecChange:
    """The change of one spec between its two sides (either may be absent, not both); ``inputs_changed``:
    the files it reads that changed (a spec whose bytes are the same is then modified all the same)."""
    if before is None and after is None:
        raise ValueError("a spec change needs at least one side")
    if before is None:
        status = ADDED
    elif after is None:
        status = REMOVED
    else:
        status = UNCHANGED if same_bytes else MODIFIED
    added, resolved = _finding_changes(before.findings if before else (), after.findings if after else ())
    # Fields are compared where both sides loaded; a side that is not YAML has its findings instead.
    fields: tuple[FieldChange, ...] = ()
    if before is not None and after is not None and before.data is not None and after.data is not None:
        fields = changed_fields(before.data, after.data)
    return SpecChange(path, old_path, status, before, after, added, resolved, fields, inputs_changed)


def finding_key(finding: Finding) -> tuple[str, str]:
    """A finding's identity across revisions: its code and the field it points at, not its message."""
    return finding.code, finding.pointer


def _finding_changes(
    before: tuple[Finding, ...], after: tuple[Finding, ...]
) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """Findings only the new side has, and findings only the old side has (counted, so duplicates pair up)."""
    return _extra(after, Counter(map(finding_key, before))), _extra(before, Counter(map(finding_key, after)))


def _extra(findings: tuple[Finding, ...], other: Counter[tuple[str, str]]) -> tuple[Finding, ...]:
    remaining = Counter(other)
    extra = []
    for finding in findings:
        key = finding_key(finding)
        if remaining[key]:
            remaining[key] -= 1
        else:
            extra.append(finding)
    return tuple(extra)


@record
class Figure:
    """A total before and after, its change, the change in percent of before, and the specs left out of it
    because that cost is unknown on one side (no price, no tokens, not estimated)."""

    before: float
    after: float
    uncosted: tuple[str, ...] = ()

    @property
    def delta(self) -> float:
        return round(self.after - self.before, 2)

    @property
    def percent(self) -> float | None:
        return round(self.delta / self.before * 100, 1) if self.before else None


@record
class Totals:
    """Sums over the specs of one currency, per cost; an added spec counts from 0, a removed one to 0."""

    currency: str
    monthly: Figure
    run: Figure
    term: Figure
    specs: int

    @property
    def uncosted(self) -> tuple[str, ...]:
        """Specs left out of at least one of the totals."""
        return tuple(sorted({*self.monthly.uncosted, *self.run.uncosted, *self.term.uncosted}))


def totals(changes: tuple[SpecChange, ...], currency: str) -> Totals:
    mine = [change for change in changes if change.currency == currency]
    figures = {}
    for key in COSTS:
        costed = [change for change in mine if change.cost_delta(key) is not None]
        before = round(sum(change.cost_before(key) or 0.0 for change in costed), 2)
        after = round(sum(change.cost_after(key) or 0.0 for change in costed), 2)
        left_out = tuple(sorted(change.path for change in mine if change.cost_delta(key) is None))
        figures[key] = Figure(before, after, left_out)
    return Totals(currency, figures["monthly_cost"], figures["run_cost"], figures["term_cost"], len(mine))


@record
class Revision:
    """One side of the whole diff: a file, a git revision, or the working tree."""

    kind: str  # file | git | worktree
    name: str
    commit: str | None = None


@record
class DiffResult:
    base: Revision
    head: Revision
    changes: tuple[SpecChange, ...]
    configuration_changed: tuple[str, ...] = ()  # configuration files the diff changes (not diffed: said)
    repository_root: Path | None = None  # the work tree of a git diff (whose root configuration governs it)

    @property
    def currencies(self) -> tuple[str, ...]:
        """Every currency in the diff, the most used first (USD first on a tie: catalog prices are USD)."""
        counted = Counter(change.currency for change in self.changes)
        return tuple(sorted(counted, key=lambda c: (-counted[c], c != "USD", c)))

    @property
    def totals(self) -> tuple[Totals, ...]:
        currencies = self.currencies or ("USD",)
        return tuple(totals(self.changes, currency) for currency in currencies)

    @property
    def material(self) -> tuple[SpecChange, ...]:
        return tuple(change for change in self.changes if change.material)
