"""``gpuplan report`` as one library call: choose the formats and destinations, lint (and verify) the
spec, render, write.

Every destination is checked before anything is rendered or written (:func:`report_outputs`); a PDF's
renderer starts importing WeasyPrint in a child before the linter, the planner and the report model
are imported here, so the two overlap (:mod:`gpuplan.report.pdf_process`). Nothing here prints: the
caller passes ``progress`` and ``wrote`` to hear what happens, and prints the returned text.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gpuplan import clock
from gpuplan.atomic import Destination, check_destination, refuse_inputs, write_atomic
from gpuplan.config_files import config_location
from gpuplan.discovery import model_config_names
from gpuplan.errors import GpuplanError
from gpuplan.output.summary import UNCHECKED_CODES
from gpuplan.records import record
from gpuplan.report.glyphs import Undrawable, strings, undrawable
from gpuplan.report.pdf_process import pdf_renderer

if TYPE_CHECKING:  # imported after the PDF child forks (run_report), never at start-up
    from gpuplan.output.summary import RunSummary

FORMATS = ("md", "html", "pdf")
_FORMAT_OF_SUFFIX = {".pdf": ("pdf",), ".html": ("html",), ".htm": ("html",), ".md": ("md",), ".markdown": ("md",)}
_FORMAT_NAMES = {"md": "Markdown", "html": "HTML", "pdf": "PDF"}


@record
class ReportOutputs:
    """The formats to render and where each goes: standard output (one text format), or checked files."""

    formats: tuple[str, ...]
    to_stdout: bool
    destinations: dict[str, Destination]  # by format; empty for standard output


@record
class ReportRun:
    """What a report run did: its lint summary (exit code, tracebacks) and the text for standard
    output (None when the report went to files)."""

    summary: RunSummary
    stdout: str | None
    undrawable: Undrawable = Undrawable()  # of the spec's text, in a PDF written: what it leaves blank


def report_outputs(
    spec_path: str,
    requested: tuple[str, ...],
    output: str | None,
    *,
    force: bool = False,
    mkdir: bool = False,
    runs: tuple[str, ...] = (),
    config_path: str | None = None,
) -> ReportOutputs:
    """The formats (``requested``, in FORMATS' order; none: the ``output`` name's suffix, else Markdown)
    and their destinations, each checked (GpuplanError with one line when one may not be written).

    ``output`` '-' or None with one text format: standard output. Otherwise files: ``output`` itself for
    one format, its name with each format's suffix for several, or next to the spec (<name>.md/.html/.pdf).
    None replaces an input of the report: the spec, the model.config files it names, the ``runs`` and the
    configuration file (``config_path``)."""
    formats = tuple(name for name in FORMATS if name in requested)
    named = _FORMAT_OF_SUFFIX.get(os.path.splitext(output)[1].lower(), ()) if output not in (None, "-") else ()
    if len(formats) == 1 and named and named != formats:  # --html -o x.pdf: HTML in a file that reads as a PDF
        raise GpuplanError(
            f"-o {output} names a {_FORMAT_NAMES[named[0]]} file, but --{formats[0]} asks for "
            f"{_FORMAT_NAMES[formats[0]]}: give one of them (a .{formats[0]} name, or no format option)"
        )
    formats = formats or named or ("md",)  # no format asked for: -o report.pdf means a PDF
    if spec_path == "-":
        raise GpuplanError("report needs a spec file, not standard input")
    to_stdout = output == "-" or (output is None and len(formats) == 1 and formats[0] != "pdf")
    if to_stdout and (len(formats) > 1 or formats[0] == "pdf"):
        raise GpuplanError("-o - writes one Markdown or HTML report; a PDF or several formats need a file name")
    spec = Path(spec_path)
    destinations = {}
    inputs = _inputs(spec, runs, config_path)
    if not to_stdout:
        for name in formats:
            if output is None:
                target = spec.with_suffix(f".{name}")
            else:
                target = Path(output) if len(formats) == 1 else Path(output).with_suffix(f".{name}")
            destinations[name] = check_destination(target, protect=inputs, force=force, mkdir=mkdir)
    return ReportOutputs(formats, to_stdout, destinations)


def _inputs(spec: Path, runs: tuple[str, ...], config_path: str | None) -> tuple[tuple[Path, str], ...]:
    """The files a report reads that are known before the spec is read, each with what it is: no output may
    replace one (the model.config files the spec names are checked once it is read: ``_check_model_configs``). The
    configuration is --config's, else the one found upward from the spec, as the lint of the report reads it."""
    found = [(spec, "the spec"), *((Path(run), "the run's evidence") for run in runs)]
    configuration = Path(config_path) if config_path else config_location(str(spec))  # --config, else found upward
    if configuration is not None:
        found.append((configuration, "the configuration"))
    return tuple(found)


