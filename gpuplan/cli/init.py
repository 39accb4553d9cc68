"""``gpuplan init``: a commented starter spec, asked for or from options, written and then linted."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from gpuplan.cli.common import NamedPath, _guarded
from gpuplan.errors import GpuplanError
from gpuplan.findings import Severity
from gpuplan.visible import visible


class _Named(click.ParamType):
    """A catalog name as init's flags and prompts both take it (``resolve``: the library's reading,
    which returns the id the spec writes)."""

    def __init__(self, name: str, resolve: Callable[[str], str], listing: str) -> None:
        self.name, self.resolve, self.listing = name, resolve, listing

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from gpuplan.catalog import UnknownNameError
        from gpuplan.visible import visible

        try:
            return self.resolve(str(value))
        except UnknownNameError as error:  # the answer as typed, escaped: a pasted escape sequence stays inert
            self.fail(f"{visible(str(error))}; `gpuplan catalog {self.listing}` lists them", param, ctx)


class _Tokens(click.ParamType):
    """A token count as people write it (8192, 8k, 32K), for the flag and the prompt alike."""

    name = "tokens"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from gpuplan.starter import token_count

        if isinstance(value, int):
            return value
        try:
            return token_count(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


def _model_id(text: str) -> str:
    from gpuplan.starter import catalog_model_id

    return catalog_model_id(text)


def _gpu_id(text: str) -> str:
    from gpuplan.catalog import gpu_id_in_any_case

    return gpu_id_in_any_case(text)


MODEL = _Named("model", _model_id, "models")
GPU = _Named("gpu", _gpu_id, "gpus")
TOKENS = _Tokens()


def _check_starter(choices: Any) -> None:
    """The options' values within the spec schema's bounds (the one source of them): the starter built
    from the options, before the planner sees it, must be schema-valid, or nothing is written."""
    from gpuplan import starter
    from gpuplan.loader import load_bytes
    from gpuplan.validate import validate

    document = load_bytes("<options>", starter.starter_spec(choices).encode())
    problems = [f for f in (*document.findings, *validate(document)) if f.severity.rank >= Severity.ERROR.rank]
    if problems:
        raise click.UsageError(f"the options give an invalid spec: {problems[0].message}")


def _ask(
    model: str | None,
    serve: bool | None,
    finetune: str | None,
    gpu: str | None,
    count: int | None,
    context: int | None,
    concurrency: int | None,
) -> tuple[str, bool | None, str | None, str, int, int, int | None]:
    """init's questions, for every choice not given on the command line."""
    from gpuplan import starter
    from gpuplan.catalog import gpu_catalog, model_catalog

    model = model or click.prompt(
        f"Model ({', '.join(model_catalog())}, or a Hugging Face id)", default=starter.STARTER_MODEL, type=MODEL
    )
    if not serve and finetune is None:
        job = click.prompt("Job", default="serve", type=click.Choice(["serve", "finetune", "finetune-then-serve"]))
        serve = job != "finetune"
        if job != "serve":
            finetune = click.prompt("Fine-tuning method", default="lora", type=click.Choice(list(starter.METHODS)))
    gpu = gpu or click.prompt(f"GPU ({', '.join(gpu_catalog())})", default=starter.STARTER_GPU, type=GPU)
    count = count or click.prompt("GPUs", default=1, type=click.IntRange(min=1))
    label = "Context (tokens per request)" if serve else "Sequence length (tokens)"
    default_context = starter.STARTER_CONTEXT if serve else starter.starter_seq_len()
    context = context or click.prompt(label, default=default_context, type=TOKENS)
    if serve:
        concurrency = concurrency or click.prompt(
            "Concurrency (sequences in flight)", default=starter.STARTER_CONCURRENCY, type=click.IntRange(min=1)
        )
    return model, serve, finetune, gpu, count, context, concurrency


