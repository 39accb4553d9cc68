"""Lint several paths with one set of options: what ``gpuplan lint`` does between parsing and printing.

A run keeps only each file's findings once they are out (not its document or estimate), and text and
GitHub output keep not even those (``LintRun.results`` yields each as it is linted), so memory stays
flat over thousands of files; past ``PARALLEL_MIN_FILES`` files the specs are linted by a pool of
worker processes, one per core, in the same order.
"""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from gpuplan import clock
from gpuplan.config import Config, ConfigError, load_config
from gpuplan.config_files import find_config, spec_folder
from gpuplan.discovery import discover
from gpuplan.errors import GpuplanError
from gpuplan.findings import Finding, Severity
from gpuplan.linter import STDIN_NAME, LintOptions, LintResult, lint_path
from gpuplan.output.summary import RunSummary
from gpuplan.records import record

# Starting worker processes costs about 0.1 s; below a few hundred specs one process is as fast.
PARALLEL_MIN_FILES = 300
_CHUNK = 32
_CONFIG_PROBLEMS_SHOWN = 5


@record
class _Job:
    path: str
    options: LintOptions | None  # None: the configuration governing the path is invalid
    config_problem: tuple[str, str] = ("", "")  # (configuration path, first problem) when options is None


@record
class LintRun:
    """The files of one lint run with the options each is linted with; ``results`` lints them."""

    jobs: tuple[_Job, ...]
    fail_on: Severity  # --fail-on, else the strictest of the configurations involved (each file fails at its own)
    keep_analysis: bool = False
    workers: int | None = None

    def results(self) -> Iterator[LintResult]:
        """Each file's result in order, as it is linted (by a process pool past ``PARALLEL_MIN_FILES``);
        one bad file (or one bad configuration file) never stops the others. Each call lints anew (and
        reads standard input again): call it once."""
        return _lint_all(list(self.jobs), self.keep_analysis, self.workers)

    def summary(self, quiet: bool = False) -> RunSummary:
        """Lint every file and keep every result: for the formats printed at the end and the commands
        that read a result back."""
        return RunSummary(tuple(self.results()), self.fail_on, quiet)


def lint_run(
    paths: list[str],
    *,
    fail_on: str | None = None,
    select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    config_path: str | None = None,
    use_waivers: bool = True,
    only_specs: bool = False,
    today: datetime.date | None = None,
    keep_analysis: bool = False,
    workers: int | None = None,
    catalog_hints: bool | None = None,
) -> LintRun:
    """Find the specs under ``paths`` and the configuration governing each; lint nothing yet.

    ``keep_analysis`` keeps each result's document and estimate (a report needs them); ``workers``
    overrides the number of processes (default: one per core once there are enough files);
    ``catalog_hints`` overrides each configuration's `catalog-hints`.
    """
    files = list(discover(paths, only_specs=only_specs))
    if not files and not only_specs:
        raise GpuplanError(f"no spec files found in {', '.join(paths)}")
    explicit = load_config(Path(config_path)) if config_path else None  # a bad --config is a usage error
    day = today or clock.today()
    found: dict[Path | str, Config | ConfigError] = {}
    jobs = []
    fail_levels = []
    for path in files:
        config = explicit or _config_or_error(path, found)
        if isinstance(config, ConfigError):
            shown = config.problems[:_CONFIG_PROBLEMS_SHOWN]
            more = len(config.problems) - len(shown)
            problem = "; ".join(shown) + (f" (and {more} more)" if more else "")
            jobs.append(_Job(path, None, (str(config.path), problem)))
            continue
        own = Severity(fail_on) if fail_on else config.fail_on or Severity.ERROR  # the level this file fails at
        fail_levels.append(own)
        options = lint_options(
            config,
            select=select,
            ignore=ignore,
            use_waivers=use_waivers,
            today=day,
            catalog_hints=catalog_hints,
            fail_on=own,
        )
        jobs.append(_Job(path, options))
    # What a run reports as its level (one file's own; several configurations': the strictest); each file still
    # fails the run at its own level (output.summary.Tally), so a pre-commit batch fails as each file alone would
    configured = min(fail_levels, key=lambda s: s.rank) if fail_levels else Severity.ERROR
    threshold = Severity(fail_on) if fail_on else configured
    return LintRun(tuple(jobs), threshold, keep_analysis, workers)


