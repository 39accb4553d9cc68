"""``gpuplan estimate``: per-GPU memory, speed and cost of a spec's jobs, then lint's findings."""

from __future__ import annotations

import sys

import click

from gpuplan.cli.common import ONE_SPEC, _format_option, _guarded, _print_tracebacks, _run_options
from gpuplan.visible import visible


@click.command(short_help="Per-GPU memory, speed and cost of a spec's jobs.")
@click.argument("spec_path", metavar="SPEC", type=ONE_SPEC)
@_format_option("text", "json")
@_run_options
@_guarded
def estimate(
    spec_path: str, output_format: str, fail_on: str | None, config_path: str | None, no_waivers: bool
) -> None:
    """Estimate per-GPU memory, speed and cost of a spec's jobs, with the assumptions used (SPEC '-' reads
    standard input, as lint and plan do).

    The spec is linted as `gpuplan lint` does (same configuration, thresholds and rules), so the
    estimate uses the configured efficiencies; the findings follow the estimate and the exit code
    is lint's: a job that fits in memory but breaks a rule (TP beyond the NVLink domain) exits 1.
    """

    from gpuplan.output.estimate_json import render_estimate_json
    from gpuplan.output.estimate_text import render_estimate
    from gpuplan.output.text import render as render_findings
    from gpuplan.run import lint_run

    summary = lint_run(
        [spec_path], fail_on=fail_on, config_path=config_path, use_waivers=not no_waivers, keep_analysis=True
    ).summary()
    (result,) = summary.results
    if output_format == "json":
        click.echo(render_estimate_json(summary), nl=False)
    elif result.analysis is None:
        click.echo(render_findings(summary), nl=False, err=True)
        click.echo(f"gpuplan: no estimate: {visible(result.path)} has problems that stop it (above)", err=True)
    else:
        click.echo(render_estimate(result.analysis, result.options.settings if result.options else None), nl=False)
        click.echo(render_findings(summary), nl=False)
    _print_tracebacks(summary)
    sys.exit(summary.exit_code)
