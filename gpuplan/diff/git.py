"""Just enough git for ``gpuplan diff --git``: the repository, revisions, changed paths and file contents.

git runs as a subprocess (no library dependency). Contents come from git's object store
(``git cat-file --batch``), so nothing is checked out and the working tree is never touched.
Every failure is a GpuplanError in one line (exit 2 at the command line).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gpuplan.errors import GpuplanError
from gpuplan.reading import SPEC_MAX_BYTES, ReadRefused, read_head

GIT_TIMEOUT_S = 120  # a diff of a large repository takes seconds; a hung credential helper must not hang us
# Where the default branch is looked for when origin/HEAD is not set (a clone made by CI often lacks it).
DEFAULT_BRANCH_CANDIDATES = ("origin/main", "origin/master", "main", "master")
_ENVIRONMENT = {
    "GIT_OPTIONAL_LOCKS": "0",  # `git diff` against the working tree must not take the index lock
    "GIT_TERMINAL_PROMPT": "0",  # never wait for a password
    "LC_ALL": "C",  # messages we quote are git's own English ones
}


@dataclass(frozen=True)
class Change:
    """One path git reports between two trees: A(dded), D(eleted), M(odified) or R(enamed)."""

    status: str
    old_path: str | None
    new_path: str | None


@dataclass(frozen=True)
class Repository:
    """A git work tree, driven from ``cwd`` (pathspecs are relative to it)."""

    root: Path
    cwd: Path

    @classmethod
    def find(cls, cwd: Path | None = None) -> Repository:
        """The repository around ``cwd``; GpuplanError outside one or without git."""
        here = (cwd or Path.cwd()).resolve()
        completed = _run(["rev-parse", "--show-toplevel"], here, check=False)
        if completed.returncode != 0:
            raise GpuplanError(f"not inside a git repository ({here}); run gpuplan diff --git in one")
        return cls(Path(completed.stdout.decode().strip()), here)

    def git(self, *args: str, stdin: bytes | None = None) -> bytes:
        return _run(list(args), self.cwd, stdin=stdin).stdout

    def commit(self, revision: str) -> str:
        """The commit id ``revision`` names; GpuplanError when it names none."""
        if not revision or revision.startswith("-"):
            raise GpuplanError(f"not a git revision: {revision!r}")
        completed = _run(["rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], self.cwd, check=False)
        if completed.returncode != 0:
            raise GpuplanError(f"unknown git revision {revision!r} (not a branch, tag or commit in {self.root})")
        return completed.stdout.decode().strip()

    def default_branch(self) -> str:
        """origin/HEAD's branch, else the first of DEFAULT_BRANCH_CANDIDATES that exists."""
        completed = _run(["symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"], self.cwd, check=False)
        if completed.returncode == 0 and completed.stdout.strip():
            return completed.stdout.decode().strip()
        for candidate in DEFAULT_BRANCH_CANDIDATES:
            found = _run(["rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}"], self.cwd, check=False)
            if found.returncode == 0:
                return candidate
        raise GpuplanError(
            "cannot tell the default branch (no origin/HEAD, origin/main, origin/master, main or master); "
            "name the base: gpuplan diff --git REF"
        )

    def merge_base(self, first: str, second: str) -> str:
        completed = _run(["merge-base", first, second], self.cwd, check=False)
        if completed.returncode != 0:
            raise GpuplanError(
                f"{first} and {second} have no common ancestor here (a shallow clone? fetch with full history)"
            )
        return completed.stdout.decode().strip()

    def changes(self, base: str, head: str | None, pathspecs: Iterable[str] = ()) -> list[Change]:
        """Paths added, deleted, modified or renamed from ``base`` to ``head`` (None: the working tree)."""
        args = ["diff", "--name-status", "-z", "-M", "--no-ext-diff", "--no-relative", "--no-color", base]
        if head is not None:
            args.append(head)
        output = self.git(*args, "--", *pathspecs).decode("utf-8", "surrogateescape")
        fields = output.split("\0")
        changes = []
        index = 0
        while index < len(fields) and fields[index]:
            status = fields[index][0]
            if status in "RC":
                old, new = fields[index + 1], fields[index + 2]
                changes.append(Change("R" if status == "R" else "A", old if status == "R" else None, new))
                index += 3
                continue
            path = fields[index + 1]
            if status == "A":
                changes.append(Change("A", None, path))
            elif status == "D":
                changes.append(Change("D", path, None))
            else:  # M, T (type change), U (unmerged): the path's content differs
                changes.append(Change("M", path, path))
            index += 2
        if head is None:
            listed = self.git("ls-files", "--others", "--exclude-standard", "-z", "--full-name", "--", *pathspecs)
            untracked = listed.decode("utf-8", "surrogateescape").split("\0")
            changes.extend(Change("A", None, path) for path in untracked if path)
        return changes

    def read(self, revision: str | None, paths: Iterable[str]) -> dict[str, bytes | None]:
        """Each path's bytes at ``revision`` (None: the working tree); None where the path is absent."""
        wanted = list(dict.fromkeys(paths))
        if revision is None:
            return {path: read_working_file(self.root / path) for path in wanted}
        # The batch protocol is line-based: a path with a newline in its name is read on its own.
        batched = [path for path in wanted if "\n" not in path]
        found: dict[str, bytes | None] = {path: self._blob(f"{revision}:{path}") for path in wanted if "\n" in path}
        if batched:
            request = b"".join(f"{revision}:{path}\n".encode("utf-8", "surrogateescape") for path in batched)
            answers = _parse_batch(self.git("cat-file", "--batch", stdin=request), len(batched))
            found.update(zip(batched, answers, strict=True))
        return {path: found[path] for path in wanted}

    def _blob(self, name: str) -> bytes | None:
        completed = _run(["cat-file", "blob", name], self.cwd, check=False)
        return completed.stdout if completed.returncode == 0 else None


