"""Jinja rendering of the report model: autoescaped HTML, escaped Markdown, StrictUndefined."""

from __future__ import annotations

from typing import Any

import jinja2
import markupsafe

from gpuplan.output.markdown import escape_markdown
from gpuplan.resources import resource_dir
from gpuplan.visible import visible_prose

__all__ = ["escape_markdown", "render_html", "render_markdown"]


def _inert(value: Any) -> Any:
    """Every printed value: control and bidi characters escaped, line breaks folded (Jinja ``finalize``)."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return visible_prose(value)
    return value


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_dir("templates"))),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=False),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
        finalize=_inert,
    )
    environment.filters["md"] = escape_markdown
    return environment


def render_markdown(report: dict[str, Any]) -> str:
    return _environment().get_template("report.md.j2").render(report=report)


def render_html(report: dict[str, Any]) -> str:
    return _environment().get_template("report.html.j2").render(report=report)
