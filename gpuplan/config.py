"""Configuration: ``.gpuplan.yaml`` or ``[tool.gpuplan]`` in pyproject.toml, found upward from a spec.

Keys (checked against schemas/config.schema.json; unknown keys are errors with positions):
``select``, ``ignore``, ``severity`` (code or name -> level), ``fail-on``, ``thresholds``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from gpuplan.codes import CODES, lookup, suggestions
from gpuplan.errors import GpuplanError
from gpuplan.findings import Finding, Severity
from gpuplan.loader import LoadedDocument, Position, load_bytes

CONFIG_FILE = ".gpuplan.yaml"


@dataclass(frozen=True)
class Settings:
    """Thresholds the rules compare against; every default is documented in the config schema."""

    headroom_pct: float = 10.0
    long_context_min_prompt: int = 8192
    high_throughput_min_concurrency: int = 32
    training_mfu: float = 0.35
    prefill_mfu: float = 0.5
    decode_bandwidth: float = 0.8
    price_max_age_days: int = 90
    long_run_hours: float = 24.0
    gradient_sync_share: float = 0.25
    right_size_fraction: float = 0.25
    activations_share: float = 0.5
    verify_tolerance_pct: float = 10.0


@dataclass(frozen=True)
class Config:
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    severities: dict[str, Severity] = field(default_factory=dict)
    fail_on: Severity | None = None
    settings: Settings = Settings()
    source: str | None = None


def find_config(start: Path) -> Path | None:
    """The nearest .gpuplan.yaml, or pyproject.toml with a [tool.gpuplan] table, at or above ``start``."""
    for folder in (start, *start.parents):
        candidate = folder / CONFIG_FILE
        if candidate.is_file():
            return candidate
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and re.search(r"^\[tool\.gpuplan(\.|\])", pyproject.read_text("utf-8", "replace"), re.M):
            return pyproject
        if (folder / ".git").exists():
            return None
    return None


def load_config(path: Path) -> Config:
    """Read and check a configuration file. Raises GpuplanError listing every problem with its position."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise GpuplanError(f"cannot read configuration {path}: {error.strerror or error}") from None
    document = _toml_document(path, raw) if path.name == "pyproject.toml" else load_bytes(str(path), raw)
    problems = list(document.findings)
    if document.data is not None:
        from gpuplan.validate import validate

        problems.extend(validate(document, schema="config"))
        if not problems:
            problems.extend(_unknown_rules(document))
    if problems:
        lines = [f"{f.file}:{f.line}:{f.col}: {f.message}" for f in problems]
        raise GpuplanError("invalid configuration:\n" + "\n".join(lines))
    return _config(document.data or {}, str(path))


def _unknown_rules(document: LoadedDocument) -> list[Finding]:
    """Severity keys must name a code; select/ignore entries a code, a code prefix (GP2) or a name."""
    found = []
    for key in document.data.get("severity", {}):
        if lookup(key) is None:
            found.append(_unknown_rule(document, ("severity", key), key))
    for section in ("select", "ignore"):
        for index, pattern in enumerate(document.data.get(section, [])):
            if not matches_any_code(pattern):
                found.append(_unknown_rule(document, (section, index), pattern))
    return found


def matches_any_code(pattern: str) -> bool:
    """Whether a select/ignore pattern (code, code prefix or rule name) can match any finding."""
    return lookup(pattern) is not None or any(code.startswith(pattern.upper()) for code in CODES)


def _unknown_rule(document: LoadedDocument, pointer: tuple[str | int, ...], name: str) -> Finding:
    close = suggestions(name)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `gpuplan rules` lists them"
    position = document.position(pointer)
    return Finding.make(
        "GP100",
        f"{pointer[0]}: unknown rule {name!r}{hint}",
        path=document.path,
        line=position.value_line,
        col=position.value_col,
    )


def _config(data: dict[str, Any], source: str) -> Config:
    thresholds = data.get("thresholds", {})
    known = {f.name for f in fields(Settings)}
    settings = Settings(**{key: value for key, value in thresholds.items() if key in known})
    severities = {_code(key): Severity(level) for key, level in data.get("severity", {}).items()}
    return Config(
        select=tuple(data.get("select", ())),
        ignore=tuple(data.get("ignore", ())),
        severities=severities,
        fail_on=Severity(data["fail-on"]) if "fail-on" in data else None,
        settings=settings,
        source=source,
    )


def _toml_document(path: Path, raw: bytes) -> LoadedDocument:
    """[tool.gpuplan] as a LoadedDocument; positions come from the lines that define each key."""
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise GpuplanError(f"{path}: invalid TOML: {error}") from None
    table = data.get("tool", {}).get("gpuplan", {})
    positions: dict[tuple[str | int, ...], Position] = {(): Position(1, 1, 1, 1)}
    section: tuple[str, ...] = ()
    for number, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
        header = re.match(r"\s*\[tool\.gpuplan(?:\.([\w-]+))?\]", line)
        if header:
            section = (header.group(1),) if header.group(1) else ()
            positions[section] = Position(number, 1, number, 1)
            continue
        if re.match(r"\s*\[", line):
            section = ("<other>",)
            continue
        key = re.match(r"(\s*)([\w-]+)\s*=", line)
        if key and section != ("<other>",):
            column = len(key.group(1)) + 1
            positions[(*section, key.group(2))] = Position(number, column, number, column)
    return LoadedDocument(str(path), table, positions, ())


def _code(code_or_name: str) -> str:
    entry = lookup(code_or_name)
    assert entry is not None, "checked by _unknown_rules"
    return entry.code
