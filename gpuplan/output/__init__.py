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


# The formats printed file by file: their modules have result_text and end_text (a test holds them).
STREAMED = frozenset({"text", "github"})


def formatter(name: str) -> Formatter:
    """The render function of the format ``name`` (one of FORMAT_MODULES)."""
    render: Formatter = _module(name).render
    return render


def streamed(name: str) -> ModuleType | None:
    """The module of the format ``name`` when it is printed file by file (``result_text`` as each file
    is linted, then ``end_text``), else None."""
    return _module(name) if name in STREAMED else None


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"gpuplan.output.{FORMAT_MODULES[name]}")


__all__ = ["FORMAT_MODULES", "STREAMED", "Formatter", "RunSummary", "formatter", "streamed"]
