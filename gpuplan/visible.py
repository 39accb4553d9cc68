"""Spec text made inert for terminals, CI logs and reports: control and bidi characters shown escaped.

A spec is untrusted input that reaches a terminal (text output), a CI log (GitHub workflow commands
are read line by line: a raw newline in a waiver reason could forge ``::error`` or ``::add-mask::``),
and a signed report. Every C0 and C1 control character, DEL, the Unicode line and paragraph
separators and the bidirectional overrides (which reorder what a reviewer reads, "Trojan Source")
are shown as escapes: ``\\x1b``, ``\\n``, ``\\u202e``. The text itself is kept, only made visible.
"""

from __future__ import annotations

import json
import re
from typing import Any

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# C0 controls, DEL, C1 controls, line/paragraph separators, bidi embeddings/overrides/isolates and marks, and lone
# surrogates: a file name that is not UTF-8 reaches Python with each stray byte as U+DC80-U+DCFF (surrogateescape),
# which no UTF-8 output can encode (a report of `caf\xe9.yaml` failed as an internal error).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\ud800-\udfff]")
# What JSON leaves raw of _UNSAFE (it escapes C0 controls itself; the indentation's line breaks are C0).
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\ud800-\udfff]")
_STRAY_BYTES = range(0xDC80, 0xDD00)  # surrogateescape's: the byte is the code point less 0xDC00
_WHITESPACE_CONTROLS = re.compile("[\t\n\r\x0b\x0c\x85\u2028\u2029]+")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code in _STRAY_BYTES:
        return f"\\x{code - 0xDC00:02x}"  # the byte the file name holds
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` on one line with every control, separator and bidi character escaped."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def visible_path(path: str) -> str:
    """A file's path where a line starts with it (``path:line:col: ...``): :func:`visible`, and a relative path that
    begins with ``::`` behind ``./``. A file name is as untrusted as its text (a pull request names its files), and
    a CI log reads a line that begins ``::error::`` as a workflow command."""
    shown = visible(path)
    return f"./{shown}" if shown.startswith("::") else shown


def visible_prose(text: str) -> str:
    """Like :func:`visible`, but line breaks and tabs become one space (multi-line descriptions in reports)."""
    return visible(_WHITESPACE_CONTROLS.sub(" ", text))


def json_text(document: Any) -> str:
    """``document`` as indented JSON that keeps readable Unicode (names, the em dashes of messages) but
    writes the characters :func:`visible` escapes as ``\\uXXXX``: JSON itself escapes only C0 controls,
    so DEL, C1, separators and bidi overrides from a spec reached a terminal that ``cat``s the output.
    NaN and infinities are refused (they are not JSON)."""
    text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
    # Outside strings JSON has only ASCII, so every such character sits in a string: its escape is valid.
    return _UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
