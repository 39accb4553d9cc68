"""Typed access to config.json values: each read checks its type and bounds and raises ArchitectureError
(GP021) with the key's path, before any arithmetic."""

from __future__ import annotations

from typing import Any

from gpuplan.architecture import ArchitectureError, show_value
from gpuplan.units import whole_number


def string_value(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > 200:
        raise ArchitectureError(f"config.json {where} must be a short string, not {show_value(value)}")
    return value


def bool_value(data: dict[str, Any], key: str, prefix: str, default: bool) -> bool:
    value = data.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ArchitectureError(f"config.json {prefix}{key} must be true or false, not {show_value(value)}")
    return value


def bounded_int(data: dict[str, Any], key: str, low: int, high: int, prefix: str, default: int | None = None) -> int:
    value = data.get(key)
    if value is None:
        if default is None:
            raise ArchitectureError(f"config.json lacks {prefix}{key}")
        return default
    value = whole_number(value)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ArchitectureError(
            f"config.json {prefix}{key} must be a whole number from {low} to {high:,}, not {show_value(value)}"
        )
    return int(value)


def string_list(value: Any, where: str, limit: int) -> list[str]:
    if not isinstance(value, list) or len(value) > limit or not all(isinstance(item, str) for item in value):
        raise ArchitectureError(f"config.json {where} must be a list of at most {limit:,} strings")
    return value


def int_list(value: Any, where: str, limit: int) -> list[int]:
    if (
        not isinstance(value, list)
        or len(value) > limit
        or not all(isinstance(item, int) and not isinstance(item, bool) for item in value)
    ):
        raise ArchitectureError(f"config.json {where} must be a list of at most {limit:,} integers")
    return value


def compressed_pattern(pattern: str) -> str:
    """The shortest prefix of ``pattern`` that, repeated a whole number of times, gives ``pattern``
    (Architecture.layer_pattern's reading): LLLA for Qwen3-Next's 48 layers."""
    for period in range(1, len(pattern) + 1):
        if len(pattern) % period == 0 and all(
            letter == pattern[index % period] for index, letter in enumerate(pattern)
        ):
            return pattern[:period]
    return pattern
