"""``gpuplan plan`` as text for a terminal or as Markdown, both rendered from the JSON object.

The object carries spec text (the name, the model, GPU ids of the spec's own ``gpus:``, the currency,
reasons that quote them): text output shows every line through :func:`gpuplan.visible.visible` and
Markdown every spec-derived cell through :func:`gpuplan.output.markdown.escape_markdown`, so a spec can
neither start a line of its own (a forged ``::error``) nor put HTML or a link into a pull-request comment.
The pasted YAML is ASCII already (:func:`gpuplan.plan.describe.flow_yaml` JSON-quotes any other value).
"""

from __future__ import annotations

import re
from typing import Any

from gpuplan.output.markdown import escape_markdown
from gpuplan.plan.spec_planner import CONVENTIONAL_WITHIN
from gpuplan.units import format_gib, format_money, format_number, format_price, money_difference, plural
from gpuplan.visible import visible

TEXT_COLUMNS = frozenset({"", "layout", "settings", "cost", "change", "first constraint broken"})


def _layout(option: dict[str, Any]) -> str:
    parts = [f"{option['gpus']:,} x {option['gpu']}"]
    if option["tensor_parallel"] > 1:
        parts.append(f"TP {option['tensor_parallel']}")
    if option["pipeline_parallel"] > 1:
        parts.append(f"PP {option['pipeline_parallel']}")
    if option.get("expert_parallel", 1) > 1:  # serving options only
        parts.append(f"EP {option['expert_parallel']}")
    text = " ".join(parts)
    if option["settings"] is None and option["replicas"] > 1:  # as Layout.describe words them
        text += f", {option['replicas']:,} replicas of {option['concurrency_per_replica']:,} sequences"
    return text


def _settings(option: dict[str, Any]) -> str:
    settings = option["settings"]
    if settings is None:
        return ""
    words = []
    if settings["sharding"] != "none" and option["replicas"] > 1:
        words.append(settings["sharding"])
    checkpointing = settings["activation_checkpointing"]  # none | full | selective
    if checkpointing != "none":
        words.append("ckpt" if checkpointing == "full" else f"{checkpointing} ckpt")
    if settings["fused_loss"]:
        words.append("fused loss")
    words.append(f"mb {settings['micro_batch']} x ga {settings['gradient_accumulation']}")
    return ", ".join(words)


def _cost(option: dict[str, Any], currency: str) -> str:
    if option.get("monthly_cost") is not None:
        return f"{format_money(option['monthly_cost'], currency)}/month"
    if option.get("run_cost") is not None:
        return f"{format_money(option['run_cost'], currency)}/run"
    if option.get("cost_per_million_tokens") is not None and "run_cost" in option:
        return f"{format_money(option['cost_per_million_tokens'], currency)}/1M tokens"
    return "unpriced"


def _counted(job: dict[str, Any], rows: str) -> str:
    """How many ``rows`` ("options" or "rejected") the plan found, and how many ``--top`` let through when
    it cut the list: a reader who counts fewer rows than the heading says learns why, and how to see all."""
    total, shown = job[f"{rows}_total"], len(job[rows])
    return f"{total}" if shown >= total else f"{total}, {shown} shown; --top {total} lists all"


def _order_note(job: dict[str, Any]) -> str:
    """How the options are ordered: the priced ones are a cost-latency front (``pareto``: latency is a
    request end to end for serving, the run for fine-tuning); unpriced ones, which cannot be placed on
    the cost axis, follow it and may be slower than the priced ones above them."""
    options = job["options"]
    unpriced = sum(1 for option in options if _cost(option, "") == "unpriced")
    faster = "faster end to end" if job["job"] == "serve" else "a shorter run"  # the request, TTFT + O x TPOT
    front = f"cheapest first, each {faster} than all above"
    usual = job.get("conventional")
    if usual is not None:  # listed after the cheapest although it may not beat the rows above it
        front += (
            f" (but the conventional layout, second: {plural(usual['replicas'], 'replica')} x"
            f" {plural(usual['tensor_parallel'], 'GPU')}, tensor parallelism within one NVLink domain and no "
            f"pipeline, within {CONVENTIONAL_WITHIN:.0%} of the cheapest)"
        )
    if job.get("recommended_off_front"):  # a kept layout, listed where its cost puts it
        front += ", and the recommended layout where its cost puts it"
    if not unpriced:
        return front
    if unpriced == len(options):
        return "all unpriced, fewest GPUs first"
    return f"priced ones {front}; then unpriced ones, fewest GPUs first"


