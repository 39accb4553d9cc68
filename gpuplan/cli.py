"""The command line: the only place that prints or exits.

Exit codes: 0 nothing at or above the fail level; 1 findings at or above it; 2 usage, configuration,
I/O or internal error: a bad option or --config file (one line on stderr; ``--traceback`` shows the
trace of an internal error), or a file the run could not check (GP009 unreadable, GP010 internal
error, GP012 invalid configuration), reported as a finding in every output format.
"""

from __future__ import annotations

import functools
import math
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

import click

from gpuplan import __version__
from gpuplan.errors import GpuplanError
from gpuplan.evidence import KINDS
from gpuplan.findings import Severity
from gpuplan.output import FORMAT_MODULES
from gpuplan.visible import json_text, visible

if TYPE_CHECKING:  # the linter is imported where a command needs it, not at start-up
    from gpuplan.linter import LintResult
    from gpuplan.output.summary import RunSummary

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
_TRACEBACK = "gpuplan.traceback"  # click context key: whether --traceback was given
SEVERITY_CHOICES = click.Choice([s.value for s in Severity])


def _guarded(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn library errors into exit 2 with one line; anything unexpected too, unless --traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, traceback_: bool = False, **kwargs: Any) -> Any:
        click.get_current_context().meta[_TRACEBACK] = traceback_
        try:
            return command(*args, **kwargs)
        except GpuplanError as error:
            first, *rest = error.lines()  # one line, or a header and one problem per line
            click.echo(f"gpuplan: error: {visible(first)}" + "".join(f"\n  {visible(line)}" for line in rest), err=True)
            sys.exit(EXIT_ERROR)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit, KeyboardInterrupt):
            raise
        except BrokenPipeError:
            raise  # the reader went away (`| head`): click exits quietly, as other CLI tools do
        except OSError as error:  # the system refused (a full disk, /dev/full, an I/O error): not a bug
            _discard_stdout()
            reason = error.strerror or str(error)
            where = f"{error.filename}: " if error.filename else "cannot write the output: "
            click.echo(f"gpuplan: error: {visible(where + reason)}", err=True)
            sys.exit(EXIT_ERROR)
        except Exception as error:
            if traceback_:
                import traceback  # only on the error path: it costs start-up time

                traceback.print_exc()
            else:
                click.echo(
                    f"gpuplan: internal error: {type(error).__name__}: {visible(str(error))} "
                    "(run with --traceback for details)",
                    err=True,
                )
            sys.exit(EXIT_ERROR)

    return click.option("--traceback", "traceback_", is_flag=True, help="Show the full trace of an internal error.")(
        wrapper
    )


def _discard_stdout() -> None:
    """Point standard output at /dev/null, so that flushing what is left in its buffer at exit (which
    failed once already) does not fail again with a second, raw message."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, AttributeError, ValueError):
        pass


def _format_option(*choices: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--format`` with the given choices, the first the default (one definition for every command)."""
    return click.option(
        "--format",
        "output_format",
        type=click.Choice(list(choices)),
        default=choices[0],
        show_default=True,
        help="Output format.",
    )


