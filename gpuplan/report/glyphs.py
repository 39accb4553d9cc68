"""Which characters of a spec's text the PDF cannot draw: no bundled and no installed font covers them.

The PDF embeds DejaVu Sans subset to Latin, Greek, punctuation and a few signs (templates/fonts/README.md); any
other character falls back to the machine's fonts through fontconfig, and where none covers it WeasyPrint leaves
a blank where a signer's or a vendor's name was. ``undrawable`` finds those characters before anything is
written, so the command can say so (the Markdown and HTML show them: a reader's fonts draw them there).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import unicodedata
from collections.abc import Iterable

from gpuplan.records import record
from gpuplan.resources import resource_dir

# Characters no font draws as a glyph of their own: controls, format characters (a zero-width joiner), combining
# marks and variation selectors (drawn with the character before them), and separators.
NOT_DRAWN = {"Cc", "Cf", "Mn", "Me", "Zs", "Zl", "Zp"}
FC_TIMEOUT_S = 10


def _covered(ranges: Iterable[tuple[int, int]], point: int) -> bool:
    return any(low <= point <= high for low, high in ranges)


@functools.cache
def bundled_points() -> frozenset[int]:
    """The code points the bundled fonts draw, read from their character maps (the subset templates/fonts/README.md
    made; fontTools comes with WeasyPrint)."""
    from fontTools.ttLib import TTFont

    fonts = sorted((resource_dir("templates") / "fonts").glob("*.ttf"))
    return frozenset(point for font in fonts for point in TTFont(font).getBestCmap())


def installed_ranges() -> tuple[tuple[int, int], ...] | None:
    """The code points some installed font covers (fontconfig's charsets: ``fc-list --format '%{charset}'``,
    hexadecimal ranges such as ``20-7e a0-17f 192``); None where fontconfig's command is missing or fails."""
    command = shutil.which("fc-list")
    if command is None:
        return None
    try:
        listed = subprocess.run(
            [command, "--format", "%{charset}\n"], capture_output=True, text=True, timeout=FC_TIMEOUT_S, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    ranges = []
    for word in listed.split():
        low, _, high = word.partition("-")
        try:
            ranges.append((int(low, 16), int(high or low, 16)))
        except ValueError:
            continue
    return tuple(ranges)


@record
class Undrawable:
    """The characters of a text the PDF cannot draw, in order of first appearance; ``known`` False where
    fontconfig could not be asked, so they are those outside the bundled fonts, which an installed font may cover."""

    chars: tuple[str, ...] = ()
    known: bool = True


def undrawable(texts: Iterable[str]) -> Undrawable:
    """The characters of ``texts`` that neither the bundled fonts nor an installed one covers."""
    outside: dict[str, None] = {}
    bundled = bundled_points()
    for text in texts:
        for char in text:
            if ord(char) not in bundled and unicodedata.category(char) not in NOT_DRAWN:
                outside[char] = None
    if not outside:
        return Undrawable()
    installed = installed_ranges()
    if installed is None:
        return Undrawable(tuple(outside), known=False)
    return Undrawable(tuple(char for char in outside if not _covered(installed, ord(char))))


def strings(data: object) -> Iterable[str]:
    """Every string of a loaded YAML document, keys and values, depth first."""
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(data, list):
        for item in data:
            yield from strings(item)