def _speed(option: dict[str, Any]) -> list[str]:
    if "ttft_ms" in option:
        if not option["loads"]:  # the layout cannot start: no speed to show
            return ["n/a", "n/a", "n/a"]
        # The published figures (the JSON's), rounded as every other output rounds them (gpuplan.units);
        # a steady stream the layout cannot keep up with has no TTFT.
        ttft = option["ttft_p90_ms"]
        return [
            "unbounded" if ttft is None else format_number(ttft, 0),
            format_number(option["tpot_ms"], 1),
            format_number(option["tokens_per_s"], 0),
        ]
    hours = option["training_hours"]
    return ["n/a" if hours is None else format_number(hours, 1), format_number(option["tokens_per_s"], 0)]


def _verdict(option: dict[str, Any]) -> str:
    """ "meets every constraint" only for a sound layout within the budget: the planner's constraints leave
    the budget out, and a layout over it does not meet every constraint a signer holds it to."""
    over = option.get("within_budget") is False
    if option["sound"]:
        return "breaks budget (meets every other constraint)" if over else "meets every constraint"
    broken = [name for name, ok in option["meets"].items() if not ok] + (["budget"] if over else [])
    return f"breaks {broken[0]}: {option['reasons'][0]}" + (f" (+{len(broken) - 1} more)" if len(broken) > 1 else "")


def _gib(value: int) -> str:
    return format_gib(value).removesuffix(" GiB")


def _row(option: dict[str, Any], currency: str, mark: str = "") -> list[str]:
    price = option["price_per_gpu_hour"]
    return [
        mark,
        _layout(option),
        _settings(option),
        f"{_gib(option['per_gpu_bytes'])} / {_gib(option['budget_bytes'])}",
        _gib(option["planned_bytes"]),
        f"{format_number(option['headroom_pct'], 0)}%",
        *_speed(option),
        "" if option.get("slo_margin_pct") is None else f"{format_number(option['slo_margin_pct'], 0)}%",
        "n/a" if price is None else format_price(price),
        _cost(option, currency) + (", over budget" if option.get("within_budget") is False else ""),
    ]


def _headers(job: str, confidence: float) -> list[str]:
    # Throughput over every GPU of the layout (all replicas): output tokens when serving, trained ones otherwise.
    speed = ["TTFT p90 ms", "TPOT ms", "output tok/s"] if job == "serve" else ["hours", "train tok/s"]
    # Memory is judged at its pessimistic edge, the figure the free share is of: fine-tuning's band edge;
    # serving's engine budget less the room the sequences leave in the KV pool at its low edge.
    planned = f"at {confidence:.0%} GiB"
    # Serving with a latency SLO: the share of the tighter SLO its slow edge at the confidence leaves.
    margin = f"SLO margin at {confidence:.0%}"
    return ["", "layout", "settings", "per GPU GiB", planned, "free", *speed, margin, "price/GPU-h", "cost"]


