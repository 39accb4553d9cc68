"""YAML bytes -> plain data plus the line and column of every key and value.

The document is built from PyYAML's *event* stream by an iterative composer of our own, so that:
- duplicate keys are reported (PyYAML's loaders silently keep the last one);
- nesting depth, alias expansion and file size are bounded before anything large is built
  ("billion laughs" documents are refused after a few thousand events, in constant memory);
- only the YAML 1.1 core tags are accepted (no ``!!python/...``), and timestamps stay strings; a number
  in YAML 1.2's exponent form (``1.3e4``) is a float, as editors and check-jsonschema read it;
- every problem is a :class:`~gpuplan.findings.Finding` with a position, never an exception.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpuplan.findings import Finding, dotted, json_pointer
from gpuplan.reading import SPEC_MAX_BYTES
from gpuplan.records import record

MAX_BYTES = SPEC_MAX_BYTES  # the loader's own backstop for bytes that did not come through a bounded read
MAX_ALIAS_EXPANSIONS = 1000
MAX_DEPTH = 64
# Values (scalars, mappings, lists, alias expansions) in one file. The largest valid spec (32 custom
# GPUs, 64 tenants, 100 evidence figures, 200 waivers) has about 3,000; past 10,000 a file is no spec,
# and stopping there bounds the time and memory every later step spends on it.
MAX_NODES = 10_000

Pointer = tuple[str | int, ...]

_SAFE_TAGS = frozenset(
    "tag:yaml.org,2002:" + name
    for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "binary", "merge")
)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SCALAR_EVENT = yaml.ScalarEvent


class _SpecResolver(yaml.resolver.Resolver):
    """YAML 1.1's resolver that also reads a number in exponent form without a dot or a sign in its exponent
    (``1.3e4``, ``2e9``) as a float, as YAML 1.2 does: under 1.1 alone that text is a string, which the
    schema then refuses where editors and check-jsonschema (YAML 1.2) read the same file as a number."""


# YAML 1.2's float in exponent form, which YAML 1.1 reads as a string: a writer of specs quotes such a string.
EXPONENT_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$")
EXPONENT_FIRST = list("-+0123456789.")
_SpecResolver.add_implicit_resolver("tag:yaml.org,2002:float", EXPONENT_FLOAT, EXPONENT_FIRST)
_RESOLVER = _SpecResolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()


@record
class Position:
    """1-based line and column of a key (where there is one) and of its value."""

    line: int
    col: int
    value_line: int
    value_col: int


@record
class LoadedDocument:
    """What the loader produces: the data (None when loading failed), positions and findings."""

    path: str
    data: Any
    positions: dict[Pointer, Position]
    findings: tuple[Finding, ...]
    raw: bytes = b""

    def position(self, pointer: Pointer) -> Position:
        """The position of ``pointer``, or of its nearest ancestor that has one."""
        for end in range(len(pointer), -1, -1):
            found = self.positions.get(tuple(pointer[:end]))
            if found is not None:
                return found
        return Position(1, 1, 1, 1)


class _LoadProblem(Exception):
    def __init__(self, code: str, message: str, line: int, col: int, hint: str = "", pointer: Pointer = ()) -> None:
        super().__init__(message)
        self.code, self.message, self.line, self.col, self.hint = code, message, line, col, hint
        self.pointer = pointer

    def finding(self, path: str) -> Finding:
        return Finding.make(
            self.code,
            self.message,
            path=path,
            line=self.line,
            col=self.col,
            pointer=json_pointer(self.pointer),
            hint=self.hint,
        )


@dataclass
class _Frame:
    """A mapping or sequence under construction."""

    value: Any
    pointer: Pointer
    size: int = 1
    pending_key: Any = None
    key_mark: tuple[int, int] | None = None
    key_lines: dict[Any, int] = field(default_factory=dict)
    merged: list[dict[Any, Any]] = field(default_factory=list)
    anchor: str | None = None
    opened: tuple[int, int] = (1, 1)


# PyYAML and libyaml also break lines at U+0085, U+2028 and U+2029; editors (and YAML 1.2) break only
# at LF, CRLF and CR, so positions are recomputed from the character index when the text holds one.
_EXTRA_BREAKS = re.compile("[\x85\u2028\u2029]")
_EDITOR_BREAK = re.compile("\r\n|\r|\n")


class _Lines:
    """1-based (line, column) of a character index, counting lines as editors do."""

    def __init__(self, text: str) -> None:
        self.starts: list[int] | None = None
        if _EXTRA_BREAKS.search(text):
            self.starts = [0] + [match.end() for match in _EDITOR_BREAK.finditer(text)]

    def at(self, mark: Any) -> tuple[int, int]:
        if self.starts is None:
            return mark.line + 1, mark.column + 1
        line = bisect.bisect_right(self.starts, mark.index)
        return line, mark.index - self.starts[line - 1] + 1


_PLAIN_LINES = _Lines("")
# What YAML's reader refuses (yaml.reader.Reader.NON_PRINTABLE, the YAML 1.1 printable set): the reader's
# own error gives an offset (bytes in libyaml, characters in PyYAML), so the character is found again here.
_UNPRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _first_unprintable(text: str, lines: _Lines) -> tuple[int, int]:
    """(line, column) of the first character YAML does not allow in ``text`` ((1, 1) if none is found)."""
    found = _UNPRINTABLE.search(text)
    if found is None:
        return 1, 1
    index = found.start()
    starts = lines.starts or [0] + [match.end() for match in _EDITOR_BREAK.finditer(text, 0, index)]
    line = bisect.bisect_right(starts, index)  # lines end where editors end them (LF, CRLF or a lone CR)
    return line, index - starts[line - 1] + 1


def _mark(event: Any, lines: _Lines = _PLAIN_LINES) -> tuple[int, int]:
    return lines.at(event.start_mark)


def _scalar(event: Any, lines: _Lines = _PLAIN_LINES) -> Any:
    try:
        return _scalar_value(event.tag, event.value, event.implicit)
    except _LoadProblem as problem:
        line, col = _mark(event, lines)
        raise _LoadProblem(problem.code, problem.message, line, col, problem.hint) from None


# Plain scalars repeat across specs (keys, GPU ids, numbers): each tag, text and style is resolved once
# (the values are immutable), with the memo bounded so that memory stays flat. Problems are raised at
# line 0 and placed by the caller (they are not remembered).
@functools.lru_cache(maxsize=4096)
def _scalar_value(tag: str | None, text: str, implicit: tuple[bool, bool]) -> Any:
    if tag is None or tag == "!":
        tag = _RESOLVER.resolve(yaml.ScalarNode, text, implicit)
    if tag not in _SAFE_TAGS:
        raise _LoadProblem(
            "GP004", f"unsupported YAML tag {tag!r}", 0, 0, "remove the tag; specs use plain YAML values"
        )
    if tag.endswith((":str", ":timestamp", ":binary", ":merge")):
        return text
    try:
        # The tag's constructor itself: construct_object() would memoise every node in the shared
        # constructor for the life of the process (memory growing with each file linted).
        value = _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, yaml.ScalarNode(tag, text))
    except Exception:  # PyYAML's constructors raise KeyError, IndexError, ValueError ... on odd text
        raise _LoadProblem("GP001", f"{_shown(text)} is not a valid {tag.rsplit(':', 1)[-1]}", 0, 0) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise _LoadProblem("GP001", f"{text!r} is not a finite number", 0, 0, "write a plain number")
    return value


class _Composer:
    """Builds plain data from events, tracking positions, anchors and limits."""

    def __init__(self, lines: _Lines = _PLAIN_LINES) -> None:
        self.lines = lines
        self.nodes = 0
        self.positions: dict[Pointer, Position] = {}
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.stack: list[_Frame] = []
        self.expansions = 0
        self.root: Any = None
        self.documents = 0
        self.duplicates: list[_LoadProblem] = []

    def _child_pointer(self) -> tuple[Pointer, tuple[int, int] | None]:
        parent = self.stack[-1]
        if isinstance(parent.value, list):
            return parent.pointer + (len(parent.value),), None
        return parent.pointer + (_key_text(parent.pending_key),), parent.key_mark

    def _attach(self, value: Any, size: int, mark: tuple[int, int], anchor: str | None) -> None:
        if anchor:
            self.anchors[anchor] = (value, size)
        if not self.stack:
            self.root = value
            self.positions[()] = Position(mark[0], mark[1], mark[0], mark[1])
            return
        parent = self.stack[-1]
        parent.size += size
        container = parent.value
        if type(container) is list:  # a frame holds the plain list or dict _open made
            pointer = parent.pointer + (len(container),)
            self.positions.setdefault(pointer, Position(mark[0], mark[1], mark[0], mark[1]))
            container.append(value)
            return
        if parent.key_mark is None:  # this value is a key
            self._take_key(parent, value, mark)
            return
        key = parent.pending_key
        key_line, key_col = parent.key_mark
        parent.key_mark, parent.pending_key = None, None
        if key == "<<":
            self._merge(parent, value, mark)
            return
        pointer = parent.pointer + (_key_text(key),)
        self.positions[pointer] = Position(key_line, key_col, mark[0], mark[1])
        parent.value[key] = value

    def _attach_scalar(self, value: Any, mark: tuple[int, int], anchor: str | None) -> None:
        """``_attach`` of a scalar, its commonest cases (a key, a mapping's value, a list item) inline."""
        stack = self.stack
        if anchor or not stack:
            self._attach(value, 1, mark, anchor)
            return
        parent = stack[-1]
        container = parent.value
        key_mark = parent.key_mark
        if type(container) is list:
            parent.size += 1
            pointer = parent.pointer + (len(container),)
            self.positions.setdefault(pointer, Position(mark[0], mark[1], mark[0], mark[1]))
            container.append(value)
        elif key_mark is None:  # this value is a key (a scalar: never a mapping or list)
            parent.size += 1
            key_lines = parent.key_lines
            if value in key_lines and value != "<<":
                self._duplicate(parent, value, mark)
            key_lines[value] = mark[0]
            parent.pending_key, parent.key_mark = value, mark
        elif parent.pending_key == "<<":
            self._attach(value, 1, mark, anchor)
        else:
            parent.size += 1
            key = parent.pending_key
            parent.key_mark, parent.pending_key = None, None
            pointer = parent.pointer + (key if isinstance(key, str) else str(key),)
            self.positions[pointer] = Position(key_mark[0], key_mark[1], mark[0], mark[1])
            container[key] = value

    def _take_key(self, parent: _Frame, key: Any, mark: tuple[int, int]) -> None:
        if isinstance(key, (dict, list)):
            raise _LoadProblem("GP001", "a mapping key must be a plain value, not a mapping or list", *mark)
        if key in parent.key_lines and key != "<<":
            self._duplicate(parent, key, mark)
        parent.key_lines[key] = mark[0]
        parent.pending_key, parent.key_mark = key, mark

    def _duplicate(self, parent: _Frame, key: Any, mark: tuple[int, int]) -> None:
        first = parent.key_lines[key]
        where = dotted(parent.pointer) or "the top level"
        self.duplicates.append(
            _LoadProblem(
                "GP002",
                f"duplicate key {key!r} in {where}: first defined on line {first}, again on line {mark[0]}",
                mark[0],
                mark[1],
                "YAML keeps only the last value silently; remove one of them",
                pointer=parent.pointer + (_key_text(key),),
            )
        )

    def _merge(self, parent: _Frame, value: Any, mark: tuple[int, int]) -> None:
        sources = value if isinstance(value, list) else [value]
        if not all(isinstance(source, dict) for source in sources):
            raise _LoadProblem("GP001", "a merge key '<<' needs a mapping or a list of mappings", *mark)
        parent.merged.extend(sources)

    def _count(self, event: Any, size: int = 1) -> None:
        self.nodes += size
        if self.nodes > MAX_NODES:
            raise _LoadProblem(
                "GP003",
                f"the file holds more than {MAX_NODES:,} values; a spec has a few hundred",
                *_mark(event, self.lines),
                "check that this is the right file",
            )

    def feed(self, event: Any) -> None:
        if isinstance(event, _SCALAR_EVENT):  # most events are scalars: tested first, and taken inline
            self.nodes += 1
            if self.nodes > MAX_NODES:
                self._count(event, 0)  # raises
            lines = self.lines
            if lines.starts is None:
                start = event.start_mark
                mark = (start.line + 1, start.column + 1)
            else:
                mark = lines.at(event.start_mark)
            try:
                value = _scalar_value(event.tag, event.value, event.implicit)
            except _LoadProblem as problem:
                raise _LoadProblem(problem.code, problem.message, mark[0], mark[1], problem.hint) from None
            self._attach_scalar(value, mark, event.anchor)
        elif isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                line, col = _mark(event, self.lines)
                raise _LoadProblem(
                    "GP007", "the file holds more than one YAML document", line, col, "one spec per file"
                )
        elif isinstance(event, yaml.AliasEvent):
            self._alias(event)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            self._count(event)
            self._open(event)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            self._close(event)

    def _alias(self, event: Any) -> None:
        line, col = _mark(event, self.lines)
        if event.anchor not in self.anchors:
            raise _LoadProblem("GP001", f"unknown alias *{event.anchor}", line, col)
        value, size = self.anchors[event.anchor]
        self.expansions += size
        if self.expansions > MAX_ALIAS_EXPANSIONS:
            raise _LoadProblem(
                "GP003",
                f"aliases expand to more than {MAX_ALIAS_EXPANSIONS} nodes",
                line,
                col,
                "specs are small; write the values out instead of nesting aliases",
            )
        self._count(event, size)
        self._attach(value, size, (line, col), None)

    def _open(self, event: Any) -> None:
        line, col = _mark(event, self.lines)
        expected = "map" if isinstance(event, yaml.MappingStartEvent) else "seq"
        if event.tag not in (None, "!") and event.tag != "tag:yaml.org,2002:" + expected:
            raise _LoadProblem("GP004", f"unsupported YAML tag {event.tag!r}", line, col, "remove the tag")
        if len(self.stack) >= MAX_DEPTH:
            raise _LoadProblem("GP003", f"nesting deeper than {MAX_DEPTH} levels", line, col)
        pointer = self._child_pointer()[0] if self.stack else ()
        value: Any = {} if expected == "map" else []
        self.stack.append(_Frame(value=value, pointer=pointer, anchor=event.anchor, opened=(line, col)))

    def _close(self, event: Any) -> None:
        frame = self.stack.pop()
        if isinstance(frame.value, dict):
            for source in reversed(frame.merged):
                for key, item in source.items():
                    frame.value.setdefault(key, item)
        self._attach(frame.value, frame.size, frame.opened, frame.anchor)


def _shown(text: str) -> str:
    """A scalar's text for a message: quoted, at most 40 characters."""
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _key_text(key: Any) -> str:
    return key if isinstance(key, str) else str(key)


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        before = raw[: error.start].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        line = before.count(b"\n") + 1
        col = len(before) - (before.rfind(b"\n") + 1) + 1
        raise _LoadProblem("GP005", f"the file is not valid UTF-8 (byte 0x{raw[error.start]:02x})", line, col) from None


def load_bytes(path: str, raw: bytes) -> LoadedDocument:
    """Parse ``raw`` (the contents of ``path``) into a :class:`LoadedDocument`."""
    try:
        composer = _load(raw)
    except _LoadProblem as problem:
        return LoadedDocument(path, None, {}, (problem.finding(path),), raw)
    duplicates = tuple(problem.finding(path) for problem in composer.duplicates)
    return LoadedDocument(path, composer.root, composer.positions, duplicates, raw)


def _load(raw: bytes) -> _Composer:
    if len(raw) > MAX_BYTES:
        raise _LoadProblem("GP003", f"the file is {len(raw):,} bytes; specs are limited to {MAX_BYTES:,} bytes", 1, 1)
    text = _decode(raw)
    lines = _Lines(text)
    composer = _Composer(lines)
    try:
        parser = _Loader(text)  # the events of yaml.parse, without its generator
        try:
            feed, next_event = composer.feed, parser.get_event
            while parser.check_event():
                feed(next_event())
        finally:
            parser.dispose()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line, col = lines.at(mark) if mark else (1, 1)
        message = " ".join(part for part in (error.context, error.problem) if part) or "invalid YAML"
        if "maximum nesting depth" in message:  # libyaml >= 0.2.5 stops runaway nesting itself
            raise _LoadProblem("GP003", f"nesting deeper than {MAX_DEPTH} levels", line, col) from None
        raise _LoadProblem("GP001", f"YAML syntax error: {message}", line, col) from None
    except yaml.reader.ReaderError as error:  # a character YAML does not allow, at its own line
        line, col = _first_unprintable(text, lines)
        code = int(error.character)
        escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
        raise _LoadProblem(
            "GP001",
            f"YAML syntax error: the character U+{code:04X} is not allowed in YAML",
            line,
            col,
            f'remove it, or write it as an escape inside a double-quoted string ("{escape}")',
        ) from None
    except yaml.YAMLError as error:
        raise _LoadProblem("GP001", f"YAML syntax error: {error}", 1, 1) from None
    if composer.documents == 0 or composer.root is None:  # nothing, comments, or a document of null alone
        raise _LoadProblem("GP006", "the file is empty", 1, 1, "a spec starts with 'version: 1'")
    if not isinstance(composer.root, dict):
        root = composer.positions.get((), Position(1, 1, 1, 1))
        kind = type(composer.root).__name__ if composer.root is not None else "nothing"
        raise _LoadProblem(
            "GP008", f"the top level must be a mapping of keys to values, not {_kind(kind)}", root.line, root.col
        )
    return composer


def _kind(name: str) -> str:
    return {"list": "a list", "str": "a string", "int": "a number", "float": "a number", "bool": "a boolean"}.get(
        name, name
    )
