"""Lint output formats, chosen by name: text, json, sarif, github.

Each format is imported only when asked for: SARIF carries every rule's documentation and so imports
the rule registry, which a pre-commit run printing text never needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from gpuplan.output.summary import RunSummary

Formatter = Callable[[RunSummary], str]

FORMAT_MODULES = {"text": "text", "json": "json_format", "sarif": "sarif", "github": "github"}


def formatter(name: str) -> Formatter:
    """The render function of the format ``name`` (one of FORMAT_MODULES)."""
    module = importlib.import_module(f"gpuplan.output.{FORMAT_MODULES[name]}")
    render: Formatter = module.render
    return render


__all__ = ["FORMAT_MODULES", "Formatter", "RunSummary", "formatter"]
