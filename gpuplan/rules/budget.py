"""GP50x: training and serving cost against the budget, and the prices behind them."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

from gpuplan.analysis import FinetuneEstimate, ServeEstimate
from gpuplan.findings import Finding
from gpuplan.rules.context import RuleContext
from gpuplan.rules.registry import rule
from gpuplan.units import format_money, format_price, money_difference


@rule("GP501")
def finetune_over_budget(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Estimates the run's time with the calibrated training speed model (6 x N FLOPs per token for full
    fine-tuning, 4 x N for adapters, at the rate of the units the precision runs on; recompute, the
    framework's elementwise kernels and launches, the adapters' GEMMs, the optimizer step and exposed
    data-parallel traffic on top; `thresholds.training_mfu` overrides the utilisation), and prices GPUs x
    hours.

    ## Why is this bad?
    The money runs out before the tokens do.

    ## Example
    ```yaml
    finetune: {method: full, tokens: 20000000000, hardware: {gpu: h100-sxm, count: 8}}
    budget: {finetune_total: 5000}
    ```

    ## Use instead
    Fewer tokens, LoRA, a cheaper GPU, or a budget that matches the plan.
    """
    f, budget = ctx.analysis.finetune, ctx.spec.budget
    if f is None or f.hours is None or budget.finetune_total is None or f.cost is None:
        return
    if f.cost > budget.finetune_total:
        yield ctx.finding(
            "GP501",
            ("budget", "finetune_total"),
            f"fine-tuning costs about {format_money(f.cost, budget.currency)} ({f.hours:,.1f} h x {paid_words(f)} at "
            f"{format_price(f.price_per_hour)}/GPU-hour) — over the budget of "
            f"{format_money(budget.finetune_total, budget.currency)} by "
            f"{format_money(money_difference(f.cost, budget.finetune_total), budget.currency)}",
        )


