"""``gpuplan rules``, ``gpuplan explain`` and ``gpuplan schema``: the reference a spec is written against."""

from __future__ import annotations

import click

from gpuplan.cli.common import _format_option, _guarded


@click.command()
@click.option("--markdown", is_flag=True, help="Print the field reference table (as in the README) instead.")
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
    from gpuplan.rules.registry import get_rule

    rule = get_rule(code)
    click.echo(f"{rule.code} {rule.name} ({rule.family}, default severity {rule.severity.value})\n")
    click.echo(rule.doc)


@click.command(short_help="List every rule: code, name, family, severity, summary.")
@_format_option("text", "json")
def rules(output_format: str) -> None:
    """List every rule: code, name, family, default severity and summary."""
    import json

    from gpuplan.rules.registry import all_rules

    listed = all_rules()
    if output_format == "json":
        rows = [
            {
                "code": r.code,
                "name": r.name,
                "family": r.family,
                "severity": r.severity.value,
                "summary": r.summary,
                "doc": r.doc,
            }
            for r in listed
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    for r in listed:
        click.echo(f"{r.code}  {r.name:<32} {r.family:<12} {r.severity.value:<8} {r.summary}")
