"""The seed's three benchmark categories answered by one deployment, whatever its declared load:
long-context input (the full prompt alone on an idle replica), high-throughput batch (a closed loop at the
most sequences the engine and KV cache run) and short fast output (one short request on an idle replica)."""

from __future__ import annotations

from dataclasses import replace

from gpuplan.estimate.calibration import CALIBRATION, Calibration
from gpuplan.estimate.performance import Efficiency
from gpuplan.estimate.serving_speed import Deployment, kv_sequences, serving_speed
from gpuplan.estimate.serving_workload import ServingWorkload
from gpuplan.records import record

# The seed's three benchmark categories, each one figure of the same deployment (metric contract in
# ServingSpeed). A short request: 128 tokens in, 128 out, the shortest shape of TensorRT-LLM's published
# throughput tables (docs/source/performance/perf-overview.md, ISL/OSL 128/128).
SHORT_PROMPT = 128
SHORT_OUTPUT = 128


@record
class CategorySpeeds:
    long_context_ttft_s: float  # the full prompt alone on an idle replica (long-context input)
    long_context_tokens: int
    saturated_tokens_per_s: (
        float  # closed loop at the most sequences the engine and KV cache run (high-throughput batch)
    )
    saturated_sequences: int  # per replica
    saturated_limited_by: str  # what caps that batch (ServingSpeed.limited_by): front-end behind its server
    short_ttft_s: float  # one short request on an idle replica (short fast output)
    short_tpot_s: float


def category_speeds(
    w: ServingWorkload, efficiency: Efficiency | None = None, calibration: Calibration = CALIBRATION
) -> CategorySpeeds:
    """The deployment ``w`` answering each seed category, whatever its declared load."""
    d = Deployment(w, calibration, efficiency or Efficiency())
    alone = serving_speed(w, efficiency, calibration, prepared=d).ttft_single_s
    most = max(1, int(min(d.sequence_cap, kv_sequences(w, d))))
    saturated = serving_speed(replace(w, arrival="closed-loop", concurrency=most), efficiency, calibration, d)
    short = serving_speed(
        replace(
            w,
            arrival="closed-loop",
            concurrency=1,
            prompt_tokens=SHORT_PROMPT,
            prompt_p90=SHORT_PROMPT,
            full_prompt=SHORT_PROMPT,
            output_tokens=SHORT_OUTPUT,
            output_p90=0.0,
        ),
        efficiency,
        calibration,
        d,
    )
    return CategorySpeeds(
        alone, w.full_prompt, saturated.tokens_per_s, most, saturated.limited_by, short.ttft_s, short.tpot_s
    )
