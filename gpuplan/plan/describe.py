"""Words for options: the layout and its cost in one phrase, and the spec fields to paste as YAML."""

from __future__ import annotations

import json
import re
from typing import Any

from gpuplan.plan.evaluate import Option
from gpuplan.units import format_money

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


def summary(option: Option, currency: str) -> str:
    """``2 x h200-sxm, tensor_parallel 2 (6,636 USD/month)``."""
    return f"{option.layout.describe()} ({cost_text(option, currency)})"


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
