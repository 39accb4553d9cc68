"""A pyproject.toml's configuration errors point at the key or array item that holds them, in every TOML
spelling of the table (a line-by-line pattern of ``[tool.gpuplan]`` and ``key =`` put dotted keys, quoted keys,
spaced headers and inline tables at 1:1 or at the table's header)."""

from pathlib import Path

import pytest
from conftest import VALID_SERVE, run_cli

from gpuplan.loader import Position
from gpuplan.toml_positions import key_positions

ROOT = ("tool", "gpuplan")


def at(line: int, col: int) -> Position:
    return Position(line, col, line, col)


def test_headers_dotted_and_quoted_keys_and_arrays_are_found_where_written():
    text = (
        '[project]\nname = "x"\ndescription = """a [tool.gpuplan]\nselect = 1"""\n'  # lines 1-4: not the table
        "[ tool . 'gpuplan' ]  # spaced, quoted\n"  # line 5
        '"fail-on" = "error"\n'  # line 6
        "thresholds.headroom_pct = 5\n"  # line 7: 'headroom_pct' after 'thresholds.' (11 characters) at 12
        "select = [\n"  # line 8
        '  "GP2", # a comment\n'  # line 9: the first item at column 3
        "  'GP4',\n"  # line 10
        "]\n"
        'severity = {GP201 = "error", "low-headroom" = "info"}\n'  # line 12: GP201 at 13, the quoted key at 30
        "[tool.gpuplan.diff]\n"  # line 13
        "max-monthly-increase = 100\n"  # line 14
    )
    found = key_positions(text, ROOT)
    assert found[()] == at(5, 1)
    assert found[("fail-on",)] == at(6, 1)
    assert found[("thresholds",)] == at(7, 1)
    assert found[("thresholds", "headroom_pct")] == at(7, 12)
    assert (found[("select",)], found[("select", 0)], found[("select", 1)]) == (at(8, 1), at(9, 3), at(10, 3))
    assert found[("severity", "GP201")] == at(12, 13)
    assert found[("severity", "low-headroom")] == at(12, 30)
    assert (found[("diff",)], found[("diff", "max-monthly-increase")]) == (at(13, 1), at(14, 1))
    assert ("select",) in found and 1 not in {len(key) for key in found if key[:1] == ("description",)}


def test_the_table_named_by_dotted_keys_under_tool():
    # "[tool]" then "gpuplan.ignore": the table is first named at 'gpuplan' (line 3, column 1); the item at 19
    found = key_positions('[tool]\nblack.line-length = 100\ngpuplan.ignore = ["GPX99"]\n', ROOT)
    assert (found[()], found[("ignore",)], found[("ignore", 0)]) == (at(3, 1), at(3, 9), at(3, 19))


def test_escaped_keys_and_values_and_dates_do_not_stop_the_scan():
    # a basic string's escapes (an escaped quote), a literal string's backslash and an offset date-time with a
    # space come before the table: a scanner that misread any of them would lose every position after it
    text = (
        'a = "say \\"hi\\" \\u00e9"\nb = \'C:\\path\'\nc = 1979-05-27 07:32:00Z\n"k\\u0065y" = 1\n'
        '[tool.gpuplan]\n"fail-on" = "warning"\n'
    )
    assert key_positions(text, ROOT)[("fail-on",)] == at(6, 1)


@pytest.mark.parametrize(
    ("table", "where", "message"),
    [
        ('[tool]\nname = "x"\n\n[tool.gpuplan]\n"fail-on" = "bogus"\n', "5:1", "fail-on must be"),
        ('[ tool . "gpuplan" ]\nselect = ["GP2"]\nthresholds.headroom_pct = -5\n', "3:12", "thresholds.headroom_pct"),
        ('[tool]\ngpuplan.ignore = ["GPX99"]\n', "2:19", "ignore: unknown rule 'GPX99'"),
        ('[tool.gpuplan]\nselect = [\n  "GP2",\n  "GPZZ",\n]\n', "4:3", "select: unknown rule 'GPZZ'"),
        ("[tool.gpuplan.'severity']\nGP201 = 'loud'\n", "2:1", "severity.GP201 must be"),
    ],
)
def test_a_configuration_error_names_its_line_and_column(tmp_path: Path, table: str, where: str, message: str):
    # Each position counted by hand in the text above (1-based; a list item's value, a key's first character).
    (tmp_path / ".git").mkdir(exist_ok=True)
    (tmp_path / "spec.yaml").write_text(VALID_SERVE)
    (tmp_path / "pyproject.toml").write_text(table)
    code, out, _ = run_cli("lint", str(tmp_path / "spec.yaml"))
    assert code == 2
    assert f"pyproject.toml:{where}: {message}" in out, out