@rule("GP502")
def serve_over_budget(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Prices the deployment's GPUs for a 730-hour month and compares with the budget.

    ## Why is this bad?
    Serving runs every hour of every month; an overrun repeats.

    ## Example
    ```yaml
    serve: {hardware: {gpu: h200-sxm, count: 8, tensor_parallel: 8}}
    budget: {serve_monthly: 10000}
    ```

    ## Use instead
    Fewer or cheaper GPUs that still fit (see `gpuplan estimate`), or a budget that matches.
    """
    s, budget = ctx.analysis.serve, ctx.spec.budget
    if s is None or budget.serve_monthly is None or s.monthly_cost is None:
        return
    if s.monthly_cost > budget.serve_monthly:
        yield ctx.finding(
            "GP502",
            ("budget", "serve_monthly"),
            f"serving costs {format_money(s.monthly_cost, budget.currency)} a month ({paid_words(s)} at "
            f"{format_price(s.price_per_hour)}/GPU-hour x 730 h) — over the budget of "
            f"{format_money(budget.serve_monthly, budget.currency)} by "
            f"{format_money(money_difference(s.monthly_cost, budget.serve_monthly), budget.currency)}",
        )


def paid_words(estimate: FinetuneEstimate | ServeEstimate) -> str:
    """The GPUs a cost is paid for, in words: '2 x h100-sxm', or under an instance-hour quote that leaves
    some idle, '8 x h100-sxm paid for, whole instances for the 2 used,'."""
    paid, gpus, gpu = estimate.paid_gpus, estimate.gpus, estimate.gpu.id
    return f"{gpus:,} x {gpu}" if paid == gpus else f"{paid:,} x {gpu} paid for, whole instances for the {gpus:,} used,"


@rule("GP503")
def missing_price(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports a job whose GPU has no price in `budget.prices`, the catalog (USD only) or the spec's
    `gpus` section.

    ## Why is this bad?
    Without a price the cost and the budget cannot be checked; a procurement review needs both.

    ## Example
    ```yaml
    serve: {hardware: {gpu: h200-nvl}}
    ```

    ## Use instead
    ```yaml
    budget: {prices: {h200-nvl: 3.80}, prices_date: 2026-11-20}
    ```
    """
    for job_name in ("finetune", "serve"):
        estimate = getattr(ctx.analysis, job_name)
        if estimate is not None and estimate.price_per_hour is None:
            yield ctx.finding(
                "GP503",
                (job_name, "hardware", "gpu"),
                f"no price per GPU-hour for {estimate.gpu.id} in {ctx.spec.budget.currency}: cost and budget are "
                "unchecked",
                f"add budget.prices: {{{estimate.gpu.id}: <price>}} with prices_date",
            )


@rule("GP504")
def stale_price(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Compares the age of each price a cost rests on with `thresholds.price_max_age_days`: a catalog
    price is the median of several quotes, so its age is that of the quote the median is (of an even
    count, the older of the middle two; a stale quote far from the median moves it little); a vendor's quote in
    `budget.quotes` is as old as its own `date`; a price in `budget.prices` is as old as
    `budget.prices_date`. One without its date is reported as undated.

    ## Why is this bad?
    GPU rental prices move by tens of percent within a quarter; a cost computed from last year's
    quotes, or from a quote nobody dated, is not a number to sign.

    ## Example
    ```yaml
    budget: {prices: {h100-sxm: 2.49}}   # no prices_date
    ```

    ## Use instead
    ```yaml
    budget: {prices: {h100-sxm: 2.49}, prices_date: 2026-11-28}
    # or the vendor's quote itself:
    budget: {quotes: {h100-sxm: {provider: Lambda, price: 2.49, date: 2026-11-28, reference: Q-1042}}}
    ```
    """
    seen: set[str] = set()
    for job_name in ("finetune", "serve"):
        estimate = getattr(ctx.analysis, job_name)
        if estimate is None or estimate.gpu.id in seen:
            continue
        seen.add(estimate.gpu.id)
        price = ctx.spec.price_record(estimate.gpu)
        if price is None or price.origin == "gpus":  # no price is GP503; a custom GPU's price is its own
            continue
        gpu_id = estimate.gpu.id
        quoted = price.origin == "budget.quotes"
        overridden = price.origin == "budget.prices"
        if price.dated is None:
            if quoted:
                pointer: tuple[str, ...] = ("budget", "quotes", gpu_id)
                hint = f"add budget.quotes.{gpu_id}.date: YYYY-MM-DD, the day {price.providers[0]} quoted it"
            elif overridden:
                pointer, hint = (
                    ("budget", "prices", gpu_id),
                    "add budget.prices_date: YYYY-MM-DD, the day the prices were quoted",
                )
            else:
                pointer, hint = (
                    (job_name, "hardware", "gpu"),
                    f"add budget.prices: {{{gpu_id}: <price>}} with prices_date",
                )
            yield ctx.finding(
                "GP504",
                pointer,
                f"the {gpu_id} price ({format_price(price.per_hour)}/GPU-hour) is undated: its age cannot be checked",
                hint,
            )
            continue
        dated = datetime.date.fromisoformat(price.dated)
        age = (ctx.today - dated).days
        if age > ctx.settings.price_max_age_days:
            if quoted:
                basis = f"{price.providers[0]}'s quote of {dated}"
            elif overridden or price.quotes == 1:
                basis = f"quoted {dated}"
            else:
                basis = f"the median of {price.quotes} quotes, set by {' and '.join(price.median_set_by)}"
            yield ctx.finding(
                "GP504",
                ("budget", "quotes", gpu_id, "date")
                if quoted
                else ("budget", "prices_date")
                if overridden
                else (job_name, "hardware", "gpu"),
                f"the {gpu_id} price ({format_price(price.per_hour)}/GPU-hour, {basis}) rests on a quote {age:,} "
                f"days old (limit {ctx.settings.price_max_age_days})",
                f"ask {price.providers[0]} for a current quote (budget.quotes.{gpu_id})"
                if quoted
                else "refresh budget.prices with a current quote",
            )
