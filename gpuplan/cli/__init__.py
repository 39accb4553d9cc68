"""The command line: the only place that prints or exits.

One module per command (or group of commands) parses its options, calls the library and prints;
``common`` holds what they share. The group imports a command's module when that command runs, so
``gpuplan lint`` (a pre-commit hook) loads neither the report's, the planner's nor diff's command line.

Exit codes: 0 nothing at or above the fail level; 1 findings at or above it; 2 usage, configuration,
I/O or internal error (see ``gpuplan.cli.common``).
"""

from __future__ import annotations

import sys

import click

from gpuplan import __version__
from gpuplan.cli.common import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, PipeTolerant, _LazyCommands

# Each command: the module and attribute that define it (imported when the command runs or --help lists it).
COMMANDS = {
    "catalog": "gpuplan.cli.catalog:catalog",
    "diff": "gpuplan.cli.diff:diff",
    "estimate": "gpuplan.cli.estimate:estimate",
    "explain": "gpuplan.cli.rules:explain",
    "init": "gpuplan.cli.init:init",
    "lint": "gpuplan.cli.lint:lint",
    "plan": "gpuplan.cli.plan:plan_command",
    "report": "gpuplan.cli.report:report",
    "rules": "gpuplan.cli.rules:rules",
    "schema": "gpuplan.cli.rules:schema",
    "verify": "gpuplan.cli.verify:verify",
}


@click.group(cls=_LazyCommands, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuplan")
def cli() -> None:
    """Lint LLM fine-tuning and serving workload specs, estimate GPUs, and render decision reports."""


def main() -> None:
    sys.stdout, sys.stderr = PipeTolerant(sys.stdout), PipeTolerant(sys.stderr)
    cli(prog_name="gpuplan")


__all__ = ["COMMANDS", "EXIT_ERROR", "EXIT_FINDINGS", "EXIT_OK", "cli", "main"]
