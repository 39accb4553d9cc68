"""Markdown escaping shared by the report templates and ``gpuplan verify --format markdown`` (no Jinja)."""

from __future__ import annotations

import re
from typing import Any

from gpuplan.visible import visible_prose

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]#|<>~])")
# GitHub's extended autolinks: a bare URL or www. address becomes a live link without any markup; an
# escaped colon or dot still reads the same and links nothing. (Bare e-mail addresses still become
# mailto: links, whatever is escaped: that scheme opens a mail client, nothing more.)
_AUTOLINK = re.compile(r"(?i)\b(https?|ftp)(?=:)|\b(www)(?=\.)")


def escape_markdown(value: Any) -> str:
    """Spec strings as inert Markdown text: no tables broken by '|', no HTML, no links (bare e-mail
    addresses excepted, see _AUTOLINK), one line."""
    text = " ".join(visible_prose(str(value)).split())
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text).replace("&", "&amp;")
    return _AUTOLINK.sub(lambda match: match.group() + "\\", text)
