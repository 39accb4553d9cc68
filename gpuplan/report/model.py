"""The report model: plain data formatted from a Memo (gpuplan.decision.memo) and the lint result.

The Memo holds every fact and judgement (the verdict, the amount to sign, the funded layouts, their budget
checks and stress tests, the risks, the audit record); this module only words and formats them, and the
templates only loop and print. The first page is the memo (gpuplan.report.page_one), followed by the
technical terms it uses (gpuplan.report.glossary); everything else is an appendix: A the reason and the
changes, B the options, C the stress test, D the risks, E the estimate, F the findings, G verification
against runs (with ``--run``), H assumptions, I the decision record. Every
table is a ``table()`` (caption, column headers, rows whose first cell heads the row), so the HTML, the PDF
and the Markdown all carry the same headers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuplan import __version__
from gpuplan.analysis import NOT_LOADED, Analysis, ServeEstimate
from gpuplan.catalog import catalog_version
from gpuplan.decision import Verdict
from gpuplan.decision.audit import CONTENT_HASH_DEFINITION, ConfigRecord
from gpuplan.decision.memo import JobMemo, Memo, Stress, Ways
from gpuplan.estimate.bands import capacity_band
from gpuplan.findings import Finding, Severity
from gpuplan.linter import LintResult
from gpuplan.plan.describe import cost_text
from gpuplan.plan.spec_planner import JobPlan
from gpuplan.report import page_one
from gpuplan.report.charts import sensitivity_chart
from gpuplan.report.estimate_section import funded_details
from gpuplan.report.glossary import used_terms
from gpuplan.report.options import EVERY_OTHER, planner_rows, planner_slo_column, saving_of, side_by_side, verdict_text
from gpuplan.report.tables import hours, money, ms, table
from gpuplan.rules.fit import PLAN_POINTER
from gpuplan.spec import Spec
from gpuplan.units import (
    TPOT_MS_DIGITS,
    format_gib,
    format_price,
    money_times,
    plural,
)
from gpuplan.validate import load_schema

ROLES = (("prepared_by", "Prepared by"), ("reviewed_by", "Reviewed by"), ("approved_by", "Approved by"))
NOT_FOR_SIGNATURE = "not for signature"
SPEED_NAMES = {
    "ttft": "TTFT",
    "tpot": "TPOT",
    "tokens_per_s": "throughput",
    "training_tokens_per_s": "training throughput",
    "stream_capacity": "the most requests/s completed",
}


def _mark(value: bool | None, yes: str = "✓", no: str = "✗") -> str:
    return "—" if value is None else (yes if value else no)


def _memory_cell(scenario: Any, confidence: float, capacity_shown: bool) -> str:
    """The estimate per GPU and, where it differs, the figure at the band's edge the Fits column judges; the
    capacity too unless the column's header states it (one capacity in every scenario of the layout)."""
    cell = format_gib(scenario.per_gpu)
    if scenario.estimated != scenario.per_gpu:  # a memory row's figure is the band's edge itself
        cell = f"{format_gib(scenario.estimated)} ({cell.removesuffix(' GiB')} at {confidence:.0%})"
    return cell if capacity_shown else f"{cell} of {format_gib(scenario.capacity)}"


def _scenario_cells(scenario: Any, serving: bool, currency: str, confidence: float, capacity_shown: bool) -> list[str]:
    fits = "yes" if scenario.comfortable else ("tight" if scenario.fits else "no")
    row = [_memory_cell(scenario, confidence, capacity_shown), fits]
    if serving:
        row += [
            f"{ms(scenario.ttft_s, 0)} / {ms(scenario.tpot_s, 1, TPOT_MS_DIGITS)}" if scenario.loads else NOT_LOADED,
            _slo_cell(scenario),
        ]
    else:
        row.append("n/a" if scenario.hours is None else f"{hours(scenario.hours)} h")
    row += [
        money(scenario.cost, currency),
        "—" if scenario.within_budget is None else ("yes" if scenario.within_budget else "no"),
    ]
    return row


def _slo_cell(scenario: Any) -> str:
    """Met, missed, or at risk: met on the estimate, missed at the slow edge the verdict judges."""
    if scenario.slo_met is None:
        return "none declared"
    if scenario.slo_met:
        return "met"
    return "at risk" if scenario.slo_estimate_met else "missed"


