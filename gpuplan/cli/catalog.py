"""``gpuplan catalog gpus|models``: the built-in GPU and model catalogs."""

from __future__ import annotations

import click

from gpuplan.cli.common import _format_option


@click.group()
def catalog() -> None:
    """List the built-in GPU and model catalogs."""


@catalog.command("gpus")
@_format_option("text", "json")
def catalog_gpus(output_format: str) -> None:
    """GPUs: memory, bandwidth, dense BF16 TFLOPS, form factor, NVLink domain, indicative price."""
    from gpuplan.output.catalog_format import render_gpus

    click.echo(render_gpus(output_format), nl=False)


@catalog.command("models")
@_format_option("text", "json")
def catalog_models(output_format: str) -> None:
    """Models: parameters, layers, hidden size, heads/KV heads, KV bytes per token, source."""
    from gpuplan.output.catalog_format import render_models

    click.echo(render_models(output_format), nl=False)
