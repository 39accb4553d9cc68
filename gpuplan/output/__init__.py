"""Lint output formats, chosen by name: text, json, sarif, github.

Each format is imported only when asked for: SARIF carries every rule's documentation and so imports
the rule registry, which a pre-commit run printing text never needs. Text and github are streamed: they
print each file's findings as it is linted (``result_text``), then a summary (``end_text``), so a long
run keeps none of its findings; json and sarif print one document at the end.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

from gpuplan.output.summary import RunSummary

Formatter = Callable[[RunSummary], str]

FORMAT_MODULES = {"text": "text", "json": "json_format", "sarif": "sarif", "github": "github"}


def formatter(name: str) -> Formatter:
    """The render function of the format ``name`` (one of FORMAT_MODULES)."""
    module = importlib.import_module(f"gpuplan.output.{FORMAT_MODULES[name]}")
    render: Formatter = module.render
    return render


def streamed(name: str) -> ModuleType | None:
    """The module of the format ``name`` when it is printed file by file (it has ``result_text`` and
    ``end_text``), else None."""
    module = importlib.import_module(f"gpuplan.output.{FORMAT_MODULES[name]}")
    return module if hasattr(module, "result_text") else None


__all__ = ["FORMAT_MODULES", "Formatter", "RunSummary", "formatter", "streamed"]