def _sensitivity_table(stress: Stress, title: str, currency: str, confidence: float) -> dict[str, Any]:
    """One layout's stress test, every figure per scenario."""
    sensitivity = stress.sensitivity
    serving = sensitivity.job == "serve"
    capacities = {scenario.capacity for scenario in sensitivity.scenarios}
    one = len(capacities) == 1
    columns = ["Scenario", f"Memory per GPU, of {format_gib(capacities.pop())}" if one else "Memory per GPU", "Fits"]
    columns += ["TTFT / TPOT", "SLO"] if serving else ["Training time"]
    columns += ["Cost per month" if serving else "Cost of the run", "Within budget"]
    rows = [
        [scenario.name, *_scenario_cells(scenario, serving, currency, confidence, one)]
        for scenario in sensitivity.scenarios
    ]
    numeric = (1, 3, 5) if serving else (1, 3, 4)
    widths = (18, 22, 6, 21, 11, 12, 10) if serving else (27, 21, 10, 14, 16, 12)
    layout = stress.option.layout.describe()
    return table(
        f"{title}: the {stress.label} layout ({layout}) under changed assumptions",
        columns,
        rows,
        numeric=numeric,
        widths=widths,
    )


def _verdict_cell(scenario: Any) -> str:
    """A scenario's outcome in a few words: holds, or the first limit it breaks."""
    if scenario is None:
        return "—"
    if scenario.passes:
        return "holds"
    if scenario.first_broken == "memory" and scenario.loads and scenario.estimated <= scenario.capacity:
        return "fails: memory at risk"  # fits on the estimate, not at the band's edge
    if scenario.first_broken == "latency" and scenario.slo_estimate_met:
        return "fails: latency at risk"  # meets the SLO on the estimate, not at the slow edge
    if scenario.first_broken == "rate" and scenario.keeps_up_estimate:
        return "fails: request rate at risk"  # kept up with on the estimate, not at the slow edge
    return _FAILS[scenario.first_broken]


_FAILS = {
    "memory": "fails: does not fit",
    "start": "fails: cannot start",
    "margin": "fails: memory margin",
    "rate": "fails: request rate",
    "latency": "fails: latency target",
    "budget": "fails: over budget",
}


def _comparison_table(job: JobMemo, title: str) -> dict[str, Any] | None:
    """The funded layout and the declared one, scenario by scenario, when they differ."""
    if len(job.stresses) < 2:
        return None
    funded, declared = job.stresses
    rows = [
        [
            page_one.SCENARIO_WORDS.get(scenario.key, scenario.name),
            _verdict_cell(scenario),
            _verdict_cell(declared.sensitivity.scenario(scenario.key)),
        ]
        for scenario in funded.sensitivity.scenarios
    ]
    return table(
        f"{title}: the recommended layout ({funded.option.layout.describe()}) beside the declared one "
        f"({declared.option.layout.describe()})",
        ["Scenario", "Recommended", "Declared"],
        rows,
        widths=(40, 30, 30),
        keep=True,
    )


def _stress_section(job: JobMemo, title: str, currency: str, confidence: float) -> dict[str, Any]:
    funded = job.stresses[0]
    growth = funded.growth
    growth_text = ""
    if growth is not None:
        if growth.option is None:
            growth_text = "Twice the users: no sound layout within the plan's limits serves them."
        elif growth.extra is not None:
            growth_text = (
                f"Twice the users ({growth.factor} x the declared demand): +{money(growth.extra, currency)} a month, "
                f"on {growth.option.layout.describe()} at {money(growth.option.cost, currency)} a month, the "
                "cheapest sound layout for that demand on the same GPU kind (or on any allowed kind when none is)."
            )
        elif growth.option.cost is None:
            growth_text = (
                f"Twice the users ({growth.factor} x the declared demand): {growth.option.layout.describe()} serves"
                " them, the fewest GPUs of the same kind that do (unpriced: no cost to add)."
            )
    weaker = job.weaker
    return {
        "title": title,
        "comparison": _comparison_table(job, title),
        "table": _sensitivity_table(funded, title, currency, confidence),
        "chart": sensitivity_chart(funded.sensitivity),
        "growth": growth_text,
        "weaker": (
            "The recommended layout fails where the declared one holds: "
            + "; ".join(page_one.SCENARIO_WORDS.get(s.key, s.name) for s in weaker)
            + "."
        )
        if weaker
        else "",
    }


