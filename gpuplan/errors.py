"""Errors the library raises for bad invocations (exit code 2 at the CLI).

Problems *in a spec* are findings, not exceptions; these are for what stops a run altogether:
an unreadable path, a bad configuration file, an unknown rule asked for by name.
"""

from __future__ import annotations


class GpuplanError(Exception):
    """A usage, configuration or I/O problem, reported in one line."""

    def lines(self) -> list[str]:
        """What the CLI prints, one entry per line: the message as one line (a path or value in it may
        hold a line break, which the CLI shows escaped, never as a line of its own)."""
        return [str(self)]
