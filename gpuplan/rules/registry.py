"""The rule registry: each code of the code table with its documentation and, for rules, its check.

A family module documents each of its codes with :func:`rule`; the code's name, family, severity and
summary come from :mod:`gpuplan.codes` (one source of truth). ``gpuplan.rules`` imports every family
explicitly (no entry points), so the registry is complete once that package is imported.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from gpuplan.codes import CODES, Code, lookup, suggestions
from gpuplan.errors import GpuplanError

DOC_SECTIONS = ("## What it does", "## Why is this bad?", "## Example", "## Use instead")

CheckFunction = Callable[..., Iterator[Any]]


class Rule(NamedTuple):
    entry: Code
    body: str  # the documentation sections, without the summary (which is the table's)
    check: CheckFunction | None

    @property
    def code(self) -> str:
        return self.entry.code

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def family(self) -> str:
        return self.entry.family

    @property
    def severity(self) -> Any:
        return self.entry.severity

    @property
    def summary(self) -> str:
        return self.entry.summary

    @property
    def doc(self) -> str:
        """What ``gpuplan explain`` prints: the summary, then the documentation sections."""
        return f"{self.summary}\n\n{self.body}"


_REGISTRY: dict[str, Rule] = {}


def rule(code: str) -> Callable[[CheckFunction], CheckFunction]:
    """Register the check (or the documentation of a problem raised elsewhere) for a code of the table."""

    def register(function: CheckFunction) -> CheckFunction:
        if code not in CODES:
            raise ValueError(f"rule code {code} is not in gpuplan.codes")
        if code in _REGISTRY:
            raise ValueError(f"rule code {code} registered twice")
        body = inspect.cleandoc(function.__doc__ or "")
        is_check = not getattr(function, "_documentation_only", False)
        _REGISTRY[code] = Rule(CODES[code], body, function if is_check else None)
        return function

    return register


def documentation_only(function: CheckFunction) -> CheckFunction:
    """Mark a registered function as documentation for a code raised elsewhere (loader, schema)."""
    function._documentation_only = True  # type: ignore[attr-defined]
    return function


def all_rules() -> tuple[Rule, ...]:
    import gpuplan.rules  # noqa: F401  (registers every family)

    return tuple(_REGISTRY[code] for code in sorted(_REGISTRY))


def get_rule(code_or_name: str) -> Rule:
    """Look a rule up by code (GP201) or name (does-not-fit)."""
    import gpuplan.rules  # noqa: F401  (registers every family)

    entry = lookup(code_or_name)
    if entry is None:
        close = suggestions(code_or_name)
        suggestion = f"; did you mean {', '.join(close)}?" if close else "; `gpuplan rules` lists them"
        raise GpuplanError(f"unknown rule {code_or_name!r}{suggestion}")
    return _REGISTRY[entry.code]
