"""Locate the bundled ``schemas/`` and ``templates/`` folders, installed or in a checkout.

A wheel carries them as ``gpuplan/_data/{schemas,templates}`` (see pyproject's force-include);
a checkout or an editable install has them at the repository root, next to ``gpuplan/``.
"""

from __future__ import annotations

from pathlib import Path

from gpuplan.errors import GpuplanError

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """The directory ``name`` ("schemas" or "templates"), installed copy first."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise GpuplanError(f"gpuplan's {name}/ folder is missing from this installation")


def schema_path(name: str = "workload") -> Path:
    return resource_dir("schemas") / f"{name}.schema.json"
