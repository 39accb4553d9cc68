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


def test_the_replica_count_is_defined_once():
    """count // (tensor_parallel x pipeline_parallel) is gpuplan/layout.py's; elsewhere it is called, so
    that a change (say, expert parallelism joining the replica) cannot leave a copy behind."""
    import re

    division = re.compile(r"//\s*\(\s*\w*(tensor_parallel|tp)\w*\s*\*\s*\w*(pipeline_parallel|pp)\w*\s*\)")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "gpuplan").rglob("*.py"))
        if path.name != "layout.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if division.search(line)
    ]
    assert not found, found
