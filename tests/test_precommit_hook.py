"""The real pre-commit client runs the hook from this checkout on a throwaway repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, VALID_SERVE

pytestmark = pytest.mark.slow


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_try_repo_fails_on_bad_spec_then_passes(tmp_path: Path):
    repo = tmp_path / "infra"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "good.yaml").write_text(VALID_SERVE)
    (repo / "bad.yaml").write_text(VALID_SERVE.replace("concurrency: 8", "concurency: 8"))
    (repo / "deploy.yaml").write_text("kind: Deployment\n")  # other YAML in the repo is left alone
    _git(repo, "add", ".")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    pre_commit = shutil.which("pre-commit", path=str(Path(sys.executable).parent)) or "pre-commit"
    command = [pre_commit, "try-repo", str(ROOT), "gpuplan-lint", "--all-files"]
    failed = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "bad.yaml:7:3: GP101 [error] unknown key 'concurency' in serve" in failed.stdout
    assert "good.yaml" not in failed.stdout
    (repo / "bad.yaml").write_text(VALID_SERVE)
    _git(repo, "add", ".")
    passed = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert passed.returncode == 0, passed.stdout + passed.stderr
