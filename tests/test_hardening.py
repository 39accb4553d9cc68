"""Hostile and careless input: bounded typed reads, positions as editors count them, isolation of
failures, limits, neutralised output, safe report writes, one clock, consistent estimate."""

from __future__ import annotations

import datetime
import json
import math
import os
import stat
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, VALID_SERVE, run_cli

from gpuplan import clock
from gpuplan.linter import LintOptions, capped, lint_bytes, lint_path, unsafe_figures
from gpuplan.loader import load_bytes
from gpuplan.visible import visible

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def codes(result) -> list[str]:
    return [finding.code for finding in result.findings]


# -- bounded, typed reads -------------------------------------------------------------------------


def test_a_fifo_is_refused_before_it_is_opened(tmp_path: Path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    start = time.monotonic()
    code, out, err = run_cli("lint", str(fifo))
    assert time.monotonic() - start < 5  # opening a FIFO for reading would block forever
    assert (code, err) == (2, "")
    assert (
        out.splitlines()[0]
        == f"{fifo}:1:1: GP009 [error] cannot read {fifo}: it is a named pipe (FIFO), not a regular file"
    )


def test_a_fifo_in_a_linted_folder_is_skipped_and_the_specs_are_linted(tmp_path: Path):
    (tmp_path / "good.yaml").write_text(VALID_SERVE)
    os.mkfifo(tmp_path / "pipe.yaml")
    code, out, _ = run_cli("lint", str(tmp_path))
    assert (code, out) == (0, "passed: 0 errors, 0 warnings, 0 info in 1 file\n")


def test_devices_symlink_loops_and_oversized_files_are_findings(tmp_path: Path):
    result = lint_path("/dev/zero")
    assert [(f.code, f.message) for f in result.findings] == [
        ("GP009", "cannot read /dev/zero: it is a character device, not a regular file")
    ]
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    (finding,) = lint_path(str(tmp_path / "a.yaml")).findings
    assert finding.message.endswith("a.yaml: too many levels of symbolic links (a symlink loop)")
    big = tmp_path / "big.yaml"
    with open(big, "wb") as handle:  # sparse: 100 MiB that are never read
        handle.truncate(100 * 2**20)
    (finding,) = lint_path(str(big)).findings
    assert (finding.code, finding.message) == (
        "GP003",
        f"cannot read {big}: it is 104,857,600 bytes; specs are limited to 1,048,576 bytes",
    )


def test_standard_input_is_read_up_to_its_limit():
    code, out, _ = run_cli("lint", "-", input=b"#" * (2**20 + 10))
    assert code == 1
    assert out.splitlines()[0] == (
        "<stdin>:1:1: GP003 [error] cannot read <stdin>: it is more than 1,048,576 bytes; "
        "specs are limited to 1,048,576 bytes"
    )


@pytest.mark.skipif(AS_ROOT, reason="root reads files whatever their mode")
def test_a_permission_error_is_a_finding(tmp_path: Path):
    path = tmp_path / "secret.yaml"
    path.write_text(VALID_SERVE)
    path.chmod(0)
    (finding,) = lint_path(str(path)).findings
    assert (finding.code, finding.message) == ("GP009", f"cannot read {path}: permission denied")


def test_model_config_is_read_bounded_and_typed(tmp_path: Path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    spec = VALID_SERVE.replace("id: llama-3.1-8b", "config: config.json")
    path = tmp_path / "spec.yaml"
    path.write_text(spec)
    (finding,) = lint_path(str(path)).findings
    assert (finding.code, finding.line, finding.message) == (
        "GP021",
        4,
        "config.json: cannot read it: it is a named pipe (FIFO), not a regular file",
    )
    fifo.unlink()
    with open(fifo, "wb") as handle:
        handle.truncate(2 * 2**20)
    (finding,) = lint_path(str(path)).findings
    assert finding.message == (
        "config.json: cannot read it: it is 2,097,152 bytes; config.json files are limited to 1,048,576 bytes"
    )


# -- positions and odd YAML -----------------------------------------------------------------------


def test_lines_are_counted_as_editors_count_them():
    # U+2028, U+0085 and U+2029 inside a quoted value are characters, not line breaks: the unknown key
    # below is on the third line in any editor (PyYAML alone would say the sixth).
    text = 'version: 1\nname: "a\u2028b\x85c\u2029d"\nzz_unknown: 1\n'
    loaded = load_bytes("x.yaml", text.encode())
    assert loaded.findings == ()
    assert loaded.positions[("zz_unknown",)].line == 3
    crlf = load_bytes("y.yaml", b"a: 1\r\nb: 2\rc: 3\n")
    assert [crlf.positions[(key,)].line for key in "abc"] == [1, 2, 3]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("version: !!bool 1", "'1' is not a valid bool"),
        ("version: !!int x1", "'x1' is not a valid int"),
        ("version: !!float .x", "'.x' is not a valid float"),
        ("version: !!python/object:os.system x", "unsupported YAML tag 'tag:yaml.org,2002:python/object:os.system'"),
    ],
)
def test_tagged_values_that_cannot_be_constructed_are_findings(line: str, message: str):
    result = lint_bytes("t.yaml", VALID_SERVE.replace("version: 1", line).encode())
    (finding,) = result.findings
    assert (finding.line, finding.message) == (1, message)


