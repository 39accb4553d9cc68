"""Rules that select/ignore leave out are not run, and leaving them out changes nothing else.

A rule's check yields only its own code, so skipping the check of an unselected code can hide nothing
a user would see; the one visible difference is that a waiver of an unselected code is no longer
judged unused (GP702): its rule did not run, so whether it matches is unknown.
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace

import pytest
from conftest import EXAMPLES, ROOT, run_cli

import gpuplan.rules.registry as registry
from gpuplan.linter import LintOptions, lint_bytes, lint_path

sys.path.insert(0, str(ROOT / "benchmarks"))

import corpus

FAMILIES = ("GP2", "GP3", "GP4", "GP5", "GP6", "GP7")


@pytest.fixture(scope="module")
def specs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The examples and 40 corpus specs: serving and fine-tuning, fitting and not, with waivers."""
    folder = tmp_path_factory.mktemp("corpus")
    written = corpus.write_corpus(folder, 40, seed=7)
    return sorted(str(path) for path in (ROOT / "examples").glob("*.yaml")) + [str(path) for path in written]


def _shown(result) -> list[tuple[str, int, int, str, bool]]:
    return [(f.code, f.line, f.col, f.message, f.waived) for f in result.findings]


def test_every_check_yields_only_its_own_code(specs, monkeypatch):
    # The premise of skipping a check: the codes it can produce are exactly the one it is registered
    # for. A check that also yielded another code would lose that code's findings when it is skipped.
    produced: dict[str, set[str]] = {}
    for code, entry in list(registry._REGISTRY.items()):
        if entry.check is None:
            continue

        def recording(context, check=entry.check, code=code):
            findings = list(check(context))
            produced.setdefault(code, set()).update(f.code for f in findings)
            return iter(findings)

        monkeypatch.setitem(registry._REGISTRY, code, entry._replace(check=recording))
    for path in specs:
        lint_path(path, LintOptions(use_waivers=False))
    assert sum(1 for codes in produced.values() if codes) >= 15, "the specs make most rules fire"
    for code, codes in produced.items():
        assert codes <= {code}, f"the check of {code} yielded {sorted(codes - {code})}"


@pytest.mark.parametrize("family", FAMILIES)
def test_ignoring_a_family_removes_its_findings_and_nothing_else(specs, family):
    for path in specs:
        everything = lint_path(path, LintOptions())
        ignored = lint_path(path, LintOptions(ignore=(family,)))
        expected = [
            shown
            for shown, finding in zip(_shown(everything), everything.findings, strict=True)
            if not finding.code.startswith(family) and not _waiver_of(finding, family)
        ]
        assert _shown(ignored) == expected, path


def _waiver_of(finding, family: str) -> bool:
    """A GP702 (unused waiver) of a code in ``family``: not judged once that family is ignored."""
    return finding.code == "GP702" and f"waiver of {family}" in finding.message


def test_an_ignored_rule_is_not_run(monkeypatch):
    # A check that raises would be a GP010 (internal error) finding; ignored, it is never called.
    def broken(context):
        raise RuntimeError("this check must not run")

    entry = registry._REGISTRY["GP507"]
    monkeypatch.setitem(registry._REGISTRY, "GP507", entry._replace(check=broken))
    spec = str(ROOT / "examples" / "serve-llama-70b.yaml")
    run = [f.code for f in lint_path(spec, LintOptions()).findings]
    assert "GP010" in run
    for options in (LintOptions(ignore=("GP507",)), LintOptions(ignore=("cheaper-layout-available",))):
        assert "GP010" not in [f.code for f in lint_path(spec, options).findings]
    assert "GP010" not in [f.code for f in lint_path(spec, LintOptions(select=("GP2", "GP3"))).findings]


def test_a_waiver_of_an_ignored_rule_is_not_called_unused():
    # serve-llama-70b.yaml gets no GP505 (its GPU is not oversized), so a waiver of GP505 is unused:
    # GP702 while GP505 runs; nothing once GP505 is ignored (by code or name), since its rule did not
    # run. A waiver of a rule that still runs keeps its GP702.
    text = (ROOT / "examples" / "serve-llama-70b.yaml").read_text()
    waivers = (
        "waivers:\n"
        "  - {rule: GP505, reason: accepted for the pilot, approved_by: lead}\n"
        "  - {rule: GP311, reason: accepted for the pilot, approved_by: lead}\n"
    )
    raw = (text.rstrip("\n") + "\n" + waivers).encode()
    options = LintOptions(today=None)

    def unused(result) -> list[str]:
        return [f.message for f in result.findings if f.code == "GP702"]

    everything = lint_bytes("spec.yaml", raw, options)
    assert unused(everything) == [
        "the waiver of GP505 matches no finding in this spec",
        "the waiver of GP311 matches no finding in this spec",
    ]
    for ignore in (("GP505",), ("oversized-serving-gpu",), ("GP50",)):
        ignored = lint_bytes("spec.yaml", raw, replace(options, ignore=ignore))
        assert unused(ignored) == ["the waiver of GP311 matches no finding in this spec"], ignore


