"""What every lint output format renders: the results of one run and their counts.

A run's counts are a ``Tally`` added to result by result, so that text and GitHub output can print each
file's findings as it is linted and keep none of them: the parent process of a 10,000-spec run then
holds no more than for one spec. ``RunSummary`` keeps every result, for the formats that print them
all at the end (json, sarif) and for the commands that read one result back.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from gpuplan.findings import Severity
from gpuplan.records import record

if TYPE_CHECKING:  # the linter (and its YAML loader) is imported where a run needs it, not by the CLI's start-up
    from gpuplan.findings import Finding
    from gpuplan.linter import LintResult

UNCHECKED_CODES = frozenset({"GP009", "GP010", "GP012"})


@record
class Tally:
    """The counts of a run so far; ``plus`` adds one file's result."""

    fail_on: Severity
    files: int = 0
    findings: int = 0  # every finding, waived ones too: each is printed
    errors: int = 0  # the severity counts leave waived findings out
    warnings: int = 0
    infos: int = 0
    waived: int = 0
    failed: bool = False  # a finding at or above fail_on, not waived
    unchecked: bool = False  # a file could not be checked at all: unreadable, badly configured, a bug

    def plus(self, result: LintResult) -> Tally:
        findings = result.findings
        counted = [f.severity for f in findings if not f.waived]
        return Tally(
            self.fail_on,
            self.files + 1,
            self.findings + len(findings),
            self.errors + counted.count(Severity.ERROR),
            self.warnings + counted.count(Severity.WARNING),
            self.infos + counted.count(Severity.INFO),
            self.waived + len(findings) - len(counted),
            # each file at its own level: its configuration's fail-on, unless the command line set the run's
            self.failed or bool(result.failing(result.fail_on or self.fail_on)),
            self.unchecked or any(f.code in UNCHECKED_CODES for f in findings),
        )

    def count(self, severity: Severity) -> int:
        return {Severity.ERROR: self.errors, Severity.WARNING: self.warnings, Severity.INFO: self.infos}[severity]

    @property
    def exit_code(self) -> int:
        """2 when a file could not be checked (GP009, GP010, GP012), else 1 when findings fail the run, else 0."""
        if self.unchecked:
            return 2
        return 1 if self.failed else 0

    def line(self) -> str:
        """The one-line summary: counts by severity, files, waived findings."""
        noun = "file" if self.files == 1 else "files"
        parts = [plural(self.errors, "error"), plural(self.warnings, "warning"), plural(self.infos, "info")]
        waived = f", {self.waived} waived" if self.waived else ""
        verdict = "failed" if self.failed else "passed"
        return f"{verdict}: {', '.join(parts)}{waived} in {self.files} {noun}"


def tally_of(results: Iterable[LintResult], fail_on: Severity) -> Tally:
    return functools.reduce(Tally.plus, results, Tally(fail_on))


def printed(
    result_text: Callable[[LintResult], str],
    end_text: Callable[[Tally, bool], str],
    results: Iterable[LintResult],
    fail_on: Severity,
    quiet: bool,
) -> Iterator[tuple[str, Tally]]:
    """A streamed format's output (text, github): each file's text as its result comes, then the end
    text, each with the tally so far (the last is the run's)."""
    so_far = Tally(fail_on)
    for result in results:
        so_far = so_far.plus(result)
        yield result_text(result), so_far
    yield end_text(so_far, quiet), so_far


def rendered(
    result_text: Callable[[LintResult], str], end_text: Callable[[Tally, bool], str], summary: RunSummary
) -> str:
    """A streamed format's whole output for a run whose results were kept."""
    chunks = printed(result_text, end_text, summary.results, summary.fail_on, summary.quiet)
    return "".join(text for text, _ in chunks)


@record
class RunSummary:
    results: tuple[LintResult, ...]
    fail_on: Severity
    quiet: bool = False

    @functools.cached_property
    def tally(self) -> Tally:
        return tally_of(self.results, self.fail_on)

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(finding for result in self.results for finding in result.findings)

    def count(self, severity: Severity) -> int:
        return self.tally.count(severity)

    @property
    def waived(self) -> int:
        return self.tally.waived

    @property
    def failed(self) -> bool:
        return self.tally.failed

    @property
    def exit_code(self) -> int:
        return self.tally.exit_code

    @property
    def tracebacks(self) -> tuple[str, ...]:
        return tuple(trace for result in self.results for trace in result.tracebacks)

    def line(self) -> str:
        return self.tally.line()


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 or word == "info" else f"{count} {word}s"
