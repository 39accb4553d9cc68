"""The rule registry: what ``@rule`` stores and refuses, and how a rule is looked up by code or name.

``@rule`` runs when a family module is imported, before any test runs; these tests call it on a fresh
registry, so that what it stores and what it refuses are checked at test time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gpuplan.errors import GpuplanError
from gpuplan.rules import registry


def check(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Something.
    """
    yield from ()


def test_rule_stores_the_documentation_and_the_check(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", {})
    assert registry.rule("GP201")(check) is check
    stored = registry._REGISTRY["GP201"]
    assert stored.body == "## What it does\nSomething."  # cleandoc: no leading blank line or indent
    assert stored.check is check
    assert (stored.code, stored.name) == ("GP201", "does-not-fit")
    assert stored.doc == f"{stored.summary}\n\n## What it does\nSomething."

    def undocumented(*_: Any) -> Iterator[Any]:
        yield from ()

    registry.rule("GP202")(registry.documentation_only(undocumented))
    assert registry._REGISTRY["GP202"].check is None  # documentation of a problem raised elsewhere
    assert registry._REGISTRY["GP202"].body == ""


def test_rule_refuses_unknown_and_repeated_codes(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", {})
    with pytest.raises(ValueError, match=r"^rule code GP999 is not in gpuplan.codes$"):
        registry.rule("GP999")(check)
    registry.rule("GP201")(check)
    with pytest.raises(ValueError, match=r"^rule code GP201 registered twice$"):
        registry.rule("GP201")(check)


def test_unknown_rule_names_the_way_out():
    with pytest.raises(GpuplanError) as raised:
        registry.get_rule("zzzzzzzz")
    assert str(raised.value) == "unknown rule 'zzzzzzzz'; `gpuplan rules` lists them"
    with pytest.raises(GpuplanError, match=r"^unknown rule 'does-not-fi'; did you mean .*does-not-fit"):
        registry.get_rule("does-not-fi")
    assert registry.get_rule("does-not-fit").code == registry.get_rule("GP201").code == "GP201"


def test_several_suggestions_are_listed_with_commas():
    # "GP20" is equally close (difflib ratio 8/9) to GP201-GP209 and GP210; GP201-GP209 differ from it in one
    # place (a character added), GP210 in two (the fourth character and one added), and among equals the
    # later codes come first (difflib's order): GP209, GP208 and GP207, separated by ", ".
    with pytest.raises(GpuplanError) as raised:
        registry.get_rule("GP20")
    assert str(raised.value) == "unknown rule 'GP20'; did you mean GP209, GP208, GP207?"
