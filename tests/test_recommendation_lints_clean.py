"""The layout `gpuplan plan` recommends, pasted into the spec, draws no warning or error of its own.

A recommendation that a second lint flags (a sharding kept on one GPU, a layout over a limit) would send a
user round in circles; each example is planned, every job's `paste` fragment merged into the spec as the
user would, and the result linted again. Information findings (a quote's age) may remain, and so may the
budget's error where the plan itself says its recommendation is over budget (no sound layout fits it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLES, run_cli

SPECS = sorted(EXAMPLES.glob("*.yaml"))


def _merge(target: dict[str, Any], fragment: dict[str, Any]) -> None:
    for key, value in fragment.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_the_pasted_recommendation_lints_without_warnings(path: Path):
    _, out, _ = run_cli("plan", "--format", "json", str(path))
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    recommended = [job["recommended"] for job in json.loads(out)["jobs"] if job["recommended"]]
    assert recommended, path.name  # every bundled example has a sound layout to recommend
    over_budget = {"GP501", "GP502"} if any(option["within_budget"] is False for option in recommended) else set()
    for option in recommended:
        _merge(spec, yaml.safe_load(option["yaml"]))
    pasted = path.parent / f".pasted-{path.name}"  # beside the example: its config.json paths resolve
    try:
        pasted.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
        _, out, _ = run_cli("lint", "--format", "json", str(pasted))
    finally:
        pasted.unlink()
    findings = json.loads(out)["findings"]
    flagged = [(f["code"], f["message"]) for f in findings if f["severity"] in ("error", "warning")]
    assert [(code, message) for code, message in flagged if code not in over_budget] == []