@click.command(short_help="Write a commented starter spec, then lint it.")
@click.argument("path", default="workload.yaml", required=False, type=NamedPath(allow_dash=True))
@click.option("--model", type=MODEL, default=None, help="Model id from `gpuplan catalog models`, or a Hugging Face id.")
@click.option("--serve", "serve", is_flag=True, default=None, help="A serving deployment.")
@click.option("--finetune", type=click.Choice(["full", "lora", "qlora"]), default=None, help="A fine-tuning job.")
@click.option("--gpu", type=GPU, default=None, help="GPU id from `gpuplan catalog gpus`, in any case.")
@click.option(
    "--count", type=click.IntRange(min=1), default=None, help="GPUs per job (serving: one replica, TP over all)."
)
@click.option(
    "--context",
    type=TOKENS,
    default=None,
    help="Serving context, or fine-tuning sequence length, in tokens (8192, 8k, 32K).",
)
@click.option("--concurrency", type=click.IntRange(min=1), default=None, help="Sequences in flight (serving).")
@click.option("--name", default=None, help="The spec's name [default: from the model and jobs].")
@click.option(
    "--interactive/--no-interactive",
    default=None,
    help="Ask for every choice [default: when standard input is a terminal].",
)
@click.option("--force", is_flag=True, help="Replace PATH if it exists (a symlink: the link itself).")
@click.option("--mkdir", is_flag=True, help="Create PATH's missing folders.")
@_guarded
def init(
    path: str,
    model: str | None,
    serve: bool | None,
    finetune: str | None,
    gpu: str | None,
    count: int | None,
    context: int | None,
    concurrency: int | None,
    name: str | None,
    interactive: bool | None,
    force: bool,
    mkdir: bool,
) -> None:
    """Write a commented starter spec to PATH (default workload.yaml), then lint it; '-' prints it, for a pipe.

    \b
    gpuplan init --model llama-3.1-8b --serve --gpu l40s --context 8192 --concurrency 16
    gpuplan init --model llama-3.1-70b --finetune qlora --gpu h100-pcie finetune.yaml
    gpuplan init                      asks, when run in a terminal
    """
    from pathlib import Path

    from gpuplan import starter
    from gpuplan.discovery import has_spec_suffix

    if path != "-" and path.strip() and not has_spec_suffix(path):  # before any question is asked
        raise click.BadParameter(
            f"{visible(path)} does not end in .yaml or .yml: the pre-commit hook and gpuplan lint DIR read only"
            " those, so the spec would never be checked",
            param_hint="PATH",
        )
    if interactive is None:
        interactive = sys.stdin.isatty() and (model is None or (not serve and finetune is None))
    if interactive:
        try:
            model, serve, finetune, gpu, count, context, concurrency = _ask(
                model, serve, finetune, gpu, count, context, concurrency
            )
        except click.exceptions.Abort:
            if sys.stdin is None or not sys.stdin.isatty():  # answers piped in ran out: say which way out
                raise GpuplanError(
                    "standard input ended before every question was answered; give --model and --serve "
                    "and/or --finetune METHOD (and --no-interactive) instead"
                ) from None
            raise
    elif model is None or (not serve and finetune is None):
        raise click.UsageError("give --model and --serve and/or --finetune METHOD (or run in a terminal to be asked)")
    assert model is not None
    choices = starter.Starter(
        model=model,
        gpu=gpu or starter.STARTER_GPU,
        serve=bool(serve),
        finetune=finetune,
        count=count or 1,
        context=context,
        concurrency=concurrency or starter.STARTER_CONCURRENCY,
        name=name,
    )
    _check_starter(choices)
    text, note = starter.fitted_starter(choices)
    if path == "-":
        click.echo(text, nl=False)
        return
    target = Path(path)
    if (target.exists() or target.is_symlink()) and not force:
        raise GpuplanError(f"{path} exists; choose another path or use --force to replace it")
    from gpuplan.atomic import check_destination, write_atomic
    from gpuplan.run import lint_run

    destination = check_destination(target, force=force, mkdir=mkdir, what="a spec", to_stdout="PATH -")
    write_atomic(destination, text.encode())
    summary = lint_run([path]).summary()
    click.echo(f"gpuplan: wrote {visible(path)}", err=True)
    if note:  # the settings init chose to hold the job, or that none do (also a comment in the file)
        click.echo(f"gpuplan: {note}", err=True)
    from gpuplan.output import formatter

    click.echo(formatter("text")(summary), nl=False, err=True)
