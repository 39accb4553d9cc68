"""Apply a spec's waivers to its findings: matched findings are marked waived, not dropped."""

from __future__ import annotations

import datetime
from dataclasses import replace

from gpuplan.codes import lookup
from gpuplan.findings import Finding, Waiver, json_pointer
from gpuplan.loader import LoadedDocument


def _matches(waiver: Waiver, finding: Finding) -> bool:
    wanted = waiver.rule.strip()
    return finding.code == wanted.upper() or finding.name == wanted


def _code_of(waiver: Waiver) -> str | None:
    entry = lookup(waiver.rule)
    return entry.code if entry is not None else None


def _expired(waiver: Waiver, today: datetime.date) -> bool:
    return bool(waiver.expires) and datetime.date.fromisoformat(waiver.expires) < today


def apply_waivers(
    findings: list[Finding],
    waivers: tuple[Waiver, ...],
    document: LoadedDocument,
    today: datetime.date,
    unjudged: frozenset[str] = frozenset(),
) -> list[Finding]:
    """Findings with matching, unexpired waivers attached, plus GP701/GP702 for waivers that do not apply.
    ``unjudged``: codes whose rules did not run (left out by select/ignore); a waiver of one cannot be
    called unused."""
    used: set[int] = set()
    result = []
    for finding in findings:
        for index, waiver in enumerate(waivers):
            if _matches(waiver, finding) and not _expired(waiver, today):
                finding = replace(finding, waiver=waiver)
                used.add(index)
                break
        result.append(finding)
    for index, waiver in enumerate(waivers):
        if _expired(waiver, today):
            # Whether a finding it would waive is there to apply again, or nothing matches it any more.
            now = (
                "its finding applies again"
                if any(_matches(waiver, finding) for finding in findings)
                else "it matches no finding in this spec now"
            )
            result.append(
                _at(
                    document,
                    "GP701",
                    ("waivers", index, "expires"),
                    f"the waiver of {waiver.rule} expired on {waiver.expires}; {now}",
                )
            )
        elif index not in used and _code_of(waiver) not in unjudged:
            result.append(
                _at(
                    document,
                    "GP702",
                    ("waivers", index, "rule"),
                    f"the waiver of {waiver.rule} matches no finding in this spec",
                )
            )
    return result


# What to do about each: an expired waiver may still be wanted; one that matches nothing is not.
_HINTS = {"GP701": "renew or delete the waiver", "GP702": "delete the waiver, or fix its rule or field to match"}


def _at(document: LoadedDocument, code: str, pointer: tuple[str | int, ...], message: str) -> Finding:
    position = document.position(pointer)
    return Finding.make(
        code,
        message,
        path=document.path,
        line=position.line,
        col=position.col,
        pointer=json_pointer(pointer),
        hint=_HINTS[code],
    )
