"""HTML -> PDF with WeasyPrint, fetching nothing but the packaged template assets and data: URLs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from gpuplan.report.weasy import load_weasyprint
from gpuplan.resources import resource_dir


def allowed_url(url: str, assets: Path) -> bool:
    """data: URLs, and files inside the packaged templates folder; nothing else (no http, no /etc)."""
    if url.startswith("data:"):
        return True
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return False
    target = Path(unquote(parsed.path)).resolve()
    return target.is_relative_to(assets) and target.is_file()


def _fetcher_class() -> Any:
    load_weasyprint()
    from weasyprint.urls import URLFetcher

    class AssetsOnlyFetcher(URLFetcher):  # type: ignore[misc]
        """Refuses every URL but the report's own assets; records what was asked for."""

        def __init__(self, assets: Path) -> None:
            super().__init__(allowed_protocols=("file", "data"), fail_on_errors=False)
            self.assets = assets
            self.requested: list[str] = []
            self.refused: list[str] = []

        def fetch(self, url: str, headers: Any = None) -> Any:
            self.requested.append(url)
            if not allowed_url(url, self.assets):
                self.refused.append(url)
                raise ValueError(f"gpuplan reports may not load {url!r}")
            return super().fetch(url, headers)

    return AssetsOnlyFetcher


def render_pdf(html: str, fetcher: Any = None) -> bytes:
    """PDF bytes for ``html``; the same HTML always gives the same bytes.

    The PDF's dates come from the report's own generation date (in the HTML's metadata), so nothing
    depends on the clock. It carries no file identifier (/ID): PDF/UA does not ask for one
    (WeasyPrint sets one only for PDF/A and PDF/X, which do), and pydyf computes its second half by
    serialising and compressing every object a second time, about 4% of the rendering. Fonts are subset
    by HarfBuzz, which stamps no time; on an installation where WeasyPrint falls back to fontTools, the
    font's timestamp follows SOURCE_DATE_EPOCH, which ``gpuplan report`` sets for its own process.
    Neither the environment nor logging levels are changed here: WeasyPrint's log records of the fetches
    the fetcher refuses (expected, not noise) are filtered out while this document renders, and only them.
    """
    HTML = load_weasyprint().HTML

    assets = resource_dir("templates").resolve()
    fetcher = fetcher or new_fetcher()
    document = HTML(string=html, base_url=assets.as_uri() + "/", url_fetcher=fetcher)
    with _refusals_unlogged(fetcher), _scratch_folder():
        # Tagged PDF/UA-1 (structure tree, language, title) for screen readers; the bytes stay reproducible.
        pdf: bytes = document.write_pdf(presentational_hints=False, pdf_variant="pdf/ua-1", pdf_tags=True)
    return pdf


@contextlib.contextmanager
def _scratch_folder() -> Iterator[None]:
    """Temporary files of one rendering in a folder removed when it ends. WeasyPrint writes the report's
    @font-face fonts to a ``weasyprint-*`` folder of its own that only its font configuration's finalizer
    removes, which never runs in the renderer ``gpuplan report --pdf`` forks (it exits without finalizers, or
    is stopped): each PDF left one in /tmp. Its ``tempfile.mkdtemp`` reads ``tempfile.tempdir``."""
    import tempfile

    before = tempfile.tempdir
    with tempfile.TemporaryDirectory(prefix="gpuplan-pdf-") as scratch:
        tempfile.tempdir = scratch
        try:
            yield
        finally:
            tempfile.tempdir = before


@contextlib.contextmanager
def _refusals_unlogged(fetcher: Any) -> Iterator[None]:
    """Drop WeasyPrint's records about URLs this fetcher refused, for the duration of one rendering."""
    import logging

    def keep(record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not any(url in text for url in fetcher.refused) and "gpuplan reports may not load" not in text

    logger = logging.getLogger("weasyprint")
    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def new_fetcher() -> Any:
    """A fresh assets-only fetcher (tests inspect ``requested`` and ``refused``)."""
    return _fetcher_class()(resource_dir("templates").resolve())
