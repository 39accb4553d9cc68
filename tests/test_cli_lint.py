from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import jsonschema
import pytest
from conftest import EXAMPLES, ROOT, VALID_SERVE, run_cli, run_process

FOUR_PROBLEMS = """\
version: 1
name: demo
model:
  id: llama-3.1-8b
serve:
  contxt: 8192
  context: 8192
  concurrency: "eight"
  output_tokens: 0
  hardware: {gpu: h100-sxm}
  hardware: {gpu: h200-sxm}
"""


def test_four_problems_four_findings_exact_text(write_spec):
    path = write_spec(FOUR_PROBLEMS)
    code, out, _ = run_cli("lint", str(path))
    assert code == 1
    lines = [line for line in out.splitlines() if not line.startswith("    ")]
    assert lines == [
        f"{path}:6:3: GP101 [error] unknown key 'contxt' in serve — did you mean 'context'?",
        f"{path}:8:16: GP102 [error] serve.concurrency must be an integer, got the string 'eight'",
        f"{path}:9:18: GP103 [error] serve.output_tokens must be at least 1, got 0",
        f"{path}:11:3: GP002 [error] duplicate key 'hardware' in serve: first defined on line 10, again on line 11",
        "failed: 4 errors, 0 warnings, 0 info in 1 file",
    ]