def test_a_huge_integer_is_out_of_range_not_an_overflow():
    evidence = "\n  evidence: [{category: short-fast, metric: ttft_ms, value: 1" + "0" * 400 + "}]\n"
    text = VALID_SERVE.replace("  hardware: {gpu: l40s}\n", "  hardware: {gpu: l40s}" + evidence)
    (finding,) = lint_bytes("t.yaml", text.encode()).findings
    assert (finding.code, finding.message) == (
        "GP103",
        "serve.evidence[0].value must be at most 1,000,000,000,000, got a number of 401 digits",
    )


def test_custom_gpus_must_be_usable():
    gpus = "gpus: {tiny: {memory_gib: 0.1, bandwidth_tbs: 0.000001, bf16_tflops: 100, pcie_gbs: 5.0e-324}}\n"
    text = VALID_SERVE.replace("gpu: l40s", "gpu: tiny") + gpus
    found = [(f.code, f.message) for f in lint_bytes("t.yaml", text.encode()).findings]
    # The driver keeps 0.5 GiB of every GPU: below 1 GiB nothing is usable (it used to be -0.4 GiB).
    assert found == [
        ("GP103", "gpus.tiny.memory_gib must be at least 1, got 0.1"),
        ("GP103", "gpus.tiny.bandwidth_tbs must be at least 0.01, got 1e-06"),
        ("GP103", "gpus.tiny.pcie_gbs must be at least 1, got 5e-324"),
    ]


def test_output_tokens_beyond_the_context_is_a_finding_not_a_clamp():
    text = VALID_SERVE.replace("  concurrency: 8\n", "  concurrency: 8\n  output_tokens: 9000\n")
    result = lint_bytes("t.yaml", text.encode())
    (finding,) = result.findings
    assert (finding.code, finding.line, finding.pointer) == ("GP024", 8, "/serve/output_tokens")
    assert finding.message == (
        "serve.output_tokens 9,000 is larger than serve.context 8,192: the context holds the prompt and the output "
        "together"
    )
    assert result.analysis is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("approvals: {prepared_by: {name: A, date: ", "0000-00-00}}"),
        ("budget: {prices_date: ", "9999-12-31}"),
        ("approvals: {prepared_by: {name: A, date: ", "2026-02-30}}"),
    ],
)
def test_dates_are_real_dates_within_bounds(field: str, value: str):
    text = VALID_SERVE.replace("budget: {prices: {l40s: 0.79}, prices_date: 2026-11-20}\n", "") + field + value + "\n"
    (finding,) = lint_bytes("t.yaml", text.encode()).findings  # one finding, though pattern and format both fail
    assert finding.code == "GP106"
    assert finding.message.endswith(
        f"the string '{value.rstrip('}')}' is not a date from 2000-01-01 to 2099-12-31 (YYYY-MM-DD)"
    )


# -- limits ---------------------------------------------------------------------------------------


def test_findings_are_capped_per_file_with_the_worst_severity_of_the_rest():
    # 150 unknown keys under serve: 150 GP101 findings, sorted by line; the first 100 are listed.
    keys = "".join(f"  zz{index:03d}: 1\n" for index in range(150))
    text = VALID_SERVE.replace("  concurrency: 8\n", "  concurrency: 8\n" + keys)
    findings = lint_bytes("t.yaml", text.encode()).findings
    assert len(findings) == 101
    assert {f.code for f in findings[:100]} == {"GP101"}
    assert (findings[100].code, findings[100].severity.value) == ("GP011", "error")
    assert findings[100].message == "50 more finding(s) not listed; the first 100 are above"
    # "did you mean" is looked up for the first 20 unknown keys only (difflib is the costly part):
    assert sum("did you mean" in f.message for f in findings) <= 20


def test_capped_keeps_short_lists_as_they_are():
    findings = lint_bytes("t.yaml", b"version: 2\n").findings
    assert capped(findings) == findings and 0 < len(findings) < 100


def test_documented_limits_are_checked_before_each_entry(tmp_path: Path):
    gpus = "gpus:\n" + "".join(
        f"  g{index}: {{memory_gib: 8, bandwidth_tbs: 1, bf16_tflops: 10}}\n" for index in range(40)
    )
    (finding,) = lint_bytes("t.yaml", (VALID_SERVE + gpus).encode()).findings
    assert (finding.code, finding.message) == ("GP106", "gpus has 40 entries; at most 32 are allowed")
    prices = "budget: {prices: {" + ", ".join(f"g{index}: 1" for index in range(70)) + "}}\n"
    text = VALID_SERVE.replace("budget: {prices: {l40s: 0.79}, prices_date: 2026-11-20}\n", prices)
    (finding,) = lint_bytes("t.yaml", text.encode()).findings
    assert finding.message == "budget.prices has 70 entries; at most 64 are allowed"


def test_a_file_with_more_than_ten_thousand_values_is_refused_early():
    text = "version: 1\n" + "".join(f"k{index}: 1\n" for index in range(6000))  # 12,001 values
    (finding,) = lint_bytes("t.yaml", text.encode()).findings
    assert (finding.code, finding.message) == (
        "GP003",
        "the file holds more than 10,000 values; a spec has a few hundred",
    )


# -- isolation ------------------------------------------------------------------------------------


