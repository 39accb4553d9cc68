"""Apply a spec's waivers to its findings: matched findings are marked waived, not dropped."""

from __future__ import annotations

import datetime
from dataclasses import replace

from gpuplan.findings import Finding, Waiver, json_pointer
from gpuplan.loader import LoadedDocument


def _matches(waiver: Waiver, finding: Finding) -> bool:
    wanted = waiver.rule.strip()
    return finding.code == wanted.upper() or finding.name == wanted


def _expired(waiver: Waiver, today: datetime.date) -> bool:
    return bool(waiver.expires) and datetime.date.fromisoformat(waiver.expires) < today


def apply_waivers(
    findings: list[Finding], waivers: tuple[Waiver, ...], document: LoadedDocument, today: datetime.date
) -> list[Finding]:
    """Findings with matching, unexpired waivers attached, plus GP701/GP702 for waivers that do not apply."""
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
            result.append(
                _at(
                    document,
                    "GP701",
                    ("waivers", index, "expires"),
                    f"the waiver of {waiver.rule} expired on {waiver.expires}; its finding applies again",
                )
            )
        elif index not in used:
            result.append(
                _at(
                    document,
                    "GP702",
                    ("waivers", index, "rule"),
                    f"the waiver of {waiver.rule} matches no finding in this spec",
                )
            )
    return result


def _at(document: LoadedDocument, code: str, pointer: tuple[str | int, ...], message: str) -> Finding:
    position = document.position(pointer)
    return Finding.make(
        code,
        message,
        path=document.path,
        line=position.line,
        col=position.col,
        pointer=json_pointer(pointer),
        hint="renew or delete the waiver",
    )
