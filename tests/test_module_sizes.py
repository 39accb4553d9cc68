"""Modules stay small enough to read in one sitting: no module of the package over 800 lines and no command
module (``gpuplan/cli/``, which parses options, calls the library and prints) over 400. A module that grows past
its limit is split by responsibility (as ``estimate/weights.py`` left ``estimate/serving.py``)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gpuplan"


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_of_the_package_is_over_800_lines():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 100  # the package itself, not an empty glob
    assert {str(path.relative_to(PACKAGE)): _lines(path) for path in modules if _lines(path) > 800} == {}


def test_no_command_module_is_over_400_lines():
    commands = sorted((PACKAGE / "cli").glob("*.py"))
    assert {"lint.py", "report.py", "common.py"} <= {path.name for path in commands}
    assert {path.name: _lines(path) for path in commands if _lines(path) > 400} == {}
