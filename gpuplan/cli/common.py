"""What every command shares: the error guard, the common options, one-line usage errors and the lazy
command group.

Exit codes: 0 nothing at or above the fail level; 1 findings at or above it; 2 usage, configuration,
I/O or internal error: a bad option or --config file (one line on stderr; ``--traceback`` shows the
trace of an internal error), or a file the run could not check (GP009 unreadable, GP010 internal
error, GP012 invalid configuration), reported as a finding in every output format.
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import click

from gpuplan.errors import GpuplanError
from gpuplan.findings import Severity
from gpuplan.visible import visible

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


class NamedPath(click.Path):
    """A path that names something: click.Path, less a blank one. The file system reads '' as the current folder, and a
    shell passes it for an unset variable (`gpuplan plan "$SPEC"`): a one-spec command then read every spec of the
    folder, or a report was written to a file named '.'."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail(f"{value!r} names no path (an unset variable?)", param, ctx)
        if isinstance(value, str) and not self.dir_okay and value.endswith(("/", os.sep)):
            # a file's path ends in its name: `-o reports/` meant a folder, and the path, its slash dropped, wrote
            # a file named `reports` (or replaced the file `notes.txt` that `-o notes.txt/` named)
            self.fail(f"'{visible(value)}' ends with a slash, which names a folder; give a file's name", param, ctx)
        return super().convert(value, param, ctx)


# SPEC of the commands that take one spec (estimate, plan, report, verify): a file or '-', never a folder,
# which only lint searches for specs (a folder is a usage error, before anything is read or written).
ONE_SPEC = NamedPath(dir_okay=False, allow_dash=True)
CONFIG_PATH = NamedPath(dir_okay=False)  # --config: a configuration file


class PipeTolerant:
    """A text stream whose reader may go away (`gpuplan plan SPEC | head`): the first write or flush that finds
    the pipe closed points the stream at /dev/null, and the command runs on to the exit code it would have
    had, which is what `set -o pipefail` reads (click alone would exit 1 there, as if there were findings)."""

    def __init__(self, stream: Any) -> None:
        # A descriptor the caller closed (`gpuplan lint SPEC 2>&-`) leaves Python no stream at all (None): what
        # would go there goes nowhere, and the exit code stays the command's own.
        self._stream = stream if stream is not None else open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            self._silence()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._silence()

    def _silence(self) -> None:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())  # what is left in the buffer now goes nowhere, quietly
        except (OSError, AttributeError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:  # isatty, encoding, buffer, fileno: the stream's own
        return getattr(self._stream, name)


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
            type=CONFIG_PATH,
            default=None,
            help="Configuration file (.gpuplan.yaml or pyproject.toml); default: found upward from each spec.",
        ),
        click.option("--no-waivers", is_flag=True, help="Ignore the specs' waivers (procurement runs)."),
    )
    for option in reversed(options):
        command = option(command)
    return command


def _evidence_kinds() -> tuple[str, ...]:
    """The --kind choices of verify and report: auto, then every evidence format (read where those
    commands are defined, so that lint never imports the evidence package)."""
    from gpuplan.evidence import KINDS

    return ("auto", *KINDS)


# click 8.2 raises this usage error, whose message is the whole help, for a group given no command (8.1
# printed the help itself): it is shown as help, not squeezed into one escaped line.
_NO_COMMAND: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())


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
        except _NO_COMMAND as error:  # `gpuplan` or `gpuplan catalog` alone: the help, as click prints it
            click.echo(error.format_message(), err=True)  # gpuplan's own text: nothing typed to escape
            sys.exit(EXIT_ERROR)
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


class _LazyCommands(_OneLineErrors):
    """A group whose commands are imported when they run: ``gpuplan lint`` (a pre-commit hook) loads
    lint's module only, not report's, diff's or plan's. ``lazy`` maps each command name to
    "module:attribute"; ``--help`` imports them all to list their short help."""

    def __init__(self, *args: Any, lazy: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy:
            return super().get_command(ctx, cmd_name)
        module, _, attribute = self.lazy[cmd_name].partition(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as error:  # click offers close names from the loaded commands
            raise click.exceptions.NoSuchCommand(
                error.command_name, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None


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

    # Repeated or comma-separated (--select GP2,GP4), as ruff takes them.
    patterns = tuple(part.strip() for value in values for part in value.split(","))
    for value in patterns:
        if not value:
            raise click.BadParameter("an empty pattern would match every rule; name a code, prefix or rule", ctx, param)
        if not matches_any_code(value):
            close = suggestions(value)
            hint = f"did you mean {', '.join(close)}?" if close else "`gpuplan rules` lists them"
            raise click.BadParameter(f"unknown rule {value!r}; {hint}", ctx, param)
    return patterns


def _print_tracebacks(summary: RunSummary | LintResult) -> None:
    """The trace of each GP010 (internal error) finding of a run or a result, on stderr, when --traceback
    was given."""
    if click.get_current_context().meta.get(_TRACEBACK):
        for trace in summary.tracebacks:
            click.echo(trace, err=True)


def _echo_problems(findings: Any) -> None:
    """The spec's own problems, on stderr, before an error that says they stop the command."""
    from gpuplan.output.text import finding_lines  # lint's own lines: spec text in them shown escaped

    for finding in findings:
        click.echo("\n".join(finding_lines(finding)), err=True)
