"""The per-spec decision a diff compares, and which direction is worse.

The one seam between ``gpuplan diff`` and the decision report (gpuplan/decision: ``decide``, on which
gpuplan.decision.memo builds the report's Memo): everything in the diff that shows or compares a verdict
goes through ``spec_decision``, ``VERDICTS`` and ``worsened``, so a diff says what ``gpuplan report`` would
say of each version, under the same fail level and configuration. The diff compares the declared amounts
(the Memo's stress tests are a report's, not a diff's).
"""

from __future__ import annotations

from gpuplan.decision import Decision, Verdict, decide
from gpuplan.findings import Severity
from gpuplan.linter import LintResult

# Best first: APPROVE, APPROVE WITH CHANGES, CANNOT APPROVE, REJECT; a later verdict is worse.
VERDICTS = tuple(verdict.value for verdict in Verdict)


def spec_decision(result: LintResult, fail_on: Severity) -> Decision:
    """The report's decision for one linted spec (``gpuplan report --fail-on`` decides the same)."""
    return decide(result, fail_on)


def worsened(before: str | None, after: str | None) -> bool:
    """Whether the verdict got worse; a spec that appears or disappears has nothing to compare."""
    if before is None or after is None:
        return False
    return Verdict(after).rank > Verdict(before).rank
