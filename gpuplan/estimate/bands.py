"""How far an estimate can be off, measured on runs the model was never tuned on.

Two generated package files hold the measurements (never typed by hand; ``benchmarks/bands.py`` writes
them and a test re-derives them and compares):

- ``memory_bands.json``: for each fine-tuning kind (full, LoRA, QLoRA) and figure (``device``: the per-GPU
  figure the fit verdict uses; ``allocated``: the tensor peak) the sorted ratios measured / estimate of
  published fine-tuning peaks no constant of gpuplan was set from; and for serving (``kv_pool``) those of
  the KV cache the engine allocated, from engine startup logs gpuplan's serving constants were not read from.
- ``speed_bands.json``: for each speed figure (TTFT, TPOT, output tokens/s, training tokens/s) and serving
  load shape (closed-loop, steady, burst) the sorted ratios measured / estimate, each record estimated with
  the figures fitted on every source but its own (leave-one-source-out), and the published load runs no
  figure was fitted on. TPOT's are split once more, by answer length (``tpot_group``).

The edge at confidence c is the estimate times the smallest ratio that at least c of the records stay at
or below (the order statistic ceil(c x n); no distribution is assumed, so a band is only as wide as what
was measured, and a group with few records borrows its family's, as the file says). For memory and
latencies the pessimistic edge is the high one; for a throughput, and for the KV cache an engine allocates,
it is the low one (``Band.slow``, ``MemoryBand.smallest``). A job "fits at confidence c" when its memory's
pessimistic edge fits (a serving job: when the KV cache at its low edge holds the declared sequences), and
meets an SLO at confidence c when the latency's slow edge does.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

from gpuplan.records import record

BANDS_FILE = Path(__file__).with_name("memory_bands.json")
SPEED_BANDS_FILE = Path(__file__).with_name("speed_bands.json")
# Speed figures whose slow side is the low one (a throughput); the others are times.
THROUGHPUTS = frozenset({"tokens_per_s", "training_tokens_per_s"})
# A client's TPOT is a request's time from its first token to its last over output - 1 gaps, as its tokens
# reach the client. A delay the server's front end holds tokens for (one process takes every request in and
# streams every token out) falls on those few gaps in a short answer: a four-token answer carries it three
# gaps long, a 200-token one spread over 199. The published bursts of four-token answers measured 12 to 121
# times gpuplan's TPOT, where the bursts of longer answers stayed within 6.5 times in nine runs of ten, so
# short answers are judged by the runs of short answers (a label, a yes/no, a short extraction: up to 16
# tokens; no published run has answers between 4 and 77 tokens to set the line by).
SHORT_ANSWER_TOKENS = 16
SHORT_ANSWERS = "short answers"


def tpot_group(arrival: str, output_tokens: float) -> str:
    """The TPOT group a job's answers belong to: its load shape, and whether they are short answers. A load
    shape with too few runs of short answers has no such band; its short answers take the shape's."""
    return f"{arrival}, {SHORT_ANSWERS}" if output_tokens <= SHORT_ANSWER_TOKENS else arrival


def order_statistic(ratios: tuple[float, ...], confidence: float) -> float:
    """The smallest of the sorted ``ratios`` that at least ``confidence`` of them stay at or below."""
    rank = math.ceil(confidence * len(ratios) - 1e-9)  # 1-based; the tolerance keeps 0.9 x 10 at 9
    return ratios[min(len(ratios), max(1, rank)) - 1]


@record
class MemoryBand:
    """One kind's and figure's measured ratios (measured / estimate), sorted."""

    kind: str
    figure: str
    ratios: tuple[float, ...]
    pooled: bool  # the kind had too few records of its own: these are every fine-tuning kind's

    @property
    def records(self) -> int:
        return len(self.ratios)

    def ratio(self, confidence: float) -> float:
        """The smallest measured ratio that at least ``confidence`` of the records stay at or below."""
        return order_statistic(self.ratios, confidence)

    def edges(self, estimate: float, confidence: float) -> tuple[float, float]:
        """(optimistic, pessimistic) edges of ``estimate`` at ``confidence``."""
        return estimate * self.ratio(1 - confidence), estimate * self.ratio(confidence)

    def pessimistic(self, estimate: float, confidence: float) -> float:
        """The figure a decision at ``confidence`` plans for: never below the estimate itself."""
        return max(estimate, estimate * self.ratio(confidence))

    def smallest(self, estimate: float, confidence: float) -> float:
        """The low edge a decision at ``confidence`` plans for where less is the danger (the KV cache an engine
        allocates): never above the estimate itself."""
        return min(estimate, estimate * self.ratio(1 - confidence))

    def describe(self) -> str:
        if self.kind == "serving":
            return f"{self.records} published engine startup logs not used to tune the model"
        kind = {"full": "full fine-tuning", "lora": "LoRA", "qlora": "QLoRA"}[self.kind]
        runs = "fine-tuning runs of every kind" if self.pooled else f"{kind} runs"
        return f"{self.records} published {runs} not used to tune the model"


