"""Lint several paths with one set of options: what ``gpuplan lint`` does between parsing and printing."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from gpuplan.config import Config, find_config, load_config
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
    today: datetime.date | None = None,
) -> RunSummary:
    """Lint every spec under ``paths``; one bad file never stops the others."""
    files = list(discover(paths, only_specs=only_specs))
    if not files and not only_specs:
        raise GpuplanError(f"no spec files found in {', '.join(paths)}")
    explicit = load_config(Path(config_path)) if config_path else None
    found: dict[Path, Config] = {}
    results = []
    fail_levels = []
    for path in files:
        config = explicit or _config_for(path, found)
        options = LintOptions(
            select=select or config.select,
            ignore=tuple(ignore) + config.ignore,
            severities=config.severities,
            use_waivers=use_waivers,
            settings=config.settings,
            today=today or report_date(),
            config_source=config.source,
        )
        if config.fail_on:
            fail_levels.append(config.fail_on)
        results.append(lint_path(path, options))
    configured = min(fail_levels, key=lambda s: s.rank) if fail_levels else Severity.ERROR
    threshold = Severity(fail_on) if fail_on else configured
    return RunSummary(tuple(results), threshold, quiet)


def _config_for(path: str, found: dict[Path, Config]) -> Config:
    folder = Path.cwd() if path == "-" else Path(path).resolve().parent
    if folder not in found:
        location = find_config(folder)
        found[folder] = load_config(location) if location else Config()
    return found[folder]


def report_epoch() -> int:
    """SOURCE_DATE_EPOCH when set (reproducible builds), else the start of today in UTC."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    if epoch.isdigit():
        return int(epoch)
    today = datetime.datetime.now(tz=datetime.UTC).date()
    return int(datetime.datetime(today.year, today.month, today.day, tzinfo=datetime.UTC).timestamp())


def report_date() -> datetime.date:
    """Today, or the date of SOURCE_DATE_EPOCH when set (reproducible runs)."""
    return datetime.datetime.fromtimestamp(report_epoch(), tz=datetime.UTC).date()
