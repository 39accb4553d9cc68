"""Byte sizes of dtypes and the unit constants every estimate uses (GiB = 2^30 bytes, GB = 10^9)."""

from __future__ import annotations

GIB = 2**30
MIB = 2**20
GB = 10**9

DTYPE_BYTES: dict[str, float] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}


def gib(value: float) -> float:
    return value / GIB


def format_gib(value: float) -> str:
    return f"{value / GIB:,.1f} GiB"