def test_select_and_ignore_take_comma_separated_lists_as_ruff_does():
    # `--select GP024,GP025` was one unknown rule "GP024,GP025" with a suggestion of the two it named.
    spec = str(EXAMPLES / "serve-llama-70b.yaml")
    code, out, err = run_cli("lint", "--select", "GP504,GP507", spec)
    assert code == 0 and err == "" and {"GP504", "GP507"} == set(re.findall(r"GP\d{3}", out))
    code, out, _ = run_cli("lint", "--ignore", "GP504,GP507", spec)
    assert code == 0 and "GP504" not in out and "GP507" not in out
    code, _, err = run_cli("lint", "--select", "GP504,GP2O1", spec)
    assert code == 2 and "unknown rule 'GP2O1'; did you mean GP201" in err
    code, _, err = run_cli("lint", "--select", "GP504,", spec)
    assert code == 2 and "an empty pattern would match every rule" in err


def test_select_and_ignore_never_hide_a_file_that_was_not_checked(tmp_path):
    # README's own configuration, `select: [GP2, GP3]`, passed a spec with a YAML syntax error (and a missing file
    # exited 0): the rules it selects never ran on it. Input and schema findings say so whatever the patterns, as
    # ruff reports a file it cannot parse.
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: 1\nname: b\nmodel: {id: llama-3.1-8b}\nserve:\n  context: 8192\n concurrency: 8\n")
    code, out, _ = run_cli("lint", "--select", "GP2,GP3", str(broken))
    assert code == 1 and "GP001 [error] YAML syntax error" in out
    code, out, _ = run_cli("lint", "--ignore", "GP0", str(tmp_path / "missing.yaml"))
    assert code == 2 and "GP009 [error] cannot read" in out
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text((EXAMPLES / "serve-llama-70b.yaml").read_text().replace("h100-sxm", "h100-sxn"))
    code, out, _ = run_cli("lint", "--select", "GP5", str(unknown))
    assert code == 1 and "GP022 [error] unknown GPU 'h100-sxn'" in out


def test_a_rule_name_selects_in_any_case_as_the_configuration_accepts_it():
    # `--ignore Low-Headroom` was accepted (the configuration looks names up in any case) and matched nothing.
    spec = str(EXAMPLES / "findings" / "fit-low-headroom.yaml")
    code, out, _ = run_cli("lint", "--fail-on", "warning", spec)
    assert code == 1 and "GP202" in out
    for pattern in ("Low-Headroom", "LOW-HEADROOM", "gp202"):
        code, out, _ = run_cli("lint", "--fail-on", "warning", "--ignore", pattern, spec)
        assert "GP202" not in out, pattern
        _, out, _ = run_cli("lint", "--select", pattern, spec)
        assert "GP202" in out, pattern


def test_select_on_the_command_line_starts_afresh_as_ruffs_does(tmp_path):
    # A configuration's `ignore: [GP504]` hid GP504 from `--select GP504` (nothing reported, exit 0): the command
    # line could not undo the file, which ruff fixed in its own resolution (astral-sh/ruff#1245). `--ignore`
    # alone still adds to the configuration's ignores.
    (tmp_path / ".git").mkdir(exist_ok=True)
    spec = tmp_path / "spec.yaml"
    spec.write_text((EXAMPLES / "serve-llama-70b.yaml").read_text())  # GP504 (an old price) and GP507
    (tmp_path / ".gpuplan.yaml").write_text("ignore: [GP504]\n")
    _, out, _ = run_cli("lint", str(spec))
    assert "GP504" not in out and "GP507" in out
    _, out, _ = run_cli("lint", "--select", "GP504", str(spec))
    assert set(re.findall(r"GP\d{3}", out)) == {"GP504"}
    _, out, _ = run_cli("lint", "--ignore", "GP507", str(spec))
    assert "GP504" not in out and "GP507" not in out
