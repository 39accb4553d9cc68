"""The report's first page in words: the memo a finance partner signs, formatted from a Memo.

Nothing here decides: every fact is the Memo's (gpuplan.decision.memo). This module words it for a reader
who is not an ML engineer: the verdict in one sentence, the one amount to sign as a ceiling with its term
(or "one-off" for a run), what is bought in replicas x GPUs, the price it rests on and from whom, the budget
status (and, when no sound layout fits the budget, the cheapest one and its overrun), the stress test of
the funded layout, the changes in words, the main risks and when the approval lapses. Technical terms it
cannot avoid are in the glossary (gpuplan.report.glossary).
"""

from __future__ import annotations

from gpuplan.codes import CODES, Approval, approval_of
from gpuplan.decision import Amount, Verdict, denial, denying, finding_words
from gpuplan.decision.memo import JobMemo, Memo
from gpuplan.decision.sensitivity import Scenario
from gpuplan.findings import Finding
from gpuplan.plan.describe import cost_text
from gpuplan.plan.evaluate import Option
from gpuplan.units import Shown, format_money, format_percent, money_difference, plural, shown_money

JOB_WORDS = {"serve": "serving", "finetune": "fine-tuning"}

# The stress test's scenarios as a finance reader reads them (gpuplan.decision.sensitivity's keys).
SCENARIO_WORDS = {
    "base": "as planned",
    "concurrency": "twice the users",
    "context": "requests twice as long",
    "micro_batch": "twice the training batch",
    "sequence": "training examples twice as long",
    "price_up": "prices 20% higher",
    "price_down": "prices 20% lower",
    "speed_slow": "the slow end of the speed estimate",
    "speed_fast": "the fast end of the speed estimate",
    "memory_low": "memory at the low end of its estimate",
    "memory_high": "memory at the high end of its estimate",
}


def money(value: float | Shown | None, currency: str) -> str:
    return format_money(value, currency)


def gpu_words(option: Option) -> str:
    """``1 replica x 2 GPUs of h200-sxm (H200 SXM)``; a run: ``one run on 4 GPUs of h100-sxm (H100 SXM5 80GB)``."""
    layout = option.layout
    kind = f"of {layout.gpu.id} ({layout.gpu.name.split(' (')[0]})"
    per_replica = layout.tensor_parallel * layout.pipeline_parallel
    if option.kind == "serve":
        return f"{plural(layout.replicas, 'replica')} x {plural(per_replica, 'GPU')} {kind}"
    return f"one run on {plural(layout.gpus, 'GPU')} {kind}"


def short_layout(option: Option) -> str:
    """``2 x h200-sxm``: what a sentence names (the full layout is in the appendices)."""
    return f"{option.layout.gpus:,} x {option.layout.gpu.id}"


def _per(job: JobMemo) -> str:
    """What a job's amounts are per: serving's a month, fine-tuning's the run."""
    return " a month" if job.kind == "serve" else " for the run"


def _cost_per(job: JobMemo, cost: float | None, currency: str) -> str:
    return money(cost, currency) + _per(job)


def ceiling_text(memo: Memo) -> str:
    """The one amount to sign, as a ceiling: the total with its parts and its term, or why there is none."""
    decision = memo.decision
    if decision.amount is None:
        return "none: the spec has no estimate"
    if decision.verdict is Verdict.REJECT:  # on the basis an approval signs: the run at its slow end
        declared = memo.declared_ceiling or decision.amount
        return (
            "none: the declared plan is rejected "
            f"(as declared it would cost {amount_text(declared, memo)}{_basis(memo)})"
        )
    if decision.amount.unknown:
        return f"none can be stated: {'; '.join(decision.amount.unknown)}"
    if memo.ceiling is None:
        return f"none: a {decision.verdict.value} is not for signature"
    return amount_text(memo.ceiling, memo, ceiling=True)


def _basis(memo: Memo) -> str:
    """What the declared amount allows for beyond the estimate: the run at the slow end of its speed band."""
    declared = memo.declared_ceiling
    if declared is None or declared.finetune_run is None or declared == memo.decision.amount:
        return ""
    return "; the run at the slow end of its speed estimate, as an amount to sign allows"


