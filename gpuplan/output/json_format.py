"""The stable JSON object of ``gpuplan lint --format json`` (documented in docs/lint.md)."""

from __future__ import annotations

from gpuplan import __version__
from gpuplan.findings import Severity
from gpuplan.output.summary import RunSummary
from gpuplan.visible import json_text

FORMAT_VERSION = 1


def render(summary: RunSummary) -> str:
    document = {
        "format_version": FORMAT_VERSION,
        "tool": {"name": "gpuplan", "version": __version__},
        "summary": {
            "files": len(summary.results),
            "errors": summary.count(Severity.ERROR),
            "warnings": summary.count(Severity.WARNING),
            "infos": summary.count(Severity.INFO),
            "waived": summary.waived,
            "fail_on": summary.fail_on.value,
            "exit_code": summary.exit_code,
        },
        "files": [result.path for result in summary.results],
        "findings": [finding.to_dict() for finding in summary.findings],
    }
    return json_text(document) + "\n"