def test_one_failing_rule_is_a_finding_and_the_run_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from gpuplan.rules import registry

    original = registry.all_rules()
    target = next(rule for rule in original if rule.code == "GP202")

    def broken(context):
        raise ZeroDivisionError("division by zero")

    patched = tuple(rule._replace(check=broken) if rule is target else rule for rule in original)
    monkeypatch.setattr(registry, "all_rules", lambda: patched)
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(VALID_SERVE)
    second.write_text(VALID_SERVE.replace("concurrency: 8", "concurrency: 8\n  category: long-context"))
    code, out, err = run_cli("lint", str(first), str(second))
    assert code == 2 and err == ""
    lines = out.splitlines()
    assert (
        lines.count(f"{first}:1:1: GP010 [error] internal error while rule GP202: ZeroDivisionError: division by zero")
        == 1
    )
    assert any(line.startswith(f"{second}:") and " GP401 " in line for line in lines)  # the other rules ran
    code, _, err = run_cli("lint", "--traceback", str(first))
    assert code == 2 and f"{first}: rule GP202\nTraceback (most recent call last):" in err
    assert "ZeroDivisionError: division by zero" in err


def test_a_non_finite_estimate_never_reaches_an_output(monkeypatch: pytest.MonkeyPatch):
    import gpuplan.output.estimate_json as estimate_json

    real = estimate_json.estimate_document

    def with_nan(result, figures_only=False):
        document = real(result, figures_only)
        document["serve"]["tpot_ms"] = float("nan")
        return document

    monkeypatch.setattr(estimate_json, "estimate_document", with_nan)
    result = lint_bytes("t.yaml", VALID_SERVE.encode())
    assert result.analysis is None
    (finding,) = result.findings
    assert finding.message == (
        "internal error while estimating: FigureOutOfRange: the estimate's serve.tpot_ms is nan, "
        "not a finite non-negative number"
    )
    assert list(unsafe_figures({"a": [1, -2, {"b": float("inf")}], "ok": 0.0, "flag": True})) == [
        ("a.1", -2),
        ("a.2.b", float("inf")),
    ]
    # An error band's signed median is a bias, negative when gpuplan is below the measurements: only a
    # non-finite one is out of range.
    band = {"bands": {"t": {"within": 0.42, "signed_median": -0.003}}}
    assert list(unsafe_figures(band)) == []
    nan = float("nan")
    assert list(unsafe_figures({"signed_median": nan, "within": -0.1})) == [("signed_median", nan), ("within", -0.1)]


def test_a_broken_pyproject_deep_in_a_tree_fails_only_the_specs_it_governs(tmp_path: Path):
    (tmp_path / "team-a").mkdir()
    (tmp_path / "team-b").mkdir()
    (tmp_path / "team-a" / "pyproject.toml").write_text('[tool.gpuplan]\nfail-on = "warning\n')  # unterminated
    (tmp_path / "team-a" / "spec.yaml").write_text(VALID_SERVE)
    (tmp_path / "team-b" / "spec.yaml").write_text(VALID_SERVE)
    code, out, err = run_cli("lint", "--format", "json", str(tmp_path))
    document = json.loads(out)
    assert (code, err, document["summary"]["exit_code"]) == (2, "", 2)
    assert document["files"] == [str(tmp_path / "team-a" / "spec.yaml"), str(tmp_path / "team-b" / "spec.yaml")]
    (finding,) = document["findings"]
    assert finding["code"] == "GP012" and finding["file"].endswith("team-a/spec.yaml")
    assert "team-a/pyproject.toml: invalid TOML: " in finding["message"]


@pytest.mark.parametrize(
    "table",
    [
        '[ tool.gpuplan ]\nseverity = {low-headroom = "error"}\nthresholds = {headroom_pct = 90}\n',
        '[tool."gpuplan"]\nseverity = {low-headroom = "error"}\nthresholds = {headroom_pct = 90}\n',
        'tool.gpuplan.severity.low-headroom = "error"\ntool.gpuplan.thresholds.headroom_pct = 90\n',
        '[tool]\ngpuplan = {severity = {GP202 = "error"}, thresholds = {headroom_pct = 90}}\n',
    ],
)
def test_every_toml_spelling_of_the_table_is_found(tmp_path: Path, table: str):
    # VALID_SERVE passes; a 90% headroom margin makes it GP202 (low headroom), raised to an error, so
    # the configuration found upward turns exit 0 into exit 1. A regular expression over
    # "[tool.gpuplan]" missed these spellings, and the run passed.
    (tmp_path / ".git").mkdir(exist_ok=True)
    (tmp_path / "spec.yaml").write_text(VALID_SERVE)
    assert run_cli("lint", str(tmp_path / "spec.yaml"))[0] == 0
    (tmp_path / "pyproject.toml").write_text(table)
    assert run_cli("lint", str(tmp_path / "spec.yaml"))[0] == 1


