"""``gpuplan report``: a decision report for procurement review."""

from __future__ import annotations

import os
import sys

import click

from gpuplan.cli.common import _evidence_kinds, _guarded, _print_tracebacks, _run_options
from gpuplan.errors import GpuplanError
from gpuplan.visible import visible

_FORMAT_OF_SUFFIX = {".pdf": ("pdf",), ".html": ("html",), ".htm": ("html",)}


@click.command(short_help="Render a decision report (Markdown, HTML or PDF).")
@click.argument("spec_path", metavar="SPEC")
@click.option("--md", "as_md", is_flag=True, help="Markdown (the default when no format is given).")
@click.option("--html", "as_html", is_flag=True, help="HTML with an embedded SVG memory chart.")
@click.option("--pdf", "as_pdf", is_flag=True, help="PDF (the HTML through WeasyPrint).")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    help="Output file ('-': standard output, one text format only); with no format option, a .pdf or .html "
    "name chooses that format; with several formats, its suffix is replaced per format. Default: one "
    "Markdown or HTML report to standard output; a PDF, or several formats, next to the spec as "
    "<name>.md/.html/.pdf.",
)
@click.option("--force", is_flag=True, help="Replace a symlink (the link itself, not its target) or a read-only file.")
@click.option("--mkdir", is_flag=True, help="Create the output file's missing folders.")
@_run_options
@click.option(
    "--run",
    "runs",
    multiple=True,
    metavar="EVIDENCE",
    help="Add a 'Verified against a run' section from this run's evidence (as gpuplan verify reads it).",
)
@click.option("--kind", type=click.Choice(_evidence_kinds()), default="auto", help="The --run evidence format.")
@_guarded
def report(
    spec_path: str,
    as_md: bool,
    as_html: bool,
    as_pdf: bool,
    output: str | None,
    force: bool,
    mkdir: bool,
    fail_on: str | None,
    config_path: str | None,
    no_waivers: bool,
    runs: tuple[str, ...],
    kind: str,
) -> None:
    """Render a decision report for procurement review: verdict, memory, alternatives, cost, sign-off.

    Every destination is checked before anything is rendered or written: a report never writes
    through a symlink, onto a device, FIFO or read-only file, into a missing folder (unless --mkdir),
    or over its spec; files are written atomically and keep the mode of the file they replace.
    """
    from pathlib import Path

    from gpuplan import clock
    from gpuplan.atomic import check_destination, write_atomic
    from gpuplan.report.pdf_process import pdf_renderer

    formats = tuple(name for name, wanted in (("md", as_md), ("html", as_html), ("pdf", as_pdf)) if wanted)
    if not formats and output not in (None, "-"):  # no format asked for: -o report.pdf means a PDF
        formats = _FORMAT_OF_SUFFIX.get(os.path.splitext(output)[1].lower(), ())
    formats = formats or ("md",)
    if spec_path == "-":
        raise GpuplanError("report needs a spec file, not standard input")
    to_stdout = output == "-" or (output is None and len(formats) == 1 and formats[0] != "pdf")
    if to_stdout and (len(formats) > 1 or formats[0] == "pdf"):
        raise GpuplanError("-o - writes one Markdown or HTML report; a PDF or several formats need a file name")
    spec = Path(spec_path)
    destinations = {}
    if not to_stdout:
        for name in formats:
            if output is None:
                target = spec.with_suffix(f".{name}")
            else:
                target = Path(output) if len(formats) == 1 else Path(output).with_suffix(f".{name}")
            destinations[name] = check_destination(target, protect=(spec,), force=force, mkdir=mkdir)
    interactive = sys.stderr.isatty()

    def progress(message: str) -> None:
        if interactive:
            click.echo(f"gpuplan: {message} ...", err=True)

    epoch = clock.today_epoch()
    # WeasyPrint's fontTools fallback stamps subset fonts with SOURCE_DATE_EPOCH or the time: pin it
    # for this process (HarfBuzz subsetting, the usual path, stamps nothing), before the PDF child forks.
    os.environ.setdefault("SOURCE_DATE_EPOCH", str(epoch))
    with pdf_renderer(early="pdf" in formats) as renderer:  # WeasyPrint loads while the spec is linted
        from gpuplan.report.build import render_report  # imported after the fork, in parallel with WeasyPrint
        from gpuplan.run import lint_run

        summary = lint_run(
            [spec_path], fail_on=fail_on, config_path=config_path, use_waivers=not no_waivers, keep_analysis=True
        ).summary()
        (result,) = summary.results
        verification = None
        if runs:
            from dataclasses import replace

            from gpuplan.report.verified import verification_section
            from gpuplan.verify import verify_linted

            result, verified = verify_linted(
                result, list(runs), kind=kind, config_path=config_path, use_waivers=not no_waivers
            )
            summary = replace(summary, results=(result,))
            verification = verification_section(verified)
        rendered = render_report(
            result, formats, clock.today(), progress, summary.fail_on, renderer.render, verification
        )
    for name, data in rendered.items():
        if to_stdout:
            click.echo(data.decode(), nl=False)
            continue
        write_atomic(destinations[name], data)
        if interactive:
            click.echo(f"gpuplan: wrote {visible(str(destinations[name].path))}", err=True)
    _print_tracebacks(summary)
    sys.exit(summary.exit_code)