def _options_tables(job: JobMemo, spec: Spec, title: str) -> list[dict[str, Any]]:
    """The planner's answer for one job: declared, recommended and next best side by side, then its full table."""
    plan = job.plan
    currency = spec.budget.currency
    headers, rows, met = side_by_side(plan, spec)
    width = (100 - 22) // (len(headers) - 1)
    widths = (100 - width * (len(headers) - 1), *([width] * (len(headers) - 1)))
    every = f" ({EVERY_OTHER.lower()}, met by every option: {', '.join(name.lower() for name in met)})" if met else ""
    compared = table(f"{title}: the planner's options side by side{every}", headers, rows, widths=widths)
    serving = plan.kind == "serve"
    slo = [f"SLO left at {spec.plan.confidence:.0%}"] if planner_slo_column(plan) else []
    weighed = table(
        f"{title}: every layout the planner weighed",
        ["", "Layout", "Free", "TTFT p90 / TPOT ms" if serving else "Training hours", *slo]
        + [f"{currency}/GPU-hour", "Cost", "Verdict"],
        planner_rows(plan, spec),
        numeric=tuple(range(2, 6 + len(slo))),
        # The price column holds its header, '<currency>/GPU-hour', on two lines at most: a word apiece.
        widths=(14, 19, 6, 12, 7, 10, 12, 20) if slo else (14, 23, 7, 14, 11, 13, 18),
    )
    return [compared, weighed]


def _saving_text(plan: JobPlan, spec: Spec) -> str:
    """What the recommendation saves, with its layout; "" when it saves nothing (or cannot be said)."""
    currency, term_months = spec.budget.currency, spec.budget.term_months
    saving = saving_of(plan)
    recommended = plan.recommended
    if recommended is not None and not plan.declared.sound:
        # Nothing to save against: the declared layout would not run as declared (or breaks a constraint).
        return (
            f"n/a: the declared layout breaks {', '.join(plan.declared.broken)}; {recommended.layout.describe()} "
            f"{verdict_text(recommended, spec)} for {cost_text(recommended, currency)}"
        )
    if saving is None or recommended is None:
        return ""
    layout = recommended.layout.describe()
    if saving.per == "month":
        over = money(money_times(saving.amount, term_months), currency)  # the shown saving x the months
        return f"{saving.text(currency)} ({over} over {plural(term_months, 'month')}) with {layout}"
    return f"{saving.text(currency)} with {layout}"


def _memory_bands(estimates: list[Any], confidence: float) -> str:
    """Each job's memory band as the fit verdict uses it: fine-tuning at its high edge, serving's KV cache
    at its low edge."""
    lines = []
    for estimate in estimates:
        if isinstance(estimate, ServeEstimate):
            kv = estimate.kv_band
            if estimate.planned_kv_pool(confidence) <= 0:  # a signed figure (serve.kv_pool_bytes): none is left
                lines.append("serving KV cache: none: the weights and the engine's reserves take the whole budget")
                continue
            lines.append(
                f"serving KV cache: as little as {format_gib(estimate.planned_kv_pool(confidence))} per GPU at "
                f"{confidence:.0%} confidence (x {kv.ratio(1 - confidence):.2f} over {kv.describe()})"
            )
            continue
        band = estimate.memory_band
        lines.append(
            f"fine-tuning memory: up to {format_gib(estimate.planned_bytes(confidence))} per GPU at "
            f"{confidence:.0%} confidence (x {band.ratio(confidence):.2f} over {band.describe()})"
        )
    return "\n".join(lines)


def _speed_bands(estimates: list[Any], confidence: float) -> str:
    """Each job's speed bands at ``confidence``: the factor from the estimate to each figure's slow edge."""
    lines = []
    for estimate in estimates:
        job = "serving" if isinstance(estimate, ServeEstimate) else "fine-tuning"
        named = list(estimate.bands.items())
        if isinstance(estimate, ServeEstimate) and estimate.speed.stream_capacity_rps is not None:
            named.append(("stream_capacity", capacity_band()))  # what a steady stream's rate must stay under
        bands = [
            f"{SPEED_NAMES.get(name, name)} x {band.slow_ratio(confidence):.2f} ({band.describe()})"
            for name, band in named
        ]
        lines.append(f"{job} speed at its slow edge at {confidence:.0%} confidence: {', '.join(bands)}")
    return "\n".join(lines) + "\nthe stress test (Appendix C) shows both edges"


