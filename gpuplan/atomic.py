"""Safe, atomic writes of report files: a temporary file in the same folder, then a rename.

Readers see the old file or the whole new one, never a part. Where the destination is not an ordinary
file the write is refused before anything is written (:func:`check_destination`), so a report never:
- writes through a symlink to whatever it points at (``--force`` replaces the link itself);
- replaces a device, FIFO, socket or directory with a regular file (``-o /dev/null`` as root);
- replaces a read-only file (``--force`` replaces it and keeps its mode);
- creates missing folders (``--mkdir`` does);
- overwrites the spec it reports on.
A replaced file keeps its permission bits; a new one gets 0666 less the umask, as any new file.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from gpuplan.errors import GpuplanError
from gpuplan.reading import kind_of, reason_of
from gpuplan.records import record

_SYSTEM_FOLDERS = frozenset({"dev", "proc", "sys"})  # device and kernel files, never report destinations


@record
class Destination:
    """A checked place to write: the path, and the mode to give the file (None: a new file)."""

    path: Path
    mode: int | None


def refuse_inputs(path: Path, protect: tuple[tuple[Path, str], ...], what: str = "a report") -> None:
    """GpuplanError when ``path`` is one of the command's inputs (``protect``: each with what it is), however
    named (a link, another spelling)."""
    absolute = Path(os.path.abspath(path))
    for guarded, role in protect:
        if _same_file(absolute, guarded):
            raise GpuplanError(f"refusing to overwrite {role} {path} with {what}; choose another -o path")


def check_destination(
    path: Path,
    *,
    protect: tuple[tuple[Path, str], ...] = (),
    force: bool = False,
    mkdir: bool = False,
    what: str = "a report",
    to_stdout: str = "-o -",
) -> Destination:
    """Where ``path`` may be written, or GpuplanError with one line that says why not (nothing is written).
    ``protect``: the command's inputs, each with what it is (``the spec``), which no output replaces, however
    named (a link, another spelling). ``what`` is written and ``to_stdout`` is how the command prints
    instead (init: a spec, PATH '-')."""
    absolute = Path(os.path.abspath(path))
    if len(absolute.parts) > 1 and absolute.parts[1] in _SYSTEM_FOLDERS:
        raise GpuplanError(f"refusing to write {what} into {absolute.parent}; use {to_stdout} for standard output")
    refuse_inputs(path, protect, what)
    try:
        info = os.lstat(absolute)
    except FileNotFoundError:
        info = None
    except OSError as error:
        raise GpuplanError(f"cannot write {path}: {reason_of(error)}") from None
    mode = None
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            if not force:
                target = os.readlink(absolute)
                raise GpuplanError(
                    f"refusing to write through the symlink {path} (it points to {target}); "
                    "remove it, or pass --force to replace the link itself"
                )
        elif kind_of(info.st_mode):
            raise GpuplanError(f"refusing to replace {path}: it is {kind_of(info.st_mode)}, not a regular file")
        else:
            mode = stat.S_IMODE(info.st_mode)
            if not mode & 0o222 and not force:
                raise GpuplanError(f"refusing to replace the read-only file {path}; pass --force to replace it")
    _check_folder(absolute.parent, path, mkdir)
    return Destination(absolute, mode)


def _check_folder(folder: Path, shown: Path, mkdir: bool) -> None:
    if not folder.exists():
        if not mkdir:
            raise GpuplanError(f"cannot write {shown}: the folder {folder} does not exist (pass --mkdir to create it)")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise GpuplanError(f"cannot create the folder {folder}: {reason_of(error)}") from None
    elif not folder.is_dir():
        raise GpuplanError(f"cannot write {shown}: {folder} is not a folder")
    elif not os.access(folder, os.W_OK | os.X_OK):  # read-only file system or folder: say so before any work
        raise GpuplanError(f"cannot write {shown}: the folder {folder} is not writable")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # ValueError: a name with a NUL (os.stat refuses it before any OSError)
        return False


def write_atomic(destination: Destination, data: bytes) -> None:
    """Write ``data`` at a checked destination: temporary file, fsync, rename over the old name."""
    target = destination.path
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as error:
        raise GpuplanError(f"cannot write {target}: {reason_of(error)}") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        # mkstemp creates 0600: a replaced file keeps its mode, a new one is an ordinary file
        os.chmod(temporary, destination.mode if destination.mode is not None else 0o666 & ~_umask())
        os.replace(temporary, target)  # replaces a symlink itself, never its target
    except OSError as error:
        Path(temporary).unlink(missing_ok=True)
        raise GpuplanError(f"cannot write {target}: {reason_of(error)}") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current
