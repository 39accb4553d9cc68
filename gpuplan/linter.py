"""The lint pipeline for one spec: load -> validate -> resolve -> estimate -> rules -> configuration.

Each stage runs only on what the stage before accepted; every problem is a Finding. An unexpected
exception in resolving, estimating or one rule is a GP010 finding for this spec (with its trace kept
for ``--traceback``), and the other rules and specs still run.
"""

from __future__ import annotations

import datetime
import functools
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import field, replace
from pathlib import Path
from typing import Any

from gpuplan import clock
from gpuplan.codes import CODES
from gpuplan.findings import Finding, Severity, sorted_findings
from gpuplan.loader import LoadedDocument, load_bytes
from gpuplan.reading import SPEC, ReadRefused, check_size, read_bounded, read_stdin
from gpuplan.records import record
from gpuplan.validate import validate

STDIN_NAME = "<stdin>"
MAX_FINDINGS_PER_FILE = 100  # then one GP011 that counts the rest


@record
class LintOptions:
    """What shapes a lint run besides the spec itself."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    severities: dict[str, Severity] = field(default_factory=dict)
    use_waivers: bool = True
    settings: Any = None  # gpuplan.config.Settings; None means the documented defaults
    today: datetime.date | None = None  # for waiver expiry and price age; None means today in UTC
    config_source: str | None = None  # the configuration file these options came from, for the decision record
    catalog_hints: bool = False  # fit hints also search every allowed GPU for the cheapest layout
    # The level this file fails a run at: --fail-on, else its own configuration's fail-on (None: the run's)
    fail_on: Severity | None = None


@record
class LintResult:
    path: str
    findings: tuple[Finding, ...]
    document: LoadedDocument | None = None
    analysis: Any = None  # gpuplan.analysis.Analysis when the spec resolved
    settings: Any = None  # gpuplan.config.Settings the estimate and rules used
    tracebacks: tuple[str, ...] = ()  # the trace of each GP010, for --traceback
    options: LintOptions | None = None  # what shaped the run (select/ignore/severities/waivers), for reports
    fail_on: Severity | None = None  # the level this file fails the run at (LintOptions.fail_on; None: the run's)

    def failing(self, threshold: Severity) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.waived and f.severity.rank >= threshold.rank)

    def findings_only(self) -> LintResult:
        """This result without the document and the analysis: what a many-file run keeps per file."""
        return LintResult(self.path, self.findings, tracebacks=self.tracebacks, fail_on=self.fail_on)


def read_input(path: str) -> bytes:
    """The bytes of ``path`` ('-' is standard input), bounded. Raises ReadRefused."""
    return read_stdin() if path == "-" else read_bounded(path)


def lint_path(path: str, options: LintOptions | None = None) -> LintResult:
    """Lint one file; an unreadable file is a GP009 (too large: GP003) finding, not an exception."""
    shown = STDIN_NAME if path == "-" else path
    try:
        raw = read_input(path)
    except ReadRefused as refused:
        return _refused(shown, refused, options or LintOptions())
    return lint_bytes(shown, raw, options)


def _refused(path: str, refused: ReadRefused, options: LintOptions) -> LintResult:
    code = "GP003" if refused.too_large else "GP009"
    finding = Finding.make(code, f"cannot read {path}: {refused.reason}", path=path)
    return LintResult(path, configure([finding], options), options=options, fail_on=options.fail_on)


def lint_bytes(path: str, raw: bytes, options: LintOptions | None = None) -> LintResult:
    """Lint a spec given as bytes; ``path`` names it in findings and anchors relative paths.

    Bytes over the spec size limit (a git object, a bounded head read) are a GP003 finding, as a file is.
    """
    options = options or LintOptions()
    try:
        check_size(len(raw), SPEC, known=False)
    except ReadRefused as refused:
        return _refused(path, refused, options)
    return replace(_lint_bytes(path, raw, options), options=options, fail_on=options.fail_on)


def _lint_bytes(path: str, raw: bytes, options: LintOptions) -> LintResult:
    document = load_bytes(path, raw)
    findings = list(document.findings)
    if document.data is None:
        return LintResult(path, configure(findings, options), document)
    schema_findings = validate(document)
    findings.extend(schema_findings)
    if schema_findings:
        return LintResult(path, configure(findings, options), document)
    return _Checked(document, options, findings).run()


class _Checked:
    """Resolve, estimate and run the rules on a schema-valid document, isolating each step's failures."""

    def __init__(self, document: LoadedDocument, options: LintOptions, findings: list[Finding]) -> None:
        self.document, self.options, self.findings = document, options, findings
        self.tracebacks: list[str] = []

    def run(self) -> LintResult:
        from gpuplan.config import default_settings
        from gpuplan.spec import resolve

        path = self.document.path
        resolved = self._guarded("resolving the spec", lambda: resolve(self.document, lambda: base_dir(path)))
        if resolved is None:
            return self._result()
        spec, resolve_findings = resolved
        self.findings.extend(resolve_findings)
        if spec is None:
            return self._result()
        settings = self.options.settings or default_settings()
        today = self.options.today or clock.today()
        analysis = self._guarded("estimating", lambda: self._analyse(spec, settings))
        if analysis is None:
            return self._result(settings=settings)
        rule_findings = self._rule_findings(spec, analysis, settings, today)
        if self.options.use_waivers:
            from gpuplan.waivers import apply_waivers

            rule_findings = apply_waivers(rule_findings, spec.waivers, self.document, today, self._unselected())
        self.findings.extend(rule_findings)
        return self._result(analysis, settings)

    def _analyse(self, spec: Any, settings: Any) -> Any:
        from gpuplan.analysis import analyse
        from gpuplan.output.estimate_json import estimate_document
        from gpuplan.plan.configured import efficiency_of

        analysis = analyse(spec, efficiency_of(settings))
        figures = estimate_document(analysis, figures_only=True)
        bad = None if all_safe(figures) else next(unsafe_figures(figures), None)
        if bad is not None:
            raise FigureOutOfRange(f"the estimate's {bad[0]} is {bad[1]!r}, not a finite non-negative number")
        return analysis

    def _rule_findings(self, spec: Any, analysis: Any, settings: Any, today: datetime.date) -> list[Finding]:
        from gpuplan.rules.context import RuleContext
        from gpuplan.rules.registry import all_rules

        context = RuleContext(spec, analysis, self.document, settings, today, self.options.catalog_hints)
        unselected = self._unselected()
        found: list[Finding] = []
        for rule in all_rules():
            check = rule.check
            if check is not None and rule.code not in unselected:
                produced = self._guarded(f"rule {rule.code}", lambda check=check: list(check(context)))  # type: ignore[misc]
                found.extend(produced or ())
        return found

    def _unselected(self) -> frozenset[str]:
        return unselected_codes(self.options.select, self.options.ignore)

    def _guarded(self, step: str, work: Callable[[], Any]) -> Any:
        """``work()``, or None with a GP010 finding (and the trace kept) when it raises."""
        try:
            return work()
        except Exception as error:  # one failing step must not abort the run: it becomes a finding
            import traceback  # only on the error path

            self.tracebacks.append(f"{self.document.path}: {step}\n{traceback.format_exc()}")
            message = f"internal error while {step}: {type(error).__name__}: {error}"
            self.findings.append(
                Finding.make(
                    "GP010",
                    message[:500],
                    path=self.document.path,
                    hint="a bug in gpuplan; --traceback shows where, please report it",
                )
            )
            return None

    def _result(self, analysis: Any = None, settings: Any = None) -> LintResult:
        findings = configure(self.findings, self.options)
        return LintResult(self.document.path, findings, self.document, analysis, settings, tuple(self.tracebacks))


