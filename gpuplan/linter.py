"""The lint pipeline for one spec: load -> validate -> resolve -> estimate -> rules -> configuration.

Each stage runs only on what the stage before accepted; every problem is a Finding.
"""

from __future__ import annotations

import datetime
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuplan.findings import Finding, Severity, sorted_findings
from gpuplan.loader import LoadedDocument, load_bytes
from gpuplan.validate import validate

STDIN_NAME = "<stdin>"


@dataclass(frozen=True)
class LintOptions:
    """What shapes a lint run besides the spec itself."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    severities: dict[str, Severity] = field(default_factory=dict)
    use_waivers: bool = True
    settings: Any = None  # gpuplan.config.Settings; None means the documented defaults
    today: datetime.date | None = None  # for waiver expiry and price age; None means today
    config_source: str | None = None  # the configuration file these options came from, for the decision record


@dataclass(frozen=True)
class LintResult:
    path: str
    findings: tuple[Finding, ...]
    document: LoadedDocument | None = None
    analysis: Any = None  # gpuplan.analysis.Analysis when the spec resolved
    settings: Any = None  # gpuplan.config.Settings the estimate and rules used
    options: LintOptions | None = None  # what shaped the run (select/ignore/severities/waivers), for reports

    def failing(self, threshold: Severity) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.waived and f.severity.rank >= threshold.rank)


def read_input(path: str) -> bytes:
    """The bytes of ``path`` ('-' is standard input). Raises OSError."""
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as handle:
        return handle.read()


def lint_path(path: str, options: LintOptions | None = None) -> LintResult:
    """Lint one file; an unreadable file is a GP009 finding, not an exception."""
    shown = STDIN_NAME if path == "-" else path
    try:
        raw = read_input(path)
    except OSError as error:
        reason = error.strerror or str(error)
        finding = Finding.make("GP009", f"cannot read {shown}: {reason}", path=shown)
        return LintResult(shown, (finding,))
    return lint_bytes(shown, raw, options)


def lint_bytes(path: str, raw: bytes, options: LintOptions | None = None) -> LintResult:
    """Lint a spec given as bytes; ``path`` names it in findings and anchors relative paths."""
    options = options or LintOptions()
    return replace(_lint_bytes(path, raw, options), options=options)


def _lint_bytes(path: str, raw: bytes, options: LintOptions) -> LintResult:
    document = load_bytes(path, raw)
    findings = list(document.findings)
    if document.data is None:
        return LintResult(path, _configure(findings, options), document)
    schema_findings = validate(document)
    findings.extend(schema_findings)
    if schema_findings:
        return LintResult(path, _configure(findings, options), document)
    from gpuplan.analysis import analyse
    from gpuplan.config import default_settings
    from gpuplan.rules.context import RuleContext, efficiency_of
    from gpuplan.rules.registry import all_rules
    from gpuplan.spec import resolve
    from gpuplan.waivers import apply_waivers

    spec, resolve_findings = resolve(document, base_dir(path))
    findings.extend(resolve_findings)
    if spec is None:
        return LintResult(path, _configure(findings, options), document)
    settings = options.settings or default_settings()
    today = options.today or datetime.date.today()
    analysis = analyse(spec, efficiency_of(settings))
    context = RuleContext(spec, analysis, document, settings, today)
    rule_findings = [finding for rule in all_rules() if rule.check for finding in rule.check(context)]
    if options.use_waivers:
        rule_findings = apply_waivers(rule_findings, spec.waivers, document, today)
    findings.extend(rule_findings)
    return LintResult(path, _configure(findings, options), document, analysis, settings)


def _configure(findings: list[Finding], options: LintOptions) -> tuple[Finding, ...]:
    kept = []
    for finding in findings:
        if not _selected(finding, options):
            continue
        severity = options.severities.get(finding.code)
        kept.append(finding.with_severity(severity) if severity else finding)
    return sorted_findings(kept)


def _selected(finding: Finding, options: LintOptions) -> bool:
    return code_selected(finding.code, finding.name, options.select, options.ignore)


def code_selected(code: str, name: str, select: tuple[str, ...], ignore: tuple[str, ...]) -> bool:
    """Whether select/ignore patterns (codes, code prefixes, rule names) let a code's findings through."""

    def matches(patterns: tuple[str, ...]) -> bool:
        return any(code.startswith(p.upper()) or name == p for p in patterns)

    if select and not matches(select):
        return False
    return not matches(ignore)


def base_dir(path: str) -> Path:
    """Where relative paths inside a spec (model.config) are resolved from."""
    return Path.cwd() if path == STDIN_NAME else Path(path).resolve().parent
