"""Just enough git for ``gpuplan diff --git``: the repository, revisions, changed paths and file contents.

git runs through ``gpuplan.git``, the one runner the report shares. Contents come from git's object store (``git
cat-file --batch-check`` for the sizes, then ``--batch`` by object id, and only the head of a blob over the spec
limit), so nothing is checked out and the working tree is never touched. Every failure of git is a GpuplanError in one
line (exit 2 at the command line); a file that cannot be read is not a failure of the diff but an ``Unreadable``
content, which the diff reports as that side's finding.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

from gpuplan.errors import GpuplanError
from gpuplan.git import git_environment, run_git
from gpuplan.reading import SPEC_MAX_BYTES, ReadRefused, read_head
from gpuplan.records import record

# Where the default branch is looked for when origin/HEAD is not set (a clone made by CI often lacks it).
DEFAULT_BRANCH_CANDIDATES = ("origin/main", "origin/master", "main", "master")


@record
class Unreadable:
    """A working-tree path that is there but cannot be read as a file (a FIFO, a symlink loop, no permission):
    that side of the diff is a GP009 finding, as ``gpuplan lint`` has it, and the other specs are still compared."""

    reason: str


# A path's content on one side: its bytes (at most SPEC_MAX_BYTES + 1), Unreadable, or None when absent.
Content = bytes | Unreadable | None


@record
class Change:
    """One path git reports between two trees: A(dded), D(eleted), M(odified) or R(enamed)."""

    status: str
    old_path: str | None
    new_path: str | None


@record
class Repository:
    """A git work tree, driven from ``cwd`` (pathspecs are relative to it)."""

    root: Path
    cwd: Path

    @classmethod
    def find(cls, cwd: Path | None = None) -> Repository:
        """The repository around ``cwd``; GpuplanError outside one or without git."""
        here = (cwd or Path.cwd()).resolve()
        completed = run_git(["rev-parse", "--show-toplevel"], here, check=False)
        if completed.returncode != 0:
            raise GpuplanError(f"not inside a git repository ({here}); run gpuplan diff --git in one")
        return cls(Path(completed.stdout.decode().strip()), here)

    def git(self, *args: str, stdin: bytes | None = None) -> bytes:
        return run_git(list(args), self.cwd, stdin=stdin).stdout

    def commit(self, revision: str) -> str:
        """The commit id ``revision`` names; GpuplanError when it names none."""
        if not revision or revision.startswith("-"):
            raise GpuplanError(f"not a git revision: {revision!r}")
        completed = run_git(["rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], self.cwd, check=False)
        if completed.returncode != 0:
            raise GpuplanError(f"unknown git revision {revision!r} (not a branch, tag or commit in {self.root})")
        return completed.stdout.decode().strip()

    def default_branch(self) -> str:
        """origin/HEAD's branch, else the first of DEFAULT_BRANCH_CANDIDATES that exists."""
        completed = run_git(["symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"], self.cwd, check=False)
        if completed.returncode == 0 and completed.stdout.strip():
            return completed.stdout.decode().strip()
        for candidate in DEFAULT_BRANCH_CANDIDATES:
            found = run_git(["rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}"], self.cwd, check=False)
            if found.returncode == 0:
                return candidate
        raise GpuplanError(
            "cannot tell the default branch (no origin/HEAD, origin/main, origin/master, main or master); "
            "name the base: gpuplan diff --git REF"
        )

    def merge_base(self, first: str, second: str) -> str:
        completed = run_git(["merge-base", first, second], self.cwd, check=False)
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

    def files(self, revision: str | None, pathspecs: Iterable[str] = ()) -> list[str]:
        """The paths of the files at ``revision`` (None: the working tree, untracked files not ignored too)
        under ``pathspecs``, every file of the repository without them (as ``changes`` lists them)."""
        wanted = list(pathspecs)
        if revision is None:
            args = ["ls-files", "--cached", "--others", "--exclude-standard", "-z", "--full-name", "--"]
            listed = self.git(*args, *(wanted or [":/"]))
        elif wanted:
            listed = self.git("ls-tree", "-r", "-z", "--name-only", "--full-name", revision, "--", *wanted)
        else:
            listed = self.git("ls-tree", "-r", "-z", "--name-only", "--full-tree", revision)
        return sorted({path for path in listed.decode("utf-8", "surrogateescape").split("\0") if path})

    def read(self, revision: str | None, paths: Iterable[str]) -> dict[str, Content]:
        """Each path's bytes at ``revision`` (None: the working tree), at most SPEC_MAX_BYTES + 1 of them (one
        byte past the limit says a file is too large, as ``gpuplan lint`` reads one); None where the path is
        absent or no file (a folder, a submodule)."""
        wanted = list(dict.fromkeys(paths))
        if revision is None:
            return {path: read_working_file(self.root / path) for path in wanted}
        objects = self._objects(revision, wanted)
        small = [found for found in objects.values() if found is not None and found.size <= SPEC_MAX_BYTES]
        blobs = self._blobs([found.object_id for found in small])
        contents: dict[str, Content] = {}
        for path, found in objects.items():
            if found is None:
                contents[path] = None
            elif found.size <= SPEC_MAX_BYTES:
                contents[path] = blobs[found.object_id]
            else:  # never read whole: a 150 MB blob would cost 150 MB (twice, with the slicing)
                contents[path] = self._blob_head(found.object_id, SPEC_MAX_BYTES + 1)
        return contents

    def _objects(self, revision: str, paths: list[str]) -> dict[str, _Blob | None]:
        """Each path's blob at ``revision`` (id and size, from ``git cat-file --batch-check``); None where the
        path is absent or names a tree or a submodule."""
        # The batch protocol is line-based: a path with a newline in its name is resolved on its own.
        names = {path: f"{revision}:{path}" for path in paths if "\n" not in path}
        for path in paths:
            if "\n" in path:
                resolved = run_git(["rev-parse", "--verify", "--quiet", f"{revision}:{path}"], self.cwd, check=False)
                if resolved.returncode == 0:
                    names[path] = resolved.stdout.decode().strip()
        if not names:
            return dict.fromkeys(paths)
        requests = [name.encode("utf-8", "surrogateescape") for name in names.values()]
        output = self.git("cat-file", f"--batch-check={_BATCH_FORMAT}", stdin=b"".join(r + b"\n" for r in requests))
        answers = dict(zip(names, _parse_batch_check(output, requests), strict=True))
        return {path: answers.get(path) for path in paths}

    def _blobs(self, object_ids: list[str]) -> dict[str, bytes]:
        """The contents of blobs by id (``git cat-file --batch``; ids have no spaces, so headers split cleanly)."""
        unique = list(dict.fromkeys(object_ids))
        if not unique:
            return {}
        output = self.git("cat-file", f"--batch={_BATCH_FORMAT}", stdin="".join(f"{i}\n" for i in unique).encode())
        return dict(zip(unique, _parse_batch(output, unique), strict=True))

    def _blob_head(self, object_id: str, count: int) -> bytes:
        """The first ``count`` bytes of a blob, streamed: git is stopped once they are read."""
        try:
            process = subprocess.Popen(
                # Over core.bigFileThreshold git streams a packed blob instead of inflating it whole in memory
                # (default 512 MiB: a 150 MB packed blob cost git 150 MB before it wrote a byte).
                ["git", "-c", f"core.bigFileThreshold={count}", "cat-file", "blob", object_id],
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=git_environment(),
            )
        except OSError as error:
            raise GpuplanError(f"cannot run git cat-file: {error.strerror or error}") from None
        assert process.stdout is not None
        with process:
            head = process.stdout.read(count)
            process.kill()  # the rest is not wanted: git would inflate and write all of it
        return head


