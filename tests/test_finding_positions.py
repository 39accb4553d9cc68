"""Where every example's findings point, and what they advise, pinned.

An editor, a SARIF viewer and a GitHub annotation jump to a finding's line and column, found from its
JSON pointer; the hint is what a user pastes. Each pin was read against its example when generated:
the pointer names the field the finding is about (GP403 at /serve/slo/ttft_ms, GP311 at
/serve/hardware/gpu, GP601 at /finetune/checkpoints/storage_gb, ...). Messages are left to the rules'
own tests (their figures are derived there); the date is pinned (SOURCE_DATE_EPOCH in conftest).
After a deliberate change, rewrite tests/data/findings/*.json and read the diff the run prints against
the examples:

    python -m pytest tests/test_finding_positions.py --update-pinned
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Pins

HERE = Path(__file__).resolve().parent
PINS = HERE / "data" / "findings"
EXAMPLES = HERE.parent / "examples"


def pin_name(example: Path) -> str:
    return "-".join(example.relative_to(EXAMPLES).with_suffix("").parts) + ".json"


def positions(example: Path) -> list[dict[str, object]]:
    from click.testing import CliRunner

    from gpuplan.cli import cli

    result = CliRunner().invoke(cli, ["lint", "--format", "json", str(example.relative_to(EXAMPLES.parent))])
    assert result.exit_code in (0, 1), result.output
    keys = ("code", "severity", "line", "col", "pointer", "hint", "waived")
    return [{key: finding[key] for key in keys} for finding in json.loads(result.stdout)["findings"]]


def render(found: list[dict[str, object]]) -> str:
    return json.dumps(found, indent=1, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("example", sorted(EXAMPLES.rglob("*.yaml")), ids=pin_name)
def test_findings_point_where_they_did(example: Path, monkeypatch: pytest.MonkeyPatch, pins: Pins):
    monkeypatch.chdir(EXAMPLES.parent)
    pins.check(PINS / pin_name(example), render(positions(example)))


def test_every_pin_has_its_example(pins: Pins):
    expected = {pin_name(e) for e in EXAMPLES.rglob("*.yaml")}
    pins.remove_stale(PINS, "*.json", expected)
    assert sorted(p.name for p in PINS.glob("*.json")) == sorted(expected), pins.advice()


def test_pointers_name_existing_spec_fields():
    # Independent of the pins: every pointer resolves in its example's YAML (a misspelt path segment
    # would fall back to the parent's line).
    import yaml

    for example in sorted(EXAMPLES.rglob("*.yaml")):
        document = yaml.safe_load(example.read_text(encoding="utf-8"))
        for finding in json.loads((PINS / pin_name(example)).read_text(encoding="utf-8")):
            node = document
            for part in str(finding["pointer"]).split("/")[1:]:
                if isinstance(node, list):
                    node = node[int(part)]
                else:
                    assert isinstance(node, dict) and part in node, (example.name, finding)
                    node = node[part]
