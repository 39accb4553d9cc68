"""HTML -> PDF with WeasyPrint, fetching nothing but the packaged template assets and data: URLs."""

from __future__ import annotations

import hashlib
import os
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


def render_pdf(html: str, epoch: int, fetcher: Any = None) -> bytes:
    """PDF bytes for ``html``; the same HTML and ``epoch`` always give the same bytes.

    fontTools stamps subset fonts with the current time unless SOURCE_DATE_EPOCH is set, and the
    PDF's second identifier hashes the content, so the epoch is pinned while the PDF is written.
    """
    import logging

    HTML = load_weasyprint().HTML

    logging.getLogger("weasyprint").setLevel(logging.CRITICAL)  # refused fetches are expected, not noise
    assets = resource_dir("templates").resolve()
    fetcher = fetcher or new_fetcher()
    document = HTML(string=html, base_url=assets.as_uri() + "/", url_fetcher=fetcher)
    identifier = hashlib.sha256(html.encode()).hexdigest()[:32].encode()
    previous = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = str(epoch)
    try:
        # Tagged PDF/UA-1 (structure tree, language, title) for screen readers; it keeps the bytes reproducible.
        pdf: bytes = document.write_pdf(
            presentational_hints=False, pdf_identifier=identifier, pdf_variant="pdf/ua-1", pdf_tags=True
        )
    finally:
        if previous is None:
            del os.environ["SOURCE_DATE_EPOCH"]
        else:
            os.environ["SOURCE_DATE_EPOCH"] = previous
    return pdf


def new_fetcher() -> Any:
    """A fresh assets-only fetcher (tests inspect ``requested`` and ``refused``)."""
    return _fetcher_class()(resource_dir("templates").resolve())