def test_sarif_validates_against_the_2_1_0_schema(write_spec):
    path = write_spec(FOUR_PROBLEMS)
    code, out, _ = run_cli("lint", "--format", "sarif", str(path))
    assert code == 1
    log = json.loads(out)
    schema = json.loads((ROOT / "tests/fixtures/sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema).validate(log)
    results = log["runs"][0]["results"]
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results] == [
        ("GP101", 6),
        ("GP102", 8),
        ("GP103", 9),
        ("GP002", 11),
    ]
    rule_ids = [rule["id"] for rule in log["runs"][0]["tool"]["driver"]["rules"]]
    assert all(rule_ids[r["ruleIndex"]] == r["ruleId"] for r in results)


def test_sarif_of_a_run_that_cannot_start_is_a_valid_log_saying_why(tmp_path: Path):
    # A folder with no spec is a usage error (exit 2, the message on stderr); a CI step that uploads the SARIF
    # file still gets a valid log: no results, an unsuccessful invocation with the error as its notification.
    code, out, err = run_cli("lint", "--format", "sarif", str(tmp_path))
    assert code == 2 and err.startswith("gpuplan: error: no spec files found")
    log = json.loads(out)
    jsonschema.Draft4Validator(json.loads((ROOT / "tests/fixtures/sarif-schema-2.1.0.json").read_text())).validate(log)
    (run,) = log["runs"]
    assert run["results"] == []
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    assert invocation["toolExecutionNotifications"][0]["message"]["text"] == f"no spec files found in {tmp_path}"
    # Other formats print nothing on stdout for it.
    assert run_cli("lint", "--format", "json", str(tmp_path))[:2] == (2, "")


def test_sarif_locations_are_uri_references(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # SARIF's artifactLocation.uri is a URI reference (RFC 3986): a space is %20, an absolute path a file URI.
    folder = tmp_path / "specs dir"
    folder.mkdir()
    (folder / "a b.yaml").write_text(FOUR_PROBLEMS)
    monkeypatch.chdir(tmp_path)
    for argument, expected in (
        ("specs dir", "specs%20dir/a%20b.yaml"),
        (str(folder), f"file://{folder.parent.as_posix()}/specs%20dir/a%20b.yaml"),  # tmp_path has no space
    ):
        _, out, _ = run_cli("lint", "--format", "sarif", argument)
        uris = {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads(out)["runs"][0]["results"]
        }
        assert uris == {expected}


def test_json_output_is_the_documented_object(write_spec):
    path = write_spec(FOUR_PROBLEMS)
    code, out, _ = run_cli("lint", "--format", "json", str(path))
    document = json.loads(out)
    assert code == 1
    assert document["format_version"] == 1
    assert document["summary"] == {
        "files": 1,
        "errors": 4,
        "warnings": 0,
        "infos": 0,
        "waived": 0,
        "fail_on": "error",
        "exit_code": 1,
    }
    first = document["findings"][0]
    assert set(first) == {
        "code",
        "name",
        "severity",
        "message",
        "file",
        "line",
        "col",
        "pointer",
        "hint",
        "waived",
        "waiver",
    }
    assert (first["code"], first["name"], first["pointer"]) == ("GP101", "unknown-key", "/serve/contxt")


def test_github_annotations(write_spec):
    path = write_spec(FOUR_PROBLEMS)
    _, out, _ = run_cli("lint", "--format", "github", str(path))
    assert out.splitlines()[0].startswith(f"::error file={path},line=6,col=3,title=GP101 unknown-key::unknown key")


def test_clean_spec_exit_zero_and_quiet(write_spec):
    path = write_spec(VALID_SERVE)
    assert run_cli("lint", str(path))[:2] == (0, "passed: 0 errors, 0 warnings, 0 info in 1 file\n")
    assert run_cli("lint", "--quiet", str(path))[:2] == (0, "")


def test_stdin_and_directories(tmp_path: Path):
    code, out, _ = run_cli("lint", "-", input=FOUR_PROBLEMS)
    assert code == 1 and out.startswith("<stdin>:6:3: GP101")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "a.yaml").write_text(VALID_SERVE)
    (tmp_path / "specs" / "ci.yml").write_text("jobs: {build: {runs-on: ubuntu}}\n")  # not a spec: skipped
    code, out, _ = run_cli("lint", str(tmp_path))
    assert (code, out) == (0, "passed: 0 errors, 0 warnings, 0 info in 1 file\n")


def test_a_directory_search_reports_a_misspelled_top_level_key_instead_of_skipping_the_spec(tmp_path: Path):
    # A file with a spec's `version:` and `name:`, one of `model:` / `serve:` and a key lint's "did you mean" takes
    # for the other is a spec with a typo: found and reported (GP101). YAML without both marks is left alone,
    # however close its keys: a CI file's `name:` + `server:`, a config's `version:` + `models:` and no job key.
    (tmp_path / "modle.yaml").write_text(VALID_SERVE.replace("model:", "modle:"))
    (tmp_path / "serv.yaml").write_text(VALID_SERVE.replace("serve:", "Serv:"))
    (tmp_path / "ci.yaml").write_text("name: build\nmodel: x\nserver: {port: 80}\n")
    (tmp_path / "app.yaml").write_text("version: 2\nname: app\nmodels: [a]\nserver: {port: 80}\n")
    code, out, _ = run_cli("lint", str(tmp_path))
    unknown = sorted(line.split(": GP101")[0].rsplit("/", 1)[1] for line in out.splitlines() if ": GP101" in line)
    assert code == 1 and unknown == ["modle.yaml:3:1", "serv.yaml:5:1"]
    assert "in 2 files" in out.splitlines()[-1]


def test_only_specs_skips_other_yaml(tmp_path: Path):
    other = tmp_path / ".pre-commit-config.yaml"
    other.write_text("repos: []\n")
    assert run_cli("lint", "--only-specs", "--quiet", str(other))[:2] == (0, "")
    assert run_cli("lint", str(other))[0] == 1


@pytest.mark.parametrize(
    "name, text",
    [
        # each a spec lint reads as such when named (GP203: 64 x 8,192 tokens do not fit one L4), yet the hook and
        # `lint DIR` skipped it: the key tests were byte patterns of one layout (unquoted keys at a line's start)
        ("bom.yaml", "\ufeff" + "{spec}"),
        ("quoted.yaml", "QUOTED"),
        ("flow.yaml", "FLOW"),
        ("cr.yaml", "CR"),
        ("UPPER.YAML", "{spec}"),  # pre-commit's `types: [yaml]` passes it; the hook linted it, `lint DIR` did not
    ],
)
def test_the_hook_and_a_folder_find_every_layout_of_a_spec(tmp_path: Path, name: str, text: str):
    spec = (
        "version: 1\nname: s\nmodel: {id: llama-3.1-8b}\nserve: {context: 8192, concurrency: 64, hardware: {gpu: l4}}\n"
    )
    written = {
        "QUOTED": spec.replace("version:", '"version":').replace("model:", '"model":').replace("serve:", '"serve":'),
        "FLOW": '{"version": 1, "name": "s", "model": {"id": "llama-3.1-8b"}, '
        '"serve": {"context": 8192, "concurrency": 64, "hardware": {"gpu": "l4"}}}\n',
        "CR": spec.replace("\n", "\r"),
    }.get(text, text.format(spec=spec))
    path = tmp_path / name
    path.write_bytes(written.encode())
    for args in (["--only-specs", str(path)], [str(tmp_path)]):
        code, out, _ = run_cli("lint", *args)
        assert code == 1 and "GP203" in out and "in 1 file" in out, (args, out)


def test_fail_on_threshold_and_usage_errors(write_spec):
    path = write_spec(VALID_SERVE)
    assert run_cli("lint", "--fail-on", "info", str(path))[0] == 0
    code, _, err = run_cli("lint", "--format", "xml", str(path))
    assert code == 2 and "Invalid value for '--format'" in err
    missing = path.parent / "empty-dir-does-not-exist"
    code, out, err = run_cli("lint", str(missing))
    # A file the run could not check is a GP009 finding (in every format) and the run exits 2 (I/O error).
    assert (code, err) == (2, "")
    assert out.splitlines()[0] == f"{missing}:1:1: GP009 [error] cannot read {missing}: no such file"


def test_no_specs_in_directory_is_a_usage_error(tmp_path: Path):
    code, _, err = run_cli("lint", str(tmp_path))
    assert code == 2 and err.startswith("gpuplan: error: no spec files found")


def test_schema_and_version_commands():
    code, out, _ = run_cli("schema")
    assert code == 0 and json.loads(out)["$id"].startswith("https://")
    code, out, _ = run_cli("--version")
    assert code == 0 and out.startswith("gpuplan, version ")


def test_lint_does_not_import_report_machinery(write_spec):
    # jinja2 and weasyprint are the report's; statistics (some 10 ms with its random and fractions) only answers
    # that vary need (gpuplan.estimate.lengths imports it in ``lognormal``).
    path = write_spec(VALID_SERVE)
    probe = (
        "import sys\n"
        "from gpuplan.cli import cli\n"
        f"try:\n    cli(['lint', {str(path)!r}])\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('jinja2', 'weasyprint', 'statistics'))\n"
        "print('HEAVY', heavy)\n"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out


def test_lint_loads_no_other_commands_module_and_help_lists_every_command(write_spec):
    """The command line's group imports a command's module only when that command runs (a pre-commit hook
    pays for lint alone), while --help still lists every command."""
    import subprocess
    import sys

    from gpuplan.cli import COMMANDS

    path = write_spec(VALID_SERVE)
    probe = (
        "import sys\n"
        "from gpuplan.cli import cli\n"
        f"try:\n    cli(['lint', {str(path)!r}])\nexcept SystemExit:\n    pass\n"
        "print('COMMANDS', sorted(m for m in sys.modules if m.startswith('gpuplan.cli.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "COMMANDS ['gpuplan.cli.common', 'gpuplan.cli.lint']" in out
    code, help_text, _ = run_cli("--help")
    listed = {line.split()[0] for line in help_text.split("Commands:")[1].splitlines() if line.strip()}
    assert code == 0 and listed == set(COMMANDS)


def test_a_syntax_error_is_reported_without_importing_rules_estimator_or_catalog(tmp_path):
    """The code table sits at the bottom layer: loading and reporting a YAML error needs nothing above it."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: [unclosed\n")
    probe = (
        "import sys\n"
        "from gpuplan.cli import cli\n"
        f"try:\n    cli(['lint', {str(bad)!r}])\nexcept SystemExit as exit:\n    print('EXIT', exit.code)\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('gpuplan.rules', 'gpuplan.estimate', "
        "'gpuplan.catalog', 'gpuplan.analysis', 'jsonschema')))\n"
        "print('LOADED', loaded)\n"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "GP001" in out and "EXIT 1" in out and "LOADED []" in out


def test_the_code_table_imports_nothing_from_gpuplan():
    probe = "import sys, gpuplan.codes\nprint(sorted(m for m in sys.modules if m.startswith('gpuplan')))\n"
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['gpuplan', 'gpuplan.codes']"


def test_console_script_runs_as_a_process(write_spec):
    path = write_spec(FOUR_PROBLEMS)
    completed = run_process("lint", str(path))
    assert completed.returncode == 1
    assert "GP002" in completed.stdout and completed.stderr == ""


def test_catalog_commands():
    code, out, _ = run_cli("catalog", "gpus")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["id", "memory", "usable"]
    assert any(line.startswith("h200-sxm") for line in out.splitlines())
    # The T4's 16-bit rate is its fp16 one, and says so (it has no bf16 units).
    assert next(line for line in out.splitlines() if line.startswith("t4 ")).split()[4:6] == ["65", "fp16"]
    code, out, _ = run_cli("catalog", "gpus", "--format", "json")
    gpus = {row["id"]: row for row in json.loads(out)}
    assert gpus["h100-sxm"]["usable_bytes"] < gpus["h100-sxm"]["memory_bytes"]
    assert gpus["h100-sxm"]["provenance"]["sources"] and gpus["h100-sxm"]["price_per_hour"] == 4.12
    # The price is the median of 8 quotes (gpu_sources.yaml), so its dates are those of the oldest and newest.
    price = gpus["h100-sxm"]["price"]
    assert (price["quotes"], price["quoted_from"], price["quoted_to"]) == (8, "2026-05-07", "2026-11-09")
    code, out, _ = run_cli("catalog", "models", "--format", "json")
    models = {row["id"]: row for row in json.loads(out)}
    assert len(models) >= 20 and models["llama-3.1-70b"]["kv_bytes_per_token_bf16"] == 327_680


def test_estimate_text_table(tmp_path):
    code, out, _ = run_cli("estimate", str(ROOT / "examples" / "finetune-then-serve.yaml"))
    assert code == 0
    assert "fine-tuning (full, bf16-mixed, adamw-fused) on 4 x h100-sxm" in out
    assert "serving on 1 x l4" in out and "TTFT" in out and "per 1M output tokens" in out
    missing = tmp_path / "missing.yaml"
    code, out, err = run_cli("estimate", str(missing))
    assert (code, out) == (2, "")  # an unreadable file exits 2, as lint does
    assert err.splitlines()[0] == f"{missing}:1:1: GP009 [error] cannot read {missing}: no such file"
    assert err.splitlines()[-1] == f"gpuplan: no estimate: {missing} has problems that stop it (above)"


def test_fail_on_warning_fails_on_warnings(write_spec):
    path = write_spec(VALID_SERVE.replace("concurrency: 8", "concurrency: 8\n  category: long-context"))
    code, out, _ = run_cli("lint", str(path))
    assert code == 0 and "GP401 [warning]" in out
    assert run_cli("lint", "--fail-on", "warning", str(path))[0] == 1
    assert run_cli("lint", "--ignore", "GP4", "--fail-on", "warning", str(path))[0] == 0


def test_a_reader_that_goes_away_is_no_internal_error():
    """`gpuplan explain CODE | head -1`: the pipe closes early; no trace, no 'internal error' on stderr."""
    import subprocess

    gpuplan = shutil.which("gpuplan", path=str(Path(sys.executable).parent)) or "gpuplan"
    completed = subprocess.run(
        f"{gpuplan} lint {EXAMPLES} | head -c 1 >/dev/null; {gpuplan} explain GP507 | head -c 1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.stderr == "" and completed.stdout == "G"


def test_a_reader_that_goes_away_leaves_the_exit_code(tmp_path: Path):
    """`set -o pipefail; gpuplan CMD ... 2>&1 | true` (a reader gone before the first line) exits with the
    command's own code: 2 for a spec that cannot be read and for a plan of a spec that does not resolve,
    where click alone exits 1 at the first write to the closed pipe, as if there were findings."""
    import subprocess

    gpuplan = shutil.which("gpuplan", path=str(Path(sys.executable).parent)) or "gpuplan"
    typo = tmp_path / "typo.yaml"
    typo.write_text((EXAMPLES / "serve-llama-70b.yaml").read_text().replace("model:", "modle:", 1))
    for command in (f"estimate {tmp_path / 'missing.yaml'}", f"plan {typo}"):
        completed = subprocess.run(
            ["bash", "-c", f"set -o pipefail; {gpuplan} {command} 2>&1 | true"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert completed.returncode == 2, (command, completed.stderr)


def test_a_closed_output_descriptor_is_no_internal_error():
    """`gpuplan CMD >&-` or `2>&-` (a CI step that closes a stream): Python then has no stream at all, and the
    first write was an AttributeError on None: `rules` printed a trace, every command exited 120, a clean lint
    too. What would go to a closed stream goes nowhere, and each command exits with its own code."""
    import subprocess

    gpuplan = shutil.which("gpuplan", path=str(Path(sys.executable).parent)) or "gpuplan"
    clean, failing = EXAMPLES / "serve-llama-70b.yaml", EXAMPLES / "findings" / "budget-over.yaml"
    for command, code in (("rules", 0), (f"lint {clean}", 0), (f"lint {failing}", 1), ("catalog gpus", 0)):
        for closed in (">&-", "2>&-", ">&- 2>&-"):
            completed = subprocess.run(
                ["bash", "-c", f"{gpuplan} {command} {closed}"], capture_output=True, text=True, timeout=120
            )
            assert completed.returncode == code, (command, closed, completed.stderr)
            assert "Traceback" not in completed.stderr and "internal error" not in completed.stderr


def test_a_symlinked_spec_is_governed_by_its_targets_configuration(tmp_path: Path):
    # Specs of one folder share the configuration search, except a symlink, which follows its target:
    # a/ ignores GP301 and b/ does not, so of two copies of a spec that needs tensor parallelism (GP301)
    # in b/, the one linked from a/ loses its GP301 and b/'s own keeps it, in either order.
    spec = (EXAMPLES / "findings" / "fit-70b-on-one-h100.yaml").read_text()
    for folder, config in (("a", "ignore: [GP301]\n"), ("b", "fail-on: error\n")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / ".gpuplan.yaml").write_text(config)
    (tmp_path / ".git").mkdir(exist_ok=True)
    (tmp_path / "a" / "spec.yaml").write_text(spec)
    (tmp_path / "b" / "own.yaml").write_text(spec)
    (tmp_path / "b" / "linked.yaml").symlink_to(tmp_path / "a" / "spec.yaml")
    own, linked = str(tmp_path / "b" / "own.yaml"), str(tmp_path / "b" / "linked.yaml")
    for order in ((own, linked), (linked, own)):
        _, out, _ = run_cli("lint", "--format", "json", *order)
        codes: dict[str, set[str]] = {own: set(), linked: set()}
        for finding in json.loads(out)["findings"]:
            codes[finding["file"]].add(finding["code"])
        assert "GP301" in codes[own] and "GP301" not in codes[linked], (order, codes)


def test_each_spec_fails_a_run_at_its_own_configurations_level(tmp_path: Path):
    # p/ fails on warnings and holds a spec with none; q/ fails on errors and holds one with a warning (GP507).
    # Each passes alone, but together the run failed: the strictest fail-on was applied to every file, so a
    # pre-commit result depended on which files were staged together. --fail-on still sets every file's level.
    (tmp_path / ".git").mkdir(exist_ok=True)
    for folder, config, example in (("p", "warning", "finetune-llama-8b-lora"), ("q", "error", "serve-llama-70b")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / ".gpuplan.yaml").write_text(f"fail-on: {config}\n")
        (tmp_path / folder / "spec.yaml").write_text((EXAMPLES / f"{example}.yaml").read_text())
    p, q = str(tmp_path / "p"), str(tmp_path / "q")
    _, out, _ = run_cli("lint", q)
    assert "GP507 [warning]" in out
    assert [run_cli("lint", *paths)[0] for paths in ([p], [q], [p, q], [q, p])] == [0, 0, 0, 0]
    assert run_cli("lint", "--fail-on", "warning", p, q)[0] == 1


@pytest.mark.parametrize("text", ["", "# gpuplan settings, to fill in\n", "---\n"])
def test_a_configuration_that_holds_nothing_means_the_defaults(tmp_path: Path, text: str):
    # An empty or comment-only .gpuplan.yaml (a template's placeholder) sets nothing, as {} does: the spec
    # below it is linted with the defaults (exit 0 and no GP012), not stopped with exit 2.
    (tmp_path / ".gpuplan.yaml").write_text(text)  # tmp_path is a repository root (conftest): the search stops
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "s.yaml"
    spec.write_text((EXAMPLES / "serve-llama-70b.yaml").read_text())
    code, out, _ = run_cli("lint", "--format", "json", str(spec))
    assert code == 0 and "GP012" not in out


def test_the_command_list_is_not_cut_off():
    # click cuts a command's first docstring line to fit an 80-column terminal ("Show what a change to
    # specs does to memory, speed, cost,..."); every command carries a summary that fits whole.
    code, out, _ = run_cli("--help")
    commands = out[out.index("Commands:") :].splitlines()[1:]
    assert code == 0 and len(commands) >= 11
    for line in commands:
        assert not line.rstrip().endswith("..."), line
        assert len(line) <= 80, line


@pytest.mark.parametrize("command", ["estimate", "plan", "report", "verify"])
def test_a_one_spec_command_refuses_a_folder_before_reading_it(tmp_path, command):
    # lint searches a folder for specs; the commands that take one SPEC refuse one with a usage error (two
    # specs in a folder were an internal error; one was taken, and report wrote <folder>.pdf beside it).
    folder = tmp_path / "specs"
    folder.mkdir()
    for name in ("a.yaml", "b.yaml"):
        (folder / name).write_text((EXAMPLES / "serve-llama-70b.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    code, _, err = run_cli(command, str(folder), *(["run.log"] if command == "verify" else []))
    assert code == 2 and "is a directory" in err and "internal error" not in err
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["specs"]


@pytest.mark.parametrize(
    "args",
    [
        ["estimate", ""],
        ["plan", ""],
        ["report", ""],
        ["report", "--pdf", ""],
        ["verify", "", "--run", "run.log"],
        ["lint", ""],
        ["diff", ""],
        ["lint", "--config", "", "a.yaml"],
        ["plan", "--config", "", "a.yaml"],
        ["report", "-o", "", "a.yaml"],
        ["init", "--model", "llama-3.1-8b", "--serve", "--gpu", "l4", ""],
    ],
)
def test_an_empty_path_is_a_usage_error_not_the_current_folder(tmp_path, monkeypatch, args):
    # A shell passes '' for an unset variable (`gpuplan plan "$SPEC"`), which the file system reads as the
    # current folder: with two specs there the one-spec commands were an internal error ("too many values to
    # unpack"), with one they took it, `report --pdf ''` failed on "PosixPath('.') has an empty name" and
    # `lint ''` linted the whole folder. Every path argument and option refuses it before reading anything.
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text((EXAMPLES / "serve-llama-70b.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(*args)
    assert code == 2 and "'' names no path (an unset variable?)" in err and "internal error" not in err, err
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert out == "" and left == ["a.yaml", "b.yaml"]


def test_report_of_a_spec_it_cannot_read_writes_nothing(tmp_path):
    # A report on a file that is not there once came out as a CANNOT APPROVE PDF with the SHA-256 of empty
    # input as the spec's hash; it is an error on standard error, exit 2, and no file.
    code, _, err = run_cli("report", str(tmp_path / "nope.yaml"), "--md", "-o", str(tmp_path / "out.md"))
    assert code == 2 and "no report: cannot read" in err and "no such file" in err
    assert [p for p in tmp_path.iterdir() if not p.name.startswith(".")] == []


@pytest.mark.parametrize("args", [(), ("catalog",)])
def test_a_group_given_no_command_prints_its_help_not_an_escaped_line(args):
    # click 8.2 reports a group with no command as a usage error whose message is the whole help: squeezed
    # through the one-line error printer it came out as "gpuplan: error: Usage: ...\n\n  Lint ...".
    code, _, err = run_cli(*args)
    first = err.splitlines()[0]  # the program's name is the test runner's here
    assert code == 2 and first.startswith("Usage: ") and first.endswith(f"{' '.join(args)} [OPTIONS] COMMAND [ARGS]...")
    assert "\\n" not in err and "gpuplan: error" not in err and "Commands:" in err


def test_init_refusing_a_system_folder_speaks_of_the_spec(tmp_path):
    # init shares report's guard against writing into /proc, /sys or /dev; its message spoke of "a report"
    # and of "-o -", which init does not have (its way to print is PATH '-').
    code, _, err = run_cli("init", "--model", "llama-3.1-8b", "--serve", "--gpu", "l40s", "/proc/nope.yaml")
    assert code == 2 and "refusing to write a spec into /proc; use PATH - for standard output" in err


def test_counts_read_in_their_number_and_with_thousands_separators(write_spec):
    # A review's finds: "at 1 sequences on l4", "1 GPUs is not a multiple of ...", "5000 x 131,072 tokens ...
    # or 128 tokens at 5000" beside GP403's "5,000 in flight". One sequence is a sequence; a count has commas.
    one = write_spec(
        "version: 1\nname: p\nmodel: {id: llama-3.2-1b}\n"
        "serve: {context: 2048, output_tokens: 128, concurrency: 1, slo: {ttft_ms: 1, tpot_ms: 1},"
        " hardware: {gpu: l4, count: 1, tensor_parallel: 2}}\n",
        name="one.yaml",
    )
    _, out, _ = run_cli("lint", str(one))
    assert "1 GPU is not a multiple of tensor_parallel x pipeline_parallel = 2" in out, out
    one.write_text(one.read_text().replace(", tensor_parallel: 2", ""))
    _, out, _ = run_cli("lint", str(one))
    assert " at 1 sequence on l4 " in out and "1 sequences" not in out, out
    many = write_spec(
        "version: 1\nname: m\nmodel: {id: llama-3.1-8b}\n"
        "serve: {context: 131072, concurrency: 5000, hardware: {gpu: h100-sxm, count: 1}}\n",
        name="many.yaml",
    )
    _, out, _ = run_cli("lint", str(many))
    assert "GP203" in out and "5,000 x 131,072 tokens need" in out and "tokens at 5,000" in out, out