def _run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--fail-on, --config and --no-waivers: what lint, estimate and report share (one set of semantics)."""
    options = (
        click.option(
            "--fail-on", type=SEVERITY_CHOICES, default=None, help="Lowest severity that exits 1 [default: error]."
        ),
        click.option(
            "--config",
            "config_path",
            type=click.Path(dir_okay=False),
            default=None,
            help="Configuration file (.gpuplan.yaml or pyproject.toml); default: found upward from each spec.",
        ),
        click.option("--no-waivers", is_flag=True, help="Ignore the specs' waivers (procurement runs)."),
    )
    for option in reversed(options):
        command = option(command)
    return command


class _OneLineErrors(click.Group):
    """click's usage errors as one line on stderr, like every other usage error of gpuplan (click prints
    the usage block, a "Try" line and the error: four lines a CI log greps badly), with the value the
    user typed shown escaped (it may hold control characters)."""

    def main(self, *args: Any, standalone_mode: bool = True, **extra: Any) -> Any:  # type: ignore[override]
        run: Any = super().main  # click's overloads tie the return type to a literal standalone_mode
        if not standalone_mode:
            return run(*args, standalone_mode=False, **extra)
        try:
            code = run(*args, standalone_mode=False, **extra)
        except click.UsageError as error:
            where = error.ctx.command_path if error.ctx is not None else "gpuplan"
            click.echo(f"gpuplan: error: {visible(error.format_message())} (see '{where} --help')", err=True)
            sys.exit(EXIT_ERROR)
        except click.ClickException as error:
            click.echo(f"gpuplan: error: {visible(error.format_message())}", err=True)
            sys.exit(EXIT_ERROR)
        except click.exceptions.Abort:  # Ctrl-C, or end of input at a prompt
            click.echo("\ngpuplan: error: aborted", err=True)
            sys.exit(EXIT_ERROR)
        sys.exit(code if isinstance(code, int) else 0)  # an Exit's code (--help, --version), else success


class FiniteFloat(click.FloatRange):
    """A float option within bounds, and finite: click's FloatRange lets "nan" through (it compares
    false with both bounds), which silently switched off the check the option sets."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def _rule_patterns(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """--select/--ignore patterns checked as the configuration's are: an empty pattern matches every
    code (--ignore "$UNSET" switched linting off) and a mistyped one none (--select GP2O1 selected none)."""
    from gpuplan.codes import suggestions
    from gpuplan.config import matches_any_code

    for value in values:
        if not value.strip():
            raise click.BadParameter("an empty pattern would match every rule; name a code, prefix or rule", ctx, param)
        if not matches_any_code(value):
            close = suggestions(value)
            hint = f"did you mean {', '.join(close)}?" if close else "`gpuplan rules` lists them"
            raise click.BadParameter(f"unknown rule {value!r}; {hint}", ctx, param)
    return values


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuplan")
def cli() -> None:
    """Lint LLM fine-tuning and serving workload specs, estimate GPUs, and render decision reports."""


@cli.command()
@click.argument("paths", nargs=-1, required=True)
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
    "--select", multiple=True, callback=_rule_patterns, help="Only these codes, code prefixes (GP2) or rule names."
)
@click.option("--ignore", multiple=True, callback=_rule_patterns, help="Skip these codes, code prefixes or rule names.")
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


def _print_tracebacks(summary: RunSummary | LintResult) -> None:
    """The trace of each GP010 (internal error) finding of a run or a result, on stderr, when --traceback
    was given."""
    if click.get_current_context().meta.get(_TRACEBACK):
        for trace in summary.tracebacks:
            click.echo(trace, err=True)


@cli.command()
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


@cli.command()
@click.argument("code")
@_guarded
def explain(code: str) -> None:
    """Print the documentation of one rule, by code (GP201) or name."""
    from gpuplan.rules.registry import get_rule

    rule = get_rule(code)
    click.echo(f"{rule.code} {rule.name} ({rule.family}, default severity {rule.severity.value})\n")
    click.echo(rule.doc)


@cli.command(short_help="List every rule: code, name, family, severity, summary.")
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


def main() -> None:
    cli(prog_name="gpuplan")


def _echo_problems(findings: Any) -> None:
    """The spec's own problems, on stderr, before an error that says they stop the command."""
    from gpuplan.output.text import finding_lines  # lint's own lines: spec text in them shown escaped

    for finding in findings:
        click.echo("\n".join(finding_lines(finding)), err=True)


def _stop_unresolved(result: Any, spec_path: str, done: str) -> NoReturn:
    """A spec that did not resolve: its findings on stderr, then exit 2 with one line."""
    _echo_problems(result.findings)
    raise GpuplanError(f"{spec_path} cannot be {done} until the problems above are fixed")


EVIDENCE_KINDS = ("auto", *KINDS)


