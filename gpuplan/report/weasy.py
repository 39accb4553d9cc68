"""Import WeasyPrint without spawning a hundred processes.

WeasyPrint opens Pango, HarfBuzz and fontconfig through cffi, trying several names per library
(``libpango-1.0-0``, ``pango-1.0``, ..., ``libpango-1.0.so.0``). For every name that is not a file cffi calls
``ctypes.util.find_library``, which on Linux runs ``ldconfig -p`` and ``gcc``/``ld`` (about 110 processes
per import, 0.3 s on a warm machine and seconds on a cold one). Each list also holds the library's soname
(``libpango-1.0.so.0``), ``.dylib`` and ``.dll`` names, which the dynamic loader resolves directly; so the
lookup is switched off for the import, and WeasyPrint falls through to the names that load. A system whose
libraries load only under names ``find_library`` must resolve gets the slow import as before.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from types import ModuleType


@contextlib.contextmanager
def _no_library_search() -> Iterator[None]:
    """``ctypes.util.find_library`` answers "not found" without running anything, for this block only."""
    import ctypes.util

    original = ctypes.util.find_library
    ctypes.util.find_library = lambda name: None
    try:
        yield
    finally:
        ctypes.util.find_library = original


def load_weasyprint() -> ModuleType:
    """The ``weasyprint`` module, imported with direct library loads where they work."""
    if "weasyprint" in sys.modules:
        return sys.modules["weasyprint"]
    try:
        with _no_library_search():
            import weasyprint
    except OSError:
        import weasyprint  # the libraries need find_library's search here: the slow path
    return weasyprint
