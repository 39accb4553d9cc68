"""``gpuplan rules`` and ``gpuplan explain``: the rule table (text or JSON) and one rule's documentation."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuplan.rules.registry import Rule


def render_rules(rules: tuple[Rule, ...], output_format: str) -> str:
    """Every rule, one line each (text: code, name, family, default severity, summary) or a JSON array
    (the same with each rule's documentation)."""
    if output_format == "json":
        rows = [
            {
                "code": r.code,
                "name": r.name,
                "family": r.family,
                "severity": r.severity.value,
                "summary": r.summary,
                "doc": r.doc,
            }
            for r in rules
        ]
        return json.dumps(rows, indent=2) + "\n"
    return "".join(f"{r.code}  {r.name:<32} {r.family:<12} {r.severity.value:<8} {r.summary}\n" for r in rules)


def explain_text(rule: Rule) -> str:
    """One rule's heading (code, name, family, default severity) and documentation."""
    return f"{rule.code} {rule.name} ({rule.family}, default severity {rule.severity.value})\n\n{rule.doc}\n"