def amount_text(amount: Amount, memo: Memo, *, ceiling: bool = False) -> str:
    """``79,632 USD, not to exceed, for 2026-12-05 to 2027-12-04: serving up to 6,636 USD a month x 12``."""
    currency = amount.currency
    parts = []
    if amount.finetune_run is not None:
        run = f"fine-tuning run {'up to ' if ceiling else ''}{money(amount.finetune_run, currency)} (one-off"
        estimate = _run_estimate(memo)
        if ceiling and estimate is not None and money(estimate, currency) != money(amount.finetune_run, currency):
            run += f"; estimated at {money(estimate, currency)}, allowing for the slow end of the speed estimate"
        parts.append(run + ")")
    if amount.serve_monthly is not None:
        parts.append(
            f"serving {'up to ' if ceiling else ''}{money(amount.serve_monthly, currency)} a month "
            f"x {amount.term_months}"
        )
    if amount.unknown:
        return f"cannot be stated: {'; '.join(amount.unknown)}"
    total = money(amount.total_shown, currency)
    term = memo.term
    if term is not None:
        since = ", from the report's date" if memo.spec is not None and memo.spec.budget.term_start is None else ""
        span = f"{term.start.isoformat()} to {term.end.isoformat()} ({plural(term.months, 'month')}{since})"
    else:
        span = "one-off"
    head = f"{total}, not to exceed, {span}" if ceiling else f"{total}, {span}"
    return f"{head}: {' + '.join(parts)}"


def _run_estimate(memo: Memo) -> float | None:
    job = memo.job("finetune")
    return None if job is None else job.funded.cost


def bought_lines(memo: Memo) -> list[str]:
    lines = []
    for job in memo.jobs:
        words = f"{JOB_WORDS[job.kind]}: {gpu_words(job.funded)}"
        if job.changed:
            words += f" (declared: {gpu_words(job.plan.declared)})"
        lines.append(words)
    return lines


def price_lines(memo: Memo) -> list[str]:
    """The price each funded GPU rests on: whose, per what unit, when; a market median said to be one; and
    a layout billed by whole instances, with what its idle GPUs add."""
    currency = memo.spec.budget.currency if memo.spec else "USD"
    lines = []
    for job in memo.jobs:
        basis = job.price
        if basis.price is None:
            lines.append(f"{basis.gpu}: {basis.text}")
        elif basis.origin == "catalog":
            lines.append(
                f"{basis.gpu}: {basis.text}; rented on demand; no vendor has quoted it: get a quote before ordering"
            )
        elif basis.is_quote:
            lines.append(f"{basis.gpu}: {basis.text}; rented on demand")
        else:
            lines.append(f"{basis.gpu}: {basis.text}; rented on demand; the spec names no vendor")
        billing = job.billing
        if billing is not None and billing.idle:
            extra = (
                ""
                if billing.extra is None
                else f", +{money(billing.extra, currency)}{_per(job)} for the idle ones, included in the amount"
            )
            lines.append(
                f"{JOB_WORDS[job.kind]} is billed by whole instances of {billing.instance_gpus} GPUs: its "
                f"{plural(billing.gpus, 'GPU')} pay for {billing.billed_gpus}{extra}"
            )
    return list(dict.fromkeys(lines))


def budget_lines(memo: Memo) -> list[str]:
    """The funded layouts against the budget; when no sound layout fits it, the cheapest and its overrun."""
    currency = memo.spec.budget.currency if memo.spec else "USD"
    lines = []
    for job in memo.jobs:
        check = job.budget
        word = JOB_WORDS[job.kind]
        per = _per(job)
        if check.limit is None:
            lines.append(f"{word}: no budget declared")
            continue
        limit = f"{money(check.limit, currency)}{per}"
        if check.cost is None:
            lines.append(f"{word}: unchecked against {limit} (no cost can be stated)")
            continue
        funded = "recommended" if job.changed else "declared"
        cheapest = check.cheapest
        if check.within:
            line = f"{word}: within: {money(check.cost, currency)} of {limit} ({_share(check.cost, check.limit)})"
            top = job.run_ceiling
            if top is not None and top > check.limit:
                line += (
                    f"; at the slow end of its speed band the run costs {money(top, currency)}, "
                    f"{money(money_difference(top, check.limit), currency)} over"
                )
            lines.append(line)
            continue
        over = (
            f"costs {money(check.cost, currency)} against {limit} ({_share(check.cost, check.limit)}), "
            f"{money(check.overrun, currency)} over"
        )
        if cheapest is not None and check.nothing_fits and cheapest.layout.key == job.funded.layout.key:
            lines.append(
                f"{word}: over, and no sound layout fits the budget: the cheapest, {short_layout(cheapest)} (the "
                f"{funded} layout), {over}"
            )
        elif cheapest is not None and check.nothing_fits and cheapest.cost is not None:
            lines.append(
                f"{word}: over: the {funded} layout {over}; no sound layout fits the budget: the cheapest, "
                f"{short_layout(cheapest)}, costs {_cost_per(job, cheapest.cost, currency)} "
                f"({_share(cheapest.cost, check.limit)}), {money(check.cheapest_overrun, currency)} over"
            )
        elif cheapest is not None and cheapest.cost is not None:
            lines.append(
                f"{word}: over: the {funded} layout {over}; the cheapest sound layout, {short_layout(cheapest)} "
                f"at {_cost_per(job, cheapest.cost, currency)}, fits the budget"
            )
        else:
            lines.append(f"{word}: over: the {funded} layout {over}; no priced sound layout was found")
    return lines or ["no job is priced"]


