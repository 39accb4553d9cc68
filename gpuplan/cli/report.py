"""``gpuplan report``: a decision report for procurement review (the run itself: gpuplan.report.command)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from gpuplan.cli.common import ONE_SPEC, NamedPath, _evidence_kinds, _guarded, _print_tracebacks, _run_options
from gpuplan.units import plural
from gpuplan.visible import visible

_BLANK_SHOWN = 12  # characters a warning names of those a PDF leaves blank

if TYPE_CHECKING:
    from pathlib import Path

    from gpuplan.report.glyphs import Undrawable


@click.command(short_help="Render a decision report (Markdown, HTML or PDF).")
@click.argument("spec_path", metavar="SPEC", type=ONE_SPEC)
@click.option("--md", "as_md", is_flag=True, help="Markdown (the default when no format is given).")
@click.option("--html", "as_html", is_flag=True, help="HTML with an embedded SVG memory chart.")
@click.option("--pdf", "as_pdf", is_flag=True, help="PDF (the HTML through WeasyPrint).")
@click.option(
    "-o",
    "--output",
    type=NamedPath(dir_okay=False, allow_dash=True),
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
    or over a file it reads (the spec, its model.config, a --run file, the configuration: --config, else the
    one found upward); files are written atomically and keep the mode of the file they replace.
    """
    from gpuplan.report.command import report_outputs, run_report

    requested = tuple(name for name, wanted in (("md", as_md), ("html", as_html), ("pdf", as_pdf)) if wanted)
    outputs = report_outputs(spec_path, requested, output, force=force, mkdir=mkdir, runs=runs, config_path=config_path)
    interactive = sys.stderr.isatty()

    def progress(message: str) -> None:
        click.echo(f"gpuplan: {message} ...", err=True)

    def wrote(path: Path) -> None:
        click.echo(f"gpuplan: wrote {visible(str(path))}", err=True)

    done = run_report(
        spec_path,
        outputs,
        fail_on=fail_on,
        config_path=config_path,
        use_waivers=not no_waivers,
        runs=runs,
        kind=kind,
        progress=progress if interactive else None,  # progress on a terminal; where a file went, always (as init)
        wrote=wrote,
    )
    if done.stdout is not None:
        click.echo(done.stdout, nl=False)
    if done.undrawable.chars:
        click.echo(_blank_warning(done.undrawable), err=True)
    _print_tracebacks(done.summary)
    sys.exit(done.summary.exit_code)


def _blank_warning(blank: Undrawable) -> str:
    """The warning for the characters of the spec a written PDF leaves blank (``gpuplan.report.glyphs``)."""
    shown = " ".join(visible(char) for char in blank.chars[:_BLANK_SHOWN])
    more = f" and {len(blank.chars) - _BLANK_SHOWN} more" if len(blank.chars) > _BLANK_SHOWN else ""
    cause = (
        "no font installed here covers them"
        if blank.known
        else "the bundled fonts do not cover them, and fontconfig (fc-list) could not say if an installed one does"
    )
    return (
        f"gpuplan: warning: the PDF leaves {plural(len(blank.chars), 'character')} of the spec's text blank "
        f"({shown}{more}): {cause}; the Markdown and HTML show them. Install a font that covers them (for "
        "example Debian's fonts-noto-cjk or fonts-noto-color-emoji) and render the PDF again"
    )
