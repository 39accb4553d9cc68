"""Where a spec's configuration is: ``.gpuplan.yaml``, or a pyproject.toml with a ``[tool.gpuplan]`` table, in the
spec's folder or the nearest above it (not above the repository's top). Apart from reading the file
(gpuplan/config.py), so that a command can name it without importing the YAML loader: a report checks, before its
PDF renderer forks, that it will not write over it.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpuplan.reading import SETTINGS, ReadRefused, read_bounded

CONFIG_FILE = ".gpuplan.yaml"


def spec_folder(path: str) -> Path:
    """The folder a spec's configuration is searched upward from: the spec's real folder (a symlink's target's),
    the working folder for standard input ('-')."""
    if path == "-":
        return Path.cwd()
    try:
        return Path(path).resolve().parent
    except (OSError, RuntimeError):  # a symlink loop: the read reports it
        return Path(os.path.abspath(path)).parent


def config_location(path: str) -> Path | None:
    """The configuration file a command without --config reads for the spec at ``path`` (``find_config`` from its
    ``spec_folder``), or None."""
    return find_config(spec_folder(path))


def find_config(start: Path) -> Path | None:
    """The nearest .gpuplan.yaml, or pyproject.toml with a [tool.gpuplan] table, at or above ``start``.

    A pyproject.toml that cannot be read is taken as governing (loading it then reports why), so a
    broken file is never skipped silently in favour of one further up.
    """
    for folder in (start, *start.parents):
        candidate = folder / CONFIG_FILE
        if candidate.exists() or candidate.is_symlink():
            return candidate
        pyproject = folder / "pyproject.toml"
        if (pyproject.exists() or pyproject.is_symlink()) and _configures_gpuplan(pyproject):
            return pyproject
        if (folder / ".git").exists():
            return None
    return None


def _configures_gpuplan(pyproject: Path) -> bool:
    """Whether a pyproject.toml has a tool.gpuplan key, in any TOML spelling (``[tool.gpuplan]``,
    ``[ tool.gpuplan ]``, ``[tool."gpuplan"]``, dotted keys, an inline table). A file that cannot be read,
    or is not valid TOML but names gpuplan, is taken as governing (loading it then reports why), so a
    broken configuration is never skipped silently in favour of one further up; one that never names
    gpuplan is some other tool's, and is not parsed at all."""
    try:
        raw = read_bounded(pyproject, SETTINGS)
    except ReadRefused:
        return True
    if b"gpuplan" not in raw:
        return False
    import tomllib

    try:
        tool = tomllib.loads(raw.decode("utf-8")).get("tool")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError):
        return True
    return isinstance(tool, dict) and "gpuplan" in tool