def test_a_pyproject_of_other_tools_is_not_a_configuration(tmp_path: Path):
    # Broken TOML that never names gpuplan is some other tool's file: skipped, as a valid one is.
    (tmp_path / ".git").mkdir(exist_ok=True)
    (tmp_path / "spec.yaml").write_text(VALID_SERVE)
    for text in ("[tool.black]\nline-length = 100\n", "[tool.black\nbroken\n"):
        (tmp_path / "pyproject.toml").write_text(text)
        code, out, _ = run_cli("lint", str(tmp_path / "spec.yaml"))
        assert code == 0 and out.startswith("passed"), out
    # Named explicitly, a pyproject without the table is a usage error, not a silent no-op.
    code, _, err = run_cli("lint", "--config", str(tmp_path / "pyproject.toml"), str(tmp_path / "spec.yaml"))
    assert code == 2 and "invalid TOML" in err
    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 100\n")
    code, _, err = run_cli("lint", "--config", str(tmp_path / "pyproject.toml"), str(tmp_path / "spec.yaml"))
    assert code == 2 and err.endswith("pyproject.toml: no [tool.gpuplan] table: nothing to configure\n")
    (tmp_path / "pyproject.toml").write_text("[tool]\ngpuplan = 5\n")
    code, _, err = run_cli("lint", "--config", str(tmp_path / "pyproject.toml"), str(tmp_path / "spec.yaml"))
    assert code == 2 and err.endswith("tool.gpuplan must be a table ([tool.gpuplan]), not int\n")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_toml_nan_and_inf_are_refused_at_their_key(tmp_path: Path, value: str):
    # TOML spells NaN and infinities, which no schema bound catches (NaN compares false to every
    # bound): they stopped rules with internal errors and reached plan's JSON as NaN.
    (tmp_path / "spec.yaml").write_text(VALID_SERVE)
    config = tmp_path / "pyproject.toml"
    config.write_text(f'[tool.gpuplan]\nfail-on = "error"\nthresholds = {{headroom_pct = {value}}}\n')
    code, _, err = run_cli("lint", "--config", str(config), str(tmp_path / "spec.yaml"))
    assert code == 2
    assert (
        # line 3, column 15: "thresholds = {" is 14 characters, the key follows
        err == f"gpuplan: error: invalid configuration: {config}:3:15: "
        f"thresholds.headroom_pct is {float(value)!r}: write a finite number\n"
    )
    config.write_text(f"[tool.gpuplan.diff]\nmax-monthly-increase = {value}\n")
    code, _, err = run_cli("lint", "--config", str(config), str(tmp_path / "spec.yaml"))
    assert code == 2 and f"{config}:2:1: diff.max-monthly-increase is" in err


@pytest.mark.parametrize(("key", "shown", "where"), [("~", "null", "2:3"), ("1", "1", "2:3"), ("true", "True", "2:3")])
def test_a_severity_key_that_is_not_text_is_a_positioned_problem(tmp_path: Path, key: str, shown: str, where: str):
    (tmp_path / "spec.yaml").write_text(VALID_SERVE)
    config = tmp_path / "c.yaml"
    config.write_text(f"severity:\n  {key}: error\n")
    code, _, err = run_cli("lint", "--config", str(config), str(tmp_path / "spec.yaml"))
    assert (code, err) == (
        2,
        f"gpuplan: error: invalid configuration: {config}:{where}: severity: a key must be a rule code (GP201) "
        f"or name (does-not-fit), not {shown}\n",
    )


# -- neutralised output ---------------------------------------------------------------------------

FORGED = "\\n::error file=x.yaml,line=1::forged\\n::add-mask::secret\\u001b]0;t\\u0007"


def test_spec_text_cannot_forge_lines_or_reach_the_terminal_raw(write_spec):
    # An unknown key and a waiver reason, each with line breaks, workflow commands, OSC and BEL.
    spec = VALID_SERVE.replace("prices_date: 2026-11-20", "prices_date: 2025-01-01") + (
        f'"k{FORGED}": 1\nwaivers: [{{rule: GP504, reason: "ok{FORGED}", approved_by: "\\u202eevil"}}]\n'
    )
    path = write_spec(spec)
    for output in ("text", "github"):
        code, out, _ = run_cli("lint", "--format", output, str(path))
        assert code == 1
        assert not any(char in out for char in "\x1b\x07\u202e\r")
        assert not [line for line in out.splitlines() if line.startswith(("::error file=x.yaml", "::add-mask::"))]
        # one line per finding (+ the hint or waiver lines of text output) and the summary
        assert len(out.splitlines()) == {"text": 3, "github": 2}[output]
    _, text, _ = run_cli("lint", str(path))
    assert "unknown key 'k\\n::error file=x.yaml,line=1::forged\\n::add-mask::secret\\x1b]0;t\\x07'" in text


