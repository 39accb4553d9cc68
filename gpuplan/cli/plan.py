"""``gpuplan plan``: the cheapest sound layout of each job, and the options around it."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from gpuplan.cli.common import (
    CONFIG_PATH,
    EXIT_FINDINGS,
    EXIT_OK,
    ONE_SPEC,
    FiniteFloat,
    _echo_problems,
    _format_option,
    _guarded,
)
from gpuplan.errors import GpuplanError
from gpuplan.visible import json_text


@click.command("plan", short_help="Recommend the cheapest sound layout, and the options.")
@click.argument("spec_path", metavar="SPEC", type=ONE_SPEC)
@_format_option("text", "json", "markdown")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Rows of options and rejected.")
@click.option("--gpu", "gpus", multiple=True, help="Only this GPU id (repeatable); replaces the spec's plan.gpu.")
@click.option(
    "--vendor",
    "vendors",
    multiple=True,
    type=click.Choice(["nvidia", "amd", "intel"], case_sensitive=False),
    help="Only GPUs of this vendor (repeatable); replaces plan.vendor.",
)
@click.option("--max-gpus", type=click.IntRange(min=1, max=4096), default=None, help="Replaces plan.max_gpus.")
@click.option("--max-nodes", type=click.IntRange(min=1, max=512), default=None, help="Replaces plan.max_nodes.")
@click.option(
    "--confidence",
    type=FiniteFloat(min=0.5, max=0.99),
    default=None,
    help="Replaces plan.confidence: how sure a sound layout must be to fit in memory and meet its SLO (0.5-0.99).",
)
@click.option("--config", "config_path", type=CONFIG_PATH, default=None, help="Configuration file.")
@_guarded
def plan_command(
    spec_path: str,
    output_format: str,
    top: int,
    gpus: tuple[str, ...],
    vendors: tuple[str, ...],
    max_gpus: int | None,
    max_nodes: int | None,
    confidence: float | None,
    config_path: str | None,
) -> None:
    """Recommend the cheapest layout that meets memory, headroom and the SLO, with the options around it.

    Exit 0 when every job has a sound layout within the constraints, 1 when one has none, 2 on errors.
    """
    import dataclasses

    from gpuplan import clock
    from gpuplan.catalog import UnknownNameError, gpu_id_in_any_case
    from gpuplan.decision.memo import build_memo
    from gpuplan.output.plan_text import render_markdown, render_text
    from gpuplan.plan.document import plan_document
    from gpuplan.rules.context import planner_for
    from gpuplan.run import lint_run

    summary = lint_run([spec_path], config_path=config_path, keep_analysis=True).summary()
    (result,) = summary.results
    if result.analysis is None:
        _stop_unresolved(result, spec_path, "planned")
    spec = result.analysis.spec
    try:
        gpus = tuple(gpu_id_in_any_case(gpu_id, spec.custom_gpus) for gpu_id in gpus)  # "H100-SXM" is h100-sxm
    except UnknownNameError as error:
        raise GpuplanError(f"--gpu: {error}") from None
    limits = dataclasses.replace(  # the options replace the spec's plan: section, field by field
        spec.plan,
        gpus=tuple(dict.fromkeys(gpus)) or spec.plan.gpus,
        vendors=tuple(dict.fromkeys(v.lower() for v in vendors)) or spec.plan.vendors,
        max_gpus=max_gpus or spec.plan.max_gpus,
        max_nodes=max_nodes or spec.plan.max_nodes,
        confidence=spec.plan.confidence if confidence is None else confidence,
    )
    settings = result.settings
    planner = planner_for(spec, settings, limits)
    # The decision `gpuplan report` states, computed once by gpuplan.decision.memo (under the spec's own plan
    # limits: the options above may widen or narrow the search, not what the spec asks to approve).
    own = planner if limits == spec.plan else None
    memo = build_memo(result, clock.today(), summary.fail_on, settings, own)
    document = plan_document(planner, path=result.path, top=top, cheaper_share=settings.cheaper_layout_share, memo=memo)
    if output_format == "json":
        click.echo(json_text(document))
    elif output_format == "markdown":
        click.echo(render_markdown(document), nl=False)
    else:
        click.echo(render_text(document), nl=False)
    # Within the constraints: a sound layout within the job's budget (over it, the recommendation is the
    # cheapest sound layout, and the plan says so).
    within = all(
        job["recommended"] is not None and job["recommended"]["within_budget"] is not False for job in document["jobs"]
    )
    sys.exit(EXIT_OK if within else EXIT_FINDINGS)


def _stop_unresolved(result: Any, spec_path: str, done: str) -> NoReturn:
    """A spec that did not resolve: its findings on stderr, then exit 2 with one line."""
    _echo_problems(result.findings)
    raise GpuplanError(f"{spec_path} cannot be {done} until the problems above are fixed")
