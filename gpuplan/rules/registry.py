"""The rule registry: every code gpuplan can report, with its name, family, severity and documentation.

Rules register themselves with :func:`rule`; ``gpuplan.rules`` imports each family module explicitly
(no entry points), so the registry is complete once that package is imported.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from gpuplan.errors import GpuplanError
from gpuplan.findings import Severity

DOC_SECTIONS = ("## What it does", "## Why is this bad?", "## Example", "## Use instead")

CheckFunction = Callable[..., Iterator[Any]]


class Rule(NamedTuple):
    code: str
    name: str
    family: str
    severity: Severity
    doc: str
    check: CheckFunction | None

    @property
    def summary(self) -> str:
        return self.doc.strip().splitlines()[0] if self.doc.strip() else ""


_REGISTRY: dict[str, Rule] = {}


def rule(
    code: str, name: str, family: str, severity: Severity = Severity.ERROR
) -> Callable[[CheckFunction], CheckFunction]:
    """Register a check (or a documented input problem) under a stable code."""

    def register(function: CheckFunction) -> CheckFunction:
        if code in _REGISTRY:
            raise ValueError(f"rule code {code} registered twice")
        if any(existing.name == name for existing in _REGISTRY.values()):
            raise ValueError(f"rule name {name} registered twice")
        doc = inspect.cleandoc(function.__doc__ or "")
        is_check = not getattr(function, "_documentation_only", False)
        _REGISTRY[code] = Rule(code, name, family, severity, doc, function if is_check else None)
        return function

    return register


def documentation_only(function: CheckFunction) -> CheckFunction:
    """Mark a registered function as documentation for a code raised elsewhere (loader, schema)."""
    function._documentation_only = True  # type: ignore[attr-defined]
    return function


def all_rules() -> tuple[Rule, ...]:
    import gpuplan.rules  # noqa: F401  (registers every family)

    return tuple(sorted(_REGISTRY.values(), key=lambda item: item.code))


def get_rule(code_or_name: str) -> Rule:
    """Look a rule up by code (GP201) or name (does-not-fit)."""
    import gpuplan.rules  # noqa: F401  (registers every family)

    wanted = code_or_name.strip()
    if wanted.upper() in _REGISTRY:
        return _REGISTRY[wanted.upper()]
    rules = all_rules()
    for item in rules:
        if item.code == wanted.upper() or item.name == wanted.lower():
            return item
    choices = [item.code for item in rules] + [item.name for item in rules]
    close = difflib.get_close_matches(wanted, choices, n=3, cutoff=0.6)
    suggestion = f"; did you mean {', '.join(close)}?" if close else "; `gpuplan rules` lists them"
    raise GpuplanError(f"unknown rule {code_or_name!r}{suggestion}")