def test_a_file_name_cannot_forge_a_workflow_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # A pull request names its files: one called `::error::forged.yaml`, linted from its folder, began the finding's
    # line, which a CI log reads as a workflow command; so did its line in `diff --git` text. It is shown as
    # ./::error::forged.yaml (the same file); the github format percent-encodes it in file= as before.
    monkeypatch.chdir(tmp_path)
    Path("README").write_text("specs\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for command in (["init", "-q"], ["add", "README"], ["commit", "-qm", "first"]):
        subprocess.run([*git, *command], check=True)
    Path("::error::forged.yaml").write_text(VALID_SERVE + "k: 1\n")  # an unknown key: GP101
    code, out, _ = run_cli("lint", ".")
    assert code == 1 and out.startswith("./::error::forged.yaml:")
    code, out, _ = run_cli("diff", "--git", "HEAD")
    assert "./::error::forged.yaml (added)" in out
    for text in (run_cli("lint", ".")[1], out):
        assert not [line for line in text.splitlines() if line.startswith("::")]


def test_waiver_reasons_are_shown_escaped(write_spec):
    spec = VALID_SERVE.replace("prices_date: 2026-11-20", "prices_date: 2025-01-01") + (
        f'waivers: [{{rule: GP504, reason: "ok{FORGED}", approved_by: "\\u202eevil"}}]\n'
    )
    code, text, _ = run_cli("lint", str(write_spec(spec)))
    assert code == 0
    assert (
        "    waived: ok\\n::error file=x.yaml,line=1::forged\\n::add-mask::secret\\x1b]0;t\\x07 (approved by "
        "\\u202eevil)" in text
    )
    assert len(text.splitlines()) == 4  # finding, hint, waiver, summary


def test_visible_escapes_controls_separators_and_bidi():
    assert (
        visible("a\x1b[31mb\x07\n\t\x7f\x85\u2028\u202e\u2066z")
        == "a\\x1b[31mb\\x07\\n\\t\\x7f\\x85\\u2028\\u202e\\u2066z"
    )
    assert visible("plain text — ünïcode 🙂") == "plain text — ünïcode 🙂"


def test_reports_show_control_and_bidi_characters_escaped(tmp_path: Path):
    path = tmp_path / "spec.yaml"
    path.write_text(VALID_SERVE + 'description: "multi\\nline \\u202ereversed\\u202c and \\u001b[2J"\n')
    for flag in ("--md", "--html"):
        code, out, _ = run_cli("report", flag, str(path))
        assert code == 0
        assert not any(char in out for char in "\x1b\u202e\u202c")
        assert "\\u202ereversed\\u202c" in out.replace("\\\\", "\\")


# -- safe report writes ---------------------------------------------------------------------------


def test_report_never_writes_through_a_symlink(tmp_path: Path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "report.md"
    link.symlink_to(victim)
    spec = EXAMPLES / "serve-llama-70b.yaml"
    code, out, err = run_cli("report", "-o", str(link), str(spec))
    assert (code, out) == (2, "")
    assert err == (
        f"gpuplan: error: refusing to write through the symlink {link} (it points to {victim}); "
        "remove it, or pass --force to replace the link itself\n"
    )
    assert victim.read_text() == "keep me"
    code, _, _ = run_cli("report", "--force", "-o", str(link), str(spec))
    assert code == 0 and not link.is_symlink() and link.read_text().startswith("## APPROVE")
    assert victim.read_text() == "keep me"


def test_report_refuses_devices_fifos_and_read_only_files_and_keeps_modes(tmp_path: Path):
    spec = str(EXAMPLES / "serve-llama-70b.yaml")
    fifo = tmp_path / "out.md"
    os.mkfifo(fifo)
    code, _, err = run_cli("report", "-o", str(fifo), spec)
    assert (
        code == 2
        and err == f"gpuplan: error: refusing to replace {fifo}: it is a named pipe (FIFO), not a regular file\n"
    )
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    code, _, err = run_cli("report", "-o", "/dev/null", spec)
    assert code == 2 and "refusing to write a report into /dev" in err
    code, _, err = run_cli("report", "-o", "/dev/stdout", spec)
    assert code == 2 and "use -o - for standard output" in err
    locked = tmp_path / "locked.md"
    locked.write_text("old")
    locked.chmod(0o444)
    code, _, err = run_cli("report", "-o", str(locked), spec)
    assert code == 2 and err.startswith(f"gpuplan: error: refusing to replace the read-only file {locked}")
    assert locked.read_text() == "old"
    code, _, _ = run_cli("report", "--force", "-o", str(locked), spec)
    assert code == 0 and stat.S_IMODE(locked.stat().st_mode) == 0o444 and locked.read_text().startswith("## APPROVE")
    shared = tmp_path / "shared.md"
    shared.write_text("old")
    shared.chmod(0o640)
    assert run_cli("report", "-o", str(shared), spec)[0] == 0
    assert stat.S_IMODE(shared.stat().st_mode) == 0o640


def test_report_missing_folders_need_mkdir_and_dash_is_stdout(tmp_path: Path):
    spec = str(EXAMPLES / "serve-llama-70b.yaml")
    target = tmp_path / "new" / "dir" / "plan.md"
    code, _, err = run_cli("report", "-o", str(target), spec)
    assert code == 2
    assert (
        err == f"gpuplan: error: cannot write {target}: "
        f"the folder {target.parent} does not exist (pass --mkdir to create it)\n"
    )
    assert not (tmp_path / "new").exists()
    assert run_cli("report", "--mkdir", "-o", str(target), spec)[0] == 0 and target.is_file()
    code, out, _ = run_cli("report", "-o", "-", spec)
    assert code == 0 and out.startswith("## APPROVE") and not Path("-").exists()
    code, _, err = run_cli("report", "--pdf", "-o", "-", spec)
    assert code == 2 and "a PDF or several formats need a file name" in err


@pytest.mark.skipif(AS_ROOT, reason="root writes into read-only folders")
def test_report_into_a_read_only_folder_is_one_clear_line(tmp_path: Path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    code, _, err = run_cli("report", "-o", str(folder / "plan.md"), str(EXAMPLES / "serve-llama-70b.yaml"))
    assert code == 2 and err == f"gpuplan: error: cannot write {folder / 'plan.md'}: permission denied\n"


def test_report_help_says_where_each_format_goes():
    _, out, _ = run_cli("report", "--help")
    flat = " ".join(out.split())
    assert (
        "Default: one Markdown or HTML report to standard output; a PDF, or several formats, next to the spec" in flat
    )


# -- one clock, consistent estimate ---------------------------------------------------------------


def test_the_library_judges_waiver_expiry_in_utc(monkeypatch: pytest.MonkeyPatch):
    # 2026-12-02T05:00:00Z is still 2026-12-01 in Honolulu (UTC-10): a waiver expiring 2026-12-01 has
    # expired in UTC, whatever the machine's time zone.
    monkeypatch.setenv(
        "SOURCE_DATE_EPOCH", str(int(datetime.datetime(2026, 12, 2, 5, tzinfo=datetime.UTC).timestamp()))
    )
    monkeypatch.setenv("TZ", "Pacific/Honolulu")
    time.tzset()
    try:
        assert clock.today() == datetime.date(2026, 12, 2)
        text = VALID_SERVE + "waivers: [{rule: GP702, reason: accepted, approved_by: a, expires: 2026-12-01}]\n"
        assert "GP701" in codes(lint_bytes("t.yaml", text.encode(), LintOptions()))
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_an_unusable_source_date_epoch_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, write_spec):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "99999999999999999999")
    code, _, err = run_cli("lint", str(write_spec(VALID_SERVE)))
    assert code == 2 and "is not a number of seconds since 1970-01-01" in err


@pytest.mark.parametrize("name", ["training_mfu", "prefill_mfu", "decode_bandwidth"])
def test_an_efficiency_override_below_one_percent_is_a_configuration_error(tmp_path: Path, name: str):
    # The schema took any efficiency above 0: at 1e-200 the latencies came out infinite, printed "TTFT inf ms" by
    # lint and failed estimate, report and plan --format json on an internal error. An efficiency is at least 1%
    # of the peak (no kernel runs slower): below it the configuration is invalid (GP012, its line named); at 0.01
    # every output is finite.
    spec = tmp_path / "spec.yaml"
    spec.write_text(VALID_SERVE)
    (tmp_path / ".gpuplan.yaml").write_text(f"thresholds:\n  {name}: 1e-200\n")
    code, out, _ = run_cli("lint", str(spec))
    assert code == 2 and "GP012" in out and ".gpuplan.yaml:2:" in out and f"{name} must be at least 0.01" in out
    (tmp_path / ".gpuplan.yaml").write_text(f"thresholds:\n  {name}: 0.01\n")
    for command in (("estimate",), ("plan", "--format", "json"), ("report", "-o", "-")):
        code, out, err = run_cli(*command, str(spec))
        assert code in (0, 1) and "internal error" not in err and " inf " not in out, (command, err)


def test_an_infinite_latency_that_is_not_a_saturated_stream_is_gp010_never_printed():
    # The schema keeps an efficiency override at 0.01 or more; a path to an infinite latency it does not close must
    # not reach an output either. The estimate's JSON wrote any infinite TTFT as null (as a saturated steady stream's
    # is), so its range check passed and GP403 printed "p90 TTFT inf ms". Settings past the schema's bound (as a
    # program may build them) give one: it is GP010, the only finding.
    from gpuplan.config import Settings
    from gpuplan.linter import LintOptions, lint_bytes

    text = (EXAMPLES / "serve-llama-70b.yaml").read_bytes()
    options = LintOptions(settings=Settings.from_thresholds({"decode_bandwidth": 1e-200}))
    findings = lint_bytes("spec.yaml", text, options).findings
    assert [finding.code for finding in findings] == ["GP010"]
    assert "serve.ttft_ms is inf, not a finite non-negative number" in findings[0].message


def test_estimate_uses_the_configuration_and_exits_as_lint_does(tmp_path: Path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(VALID_SERVE)
    (tmp_path / ".gpuplan.yaml").write_text("thresholds: {prefill_mfu: 0.5}\n")
    _, plain, _ = run_cli("estimate", "--format", "json", str(spec))
    (tmp_path / ".gpuplan.yaml").write_text("thresholds: {prefill_mfu: 0.1}\n")
    code, configured, _ = run_cli("estimate", "--format", "json", str(spec))
    assert code == 0
    # prefill_mfu sets the prefill GEMMs' share of dense peak: 0.5 -> 0.1 makes them 5x slower, while the
    # attention and the engine's fixed overheads stay; the GEMMs dominate a single prompt's TTFT here,
    # so TTFT alone grows by more than 3x and by at most 5x.
    ratio = json.loads(configured)["serve"]["ttft_single_ms"] / json.loads(plain)["serve"]["ttft_single_ms"]
    assert 3 < ratio <= 5
    bad = EXAMPLES / "findings" / "parallelism-bad-degree.yaml"  # fits in memory, TP 8 over a 4-GPU NVLink domain
    code, out, _ = run_cli("estimate", str(bad))
    assert code == 1
    assert "-> fits" in out and " GP304 [error] " in out and out.rstrip().endswith("in 1 file")
    code, out, _ = run_cli("estimate", "--format", "json", str(bad))
    document = json.loads(out)
    assert (code, document["exit_code"], sorted(f["code"] for f in document["findings"])) == (1, 1, ["GP304", "GP507"])


def test_a_token_budget_the_prompts_saturate_is_a_long_wait_not_an_internal_error():
    # Found by the floors' property test: one token per step (max_batched_tokens: 1) and 61,285-token
    # prompts. Beyond a tiny decode share the others' prompts fill the budget and the queueing formula
    # has no finite value; the steady state is the last share before that, so the estimate is a finite
    # TTFT of hours (the 61,285 one-token steps of each of the 143 others' prompts queue ahead), and
    # lint reports the spec's findings instead of GP010.
    spec = textwrap.dedent(
        """\
        version: 1
        name: p
        model: {id: llama-3.2-1b}
        serve:
          context: 61286
          output_tokens: 1
          concurrency: 144
          quantization: fp8
          hardware: {gpu: h100-sxm, count: 4, tensor_parallel: 4}
          max_batched_tokens: 1
        """
    )
    result = lint_bytes("t.yaml", spec.encode())
    assert "GP010" not in {finding.code for finding in result.findings}
    speed = result.analysis.serve.speed
    assert math.isfinite(speed.ttft_s) and speed.ttft_s > 3600
    assert speed.tokens_per_s > 0


# -- command-line values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("lint", "--bogus", "x.yaml"), "No such option '--bogus'."),
        (("lint", "--format", "xml", "x.yaml"), "Invalid value for '--format': 'xml' is not one of"),
        (("lint", "--ignore", "", "x.yaml"), "an empty pattern would match every rule"),
        (("lint", "--ignore", " ", "x.yaml"), "an empty pattern would match every rule"),
        (("lint", "--select", "GP2O1", "x.yaml"), "unknown rule 'GP2O1'; did you mean GP201"),
        (("lint", "--select", "no-such-rule", "x.yaml"), "unknown rule 'no-such-rule'"),
        (("verify", "x.yaml", "--run", "r.log", "--tolerance", "nan"), "'nan' is not a finite number"),
        (("diff", "a.yaml", "b.yaml", "--max-monthly-increase", "nan"), "'nan' is not a finite number"),
        (("diff", "a.yaml", "b.yaml", "--max-monthly-increase-pct", "inf"), "'inf' is not a finite number"),
        (("init", "--model", "llama-3.1-8b", "--serve", "--count", "99999999999", "x.yaml"), "must be at most"),
        (("init", "--model", "llama-3.1-8b", "--serve", "  "), "'  ' names no path (an unset variable?)"),
    ],
)
def test_a_bad_command_line_value_is_one_line_and_exit_2(tmp_path: Path, monkeypatch, args, message):
    # click's own form is four lines (usage, "Try", blank, "Error: ..."); NaN passed click's FloatRange
    # (it compares false with both bounds) and switched the check it sets off; an empty --ignore
    # matched every code and passed any spec; init wrote specs its own lint then rejected.
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(*args)
    assert (code, out) == (2, "")
    assert err.startswith("gpuplan: error: ") and message in err and err.count("\n") == 1, err
    assert not list(tmp_path.glob("*.yaml")), "nothing is written"


