"""The report's charts as plain data: a stacked memory bar per job, and the sensitivity chart.

The templates draw them as HTML boxes sized in percent (``role="img"``): the same picture in a browser and
in the PDF, and several times cheaper for WeasyPrint to lay out than SVG. Each chart carries an
``aria_label`` that states every number it draws, so a screen reader gets the chart's content, not only
its title.
"""

from __future__ import annotations

import math
from typing import Any

from gpuplan.decision.sensitivity import Sensitivity
from gpuplan.units import apportioned_gib, format_gib, format_percent

SEGMENT_COLOURS = {
    "weights": "#3b6ea5",
    "gradients": "#d9822b",
    "optimizer": "#7a5195",
    "activations": "#2a9d8f",
    "temporaries": "#e9c46a",
    "autocast_weight_copies": "#8ab17d",
    "optimizer_step_temporaries": "#bc5090",
    "gathered_parameters": "#6c757d",
    "gradient_buckets": "#495057",
    "paged_optimizer_states": "#b392ac",
    "kbit_preparation_copies": "#5e60ce",
    "model_outputs": "#c9a227",
    "predictions": "#f28482",
    "allocator_cache": "#8c6d46",
    "framework_overhead": "#adb5bd",
    "kv_cache": "#e76f51",
    "runtime": "#adb5bd",
    "tenant_weights": "#264653",
    "tenant_kv_cache": "#f4a261",
    "lora_slots": "#90be6d",
    "draft_weights": "#577590",
}
OTHER_COLOUR = "#999999"


def memory_chart(breakdown: dict[str, int], peak: int, capacity: int, capacity_name: str) -> dict[str, Any]:
    """A stacked bar of ``breakdown`` against ``capacity``; its total is ``peak``, the one peak figure shown.

    When the parts do not add up to the peak (an estimator that reports the peak of a phase whose parts it
    does not itemise), the difference is drawn as "other", so the bar never shows a second peak figure.
    """
    parts = {name: value for name, value in breakdown.items() if value > 0}
    rest = peak - sum(parts.values())
    if rest > 0:
        parts["other"] = rest
    scale = 100 / max(capacity, peak, 1)  # percent of the bar's width per byte
    x = 0.0
    segments = []
    # The labels are read as a sum: apportioned so they add up to the peak shown (gpuplan.units).
    shown = apportioned_gib(list(parts.values())) if sum(parts.values()) == peak else None
    for index, (name, value) in enumerate(parts.items()):
        width = value * scale
        segments.append(
            {
                "name": name.replace("_", " "),
                "value": format_gib(value) if shown is None else f"{shown[index]:,.1f} GiB",
                "share": format_percent(value / capacity) if capacity else "",
                "x": round(x, 2),
                "width": round(width, 2),
                "colour": SEGMENT_COLOURS.get(name, OTHER_COLOUR),
            }
        )
        x += width
    listing = ", ".join(f"{s['name']} {s['value']}" for s in segments)
    total, limit = format_gib(peak), format_gib(capacity)
    over = peak > capacity
    return {
        "segments": segments,
        "capacity_x": round(capacity * scale, 2),
        "total": total,
        "capacity": limit,
        "over": over,
        "aria_label": f"Memory per GPU: {listing}; peak {total} of {limit} {capacity_name}"
        + (" — over capacity" if over else ""),
    }


SENSITIVITY_MAX_SHARE = 2.0  # bars are drawn up to twice the limit; longer ones are clipped and say so
MEASURES = (  # (key, legend, colour)
    ("memory", "memory per GPU / capacity", "#3b6ea5"),
    ("latency", "latency at the slow edge / SLO (the larger of TTFT and TPOT)", "#7a5195"),
    ("cost", "cost / budget", "#d9822b"),
)


def sensitivity_chart(sensitivity: Sensitivity) -> dict[str, Any]:
    """Per scenario, each limit's use as a share of the limit: memory of capacity, latency of the SLO, cost
    of the budget. The limit (100%) is the middle of the plot; a bar past it breaks the limit."""
    shown = [
        key
        for key, _, _ in MEASURES
        if key == "memory"
        or (key == "latency" and (sensitivity.slo_ttft_s or sensitivity.slo_tpot_s))
        or (key == "cost" and sensitivity.budget)
    ]
    rows = []
    described = []
    for scenario in sensitivity.scenarios:
        shares = {key: value for key, value in _shares(scenario, sensitivity).items() if value is not None}
        bars = [
            {
                "width": round(min(shares[key], SENSITIVITY_MAX_SHARE) / SENSITIVITY_MAX_SHARE * 100, 2),
                "colour": next(c for k, _, c in MEASURES if k == key),
                "label": _share_text(shares[key]),
                "over": shares[key] > 1,
            }
            for key in shown
            if key in shares
        ]
        described.append(
            f"{scenario.name}: " + ", ".join(f"{key} {_share_text(shares[key])}" for key in shown if key in shares)
        )
        rows.append({"name": scenario.name, "bars": bars})
    legend = [{"label": label, "colour": colour} for key, label, colour in MEASURES if key in shown]
    return {
        "rows": rows,
        "legend": legend,
        "aria_label": "Share of each limit used, 100% = the limit. " + "; ".join(described),
    }


def _share_text(share: float) -> str:
    if math.isinf(share):
        return "no bound"
    return f"{share:.0%}" + ("+" if share > SENSITIVITY_MAX_SHARE else "")


def _shares(scenario: Any, sensitivity: Sensitivity) -> dict[str, float | None]:
    latency = []
    # A time the error band does not bound (None at its slow end) is drawn past the plot, never as met;
    # a layout that cannot start has no time at all (its memory bar shows why).
    # Judged as the verdict judges them: at the slow edge of their bands (``Scenario.edge``), as memory is.
    ttft_edge, tpot_edge = scenario.edge
    if sensitivity.slo_ttft_s and scenario.loads:
        latency.append(math.inf if scenario.ttft_s is None else scenario.ttft_s * ttft_edge / sensitivity.slo_ttft_s)
    if sensitivity.slo_tpot_s and scenario.loads:
        latency.append(math.inf if scenario.tpot_s is None else scenario.tpot_s * tpot_edge / sensitivity.slo_tpot_s)
    return {
        "memory": scenario.per_gpu / scenario.capacity if scenario.capacity else None,
        "latency": max(latency) if latency else None,
        "cost": scenario.cost / sensitivity.budget if sensitivity.budget and scenario.cost is not None else None,
    }
