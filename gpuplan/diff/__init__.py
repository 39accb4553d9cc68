"""``gpuplan diff``: what a change to specs does to memory, speed, cost, findings and verdicts.

build.py pairs spec versions (two files, or two git revisions via git.py) and lints both sides;
model.py holds the figures and what changed; guardrails.py decides the exit code; text.py,
markdown.py, json_format.py and github.py render it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from gpuplan.diff.model import DiffResult

Renderer = Callable[[DiffResult, list[str], int], str]
FORMAT_MODULES = {"text": "text", "markdown": "markdown", "json": "json_format", "github": "github"}


def renderer(name: str) -> Renderer:
    """The render function of the diff format ``name`` (one of FORMAT_MODULES)."""
    module = importlib.import_module(f"gpuplan.diff.{FORMAT_MODULES[name]}")
    render: Renderer = module.render
    return render
