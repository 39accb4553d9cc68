"""Configuration: ``.gpuplan.yaml`` or ``[tool.gpuplan]`` in pyproject.toml, found upward from a spec.

Keys (checked against schemas/config.schema.json; unknown keys are errors with positions):
``select``, ``ignore``, ``severity`` (code or name -> level), ``fail-on``, ``catalog-hints``, ``thresholds``,
and ``diff``
(the guardrails of ``gpuplan diff``, read by gpuplan/diff/guardrails.py).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import field
from pathlib import Path
from typing import Any

from gpuplan.codes import CODES, lookup, suggestions
from gpuplan.defaults import apply_defaults
from gpuplan.errors import GpuplanError
from gpuplan.findings import Finding, Severity
from gpuplan.loader import LoadedDocument, load_bytes
from gpuplan.reading import SETTINGS, ReadRefused, read_bounded
from gpuplan.records import record


@record
class Settings:
    """Thresholds the rules compare against; the defaults are the config schema's ``default`` keywords."""

    headroom_pct: float
    long_context_min_prompt: int
    high_throughput_min_concurrency: int
    price_max_age_days: int
    long_run_hours: float
    gradient_sync_share: float
    right_size_fraction: float
    activations_share: float
    cheaper_layout_share: float
    settings_change_share: float
    min_saving: float
    verify_tolerance_pct: float
    # Overrides of the calibrated speed model (gpuplan.estimate.calibration); the schema gives no default,
    # so they stay None unless a configuration sets them.
    training_mfu: float | None = None
    prefill_mfu: float | None = None
    decode_bandwidth: float | None = None

    @classmethod
    def from_thresholds(cls, thresholds: dict[str, Any]) -> Settings:
        """Settings from a (validated) ``thresholds`` mapping; absent keys take the schema's defaults."""
        from gpuplan.validate import load_schema

        return cls(**apply_defaults({"thresholds": thresholds}, load_schema("config"))["thresholds"])


@functools.cache
def default_settings() -> Settings:
    """The documented defaults of every threshold."""
    return Settings.from_thresholds({})


@record
class Config:
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    severities: dict[str, Severity] = field(default_factory=dict)
    fail_on: Severity | None = None
    catalog_hints: bool = False  # the schema's default for `catalog-hints` (a test holds them equal)
    settings: Settings = field(default_factory=default_settings)
    source: str | None = None
    diff: dict[str, Any] = field(default_factory=dict)  # the validated `diff` section, as written


