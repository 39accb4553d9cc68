"""The CI recipes in examples/ci/: valid against their published schemas (check-jsonschema's vendored copies,
no network), their gpuplan commands are real command lines, and the README shows them as they are."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml
from conftest import ROOT

from gpuplan.cli import cli

RECIPES = {
    "github-actions.yml": "vendor.github-workflows",
    "gitlab-ci.yml": "vendor.gitlab-ci",
}
CI = ROOT / "examples" / "ci"


def check(schema: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("name", list(RECIPES))
def test_recipe_is_valid_against_its_published_schema(name: str):
    completed = check(RECIPES[name], CI / name)
    assert completed.returncode == 0, completed.stdout + completed.stderr


@pytest.mark.parametrize("name", list(RECIPES))
def test_schema_check_fails_on_a_broken_recipe(name: str, tmp_path: Path):
    """The check above can fail: the same recipe with its job's steps/script misspelled is refused."""
    broken = tmp_path / name
    text = (CI / name).read_text()
    broken.write_text(
        text.replace("runs-on:", "run-on:") if "runs-on" in text else text.replace("  script:", "  scripts:")
    )
    assert check(RECIPES[name], broken).returncode == 1


def commands(name: str) -> list[str]:
    """Every gpuplan command line in a recipe's shell steps."""
    data = yaml.safe_load((CI / name).read_text())
    scripts: list[str] = []
    for job in data.get("jobs", {}).values():
        scripts += [step["run"] for step in job.get("steps", []) if "run" in step]
    for job in data.values():
        if isinstance(job, dict) and "script" in job:
            scripts += job["script"] + job.get("before_script", [])
    found = []
    for script in scripts:
        for line in script.splitlines():
            match = re.search(r"\bgpuplan (lint|diff|report|init)\b[^>|]*", line)
            if match:
                found.append(match.group(0).strip())
    return found


@pytest.mark.parametrize("name", list(RECIPES))
def test_recipe_commands_parse(name: str):
    found = commands(name)
    assert any(c.startswith("gpuplan lint") for c in found)
    assert any(c.startswith("gpuplan diff --git") and "--format markdown" in c for c in found)
    for command in found:
        args = shlex.split(re.sub(r"\$\{?(\w+)\}?", r"\1", command))[1:]
        context = cli.make_context("gpuplan", args, resilient_parsing=False)
        subcommand = cli.get_command(context, args[0])
        assert isinstance(subcommand, click.Command)
        subcommand.make_context(args[0], args[1:], parent=context)  # raises on an unknown option


def test_github_recipe_posts_the_diff_of_the_base_branch():
    text = (CI / "github-actions.yml").read_text()
    assert "BASE_REF: ${{ github.base_ref }}" in text
    assert 'gpuplan diff --git "origin/$BASE_REF" --format markdown' in text
    assert "gpuplan lint --format sarif . > gpuplan.sarif" in text
    assert "github/codeql-action/upload-sarif" in text
    # A fork's pull request has a read-only token: the steps that write (the SARIF upload, the comment) would
    # fail the job with 403, so both are skipped for it and the last step alone judges it.
    for step in ("uses: github/codeql-action/upload-sarif@v3", "name: Comment on the pull request"):
        condition = text.split(step, 1)[1].split("\n        if: ", 1)[1].split("\n", 1)[0]
        assert "!github.event.pull_request.head.repo.fork" in condition, step


@pytest.mark.parametrize("name", list(RECIPES))
def test_readme_shows_the_recipes_as_they_are(name: str):
    assert (CI / name).read_text() in (ROOT / "README.md").read_text()