def _share(value: float, limit: float) -> str:
    # A budget that reads 0 (5e-324 shows "0.00") has no share to state, as it reads: not "inf%".
    return f"{format_percent(value / limit)} of the budget" if shown_money(limit).value else "the budget reads 0"


def stress_lines(memo: Memo) -> list[str]:
    """The funded layout's stress test in one or two sentences per job, and what twice the users cost."""
    currency = memo.spec.budget.currency if memo.spec else "USD"
    lines = []
    for job in memo.jobs:
        stress = job.stresses[0]
        word = JOB_WORDS[job.kind]
        which = "the recommended layout" if job.changed else "the declared layout"
        weaker = job.weaker
        failed = [s for s in stress.sensitivity.failed if s.key != "base"]
        base = stress.sensitivity.scenario("base")
        if base is not None and not base.passes:
            lines.append(f"{word}: {which} fails as planned: {_why(base)}, so every scenario fails (Appendix C)")
        elif weaker:
            lines.append(f"{word}: {which} fails where the declared one holds: {_scenarios(weaker)} (Appendix C)")
        elif failed:
            lines.append(f"{word}: {which} fails at {_scenarios(tuple(failed))} (Appendix C)")
        else:
            lines.append(f"{word}: {which} holds in every scenario of the stress test (Appendix C)")
        growth = stress.growth
        if growth is not None:
            if growth.option is None:
                lines.append("twice the users: no sound layout within the plan's limits serves them")
            elif growth.extra is not None and growth.extra.value == 0:  # "+0 USD" read as a price of nothing
                lines.append(
                    f"twice the users: no extra cost ({short_layout(growth.option)} at"
                    f" {money(growth.option.cost, currency)} a month serves them too)"
                )
            elif growth.extra is not None:
                lines.append(
                    f"twice the users: +{money(growth.extra, currency)} a month "
                    f"({short_layout(growth.option)} at {money(growth.option.cost, currency)} a month)"
                )
            elif growth.option.cost is None:
                lines.append(f"twice the users: {short_layout(growth.option)} serves them (unpriced)")
    return lines


_WHY = {
    "memory": "it does not fit in memory",
    "start": "its engine cannot start",
    "margin": "it fits without the memory margin",
    "rate": "it cannot keep up with its request rate",
    "latency": "it misses its latency target",
    "budget": "it is over budget",
}


def _why(scenario: Scenario) -> str:
    return _WHY[scenario.first_broken]


def _scenarios(scenarios: tuple[Scenario, ...]) -> str:
    return "; ".join(SCENARIO_WORDS.get(s.key, s.name) for s in scenarios)


def change_lines(memo: Memo) -> list[str]:
    """The required changes in words (the fields to paste are in Appendix A)."""
    decision = memo.decision
    if decision.verdict is not Verdict.APPROVE_WITH_CHANGES:
        return []
    currency = memo.spec.budget.currency if memo.spec else "USD"
    lines = []
    for job in memo.jobs:
        if job.changed:
            lines.append(
                f"{JOB_WORDS[job.kind]} on {short_layout(job.funded)} instead of "
                f"{short_layout(job.plan.declared)}{_settings_changed(job)}, "
                f"at {_cost_per(job, job.funded.cost, currency)}" + _budget_raise(job, currency)
            )
    lines += [CODES[finding.code].summary.rstrip(".") for finding in findings_left(memo)]
    return lines