class FigureOutOfRange(ArithmeticError):
    """The estimate produced NaN, an infinity or a negative figure: never shown, reported as GP010."""


# Figures that carry a sign: an error band's signed median is negative when gpuplan is below the measurements;
# the KV pool is negative when the weights and reserves exceed the engine's budget (vLLM logs it so:
# "Available KV cache memory: -2.14 GiB", and refuses to start); an offered benchmark figure is slower than
# gpuplan's by a negative share (serve.evidence's offer_faster_by).
SIGNED_FIGURES = frozenset({"signed_median", "kv_pool_bytes", "offer_faster_by"})


def unsafe_figures(value: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) of every number in ``value`` (nested dicts and lists) that is not finite and >= 0 (a
    ``SIGNED_FIGURES`` one: not finite)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        signed = where.rsplit(".", 1)[-1] in SIGNED_FIGURES
        if not (math.isfinite(value) and (value >= 0 or signed)):
            yield where or "value", value
        return
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield from unsafe_figures(item, f"{where}.{key}" if where else str(key))


def all_safe(value: Any) -> bool:
    """Whether ``unsafe_figures(value)`` yields nothing, without naming every number's path (lint checks
    every estimate; the path is spelt out only when one is unsafe)."""
    kind = type(value)
    if kind is dict:
        items = value.values()
    elif kind is list:
        items = value
    else:
        items = (value,)
    for item in items:  # the numbers of a container are judged here, without a call each
        kind = type(item)
        if kind is float or kind is int:
            if not (math.isfinite(item) and item >= 0):
                return next(unsafe_figures(value), None) is None  # a signed figure may be negative
        elif kind is dict or kind is list:
            if not all_safe(item):
                return False
        elif not (kind is str or kind is bool or item is None) and next(unsafe_figures(item), None) is not None:
            return False  # anything else, as unsafe_figures judges it
    return True


