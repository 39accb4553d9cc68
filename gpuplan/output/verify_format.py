"""``gpuplan verify`` output: a readable table (text), a stable object (json), a PR comment (markdown).

The JSON object (``format_version`` 1, documented in docs/verify.md) gives per run and per term the
estimate, the measured value, their difference and ratio, so verified pairs can be collected as
calibration records.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gpuplan import __version__
from gpuplan.evidence.model import BYTES, TOKENS
from gpuplan.findings import Finding, Severity
from gpuplan.output.markdown import escape_markdown
from gpuplan.output.summary import plural
from gpuplan.output.text import finding_lines
from gpuplan.units import GIB
from gpuplan.verify import VerifySummary
from gpuplan.verify.compare import RunVerification, TermResult
from gpuplan.visible import json_text, visible

FORMAT_VERSION = 1
BASIS = {
    "spec": "the spec's estimate",
    "run settings": "the estimate recomputed at the run's settings (the spec differs: GP802)",
    "": "not compared: the run's settings cannot be stated in the spec",
}


def summary_line(summary: VerifySummary) -> str:
    parts = [
        plural(summary.count(Severity.ERROR), "error"),
        plural(summary.count(Severity.WARNING), "warning"),
        plural(summary.count(Severity.INFO), "info"),
    ]
    runs = len(summary.runs)
    return f"{'failed' if summary.failed else 'passed'}: {', '.join(parts)} in {runs} run{'' if runs == 1 else 's'}"


def value(amount: float | None, unit: str, signed: bool = False) -> str:
    """A term's value for people: GiB for memory, whole tokens, sequences to two decimals."""
    if amount is None:
        return "-"
    sign = "+" if signed else ""
    if unit == BYTES:
        return f"{amount / GIB:{sign},.2f} GiB"
    if unit == TOKENS:
        return f"{amount:{sign},.0f}"
    return f"{amount:{sign},.2f}"


def _ratio(term: TermResult) -> str:
    return "-" if term.ratio is None else f"{term.ratio:.3f}"


def _title(run: RunVerification) -> str:
    evidence = run.evidence
    what = [evidence.engine + (f" {evidence.version}" if evidence.version else "")]
    if evidence.model:
        what.append(evidence.model)
    ranks = evidence.ranks
    what.append(f"{run.job}, {len(ranks)} rank{'' if len(ranks) == 1 else 's'}" if ranks else run.job)
    return f"{evidence.path}: {', '.join(what)}"


# -- text ------------------------------------------------------------------------------------


def render_text(summary: VerifySummary) -> str:
    lines = []
    for run in summary.runs:
        lines.append(f"{summary.spec_path} against {_title(run)}")
        # columns as wide as their longest entry and a space (TensorRT-LLM's free_gpu_memory_fraction is 24)
        name_width = max((len(check.name) for check in run.settings), default=0) + 2
        value_width = max(24, max((len(check.run_value) for check in run.settings), default=0) + 2)
        for check in run.settings:
            mark = "" if check.matches else "   <- differs"
            lines.append(
                f"  {check.name:<{max(24, name_width)}}{check.run_value:<{value_width}}{check.field} "
                f"{check.spec_value}{mark}"
            )
        lines.append(f"  compared with {BASIS[run.basis]}; tolerance {summary.tolerance_pct:g}%")
        lines.append(f"  {'term':<20}{'estimate':>14}{'measured':>14}{'delta':>14}{'ratio':>8}  status")
        for term in run.terms:
            lines.append(
                f"  {term.name:<20}{value(term.estimate, term.unit):>14}{value(term.measured, term.unit):>14}"
                f"{value(term.delta, term.unit, signed=True):>14}{_ratio(term):>8}  {term.status}"
            )
            if len(term.per_rank) > 1:
                ranks = ", ".join(f"{rank} {value(amount, term.unit)}" for rank, amount in term.per_rank)
                lines.append(f"  {'':<20}per rank: {ranks}")
        for missing in run.evidence.missing:
            lines.append(f"  not in the evidence: {missing}")
        lines += [f"  - {sentence}" for sentence in run.meaning]
        lines.append("")
    lines += [line for finding in summary.findings for line in finding_lines(finding)]
    lines.append(summary_line(summary))
    # Paths, the spec's values and the log's own words (model names, settings) are untrusted text.
    return "\n".join(visible(line) for line in lines) + "\n"


