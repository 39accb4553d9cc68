"""Jinja rendering of the report model: autoescaped HTML, escaped Markdown, StrictUndefined."""

from __future__ import annotations

from typing import Any

import jinja2
import markupsafe

from gpuplan.output.markdown import escape_markdown
from gpuplan.resources import resource_dir
from gpuplan.visible import visible_prose

__all__ = ["GITHUB_COMMENT_LIMIT", "escape_markdown", "render_html", "render_markdown"]

GITHUB_COMMENT_LIMIT = 65_536  # characters in one GitHub issue or pull-request comment


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
    """Markdown that works as a pull-request comment: under GitHub's limit, findings shortened to fit."""
    template = _environment().get_template("report.md.j2")
    text = template.render(report=report)
    total = sum(len(group["findings"]) for group in report["finding_groups"])
    keep = total
    while len(text) >= GITHUB_COMMENT_LIMIT and keep > 0:
        keep //= 2
        text = template.render(report={**report, "finding_groups": _first_findings(report["finding_groups"], keep)})
    return text


def _first_findings(groups: list[dict[str, Any]], keep: int) -> list[dict[str, Any]]:
    """The first ``keep`` findings over all groups (errors first), each group saying how many it leaves out."""
    shortened = []
    for group in groups:
        shown = group["findings"][:keep]
        keep -= len(shown)
        left = len(group["findings"]) - len(shown)
        more = f"... and {left:,} more (the HTML and PDF reports list every finding)." if left else ""
        shortened.append({**group, "findings": shown, "more": more})
    return shortened


def render_html(report: dict[str, Any], *, bundled_fonts: bool = False) -> str:
    """Standalone HTML: the stylesheet inlined, nothing to fetch. ``bundled_fonts`` adds the @font-face
    rules that point into the packaged templates folder; only the PDF renderer, which may read them, asks,
    and for it the stress test's chart is left out: it repeats the figures of the table above it, and
    laying out its bars took a seventh of the longest example's PDF time (benchmarks/report_speed.py)."""
    css = (resource_dir("templates") / "report.css").read_text(encoding="utf-8")
    if bundled_fonts:
        css = (resource_dir("templates") / "fonts.css").read_text(encoding="utf-8") + css
    if "</" in css:
        raise ValueError("report.css must not contain '</' (it is inlined into a <style> element)")
    return (
        _environment()
        .get_template("report.html.j2")
        .render(report=report, css=markupsafe.Markup(css), charts=not bundled_fonts)
    )
