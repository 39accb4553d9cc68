"""Byte sizes of dtypes, unit constants (GiB = 2^30 bytes) and the formats shown to people.

Every figure a person reads is rounded here, one way, so the same figure reads the same in every output
(report, ``plan``, ``diff``, ``estimate``, rule messages) and the sums and differences on a page check with a
calculator:

- ``rounded`` rounds halves away from zero on the decimal Python prints for a value (its repr), as a
  reader rounds by hand. Python's own ``format`` and ``round`` round halves to even on the binary value
  (1126.5 -> 1126, 0.745 -> 0.74 because 0.745 is stored as 0.74499...), so two paths that took one
  figure through different steps showed it two ways (a TTFT of 1,126 ms in ``plan``, 1,127 ms in a report).
- A figure that the JSON outputs carry at a fixed precision (milliseconds, percentages, money in cents,
  GiB at two decimals) is first rounded to that precision, its *published* value, and every shorter
  display rounds the published value. A reader who sees ``1126.5`` in JSON and ``1,127`` in a table, or a
  rule's ``2,430.5 ms`` beside ``2,431``, can check one against the other.
- Money that is derived (a saving, a difference, a total over a term) is computed from the amounts as
  shown, each at its own display precision, and shown at the finer of their precisions, so the page's own
  arithmetic holds: 12,030 - 6,636 = 5,394 a month, 5,394 x 12 = 64,728 over 12 months.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Context, Decimal

from gpuplan.records import record

GIB = 2**30
MIB = 2**20

# Values per scale of the FP4 block formats (NVFP4: an fp8 scale per 16, NVIDIA ModelOpt / TensorRT-LLM; MXFP4: an
# e8m0 scale per 32, OCP Microscaling Formats v1.0): a checkpoint's group and the bytes a weight takes
# (gpuplan.estimate.weights.quant_linear_bytes).
FP4_BLOCK = {"nvfp4": 16, "mxfp4": 32}


# Bytes per element of each dtype a spec can name (model.dtype, lora.dtype, kv_cache_dtype).
DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}

# The precision each figure is published at (the JSON outputs' own); shorter displays round this value.
MS_DIGITS = 1  # TTFT and other latencies, in ms
TPOT_MS_DIGITS = 2  # TPOT is tens of ms: JSON keeps hundredths
PCT_DIGITS = 1  # shares in percent (headroom)
GIB_DIGITS = 2  # memory in GiB (``gpuplan estimate`` shows two decimals, everything else one)
CENT_DIGITS = 2  # money
HOURS_DIGITS = 3  # a run's hours
RATE_DIGITS = 1  # tokens per second
# Enough digits to quantize any finite float (up to 309 before the point) at any precision a figure is
# published at; the default context's 28 refuses any figure from about 1e27 up (InvalidOperation).
_EVERY_DIGIT = Context(prec=400)


def whole_number(value: object) -> object:
    """An integral float as the int it writes (JSON and YAML read 8.0 as a float), below 2**53 where every
    integer is a float; any other value as it is."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def rounded(value: float, digits: int) -> float:
    """``value`` at ``digits`` decimals, halves away from zero, read as the decimal Python prints for it."""
    if not math.isfinite(value):
        return value
    # round() rounds the binary value, halves to even; that differs from rounding the printed decimal
    # half up only next to a half one place past ``digits`` (1126.5, 2.675, whose binary value is just
    # below the half). Only there is the printed decimal worked out: Decimal and repr are slow, and this
    # runs for every figure of every spec. The margin is far wider than the binary error of a printed
    # half, so no half slips through (a property test holds the two ways equal).
    scaled = abs(value) * 10.0**digits  # inf for a value near the largest float: the Decimal way below
    if math.isfinite(scaled) and abs(scaled - math.floor(scaled) - 0.5) > 1e-9 * max(1.0, scaled):
        return round(value, digits) + 0.0  # + 0.0: no "-0"
    quantum = Decimal((0, (1,), -digits))
    return float(Decimal(repr(value)).quantize(quantum, rounding=ROUND_HALF_UP, context=_EVERY_DIGIT)) + 0.0


def format_number(value: float, digits: int) -> str:
    """``value`` with thousands separators at ``digits`` decimals, rounded as ``rounded`` does."""
    return f"{rounded(value, digits):,.{digits}f}"


def format_figure(value: float, digits: int, published: int) -> str:
    """``value`` at ``digits`` decimals, rounded from its published figure at ``published`` decimals
    (``format_figure(hours, 1, HOURS_DIGITS)``)."""
    return format_number(rounded(value, published), digits)


def milliseconds(seconds: float, digits: int = MS_DIGITS) -> float:
    """A duration's published figure in ms (JSON's ``ttft_ms``; ``TPOT_MS_DIGITS`` for ``tpot_ms``)."""
    return rounded(seconds * 1000, digits)


def format_ms(seconds: float, digits: int, published: int = MS_DIGITS) -> str:
    """A duration in ms at ``digits`` decimals, rounded from its published figure (no unit)."""
    return format_figure(seconds * 1000, digits, published)


def format_latency_ms(metric: str, seconds: float) -> str:
    """A latency as every text prints it: a TTFT in whole ms, a TPOT (``metric`` "tpot") to a tenth (no unit)."""
    return format_ms(seconds, 1, TPOT_MS_DIGITS) if metric == "tpot" else format_ms(seconds, 0)


def percent(fraction: float) -> float:
    """A share's published figure in percent (JSON's ``headroom_pct``)."""
    return rounded(fraction * 100, PCT_DIGITS)


def format_percent(fraction: float, digits: int = 0) -> str:
    """``0.745`` -> ``75%``: a share at ``digits`` decimals, rounded from its published figure."""
    return f"{format_number(percent(fraction), digits)}%"


