"""Fuzzing: mutated specs and config.json files never crash gpuplan or corrupt what it prints.

For every input (tests/mutations.py): the exit code is 0, 1 or 2; no output mentions an internal error
or a traceback; JSON output parses (without NaN or Infinity) and holds no negative or non-finite
number; text and GitHub output hold no raw control, separator or bidi character and no "inf", "nan"
or negative size. The long run (10,000 inputs) is benchmarks/fuzz.py.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from mutations import fuzzed_inputs, problems, write_input

COMMANDS = (
    ("lint", "text"),
    ("lint", "json"),
    ("lint", "github"),
    ("estimate", "text"),
    ("estimate", "json"),
)


def run_all(spec: bytes, config: bytes | None) -> dict[str, tuple[int, str, str]]:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / ".git").mkdir()  # no configuration above the input is picked up
        path = write_input(folder, spec, config)
        return {f"{command} {output}": run_cli(command, "--format", output, str(path)) for command, output in COMMANDS}


# derandomize: the same examples on every run, so a failure (or the expected failure below) is reproducible.
FUZZ = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(fuzzed_inputs())
def test_mutated_specs_never_crash_or_print_raw_controls(case):
    name, spec, _ = case
    found = problems(run_all(spec, None))
    assert not found, (name, spec.decode("utf-8", "replace"), found)


# The run survives a config.json with list, NaN, zero or negative dimensions (each is a GP010 finding for
# its spec, exit 2, no traceback), but validating a config.json's contents -- a GP021 finding naming the
# key -- is issue 9's (architecture.py). Strict: once that lands this passes, and the marker must go.
@pytest.mark.xfail(strict=True, reason="config.json content validation (GP021 per key) lands with issue 9")
@FUZZ
@given(fuzzed_inputs(with_config=True))
def test_mutated_config_json_never_crash_or_print_raw_controls(case):
    name, spec, config = case
    found = problems(run_all(spec, config))
    assert not found, (name, spec.decode("utf-8", "replace"), config, found)


@FUZZ
@given(fuzzed_inputs(with_config=True))
def test_mutated_config_json_outputs_stay_well_formed(case):
    """Until issue 9 validates config.json contents: whatever an odd config.json does inside the estimate,
    the exit code, the JSON and the text output keep their contract (GP010 is the only tolerated problem)."""
    name, spec, config = case
    found = [problem for problem in problems(run_all(spec, config)) if ": internal error: " not in problem]
    assert not found, (name, spec.decode("utf-8", "replace"), config, found)
