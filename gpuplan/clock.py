"""Today's date for waiver expiry, price age and reports: UTC, or SOURCE_DATE_EPOCH when set.

One clock for the library and the CLI, so a waiver never expires in one and not the other because
of the machine's time zone, and reproducible runs (the same spec and SOURCE_DATE_EPOCH) give the same
findings and the same report bytes.
"""

from __future__ import annotations

import datetime
import os

from gpuplan.errors import GpuplanError

# datetime's own range, in seconds since 1970: a SOURCE_DATE_EPOCH outside it names no date.
_LAST_EPOCH = int(datetime.datetime(9999, 12, 31, tzinfo=datetime.UTC).timestamp())


def today_epoch() -> int:
    """SOURCE_DATE_EPOCH when set (reproducible builds), else the start of today in UTC."""
    text = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if text:
        if not text.isdigit() or int(text) > _LAST_EPOCH:
            raise GpuplanError(f"SOURCE_DATE_EPOCH={text[:40]!r} is not a number of seconds since 1970-01-01")
        return int(text)
    today = datetime.datetime.now(tz=datetime.UTC).date()
    return int(datetime.datetime(today.year, today.month, today.day, tzinfo=datetime.UTC).timestamp())


def today() -> datetime.date:
    """Today in UTC, or the date of SOURCE_DATE_EPOCH when set."""
    return datetime.datetime.fromtimestamp(today_epoch(), tz=datetime.UTC).date()
