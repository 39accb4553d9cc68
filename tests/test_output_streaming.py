"""Text and GitHub output print each file's findings as it is linted and keep none of them; json and
sarif print one document at the end. The two ways give the same output and exit code."""

from __future__ import annotations

import dataclasses
import importlib
import json
import shutil
import subprocess
import sys
import time

import pytest
from conftest import EXAMPLES, gpuplan_executable, run_cli

from gpuplan.findings import Finding, Severity, Waiver
from gpuplan.linter import LintResult
from gpuplan.output import FORMAT_MODULES, STREAMED, github, text
from gpuplan.output.summary import RunSummary, Tally, printed, tally_of
from gpuplan.run import LintRun


def _finding(code: str, waived: bool = False) -> Finding:
    finding = Finding.make(code, f"{code} message", path="spec.yaml", line=3, col=5, hint="a hint")
    return dataclasses.replace(finding, waiver=Waiver(code, "accepted", "lead")) if waived else finding


def test_a_file_is_printed_before_the_next_is_linted():
    pulled = []

    def results():
        for name in ("a.yaml", "b.yaml"):
            pulled.append(name)
            yield LintResult(name, (_finding("GP201"),))

    chunks = printed(text.result_text, text.end_text, results(), Severity.ERROR, quiet=False)
    first, tally = next(chunks)
    assert pulled == ["a.yaml"] and "GP201" in first and tally.files == 1
    assert [tally.files for _, tally in chunks] == [2, 2]  # b.yaml, then the summary line
    assert pulled == ["a.yaml", "b.yaml"]


def test_the_tally_counts_as_the_findings_read():
    # One error, one waived error, a warning and an info in the first file; an unreadable second file.
    results = (
        LintResult("a.yaml", (_finding("GP201"), _finding("GP201", waived=True), _finding("GP302"), _finding("GP504"))),
        LintResult("b.yaml", (_finding("GP009"),)),
    )
    tally = tally_of(results, Severity.ERROR)
    assert (tally.files, tally.findings, tally.errors, tally.warnings, tally.infos, tally.waived) == (2, 5, 2, 1, 1, 1)
    assert tally.failed and tally.unchecked and tally.exit_code == 2
    assert tally.line() == "failed: 2 errors, 1 warning, 1 info, 1 waived in 2 files"
    # Waived findings never fail a run; at fail-on info the warning and info do.
    assert tally_of(results[:1], Severity.ERROR).exit_code == 1
    waived_only = (LintResult("c.yaml", (_finding("GP201", waived=True),)),)
    assert tally_of(waived_only, Severity.INFO).exit_code == 0
    assert Tally(Severity.ERROR).line() == "passed: 0 errors, 0 warnings, 0 info in 0 files"


@pytest.mark.parametrize("module", [text, github], ids=["text", "github"])
def test_a_streamed_format_prints_what_its_whole_render_prints(module):
    results = (
        LintResult("a.yaml", (_finding("GP201"), _finding("GP302", waived=True))),
        LintResult("b.yaml", ()),
    )
    summary = RunSummary(results, Severity.ERROR)
    streamed = "".join(
        chunk for chunk, _ in printed(module.result_text, module.end_text, results, Severity.ERROR, False)
    )
    assert streamed == module.render(summary)
    assert streamed.endswith("failed: 1 error, 0 warnings, 0 info, 1 waived in 2 files\n")


def test_quiet_text_prints_nothing_for_a_clean_run_and_github_still_says_it_ran():
    clean = (LintResult("a.yaml", ()),)
    assert text.render(RunSummary(clean, Severity.ERROR, quiet=True)) == ""
    assert (
        github.render(RunSummary(clean, Severity.ERROR, quiet=True))
        == "passed: 0 errors, 0 warnings, 0 info in 1 file\n"
    )


@pytest.mark.parametrize(
    ("output_format", "keeps"), [("text", False), ("github", False), ("json", True), ("sarif", True)]
)
def test_only_the_formats_printed_at_the_end_keep_the_results(monkeypatch, tmp_path, output_format, keeps):
    for example in ("serve-llama-70b.yaml", "finetune-llama-8b-lora.yaml"):
        shutil.copy(EXAMPLES / example, tmp_path / example)
    kept = []
    original = LintRun.summary

    def spy(self, quiet=False):
        kept.append(True)
        return original(self, quiet)

    monkeypatch.setattr(LintRun, "summary", spy)
    code, out, _ = run_cli("lint", "--format", output_format, str(tmp_path))
    assert code == 0 and bool(kept) is keeps
    if output_format == "json":
        assert json.loads(out)["summary"]["files"] == 2
    elif output_format == "sarif":
        assert {result["ruleId"] for result in json.loads(out)["runs"][0]["results"]} >= {"GP504", "GP507"}
    else:
        assert "2 files" in out


def test_the_streamed_formats_are_the_ones_that_print_file_by_file():
    for name, module_name in FORMAT_MODULES.items():
        module = importlib.import_module(f"gpuplan.output.{module_name}")
        assert (name in STREAMED) is hasattr(module, "result_text") is hasattr(module, "end_text"), name


@pytest.mark.parametrize(
    ("output_format", "unreadable", "expected"), [("text", False, 0), ("text", True, 2), ("json", True, 2)]
)
def test_a_reader_that_goes_away_leaves_the_runs_exit_code(tmp_path, output_format, unreadable, expected):
    # 300 specs print about 130 KB (json about 400 KB), more than a pipe holds: after the reader closes
    # its end (`| head -1`) the next write fails. The run goes on silently and exits with its own code, as
    # `set -o pipefail` reads it: 0 for specs that only warn, 2 when one file cannot be read.
    text = (EXAMPLES / "serve-llama-70b.yaml").read_text()
    for index in range(300):
        (tmp_path / f"spec{index:03d}.yaml").write_text(text)
    # Named last, a dangling link is read after the reader has gone (a folder's search skips it).
    dangling = tmp_path.parent / f"{tmp_path.name}-dangling.yaml"
    dangling.symlink_to(tmp_path / "missing.yaml")
    command = [gpuplan_executable(), "lint", "--format", output_format, str(tmp_path)]
    command += [str(dangling)] if unreadable else []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        assert "GP507" in process.stdout.readline().decode() or output_format == "json"
        process.stdout.close()
        errors = process.stderr.read()
        assert process.wait(timeout=120) == expected
    assert errors == b""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
def test_a_lint_worker_ends_when_the_lint_that_started_it_is_killed(tmp_path):
    # A lint killed by a hook's or CI's timeout (SIGKILL: no cleanup runs) left its forked workers linting the chunks
    # they held, for over a minute at `lint /`. Each worker starts with end_with_parent: here a process forks a
    # "worker" that runs it and then sleeps for a minute, and kills itself; the worker must be gone at once.
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, signal, sys, time\n"
        "from gpuplan.run import end_with_parent\n"
        "parent = os.getpid()\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    end_with_parent(parent)\n"
        "    time.sleep(60)\n"
        "    os._exit(0)\n"
        "print(child, flush=True)\n"
        "time.sleep(0.5)\n"  # the worker has asked for the signal
        "os.kill(parent, signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
    worker = int(done.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(worker):
        time.sleep(0.05)
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, reaped by init soon, counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