def _check_model_configs(outputs: ReportOutputs, spec: Path, data: object) -> None:
    """GpuplanError when a destination is one of the model.config files the read spec names (nothing is
    written yet): the spec is read after the PDF renderer forks, so that WeasyPrint's import overlaps it."""
    from gpuplan.linter import base_dir  # where the linter reads them from: the real spec's folder

    folder = base_dir(str(spec))
    configs = tuple((folder / name, "the model's config file") for name in model_config_names(data))
    for destination in outputs.destinations.values():
        refuse_inputs(destination.path, configs)


def run_report(
    spec_path: str,
    outputs: ReportOutputs,
    *,
    fail_on: str | None = None,
    config_path: str | None = None,
    use_waivers: bool = True,
    runs: tuple[str, ...] = (),
    kind: str = "auto",
    progress: Callable[[str], None] | None = None,
    wrote: Callable[[Path], None] | None = None,
) -> ReportRun:
    """Lint ``spec_path`` (as lint does, keeping its analysis), verify it against ``runs`` when given,
    render ``outputs.formats`` and write each file atomically (``wrote`` hears each path).

    Pins SOURCE_DATE_EPOCH for this process to today's date (when unset): WeasyPrint's fontTools
    fallback stamps subset fonts with it, or with the time, and the same spec on the same day must give
    the same bytes. ``progress`` hears the slow steps ("rendering PDF")."""
    epoch = clock.today_epoch()
    # HarfBuzz subsetting, the usual path, stamps nothing; pinned before the PDF child forks.
    os.environ.setdefault("SOURCE_DATE_EPOCH", str(epoch))
    with pdf_renderer(early="pdf" in outputs.formats) as renderer:  # WeasyPrint loads while the spec is linted
        from gpuplan.report.build import render_report  # imported after the fork, in parallel with WeasyPrint
        from gpuplan.run import lint_run

        summary = lint_run(
            [spec_path], fail_on=fail_on, config_path=config_path, use_waivers=use_waivers, keep_analysis=True
        ).summary()
        (result,) = summary.results
        unchecked = [finding for finding in result.findings if finding.code in UNCHECKED_CODES]
        if unchecked:  # a spec that was never read is no report: no file, no hash of what was not there
            raise GpuplanError(f"no report: {unchecked[0].message}")
        if result.document is not None:
            _check_model_configs(outputs, Path(spec_path), result.document.data)
        verification = None
        if runs:
            from dataclasses import replace

            from gpuplan.report.verified import verification_section
            from gpuplan.verify import verify_linted

            result, verified = verify_linted(
                result, list(runs), kind=kind, config_path=config_path, use_waivers=use_waivers
            )
            summary = replace(summary, results=(result,))
            verification = verification_section(verified)
        rendered = render_report(
            result, outputs.formats, clock.today(), progress, summary.fail_on, renderer.render, verification
        )
    if outputs.to_stdout:
        return ReportRun(summary, "".join(data.decode() for data in rendered.values()))
    for name, data in rendered.items():
        write_atomic(outputs.destinations[name], data)
        if wrote is not None:
            wrote(outputs.destinations[name].path)
    blank = Undrawable()
    if "pdf" in rendered and result.document is not None:
        blank = undrawable(strings(result.document.data))
    return ReportRun(summary, None, blank)
