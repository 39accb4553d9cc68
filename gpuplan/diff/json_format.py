"""The versioned JSON object of ``gpuplan diff --format json`` (schemas/diff.schema.json, docs/diff.md).

For policies (OPA/conftest, a short Python check): every figure is a number or null, money in the
spec's currency rounded to cents, bytes as integers, and each spec's ``delta`` is after minus before.
"""

from __future__ import annotations

import json
from typing import Any

from gpuplan import __version__
from gpuplan.diff.model import COSTS, DiffResult, Figure, Revision, SpecChange, SpecSide, Totals
from gpuplan.findings import Severity

FORMAT_VERSION = 1


def render(result: DiffResult, breaches: list[str], exit_code: int) -> str:
    totals = result.totals
    document = {
        "format_version": FORMAT_VERSION,
        "tool": {"name": "gpuplan", "version": __version__},
        "base": _revision(result.base),
        "head": _revision(result.head),
        "totals": _totals(totals[0]),
        "other_currency_totals": [_totals(t) for t in totals[1:]],
        "guardrails": {"passed": not breaches, "breaches": breaches, "exit_code": exit_code},
        "configuration_changed": list(result.configuration_changed),
        "specs": [_spec(change) for change in result.changes],
    }
    # ASCII only: spec strings keep their value for a JSON reader, but no raw control or bidi character
    # from a spec reaches a terminal or log that shows the JSON.
    return json.dumps(document, indent=2, ensure_ascii=True) + "\n"


def _revision(revision: Revision) -> dict[str, Any]:
    return {"kind": revision.kind, "name": revision.name, "commit": revision.commit}


def _figure(figure: Figure) -> dict[str, Any]:
    return {
        "before": figure.before,
        "after": figure.after,
        "delta": figure.delta,
        "percent": figure.percent,
        "uncosted": list(figure.uncosted),
    }


def _totals(totals: Totals) -> dict[str, Any]:
    return {
        "currency": totals.currency,
        "specs": totals.specs,
        "monthly_cost": _figure(totals.monthly),
        "run_cost": _figure(totals.run),
        "term_cost": _figure(totals.term),
    }


def _side(side: SpecSide | None) -> dict[str, Any] | None:
    if side is None:
        return None
    return {
        "path": side.path,
        "verdict": side.verdict,
        "reason": side.reason,
        "currency": side.currency,
        "estimated": side.estimated,
        "term_months": side.term_months,
        "monthly_cost": side.monthly_cost,
        "run_cost": side.run_cost,
        "term_cost": side.term_cost,
        "errors": side.count(Severity.ERROR),
        "warnings": side.count(Severity.WARNING),
        "infos": side.count(Severity.INFO),
        "jobs": side.jobs,
    }


# Yes-or-no figures, which a side may leave null (an engine that cannot start): no difference to take.
FLAGS = ("saturated",)


def _delta(change: SpecChange) -> dict[str, Any]:
    """After minus before for every cost, and per job for every numeric figure (not layout, GPU id, fits)."""
    jobs: dict[str, Any] = {}
    for side in (change.after, change.before):
        for job, figures in (side.jobs if side else {}).items():
            numeric = [key for key, value in figures.items() if not isinstance(value, (str, bool)) and key not in FLAGS]
            jobs.setdefault(job, {key: change.figure_delta(job, key) for key in numeric})
    return {**{key: change.cost_delta(key) for key in COSTS}, "jobs": dict(sorted(jobs.items()))}


def _spec(change: SpecChange) -> dict[str, Any]:
    return {
        "path": change.path,
        "old_path": change.old_path,
        "status": change.status,
        "material": change.material,
        "verdict": {
            "before": change.verdict_before,
            "after": change.verdict_after,
            "worsened": change.verdict_worsened,
        },
        "before": _side(change.before),
        "after": _side(change.after),
        "delta": _delta(change),
        "findings_added": [f.to_dict() for f in change.findings_added],
        "findings_resolved": [f.to_dict() for f in change.findings_resolved],
        "fields_changed": [
            {
                "pointer": field.json_pointer,
                "change": field.kind,
                "before": field.before,
                "after": field.after,
                "line": change.line_of(field.pointer),
            }
            for field in change.fields_changed
        ],
        "inputs_changed": list(change.inputs_changed),
    }