# Object id, type and size: three fields without spaces, whatever the requested name holds.
_BATCH_FORMAT = "%(objectname) %(objecttype) %(objectsize)"
_NOT_FOUND = (b"missing", b"ambiguous")  # what cat-file appends to a request it cannot answer


@record
class _Blob:
    object_id: str
    size: int


def _header(line: bytes) -> tuple[str, str, int]:
    """'<id> <type> <size>' as written by ``_BATCH_FORMAT``; GpuplanError for anything else."""
    fields = line.split(b" ")
    if len(fields) != 3 or not fields[2].isdigit():
        shown = line[:200].decode("utf-8", "replace")
        raise GpuplanError(f"git cat-file answered {shown!r}, not '<id> <type> <size>'")
    return fields[0].decode("ascii", "replace"), fields[1].decode("ascii", "replace"), int(fields[2])


def _parse_batch_check(output: bytes, requests: list[bytes]) -> list[_Blob | None]:
    """``git cat-file --batch-check`` answers, one line per request: the header, or '<request> missing'.

    The request is matched whole (a name may hold spaces, tabs or end in ' missing'), so a name is never
    split as if it were a header.
    """
    lines = output.split(b"\n")
    if len(lines) < len(requests):
        raise GpuplanError(f"git cat-file answered {len(lines)} of {len(requests)} requests")
    found: list[_Blob | None] = []
    for request, line in zip(requests, lines, strict=False):
        if any(line == request + b" " + status for status in _NOT_FOUND):
            found.append(None)
            continue
        object_id, kind, size = _header(line)
        found.append(_Blob(object_id, size) if kind == "blob" else None)  # a tree or submodule is no file
    return found


def _parse_batch(output: bytes, object_ids: list[str]) -> list[bytes]:
    """``git cat-file --batch`` answers to blob ids: '<id> blob <size>\\n<bytes>\\n' each."""
    contents = []
    offset = 0
    for object_id in object_ids:
        end = output.find(b"\n", offset)
        if end < 0:
            raise GpuplanError(f"git cat-file gave no answer for {object_id}")
        _, _, size = _header(output[offset:end])
        contents.append(output[end + 1 : end + 1 + size])
        offset = end + 1 + size + 1
    return contents


def read_working_file(path: Path) -> Content:
    """A file's bytes, None where there is none, Unreadable where it cannot be read; bounded (one byte past the
    spec limit, which linting then reports as GP003) and never blocking on a FIFO or device."""
    if not os.path.lexists(path):
        return None
    try:
        return read_head(path, SPEC_MAX_BYTES + 1)
    except ReadRefused as refused:
        return Unreadable(refused.reason)
