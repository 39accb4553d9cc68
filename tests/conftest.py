from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, settings

from gpuplan.cli import cli
from gpuplan.loader import EXPONENT_FIRST, EXPONENT_FLOAT

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# A longer search of the properties than CI affords: HYPOTHESIS_PROFILE=long python -m pytest tests/test_properties_*.py
settings.register_profile("long", max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Pinned outputs (tests/data) are compared with what the code produces now; only this flag rewrites them,
# and then the terminal summary shows the diff of each change for review: never rewritten silently.
UPDATE_PINNED = "--update-pinned"
_PIN_CHANGES = pytest.StashKey[list[str]]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # The suite runs on every core (pytest-xdist, addopts "-n auto"), but the diff of the pins rewritten is
    # gathered in this process's stash and printed by its terminal summary: a worker's would never reach
    # it. So --update-pinned runs the tests here, serially (xdist's own pytest_configure, trylast, then
    # starts no workers).
    if config.getoption(UPDATE_PINNED) and getattr(config.option, "dist", "no") != "no":
        config.option.dist, config.option.numprocesses, config.option.tx = "no", None, []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        UPDATE_PINNED,
        action="store_true",
        default=False,
        help="rewrite the pinned outputs under tests/data from the current code and print the diff of each change",
    )


class Pins:
    """Pinned outputs: compared, or under --update-pinned rewritten, each change kept as a unified diff.

    ``rerun`` is the command that updates the pins of the test at hand; a failure names it.
    """

    def __init__(self, update: bool, rerun: str, changes: list[str]) -> None:
        self.update, self.rerun, self.changes = update, rerun, changes

    def check(self, path: Path, actual: str) -> None:
        """Fail unless ``path`` holds ``actual``; under --update-pinned, write it there instead."""
        pinned = path.read_text(encoding="utf-8") if path.exists() else None
        if pinned == actual:
            return
        problem = "is missing" if pinned is None else "differs from what the code produces now"
        self._change(path, pinned, actual, problem)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")

    def remove_stale(self, folder: Path, pattern: str, expected: set[str]) -> None:
        """Fail on a pin in ``folder`` whose source is gone; under --update-pinned, delete it instead."""
        for path in sorted(folder.glob(pattern)):
            if path.name not in expected:
                self._change(path, path.read_text(encoding="utf-8"), None, "pins an output nothing produces now")
                path.unlink()

    def advice(self) -> str:
        return f"If the change is intended, run `{self.rerun}` and review the printed diff."

    def _change(self, path: Path, pinned: str | None, actual: str | None, problem: str) -> None:
        diff = pin_diff(path, pinned, actual)
        if not self.update:
            pytest.fail(f"the pinned {_shown(path)} {problem}:\n{diff}{self.advice()}", pytrace=False)
        self.changes.append(diff)


def _shown(path: Path) -> str:
    """A path as the suite's commands name it: from the repository root when it lies inside it."""
    return (path.relative_to(ROOT) if path.is_relative_to(ROOT) else path).as_posix()


def pin_diff(path: Path, pinned: str | None, actual: str | None) -> str:
    """The unified diff from the pinned text to the actual one (None: no such file)."""
    name = _shown(path)
    lines = difflib.unified_diff(
        (pinned or "").splitlines(),
        (actual or "").splitlines(),
        fromfile="/dev/null" if pinned is None else f"{name} (pinned)",
        tofile="/dev/null" if actual is None else f"{name} (now)",
        lineterm="",
    )
    diff = "\n".join(lines)
    return diff + "\n" if diff else f"{name}: the texts differ only in their line ends\n"


@pytest.fixture
def pins(request: pytest.FixtureRequest) -> Pins:
    """Pins for this test: compared, or rewritten under --update-pinned."""
    rerun = f"python -m pytest {_shown(request.node.path)} {UPDATE_PINNED}"
    return Pins(request.config.getoption(UPDATE_PINNED), rerun, request.config.stash.setdefault(_PIN_CHANGES, []))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if not config.getoption(UPDATE_PINNED):
        return
    changes = config.stash.get(_PIN_CHANGES, [])
    if not changes:
        terminalreporter.section(f"{UPDATE_PINNED}: no pinned output changed")
        return
    terminalreporter.section(f"{UPDATE_PINNED}: {len(changes)} pinned output(s) rewritten; review the diff")
    for diff in changes:
        terminalreporter.write(diff)


def run_cli(*args: str, input: str | bytes | None = None) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    result = CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


class _SpecDumper(yaml.SafeDumper):
    """PyYAML's dumper (YAML 1.1), which also quotes a string the loader reads as a number (YAML 1.2's 1e5)."""


_SpecDumper.add_implicit_resolver("tag:yaml.org,2002:float", EXPONENT_FLOAT, EXPONENT_FIRST)


def spec_yaml(data: object, **options: object) -> str:
    """``data`` as YAML that gpuplan's loader reads back as the same data (yaml.safe_dump writes a string
    such as '0E0' plain, which YAML 1.2 and the loader read as a number)."""
    return yaml.dump(data, Dumper=_SpecDumper, **options)  # type: ignore[call-overload]


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


# A clean serving spec: L40S at its RunPod Community Cloud rate (gpu_sources.yaml), which no sound layout of
# another catalog GPU undercuts (at its catalog median the L40 would: GP507).
VALID_SERVE = """\
version: 1
name: demo
model:
  id: llama-3.1-8b
serve:
  context: 8192
  concurrency: 8
  hardware: {gpu: l40s}
budget: {prices: {l40s: 0.79}, prices_date: 2026-11-20}
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
