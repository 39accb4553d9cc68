"""Reading evidence safely: regular files only, bounded lines, terminal escapes removed, numbers checked.

A log can be 100 MB of progress bars, come from a terminal (ANSI colours), or be hostile. Lines are
read one at a time with a length cap, so memory stays bounded whatever the file holds; nothing read
from a file is shown to a person before :func:`clean` has removed escapes and control characters.
"""

from __future__ import annotations

import math
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Iterator
from typing import BinaryIO, Protocol, TypeVar

from gpuplan.errors import GpuplanError

MAX_LINE_BYTES = 64 * 1024  # longer lines (a pasted blob) are skipped, counted, never held whole
READ_BUFFER = 1 << 20  # bytes a file is read in: a run of empty lines is skipped this much at a time
MAX_SHOWN = 160  # characters of evidence text quoted in a message
MAX_BYTES_VALUE = 2**60  # 1 EiB: no GPU measurement is larger; bigger numbers are corrupt or hostile
MAX_COUNT_VALUE = 10**12  # tokens or sequences
GIB, MIB = 2**30, 2**20
UNITS = {"GiB": GIB, "GB": GIB, "MiB": MIB, "MB": MIB, "KiB": 1024, "B": 1}  # vLLM prints GiB; older lines say GB

# CSI (colours, cursor moves) and OSC (titles, hyperlinks) sequences, then any lone escape.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
_NUMBER = re.compile(r"[0-9][0-9,]{0,40}(?:\.[0-9]{1,20})?")


def open_regular(path: str) -> BinaryIO:
    """Open ``path`` for reading only if it is a regular file: a FIFO or a device could block or never end."""
    shown = clean(path)
    try:
        before = os.stat(path)
    except OSError as error:
        raise GpuplanError(f"cannot read run evidence {shown}: {error.strerror or error}") from None
    if not stat.S_ISREG(before.st_mode):
        raise GpuplanError(f"run evidence {shown} is not a regular file ({_file_kind(before.st_mode)}); give a file")
    try:
        # O_NONBLOCK: if the path was swapped for a FIFO since the stat, opening still returns at once.
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise GpuplanError(f"cannot read run evidence {shown}: {error.strerror or error}") from None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise GpuplanError(f"run evidence {shown} is not a regular file; give a file")
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb", buffering=READ_BUFFER)


def _file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a plain file"


class LineReader:
    """Iterate ``(line number, text)`` over a binary stream, at most MAX_LINE_BYTES held at a time.

    Carriage returns (progress bars redraw with them) split lines; ANSI escapes are removed; invalid
    UTF-8 is replaced. ``overlong`` counts the lines skipped for their length. Empty lines are counted and not
    yielded (no reader reads anything in one); a run of them is skipped a buffer at a time, so a log padded
    with millions of blank lines reads in a moment rather than line by line.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.overlong = 0
        self.count = 0

    def __iter__(self) -> Iterator[tuple[int, str]]:
        peek = getattr(self.stream, "peek", None)  # a buffered file's; a plain stream reads line by line
        while True:
            raw = self.stream.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            self.count += 1
            if raw in (b"\n", b"\r\n"):
                if peek is not None:
                    self._skip_empty_lines(peek)
                continue
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                self.overlong += 1
                self._skip_rest()
                continue
            text = raw.decode("utf-8", "replace").rstrip("\n")
            if "\x1b" in text:
                text = _ESCAPES.sub("", text)
            if "\r" not in text:
                yield self.count, text
                continue
            for part in text.split("\r"):
                if part.strip():
                    yield self.count, part

    def _skip_empty_lines(self, peek: Callable[[int], bytes]) -> None:
        """Count and consume the empty lines (``\\n``, ``\\r\\n``, carriage returns alone) at the head of the
        buffer, up to the last line feed among them, as long as the buffer starts with one."""
        while True:
            ahead = peek(1)
            run = len(ahead) - len(ahead.lstrip(b"\r\n"))
            end = ahead.rfind(b"\n", 0, run) + 1
            if not end:
                return
            self.count += ahead.count(b"\n", 0, end)
            self.stream.read(end)
            if end < len(ahead):  # what follows in the buffer is a line with text
                return

    def _skip_rest(self) -> None:
        while True:
            chunk = self.stream.readline(MAX_LINE_BYTES)
            if not chunk or chunk.endswith(b"\n"):
                return


Read = TypeVar("Read", covariant=True)


class LineParser(Protocol[Read]):
    """An engine log's parser: fed every line in turn, then asked for what it read."""

    def line(self, number_: int, line: str) -> None: ...

    def finish(self, path: str, reader: LineReader) -> Read: ...


def parse_lines(stream: BinaryIO, path: str, parse: LineParser[Read]) -> Read:
    """Feed ``parse`` every line of ``stream`` (named ``path`` in messages) through a LineReader, then finish it."""
    reader = LineReader(stream)
    for number_, line in reader:
        parse.line(number_, line)
    return parse.finish(path, reader)


def clean(text: str, limit: int = MAX_SHOWN) -> str:
    """Evidence text fit to show a person: no escapes or control/format characters, one line, bounded."""
    text = _ESCAPES.sub("", text)
    shown = "".join(
        "?" if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Zl", "Zp") else char
        for char in text[: limit * 2]
    )
    shown = " ".join(shown.split())
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def number(text: str, limit: float) -> float | None:
    """A plain decimal (thousands commas allowed) within [0, limit], or None: never inf, nan or 1e400."""
    match = _NUMBER.fullmatch(text.strip())
    if match is None:
        return None
    value = float(match.group(0).replace(",", ""))
    return value if math.isfinite(value) and 0 <= value <= limit else None


