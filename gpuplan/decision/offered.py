"""The benchmark evidence a spec offers (``serve.evidence``) beside gpuplan's own figure for the same category and
metric, so that a reviewer sees what a provider's number says of this deployment and what it does not.

A figure in the workload's own category is set beside the estimate at the declared load; one in another category
beside the deployment's answer to that category (``CategorySpeeds``: long-context input, high-throughput batch,
short fast output), which says nothing of the declared load; one without a category beside nothing: a number
without its category is a marketing number (the seed), and GP402 says so of the evidence as a whole.
"""

from __future__ import annotations

from gpuplan.analysis import ServeEstimate
from gpuplan.categories import derive_category
from gpuplan.config import Settings
from gpuplan.estimate.serving_categories import SHORT_OUTPUT, SHORT_PROMPT
from gpuplan.plan.evaluate import slo_figure
from gpuplan.records import record
from gpuplan.spec import Evidence
from gpuplan.units import format_percent

SHORT_WORDS = f"short fast output: one {SHORT_PROMPT}-token prompt, {SHORT_OUTPUT} out, on an idle replica"
LATENCIES = ("ttft_ms", "tpot_ms")  # lower is faster; tokens_per_s and requests_per_s: higher is faster
BANDS = {"ttft_ms": "ttft", "tpot_ms": "tpot", "tokens_per_s": "tokens_per_s"}  # ServeEstimate.bands
# How each metric is named and printed: (name, unit, decimals of gpuplan's figure, as its outputs print it)
METRICS = {
    "ttft_ms": ("TTFT ", " ms", 0),
    "tpot_ms": ("TPOT ", " ms", 1),
    "tokens_per_s": ("", " output tokens/s", 0),
    "requests_per_s": ("", " requests/s", 2),
}


@record
class Offered:
    """One evidence item and gpuplan's figure for the same category and metric (None where it states none)."""

    item: Evidence
    estimate: float | None  # in the metric's unit
    basis: str  # which figure of gpuplan's it is, or why there is none
    in_category: bool  # the workload's own category: the figure speaks for the declared load
    band: tuple[float, float] | None = None  # gpuplan's band of its figure at plan.confidence (low, high)

    @property
    def within_band(self) -> bool | None:
        """Whether the offered figure lies within gpuplan's measured band of its own (None without a band)."""
        return None if self.band is None else self.band[0] <= self.item.value <= self.band[1]

    def words(self, confidence: float, layout: str = "") -> str:
        """The offered figure beside gpuplan's, in words; ``layout``: which layout gpuplan's figure is of, where
        that needs saying ("for the declared 4 x h100-sxm (TP 4)")."""
        item = self.item
        name, unit, digits = METRICS[item.metric]
        words = f"{item.category or 'no category'}: {name}{item.value:,g}{unit}"
        words += f" ({item.source})" if item.source else ""
        layout = f" {layout}" if layout else ""
        if self.estimate is None:
            return f"{words}; gpuplan{layout}: n/a ({self.basis})"
        words += f"; gpuplan {self.estimate:,.{digits}f}{unit}{layout} {self.basis}"
        faster = self.offer_faster_by
        if faster is not None:
            words += "; the offer is " + (
                "as gpuplan's"
                if abs(faster) < 0.005
                else f"{format_percent(abs(faster))} {'faster' if faster > 0 else 'slower'} than gpuplan's"
            )
        if self.band is not None:
            low, high = self.band
            where = "within" if self.within_band else "outside"
            words += f", {where} its {confidence:.0%} band ({low:,.{digits}f}-{high:,.{digits}f}{unit})"
        return words

    @property
    def offer_faster_by(self) -> float | None:
        """How much faster the offered figure is than gpuplan's (0.25: 25% faster; negative: slower), as the
        ratio of the rates (a latency's inverse): None without a figure of gpuplan's or with a zero."""
        if self.estimate is None or self.estimate <= 0 or self.item.value <= 0:
            return None
        if self.item.metric in LATENCIES:
            return self.estimate / self.item.value - 1
        return self.item.value / self.estimate - 1


def offered_figures(s: ServeEstimate, settings: Settings, confidence: float) -> list[Offered]:
    """Each ``serve.evidence`` item of ``s``'s job beside gpuplan's figure for it; a figure at the declared load
    with its band at ``confidence`` where gpuplan has measured one (``ServeEstimate.bands``)."""
    derived, _ = derive_category(s.job, settings)
    return [_offered(s, item, derived, confidence) for item in s.job.evidence]


def _offered(s: ServeEstimate, item: Evidence, derived: str, confidence: float) -> Offered:
    if item.category is None:
        return Offered(item, None, "no category: it cannot be matched to a workload", False)
    if not s.loads:
        return Offered(item, None, "the engine cannot start", item.category == derived)
    if item.category == derived:
        return _at_declared_load(s, item, confidence)
    categories = s.categories
    assert categories is not None  # the engine starts
    figures = {
        ("long-context", "ttft_ms"): (
            categories.long_context_ttft_s * 1000,
            f"long-context input: a {categories.long_context_tokens:,}-token prompt alone on an idle replica",
        ),
        ("high-throughput", "tokens_per_s"): (
            categories.saturated_tokens_per_s,
            f"high-throughput batch: {categories.saturated_sequences:,} sequences per replica, the most it runs",
        ),
        ("short-fast", "ttft_ms"): (categories.short_ttft_s * 1000, SHORT_WORDS),
        ("short-fast", "tpot_ms"): (categories.short_tpot_s * 1000, SHORT_WORDS),
    }
    found = figures.get((item.category, item.metric))
    if found is None:
        return Offered(item, None, f"gpuplan states no {item.metric} for {item.category}", False)
    return Offered(item, found[0], f"{found[1]}; not the workload's category ({derived})", False)


def _at_declared_load(s: ServeEstimate, item: Evidence, confidence: float) -> Offered:
    speed, job = s.speed, s.job
    if speed.saturated and item.metric in LATENCIES:
        return Offered(item, None, "at the declared load the stream outruns the layout: no latency", True)
    figure = {
        "ttft_ms": slo_figure(job, speed, "ttft") * 1000,  # at the SLO's statistic, as GP403 judges it
        "tpot_ms": slo_figure(job, speed, "tpot") * 1000,
        "tokens_per_s": speed.tokens_per_s,
        "requests_per_s": speed.requests_per_s,
    }[item.metric]
    what = {
        "ttft_ms": f"{job.ttft_statistic} TTFT",
        "tpot_ms": "mean TPOT, first token excluded",
        "tokens_per_s": "output tokens/s over the deployment",
        "requests_per_s": "requests/s over the deployment",
    }[item.metric]
    band = s.bands.get(BANDS.get(item.metric, ""))
    if band is None:  # requests/s: no band of its own
        return Offered(item, figure, f"at the declared load ({what})", True)
    low, high = sorted(band.edges(figure, confidence))
    return Offered(item, figure, f"at the declared load ({what})", True, (low, high))
