"""Lint several paths with one set of options: what ``gpuplan lint`` does between parsing and printing."""

from __future__ import annotations

from gpuplan.discovery import discover
from gpuplan.errors import GpuplanError
from gpuplan.findings import Severity
from gpuplan.linter import LintOptions, lint_path
from gpuplan.output.summary import RunSummary


def lint_paths(
    paths: list[str],
    *,
    fail_on: str | None = None,
    select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    config_path: str | None = None,
    use_waivers: bool = True,
    quiet: bool = False,
    only_specs: bool = False,
) -> RunSummary:
    """Lint every spec under ``paths``; one bad file never stops the others."""
    files = list(discover(paths, only_specs=only_specs))
    if not files and not only_specs:
        raise GpuplanError(f"no spec files found in {', '.join(paths)}")
    options = LintOptions(select=select, ignore=ignore, use_waivers=use_waivers)
    results = tuple(lint_path(path, options) for path in files)
    threshold = Severity(fail_on) if fail_on else Severity.ERROR
    return RunSummary(results, threshold, quiet)
