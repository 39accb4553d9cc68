"""The documented, versioned JSON object of ``gpuplan plan`` (text and Markdown render from it).

One object per spec: ``format_version``, ``tool``, the spec's ``name``/``model``/``currency``, the
``constraints`` the planner ran under, and per job (``jobs[]``): ``declared``, ``recommended``,
``saving``, ``options[]`` (sound: the priced ones cheapest first, each faster than every one before it,
then the unpriced ones, fewest GPUs first),
``rejected[]`` (per GPU kind, the fewest-GPU layout tried that breaks a constraint), ``alternatives[]``
(cheaper options that change the model's numerics) and the totals before ``--top`` cut the lists.
"""

from __future__ import annotations

from typing import Any

from gpuplan import __version__
from gpuplan.plan.describe import Saving, block_yaml
from gpuplan.plan.evaluate import Option
from gpuplan.plan.spec_planner import JobPlan, SpecPlanner
from gpuplan.units import (
    CENT_DIGITS,
    HOURS_DIGITS,
    RATE_DIGITS,
    TPOT_MS_DIGITS,
    format_money,
    milliseconds,
    percent,
    rounded,
)

FORMAT_VERSION = 1


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else rounded(value, digits)


def option_dict(option: Option, spec: Any = None) -> dict[str, Any]:
    """One option: its layout, memory, speed, price and verdict per constraint; with ``spec``, whether it is
    within the job's budget (``within_budget``: null without a budget or a cost), which the planner's
    constraints leave out."""
    layout, estimate = option.layout, option.estimate
    result: dict[str, Any] = {
        "gpu": layout.gpu.id,
        "gpus": layout.gpus,
        "tensor_parallel": layout.tensor_parallel,
        "pipeline_parallel": layout.pipeline_parallel,
        "nodes": option.nodes,
        "replicas": layout.replicas,
    }
    if option.kind == "serve":
        result["expert_parallel"] = layout.expert_parallel  # the declared layout's; fine-tuning refuses it (GP023)
        result["concurrency_per_replica"] = layout.concurrency
        result["settings"] = None
    else:
        settings = layout.settings
        assert settings is not None
        result["settings"] = {
            "activation_checkpointing": settings.activation_checkpointing,
            "fused_loss": settings.fused_loss,
            "sharding": settings.sharding,
            "micro_batch": settings.micro_batch,
            "gradient_accumulation": settings.gradient_accumulation,
        }
    result.update(
        per_gpu_bytes=option.per_gpu_bytes,
        # fine-tuning: the pessimistic edge at the plan's confidence, which headroom_pct is taken from
        planned_bytes=option.judged_bytes,
        budget_bytes=option.capacity_bytes,
        headroom_pct=percent(option.headroom),
    )
    if option.kind == "serve":
        speed, loads = estimate.speed, estimate.loads
        # A layout that cannot start has no speed and no cost per token (null, as in estimate's JSON);
        # its GPUs still cost their month.
        result.update(
            loads=loads,
            ttft_ms=milliseconds(speed.ttft_s) if loads and not speed.saturated else None,
            ttft_median_ms=milliseconds(speed.ttft_median_s) if loads and not speed.saturated else None,
            ttft_p90_ms=milliseconds(speed.ttft_p90_s) if loads and not speed.saturated else None,
            saturated=speed.saturated if loads else None,
            tpot_ms=milliseconds(speed.tpot_s, TPOT_MS_DIGITS) if loads else None,
            tokens_per_s=rounded(speed.tokens_per_s, RATE_DIGITS) if loads else None,
            price_per_gpu_hour=option.price_per_hour,
            price_source=estimate.price_source,
            # the least share of a latency SLO the slow edge at the plan's confidence leaves (null: no SLO)
            slo_margin_pct=None if option.slo_margin is None else percent(option.slo_margin),
            monthly_cost=_rounded(option.rate, CENT_DIGITS),
            cost_per_million_tokens=_rounded(estimate.cost_per_million_tokens, 3) if loads else None,
        )
    else:
        speed = estimate.speed
        result.update(
            training_hours=rounded(speed.hours, HOURS_DIGITS) if option.tokens_known else None,
            tokens_per_s=rounded(speed.tokens_per_s, RATE_DIGITS),
            price_per_gpu_hour=option.price_per_hour,
            price_source=estimate.price_source,
            run_cost=_rounded(option.cost, CENT_DIGITS),
            cost_per_million_tokens=_rounded(option.rate, 4),
        )
    if spec is not None:
        from gpuplan.decision.memo import within_budget

        result["within_budget"] = within_budget(option, spec)
    result.update(
        sound=option.sound,
        meets=dict(option.meets),
        reasons=list(option.reasons),
        changes=list(option.changes),
        yaml=block_yaml(option.fragment),
    )
    return result


_option_dict = option_dict