def _lint_all(jobs: list[_Job], keep_analysis: bool, workers: int | None) -> Iterator[LintResult]:
    count = workers if workers is not None else (os.cpu_count() or 1)
    if keep_analysis or count < 2 or len(jobs) < max(PARALLEL_MIN_FILES, 2) or any(j.path == "-" for j in jobs):
        for job in jobs:
            result = _lint_job(job)
            yield result if keep_analysis else result.findings_only()
        return
    import concurrent.futures
    import multiprocessing

    _warm_up()  # forked workers inherit the imported rules and parsed catalogs
    context = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=count, mp_context=context, initializer=end_with_parent, initargs=(os.getpid(),)
    ) as pool:
        yield from pool.map(_lint_job_light, jobs, chunksize=_CHUNK)


# prctl's PR_SET_PDEATHSIG (linux/prctl.h): the signal the kernel sends a process when its parent exits.
_PR_SET_PDEATHSIG = 1


def end_with_parent(parent: int) -> None:
    """A worker's first act (Linux): ask the kernel to end it when ``parent``, the lint that started it, ends. A lint
    killed by a hook's or CI's timeout otherwise leaves its workers linting the chunks they hold for as long as those
    take."""
    if not sys.platform.startswith("linux"):
        return
    import contextlib
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):  # no C library to call: it ends when its queue does
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent was gone before the request: no signal will come
        os._exit(0)


def _warm_up() -> None:
    from gpuplan.catalog import gpu_catalog, model_catalog
    from gpuplan.rules.registry import all_rules

    all_rules(), gpu_catalog(), model_catalog()


def _lint_job(job: _Job) -> LintResult:
    if job.options is None:
        shown = STDIN_NAME if job.path == "-" else job.path
        config_path, problem = job.config_problem
        finding = Finding.make(
            "GP012",
            f"not checked: its configuration {config_path} is invalid: {problem}",
            path=shown,
            hint="fix the configuration file (gpuplan lint --config FILE checks one directly)",
        )
        return LintResult(shown, (finding,))
    return lint_path(job.path, job.options)


def _lint_job_light(job: _Job) -> LintResult:
    return _lint_job(job).findings_only()


def _config_or_error(path: str, found: dict[Path | str, Config | ConfigError]) -> Config | ConfigError:
    """The configuration governing ``path``; ``found`` memoises it per folder, resolved (symlinks
    followed) and as written, so that the files of one folder resolve it once."""
    written = os.path.dirname(path) + os.sep
    if path != "-" and written in found and not os.path.islink(path):
        return found[written]  # a plain file lies in the folder its path names
    folder = spec_folder(path)
    if folder not in found:
        try:
            location = find_config(folder)
            found[folder] = load_config(location) if location else Config()
        except ConfigError as error:
            found[folder] = error
    if path != "-" and not os.path.islink(path):
        found[written] = found[folder]
    return found[folder]


def lint_options(
    config: Config,
    *,
    select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    use_waivers: bool = True,
    today: datetime.date | None = None,
    catalog_hints: bool | None = None,
    fail_on: Severity | None = None,
) -> LintOptions:
    """The options a spec is linted with: command-line selections on top of its configuration (``fail_on``: the
    level the file fails a run at, where the caller decided it). A ``select`` on the command line starts the
    selection afresh, the configuration's ignores with it, as ruff's does (astral-sh/ruff#1245: `--select E501`
    over a configuration's `ignore = ["E501"]` reports E501); an ``ignore`` alone adds to the configuration's."""
    return LintOptions(
        select=select or config.select,
        ignore=tuple(ignore) + (() if select else config.ignore),
        severities=config.severities,
        use_waivers=use_waivers,
        settings=config.settings,
        today=today or clock.today(),
        config_source=config.source,
        catalog_hints=config.catalog_hints if catalog_hints is None else catalog_hints,
        fail_on=fail_on,
    )


def config_for(path: str, found: dict[Path | str, Config | ConfigError] | None = None) -> Config:
    """The configuration that governs the spec at ``path`` (found upward). Raises ConfigError."""
    config = _config_or_error(path, {} if found is None else found)
    if isinstance(config, ConfigError):
        raise config
    return config