def test_closed_standard_input_and_a_full_disk_are_one_line(tmp_path: Path):
    import subprocess

    from conftest import gpuplan_executable

    spec = str(EXAMPLES / "serve-llama-70b.yaml")
    closed = subprocess.run([gpuplan_executable(), "lint", "-"], stdin=subprocess.DEVNULL, capture_output=True)
    assert closed.returncode == 1  # an empty spec (GP006): read, not refused
    closed = subprocess.run(
        [gpuplan_executable(), "lint", "-"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        close_fds=True,
        preexec_fn=lambda: os.close(0),
    )
    assert closed.returncode == 2 and "GP009 [error] cannot read <stdin>: standard input is closed" in closed.stdout
    assert "internal error" not in closed.stderr
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            done = subprocess.run(
                [gpuplan_executable(), "report", "-o", "-", spec], stdout=full, stderr=subprocess.PIPE, text=True
            )
        assert (done.returncode, done.stderr) == (
            2,
            "gpuplan: error: cannot write the output: No space left on device\n",
        )


def test_a_path_with_a_line_break_stays_on_one_line(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("report", "-o", "no\n::error::forged/x.md", str(EXAMPLES / "serve-llama-70b.yaml"))
    assert code == 2 and err.count("\n") == 1 and "no\\n::error::forged" in err
    assert not [line for line in err.splitlines() if line.startswith("::")]


def test_interactive_init_says_how_out_when_its_input_ends(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("init", "--model", "llama-3.1-8b", "--serve", "--interactive", "n.yaml", input="")
    assert code == 2 and "standard input ended before every question was answered" in err
    assert "internal error" not in err and not (tmp_path / "n.yaml").exists()


def test_json_outputs_write_bidi_and_c1_characters_as_escapes(write_spec):
    # JSON itself escapes only C0 controls: DEL, C1 (U+0085, U+009B), U+2028 and bidi overrides from a
    # spec went into lint's, estimate's, plan's and SARIF's JSON raw, and reached a terminal that cats it.
    hostile = "a\u202eb\x7fc\x9bd\u2028e\u2066f"
    spec = VALID_SERVE.replace("name: demo", f'name: "{hostile.encode("unicode_escape").decode()}"') + (
        'waivers: [{rule: GP202, reason: "r\\u202e\\x85", approved_by: "me"}]\n'
    )
    path = write_spec(spec)
    for args in (("lint", "--format", "json"), ("lint", "--format", "sarif"), ("estimate", "--format", "json")):
        _, out, _ = run_cli(*args, str(path))
        assert not any(char in out for char in "\u202e\x7f\x9b\u2028\u2066\x85"), args
        assert json.loads(out), args
    _, out, _ = run_cli("estimate", "--format", "json", str(path))
    assert "a\\u202eb\\u007fc\\u009bd\\u2028e\\u2066f" in out and json.loads(out)["name"] == hostile
    _, out, _ = run_cli("plan", "--format", "json", str(path))
    assert "\u202e" not in out and json.loads(out)["name"] == hostile


@pytest.mark.parametrize(
    "text",
    ["https://evil.example/x", "[x](https://evil.example)", "HTTP://EVIL.EXAMPLE", "ftp://x.example", "www.evil.com"],
)
def test_spec_text_in_markdown_links_nothing(text: str):
    # GitHub turns a bare URL or www. address into a live link with no markup at all; the escaped colon
    # or dot reads the same and links nothing (rendered with GitHub's own parser, cmark-gfm).
    import cmarkgfm

    from gpuplan.output.markdown import escape_markdown

    html = cmarkgfm.github_flavored_markdown_to_html(f"| a |\n|---|\n| {escape_markdown(text)} |")
    assert "<a " not in html and text in html  # the text itself is kept, readable


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, -2, {"b": float("inf")}], "ok": 0.0, "flag": True},
        {"a": {"b": [0, 1.5, None, "x", False]}, "c": 2},
        {"n": float("nan")},
        [{"x": -0.0}, {"y": -1e-300}],
        {"t": (1, -1)},  # tuples are not looked into, as unsafe_figures does not
        {"band": {"signed_median": -0.003, "within": 0.4}},
        {"band": {"signed_median": -0.003, "within": -0.4}},
        {"signed_median": [-1]},
        3,
        -3,
        "text",
        None,
    ],
)
def test_all_safe_agrees_with_unsafe_figures(value):
    from gpuplan.linter import all_safe

    assert all_safe(value) == (not list(unsafe_figures(value)))


