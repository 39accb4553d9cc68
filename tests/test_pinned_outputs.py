"""Pinned outputs (tests/data) are only compared unless --update-pinned is given, and never rewritten
silently: a difference fails with the command that updates the pins, and an update prints its diff."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import UPDATE_PINNED, Pins, pytest_addoption

pytest_plugins = ("pytester",)
RERUN = f"python -m pytest tests/test_example.py {UPDATE_PINNED}"


def test_the_update_flag_is_off_by_default():
    declared: dict[tuple[str, ...], dict] = {}

    class Parser:
        def addoption(self, *names: str, **attributes) -> None:
            declared[names] = attributes

    pytest_addoption(Parser())
    assert declared[(UPDATE_PINNED,)]["action"] == "store_true"
    assert declared[(UPDATE_PINNED,)]["default"] is False


def test_a_differing_pin_fails_naming_the_flag_and_stays_as_it_was(tmp_path: Path):
    pin = tmp_path / "pin.txt"
    pin.write_text("same\nold\n", encoding="utf-8")
    pins = Pins(update=False, rerun=RERUN, changes=[])
    with pytest.raises(pytest.fail.Exception) as failed:
        pins.check(pin, "same\nnew\n")
    message = str(failed.value)
    assert message.startswith(f"the pinned {pin.as_posix()} differs from what the code produces now:\n--- ")
    assert "\n same\n-old\n+new\n" in message
    assert message.endswith(f"If the change is intended, run `{RERUN}` and review the printed diff.")
    assert pin.read_text(encoding="utf-8") == "same\nold\n" and pins.changes == []
    # A missing pin and a pin whose source is gone fail the same way.
    with pytest.raises(pytest.fail.Exception, match=f"(?s)the pinned .*new.txt is missing:.*{UPDATE_PINNED}"):
        pins.check(tmp_path / "new.txt", "text\n")
    with pytest.raises(pytest.fail.Exception, match=f"(?s)pins an output nothing produces now:.*{UPDATE_PINNED}"):
        pins.remove_stale(tmp_path, "*.txt", {"new.txt"})
    assert sorted(path.name for path in tmp_path.glob("*.txt")) == ["pin.txt"]  # nothing written or removed


def test_under_the_flag_pins_are_rewritten_and_each_change_kept_as_a_diff(tmp_path: Path):
    pin, stale = tmp_path / "pin.txt", tmp_path / "stale.txt"
    pin.write_text("old\n", encoding="utf-8")
    stale.write_text("gone\n", encoding="utf-8")
    pins = Pins(update=True, rerun=RERUN, changes=[])
    pins.check(pin, "new\n")
    pins.check(tmp_path / "added.txt", "added\n")
    pins.check(pin, "new\n")  # unchanged now: no diff
    pins.remove_stale(tmp_path, "*.txt", {"pin.txt", "added.txt"})
    assert pin.read_text(encoding="utf-8") == "new\n" and not stale.exists()
    assert (tmp_path / "added.txt").read_text(encoding="utf-8") == "added\n"
    assert [diff.splitlines()[:2] + diff.splitlines()[3:] for diff in pins.changes] == [
        [f"--- {pin.as_posix()} (pinned)", f"+++ {pin.as_posix()} (now)", "-old", "+new"],
        ["--- /dev/null", f"+++ {(tmp_path / 'added.txt').as_posix()} (now)", "+added"],
        [f"--- {stale.as_posix()} (pinned)", "+++ /dev/null", "-gone"],
    ]


def test_a_run_compares_by_default_and_the_flag_rewrites_and_prints_the_diff(pytester: pytest.Pytester):
    # The suite's own conftest, in a run of its own: one test pinning "new" against a pin holding "old".
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text(encoding="utf-8"))
    pytester.makepyfile(
        test_example="""
        from pathlib import Path

        def test_pinned(pins):
            pins.check(Path(__file__).parent / "pin.txt", "new\\n")
        """
    )
    pin = pytester.path / "pin.txt"
    pin.write_text("old\n", encoding="utf-8")
    compared = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    compared.assert_outcomes(failed=1)
    compared.stdout.fnmatch_lines(
        ["*If the change is intended, run `python -m pytest *test_example.py --update-pinned`*"]
    )
    assert pin.read_text(encoding="utf-8") == "old\n"
    updated = pytester.runpytest_inprocess("-p", "no:cacheprovider", UPDATE_PINNED)
    updated.assert_outcomes(passed=1)
    updated.stdout.fnmatch_lines(
        [
            "*--update-pinned: 1 pinned output(s) rewritten; review the diff*",
            "--- *pin.txt (pinned)",
            "+++ *pin.txt (now)",
            "@@ *",
            "-old",
            "+new",
        ]
    )
    assert pin.read_text(encoding="utf-8") == "new\n"
    again = pytester.runpytest_inprocess("-p", "no:cacheprovider", UPDATE_PINNED)
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*--update-pinned: no pinned output changed*"])
