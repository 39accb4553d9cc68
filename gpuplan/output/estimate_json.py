"""``gpuplan estimate --format json``: the documented estimate object, with the spec's findings and the exit code."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuplan.visible import json_text

if TYPE_CHECKING:
    from gpuplan.output.summary import RunSummary


def render_estimate_json(summary: RunSummary) -> str:
    """The one spec of ``summary`` (linted with its analysis kept): ``analysis.to_dict`` (empty when the
    spec has problems that stop an estimate), its findings and the run's exit code."""
    from gpuplan.analysis import to_dict

    (result,) = summary.results
    document = to_dict(result.analysis) if result.analysis is not None else {}
    document["findings"] = [finding.to_dict() for finding in result.findings]
    document["exit_code"] = summary.exit_code
    return json_text(document) + "\n"
