from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, settings

from gpuplan.cli import cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# A longer search of the properties than CI affords: HYPOTHESIS_PROFILE=long python -m pytest tests/test_properties_*.py
settings.register_profile("long", max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def run_cli(*args: str, input: str | bytes | None = None) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    result = CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def make_spec(text: str, base_dir: Path | None = None):
    """The resolved Spec of a spec's text (relative paths from ``base_dir``, default the working
    directory); fails the test with the findings when it does not resolve."""
    from gpuplan.loader import load_bytes
    from gpuplan.spec import resolve

    spec, findings = resolve(load_bytes("spec.yaml", text.encode()), base_dir or Path.cwd())
    assert spec is not None, findings
    return spec


def gpuplan_executable() -> str:
    found = shutil.which("gpuplan", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    assert found, "the gpuplan console script is not installed"
    return found


def run_process(*args: str, cwd: Path | None = None, input: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [gpuplan_executable(), *args],
        cwd=cwd,
        input=input.decode() if input else None,
        capture_output=True,
        text=True,
        timeout=120,
    )


VALID_SERVE = """\
version: 1
name: demo
model:
  id: llama-3.1-8b
serve:
  context: 8192
  concurrency: 8
  hardware: {gpu: l40s}
budget: {prices: {l40s: 1.86}, prices_date: 2026-11-20}
"""


TEST_EPOCH = "1796169600"  # 2026-12-02T00:00:00Z: price ages and waiver expiry are judged on this day


@pytest.fixture(autouse=True)
def _isolated_from_stray_configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Configuration is searched upward until a repository root; make each test folder one. Pin the date."""
    (tmp_path / ".git").mkdir(exist_ok=True)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", TEST_EPOCH)


@pytest.fixture
def write_spec(tmp_path: Path):
    def write(text: str, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write
