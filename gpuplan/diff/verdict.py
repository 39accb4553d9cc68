"""The per-spec verdict a diff compares, and which direction is worse.

The one seam between ``gpuplan diff`` and the report's verdict: everything in the diff that shows or
compares a verdict goes through ``spec_verdict`` and ``VERDICTS``.
"""

from __future__ import annotations

from gpuplan.linter import LintResult

# Best first: a later verdict is worse than an earlier one.
VERDICTS = ("PASS", "PASS WITH WARNINGS", "FAIL")


def spec_verdict(result: LintResult) -> str:
    """The report's verdict for one linted spec (``gpuplan report`` prints the same)."""
    from gpuplan.report.model import verdict

    return verdict(result.findings)


def worsened(before: str | None, after: str | None) -> bool:
    """Whether the verdict got worse; a spec that appears or disappears has nothing to compare."""
    if before is None or after is None:
        return False
    return VERDICTS.index(after) > VERDICTS.index(before)
