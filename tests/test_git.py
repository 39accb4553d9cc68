"""The one git runner (gpuplan.git): the report's record of the spec's commit and ``gpuplan diff --git``
both use it, in repositories whose paths hold spaces."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import EXAMPLES, run_cli

from gpuplan.decision.audit import git_state
from gpuplan.diff.git import Repository
from gpuplan.errors import GpuplanError
from gpuplan.git import run_git


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def spaced_repo(tmp_path: Path) -> Path:
    """A repository at ``my infra repo/`` (spaces in the path) holding one committed spec."""
    root = tmp_path / "my infra repo"
    (root / "specs dir").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "ci@example.com")
    git(root, "config", "user.name", "CI")
    (root / "specs dir" / "serve.yaml").write_bytes((EXAMPLES / "serve-llama-70b.yaml").read_bytes())
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "one spec")
    return root


def test_the_report_records_the_commit_of_a_spec_in_a_path_with_spaces(spaced_repo: Path):
    spec = spaced_repo / "specs dir" / "serve.yaml"
    head = git(spaced_repo, "rev-parse", "HEAD").strip()
    state = git_state(spec)
    assert state is not None, "a repository path with a space was read as 'not in a git repository'"
    assert (state.commit, state.path, state.status) == (head, "specs dir/serve.yaml", "committed")
    spec.write_text(spec.read_text() + "# edited\n")
    assert git_state(spec).status == "modified since this commit"  # type: ignore[union-attr]
    extra = spaced_repo / "specs dir" / "new one.yaml"
    extra.write_bytes(spec.read_bytes())
    assert git_state(extra).status == "not committed"  # type: ignore[union-attr]


def test_the_report_page_names_the_commit_in_a_path_with_spaces(spaced_repo: Path):
    head = git(spaced_repo, "rev-parse", "HEAD").strip()
    _, out, _ = run_cli("report", str(spaced_repo / "specs dir" / "serve.yaml"))
    assert f"commit {head}, specs dir/serve.yaml (committed)" in out


def test_outside_a_repository_the_report_says_so(tmp_path: Path):
    spec = tmp_path / "serve.yaml"
    spec.write_bytes((EXAMPLES / "serve-llama-70b.yaml").read_bytes())
    assert git_state(spec) is None


def test_diff_finds_the_repository_and_its_changes_in_a_path_with_spaces(spaced_repo: Path):
    repository = Repository.find(spaced_repo / "specs dir")
    assert repository.root == spaced_repo.resolve()
    (spaced_repo / "specs dir" / "serve.yaml").write_text("version: 1\n")
    changes = repository.changes(repository.commit("HEAD"), None)
    assert [(c.status, c.new_path) for c in changes] == [("M", "specs dir/serve.yaml")]


def test_a_failing_git_command_is_one_line_naming_it(tmp_path: Path):
    with pytest.raises(GpuplanError) as raised:
        run_git(["rev-parse", "--verify", "no-such-revision"], tmp_path)
    assert str(raised.value).startswith("git rev-parse failed: ")
    assert "\n" not in str(raised.value)
    assert run_git(["rev-parse", "--verify", "x"], tmp_path, check=False).returncode != 0


def test_git_missing_is_an_error_not_a_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on this PATH
    with pytest.raises(GpuplanError, match="git is not installed"):
        run_git(["status"], tmp_path)
    assert git_state(tmp_path / "spec.yaml") is None


def test_a_missing_folder_is_named_not_read_as_git_missing(tmp_path: Path):
    with pytest.raises(GpuplanError, match=r"cannot run git in .*gone: no such folder"):
        run_git(["status"], tmp_path / "gone")