def _saving_dict(saving: Saving | None) -> dict[str, Any] | None:
    # The difference of the two costs as this object carries them (to the cent), so it checks by hand.
    return None if saving is None else {"amount": saving.published, "share": round(saving.share, 4), "per": saving.per}


def job_dict(plan: JobPlan, top: int | None, materiality: str = "", spec: Any = None) -> dict[str, Any]:
    kept = plan.kept_over

    def option_dict(option: Option) -> dict[str, Any]:
        return _option_dict(option, spec)

    return {
        "job": plan.kind,
        "declared": option_dict(plan.declared),
        "recommended": None if plan.recommended is None else option_dict(plan.recommended),
        "saving": _saving_dict(plan.saving),
        # The declared layout kept over a cheaper one whose saving is under the materiality threshold.
        "kept_over": None
        if kept is None
        else {"option": option_dict(kept), "saving": _saving_dict(plan.immaterial_saving), "threshold": materiality},
        # The conventional layout (TP within one NVLink domain, no pipeline) when the cheapest is not one and
        # it costs at most a few percent more (also among the options).
        "conventional": None if plan.conventional is None else option_dict(plan.conventional),
        "options": [option_dict(o) for o in plan.options[:top]],
        "options_total": len(plan.options),
        # whether the recommended layout is among the options although the cost-latency front passes over it
        "recommended_off_front": plan.listed_off_front,
        "rejected": [option_dict(o) for o in plan.rejected[:top]],
        "rejected_total": len(plan.rejected),
        "alternatives": [
            {
                "label": alternative.label,
                "changes": alternative.changes,
                "option": None if alternative.option is None else option_dict(alternative.option),
                "yaml": block_yaml(alternative.fragment),
            }
            for alternative in plan.alternatives
        ],
    }


def decision_dict(memo: Any) -> dict[str, Any]:
    """The decision ``gpuplan report`` states (gpuplan.decision.memo.Memo), as the plan carries it: the
    verdict and its reason, the amount to sign (null under REJECT and CANNOT APPROVE), and per job the funded
    layout's budget check with the cheapest sound layout beside it."""
    decision = memo.decision
    ceiling = memo.ceiling
    return {
        "verdict": decision.verdict.value,
        "reason": decision.reason,
        "amount_to_sign": None if ceiling is None or ceiling.total is None else rounded(ceiling.total, CENT_DIGITS),
        # as every output prints it: a total keeps the cents of a run under 100 (gpuplan.units.money_sum)
        "amount_to_sign_text": None
        if ceiling is None or ceiling.total_shown is None
        else format_money(ceiling.total_shown, ceiling.currency),
        "term": None
        if memo.term is None
        else {"start": memo.term.start.isoformat(), "end": memo.term.end.isoformat(), "months": memo.term.months},
        "budget": [
            {
                "job": job.kind,
                "funded": "recommended" if job.changed else "declared",
                "limit": job.budget.limit,
                "cost": _rounded(job.budget.cost, CENT_DIGITS),
                "within": job.budget.within,
                "nothing_fits": job.budget.nothing_fits,
                "cheapest": None
                if job.budget.cheapest is None
                else {
                    "layout": job.budget.cheapest.layout.describe(),
                    "cost": _rounded(job.budget.cheapest.cost, CENT_DIGITS),
                },
            }
            for job in memo.jobs
        ],
    }


def plan_document(
    planner: SpecPlanner, *, path: str, top: int | None, cheaper_share: float, memo: Any = None
) -> dict[str, Any]:
    """The whole ``gpuplan plan`` object for one spec (every job it declares). ``memo``: the spec's decision
    (gpuplan.decision.memo.Memo, under the spec's own plan limits), carried as ``decision``, with
    ``constraints_differ`` true where the planner's limits (the command line's) are not the spec's."""
    spec, limits = planner.spec, planner.limits
    jobs = [plan for kind in ("finetune", "serve") if (plan := planner.plan(kind)) is not None]
    return {
        "format_version": FORMAT_VERSION,
        "tool": {"name": "gpuplan", "version": __version__},
        "spec": path,
        "name": spec.name,
        "model": spec.model.label,
        "currency": spec.budget.currency,
        "constraints": {
            "gpu": list(limits.gpus),
            "vendor": list(limits.vendors),
            "max_gpus": limits.max_gpus,
            "max_nodes": limits.max_nodes,
            "confidence": limits.confidence,
            "headroom_pct": planner.headroom_pct,
            "gradient_sync_share": planner.sync_share,
            "cheaper_layout_share": cheaper_share,
            "materiality": planner.materiality.describe(spec.budget.currency),
        },
        "jobs": [job_dict(plan, top, planner.materiality.describe(spec.budget.currency), spec) for plan in jobs],
        "decision": None if memo is None else {**decision_dict(memo), "constraints_differ": limits != spec.plan},
    }