def configure(findings: list[Finding], options: LintOptions) -> tuple[Finding, ...]:
    """Apply select/ignore and severity overrides, in the stable order."""
    kept = []
    for finding in findings:
        if not _selected(finding, options):
            continue
        severity = options.severities.get(finding.code)
        kept.append(finding.with_severity(severity) if severity else finding)
    return capped(sorted_findings(kept))


def capped(findings: tuple[Finding, ...], limit: int = MAX_FINDINGS_PER_FILE) -> tuple[Finding, ...]:
    """The first ``limit`` findings, then one GP011 with the count and the highest severity of the rest."""
    if len(findings) <= limit:
        return findings
    shown, rest = findings[:limit], findings[limit:]
    active = [f for f in rest if not f.waived] or list(rest)
    worst = max((f.severity for f in active), key=lambda severity: severity.rank)
    last = shown[-1]
    more = Finding.make(
        "GP011",
        f"{len(rest):,} more finding(s) not listed; the first {limit} are above",
        path=last.file,
        line=last.line,
        col=last.col,
        hint="fix the problems listed first, or check that this is the right file",
    )
    return (*shown, replace(more, severity=worst))


def _selected(finding: Finding, options: LintOptions) -> bool:
    return code_selected(finding.code, finding.name, options.select, options.ignore)


# The families whose findings say the file was not checked as a spec (it did not load, validate or resolve):
# select/ignore never hide them, as ruff always reports a file it could not parse, so a run that selects
# `[GP2, GP3]` does not pass a broken or missing spec whose rules never ran.
ALWAYS_REPORTED_FAMILIES = frozenset({"input", "schema"})


def code_selected(code: str, name: str, select: tuple[str, ...], ignore: tuple[str, ...]) -> bool:
    """Whether select/ignore patterns (codes, code prefixes, rule names in any case) let a code's findings through."""
    if code in CODES and CODES[code].family in ALWAYS_REPORTED_FAMILIES:
        return True

    def matches(patterns: tuple[str, ...]) -> bool:
        # as the configuration checks a pattern (gpuplan.config): codes in any case, names in any case, trimmed
        return any(code.startswith(p.strip().upper()) or name == p.strip().lower() for p in patterns)

    if select and not matches(select):
        return False
    return not matches(ignore)


@functools.cache
def unselected_codes(select: tuple[str, ...], ignore: tuple[str, ...]) -> frozenset[str]:
    """The codes select/ignore leave out. Their rules are not run, as ruff runs only enabled rules: each
    check yields only its own code (a test holds it), so nothing shown changes, and a team that ignores
    a planner-backed rule does not pay for its search."""
    from gpuplan.codes import CODES

    return frozenset(code for code, entry in CODES.items() if not code_selected(code, entry.name, select, ignore))


def base_dir(path: str) -> Path:
    """Where relative paths inside a spec (model.config) are resolved from: the real spec's folder."""
    if path == STDIN_NAME:
        return Path.cwd()
    try:
        return Path(path).resolve().parent
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
        return Path(os.path.abspath(path)).parent
