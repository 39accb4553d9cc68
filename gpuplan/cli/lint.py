"""``gpuplan lint``: the pre-commit hook. Its start-up path imports only what linting needs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from gpuplan.cli.common import (
    EXIT_OK,
    NamedPath,
    _discard_stdout,
    _guarded,
    _print_tracebacks,
    _rule_patterns,
    _run_options,
)
from gpuplan.errors import GpuplanError
from gpuplan.output import FORMAT_MODULES

if TYPE_CHECKING:  # the linter is imported when the command runs
    from gpuplan.linter import LintResult


@click.command()
@click.argument("paths", nargs=-1, required=True, type=NamedPath(allow_dash=True))
@click.option(
    "--format",
    "output_format",
    type=click.Choice(list(FORMAT_MODULES)),
    default="text",
    show_default=True,
    help="Output format.",
)
@_run_options
@click.option(
    "--select",
    multiple=True,
    callback=_rule_patterns,
    help="Only these codes, code prefixes (GP2) or rule names; repeated or comma-separated.",
)
@click.option(
    "--ignore",
    multiple=True,
    callback=_rule_patterns,
    help="Skip these codes, code prefixes or rule names; repeated or comma-separated.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when there is nothing to report.")
@click.option(
    "--only-specs",
    is_flag=True,
    help="Skip named YAML files that do not look like specs (top-level model: and finetune:/serve:).",
)
@click.option(
    "--catalog-hints/--no-catalog-hints",
    default=None,
    help="Fit hints (GP201, GP203, GP301) also name the cheapest layout of any allowed GPU: a full planner "
    "search per spec that does not fit. Default: the configuration's catalog-hints (off).",
)
@_guarded
def lint(
    paths: tuple[str, ...],
    output_format: str,
    fail_on: str | None,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    config_path: str | None,
    no_waivers: bool,
    quiet: bool,
    only_specs: bool,
    catalog_hints: bool | None,
) -> None:
    """Check workload specs: schema, estimate, and the sizing rules.

    PATHS are spec files, directories (searched for specs) or '-' for standard input.
    """
    from gpuplan.run import lint_run

    try:
        run = lint_run(
            list(paths),
            fail_on=fail_on,
            select=select,
            ignore=ignore,
            config_path=config_path,
            use_waivers=not no_waivers,
            only_specs=only_specs,
            catalog_hints=catalog_hints,
        )
    except GpuplanError as error:
        if output_format == "sarif":  # a CI step uploads the file whatever happened: a valid log saying why
            from gpuplan.output.sarif import render_failure

            _echo_while_read(render_failure(" ".join(error.lines())))
        raise  # the error on stderr, exit 2 (_guarded)
    from gpuplan.output import formatter, streamed

    stream = streamed(output_format)
    if stream is None:  # one document at the end
        summary = run.summary(quiet)
        _echo_while_read(formatter(output_format)(summary))
        _print_tracebacks(summary)
        sys.exit(summary.exit_code)
    from gpuplan.output.summary import printed

    exit_code, reading = EXIT_OK, True
    for text, so_far in printed(stream.result_text, stream.end_text, _traced(run.results()), run.fail_on, quiet):
        exit_code = so_far.exit_code  # the last chunk's tally is the run's
        reading = reading and _echo_while_read(text)
    sys.exit(exit_code)


def _echo_while_read(text: str) -> bool:
    """Print ``text`` on standard output; False once the reader has gone away (`| head`): lint then
    prints nothing more but finishes the run, whose exit code is what `set -o pipefail` reads."""
    try:
        click.echo(text, nl=False)
    except BrokenPipeError:
        _discard_stdout()
        return False
    return True


def _traced(results: Iterator[LintResult]) -> Iterator[LintResult]:
    """``results``, each followed by its tracebacks on stderr (``_print_tracebacks``)."""
    for result in results:
        yield result
        _print_tracebacks(result)
