"""The Finding record every stage produces, its severity, and its stable ordering."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuplan.codes import CODES, Severity
from gpuplan.records import record

__all__ = ["Finding", "Severity", "Waiver", "dotted", "json_pointer", "sort_key", "sorted_findings"]


@record
class Waiver:
    """An accepted finding, declared in the spec's ``waivers`` section."""

    rule: str
    reason: str
    approved_by: str = ""
    expires: str = ""


@record
class Finding:
    """One problem, at one place in one file."""

    code: str
    name: str
    severity: Severity
    message: str
    file: str
    line: int
    col: int
    pointer: str = ""
    hint: str = ""
    waiver: Waiver | None = None

    @classmethod
    def make(
        cls,
        code: str,
        message: str,
        *,
        path: str,
        line: int = 1,
        col: int = 1,
        pointer: str = "",
        hint: str = "",
    ) -> Finding:
        """A finding whose name and default severity come from the code table."""
        entry = CODES[code]
        return cls(code, entry.name, entry.severity, message, path, line, col, pointer, hint)

    @property
    def waived(self) -> bool:
        return self.waiver is not None

    def with_severity(self, severity: Severity) -> Finding:
        return replace(self, severity=severity)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape documented in docs/lint.md (``gpuplan lint --format json``)."""
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "col": self.col,
            "pointer": self.pointer,
            "hint": self.hint,
            "waived": self.waived,
            "waiver": None
            if self.waiver is None
            else {
                "rule": self.waiver.rule,
                "reason": self.waiver.reason,
                "approved_by": self.waiver.approved_by,
                "expires": self.waiver.expires,
            },
        }


def sort_key(finding: Finding) -> tuple[str, int, int, str, str]:
    return (finding.file, finding.line, finding.col, finding.code, finding.message)


def sorted_findings(findings: list[Finding] | tuple[Finding, ...]) -> tuple[Finding, ...]:
    """Findings in a stable order: file, line, column, code."""
    return tuple(sorted(findings, key=sort_key))


def json_pointer(parts: tuple[str | int, ...] | list[str | int]) -> str:
    """RFC 6901 pointer for a path of keys and indexes."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def dotted(parts: tuple[str | int, ...] | list[str | int]) -> str:
    """A path as people write it: ``serve.hardware.gpu``, ``waivers[0].rule``."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text
