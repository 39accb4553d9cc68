"""Where every example's findings point, and what they advise, pinned (run this file to regenerate).

An editor, a SARIF viewer and a GitHub annotation jump to a finding's line and column, found from its
JSON pointer; the hint is what a user pastes. Each pin was read against its example when generated:
the pointer names the field the finding is about (GP403 at /serve/slo/ttft_ms, GP311 at
/serve/hardware/gpu, GP601 at /finetune/checkpoints/storage_gb, ...). Messages are left to the rules'
own tests (their figures are derived there); the date is pinned (SOURCE_DATE_EPOCH in conftest).

    python tests/test_finding_positions.py    # rewrite tests/data/findings/*.json
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

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
def test_findings_point_where_they_did(example: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(EXAMPLES.parent)
    assert render(positions(example)) == (PINS / pin_name(example)).read_text(encoding="utf-8"), (
        f"regenerate with: python {__file__}, and read the changes against the example"
    )


def test_every_pin_has_its_example():
    assert sorted(p.name for p in PINS.glob("*.json")) == sorted(pin_name(e) for e in EXAMPLES.rglob("*.yaml"))


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


if __name__ == "__main__":
    os.environ["SOURCE_DATE_EPOCH"] = "1796169600"
    os.chdir(EXAMPLES.parent)
    PINS.mkdir(parents=True, exist_ok=True)
    for stale in PINS.glob("*.json"):
        stale.unlink()
    for example in sorted(EXAMPLES.rglob("*.yaml")):
        (PINS / pin_name(example)).write_text(render(positions(example)), encoding="utf-8")
