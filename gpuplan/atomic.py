"""Write a file atomically: a temporary file in the same folder, then a rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from gpuplan.errors import GpuplanError


def write_atomic(path: Path, data: bytes, *, protect: tuple[Path, ...] = ()) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one, never a part.

    Refuses to replace any of ``protect`` (the spec a report is made from).
    """
    target = path.resolve()
    if any(target == guarded.resolve() for guarded in protect):
        raise GpuplanError(f"refusing to overwrite the spec {path} with a report; choose another -o path")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp creates 0600; a report is an ordinary file
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current