# -- json ------------------------------------------------------------------------------------


def term_dict(term: TermResult) -> dict[str, Any]:
    return {
        "term": term.name,
        "unit": term.unit,
        "direction": term.direction,
        "estimate": term.estimate,
        "measured": term.measured,
        "delta": term.delta,
        "ratio": None if term.ratio is None else round(term.ratio, 6),
        "status": term.status,
        "resolution": term.resolution,
        "per_rank": dict(term.per_rank),
        "estimate_terms": list(term.estimate_terms),
        "measured_terms": list(term.measured_terms),
    }


def run_dict(run: RunVerification) -> dict[str, Any]:
    evidence = run.evidence
    return {
        "evidence": {
            "path": evidence.path,
            "kind": evidence.kind,
            "engine": evidence.engine,
            "version": evidence.version,
            "model": evidence.model,
            "ranks": list(evidence.ranks),
            "lines": evidence.lines,
            "failure": None if evidence.failure is None else dataclasses.asdict(evidence.failure),
            "missing": list(evidence.missing),
            "notes": list(evidence.notes),
        },
        "job": run.job,
        "basis": run.basis or None,
        "settings": [
            {
                "setting": check.name,
                "run": check.run_value,
                "run_line": check.run_line,
                "spec_field": check.field,
                "spec": check.spec_value,
                "matches": check.matches,
            }
            for check in run.settings
        ],
        "terms": [term_dict(term) for term in run.terms],
        "meaning": list(run.meaning),
        "findings": [finding.to_dict() for finding in run.findings],
    }


def render_json(summary: VerifySummary) -> str:
    document = {
        "format_version": FORMAT_VERSION,
        "tool": {"name": "gpuplan", "version": __version__},
        "spec": summary.spec_path,
        "tolerance_pct": summary.tolerance_pct,
        "summary": {
            "runs": len(summary.runs),
            "errors": summary.count(Severity.ERROR),
            "warnings": summary.count(Severity.WARNING),
            "infos": summary.count(Severity.INFO),
            "fail_on": summary.fail_on.value,
            "exit_code": summary.exit_code,
        },
        "runs": [run_dict(run) for run in summary.runs],
    }
    return json_text(document) + "\n"


# -- markdown --------------------------------------------------------------------------------


def _finding_line(finding: Finding) -> str:
    hint = f" — hint: {escape_markdown(finding.hint)}" if finding.hint else ""
    return (
        f"- **{finding.code}** [{finding.severity.value}] line {finding.line}: {escape_markdown(finding.message)}{hint}"
    )


def render_markdown(summary: VerifySummary) -> str:
    verdict = "failed" if summary.failed else "passed"
    lines = [f"## gpuplan verify: {escape_markdown(summary.spec_path)} — {verdict}", ""]
    for run in summary.runs:
        lines += [f"### {escape_markdown(_title(run))}", ""]
        lines.append(
            f"Compared with {escape_markdown(BASIS[run.basis])}; tolerance {summary.tolerance_pct:g}% per term."
        )
        lines.append("")
        differing = [check for check in run.settings if not check.matches]
        if differing:
            lines += ["| setting | run | spec |", "|---|---|---|"]
            for check in differing:
                lines.append(
                    f"| {escape_markdown(check.name)} | {escape_markdown(check.run_value)} | "
                    f"{escape_markdown(check.field)} {escape_markdown(check.spec_value)} |"
                )
            lines.append("")
        lines += ["| term | estimate | measured | delta | ratio | status |", "|---|---:|---:|---:|---:|---|"]
        for term in run.terms:
            lines.append(
                f"| {term.name} | {value(term.estimate, term.unit)} | {value(term.measured, term.unit)} | "
                f"{value(term.delta, term.unit, signed=True)} | {_ratio(term)} | {term.status} |"
            )
        lines.append("")
        lines += [f"- not in the evidence: {escape_markdown(missing)}" for missing in run.evidence.missing]
        lines += [f"- {escape_markdown(sentence)}" for sentence in run.meaning]
        lines += [_finding_line(finding) for finding in run.findings]
        lines.append("")
    lines.append(summary_line(summary))
    return "\n".join(lines) + "\n"


RENDERERS = {"text": render_text, "json": render_json, "markdown": render_markdown}
