"""``gpuplan rules``, ``gpuplan explain`` and ``gpuplan schema``: the reference a spec is written against."""

from __future__ import annotations

import click

from gpuplan.cli.common import _format_option, _guarded


@click.command()
@click.option("--markdown", is_flag=True, help="Print the field reference table (as in docs/spec.md) instead.")
def schema(markdown: bool) -> None:
    """Print the spec's JSON Schema (2020-12)."""
    from gpuplan.resources import schema_path

    if markdown:
        from gpuplan.schema_doc import reference_table
        from gpuplan.validate import load_schema

        click.echo(reference_table(load_schema()))
        return
    click.echo(schema_path().read_text(encoding="utf-8"), nl=False)


@click.command()
@click.argument("code")
@_guarded
def explain(code: str) -> None:
    """Print the documentation of one rule, by code (GP201) or name."""
    from gpuplan.output.rules_format import explain_text
    from gpuplan.rules.registry import get_rule

    click.echo(explain_text(get_rule(code)), nl=False)


@click.command(short_help="List every rule: code, name, family, severity, summary.")
@_format_option("text", "json")
def rules(output_format: str) -> None:
    """List every rule: code, name, family, default severity and summary."""
    from gpuplan.output.rules_format import render_rules
    from gpuplan.rules.registry import all_rules

    click.echo(render_rules(all_rules(), output_format), nl=False)