def test_a_toml_file_given_with_config_is_read_as_toml(tmp_path: Path):
    # --config with a TOML file not named pyproject.toml was read as YAML: "YAML syntax error: did not find
    # expected <document start>". A .toml file is read for its [tool.gpuplan] table, as pyproject.toml is.
    spec = tmp_path / "spec.yaml"
    spec.write_text(VALID_SERVE)
    config = tmp_path / "team.toml"
    # a 90% headroom margin no serving layout leaves (GP202), failing at warning
    config.write_text('[tool.gpuplan]\nfail-on = "warning"\nthresholds = {headroom_pct = 90}\n')
    code, out, err = run_cli("lint", "--config", str(config), str(spec))
    assert "YAML" not in err and "GP202" in out and code == 1
    config.write_text("fail-on: info\n")  # YAML in a .toml file: an invalid TOML, said as such
    code, _, err = run_cli("lint", "--config", str(config), str(spec))
    assert code == 2 and "invalid TOML" in err


@pytest.mark.parametrize(
    "old, new",
    [
        ("micro_batch: 4", "micro_batch: 4.0"),
        ("concurrency: 4", "concurrency: 4.0"),
        ("  currency: USD", "  currency: USD\n  term_months: 12.0"),
        ("hardware: {gpu: l4, count: 1}", "hardware: {gpu: l4, count: 1.0, pipeline_parallel: 1.0}"),
    ],
)
def test_an_integer_written_as_an_integral_float_reads_as_the_integer(old: str, new: str, tmp_path: Path):
    # JSON Schema's integer takes 4.0; it reached range() and datetime.date() as a float: GP010 in lint, an
    # internal error in plan and report. It now reads as 4, and every command gives what 4 gives: the same
    # findings, plan and report as the spec with the integers written plainly, the report's content hash
    # too (4.0 is 4: canonical JSON writes a whole number as an integer); only the file's own SHA-256 differs.
    text = (EXAMPLES / "finetune-then-serve.yaml").read_text()
    assert old in text
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    spec, plain = tmp_path / "a" / "spec.yaml", tmp_path / "b" / "spec.yaml"
    spec.write_text(text.replace(old, new, 1))
    plain.write_text(text.replace(old, new.replace(".0", ""), 1))
    for command in (("lint", "--format", "json"), ("plan",), ("report", "-o", "-")):
        code, out, err = run_cli(*command, str(spec))
        plain_code, plain_out, _ = run_cli(*command, str(plain))
        assert code == plain_code and "internal error" not in out + err, (command, out[-500:], err)
        if command[0] == "lint":  # the same findings, where the text allows the same columns
            found, plain_found = (
                [(f["code"], f["message"], f["line"]) for f in json.loads(text)["findings"]]
                for text in (out, plain_out)
            )
            assert found == plain_found
            continue
        lines = out.replace(str(spec.parent), "SPECS").splitlines()
        plain_lines = plain_out.replace(str(plain.parent), "SPECS").splitlines()
        differing = [
            line.split("|")[1].strip() for line, other in zip(lines, plain_lines, strict=True) if line != other
        ]
        assert differing == (["Spec SHA-256 (file)"] if command[0] == "report" else [])


