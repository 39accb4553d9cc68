"""The package type-checks (mypy, settings in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.slow
def test_mypy_passes():
    completed = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT, capture_output=True,
                               text=True, timeout=600)
    assert completed.returncode == 0, completed.stdout + completed.stderr
