"""Where each key and array item of a TOML table is written, for configuration errors at their place.

``tomllib`` gives values without positions, so the text it has already parsed is scanned once more: table
headers (``[tool.gpuplan]``, ``[ tool . "gpuplan" ]``), dotted and quoted keys (``thresholds.headroom_pct``,
``"fail-on"``), inline tables and arrays over several lines. Only text ``tomllib`` accepted is scanned, so the
scanner need not report errors: where it meets something it does not expect, it stops, and every key it has
not reached falls back to its nearest ancestor's position (``LoadedDocument.position``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable

from gpuplan.loader import Position

Pointer = tuple[str | int, ...]
Note = Callable[[Pointer, int, int], None]  # (path, line, column) of a key or an array item

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
# a number, boolean or date runs to what ends a value (a date-time may hold one space: 1979-05-27 07:32:00Z)
_SCALAR = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}[^,\]}\s#]*|[^,\]}\s#]+")
_ESCAPE = re.compile(r'\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|[btnfr"\\])')  # TOML 1.0 basic-string escapes
_SIMPLE = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


class _Stop(Exception):
    """The scanner met text it does not read; the positions found so far stand."""


def key_positions(text: str, root: tuple[str, ...]) -> dict[Pointer, Position]:
    """Positions of everything under the table ``root`` (``("tool", "gpuplan")``), keyed by their path below it:
    ``("thresholds", "headroom_pct")`` for a key, ``("select", 1)`` for an array's second item; ``()`` for the
    table itself where a header or a dotted key names it."""
    scanner = _Scanner(text)
    found: dict[Pointer, Position] = {}

    def note(pointer: Pointer, line: int, col: int) -> None:
        """Where ``pointer`` and each table above it are first named."""
        for end in range(len(root), len(pointer) + 1):
            if pointer[: len(root)] == root and pointer[len(root) : end] not in found:
                found[pointer[len(root) : end]] = Position(line, col, line, col)

    with contextlib.suppress(_Stop):
        scanner.document(note)
    return found


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.line = 1
        self.line_start = 0

    # -- characters --------------------------------------------------------------------------------------------
    def peek(self, length: int = 1) -> str:
        return self.text[self.at : self.at + length]

    def advance(self, count: int = 1) -> None:
        for _ in range(count):
            if self.at >= len(self.text):
                raise _Stop
            if self.text[self.at] == "\n":
                self.line += 1
                self.line_start = self.at + 1
            self.at += 1

    @property
    def col(self) -> int:
        return self.at - self.line_start + 1

    def skip_blank(self, newlines: bool) -> None:
        """Spaces and tabs (and newlines and comments where ``newlines``, as inside arrays)."""
        while self.at < len(self.text):
            char = self.text[self.at]
            if char in " \t\r" or (newlines and char == "\n"):
                self.advance()
            elif char == "#" and newlines:
                self.skip_comment()
            else:
                return

    def skip_comment(self) -> None:
        end = self.text.find("\n", self.at)
        self.advance((len(self.text) if end < 0 else end) - self.at)

    # -- the grammar ---------------------------------------------------------------------------------------------
    def document(self, note: Note) -> None:
        table: Pointer = ()
        while True:
            self.skip_blank(newlines=True)
            if self.at >= len(self.text):
                return
            line, col = self.line, self.col
            if self.peek() == "[":
                double = self.peek(2) == "[["
                self.advance(2 if double else 1)
                table = tuple(part for part, _, _ in self.key())
                self.skip_blank(newlines=False)
                self.advance(2 if double else 1)
                note(table, line, col)
            else:
                self.key_value(table, note)
            self.skip_blank(newlines=False)
            if self.peek() == "#":
                self.skip_comment()

    def key(self) -> list[tuple[str, int, int]]:
        """A dotted key: bare, "basic" or 'literal' parts separated by dots, each with its line and column."""
        parts = []
        while True:
            self.skip_blank(newlines=False)
            line, col = self.line, self.col
            parts.append((self.key_part(), line, col))
            self.skip_blank(newlines=False)
            if self.peek() != ".":
                return parts
            self.advance()

    def key_value(self, table: Pointer, note: Note) -> None:
        """``key = value``, noting each part of the key where it is written, then what the value holds."""
        pointer = table
        for part, line, col in self.key():
            pointer = (*pointer, part)
            note(pointer, line, col)
        if self.peek() != "=":
            raise _Stop
        self.advance()
        self.skip_blank(newlines=False)
        self.value(pointer, note)

    def key_part(self) -> str:
        if self.peek() in ('"', "'"):
            return self.string()
        bare = _BARE_KEY.match(self.text, self.at)
        if bare is None:
            raise _Stop
        self.advance(len(bare.group()))
        return bare.group()

    def value(self, pointer: Pointer, note: Note) -> None:
        char = self.peek()
        if char == "[":
            self.advance()
            index = 0
            while True:
                self.skip_blank(newlines=True)
                if self.peek() == "]":
                    self.advance()
                    return
                note((*pointer, index), self.line, self.col)
                self.value((*pointer, index), note)
                index += 1
                self.skip_blank(newlines=True)
                if self.peek() == ",":
                    self.advance()
        elif char == "{":
            self.advance()
            while True:
                self.skip_blank(newlines=False)
                if self.peek() == "}":
                    self.advance()
                    return
                self.key_value(pointer, note)
                self.skip_blank(newlines=False)
                if self.peek() == ",":
                    self.advance()
        elif char in ('"', "'"):
            self.string()
        else:
            scalar = _SCALAR.match(self.text, self.at)
            if scalar is None:
                raise _Stop
            self.advance(len(scalar.group()))

    def string(self) -> str:
        """A basic or literal string, one-line or multi-line; its value (escapes read in basic strings)."""
        quote = self.peek()
        triple = self.peek(3) == quote * 3
        delimiter = quote * 3 if triple else quote
        self.advance(len(delimiter))
        start = self.at
        while True:
            if self.at >= len(self.text):
                raise _Stop
            if quote == '"' and self.peek() == "\\":
                self.advance(2)
                continue
            if self.text.startswith(delimiter, self.at):
                # a multi-line string may end with up to two more quotes than its delimiter
                while triple and self.text.startswith(delimiter + quote, self.at):
                    self.advance()
                body = self.text[start : self.at]
                self.advance(len(delimiter))
                return _ESCAPE.sub(_unescape, body) if quote == '"' else body
            self.advance()


def _unescape(match: re.Match[str]) -> str:
    escape = match.group(1)
    return _SIMPLE[escape] if len(escape) == 1 else chr(int(escape[1:], 16))