def _parse_batch(output: bytes, count: int) -> list[bytes | None]:
    """``git cat-file --batch`` answers: '<id> <type> <size>\\n<bytes>\\n' or '<name> missing\\n' per request."""
    contents: list[bytes | None] = []
    offset = 0
    for _ in range(count):
        end = output.index(b"\n", offset)
        header = output[offset:end].split(b" ")
        offset = end + 1
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            contents.append(output[offset : offset + size])
            offset += size + 1
        elif len(header) == 3:  # a tree or commit at that path: its content follows, but it is no file
            offset += int(header[2]) + 1
            contents.append(None)
        else:  # "<name> missing" (or "ambiguous")
            contents.append(None)
    return contents


def read_working_file(path: Path) -> bytes | None:
    """A file's bytes, None where there is none; bounded (one byte past the spec limit, which linting
    then reports as GP003) and never blocking on a FIFO or device. GpuplanError when it cannot be read."""
    if not os.path.lexists(path):
        return None
    try:
        return read_head(path, SPEC_MAX_BYTES + 1)
    except ReadRefused as refused:
        raise GpuplanError(f"cannot read {path}: {refused.reason}") from None


def _run(
    args: list[str], cwd: Path, *, stdin: bytes | None = None, check: bool = True
) -> subprocess.CompletedProcess[bytes]:
    try:
        completed = subprocess.run(
            ["git", *args],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            env={**os.environ, **_ENVIRONMENT},
            timeout=GIT_TIMEOUT_S,
        )
    except FileNotFoundError:
        raise GpuplanError("git is not installed (gpuplan diff --git runs the git command)") from None
    except subprocess.TimeoutExpired:
        raise GpuplanError(f"git {args[0]} did not finish within {GIT_TIMEOUT_S} s") from None
    if check and completed.returncode != 0:
        message = completed.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GpuplanError(f"git {args[0]} failed: {message[-1] if message else f'exit {completed.returncode}'}")
    return completed
