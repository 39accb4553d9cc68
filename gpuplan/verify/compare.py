"""Hold a spec's estimate against a run: settings first, then term by term, then what it means.

For each piece of evidence: the run's settings are checked against the spec (GP802), the estimate is
recomputed with the run's settings where they differ, each row of :mod:`gpuplan.verify.terms` is
compared within a tolerance (GP801 when the run used more), the serving engine's capacity is checked
against the declared concurrency (GP803), a KV cache pool below the low edge of the estimate's measured
band at the plan's confidence is a warning (GP806), and a failed run is reported with its cause (GP804).
A difference counts only beyond ``tolerance x estimate`` plus the evidence's printing resolution.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuplan.analysis import Analysis, FinetuneEstimate, ServeEstimate, estimate_finetune, estimate_serve
from gpuplan.config import Settings
from gpuplan.errors import GpuplanError
from gpuplan.evidence.model import (
    FINETUNE,
    GPU_TOTAL,
    KV_POOL,
    KV_TOKENS,
    MAX_CONCURRENCY,
    PEAK_ALLOCATED,
    PEAK_RESERVED,
    REQUESTED,
    SERVE,
    Evidence,
)
from gpuplan.findings import Finding, Severity, sorted_findings
from gpuplan.loader import LoadedDocument, Pointer
from gpuplan.plan.configured import efficiency_of
from gpuplan.records import record
from gpuplan.rules.context import finding_at
from gpuplan.units import format_gib
from gpuplan.verify.settings import Comparison, compare_finetune, compare_serve
from gpuplan.verify.terms import ROWS, TOTAL_ROW, USAGE, Row, finetune_estimate_terms, serve_estimate_terms

WITHIN, OVER, UNDER = "within", "over", "under"
NOT_MEASURED, NOT_ESTIMATED, NOT_COMPARABLE = "not measured", "not estimated", "not comparable"


@record
class TermResult:
    name: str
    unit: str
    direction: str
    estimate: float | None
    measured: float | None
    per_rank: tuple[tuple[str, float], ...]
    resolution: float
    status: str
    estimate_terms: tuple[str, ...]
    measured_terms: tuple[str, ...]

    @property
    def delta(self) -> float | None:
        return None if self.estimate is None or self.measured is None else self.measured - self.estimate

    @property
    def ratio(self) -> float | None:
        if self.estimate is None or self.measured is None or self.estimate == 0:
            return None
        return self.measured / self.estimate


@record
class RunVerification:
    evidence: Evidence
    job: str  # serve | finetune
    basis: str  # "spec", "run settings" (re-estimated), or "" when the terms could not be compared
    settings: tuple[Any, ...]  # SettingCheck
    terms: tuple[TermResult, ...]
    meaning: tuple[str, ...]
    findings: tuple[Finding, ...]
    unexpressible: tuple[str, ...] = ()


def classify(estimate: float | None, measured: float | None, resolution: float, tolerance: float) -> str:
    """OVER or UNDER when measured and estimate differ by more than ``tolerance x estimate + resolution``."""
    if measured is None:
        return NOT_MEASURED
    if estimate is None:
        return NOT_ESTIMATED
    allowed = tolerance * abs(estimate) + resolution
    if measured - estimate > allowed:
        return OVER
    if estimate - measured > allowed:
        return UNDER
    return WITHIN


def verify_run(
    analysis: Analysis, document: LoadedDocument, evidence: Evidence, settings: Settings, tolerance_pct: float
) -> RunVerification:
    """Compare one piece of evidence with the job of ``analysis`` it measures."""
    spec = analysis.spec
    estimate = analysis.serve if evidence.job == SERVE else analysis.finetune
    if estimate is None:
        section = "serve" if evidence.job == SERVE else "finetune"
        raise GpuplanError(
            f"{evidence.path} is a {evidence.engine} run ({evidence.job}), but {spec.path} has no {section}: section"
        )
    check = _Check(document, evidence, settings, tolerance_pct / 100)
    if isinstance(estimate, ServeEstimate):
        return check.serve(analysis, estimate)
    assert isinstance(estimate, FinetuneEstimate)
    return check.finetune(analysis, estimate)


class _Check:
    def __init__(self, document: LoadedDocument, evidence: Evidence, settings: Settings, tolerance: float) -> None:
        self.document, self.evidence, self.settings, self.tolerance = document, evidence, settings, tolerance
        self.findings: list[Finding] = []
        self.meaning: list[str] = []

    # -- per job -----------------------------------------------------------------------------

    def serve(self, analysis: Analysis, estimate: ServeEstimate) -> RunVerification:
        spec, job = analysis.spec, estimate.job
        comparison = compare_serve(spec, job, self.evidence)
        basis_estimate = estimate
        if comparison.job is not job or comparison.spec is not spec:
            efficiency = efficiency_of(self.settings)
            basis_estimate = estimate_serve(comparison.spec, comparison.job, efficiency)
        terms = self._terms(comparison, serve_estimate_terms(basis_estimate))
        self._settings_findings(comparison)
        if job.tenants:
            self.meaning.append(
                "the spec's tenants share these GPUs, but one vLLM engine serves one model: the estimated KV pool "
                "is what the tenants leave the main model, so the run's pool is larger"
            )
        basis = _declared_basis(estimate, basis_estimate)
        held = self._held(estimate, basis)
        budget = self._largest(REQUESTED) or float(estimate.memory.budget)
        spare = held.spare if held else None
        headroom_gone = spare is not None and spare < self._margin() * budget
        self._usage_findings(terms, headroom_gone, ("serve", "hardware", "gpu"))
        if held is None:
            self.meaning.append("the run does not state its KV capacity: the declared concurrency is not checked")
        else:
            self._capacity(estimate, basis, held, terms)
        self._below_band(basis_estimate, spec.plan.confidence, terms)
        self._failure(("serve",), terms)
        return self._result(SERVE, comparison, terms)

    def finetune(self, analysis: Analysis, estimate: FinetuneEstimate) -> RunVerification:
        spec, job = analysis.spec, estimate.job
        comparison = compare_finetune(spec, job, self.evidence)
        basis_estimate = estimate
        efficiency = efficiency_of(self.settings)
        if comparison.job is not job:
            basis_estimate = estimate_finetune(comparison.spec, comparison.job, efficiency)
        terms = self._terms(comparison, finetune_estimate_terms(basis_estimate, self.evidence.peaks_from_training))
        self._settings_findings(comparison)
        peak = self._largest(PEAK_RESERVED) or self._largest(PEAK_ALLOCATED)
        usable = self._largest(GPU_TOTAL) or float(basis_estimate.gpu.usable_bytes)
        headroom_gone = peak is not None and usable - peak < self._margin() * usable
        self._usage_findings(terms, headroom_gone, ("finetune", "hardware", "gpu"))
        if peak is not None:
            self._training_meaning(comparison, basis_estimate, peak, usable, efficiency)
        self._failure(("finetune",), terms)
        return self._result(FINETUNE, comparison, terms)

    # -- terms -------------------------------------------------------------------------------

    def _terms(self, comparison: Comparison, estimated: dict[str, float]) -> list[TermResult]:
        kind = self.evidence.kind
        results = [
            self._row(row, estimated, comparable=not comparison.unexpressible)
            for row in ROWS[self.evidence.job]
            if not row.kinds or kind in row.kinds
        ]
        if self.evidence.job == SERVE:
            usage = [r for r in results if r.direction == USAGE]
            if all(r.estimate is not None and r.measured is not None for r in usage):
                total = Row(
                    TOTAL_ROW,
                    tuple(name for r in usage for name in r.estimate_terms),
                    tuple(name for r in usage for name in r.measured_terms),
                    USAGE,
                    usage[0].unit,
                    "",
                )
                results.append(self._row(total, estimated, comparable=not comparison.unexpressible))
        return results

    def _row(self, row: Row, estimated: dict[str, float], comparable: bool) -> TermResult:
        estimate = sum(estimated[name] for name in row.estimate) if all(n in estimated for n in row.estimate) else None
        per_rank, resolution = self._measured(row)
        measured = None
        if per_rank:
            values = [value for _, value in per_rank]
            measured = max(values) if row.direction == USAGE else min(values)
        status = classify(estimate, measured, resolution, self.tolerance) if comparable else NOT_COMPARABLE
        if measured is None or estimate is None:
            status = NOT_MEASURED if measured is None else NOT_ESTIMATED
        return TermResult(
            row.name,
            row.unit,
            row.direction,
            estimate,
            measured,
            per_rank,
            resolution,
            status,
            row.estimate,
            row.measured,
        )

    def _measured(self, row: Row) -> tuple[tuple[tuple[str, float], ...], float]:
        """Per rank, the sum of the row's evidence terms, for the ranks that report all of them."""
        found = [self.evidence.measurements.get(term) for term in row.measured]
        if any(m is None for m in found):
            return (), 0.0
        tables = [m.by_rank() for m in found if m is not None]
        ranks = [rank for rank, _ in found[0].values] if found[0] else []
        sums = tuple((rank, sum(table[rank] for table in tables)) for rank in ranks if all(rank in t for t in tables))
        return sums, sum(m.resolution for m in found if m is not None)

    # -- findings ----------------------------------------------------------------------------

    def _finding(self, code: str, pointer: Pointer, message: str, hint: str = "") -> Finding:
        return finding_at(self.document, code, pointer, message, hint)

    def _where(self, line: int) -> str:
        return f"{self.evidence.path}:{line}" if line else self.evidence.path

    def _settings_findings(self, comparison: Comparison) -> None:
        for check in comparison.checks:
            if check.matches:
                continue
            declared = "" if check.pointer in self.document.positions else " (its default)"
            self.findings.append(
                self._finding(
                    "GP802",
                    check.pointer,
                    f"the run used {check.name} {check.run_value} ({self._where(check.run_line)}); the spec declares "
                    f"{check.field} {check.spec_value}{declared}",
                    "make the spec say what runs, or rerun with the spec's settings; the terms are compared with "
                    "the estimate recomputed at the run's settings",
                )
            )
        for what in comparison.unexpressible:
            self.meaning.append(f"the run's {what} cannot be stated in the spec: its terms are not compared")

    def _usage_findings(self, terms: list[TermResult], headroom_gone: bool, pointer: Pointer) -> None:
        for term in terms:
            if term.direction != USAGE or term.status != OVER or term.name == TOTAL_ROW:
                continue
            assert term.estimate is not None and term.measured is not None
            used = f"{term.name}: the run used {format_gib(term.measured)} per GPU"
            if term.estimate:
                ratio = term.measured / term.estimate - 1
                message = (
                    f"{used}, the estimate {format_gib(term.estimate)} ({ratio:+.0%}; tolerance {self.tolerance:.0%})"
                )
            else:  # no percentage of nothing: the estimate left the mechanism out (one GPU's communicators)
                message = f"{used}; the estimate has no such term"
            finding = self._finding(
                "GP801",
                pointer,
                message + (", and the headroom is gone" if headroom_gone else ""),
                "the estimate is low for this mechanism: plan with the measured figure, and send the pair back as a "
                "calibration record (docs/verify.md)",
            )
            self.findings.append(finding.with_severity(Severity.ERROR) if headroom_gone else finding)

    def _held(self, estimate: ServeEstimate, basis: ServeEstimate) -> Held | None:
        """The sequences of the declared context the run's KV cache holds, on the run's own basis where its
        log states one: vLLM's 'Maximum concurrency' at that context, else its KV tokens / the context; for
        a log cut after the pool line, the sequences the stated pool holds at ``basis``'s bytes per
        sequence. None when the run states none of them."""
        job = estimate.job
        stated = self.evidence.settings.get("concurrency_context")
        concurrency = self.evidence.measurements.get(MAX_CONCURRENCY)
        tokens = self._smallest(KV_TOKENS)
        pool = self._smallest(KV_POOL)
        if concurrency and stated and stated.value == job.context:
            sequences = self._smallest(MAX_CONCURRENCY)
            assert sequences is not None
            source = f"'Maximum concurrency' ({self._where(concurrency.line)})"
        elif tokens is not None:
            line = self.evidence.measurements[KV_TOKENS].line
            sequences = tokens / job.context
            source = f"{tokens:,.0f} KV tokens / {job.context:,}, {self._where(line)}"
        elif pool is not None and basis.memory.kv_bytes_per_sequence > 0:
            line = self.evidence.measurements[KV_POOL].line
            per_sequence = basis.memory.kv_bytes_per_sequence
            sequences = pool / per_sequence
            source = f"the {format_gib(pool)} pool / {format_gib(per_sequence)} per sequence, {self._where(line)}"
        else:
            return None
        return Held(sequences, source, pool, estimate.required_sequences)

    def _capacity(self, estimate: ServeEstimate, basis: ServeEstimate, held: Held, terms: list[TermResult]) -> None:
        job = estimate.job
        capacity, source = held.sequences, held.source
        if held.pool is not None and held.need is not None and held.spare is not None:
            # What the estimate planned for the same load, on the basis the terms are compared with.
            planned = basis.memory.kv_available - basis.memory.kv_cache
            who = "the estimate" if basis is estimate else "the estimate at the run's settings"
            self.meaning.append(
                f"{'' if estimate.setup.burst else 'the declared '}{estimate.kv_need_text(held.need)}; the run's "
                f"pool holds {format_gib(held.pool)}, {capacity:,.2f} sequences at "
                f"{format_gib(held.pool / capacity, 2)} each: {_spare(held.spare)} ({who} planned {_spare(planned)})"
            )
        self._pool_meaning(terms, job.context)
        holds = f"the engine holds {capacity:,.2f} sequences of {job.context:,} tokens ({source})"
        if not estimate.setup.burst and capacity < job.concurrency:
            self.findings.append(
                self._finding(
                    "GP803",
                    ("serve", "concurrency"),
                    f"{holds}; the spec declares concurrency {job.concurrency:,}: requests beyond {int(capacity):,} "
                    "wait for a free slot",
                    "lower concurrency or context, an fp8 KV cache, a higher memory_utilization, or more GPUs",
                )
            )
        elif estimate.setup.burst and int(capacity) < min(job.concurrency, estimate.max_concurrency):
            # A burst's requests wait for the pool anyway: less than one sequence cannot start (an error), fewer
            # than the estimate planned run a slower wave than it priced (a warning).
            starts = capacity >= 1
            finding = self._finding(
                "GP803",
                estimate.kv_field,
                f"{holds}; "
                + (
                    f"the estimate planned {estimate.max_concurrency:,} at once: the burst's wave runs fewer,"
                    " so its TTFT and throughput are slower than estimated"
                    if starts
                    else "the engine needs room for one to start"
                ),
                "an fp8 KV cache, a shorter context, a higher memory_utilization, or more GPUs",
            )
            self.findings.append(finding.with_severity(Severity.WARNING) if starts else finding)

    def _below_band(self, estimate: ServeEstimate, confidence: float, terms: list[TermResult]) -> None:
        """GP806: the run's KV cache pool (the smallest rank's) below the low edge of the estimate's measured band
        at ``confidence`` (``ServeEstimate.planned_kv_pool``, what every KV-cache figure of the plan planned for),
        beyond the log's printing precision. ``estimate`` is the one the terms are compared with."""
        pool = next((term for term in terms if term.measured_terms == (KV_POOL,)), None)
        if pool is None or pool.measured is None or pool.status in (NOT_MEASURED, NOT_ESTIMATED, NOT_COMPARABLE):
            return
        low = estimate.planned_kv_pool(confidence)
        if low <= 0 or pool.measured + pool.resolution >= low:
            return
        band = estimate.kv_band
        self.findings.append(
            self._finding(
                "GP806",
                estimate.kv_field,
                f"KV cache pool: the run allocated {format_gib(pool.measured)} per GPU, below {format_gib(low)}, the "
                f"low edge at {confidence:.0%} confidence (the engine's KV cache "
                f"{format_gib(estimate.memory.kv_available)} estimated x {band.ratio(1 - confidence):.2f}, the "
                f"ratio measured / estimate that {confidence:.0%} of {band.describe()} stayed at or above)",
                "the estimate promised more KV cache than this run gives, beyond its measured error: plan with the "
                "measured pool, look for what else held the GPU's memory, and send the pair back as a calibration "
                "record (docs/verify.md)",
            )
        )

    def _pool_meaning(self, terms: list[TermResult], context: int) -> None:
        rows = {term.name: term for term in terms}
        pool, concurrency = rows.get("KV cache pool"), rows.get("max concurrency")
        if pool is None or concurrency is None or pool.status in (NOT_MEASURED, NOT_ESTIMATED, NOT_COMPARABLE):
            return
        if pool.status == WITHIN or concurrency.measured is None or concurrency.estimate is None:
            return
        word = "smaller" if pool.status == UNDER else "larger"
        assert pool.measured is not None and pool.estimate is not None
        self.meaning.append(
            f"the KV cache pool is {word} than estimated ({format_gib(pool.measured)} against "
            f"{format_gib(pool.estimate)}), so max concurrency at {context:,} tokens is {concurrency.measured:.1f}, "
            f"not {concurrency.estimate:.1f}"
        )

    def _training_meaning(
        self, comparison: Comparison, estimate: FinetuneEstimate, peak: float, usable: float, efficiency: Any
    ) -> None:
        free = usable - peak
        reserved = self._largest(PEAK_RESERVED) is not None
        memory = estimate.memory
        # The plan's figure for the same counter: the run's peak is PyTorch's, without the CUDA context.
        estimated = finetune_estimate_terms(estimate, self.evidence.peaks_from_training)
        planned = estimated["reserved" if reserved else "tensor_peak"]
        self.meaning.append(
            f"the training peak ({'reserved' if reserved else 'allocated'}) is {format_gib(peak)} of "
            f"{format_gib(usable)} on {estimate.gpu.id}: "
            + (f"{format_gib(free)} ({free / usable:.0%}) left" if free >= 0 else f"over by {format_gib(-free)}")
            + f"; the estimate planned {format_gib(planned)} for that counter ({format_gib(memory.per_gpu)} on "
            "the device)"
        )
        job = comparison.job
        bigger = estimate_finetune(comparison.spec, replace(job, micro_batch=job.micro_batch + 1), efficiency)
        step = bigger.memory.per_gpu - estimate.memory.per_gpu
        if 0 <= free < step:
            self.meaning.append(
                f"one micro-batch more (micro_batch {job.micro_batch + 1}) adds about {format_gib(step)}: "
                "the run is one batch-size step from out-of-memory"
            )

    def _failure(self, pointer: Pointer, terms: list[TermResult]) -> None:
        failure = self.evidence.failure
        if self.evidence.incomplete:
            self.findings.append(
                self._finding(
                    "GP805",
                    pointer,
                    f"{self.evidence.path}: {self.evidence.incomplete}",
                    "give the whole log of a start that completed; what it states is compared above",
                )
            )
        if failure is None:
            return
        when = "failed to start" if failure.during == "startup" else "ran out of memory while running"
        if not failure.out_of_memory:
            hint = "not a memory problem: fix the cause and rerun to verify the estimate"
        elif any(term.measured is not None for term in terms):
            hint = "out of memory: the measured terms show which part the estimate missed"
        else:  # it died before logging a term: the cause's own figures are all there is
            hint = (
                "out of memory before the run logged what it used: hold the cause's figures (what it tried to "
                "allocate, what was free) against the estimate's terms"
            )
        self.findings.append(
            self._finding("GP804", pointer, f"the run {when}: {failure.cause} ({self._where(failure.line)})", hint)
        )

    # -- helpers -----------------------------------------------------------------------------

    def _largest(self, term: str) -> float | None:
        measured = self.evidence.measurements.get(term)
        return max(value for _, value in measured.values) if measured and measured.values else None

    def _smallest(self, term: str) -> float | None:
        measured = self.evidence.measurements.get(term)
        return min(value for _, value in measured.values) if measured and measured.values else None

    def _margin(self) -> float:
        return self.settings.headroom_pct / 100

    def _result(self, job: str, comparison: Comparison, terms: list[TermResult]) -> RunVerification:
        changed = any(not check.matches for check in comparison.checks)
        basis = "" if comparison.unexpressible else ("run settings" if changed else "spec")
        return RunVerification(
            self.evidence,
            job,
            basis,
            comparison.checks,
            tuple(terms),
            tuple(self.meaning) + tuple(f"note: {note}" for note in self.evidence.notes),
            sorted_findings(self.findings),
            comparison.unexpressible,
        )