def size(value: str, unit: str) -> float | None:
    """Bytes from a printed value and unit ("14.99", "GiB"), or None when unreadable or absurd."""
    scale = UNITS.get(unit)
    if scale is None:
        return None
    amount = number(value, MAX_BYTES_VALUE / scale)
    return None if amount is None else amount * scale


def resolution(value: str, unit: str, decimals: int = 0) -> float:
    """Half the last printed digit, in ``unit``'s bytes: "14.99 GiB" is known to +-0.005 GiB.

    ``decimals`` is what the writer rounds to when it drops trailing zeros (``round(x, 2)`` prints 1.1).
    """
    decimals = max(decimals, len(value.split(".", 1)[1]) if "." in value else 0)
    return 0.5 * 10.0**-decimals * UNITS.get(unit, 1)


MAX_JSON_BYTES = 16 * 2**20  # a memory-statistics or metrics JSON is a few KB


def load_json(stream: BinaryIO, path: str) -> object:
    """Parse a small JSON document strictly: no NaN/Infinity, bounded size and depth errors reported."""
    shown = clean(path)
    raw = stream.read(MAX_JSON_BYTES + 1)
    if len(raw) > MAX_JSON_BYTES:
        raise GpuplanError(f"{shown}: larger than {MAX_JSON_BYTES // 2**20} MiB; a memory-statistics JSON is a few KB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise GpuplanError(f"{shown}: not UTF-8 (byte {error.start})") from None

    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not a number")

    import json  # only for JSON evidence

    try:
        return json.loads(text, parse_constant=refuse)
    except RecursionError:
        raise GpuplanError(f"{shown}: JSON nested too deeply") from None
    except ValueError as error:
        raise GpuplanError(f"{shown}: not valid JSON ({clean(str(error), 80)})") from None


# The least memory a GPU measurement in bytes can be: a training step's peak holds at least its weights, a
# device's memory is gigabytes. A figure in GiB (under 1,024 for any GPU) or in MB (under 1,048,576 for a
# GPU of less than 1 TiB) written where bytes belong is always below it.
MIN_MEMORY_BYTES = MIB


def json_number(value: object, key: str, shown: str) -> float:
    """The finite number a JSON key of run evidence holds, or GpuplanError naming the key and what is there."""
    if isinstance(value, str):
        raise GpuplanError(f"{shown}: {key} is {clean(value, 40)!r} (text): a byte count is a JSON number, unquoted")
    if isinstance(value, bool) or not isinstance(value, int | float):
        import json  # only to show the value as the file spells it

        raise GpuplanError(f"{shown}: {key} is {clean(json.dumps(value), 40)}: not a byte count")
    # an int past a float's range (a 309-digit byte count) is compared as an int: float() of it raises
    if (isinstance(value, float) and not math.isfinite(value)) or abs(value) > MAX_BYTES_VALUE:
        raise GpuplanError(f"{shown}: {key} is {_plain(value)}: beyond any GPU's memory (1 EiB)")
    return float(value)


BYTES_ADVICE = "give bytes, as PyTorch's counters return them"


def memory_bytes(value: float, what: str, shown: str, advice: str = BYTES_ADVICE) -> float:
    """``value`` if it can be a GPU's memory in bytes, else GpuplanError saying ``{what} {value}`` and why:
    negative, or below MIN_MEMORY_BYTES (a figure in another unit, which one told by its size)."""
    if MIN_MEMORY_BYTES <= value <= MAX_BYTES_VALUE:
        return value
    if value > MAX_BYTES_VALUE:
        why = "beyond any GPU's memory (1 EiB)"
    elif value < 0:
        why = "a byte count cannot be negative"
    elif value == 0:
        why = "no GPU's memory and no training step's peak"
    else:
        unit = "GiB" if value < 1024 else "MB"
        why = f"bytes cannot be a GPU's memory or a training step's peak (under 1 MiB); it looks like {unit}"
    raise GpuplanError(f"{shown}: {what} {_plain(value)}: {why}; {advice}")


def _plain(value: float) -> str:
    """A number as a person wrote it: 20,000 and 40.5, not 20000.0 or 2e+04; an int of more digits than a line
    holds by its size (10^309 written out is 309 zeros)."""
    if isinstance(value, int) and abs(value) >= 10**30:
        return f"an integer of {len(str(abs(value))):,} digits"
    return f"{int(value):,}" if math.isfinite(value) and value == int(value) else f"{value:,g}"


def json_bytes(value: object, key: str, shown: str) -> float:
    """The GPU memory in bytes a JSON key states, or GpuplanError saying why the value cannot be one."""
    return memory_bytes(json_number(value, key, shown), f"{key} is", shown)


def first_char(stream: BinaryIO) -> bytes:
    """The first non-blank byte (then rewinds): '{' or '[' means JSON."""
    head = stream.read(4096).lstrip(b" \t\r\n\xef\xbb\xbf")
    stream.seek(0)
    return head[:1]


def starts_json(stream: BinaryIO) -> bool:
    """Whether the stream holds a JSON document (then rewinds): an object, or a list of objects, lists or
    strings. A log whose lines open with a bracket (SGLang "[2025-10-16 09:06:22 TP0]", TensorRT-LLM
    "[TensorRT-LLM][INFO]") is not."""
    head = stream.read(4096).lstrip(b" \t\r\n\xef\xbb\xbf")
    stream.seek(0)
    if head[:1] == b"{":
        return True
    return head[:1] == b"[" and head[1:].lstrip(b" \t\r\n")[:1] in (b"{", b"[", b"]", b'"', b"")