# A fine-tune's settings as the changes line names them (plain words: the fields are in Appendix A).
SETTING_WORDS = {
    "activation_checkpointing": "activation checkpointing",
    "fused_loss": "fused loss",
    "sharding": "memory sharding",
    "micro_batch": "micro-batch",
    "gradient_accumulation": "gradient accumulation",
}


def _settings_changed(job: JobMemo) -> str:
    """', with activation checkpointing and micro-batch changed too' where the funded fine-tuning layout also
    changes the declared training settings (the paste in Appendix A carries them), else ''."""
    funded, declared = job.funded.layout.settings, job.plan.declared.layout.settings
    if funded is None or declared is None:
        return ""
    changed = [words for name, words in SETTING_WORDS.items() if getattr(funded, name) != getattr(declared, name)]
    if not changed:
        return ""
    listed = changed[0] if len(changed) == 1 else f"{', '.join(changed[:-1])} and {changed[-1]}"
    return f", with {listed} changed too"


def _budget_raise(job: JobMemo, currency: str) -> str:
    """', which needs the serving budget raised by 2,103 USD a month (to 5,103)' where the funded layout
    is over its job's budget (no sound layout fits it: the warning beside the verdict says so), else ''."""
    overrun, limit = job.budget.overrun, job.budget.limit
    if overrun is None or limit is None:
        return ""
    return (
        f", which needs the {JOB_WORDS[job.kind]} budget raised by {money(overrun, currency)}{_per(job)}"
        f" (to {money(job.budget.cost, currency)})"
    )


def findings_left(memo: Memo) -> list[Finding]:
    """The deciding findings a required layout change does not resolve: a finding about a job whose layout
    the planner changes is resolved by the change (a recommended layout draws no finding of its own), and
    GP507's hint is that change."""
    decision = memo.decision
    changed = {JOB_WORDS[job.kind] for job in memo.jobs if job.changed}
    return [
        finding
        for finding in decision.deciding
        if not ((finding.code == "GP507" and decision.changes) or _job_of(finding) in changed)
    ]


# The at-risk findings (the estimate holds, its band's edge does not) and the edge each names (the code table's).
EDGE_MISSED = {entry.code: entry.edge_missed for entry in CODES.values() if entry.edge_missed}


def _with_waiver(fact: str, memo: Memo, claim: str) -> str:
    """An APPROVE's fact as the estimate states it, naming a waived at-risk finding that says its edge does not hold;
    where a waived finding denies the fact itself (the layout does not fit, misses its SLO, is over budget), what
    that finding says instead (``decision.denying``), of the job it is about where the spec has two."""
    named = denying(memo.decision.waived, claim)
    if not named:
        return fact
    if any(f.code not in EDGE_MISSED for f in named):
        return "; ".join(f"{'it' if len(memo.jobs) == 1 else _job_of(f)} {denial(f.code)}" for f in named)
    edges = "; ".join(f"{EDGE_MISSED[f.code]}: {f.code}, waived" for f in named)
    return f"{fact} on the estimate ({edges})"


