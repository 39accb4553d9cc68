"""``gpuplan verify``: a spec's estimate held against a real run's logs."""

from __future__ import annotations

import sys

import click

from gpuplan.cli.common import (
    CONFIG_PATH,
    ONE_SPEC,
    SEVERITY_CHOICES,
    FiniteFloat,
    _echo_problems,
    _evidence_kinds,
    _format_option,
    _guarded,
)


@click.command(short_help="Hold a spec's estimate against a real run's logs.")
@click.argument("spec_path", metavar="SPEC", type=ONE_SPEC)
@click.option(
    "--run",
    "runs",
    multiple=True,
    required=True,
    metavar="EVIDENCE",
    help="What a real run logged: a vLLM, SGLang or TensorRT-LLM startup log, a PyTorch memory-statistics JSON, "
    "or a Trainer, torchtune or Accelerate log. Repeat for several runs.",
)
@click.option(
    "--kind",
    type=click.Choice(_evidence_kinds()),
    default="auto",
    show_default=True,
    help="The evidence format; auto tells it from the content.",
)
@_format_option("text", "json", "markdown")
@click.option(
    "--tolerance",
    type=FiniteFloat(0, 1000),
    default=None,
    help="Percent a measured term may differ from its estimate [default: 10, or thresholds.verify_tolerance_pct].",
)
@click.option("--fail-on", type=SEVERITY_CHOICES, default=None, help="Lowest severity that exits 1 [default: error].")
@click.option("--config", "config_path", type=CONFIG_PATH, default=None, help="Configuration file.")
@_guarded
def verify(
    spec_path: str,
    runs: tuple[str, ...],
    kind: str,
    output_format: str,
    tolerance: float | None,
    fail_on: str | None,
    config_path: str | None,
) -> None:
    """Hold SPEC's estimate against a real run: settings first, then memory term by term.

    Exit codes as lint's: 0 nothing at or above the fail level, 1 findings at or above it, 2 errors.
    """
    from gpuplan.output.verify_format import RENDERERS
    from gpuplan.verify import SpecNotEstimable, verify_spec

    try:
        summary = verify_spec(
            spec_path, list(runs), kind=kind, tolerance_pct=tolerance, config_path=config_path, fail_on=fail_on
        )
    except SpecNotEstimable as error:
        _echo_problems(error.findings)
        raise
    click.echo(RENDERERS[output_format](summary), nl=False)
    sys.exit(summary.exit_code)