class ConfigError(GpuplanError):
    """A configuration file that cannot be read or is invalid; ``problems`` are "file:line:col: message"."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path, self.problems = path, problems
        # One problem is one line (the CLI's usage errors are one line on stderr); several are a header
        # and one line each, so that every problem keeps its own file:line:col.
        header = "invalid configuration"
        super().__init__(f"{header}: {problems[0]}" if len(problems) == 1 else f"{header}:\n" + "\n".join(problems))

    def lines(self) -> list[str]:
        if len(self.problems) == 1:
            return [f"invalid configuration: {self.problems[0]}"]
        return ["invalid configuration:", *self.problems]


def load_config(path: Path) -> Config:
    """Read and check a configuration file. Raises ConfigError listing every problem with its position."""
    try:
        raw = read_bounded(path, SETTINGS)
    except ReadRefused as refused:
        raise ConfigError(path, [f"{path}: cannot read it: {refused.reason}"]) from None
    # TOML by its name: pyproject.toml, or any .toml file given with --config (its [tool.gpuplan] table)
    toml = path.name == "pyproject.toml" or path.suffix.lower() == ".toml"
    document = _toml_document(path, raw) if toml else load_bytes(str(path), raw)
    # A file that holds no document (empty, or comments alone: a template's placeholder) sets nothing, as
    # {} does: every key is optional, so it means the defaults, not a configuration that stops every spec.
    problems = [finding for finding in document.findings if finding.code != "GP006"]
    if document.data is not None:
        from gpuplan.validate import validate

        problems.extend(validate(document, schema="config"))
        if not problems:
            problems.extend(_unknown_rules(document))
    if problems:
        raise ConfigError(path, [f"{f.file}:{f.line}:{f.col}: {f.message}" for f in problems])
    return _config(document.data or {}, str(path))


def _unknown_rules(document: LoadedDocument) -> list[Finding]:
    """Severity keys must name a code; select/ignore entries a code, a code prefix (GP2) or a name."""
    found = []
    for section in ("select", "ignore"):
        for index, pattern in enumerate(document.data.get(section, [])):
            if not matches_any_code(pattern):
                found.append(_unknown_rule(document, (section, index), pattern))
    for key in document.data.get("severity", {}):
        if not isinstance(key, str):  # YAML allows null, number and boolean keys; the position is by its text
            position = document.position(("severity", str(key)))
            shown = "null" if key is None else repr(key)
            message = f"severity: a key must be a rule code (GP201) or name (does-not-fit), not {shown}"
            found.append(Finding.make("GP100", message, path=document.path, line=position.line, col=position.col))
        elif lookup(key) is None:
            found.append(_unknown_rule(document, ("severity", key), key))
    return sorted(found, key=lambda finding: (finding.line, finding.col))


def matches_any_code(pattern: str) -> bool:
    """Whether a select/ignore pattern (code, code prefix or rule name) can match any finding."""
    return lookup(pattern) is not None or any(code.startswith(pattern.upper()) for code in CODES)


def _unknown_rule(document: LoadedDocument, pointer: tuple[str | int, ...], name: str) -> Finding:
    close = suggestions(name)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `gpuplan rules` lists them"
    position = document.position(pointer)  # a severity key's own position; a list item's value
    return Finding.make(
        "GP100",
        f"{pointer[0]}: unknown rule {name!r}{hint}",
        path=document.path,
        line=position.line,
        col=position.col,
    )


def _config(data: dict[str, Any], source: str) -> Config:
    settings = Settings.from_thresholds(data.get("thresholds", {}))
    severities = {_code(key): Severity(level) for key, level in data.get("severity", {}).items()}
    return Config(
        select=tuple(data.get("select", ())),
        ignore=tuple(data.get("ignore", ())),
        severities=severities,
        fail_on=Severity(data["fail-on"]) if "fail-on" in data else None,
        catalog_hints=data.get("catalog-hints", Config.catalog_hints),
        settings=settings,
        source=source,
        diff=dict(data.get("diff", {})),
    )


def _toml_document(path: Path, raw: bytes) -> LoadedDocument:
    """[tool.gpuplan] as a LoadedDocument; positions are where each key and array item is written
    (``toml_positions``), in any TOML spelling."""
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise ConfigError(path, [f"{path}: invalid TOML: {error}"]) from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict) or "gpuplan" not in tool:
        raise ConfigError(path, [f"{path}: no [tool.gpuplan] table: nothing to configure"])
    table = tool["gpuplan"]
    if not isinstance(table, dict):
        raise ConfigError(path, [f"{path}: tool.gpuplan must be a table ([tool.gpuplan]), not {type(table).__name__}"])
    from gpuplan.toml_positions import key_positions

    document = LoadedDocument(str(path), table, key_positions(raw.decode("utf-8"), ("tool", "gpuplan")), ())
    # TOML has nan and inf, which no schema bound catches (every comparison with NaN is false); the
    # YAML loader refuses them as values, and so does this one, at the key that holds one.
    problems = [
        f"{path}:{position.line}:{position.col}: {'.'.join(map(str, pointer))} is {value!r}: write a finite number"
        for pointer, value in _non_finite(table)
        for position in (document.position(pointer),)
    ]
    if problems:
        raise ConfigError(path, problems)
    return document


def _non_finite(value: Any, pointer: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], float]]:
    """(pointer, value) of every NaN or infinite float in nested tables and arrays."""
    if isinstance(value, float) and not math.isfinite(value):
        yield pointer, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _non_finite(item, (*pointer, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _non_finite(item, (*pointer, index))


def _code(code_or_name: str) -> str:
    entry = lookup(code_or_name)
    assert entry is not None, "checked by _unknown_rules"
    return entry.code