@record
class SpeedBand:
    """One speed figure's measured ratios (measured / estimate) under one load shape, sorted."""

    metric: str  # ttft | tpot | tokens_per_s | training_tokens_per_s
    arrival: str  # closed-loop | steady | burst; "training" for training tokens/s
    ratios: tuple[float, ...]
    pooled: bool  # the load shape had too few records of its own: these are every shape's

    @property
    def records(self) -> int:
        return len(self.ratios)

    def ratio(self, confidence: float) -> float:
        return order_statistic(self.ratios, confidence)

    def slow_ratio(self, confidence: float) -> float:
        """The ratio at the slow edge: the high one for a time, the low one for a throughput."""
        return self.ratio(1 - confidence if self.metric in THROUGHPUTS else confidence)

    def fast_ratio(self, confidence: float) -> float:
        return self.ratio(confidence if self.metric in THROUGHPUTS else 1 - confidence)

    def edges(self, estimate: float, confidence: float) -> tuple[float, float]:
        """(fast, slow) edges of ``estimate`` at ``confidence``."""
        return estimate * self.fast_ratio(confidence), estimate * self.slow_ratio(confidence)

    def slow(self, estimate: float, confidence: float) -> float:
        """The figure a decision at ``confidence`` plans for: the slow edge, never faster than the estimate."""
        edge = self.edges(estimate, confidence)[1]
        return max(estimate, edge) if self.metric not in THROUGHPUTS else min(estimate, edge)

    def describe(self) -> str:
        shape = "" if self.arrival == "training" else f" ({'every load shape' if self.pooled else self.arrival})"
        return f"{self.records} measured runs{shape} not used to tune the model"


def _read(path: Path, section: str, make: Any) -> dict[tuple[str, str], Any]:
    """(family, group) -> ``make(family, group, ratios, pooled)`` for each band of a generated file's section."""
    document = json.loads(path.read_text(encoding="utf-8"))
    return {
        (family, group): make(family, group, tuple(band["ratios"]), band["pooled"])
        for family, groups in document[section].items()
        for group, band in groups.items()
    }


@functools.cache
def memory_bands() -> dict[tuple[str, str], MemoryBand]:
    """(kind, figure) -> band, from the generated package data."""
    return _read(BANDS_FILE, "memory", MemoryBand)


@functools.cache
def speed_bands() -> dict[tuple[str, str], SpeedBand]:
    """(metric, arrival) -> band, from the generated package data."""
    return _read(SPEED_BANDS_FILE, "speed", SpeedBand)


def job_kind(method: str) -> str:
    """The band a fine-tuning method is judged by: DoRA and other adapters are LoRA's."""
    return method if method in ("full", "qlora") else "lora"


def finetune_band(method: str, figure: str = "device") -> MemoryBand:
    return memory_bands()[(job_kind(method), figure)]


def serving_band() -> MemoryBand:
    """The measured error of the KV cache an engine allocates (every engine's startup logs together)."""
    return memory_bands()[("serving", "kv_pool")]


def serving_speed_bands(arrival: str, output_tokens: float) -> dict[str, SpeedBand]:
    """TTFT, TPOT and output tokens/s bands of a serving job under its load shape (TPOT's by answer length)."""
    bands = speed_bands()
    return {
        "ttft": bands[("ttft", arrival)],
        "tpot": bands.get(("tpot", tpot_group(arrival, output_tokens))) or bands[("tpot", arrival)],
        "tokens_per_s": bands[("tokens_per_s", arrival)],
    }


def capacity_band() -> SpeedBand:
    """The band of the most requests per second a deployment completes, which a steady stream's rate must stay
    under: every replica at its cap is a closed loop at that concurrency (``serving_speed._steady_speed``), so its
    error is a closed loop's throughput's. A stream's own tokens/s band measures what it was sent, not that."""
    return speed_bands()[("tokens_per_s", "closed-loop")]


def training_speed_bands() -> dict[str, SpeedBand]:
    return {"training_tokens_per_s": speed_bands()[("training_tokens_per_s", "training")]}