def test_a_model_config_name_with_a_nul_is_a_finding_at_its_line(write_spec):
    # os.stat raises ValueError (not OSError) for a name with a NUL: it was GP010, an internal error.
    spec = write_spec(
        'version: 1\nname: n\nmodel: {config: "a\\0b.json"}\nserve:\n  context: 4096\n  concurrency: 4\n'
        "  hardware: {gpu: l4}\n",
        "n.yaml",
    )
    code, out, _ = run_cli("lint", str(spec))
    assert code == 1 and ":3:17: GP021 [error] a\\x00b.json: cannot read it: its name holds a NUL character" in out
    # The report's check that no output replaces that file compared it with os.path.samefile, which raises
    # ValueError too: an internal error once the output existed. Now the report says why it cannot approve.
    target = spec.with_name("n.md")
    target.write_text("old\n")
    code, _, err = run_cli("report", "--md", "-o", str(target), str(spec))
    assert code == 1 and "internal error" not in err, err
    assert target.read_text().startswith("## CANNOT APPROVE: n\n")


def test_a_price_age_past_a_century_and_a_confidence_of_nan_are_refused(tmp_path: Path):
    # A price age of 3,000,000 days overflowed the approval's expiry date (an internal error in plan and
    # report); nan passed click's FloatRange (an internal error in plan).
    (tmp_path / ".gpuplan.yaml").write_text("thresholds: {price_max_age_days: 3000000}\n")
    spec = tmp_path / "s.yaml"
    spec.write_text((EXAMPLES / "serve-llama-70b.yaml").read_text())
    code, out, err = run_cli("plan", str(spec))
    assert code == 2 and "price_max_age_days must be at most 36,500, got 3,000,000" in out + err
    assert "internal" not in out + err
    (tmp_path / ".gpuplan.yaml").unlink()
    code, _, err = run_cli("plan", str(spec), "--confidence", "nan")
    assert code == 2 and "'nan' is not a finite number" in err