def format_share_under(fraction: float, limit: float) -> str:
    """A share below ``limit`` at the fewest decimals (up to two) at which it still reads below it: 0.0975
    under a 10% margin is ``9.8%``, never ``10%``, which would read as the margin met (past two decimals
    the share is cut, not rounded: 0.09999 is ``9.99%``)."""
    for digits in (0, 1, 2):
        if rounded(fraction * 100, digits) < limit * 100:
            return f"{format_number(fraction * 100, digits)}%"
    return f"{math.floor(fraction * 10_000) / 100:,.2f}%"


def gib(value: float) -> float:
    """Bytes as their published figure in GiB (two decimals)."""
    return rounded(value / GIB, GIB_DIGITS)


def format_gib(value: float, digits: int = 1) -> str:
    return f"{format_number(gib(value), digits)} GiB"


def format_gib_apart(larger: float, smaller: float) -> tuple[str, str]:
    """Two byte counts a message compares ("needs 22.03 GiB, more than the 22.00 GiB usable") as ``format_gib``
    shows them, with the fewest decimals from one at which they read apart, up to the published figure's."""
    digits = 1
    while digits < GIB_DIGITS and rounded(gib(larger), digits) == rounded(gib(smaller), digits):
        digits += 1
    return format_gib(larger, digits), format_gib(smaller, digits)


def format_gib_difference(minuend: float, subtrahend: float, digits: int = 1) -> str:
    """``minuend - subtrahend`` bytes as the difference of the two as ``format_gib`` shows them (free memory
    beside the capacity and the use it is the difference of: 125.9 - 89.7 = 36.2, whatever the exact bytes)."""
    first, second = rounded(gib(minuend), digits), rounded(gib(subtrahend), digits)
    return f"{format_number(first - second, digits)} GiB"


def apportioned_gib(parts: Sequence[float], digits: int = 1) -> list[float]:
    """Byte counts as GiB at ``digits`` decimals that add up to their total as ``format_gib`` shows it.

    Rounding each term on its own can miss the total (6.04 + 3.54 + 0.44 + 0.25 = 10.27 shows as
    6.0 + 3.5 + 0.4 + 0.2 = 10.1 against 10.3); a memory breakdown is read as a sum, so its terms are
    apportioned by the largest-remainder method (Hamilton's): each term rounded down, then the units left
    to reach the shown total go one each to the terms with the largest remainders. Each term stays within
    one unit of the last decimal of its exact value, and the total is the same figure every other output
    shows for the peak (the plan table, the rules, the headroom), which a different sum would contradict.
    Terms are expected non-negative (a breakdown's are)."""
    scale = 10**digits
    scaled = [part / GIB * scale for part in parts]
    floors = [math.floor(value) for value in scaled]
    target = round(rounded(gib(sum(parts)), digits) * scale)
    left = target - sum(floors)
    by_remainder = sorted(range(len(parts)), key=lambda i: (floors[i] - scaled[i], i))  # largest remainder first
    for i in by_remainder[: max(0, left)]:
        floors[i] += 1
    return [value / scale for value in floors]


def money_decimals(value: float) -> int:
    """Whole units for large amounts, cents for small ones (prices per hour, per 1M tokens)."""
    return 0 if abs(rounded(value, CENT_DIGITS)) >= 100 else 2


@record
class Shown:
    """An amount of money as shown: its value at ``decimals``; a derived amount (a saving, a total over a
    term) keeps the finer precision of the amounts it comes from, so 180 - 45.67 reads 134.33, not 134."""

    value: float
    decimals: int


def shown_money(value: float) -> Shown:
    """An amount as ``format_money`` shows it: cents, then whole units from 100 up."""
    decimals = money_decimals(value)
    return Shown(rounded(rounded(value, CENT_DIGITS), decimals), decimals)


def money_difference(before: float, after: float) -> Shown:
    """``before - after`` of the amounts as shown (a saving is ``money_difference(declared, recommended)``)."""
    first, second = shown_money(before), shown_money(after)
    decimals = max(first.decimals, second.decimals)
    return Shown(rounded(first.value - second.value, decimals), decimals)


def money_times(value: float | Shown, factor: int) -> Shown:
    """An amount shown, times a count (a monthly cost or saving over the term's months)."""
    amount = value if isinstance(value, Shown) else shown_money(value)
    return Shown(rounded(amount.value * factor, amount.decimals), amount.decimals)


def money_sum(*amounts: Shown) -> Shown:
    """Shown amounts added (the amount requested: the run plus serving over the term)."""
    decimals = max((amount.decimals for amount in amounts), default=0)
    return Shown(rounded(sum(amount.value for amount in amounts), decimals), decimals)


def format_money(value: float | Shown | None, currency: str) -> str:
    if value is None:
        return "n/a"
    amount = value if isinstance(value, Shown) else shown_money(value)
    return f"{amount.value:,.{amount.decimals}f} {currency}"


def format_price(per_hour: float | None) -> str:
    """A price per GPU-hour as it is used: two decimals, or up to four where it has them (a median of two
    quotes, 4.545), so that GPUs x hours x the price shown gives the cost shown beside it; "n/a" for none."""
    if per_hour is None:
        return "n/a"
    text = f"{per_hour:,.4f}".rstrip("0")
    return text + "0" * max(0, 2 - len(text.split(".")[1]))


def listing(items: list[str], word: str = "and") -> str:
    """Items in a sentence: 'a', 'a and b', 'a, b and c' (``word``: 'or' for choices)."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {word} " + items[-1]


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``1 GPU``, ``2 GPUs``, ``1 replica``: the count with its noun in the right number."""
    word = noun if count == 1 else (plural_form or noun + "s")
    return f"{count:,} {word}"
