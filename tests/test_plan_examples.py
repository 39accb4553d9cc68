"""Every example's `gpuplan plan` output, pinned.

The pins catch unintended changes to layouts, costs and wording; the correctness of the numbers is the
business of the hand-derived tests in test_plan.py and the properties in test_properties_plan.py.
Catalog prices are part of the repository, and the date is pinned (SOURCE_DATE_EPOCH in conftest).
After a deliberate change, rewrite tests/data/plan/*.txt from the current planner and review the diff
the run prints:

    python -m pytest tests/test_plan_examples.py --update-pinned
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Pins

HERE = Path(__file__).resolve().parent
PINS = HERE / "data" / "plan"
EXAMPLES = HERE.parent / "examples"


def pin_name(example: Path) -> str:
    return "-".join(example.relative_to(EXAMPLES).with_suffix("").parts) + ".txt"


def plan_output(example: Path) -> tuple[int, str]:
    from click.testing import CliRunner

    from gpuplan.cli import cli

    result = CliRunner().invoke(cli, ["plan", "--top", "6", str(example.relative_to(EXAMPLES.parent))])
    return result.exit_code, f"exit {result.exit_code}\n{result.stdout}"


@pytest.mark.parametrize("example", sorted(EXAMPLES.rglob("*.yaml")), ids=pin_name)
def test_plan_output_is_pinned(example: Path, monkeypatch: pytest.MonkeyPatch, pins: Pins):
    monkeypatch.chdir(EXAMPLES.parent)
    _, output = plan_output(example)
    pins.check(PINS / pin_name(example), output)


def test_every_pin_has_its_example(pins: Pins):
    expected = {pin_name(e) for e in EXAMPLES.rglob("*.yaml")}
    pins.remove_stale(PINS, "*.txt", expected)
    assert sorted(p.name for p in PINS.glob("*.txt")) == sorted(expected), pins.advice()


@pytest.mark.parametrize(
    ("checkpointing", "expected"),
    [("none", "mb 2 x ga 4"), ("full", "ckpt, mb 2 x ga 4"), ("selective", "selective ckpt, mb 2 x ga 4")],
)
def test_the_settings_column_names_the_checkpointing_mode(checkpointing: str, expected: str):
    # The plan JSON carries the mode as finetune.activation_checkpointing spells it (none | full |
    # selective); the string "none" is truthy, and once printed "ckpt" beside a paste block that turns
    # checkpointing off. One replica: the sharding is not named.
    from gpuplan.output.plan_text import _settings

    settings = {
        "activation_checkpointing": checkpointing,
        "fused_loss": False,
        "sharding": "zero3",
        "micro_batch": 2,
        "gradient_accumulation": 4,
    }
    assert _settings({"settings": settings, "replicas": 1}) == expected


def test_a_recommendation_that_turns_checkpointing_off_does_not_say_ckpt(tmp_path):
    # examples/finetune-llama-8b-lora.yaml declares checkpointing; over 3B tokens instead of 300M (a run of
    # about 400 USD, so that the 46% saving is material) the recommendation, on one B200, runs without it
    # (its paste block: activation_checkpointing: none), and its row does not say "ckpt".
    from conftest import EXAMPLES, run_cli

    spec = tmp_path / "lora.yaml"
    spec.write_text((EXAMPLES / "finetune-llama-8b-lora.yaml").read_text().replace("300000000", "3000000000"))
    _, out, _ = run_cli("plan", str(spec))
    assert "activation_checkpointing: none" in out
    row = next(line for line in out.splitlines() if line.lstrip().startswith("recommended  1 x"))
    assert "b200-hgx" in row and "ckpt" not in row, row