def _acquisition_table(ways: Ways, job: str, spec: Spec, currency: str) -> dict[str, Any]:
    """Rent on demand, reserve or buy one layout's GPUs (the memo's ``Ways``)."""
    serving = job == "serve"
    span = (
        f"over {plural(spec.budget.term_months, 'month')}"
        if ways.hours is None
        else f"for the {hours(ways.hours)}-hour run"
    )
    cheapest = min(ways.ways, key=lambda way: way.cost)
    rows = [
        [
            way.way + (" (cheapest)" if way is cheapest else ""),
            f"{way.gpus:,} x {way.gpu}",
            way.note,
            money(way.cost, currency),
            money(way.cash, currency),
        ]
        for way in ways.ways
    ]
    return table(
        f"{'Serving' if serving else 'Fine-tuning'}: rent, reserve or buy the {ways.label} GPUs {span}",
        ["Way", "GPUs", "Terms", f"Cost {span}", "Paid or committed"],
        rows,
        numeric=(3, 4),
        widths=(18, 16, 34, 16, 16),
    )


def _finding_groups(findings: tuple[Finding, ...]) -> list[dict[str, Any]]:
    groups = []
    for severity in (Severity.ERROR, Severity.WARNING, Severity.INFO):
        items = [f for f in findings if f.severity is severity]
        if not items:
            continue
        groups.append(
            {
                "severity": severity.value,
                "title": plural(len(items), severity.value, "info" if severity is Severity.INFO else None),
                "more": "",
                "findings": [
                    {
                        "code": f.code,
                        "name": f.name,
                        "message": f.message,
                        "where": f"{f.line}:{f.col}",
                        "hint": hint_in_report(f.hint),
                        "waived": f.waived,
                        "waiver": ""
                        if f.waiver is None
                        else f"waived: {f.waiver.reason}"
                        + (f" (approved by {f.waiver.approved_by}" if f.waiver.approved_by else "")
                        + (f", until {f.waiver.expires}" if f.waiver.approved_by and f.waiver.expires else "")
                        + (")" if f.waiver.approved_by else ""),
                    }
                    for f in items
                ],
            }
        )
    return groups


def _findings_summary(findings: tuple[Finding, ...]) -> str:
    counts = []
    for severity, noun in ((Severity.ERROR, "error"), (Severity.WARNING, "warning"), (Severity.INFO, "info")):
        count = sum(1 for f in findings if f.severity is severity and not f.waived)
        counts.append(plural(count, noun, "info" if noun == "info" else None))
    waived = sum(1 for f in findings if f.waived)
    return ", ".join(counts) + (f", {waived} waived" if waived else "")


def _configuration_text(record: ConfigRecord) -> str:
    return f"{record.path} (SHA-256 {record.sha256})" if record.path else "none: the documented defaults"


