"""The report's optional "Verified against a run" section: plain rows from ``gpuplan verify``'s results."""

from __future__ import annotations

from typing import Any

from gpuplan.output.verify_format import BASIS, value
from gpuplan.verify.compare import RunVerification


def verification_section(runs: tuple[RunVerification, ...]) -> list[dict[str, Any]]:
    """One entry per run: what was read, on what basis, each term, what it means (findings join the list)."""
    section = []
    for run in runs:
        evidence = run.evidence
        engine = evidence.engine + (f" {evidence.version}" if evidence.version else "")
        section.append(
            {
                "title": f"{evidence.path} ({engine}, {run.job})",
                "basis": BASIS[run.basis],
                "rows": [
                    {
                        "term": term.name,
                        "estimate": value(term.estimate, term.unit),
                        "measured": value(term.measured, term.unit),
                        "delta": value(term.delta, term.unit, signed=True),
                        "ratio": "-" if term.ratio is None else f"{term.ratio:.3f}",
                        "status": term.status,
                    }
                    for term in run.terms
                ],
                "differing": [
                    f"{check.name}: run {check.run_value}, spec {check.field} {check.spec_value}"
                    for check in run.settings
                    if not check.matches
                ],
                "meaning": [f"not in the evidence: {missing}" for missing in evidence.missing] + list(run.meaning),
            }
        )
    return section
