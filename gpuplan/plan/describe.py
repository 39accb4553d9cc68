"""Words for options: the layout and its cost in one phrase, and the spec fields to paste as YAML."""

from __future__ import annotations

import json
import re
from typing import Any

from gpuplan.plan.evaluate import Option
from gpuplan.records import record
from gpuplan.units import CENT_DIGITS, Shown, format_money, format_percent, money_difference, rounded

_PLAIN = re.compile(r"[a-z0-9][a-z0-9._-]*")


def cost_text(option: Option, currency: str) -> str:
    """Monthly (serving), per run (fine-tuning with tokens) or per 1M tokens; "unpriced" without a price."""
    if option.rate is None:
        return "unpriced"
    if option.kind == "serve":
        return f"{format_money(option.rate, currency)}/month"
    if option.cost is not None:
        return f"{format_money(option.cost, currency)}/run"
    return f"{format_money(option.rate, currency)}/1M tokens"


@record
class Saving:
    """What one layout saves against another: per month (serving), per run (fine-tuning with
    ``finetune.tokens``) or per 1M training tokens (without). The one place a saving is computed: rules,
    ``plan`` (text, Markdown, JSON), reports and the decision all print this.

    The amount is the difference of the two costs *as shown* (each at its display precision), so the
    reader's own subtraction of the printed figures gives the printed saving (12,030 - 6,636 = 5,394, not
    the 5,395 that the exact 12,030.40 - 6,635.70 rounds to); ``published`` is the same at the cents the
    JSON carries. The share stays on the exact figures (a ratio, not a sum a reader checks to the unit)."""

    before: float
    after: float
    per: str  # "month" | "run" | "1M tokens"
    share: float  # of the declared cost, exact

    @property
    def amount(self) -> Shown:
        return money_difference(self.before, self.after)

    @property
    def published(self) -> float:
        """The difference of the costs as the JSON carries them (to the cent)."""
        return rounded(rounded(self.before, CENT_DIGITS) - rounded(self.after, CENT_DIGITS), CENT_DIGITS)

    @property
    def positive(self) -> bool:
        """Whether the saving shows as more than nothing (exactly cheaper by under a shown unit is not)."""
        return self.amount.value > 0

    def text(self, currency: str) -> str:
        """``5,394 USD a month``; ``1.60 USD per run``."""
        return f"{format_money(self.amount, currency)} {'a month' if self.per == 'month' else f'per {self.per}'}"

    def share_text(self) -> str:
        return format_percent(self.share)


def saving_between(declared: Option, option: Option) -> Saving | None:
    """What ``option`` saves against ``declared`` (negative when it costs more); None when either is unpriced."""
    if declared.rate is None or option.rate is None:
        return None
    # Prices may be 0 (owned or donated GPUs): nothing is cheaper than free, so against a free declared
    # layout no share is saved (a share of nothing is not a number the outputs could print).
    share = (declared.rate - option.rate) / declared.rate if declared.rate > 0 else 0.0
    if declared.kind == "serve":
        return Saving(declared.rate, option.rate, "month", share)
    if declared.cost is not None and option.cost is not None:
        return Saving(declared.cost, option.cost, "run", share)
    return Saving(declared.rate, option.rate, "1M tokens", share)


def summary(option: Option, currency: str) -> str:
    """``2 x h200-sxm, tensor_parallel 2 (6,636 USD/month)``; a fine-tune's micro-batch split too when it
    changes (a hint followed without it could keep the declared micro-batch, which may not fit)."""
    settings = option.layout.settings
    split = ""
    if settings is not None and {"finetune.micro_batch", "finetune.gradient_accumulation"} & set(option.changes):
        split = f", micro_batch {settings.micro_batch} x gradient_accumulation {settings.gradient_accumulation}"
    return f"{option.layout.describe()}{split} ({cost_text(option, currency)})"


def flow_yaml(value: Any) -> str:
    """A value in YAML flow style: ``{gpu: l4, count: 1}``."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {flow_yaml(item)}" for key, item in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    text = str(value)
    return text if _PLAIN.fullmatch(text) and text not in ("true", "false", "null") else json.dumps(text)


def paste_line(fragment: dict[str, Any]) -> str:
    """The spec fields to paste, on one line (what a hint can carry): ``serve: {hardware: {gpu: l4}}``."""
    return ", ".join(f"{key}: {flow_yaml(item)}" for key, item in fragment.items())


def block_yaml(fragment: dict[str, Any]) -> str:
    """The fragment as block-style YAML (for reports and JSON): keys in order, two-space indents."""
    lines: list[str] = []

    def emit(mapping: dict[str, Any], indent: int) -> None:
        for key, item in mapping.items():
            if isinstance(item, dict):
                lines.append(f"{' ' * indent}{key}:")
                emit(item, indent + 2)
            else:
                lines.append(f"{' ' * indent}{key}: {flow_yaml(item)}")

    emit(fragment, 0)
    return "\n".join(lines) + "\n"