def headline(memo: Memo) -> str:
    """The verdict in one plain sentence."""
    decision = memo.decision
    verdict = decision.verdict
    currency = memo.spec.budget.currency if memo.spec else "USD"
    if verdict is Verdict.APPROVE:
        jobs = " and ".join(f"{JOB_WORDS[job.kind]} on {short_layout(job.funded)}" for job in memo.jobs)
        slo = any(
            j.kind == "serve" and (j.funded.estimate.job.ttft_ms or j.funded.estimate.job.tpot_ms) for j in memo.jobs
        )
        budgeted = any(job.budget.limit is not None for job in memo.jobs)
        # A waived at-risk finding (the estimate holds, its pessimistic edge does not) is named, not claimed away.
        facts = [_with_waiver("it fits in memory with the margin to spare", memo, "memory")]
        if slo:
            facts.append(_with_waiver("meets its latency target", memo, "latency"))
        facts.append(
            _with_waiver("is within budget" if budgeted else "is priced (no budget is declared)", memo, "budget")
        )
        return f"Approve {jobs} as declared: {', '.join(facts[:-1])} and {facts[-1]}."
    if verdict is Verdict.APPROVE_WITH_CHANGES:
        changed = [job for job in memo.jobs if job.changed]
        if changed:
            parts = []
            for job in changed:
                saving = job.plan.saving
                if saving is not None and saving.positive:
                    why = f"it saves {saving.text(currency)}"
                else:
                    why = f"the declared layout {_broken_words(job.plan.declared)}"
                    cheaper = _cheaper(job, currency)
                    if cheaper:
                        why += f"; this one also costs {cheaper}"
                parts.append(
                    f"{JOB_WORDS[job.kind]} on {short_layout(job.funded)} instead of "
                    f"{short_layout(job.plan.declared)} ({why}){_budget_raise(job, currency)}"
                )
            return f"Approve with a change: {'; '.join(parts)}."
        first = decision.deciding[0] if decision.deciding else None
        what = CODES[first.code].summary.rstrip(".").lower() if first else "see Appendix A"
        return f"Approve once the changes listed below are made: {what}."
    if verdict is Verdict.REJECT:
        reasons = []
        for finding in decision.deciding:
            word = _job_of(finding)
            text = f"the declared {word} {finding_words(finding.code)}"
            if text not in reasons:
                reasons.append(text)
        way = []
        for job in memo.jobs:
            # What no layout changes (a context the model does not take, storage): the rejecting finding's own fix
            fixes = [
                f"{JOB_WORDS[job.kind]}: {finding.hint}"
                for finding in decision.deciding
                if _job_of(finding) == JOB_WORDS[job.kind] and finding.hint and not CODES[finding.code].planner_judged
            ]
            context_breaks = job.plan.declared.breaks("context")
            if job.budget.nothing_fits:
                way.append(f"no sound {JOB_WORDS[job.kind]} layout fits its budget")
            elif job.plan.recommended is None and context_breaks and fixes:
                way += fixes  # every layout breaks the context alike: no target, limit or confidence helps
            elif job.plan.recommended is None:
                confidence = memo.spec.plan.confidence if memo.spec else 0.9
                way.append(
                    f"change the targets, the plan's limits or, knowingly, plan.confidence: no {JOB_WORDS[job.kind]}"
                    f" layout within them meets every constraint at {confidence:.0%} confidence"
                )
            elif job.changed:
                cost = job.funded.cost  # None: a run without finetune.tokens, priced per 1M tokens
                priced = _cost_per(job, cost, currency) if cost is not None else cost_text(job.funded, currency)
                way.append(f"{JOB_WORDS[job.kind]} on {short_layout(job.funded)} at {priced}")
            else:  # the declared layout is sound as the plan judges it: the finding says what to change
                way += fixes
        forward = f" The way forward: {'; '.join(way)}." if way else ""
        return f"Reject: {'; '.join(reasons) or 'the declared plan cannot work'}.{forward}"
    if decision.amount is None:
        return "Cannot approve: the spec could not be estimated (Appendix A says why)."
    missing = [f for f in decision.deciding if approval_of(f.code) is Approval.NEEDS_INFORMATION]
    if missing:
        return f"Cannot approve: information is missing: {CODES[missing[0].code].summary.rstrip('.').lower()}."
    return f"Cannot approve: no amount can be stated: {'; '.join(decision.amount.unknown)}."


# The planner's constraints (gpuplan.plan.evaluate) as a finance reader reads a layout breaking them.
BROKEN_WORDS = {
    "context": "takes a longer context than the model does",
    "limits": "is outside the plan's limits",
    "tensor_parallel": "splits the model in a way that cannot run",
    "nvlink_domain": "splits the model across more GPUs than are linked together",
    "pipeline_parallel": "splits the model in a way that cannot run",
    "memory": "does not fit in memory",
    "headroom": "leaves too little memory free",
    # judged at the slow end of the speed estimate's measured error (plan.confidence), not on the estimate alone
    "ttft_slo": "would miss its latency target, allowing for the speed estimate's measured error",
    "tpot_slo": "would miss its latency target, allowing for the speed estimate's measured error",
    "arrival_rate": "would not keep up with its requests, allowing for the speed estimate's measured error",
    "gradient_sync": "spends too long synchronising its GPUs",
    "model_parallelism": "splits the model over more GPUs than it needs",
}


