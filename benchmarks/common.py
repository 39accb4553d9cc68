"""Shared set-up of the speed benchmarks."""

from __future__ import annotations

import compileall
import sys
from pathlib import Path


def installed_gpuplan() -> str:
    """The gpuplan console script beside this interpreter, with the package's bytecode compiled.

    `pip install` (and pre-commit's install) compiles bytecode for every package; an editable checkout
    under PYTHONDONTWRITEBYTECODE would otherwise recompile every module in every timed process.
    """
    import gpuplan

    compileall.compile_dir(str(Path(gpuplan.__file__).parent), quiet=1)
    return str(Path(sys.executable).parent / "gpuplan")