def _record(memo: Memo) -> dict[str, Any]:
    """The decision record (Appendix I): what is approved, the sign-off, the waivers, the unit prices and
    what the decision was made from."""
    decision, audit, spec = memo.decision, memo.audit, memo.spec
    signable = decision.verdict.signable
    approvals = spec.approvals if spec else {}
    signoff = []
    for key, role in ROLES:
        entry = approvals.get(key)
        if not signable:
            signoff.append([role, NOT_FOR_SIGNATURE, NOT_FOR_SIGNATURE, NOT_FOR_SIGNATURE])
        else:
            signoff.append([role, entry.name if entry else "", "", entry.date if entry and entry.date else ""])
    withheld = bool(approvals) and not signable
    if signable:
        approved = [
            ["Verdict", decision.verdict.value],
            ["Amount to sign", page_one.ceiling_text(memo)],
            ["Valid until", page_one.expiry_text(memo)],
        ]
        if decision.verdict is Verdict.APPROVE_WITH_CHANGES:
            if decision.changes:
                currency = spec.budget.currency if spec else ""
                approved.append(
                    ["Required layout", "\n".join(change.sentence(currency) for change in decision.changes)]
                )
            approved.append(["Conditions", "the changes in Appendix A are made before spending"])
    else:
        approved = [
            ["Verdict", decision.verdict.value],
            ["Approved", f"nothing: a {decision.verdict.value} is {NOT_FOR_SIGNATURE}"],
        ]
    waivers = [
        [entry.code, entry.reason, entry.approver or "not named", entry.expires or "never", entry.status]
        for entry in audit.waivers
    ]
    currency = spec.budget.currency if spec else "USD"
    prices = []
    for unit in audit.prices:
        basis = unit.basis
        price = "n/a" if basis.price is None else f"{format_price(basis.price)} {currency}/GPU-hour"
        quotes = "; ".join(
            f"{quote.provider} {quote.usd_per_hour:g} USD ({quote.date or 'undated'})" for quote in unit.quotes
        )
        source = (
            f"{basis.text}. Quotes: {quotes} (each quote's source: gpuplan's catalog, gpu_sources.yaml)"
            if quotes
            else basis.text
        )
        prices.append([unit.gpu, price, source, basis.date.isoformat() if basis.date else "undated"])
    git = audit.git
    record = audit.config
    provenance = [
        ["Spec file", audit.spec_file],
        [
            "Repository",
            f"commit {git.commit}, {git.path} ({git.status})" if git else "not in a git repository (SHA-256 only)",
        ],
        ["Spec SHA-256 (file)", audit.file_sha256],
        ["Content hash", audit.content_hash or "n/a: the spec did not load"],
        [
            "Content hash as approved",
            (
                audit.approved_hash
                + (
                    " (the spec with the changes in Appendix A applied)"
                    if audit.approved_hash != audit.content_hash
                    else ""
                )
            )
            if audit.approved_hash
            else f"n/a: nothing is approved (a {decision.verdict.value} is {NOT_FOR_SIGNATURE})",
        ],
        ["How the content hash is made", CONTENT_HASH_DEFINITION],
        ["Configuration", _configuration_text(record)],
        ["Rules ignored", ", ".join(record.ignore) or "none"],
    ]
    if record.select:
        provenance.append(["Rules selected", ", ".join(record.select) + " (every other rule is off)"])
    provenance += [
        [
            "Rules re-levelled",
            ", ".join(f"{code} {default} → {level}" for code, default, level in record.severities) or "none",
        ],
        ["Waivers", "applied" if record.waivers else "not applied (--no-waivers)"],
        ["Fail level", f"{decision.fail_on.value} (exit code {decision.exit_code})"],
        ["gpuplan version", __version__],
        ["Schema", load_schema()["$id"]],
        ["Catalog version", catalog_version()],
        ["Generated", memo.generated.isoformat()],
    ]
    return {
        "approved": table("What is approved", ["Item", "Value"], approved, kind="kv"),
        "signoff": table("Sign-off", ["Role", "Name", "Signature", "Date"], signoff, widths=(18, 30, 34, 18)),
        "signable": signable,
        "withheld": withheld,
        "waivers": table(
            "Waivers", ["Rule", "Reason", "Approved by", "Expires", "In this run"], waivers, widths=(10, 40, 18, 13, 19)
        )
        if waivers
        else None,
        "prices": table(
            "Unit prices and their sources",
            ["GPU", "Price", "Basis and source", "Date"],
            prices,
            widths=(16, 16, 54, 14),
        )
        if prices
        else None,
        # Read as one block (what the decision was made from), and kept on one page with its rows.
        "provenance": table("Provenance", ["Item", "Value"], provenance, kind="kv", keep=True),
        "content_hash": audit.content_hash or "n/a",
    }


def _unresolved_name(result: LintResult) -> str:
    """The ``name`` of a spec that did not resolve, when it has a plausible one; else the file name."""
    data = result.document.data if result.document else None
    name = data.get("name") if isinstance(data, dict) else None
    if isinstance(name, str) and 0 < len(name) <= 200:
        return name
    return Path(result.path).name


