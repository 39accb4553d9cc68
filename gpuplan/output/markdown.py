"""Markdown escaping shared by the report templates and ``gpuplan verify --format markdown`` (no Jinja)."""

from __future__ import annotations

import re
from typing import Any

from gpuplan.visible import visible_prose

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]#|<>~])")


def escape_markdown(value: Any) -> str:
    """Spec strings as inert Markdown text: no tables broken by '|', no HTML, no links, one line."""
    text = " ".join(visible_prose(str(value)).split())
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text).replace("&", "&amp;")
