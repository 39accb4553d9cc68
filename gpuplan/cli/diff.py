"""``gpuplan diff``: what a change to specs does to memory, speed, cost, findings and verdicts."""

from __future__ import annotations

import sys

import click

from gpuplan.cli.common import (
    CONFIG_PATH,
    EXIT_FINDINGS,
    EXIT_OK,
    SEVERITY_CHOICES,
    FiniteFloat,
    NamedPath,
    _format_option,
    _guarded,
)
from gpuplan.findings import Severity
from gpuplan.visible import visible


@click.command(short_help="What a change to specs does to memory, speed and cost.")
@click.argument("paths", nargs=-1, type=NamedPath(allow_dash=True))
@click.option(
    "--git",
    "git_ref",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[REF]",
    help="Compare every spec changed since git revision REF (default: the merge base with the default branch).",
)
@click.option("--head", "head_ref", default=None, help="With --git: compare to this revision, not the working tree.")
@click.option("--merge-base", is_flag=True, help="With --git REF: start from the merge base of REF and the head.")
@_format_option("text", "markdown", "json", "github")
@click.option("--config", "config_path", type=CONFIG_PATH, default=None, help="Configuration file.")
@click.option("--no-waivers", is_flag=True, help="Ignore the specs' waivers on both sides.")
@click.option(
    "--fail-on",
    type=SEVERITY_CHOICES,
    default=None,
    help="The fail level the verdicts are decided at, as gpuplan report's [default: error, or the configuration's].",
)
@click.option(
    "--max-monthly-increase",
    type=FiniteFloat(min=0),
    default=None,
    help="Exit 1 when the total monthly cost rises by more than this amount.",
)
@click.option(
    "--max-monthly-increase-pct",
    type=FiniteFloat(min=0),
    default=None,
    help="Exit 1 when the total monthly cost rises by more than this percentage.",
)
@click.option(
    "--fail-on-worse-verdict/--no-fail-on-worse-verdict",
    default=None,
    help="Exit 1 when a spec's verdict gets worse [config default: no].",
)
@click.option(
    "--fail-on-new-error/--no-fail-on-new-error",
    default=None,
    help="Exit 1 when a change brings a new error finding [config default: yes].",
)
@click.option(
    "--comment-on",
    type=click.Choice(["always", "any", "increase", "never"]),
    default=None,
    help="Print only when: always; any change that matters; the cost increases; never [config default: always].",
)
@_guarded
def diff(
    paths: tuple[str, ...],
    git_ref: str | None,
    head_ref: str | None,
    merge_base: bool,
    output_format: str,
    config_path: str | None,
    no_waivers: bool,
    fail_on: str | None,
    max_monthly_increase: float | None,
    max_monthly_increase_pct: float | None,
    fail_on_worse_verdict: bool | None,
    fail_on_new_error: bool | None,
    comment_on: str | None,
) -> None:
    """Show what a change to specs does to memory, speed, cost, findings and verdicts.

    \b
    gpuplan diff BASE.yaml HEAD.yaml          two spec files
    gpuplan diff --git [REF] [-- PATHSPEC...] specs changed since REF, up to the working tree
    gpuplan diff --git REF --head REF2        specs changed between two revisions

    Exit codes: 0 within the guardrails, 1 a guardrail failed, 2 usage, git or configuration error.
    """
    from pathlib import Path

    from gpuplan import clock
    from gpuplan.config import load_config
    from gpuplan.diff import renderer
    from gpuplan.diff.build import DiffOptions, diff_files, diff_git
    from gpuplan.diff.guardrails import (
        Guardrails,
        breaches,
        guardrail_config,
        other_sections,
        should_print,
        strictest,
    )

    options = DiffOptions(
        config_path, use_waivers=not no_waivers, today=clock.today(), fail_on=Severity(fail_on) if fail_on else None
    )
    if git_ref is None:
        if head_ref or merge_base:
            raise click.UsageError("--head and --merge-base need --git")
        if len(paths) != 2:
            raise click.UsageError("give two spec files (BASE HEAD), or --git [REF] to compare git revisions")
        result = diff_files(paths[0], paths[1], options)
        start = Path(paths[1]).parent
    else:
        if merge_base and not git_ref:
            raise click.UsageError("--merge-base needs a REF: --git REF --merge-base")
        result = diff_git(git_ref or None, head_ref, paths, merge_base=merge_base, options=options)
        # The repository root's configuration, wherever the command runs (a CI job's folder must not
        # decide whether the same change passes).
        assert result.repository_root is not None, "a git diff knows its work tree"
        start = result.repository_root
    used = guardrail_config(config_path, start)
    sections = [load_config(used).diff if used else {}]
    if git_ref is not None and not config_path:
        # A changed spec's own configuration may guard it more tightly: every guardrail at its strictest.
        for other, section in other_sections([(start / change.path).parent for change in result.changes], used):
            click.echo(
                f"gpuplan: note: the guardrails also take {visible(str(other))}'s diff keys (the strictest of"
                f" each applies, beside {visible(str(used)) if used else 'the defaults'})",
                err=True,
            )
            sections.append(section)
    guardrails = Guardrails.from_config(
        strictest(sections),
        max_monthly_increase=max_monthly_increase,
        max_monthly_increase_pct=max_monthly_increase_pct,
        fail_on_worse_verdict=fail_on_worse_verdict,
        fail_on_new_error=fail_on_new_error,
        comment_on=comment_on,
    )
    failed = breaches(result, guardrails)
    exit_code = EXIT_FINDINGS if failed else EXIT_OK
    if should_print(result, guardrails.comment_on):
        click.echo(renderer(output_format)(result, failed, exit_code), nl=False)
    elif failed:
        for reason in failed:
            click.echo(f"gpuplan: guardrail failed: {visible(reason)}", err=True)
    sys.exit(exit_code)
