"""Bounded, typed reads of the files a run is handed: specs, configuration files and config.json files.

gpuplan runs unattended on whatever a repository holds, so a read must never hang or exhaust memory:
- only regular files are opened: a FIFO would block ``open`` forever, a device (``/dev/zero``) never
  ends, a directory or a socket cannot be read; the type is checked with ``stat`` before opening and
  again with ``fstat`` on the open descriptor (the path may have been swapped in between);
- the descriptor is opened with ``O_NONBLOCK``, so even a FIFO swapped in after the check cannot block;
- at most ``limit + 1`` bytes are read, enough to know that a file is over its limit without reading it.

Every refusal is a :class:`ReadRefused` with one line that says why, in words (the callers turn it into
a finding: GP009 for a spec, GP021 for a config.json, a configuration error for .gpuplan.yaml).
"""

from __future__ import annotations

import errno
import os
import stat
import sys

from gpuplan.records import record

SPEC_MAX_BYTES = 1024 * 1024  # a spec is a page of YAML; 1 MiB is 100x the largest example
CONFIG_JSON_MAX_BYTES = 1024 * 1024  # a Hugging Face config.json is a few KiB (DeepSeek-V3's: 1.7 KiB)
SETTINGS_MAX_BYTES = 1024 * 1024  # .gpuplan.yaml and pyproject.toml
_CHUNK = 64 * 1024

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_REASONS = {
    errno.ENOENT: "no such file",
    errno.ENOTDIR: "a folder on its path is a file",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ELOOP: "too many levels of symbolic links (a symlink loop)",
    errno.ENAMETOOLONG: "the file name is too long",
    errno.EISDIR: "it is a directory",
}


class ReadRefused(Exception):
    """A file that was not read, with the reason in words (``str(error)``)."""

    def __init__(self, reason: str, *, too_large: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.too_large = too_large


@record
class Limit:
    """How much a kind of file may hold, and what it is called in messages."""

    max_bytes: int
    noun: str  # "specs", "config.json files"


SPEC = Limit(SPEC_MAX_BYTES, "specs")
CONFIG_JSON = Limit(CONFIG_JSON_MAX_BYTES, "config.json files")
SETTINGS = Limit(SETTINGS_MAX_BYTES, "configuration files")


def kind_of(mode: int) -> str | None:
    """'a directory', 'a named pipe (FIFO)', ... for anything that is not a regular file; None for one."""
    if stat.S_ISREG(mode):
        return None
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def reason_of(error: OSError) -> str:
    """An OSError in words, without the path (callers name the file themselves)."""
    return _REASONS.get(error.errno or 0) or error.strerror or type(error).__name__


def read_bounded(path: str | os.PathLike[str], limit: Limit = SPEC) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit.max_bytes``. Raises ReadRefused."""
    return _read_regular(path, limit, whole=True)


def read_head(path: str | os.PathLike[str], count: int) -> bytes:
    """The first ``count`` bytes of the regular file ``path`` (however large it is). Raises ReadRefused."""
    return _read_regular(path, Limit(count, "heads"), whole=False)


def _read_regular(path: str | os.PathLike[str], limit: Limit, *, whole: bool) -> bytes:
    name = os.fspath(path)
    if ("\0" if isinstance(name, str) else b"\0") in name:  # the OS takes no such name (stat: ValueError)
        raise ReadRefused("its name holds a NUL character, which no file name can")
    try:
        before = os.stat(path)
    except OSError as error:
        raise ReadRefused(reason_of(error)) from None
    refused = kind_of(before.st_mode)
    if refused:
        raise ReadRefused(f"it is {refused}, not a regular file")
    if whole:
        check_size(before.st_size, limit)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        raise ReadRefused(reason_of(error)) from None
    try:
        opened = os.fstat(descriptor)
        refused = kind_of(opened.st_mode)
        if refused:  # swapped between stat and open
            raise ReadRefused(f"it is {refused}, not a regular file")
        if not whole:
            return _read_at_most(descriptor, limit.max_bytes)
        check_size(opened.st_size, limit)
        data = _read_at_most(descriptor, limit.max_bytes + 1)
    except OSError as error:
        raise ReadRefused(reason_of(error)) from None
    finally:
        os.close(descriptor)
    check_size(len(data), limit, known=False)  # a file that grew after fstat
    return data


def read_stdin(limit: Limit = SPEC) -> bytes:
    """Standard input, at most ``limit.max_bytes`` (reading stops one byte past the limit)."""
    if sys.stdin is None:  # started with standard input closed (`<&-`)
        raise ReadRefused("standard input is closed")
    stream = sys.stdin.buffer
    data = stream.read(limit.max_bytes + 1)
    check_size(len(data), limit, known=False)
    return data


def _read_at_most(descriptor: int, count: int) -> bytes:
    chunks = []
    left = count
    while left > 0:
        chunk = os.read(descriptor, min(_CHUNK, left))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def check_size(size: int, limit: Limit, *, known: bool = True) -> None:
    """Refuse ``size`` over the limit; ``known=False`` when reading stopped one byte past it."""
    if size > limit.max_bytes:
        measured = f"{size:,} bytes" if known else f"more than {limit.max_bytes:,} bytes"
        raise ReadRefused(f"it is {measured}; {limit.noun} are limited to {limit.max_bytes:,} bytes", too_large=True)