@cli.command(short_help="Hold a spec's estimate against a real run's logs.")
@click.argument("spec_path", metavar="SPEC")
@click.option(
    "--run",
    "runs",
    multiple=True,
    required=True,
    metavar="EVIDENCE",
    help="What a real run logged: a vLLM startup log, a PyTorch memory-statistics JSON, or a Trainer, "
    "torchtune or Accelerate log. Repeat for several runs.",
)
@click.option(
    "--kind",
    type=click.Choice(EVIDENCE_KINDS),
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
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Configuration file.")
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


@cli.command(short_help="Per-GPU memory, speed and cost of a spec's jobs.")
@click.argument("spec_path", metavar="SPEC")
@_format_option("text", "json")
@_run_options
@_guarded
def estimate(
    spec_path: str, output_format: str, fail_on: str | None, config_path: str | None, no_waivers: bool
) -> None:
    """Estimate per-GPU memory, speed and cost of a spec's jobs, with the assumptions used.

    The spec is linted as `gpuplan lint` does (same configuration, thresholds and rules), so the
    estimate uses the configured efficiencies; the findings follow the estimate and the exit code
    is lint's: a job that fits in memory but breaks a rule (TP beyond the NVLink domain) exits 1.
    """

    from gpuplan.analysis import to_dict
    from gpuplan.output.estimate_text import render_estimate
    from gpuplan.output.text import render as render_findings
    from gpuplan.run import lint_run

    if spec_path == "-":
        raise GpuplanError("estimate needs a spec file, not standard input")
    summary = lint_run(
        [spec_path], fail_on=fail_on, config_path=config_path, use_waivers=not no_waivers, keep_analysis=True
    ).summary()
    (result,) = summary.results
    if output_format == "json":
        document = to_dict(result.analysis) if result.analysis is not None else {}
        document["findings"] = [finding.to_dict() for finding in result.findings]
        document["exit_code"] = summary.exit_code
        click.echo(json_text(document))
    elif result.analysis is None:
        click.echo(render_findings(summary), nl=False, err=True)
        click.echo(f"gpuplan: no estimate: {visible(result.path)} has problems that stop it (above)", err=True)
    else:
        click.echo(render_estimate(result.analysis), nl=False)
        click.echo(render_findings(summary), nl=False)
    _print_tracebacks(summary)
    sys.exit(summary.exit_code)


@cli.command("plan", short_help="Recommend the cheapest sound layout, and the options.")
@click.argument("spec_path", metavar="SPEC")
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
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Configuration file.")
@_guarded
def plan_command(
    spec_path: str,
    output_format: str,
    top: int,
    gpus: tuple[str, ...],
    vendors: tuple[str, ...],
    max_gpus: int | None,
    max_nodes: int | None,
    config_path: str | None,
) -> None:
    """Recommend the cheapest layout that meets memory, headroom and the SLO, with the options around it.

    Exit 0 when every job has a sound layout within the constraints, 1 when one has none, 2 on errors.
    """
    import dataclasses

    from gpuplan.catalog import UnknownNameError, get_gpu
    from gpuplan.output.plan_text import render_markdown, render_text
    from gpuplan.plan.document import plan_document
    from gpuplan.rules.context import planner_for
    from gpuplan.run import lint_run

    summary = lint_run([spec_path], config_path=config_path, keep_analysis=True).summary()
    (result,) = summary.results
    if result.analysis is None:
        _stop_unresolved(result, spec_path, "planned")
    spec = result.analysis.spec
    for gpu_id in gpus:
        try:
            get_gpu(gpu_id, spec.custom_gpus)
        except UnknownNameError as error:
            raise GpuplanError(f"--gpu: {error}") from None
    limits = dataclasses.replace(
        spec.plan,
        gpus=tuple(dict.fromkeys(gpus)) or spec.plan.gpus,
        vendors=tuple(dict.fromkeys(v.lower() for v in vendors)) or spec.plan.vendors,
        max_gpus=max_gpus or spec.plan.max_gpus,
        max_nodes=max_nodes or spec.plan.max_nodes,
    )
    settings = result.settings
    planner = planner_for(spec, settings, limits)
    document = plan_document(planner, path=result.path, top=top, cheaper_share=settings.cheaper_layout_share)
    if output_format == "json":
        click.echo(json_text(document))
    elif output_format == "markdown":
        click.echo(render_markdown(document), nl=False)
    else:
        click.echo(render_text(document), nl=False)
    sys.exit(EXIT_OK if all(job["recommended"] is not None for job in document["jobs"]) else EXIT_FINDINGS)


@cli.group()
def catalog() -> None:
    """List the built-in GPU and model catalogs."""


@catalog.command("gpus")
@_format_option("text", "json")
def catalog_gpus(output_format: str) -> None:
    """GPUs: memory, bandwidth, dense BF16 TFLOPS, form factor, NVLink domain, indicative price."""
    import dataclasses
    import json

    from gpuplan.catalog import gpu_catalog, gpu_sources

    gpus = gpu_catalog()
    if output_format == "json":
        sources = gpu_sources()
        rows = [
            {**dataclasses.asdict(gpu), "price_per_hour": gpu.price_per_hour, "provenance": sources.get(gpu.id, {})}
            for gpu in gpus.values()
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(
        f"{'id':<16}{'memory':>10}{'usable GiB':>12}{'TB/s':>7}{'bf16 TF':>9}  {'form':<6}{'domain':>7}{'$/h':>8}  quoted"
    )
    for gpu in gpus.values():
        price = f"{gpu.price_per_hour:.2f}" if gpu.price_per_hour is not None else "-"
        click.echo(
            f"{gpu.id:<16}{gpu.memory_gb:>8g}GB{gpu.usable_bytes / 2**30:>12.1f}{gpu.bandwidth_tbs:>7.2f}"
            f"{gpu.peak_flops('bf16') / 1e12:>9.0f}  {gpu.form_factor:<6}{gpu.domain:>7}{price:>8}  {_quoted(gpu.price)}"
        )


def _quoted(price: Any) -> str:
    """The dates of the quotes behind a catalog price: one date, or the oldest to the newest."""
    if price is None or price.quoted_from is None:
        return "-"
    return price.quoted_from if price.quoted_from == price.quoted_to else f"{price.quoted_from}..{price.quoted_to}"


@catalog.command("models")
@_format_option("text", "json")
def catalog_models(output_format: str) -> None:
    """Models: parameters, layers, hidden size, heads/KV heads, KV bytes per token, source."""
    import dataclasses
    import json

    from gpuplan.catalog import model_catalog

    models = model_catalog()
    if output_format == "json":
        rows = [
            {
                "id": m.id,
                "name": m.name,
                "params": m.architecture.params,
                "active_params": m.architecture.active_params,
                "kv_bytes_per_token_bf16": m.architecture.kv_bytes_per_token(2),
                "hf_ids": list(m.hf_ids),
                "source": m.source,
                "architecture": dataclasses.asdict(m.architecture),
            }
            for m in models.values()
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"{'id':<24}{'params':>18}{'layers':>7}{'hidden':>7}{'heads':>9}{'KV B/token':>12}  source")
    for m in models.values():
        a = m.architecture
        click.echo(
            f"{m.id:<24}{a.params:>18,}{a.layers:>7}{a.hidden:>7}{f'{a.heads}/{a.n_kv}':>9}"
            f"{a.kv_bytes_per_token(2):>12,.0f}  {m.source}"
        )


_FORMAT_OF_SUFFIX = {".pdf": ("pdf",), ".html": ("html",), ".htm": ("html",)}


@cli.command(short_help="Render a decision report (Markdown, HTML or PDF).")
@click.argument("spec_path", metavar="SPEC")
@click.option("--md", "as_md", is_flag=True, help="Markdown (the default when no format is given).")
@click.option("--html", "as_html", is_flag=True, help="HTML with an embedded SVG memory chart.")
@click.option("--pdf", "as_pdf", is_flag=True, help="PDF (the HTML through WeasyPrint).")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
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
@click.option("--kind", type=click.Choice(EVIDENCE_KINDS), default="auto", help="The --run evidence format.")
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
    or over its spec; files are written atomically and keep the mode of the file they replace.
    """
    from pathlib import Path

    from gpuplan import clock
    from gpuplan.atomic import check_destination, write_atomic
    from gpuplan.report.pdf_process import pdf_renderer

    formats = tuple(name for name, wanted in (("md", as_md), ("html", as_html), ("pdf", as_pdf)) if wanted)
    if not formats and output not in (None, "-"):  # no format asked for: -o report.pdf means a PDF
        formats = _FORMAT_OF_SUFFIX.get(os.path.splitext(output)[1].lower(), ())
    formats = formats or ("md",)
    if spec_path == "-":
        raise GpuplanError("report needs a spec file, not standard input")
    to_stdout = output == "-" or (output is None and len(formats) == 1 and formats[0] != "pdf")
    if to_stdout and (len(formats) > 1 or formats[0] == "pdf"):
        raise GpuplanError("-o - writes one Markdown or HTML report; a PDF or several formats need a file name")
    spec = Path(spec_path)
    destinations = {}
    if not to_stdout:
        for name in formats:
            if output is None:
                target = spec.with_suffix(f".{name}")
            else:
                target = Path(output) if len(formats) == 1 else Path(output).with_suffix(f".{name}")
            destinations[name] = check_destination(target, protect=(spec,), force=force, mkdir=mkdir)
    interactive = sys.stderr.isatty()

    def progress(message: str) -> None:
        if interactive:
            click.echo(f"gpuplan: {message} ...", err=True)

    epoch = clock.today_epoch()
    # WeasyPrint's fontTools fallback stamps subset fonts with SOURCE_DATE_EPOCH or the time: pin it
    # for this process (HarfBuzz subsetting, the usual path, stamps nothing), before the PDF child forks.
    os.environ.setdefault("SOURCE_DATE_EPOCH", str(epoch))
    with pdf_renderer(early="pdf" in formats) as renderer:  # WeasyPrint loads while the spec is linted
        from gpuplan.report.build import render_report  # imported after the fork, in parallel with WeasyPrint
        from gpuplan.run import lint_run

        summary = lint_run(
            [spec_path], fail_on=fail_on, config_path=config_path, use_waivers=not no_waivers, keep_analysis=True
        ).summary()
        (result,) = summary.results
        verification = None
        if runs:
            from dataclasses import replace

            from gpuplan.report.verified import verification_section
            from gpuplan.verify import verify_linted

            result, verified = verify_linted(
                result, list(runs), kind=kind, config_path=config_path, use_waivers=not no_waivers
            )
            summary = replace(summary, results=(result,))
            verification = verification_section(verified)
        rendered = render_report(
            result, formats, clock.today(), progress, summary.fail_on, renderer.render, verification
        )
    for name, data in rendered.items():
        if to_stdout:
            click.echo(data.decode(), nl=False)
            continue
        write_atomic(destinations[name], data)
        if interactive:
            click.echo(f"gpuplan: wrote {visible(str(destinations[name].path))}", err=True)
    _print_tracebacks(summary)
    sys.exit(summary.exit_code)


@cli.command(short_help="What a change to specs does to memory, speed and cost.")
@click.argument("paths", nargs=-1)
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
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Configuration file.")
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
    from gpuplan.diff import renderer
    from gpuplan.diff.build import DiffOptions, diff_files, diff_git
    from gpuplan.diff.guardrails import Guardrails, breaches, configured_section, should_print

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
        start = Path.cwd()
    guardrails = Guardrails.from_config(
        configured_section(config_path, start),
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
        "Model", default=starter.STARTER_MODEL, type=click.Choice(list(model_catalog())), show_choices=True
    )
    if not serve and finetune is None:
        job = click.prompt("Job", default="serve", type=click.Choice(["serve", "finetune", "finetune-then-serve"]))
        serve = job != "finetune"
        if job != "serve":
            finetune = click.prompt("Fine-tuning method", default="lora", type=click.Choice(list(starter.METHODS)))
    gpu = gpu or click.prompt("GPU", default=starter.STARTER_GPU, type=click.Choice(list(gpu_catalog())))
    count = count or click.prompt("GPUs", default=1, type=click.IntRange(min=1))
    label = "Context (tokens per request)" if serve else "Sequence length (tokens)"
    default_context = starter.STARTER_CONTEXT if serve else starter.starter_seq_len()
    context = context or click.prompt(label, default=default_context, type=click.IntRange(min=1))
    if serve:
        concurrency = concurrency or click.prompt(
            "Concurrency (sequences in flight)", default=starter.STARTER_CONCURRENCY, type=click.IntRange(min=1)
        )
    return model, serve, finetune, gpu, count, context, concurrency


@cli.command(short_help="Write a commented starter spec, then lint it.")
@click.argument("path", default="workload.yaml", required=False)
@click.option("--model", default=None, help="Model id from `gpuplan catalog models`.")
@click.option("--serve", "serve", is_flag=True, default=None, help="A serving deployment.")
@click.option("--finetune", type=click.Choice(["full", "lora", "qlora"]), default=None, help="A fine-tuning job.")
@click.option("--gpu", default=None, help="GPU id from `gpuplan catalog gpus`.")
@click.option(
    "--count", type=click.IntRange(min=1), default=None, help="GPUs per job (serving: one replica, TP over all)."
)
@click.option(
    "--context", type=click.IntRange(min=1), default=None, help="Serving context, or fine-tuning sequence length."
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
    """Write a commented starter spec to PATH (default workload.yaml; '-' prints it), then lint it.

    \b
    gpuplan init --model llama-3.1-8b --serve --gpu l40s --context 8192 --concurrency 16
    gpuplan init --model llama-3.1-70b --finetune qlora --gpu h100-pcie finetune.yaml
    gpuplan init                      asks, when run in a terminal
    """
    from pathlib import Path

    from gpuplan import starter

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
    if not path.strip():
        raise click.BadParameter("an empty path names no file; give a file name, or - for standard output")
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

    write_atomic(check_destination(target, force=force, mkdir=mkdir), text.encode())
    summary = lint_run([path]).summary()
    click.echo(f"gpuplan: wrote {visible(path)}", err=True)
    if note:  # the settings init chose to hold the job, or that none do (also a comment in the file)
        click.echo(f"gpuplan: {note}", err=True)
    from gpuplan.output import formatter

    click.echo(formatter("text")(summary), nl=False, err=True)
