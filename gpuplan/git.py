"""The one way gpuplan runs git: ``gpuplan diff --git`` reads revisions with it, a report records the
spec's commit with it.

git runs as a subprocess (no library dependency), read-only (no optional locks, so no index refresh),
never prompting, with its messages in English (they are quoted), and under a timeout. Every failure is a
GpuplanError in one line; a caller that can do without git (a report) catches it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from gpuplan.errors import GpuplanError

GIT_TIMEOUT_S = 120  # a diff of a large repository takes seconds; a hung credential helper must not hang us
GIT_ENVIRONMENT = {
    "GIT_OPTIONAL_LOCKS": "0",  # reading must not take the index lock (nor refresh the index)
    "GIT_TERMINAL_PROMPT": "0",  # never wait for a password
    "LC_ALL": "C",  # messages we quote are git's own English ones
}


def git_environment() -> dict[str, str]:
    return {**os.environ, **GIT_ENVIRONMENT}


def run_git(
    args: list[str], cwd: Path, *, stdin: bytes | None = None, check: bool = True, timeout: float = GIT_TIMEOUT_S
) -> subprocess.CompletedProcess[bytes]:
    """``git ARGS`` in ``cwd``; GpuplanError when git is missing, times out, or (``check``) fails."""
    try:
        completed = subprocess.run(
            ["git", *args], cwd=cwd, input=stdin, capture_output=True, env=git_environment(), timeout=timeout
        )
    except (FileNotFoundError, NotADirectoryError):
        # The same errors say that git is missing or that the folder it would run in is: tell which.
        if shutil.which("git") is None:
            raise GpuplanError("git is not installed (gpuplan runs the git command)") from None
        raise GpuplanError(f"cannot run git in {cwd}: no such folder") from None
    except OSError as error:
        raise GpuplanError(f"cannot run git: {error.strerror or error}") from None
    except subprocess.TimeoutExpired:
        raise GpuplanError(f"git {args[0]} did not finish within {timeout:g} s") from None
    if check and completed.returncode != 0:
        message = completed.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GpuplanError(f"git {args[0]} failed: {message[-1] if message else f'exit {completed.returncode}'}")
    return completed
