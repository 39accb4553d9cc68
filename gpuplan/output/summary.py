"""What every lint output format renders: the results of one run and their counts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuplan.findings import Finding, Severity
from gpuplan.records import record

if TYPE_CHECKING:  # the linter (and its YAML loader) is imported where a run needs it, not by the CLI's start-up
    from gpuplan.linter import LintResult

UNCHECKED_CODES = frozenset({"GP009", "GP010", "GP012"})


@record
class RunSummary:
    results: tuple[LintResult, ...]
    fail_on: Severity
    quiet: bool = False

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(finding for result in self.results for finding in result.findings)

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity and not f.waived)

    @property
    def waived(self) -> int:
        return sum(1 for f in self.findings if f.waived)

    @property
    def failed(self) -> bool:
        return any(result.failing(self.fail_on) for result in self.results)

    @property
    def unchecked(self) -> tuple[Finding, ...]:
        """Findings that mean a file could not be checked at all: unreadable, badly configured, a bug."""
        return tuple(f for f in self.findings if f.code in UNCHECKED_CODES)

    @property
    def exit_code(self) -> int:
        """2 when a file could not be checked (GP009, GP010, GP012), else 1 when findings fail the run, else 0."""
        if self.unchecked:
            return 2
        return 1 if self.failed else 0

    @property
    def tracebacks(self) -> tuple[str, ...]:
        return tuple(trace for result in self.results for trace in result.tracebacks)

    def line(self) -> str:
        """The one-line summary: counts by severity, files, waived findings."""
        files = len(self.results)
        noun = "file" if files == 1 else "files"
        parts = [
            plural(self.count(Severity.ERROR), "error"),
            plural(self.count(Severity.WARNING), "warning"),
            plural(self.count(Severity.INFO), "info"),
        ]
        waived = f", {self.waived} waived" if self.waived else ""
        verdict = "failed" if self.failed else "passed"
        return f"{verdict}: {', '.join(parts)}{waived} in {files} {noun}"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 or word == "info" else f"{count} {word}s"
