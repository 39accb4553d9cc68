"""SARIF 2.1.0 for code scanning: rule metadata from the registry, a region per finding."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from gpuplan import __version__
from gpuplan.output.summary import RunSummary
from gpuplan.rules.registry import all_rules
from gpuplan.visible import json_text

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def _uri(path: str) -> str:
    """A URI reference for the file (SARIF 2.1.0, 3.10.2: artifactLocation.uri is one, RFC 3986): an absolute
    path as a file:// URI, a relative one percent-encoded ("specs dir/a.yaml" -> "specs%20dir/a.yaml"), so code
    scanning maps it to the file."""
    if path == "<stdin>":
        return "stdin"
    location = Path(path)
    # A name that is not UTF-8 holds its stray bytes as surrogates (surrogateescape): a URI percent-encodes the
    # bytes themselves ("caf\xe9.yaml" -> "caf%E9.yaml"), which as_uri cannot.
    encoded = quote(location.as_posix(), safe="/", errors="surrogateescape")
    return f"file://{encoded}" if location.is_absolute() else encoded


def render(summary: RunSummary) -> str:
    rules = all_rules()
    index = {rule.code: position for position, rule in enumerate(rules)}
    results: list[dict[str, Any]] = []
    for finding in summary.findings:
        result: dict[str, Any] = {
            "ruleId": finding.code,
            "ruleIndex": index[finding.code],
            "level": _LEVELS[finding.severity.value],
            "message": {"text": finding.message + (f" Hint: {finding.hint}" if finding.hint else "")},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _uri(finding.file)},
                        "region": {"startLine": finding.line, "startColumn": finding.col},
                    }
                }
            ],
        }
        if finding.pointer:
            result["properties"] = {"pointer": finding.pointer}
        if finding.waiver is not None:
            result["suppressions"] = [
                {"kind": "inSource", "status": "accepted", "justification": finding.waiver.reason}
            ]
        results.append(result)
    return _log(results)


def render_failure(message: str) -> str:
    """A SARIF log of a run that could not start (no spec found, a bad --config): no results, the tool's
    error as a notification of an unsuccessful invocation (SARIF 2.1.0, 3.20.14 and 3.20.21), so a CI step
    that uploads the file has a valid one to upload and code scanning shows why it is empty."""
    notification = {"level": "error", "message": {"text": message}}
    return _log([], [{"executionSuccessful": False, "toolExecutionNotifications": [notification]}])


def _log(results: list[dict[str, Any]], invocations: list[dict[str, Any]] | None = None) -> str:
    rules = all_rules()
    driver = {
        "name": "gpuplan",
        "version": __version__,
        "informationUri": "https://github.com/gpuplan/gpuplan",
        "rules": [
            {
                "id": rule.code,
                "name": rule.name,
                "shortDescription": {"text": rule.summary},
                "fullDescription": {"text": rule.summary},
                "help": {"text": rule.doc, "markdown": rule.doc},
                "defaultConfiguration": {"level": _LEVELS[rule.severity.value]},
                "properties": {"family": rule.family},
            }
            for rule in rules
        ],
    }
    run: dict[str, Any] = {"tool": {"driver": driver}, "results": results, "columnKind": "unicodeCodePoints"}
    if invocations is not None:
        run["invocations"] = invocations
    log = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
    return json_text(log) + "\n"
