"""A PDF renderer that imports WeasyPrint in a child process while the parent lints and builds the report.

Importing WeasyPrint (cffi declarations, its user-agent stylesheets, fontTools) costs about 0.3 s of CPU,
and the lint, the planner and the report model about as much again; on a machine with two cores they can
overlap. ``gpuplan report --pdf`` forks a child at the start that imports WeasyPrint and waits for the HTML;
the parent sends it once the model is built and reads the PDF's bytes back. The bytes are those
``render_pdf`` writes in-process (same code, same ``SOURCE_DATE_EPOCH`` handling). Where ``fork`` is not
the platform's safe default (macOS, Windows) the PDF is rendered in-process, as it is when no PDF is asked.
"""

from __future__ import annotations

import gc
import multiprocessing
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gpuplan.errors import GpuplanError

JOIN_TIMEOUT_S = 5  # a killed child is reaped at once; the bound only guards against the unexpected


def _child(connection: Any) -> None:
    """Import WeasyPrint, then render the one document the parent sends.

    The cyclic garbage collector is off in this process: WeasyPrint keeps every box of the document alive
    until the PDF is written, so collections find almost nothing, yet each one walks the whole growing heap
    (about a tenth of the import and the rendering; quadratic in a long report). Peak memory is unchanged
    (75 MiB for a 9-page report, 300 MiB for 159 pages either way), and the process exits after one PDF.
    """
    gc.disable()
    from gpuplan.report import pdf as pdf_module

    try:
        from gpuplan.report.weasy import load_weasyprint

        load_weasyprint()
        html = connection.recv()
        connection.send(("pdf", pdf_module.render_pdf(html)))
    except EOFError:
        return  # the parent is gone
    except OSError as error:  # the machine's, not gpuplan's: a full disk for WeasyPrint's temporary fonts
        connection.send(("os-error", error))
    except BaseException as error:  # everything goes back to the parent, which reports it
        connection.send(("error", f"{type(error).__name__}: {error}"))
    finally:
        connection.close()


class PdfRenderer:
    """Renders one PDF: in a forked child that started importing WeasyPrint early, or in-process."""

    def __init__(self, early: bool) -> None:
        self.process: Any = None
        self.connection: Any = None
        if early and sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
            context = multiprocessing.get_context("fork")
            self.connection, child_end = context.Pipe()
            self.process = context.Process(target=_child, args=(child_end,), daemon=True, name="gpuplan-pdf")
            self.process.start()
            child_end.close()  # the parent keeps one end: a child that dies reads as EOF, never a hang

    def render(self, html: str) -> bytes:
        if self.process is None:
            from gpuplan.report import pdf as pdf_module

            try:
                return pdf_module.render_pdf(html)
            except OSError as error:
                raise _cannot_render(error) from None
        self.connection.send(html)
        try:
            kind, payload = self.connection.recv()
        except EOFError:
            raise RuntimeError("the PDF renderer stopped without an answer") from None
        finally:
            self.close()
        if kind == "os-error":
            raise _cannot_render(payload)
        if kind == "error":
            raise RuntimeError(payload)
        data: bytes = payload
        return data

    def close(self) -> None:
        """Stop the child: it has answered, or its PDF is no longer wanted (the run stopped early)."""
        if self.process is None:
            return
        if self.process.is_alive():
            self.process.kill()
        self.process.join(JOIN_TIMEOUT_S)
        self.connection.close()
        self.process = None


def _cannot_render(error: OSError) -> GpuplanError:
    """An operating-system error while rendering (the PDF's temporary files: a full disk, a file size limit) as
    the one line a failed write gets, not an internal error; nothing has been written."""
    from gpuplan.reading import reason_of  # on failure only: the renderer forks before the linter's imports

    where = tempfile.gettempdir()
    return GpuplanError(f"cannot render the PDF: {reason_of(error)} (writing its temporary files, under {where})")


@contextmanager
def pdf_renderer(early: bool) -> Iterator[PdfRenderer]:
    """A renderer; with ``early`` (a PDF will be needed) WeasyPrint starts loading now, in a child."""
    renderer = PdfRenderer(early)
    try:
        yield renderer
    finally:
        renderer.close()
