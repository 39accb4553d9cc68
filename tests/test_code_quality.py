"""The code base type-checks (mypy) and is uniform (ruff check, ruff format); settings in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_mypy_passes():
    completed = _run("mypy", "--no-incremental")
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_ruff_check_passes():
    completed = _run("ruff", "check", "--no-cache", ".")
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_ruff_format_leaves_nothing_to_change():
    completed = _run("ruff", "format", "--no-cache", "--check", ".")
    assert completed.returncode == 0, completed.stdout + completed.stderr
