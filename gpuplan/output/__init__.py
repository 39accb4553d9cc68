"""Lint output formats, chosen by name: text, json, sarif, github."""

from __future__ import annotations

from collections.abc import Callable

from gpuplan.output import github, json_format, sarif, text
from gpuplan.output.summary import RunSummary

Formatter = Callable[[RunSummary], str]

FORMATTERS: dict[str, Formatter] = {
    "text": text.render,
    "json": json_format.render,
    "sarif": sarif.render,
    "github": github.render,
}

__all__ = ["FORMATTERS", "Formatter", "RunSummary"]