def _verification_tables(verification: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The "Verified against a run" section (gpuplan.report.verified) as tables with their notes."""
    runs = []
    for run in verification:
        rows = [
            [row["term"], row["estimate"], row["measured"], row["delta"], row["ratio"], row["status"]]
            for row in run["rows"]
        ]
        notes = [f"Compared with {run['basis']}."] + [f"Differs: {d}." for d in run["differing"]]
        runs.append(
            {
                "title": run["title"],
                "notes": " ".join(notes),
                "table": table(
                    run["title"],
                    ["Term", "Estimate", "Measured", "Delta", "Ratio", "Status"],
                    rows,
                    numeric=(1, 2, 3, 4),
                    widths=(28, 15, 15, 15, 10, 17),
                ),
                "meaning": run["meaning"],
            }
        )
    return runs


# Where a lint hint sends the reader to `gpuplan plan`, the report has that search's options itself.
REPORT_POINTER = "this report's options side by side compare every allowed GPU"


def hint_in_report(hint: str) -> str:
    """A finding's hint as the report shows it: its pointer to ``gpuplan plan`` names the report's own
    options section, which shows that command's search."""
    return hint.replace(PLAN_POINTER, REPORT_POINTER)


def _changes(memo: Memo) -> list[str]:
    """Appendix A's changes, with the fields to paste (an APPROVE WITH CHANGES only)."""
    decision = memo.decision
    if decision.verdict is not Verdict.APPROVE_WITH_CHANGES:
        return []
    changes = [
        f"{'Serve' if c.job == 'serve' else 'Fine-tune'} on {c.layout} ({c.cost}): paste {c.fragment}"
        for c in decision.changes
    ]
    changes += [f"{f.code} {f.name}: {hint_in_report(f.hint) or f.message}" for f in page_one.findings_left(memo)]
    return changes


def _engineering_rows(memo: Memo, analysis: Analysis) -> list[list[str]]:
    """Appendix A's table: the decision in engineering terms (layouts, savings, error bands)."""
    spec = memo.spec
    currency = spec.budget.currency
    rows = []
    for job in memo.jobs:
        word = page_one.JOB_WORDS[job.kind]
        funded = job.funded
        if job.changed:
            rows.append([f"Funded layout ({word})", f"{funded.layout.describe()} ({cost_text(funded, currency)})"])
        saving = _saving_text(job.plan, spec)
        if saving:
            rows.append([f"Saving available ({word})", saving])
        note = page_one.kept_note(memo) if job.plan.kept_over is not None else ""
        if note:
            rows.append([f"Not required ({word})", note])
    # the bands of the layouts the approver funds (the stress test's and the risks' too), fine-tuning first
    funded_estimates = {job.kind: job.funded.estimate for job in memo.jobs}
    estimates = [
        funded_estimates.get(kind, estimate)
        for kind, estimate in (("finetune", analysis.finetune), ("serve", analysis.serve))
        if estimate
    ]
    rows.append(
        [
            "Error bands",
            f"{_memory_bands(estimates, spec.plan.confidence)}\n{_speed_bands(estimates, spec.plan.confidence)}",
        ]
    )
    return rows


def build_report(memo: Memo, result: LintResult, verification: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The report model of one decision (``result``: the lint result it was built from, for its findings).

    ``verification`` is the optional "Verified against a run" section (gpuplan.report.verified).
    """
    settings = memo.settings
    analysis: Analysis | None = result.analysis
    spec = memo.spec
    decision = memo.decision
    currency = spec.budget.currency if spec else "USD"
    findings_summary = _findings_summary(result.findings)
    memo_rows = page_one.rows(memo, findings_summary)
    headline = page_one.headline(memo)
    jobs = []
    stresses = []
    if analysis is not None and spec is not None:
        for job_memo in memo.jobs:
            job = funded_details(job_memo, currency, settings, spec.plan.confidence)
            job["options"] = _options_tables(job_memo, spec, job["title"])
            job["acquisition"] = [_acquisition_table(ways, job_memo.kind, spec, currency) for ways in job_memo.ways]
            jobs.append(job)
            stresses.append(_stress_section(job_memo, job["title"], currency, spec.plan.confidence))
    engineering = _engineering_rows(memo, analysis) if analysis is not None and spec is not None else []
    page_text = " ".join([headline, *page_one.warnings(memo), *(row[0] + " " + row[1] for row in memo_rows)])
    name = spec.name if spec else _unresolved_name(result)
    return {
        "title": f"GPU plan: {name}",
        "name": name,
        "owner": spec.owner if spec else "",
        "description": spec.description if spec else "",
        "generated": memo.generated.isoformat(),
        "currency": currency,
        "verdict": {
            "label": decision.verdict.value,
            "slug": decision.verdict.slug,
            "reason": decision.reason,
            "headline": headline,
            "warnings": page_one.warnings(memo),
        },
        "memo": table("The decision", ["Item", "Value"], memo_rows, kind="kv", widths=(22, 78)),
        "engineering": table("The decision in engineering terms", ["Item", "Value"], engineering, kind="kv")
        if engineering
        else None,
        "changes": _changes(memo),
        "risks": [{"title": r.title, "detail": r.detail} for r in memo.risks],
        "model": None
        if spec is None
        else table(
            "The model",
            ["Item", "Value"],
            [
                ["Model", f"{spec.model.label} — {spec.model.architecture.params:,} parameters, {spec.model.dtype}"],
                ["Model source", spec.model.source],
            ],
            kind="kv",
        ),
        "jobs": jobs,
        "stresses": stresses,
        "finding_groups": _finding_groups(result.findings),
        "findings_summary": findings_summary,
        "verification": _verification_tables(verification or []),
        "record": _record(memo),
        "glossary": [{"term": term, "definition": definition} for term, definition in used_terms(page_text)],
    }
