"""GP70x: waivers that no longer apply (raised by gpuplan.waivers, documented here)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpuplan.rules.registry import documentation_only, rule


@rule("GP701")
@documentation_only
def expired_waiver(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports each waiver whose `expires` date is before today; the finding it covered is reported
    again, unwaived.

    ## Why is this bad?
    An accepted risk was accepted for a time; after it, somebody must decide again.

    ## Example
    ```yaml
    waivers: [{rule: GP202, reason: "launch week", approved_by: cto, expires: 2026-01-31}]
    ```

    ## Use instead
    Renew the waiver with a new date and approver, or fix the finding.
    """
    yield from ()


@rule("GP702")
@documentation_only
def unused_waiver(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports each waiver whose rule produced no finding in this spec.

    ## Why is this bad?
    Stale waivers hide future regressions of the same rule and mislead reviewers.

    ## Example
    ```yaml
    waivers: [{rule: GP201, reason: "old plan", approved_by: lead}]   # the job now fits
    ```

    ## Use instead
    Delete the waiver.
    """
    yield from ()