def _keep(headers: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """Drop columns empty in every row (serving has no settings; unmarked tables no mark)."""
    keep = [i for i in range(len(headers)) if any(row[i] for row in rows)]
    return [headers[i] for i in keep], [[row[i] for i in keep] for row in rows]


def _text_table(headers: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    headers, rows = _keep(headers, rows)
    widths = [max(len(headers[i]), *(len(row[i]) for row in rows)) for i in range(len(headers))]
    numeric = [header not in TEXT_COLUMNS for header in headers]

    def line(cells: list[str]) -> str:
        return (
            indent
            + "  ".join(
                cell.rjust(widths[i]) if numeric[i] else cell.ljust(widths[i]) for i, cell in enumerate(cells)
            ).rstrip()
        )

    return [line(headers), *(line(row) for row in rows)]


def _marks(job: dict[str, Any], option: dict[str, Any]) -> str:
    marks = []
    for name in ("declared", "recommended", "conventional"):
        other = job.get(name)
        if other is not None and other["yaml"] == option["yaml"]:
            marks.append(name)
    return "/".join(marks)


def _saving_text(job: dict[str, Any], currency: str) -> str:
    saving = job["saving"]
    needless = _needless_words(job["recommended"])
    if saving is None:
        if job["declared"]["sound"]:  # FinetunePlanner.without_needless_sharding: kept, up to a tie's share longer
            return needless
        recommended = job["recommended"]
        if recommended["within_budget"] is False:  # sound, and no sound layout fits the budget
            return "the cheapest sound layout: over budget (meets every other constraint)"
        if recommended["price_per_gpu_hour"] is None:  # unpriced ones come after every priced sound one
            return "the layout with the fewest GPUs that meets every constraint (no sound layout is priced)"
        return "the cheapest layout that meets every constraint"
    # The difference of the two costs as this text shows them (gpuplan.units.money_difference), not the
    # JSON's amount to the cent: 12,030 - 6,636 reads 5,394 here, 12,030.40 - 6,635.70 = 5,394.70 there.
    key = "monthly_cost" if job["job"] == "serve" else ("run_cost" if saving["per"] == "run" else None)
    if key is None:
        amount = money_difference(
            job["declared"]["cost_per_million_tokens"], job["recommended"]["cost_per_million_tokens"]
        )
    else:
        amount = money_difference(job["declared"][key], job["recommended"][key])
    if amount.value <= 0:
        return needless or _kept_text(job, currency) or "the declared layout is the cheapest sound one"
    return f"saves {format_money(amount, currency)} per {saving['per']} ({format_number(saving['share'] * 100, 0)}%)"


# The fields a serving layout's model split is stated in (a needless one dropped, its sequences spread anew)
SPLIT_FIELDS = {"serve.hardware.tensor_parallel", "serve.hardware.pipeline_parallel"}


def _needless_words(recommended: dict[str, Any] | None) -> str:
    """Why a recommendation at no saving differs from the declared layout where it drops what GP302 calls needless
    (``SpecPlanner._kept``): a fine-tune's sharding, a deployment's split of the same GPUs; else ""."""
    changes = set(recommended["changes"]) if recommended is not None else set()
    if changes == {"finetune.sharding"}:
        return "the declared layout without a sharding it does not need (GP302)"
    if changes & SPLIT_FIELDS and changes <= SPLIT_FIELDS | {"serve.concurrency"}:
        return "the declared GPUs as single-GPU replicas: the split is not needed (GP302)"
    return ""


def _kept_text(job: dict[str, Any], currency: str) -> str:
    """Why a sound declared layout stays recommended beside a cheaper one: its saving is not material."""
    kept = job["kept_over"]
    if kept is None or kept["saving"] is None:
        return ""
    saving, option = kept["saving"], kept["option"]
    key = {"month": "monthly_cost", "run": "run_cost"}.get(saving["per"], "cost_per_million_tokens")
    amount = money_difference(job["declared"][key], option[key])
    return (
        f"kept: {_layout(option)} would save {format_money(amount, currency)} per {saving['per']} "
        f"({format_number(saving['share'] * 100, 0)}%); a change must save {kept['threshold']}"
    )


def _headline(job: dict[str, Any], currency: str) -> tuple[str, str]:
    """(the declared layout with its cost and verdict, the recommendation with its cost and saving)."""
    declared, recommended = job["declared"], job["recommended"]
    first = f"{_layout(declared)}, {_cost(declared, currency)} — {_verdict(declared)}"
    if recommended is None:
        if declared["meets"].get("context") is False:
            return first, "none — no layout runs a context longer than the model takes"
        return first, "none — no layout meets every constraint within the limits"
    saving = _saving_text(job, currency)
    return first, f"{_layout(recommended)}, {_cost(recommended, currency)}" + (f" — {saving}" if saving else "")


def _title(document: dict[str, Any]) -> str:
    c = document["constraints"]
    scope = []
    if c["gpu"]:
        scope.append("GPUs " + ", ".join(c["gpu"]))
    if c["vendor"]:
        scope.append("vendors " + ", ".join(c["vendor"]))
    scope.append(f"at most {plural(c['max_gpus'], 'GPU')} on {plural(c['max_nodes'], 'node')}")
    scope.append(f"headroom {c['headroom_pct']:g}%")
    scope.append(f"memory at {c['confidence']:.0%} confidence")  # free: at the bands' pessimistic edges
    return f"{document['name']} ({document['model']}): {'; '.join(scope)}; prices in {document['currency']}"


def _decision_lines(document: dict[str, Any]) -> list[str]:
    """The report's decision, as the plan carries it: the verdict, the amount to sign, and a budget that
    no sound layout fits, with the cheapest sound layout and its overrun."""
    decision = document.get("decision")
    if decision is None:
        return []
    currency = document["currency"]
    # The report judges the spec under its own plan: section; options given to `plan` change the search above
    # the decision, not what the spec asks to approve, and the line says so where they differ.
    under = ", under the spec's own plan constraints, not the command line's" if decision["constraints_differ"] else ""
    lines = [
        f"decision (as gpuplan report states it{under}): {decision['verdict']}; amount to sign: "
        + (decision["amount_to_sign_text"] or "none")
    ]
    for check in decision["budget"]:
        cheapest, limit = check["cheapest"], check["limit"]
        if check["nothing_fits"] and cheapest is not None:
            per = "a month" if check["job"] == "serve" else "per run"
            over = money_difference(cheapest["cost"], limit)
            lines.append(
                f"  no sound {'serving' if check['job'] == 'serve' else 'fine-tuning'} layout fits the budget of "
                f"{format_money(limit, currency)} {per}: the cheapest, {cheapest['layout']} at "
                f"{format_money(cheapest['cost'], currency)}, is {format_money(over, currency)} over it"
            )
    return lines


def render_text(document: dict[str, Any]) -> str:
    currency = document["currency"]
    lines = [_title(document), *_decision_lines(document)]
    for job in document["jobs"]:
        kind = job["job"]
        lines += ["", f"{'serving' if kind == 'serve' else 'fine-tuning'}:"]
        recommended = job["recommended"]
        declared_text, recommended_text = _headline(job, currency)
        lines += [f"  declared     {declared_text}", f"  recommended  {recommended_text}"]
        if recommended is not None:
            lines.append("  paste:")
            lines += ["    " + line for line in recommended["yaml"].splitlines()]
        if job["options"]:
            lines += ["", f"  options ({_counted(job, 'options')}; {_order_note(job)}):"]
            rows = [_row(o, currency, _marks(job, o)) for o in job["options"]]
            lines += _text_table(_headers(kind, document["constraints"]["confidence"]), rows)
        if job["rejected"]:
            lines += ["", f"  rejected ({_counted(job, 'rejected')}; the fewest GPUs tried on each GPU kind, and why):"]
            # The columns as wide as their longest cell (a layout of several replicas outgrows any fixed width).
            cells = [(_layout(o), _cost(o, currency), _verdict(o)) for o in job["rejected"]]
            wide = [max(len(cell[i]) for cell in cells) for i in (0, 1)]
            lines += [f"    {layout:<{wide[0]}}  {cost:>{wide[1]}}  {verdict}" for layout, cost, verdict in cells]
        if job["alternatives"]:
            lines += ["", "  cheaper if you accept a change of the model's numerics (never recommended):"]
            for alternative in job["alternatives"]:
                option = alternative["option"]
                lines.append(f"    {alternative['label']}: {_layout(option)}  {_cost(option, currency)}")
    return "\n".join(visible(line) for line in lines) + "\n"


def _fenced(text: str, info: str) -> list[str]:
    """``text`` as a fenced code block whose fence is longer than any run of backticks in it (CommonMark:
    a closing fence is at least as long as the opening one), so the content can never close it."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, text.rstrip("\n"), fence]


def _md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    headers, rows = _keep(headers, rows)
    rule = "|".join("---" if header in TEXT_COLUMNS else "---:" for header in headers)
    out = ["| " + " | ".join(headers) + " |", f"|{rule}|"]
    out += ["| " + " | ".join(escape_markdown(cell) for cell in row) + " |" for row in rows]
    return out


def render_markdown(document: dict[str, Any]) -> str:
    currency = document["currency"]
    lines = [f"# GPU plan: {escape_markdown(document['name'])}", "", escape_markdown(_title(document))]
    decision = _decision_lines(document)
    if decision:
        lines += ["", *(f"- {escape_markdown(line.strip())}" for line in decision)]
    for job in document["jobs"]:
        kind = job["job"]
        recommended = job["recommended"]
        declared_text, recommended_text = _headline(job, currency)
        lines += ["", f"## {'Serving' if kind == 'serve' else 'Fine-tuning'}", ""]
        lines += [
            f"- **Declared**: {escape_markdown(declared_text)}",
            f"- **Recommended**: {escape_markdown(recommended_text)}",
        ]
        if recommended is not None:
            lines += ["", *_fenced(recommended["yaml"], "yaml")]
        if job["options"]:
            lines += ["", f"### Options ({_counted(job, 'options')})", ""]
            lines.append(f"Sound options: {_order_note(job)}.")
            lines.append("")
            lines += _md_table(
                _headers(kind, document["constraints"]["confidence"]),
                [_row(o, currency, _marks(job, o)) for o in job["options"]],
            )
        if job["rejected"]:
            lines += ["", f"### Rejected ({_counted(job, 'rejected')})", ""]
            lines += _md_table(
                ["layout", "cost", "first constraint broken"],
                [[_layout(o), _cost(o, currency), _verdict(o)] for o in job["rejected"]],
            )
        if job["alternatives"]:
            lines += ["", "### Changes of numerics (never recommended)", ""]
            lines += _md_table(
                ["change", "layout", "cost"],
                [[a["label"], _layout(a["option"]), _cost(a["option"], currency)] for a in job["alternatives"]],
            )
    return "\n".join(lines) + "\n"
