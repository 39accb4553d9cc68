"""``gpuplan verify``: hold a spec's estimate against what a real run measured.

:func:`verify_spec` lints the spec with its configuration (the estimate and the thresholds come from
there), reads each piece of evidence (:mod:`gpuplan.evidence`), compares it with the job it measured
(:mod:`gpuplan.verify.compare`) and applies the configuration's select/ignore/severity to the
findings, so exit codes mean what they mean for ``lint``.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from gpuplan.config import load_config
from gpuplan.errors import GpuplanError
from gpuplan.evidence.lines import clean
from gpuplan.evidence.model import Evidence
from gpuplan.evidence.read import read_evidence
from gpuplan.findings import Finding, Severity, sorted_findings
from gpuplan.linter import LintOptions, LintResult, configure, lint_path
from gpuplan.records import record
from gpuplan.run import config_for, lint_options
from gpuplan.verify.compare import RunVerification, verify_run

__all__ = [
    "RunVerification",
    "SpecNotEstimable",
    "VerifySummary",
    "verify_evidence",
    "verify_linted",
    "verify_spec",
]


class SpecNotEstimable(GpuplanError):
    """The spec has problems that stop the estimate; ``findings`` says which."""

    def __init__(self, path: str, findings: tuple[Finding, ...]) -> None:
        super().__init__(f"{path} cannot be verified until the problems above are fixed")
        self.findings = findings


@record
class VerifySummary:
    spec_path: str
    runs: tuple[RunVerification, ...]
    fail_on: Severity
    tolerance_pct: float

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(finding for run in self.runs for finding in run.findings)

    def count(self, severity: Severity) -> int:
        return sum(1 for finding in self.findings if finding.severity is severity)

    @property
    def failed(self) -> bool:
        return any(finding.severity.rank >= self.fail_on.rank for finding in self.findings)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0


def verify_spec(
    spec_path: str,
    runs: list[str],
    *,
    kind: str | None = None,
    tolerance_pct: float | None = None,
    config_path: str | None = None,
    fail_on: str | None = None,
) -> VerifySummary:
    """Verify the spec at ``spec_path`` against each evidence file in ``runs``. Raises GpuplanError."""
    if spec_path == "-":
        raise GpuplanError("verify needs a spec file, not standard input")
    _refuse_repeated(runs)
    config = load_config(Path(config_path)) if config_path else config_for(spec_path)
    options = lint_options(config)
    result = lint_path(spec_path, options)
    if result.analysis is None:
        raise SpecNotEstimable(spec_path, result.findings)
    evidence = [read_evidence(path, kind) for path in runs]
    tolerance = options.settings.verify_tolerance_pct if tolerance_pct is None else tolerance_pct
    threshold = Severity(fail_on) if fail_on else (config.fail_on or Severity.ERROR)
    return VerifySummary(spec_path, verify_evidence(result, evidence, options, tolerance), threshold, tolerance)


def _refuse_repeated(runs: list[str]) -> None:
    """GpuplanError when two ``--run`` paths name one file (the same spelling, or another: ./a.log, a link):
    it is one run, and counted twice it would repeat each finding and the run count."""
    seen: dict[tuple[int, int] | str, str] = {}
    for path in runs:
        try:
            status = os.stat(path)
            identity: tuple[int, int] | str = (status.st_dev, status.st_ino)
        except OSError:  # reading it says why; until then, its spelling
            identity = os.path.normpath(os.path.abspath(path))
        if identity in seen:
            first = seen[identity]
            spelled = "" if first == path else f" (as {clean(first)} and {clean(path)})"
            raise GpuplanError(f"--run names {clean(first)} twice{spelled}: each run is verified once; give it once")
        seen[identity] = path


def verify_evidence(
    result: LintResult, evidence: list[Evidence], options: LintOptions, tolerance_pct: float
) -> tuple[RunVerification, ...]:
    """Each piece of evidence against the linted spec; findings configured as lint's are."""
    assert result.analysis is not None and result.document is not None
    verified = []
    for item in evidence:
        run = verify_run(result.analysis, result.document, item, options.settings, tolerance_pct)
        verified.append(replace(run, findings=configure(list(run.findings), options)))
    return tuple(verified)


def verify_linted(
    result: LintResult,
    runs: list[str],
    *,
    kind: str | None = None,
    config_path: str | None = None,
    use_waivers: bool = True,
) -> tuple[LintResult, tuple[RunVerification, ...]]:
    """``result`` with the verify findings of ``runs`` added (what ``gpuplan report --run`` renders)."""
    if result.analysis is None:
        raise GpuplanError(f"{result.path} cannot be verified until its problems are fixed")
    config = load_config(Path(config_path)) if config_path else config_for(result.path)
    options = lint_options(config, use_waivers=use_waivers)
    _refuse_repeated(runs)
    evidence = [read_evidence(path, kind) for path in runs]
    verified = verify_evidence(result, evidence, options, options.settings.verify_tolerance_pct)
    added = tuple(finding for run in verified for finding in run.findings)
    return replace(result, findings=sorted_findings(result.findings + added)), verified
