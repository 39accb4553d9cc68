"""The mean TTFT of a lock-step round: C requests reaching an idle replica together, as LMDeploy's
profile_generation harness sends them (the speed calibration's TTFT tables) or a batch job starts. A
user's burst (``serve.arrival: burst``) is the scheduler's wave instead (``gpuplan.estimate.serving_load``)."""

from __future__ import annotations

import math
from dataclasses import replace

from gpuplan.estimate.calibration import CALIBRATION, Calibration
from gpuplan.estimate.performance import Efficiency
from gpuplan.estimate.serving_speed import Deployment, serving_speed
from gpuplan.estimate.serving_workload import ServingWorkload


def burst_ttft(
    w: ServingWorkload, efficiency: Efficiency | None = None, calibration: Calibration = CALIBRATION
) -> float:
    """Mean TTFT of ``w.concurrency`` requests that reach an idle replica together (a batch job's start,
    a benchmark's lock-step round), as opposed to ``serving_speed``'s steady state.

    The first arrival wakes the idle scheduler and is scheduled alone (engines block on an empty request
    queue and take what is queued when they wake: TurboMind's LlamaBatch, vLLM's engine core loop); the
    others arrive during that pass and are prefilled together at the next step, their first tokens
    coming when that batch's pass ends (under continuous batching that pass is taken as the closed loop
    of the others; no published record measures a burst against a token budget). An engine that
    allocates KV as tokens arrive admits whoever's prompt fits, one that reserves the full context only
    whoever's whole sequence fits; the rest wait as in the steady state. The per-request overhead
    (admission, tokenisation, the first sample's return) and the server's front end
    (``frontend.frontend_seconds``, none for an in-process harness) are CPU work of one process: a
    burst is admitted one request after another, the k-th after k of them, (C + 1) / 2 on average (a
    lone request pays one)."""
    efficiency = efficiency or Efficiency()
    d = Deployment(w, calibration, efficiency)
    engine = d.engine
    steady = serving_speed(w, efficiency, calibration)
    held = w.prompt_tokens + (w.output_tokens if engine.reserves_full_context else 0)
    per_sequence = d.kv_read(max(1.0, held))
    fits = w.kv_capacity_bytes / per_sequence if per_sequence > 0 else float("inf")
    admitted = max(1, min(w.concurrency, d.sequence_cap, math.floor(fits)))
    first = steady.ttft_single_s
    gap = engine.request_overhead_s + steady.frontend_s  # one request's turn in the front-end process
    if admitted == 1:
        rest = first
    else:
        together = serving_speed(
            replace(w, concurrency=admitted - 1, kv_capacity_bytes=float("inf")), efficiency, calibration
        )
        rest = first - gap + together.ttft_s
    passes = (first + (admitted - 1) * rest + (w.concurrency - admitted) * steady.ttft_s) / w.concurrency
    return passes + (w.concurrency - 1) / 2 * gap
