"""Byte sizes of dtypes, unit constants (GiB = 2^30 bytes) and the few formats shown to people."""

from __future__ import annotations

GIB = 2**30
MIB = 2**20

# Bytes per element of each dtype a spec can name (model.dtype, lora.dtype, kv_cache_dtype).
DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}


def format_gib(value: float) -> str:
    return f"{value / GIB:,.1f} GiB"


def format_money(value: float | None, currency: str) -> str:
    """Whole units for large amounts, cents for small ones (prices per hour, per 1M tokens)."""
    if value is None:
        return "n/a"
    return f"{value:,.0f} {currency}" if abs(value) >= 100 else f"{value:,.2f} {currency}"


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 GPU``, ``2 GPUs``, ``1 replica``: the count with its noun in the right number."""
    word = noun if count == 1 else (plural_form or noun + "s")
    return f"{count:,} {word}"