@record
class Held:
    """What the run's KV cache holds of the declared load, on one basis for the meaning line, GP803 and
    GP801's headroom: ``sequences`` of the declared context (and where that comes from), ``pool`` the
    smallest rank's KV bytes if stated, ``required`` the sequences the load needs at once (a burst: one)."""

    sequences: float
    source: str
    pool: float | None
    required: int

    @property
    def need(self) -> float | None:
        """The pool's bytes the required sequences take, at the bytes a sequence takes in this run."""
        if self.pool is None or self.sequences <= 0:
            return None
        return self.pool * self.required / self.sequences

    @property
    def spare(self) -> float | None:
        """The pool less the need: negative exactly when fewer than ``required`` sequences fit."""
        need = self.need
        return None if need is None or self.pool is None else self.pool - need


def _declared_basis(estimate: ServeEstimate, basis: ServeEstimate) -> ServeEstimate:
    """The estimate to hold the declared load's bytes to: the one at the run's settings (its TP, KV dtype, GPU)
    unless the run's context differs, whose sequences are not the declared ones (then the spec's)."""
    return basis if basis.job.context == estimate.job.context else estimate


def _spare(amount: float) -> str:
    return f"{format_gib(amount)} to spare" if amount >= 0 else f"short by {format_gib(-amount)}"
