"""Guardrails of ``gpuplan diff``: when a change fails the run (exit 1), and when the diff is printed at all.

Set in the configuration's ``diff`` section (schemas/config.schema.json holds the keys and defaults) and
overridden by the command's flags of the same names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuplan.config import ConfigError, load_config
from gpuplan.config_files import find_config
from gpuplan.defaults import apply_defaults
from gpuplan.diff.model import DiffResult
from gpuplan.diff.present import MONEY, pair_texts
from gpuplan.records import record
from gpuplan.units import format_money

COMMENT_ON = ("always", "any", "increase", "never")


@record
class Guardrails:
    max_monthly_increase: float | None
    max_monthly_increase_pct: float | None
    fail_on_worse_verdict: bool
    fail_on_new_error: bool
    comment_on: str

    @classmethod
    def from_config(cls, section: dict[str, Any], **flags: Any) -> Guardrails:
        """The configuration's ``diff`` section, its defaults filled in, then every flag that was given."""
        merged = {key.replace("-", "_"): value for key, value in _with_defaults(section).items()}
        merged.update({key: value for key, value in flags.items() if value is not None})
        merged.setdefault("max_monthly_increase", None)
        merged.setdefault("max_monthly_increase_pct", None)
        return cls(**merged)


def _with_defaults(section: dict[str, Any]) -> dict[str, Any]:
    """A ``diff`` section with the schema's defaults filled in where it is silent."""
    from gpuplan.validate import load_schema

    return apply_defaults({"diff": section}, load_schema("config"))["diff"]


def breaches(result: DiffResult, guardrails: Guardrails) -> list[str]:
    """Why the diff fails, one sentence per guardrail it breaks (empty: it passes)."""
    found = []
    for totals in result.totals:
        monthly = totals.monthly
        limit = guardrails.max_monthly_increase
        if limit is not None and monthly.delta > limit:
            before, after, rise = pair_texts(MONEY, monthly.before, monthly.after, totals.currency)
            found.append(
                f"monthly cost rises by {rise.lstrip('+')} (from {before} to {after}), "
                f"more than max-monthly-increase {format_money(limit, totals.currency)}"
            )
        share = guardrails.max_monthly_increase_pct
        if share is not None and monthly.delta > 0 and (monthly.percent is None or monthly.percent > share):
            rise = "from nothing" if monthly.percent is None else f"by {monthly.percent:.1f}%"
            found.append(f"monthly cost rises {rise}, more than max-monthly-increase-pct {share:g}%")
    if guardrails.max_monthly_increase is not None or guardrails.max_monthly_increase_pct is not None:
        # A cost in another currency cannot be held to the limit: say so rather than let it pass unseen.
        for change in result.changes:
            if change.currency_changed:
                was, now = change.currencies
                found.append(
                    f"{change.path}: monthly cost not comparable ({was} -> {now}), so no cost guardrail holds it"
                )
    if guardrails.fail_on_worse_verdict:
        for change in result.changes:
            if change.verdict_worsened:
                found.append(f"{change.path}: verdict worsens from {change.verdict_before} to {change.verdict_after}")
    if guardrails.fail_on_new_error:
        for change in result.changes:
            codes = sorted({f.code for f in change.new_errors})
            if codes:
                found.append(f"{change.path}: new error{'s' if len(codes) > 1 else ''} {', '.join(codes)}")
    return found


def should_print(result: DiffResult, comment_on: str) -> bool:
    """Whether the diff is worth printing under ``comment_on`` (so a CI job posts no empty comment)."""
    if comment_on == "always":
        return True
    if comment_on == "any":
        return bool(result.material)
    if comment_on == "increase":  # an amount in another currency may be one: it is shown
        rises = any(t.monthly.delta > 0 or t.run.delta > 0 for t in result.totals)
        return rises or any(change.currency_changed for change in result.changes)
    return False


def guardrail_config(config_path: str | None, start: Path) -> Path | None:
    """The configuration file the guardrails come from: ``--config``, else the one found upward from ``start``."""
    return Path(config_path) if config_path else find_config(start.resolve())


def other_sections(folders: list[Path], used: Path | None) -> list[tuple[Path, dict[str, Any]]]:
    """Configurations governing ``folders`` (the changed specs') other than ``used`` that set ``diff`` keys,
    each with its section."""
    found: list[tuple[Path, dict[str, Any]]] = []
    for folder in folders:
        location = find_config(folder.resolve())
        if location is None or location == used or any(location == seen for seen, _ in found):
            continue
        try:
            section = load_config(location).diff
        except ConfigError:  # linting the specs under it already reports it
            continue
        if section:
            found.append((location, section))
    return found


# How each guardrail key is made stricter: the lower limit, or a check any configuration turns on.
_STRICTER = {
    "max-monthly-increase": min,
    "max-monthly-increase-pct": min,
    "fail-on-worse-verdict": max,
    "fail-on-new-error": max,
}


def strictest(sections: list[dict[str, Any]]) -> dict[str, Any]:
    """One ``diff`` section from several: each guardrail at its strictest among them, a section silent on
    one taken at its default (a spec's own configuration may guard it more tightly than the repository's;
    none loosens another's, nor the defaults a section leaves in force), the first section's other keys
    (``comment-on``: how the diff is printed, not whether it passes)."""
    filled = [_with_defaults(section) for section in sections]
    merged = dict(filled[0]) if filled else {}
    for section in filled[1:]:
        for key, value in section.items():
            if key in _STRICTER:
                merged[key] = _STRICTER[key](merged[key], value) if key in merged else value
    return merged