def _broken_words(option: Option) -> str:
    words = list(dict.fromkeys(BROKEN_WORDS.get(name, f"breaks {name}") for name in option.broken))
    return " and ".join(words) or "is not sound"


def _cheaper(job: JobMemo, currency: str) -> str:
    """What the funded layout saves against an unsound declared one (per month or per run), or ""."""
    declared, funded = job.plan.declared.cost, job.funded.cost
    if declared is None or funded is None:
        return ""
    saving = money_difference(declared, funded)
    if saving.value <= 0:
        return ""
    return money(saving, currency) + (" less a month" if job.kind == "serve" else " less per run")


def _job_of(finding: Finding) -> str:
    """The job a rejecting finding is about, in words."""
    for kind in ("serve", "finetune"):
        if finding.pointer.startswith(f"/{kind}"):
            return JOB_WORDS[kind]
    return {"GP501": "fine-tuning", "GP601": "fine-tuning", "GP502": "serving"}.get(finding.code, "plan")


def expiry_text(memo: Memo) -> str:
    if not memo.decision.verdict.signable:
        return "n/a: not for signature"
    return f"{memo.expiry.date.isoformat()} ({memo.expiry.basis})"


def rows(memo: Memo, findings: str) -> list[list[str]]:
    """The first page's table: label and value per row."""
    out = [["Amount to sign", ceiling_text(memo)]]
    if memo.spec is None:
        return out + [["Findings", findings]]
    decision = memo.decision
    declared = memo.declared_ceiling
    if decision.verdict is Verdict.APPROVE_WITH_CHANGES and declared is not None and decision.amount_with_changes:
        out.append(["As declared it would cost", amount_text(declared, memo).split(": ", 1)[0] + _basis(memo)])
    out += [
        [
            "What is bought" if decision.verdict.signable else "Layout proposed (not approved)",
            "\n".join(bought_lines(memo)) or "n/a",
        ],
        ["Vendor and price", "\n".join(price_lines(memo)) or "n/a"],
        ["Budget", "\n".join(budget_lines(memo))],
    ]
    changes = change_lines(memo)
    if changes:
        out.append(["Changes required", "\n".join(changes) + " (Appendix A)"])
    out += [
        ["Stress test", "\n".join(stress_lines(memo)) or "n/a"],
        # a title once, however many risks share it (two findings one waiver accepts)
        ["Main risks", "\n".join(dict.fromkeys(risk.title for risk in memo.risks)) or "none computed"],
        ["Approval expires", expiry_text(memo)],
        ["Findings", findings],
    ]
    return out


def kept_note(memo: Memo) -> str:
    """Why a cheaper layout is not required (materiality), when the planner kept the declared one over it."""
    currency = memo.spec.budget.currency if memo.spec else "USD"
    notes = []
    for job in memo.jobs:
        plan = job.plan
        saving = plan.immaterial_saving
        if plan.kept_over is not None and saving is not None and saving.positive:
            notes.append(
                f"{short_layout(plan.kept_over)} would save {saving.text(currency)} ({saving.share_text()}) on "
                f"{JOB_WORDS[job.kind]}: below the materiality threshold, so the declared layout stands"
            )
    return "; ".join(notes)


def warnings(memo: Memo) -> list[str]:
    """What page one must say beside the verdict: a funded layout that fails a stress scenario the declared
    one passes, and a budget no sound layout fits."""
    lines = []
    for job in memo.jobs:
        weaker = job.weaker
        funded = job.stresses[0].sensitivity.scenario("base") if len(job.stresses) > 1 else None
        if funded is not None and not funded.passes:  # it fails as planned, so in every scenario: say why, once
            # "unlike the declared layout" only where the declared one holds as planned (it may fail too,
            # for another reason: then the scenarios it alone holds in say nothing about the change)
            unlike = "Unlike the declared layout, the" if any(s.key == "base" for s in weaker) else "The"
            lines.append(
                f"{unlike} recommended {JOB_WORDS[job.kind]} layout fails as planned: "
                f"{_why(funded)}, so every scenario of the stress test fails."
            )
        elif weaker:
            lines.append(
                f"Unlike the declared layout, the recommended {JOB_WORDS[job.kind]} layout fails the stress test "
                f"at {_scenarios(weaker)}."
            )
        if job.budget.nothing_fits:
            lines.append(f"No sound layout fits the {JOB_WORDS[job.kind]} budget (see Budget).")
    return lines
