"""``gpuplan estimate --format json``: the documented estimate object (also what ``gpuplan diff`` compares and
the range check of every estimate reads), with the spec's findings and the exit code."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from gpuplan.assumptions import GPUS_PER_NODE
from gpuplan.config import Settings, default_settings
from gpuplan.estimate.bands import THROUGHPUTS, SpeedBand, capacity_band, finetune_band
from gpuplan.estimate.engines import memory_engine
from gpuplan.estimate.lora_serving import host_bytes
from gpuplan.estimate.serving_categories import SHORT_OUTPUT, SHORT_PROMPT
from gpuplan.estimate.speculative import expected_tokens
from gpuplan.units import CENT_DIGITS, HOURS_DIGITS, MS_DIGITS, RATE_DIGITS, TPOT_MS_DIGITS, milliseconds, rounded
from gpuplan.visible import json_text

if TYPE_CHECKING:
    from gpuplan.analysis import Analysis, FinetuneEstimate, ServeEstimate
    from gpuplan.output.summary import RunSummary


REQUEST_RATE_DIGITS = 3  # requests/s: a few per second on large models, so decimals matter
# serve.evidence metrics at the digits their figures are published at elsewhere in the document
EVIDENCE_DIGITS = {
    "ttft_ms": MS_DIGITS,
    "tpot_ms": TPOT_MS_DIGITS,
    "tokens_per_s": RATE_DIGITS,
    "requests_per_s": REQUEST_RATE_DIGITS,
}

# What each serving figure measures: statistic and scope (the same words in every output).
METRIC_CONTRACT = {
    "ttft": "time from sending a request to its first streamed token, front end included (endpoint): mean,"
    " median and p90 over requests; closed-loop and steady: over the stated prompts under the load (p90 at"
    " the prompts' p90, median at their median; without serve.prompt_tokens each the full prompt, context -"
    " output_tokens); burst: across the wave at the mean prompt",
    "tpot": "time per output token after the first (mean inter-token latency of a running sequence), per request",
    "tokens_per_s": "output tokens per second over the whole deployment (all replicas)",
    "requests_per_s": "completed requests per second over the whole deployment",
    "running_sequences": "sequences decoding at once, per replica",
}


def _finite_ms(seconds: float, saturated: bool) -> float | None:
    """A TTFT statistic in ms, or None where it has no bound: a saturated steady stream's. Any other infinite one is
    kept, so that the estimate's range check (linter.unsafe_figures) makes it a GP010 and no output prints it (a
    near-zero efficiency override once printed "p90 TTFT inf ms")."""
    return None if saturated and not math.isfinite(seconds) else milliseconds(seconds)


def _frontend_capacity(s: ServeEstimate) -> float | None:
    """Requests/s one replica's server process takes in and streams back; None offline (no such process)."""
    capacity = s.speed.frontend_capacity_rps
    return rounded(capacity, REQUEST_RATE_DIGITS) if math.isfinite(capacity) else None


def _stream_capacity(s: ServeEstimate, confidence: float) -> dict[str, Any]:
    """``stream_capacity_rps``, the most requests/s the deployment completes under a steady stream (engines at their
    caps, server processes included), and its band; null under other load shapes, with static batching, or where
    the engine cannot start."""
    capacity = s.speed.stream_capacity_rps
    figure = None if capacity is None or not s.loads else rounded(capacity, REQUEST_RATE_DIGITS)
    band = _speed_band_dict(capacity_band(), figure, confidence, REQUEST_RATE_DIGITS)
    return {"stream_capacity_rps": figure, "stream_capacity_rps_band": band}


def _categories_dict(s: ServeEstimate) -> dict[str, Any] | None:
    c = s.categories
    if c is None:
        return None
    return {
        "long-context": {"ttft_ms": milliseconds(c.long_context_ttft_s), "prompt_tokens": c.long_context_tokens},
        "high-throughput": {
            "tokens_per_s": rounded(c.saturated_tokens_per_s, RATE_DIGITS),
            "sequences_per_replica": c.saturated_sequences,
            "limited_by": c.saturated_limited_by,
        },
        "short-fast": {
            "ttft_ms": milliseconds(c.short_ttft_s),
            "tpot_ms": milliseconds(c.short_tpot_s, TPOT_MS_DIGITS),
            "prompt_tokens": SHORT_PROMPT,
            "output_tokens": SHORT_OUTPUT,
        },
    }


def _evidence(s: ServeEstimate, settings: Settings | None, confidence: float) -> list[dict[str, Any]]:
    """``serve.evidence``, each item beside gpuplan's figure for its category and metric (``offered_figures``)."""
    from gpuplan.decision.offered import offered_figures  # not on lint's path (its figures leave the evidence out)

    def shown(figure: float | None, metric: str) -> float | None:
        return None if figure is None else rounded(figure, EVIDENCE_DIGITS[metric])

    return [
        {
            "category": o.item.category,
            "metric": o.item.metric,
            "value": o.item.value,
            "source": o.item.source or None,
            # gpuplan's, in the metric's unit; null where it states none (basis says why)
            "estimate": shown(o.estimate, o.item.metric),
            "basis": o.basis,
            "in_category": o.in_category,  # the workload's own category: the estimate is at the declared load
            # 0.25: the offered figure 25% faster than gpuplan's (a latency's inverse for ms metrics)
            "offer_faster_by": None if o.offer_faster_by is None else round(o.offer_faster_by, 4),
            "band": None
            if o.band is None
            else {
                "low": shown(o.band[0], o.item.metric),
                "high": shown(o.band[1], o.item.metric),
                "confidence": confidence,
            },
            "within_band": o.within_band,
        }
        for o in offered_figures(s, settings or default_settings(), confidence)
    ]


def _speed_band_dict(band: SpeedBand, figure: float | None, confidence: float, digits: int) -> dict[str, Any] | None:
    """A speed figure's band at ``confidence``: its low and high edges (in the figure's unit, at its digits),
    which of them is the slow one, and what it was measured on; None where the figure is not stated."""
    if figure is None or not math.isfinite(figure):
        return None
    fast, slow = band.edges(figure, confidence)
    return {
        "low": rounded(min(fast, slow), digits),
        "high": rounded(max(fast, slow), digits),
        # a throughput's slow edge is its low one, a latency's its high one (at confidence 0.5 the edges meet)
        "slow": "low" if band.metric in THROUGHPUTS else "high",
        "confidence": confidence,
        "records": band.records,
        "pooled": band.pooled,
        "basis": band.describe(),
    }


def _memory_band_dict(f: FinetuneEstimate, confidence: float, figure: str = "device") -> dict[str, Any]:
    band = finetune_band(f.job.method, figure)
    estimate = f.memory.per_gpu if figure == "device" else f.memory.allocated
    low, _ = band.edges(estimate, confidence)
    return {
        "low": math.floor(low),
        "high": math.ceil(band.pessimistic(estimate, confidence)),
        "confidence": confidence,
        "records": band.records,
        "pooled": band.pooled,
        "basis": band.describe(),
    }


def _kv_pool_band_dict(s: ServeEstimate, confidence: float) -> dict[str, Any] | None:
    """The KV cache the engine allocates between the band's edges (low: the danger side); None when the
    budget leaves it nothing (the engine does not start, whatever the error)."""
    pool = s.memory.kv_available
    if pool <= 0:
        return None
    return {
        "low": s.planned_kv_pool(confidence),
        "high": math.ceil(max(pool, s.kv_band.edges(pool, confidence)[1])),
        "slow": "low",
        "confidence": confidence,
        "records": s.kv_band.records,
        "pooled": s.kv_band.pooled,
        "basis": s.kv_band.describe(),
    }


def _serving_band_dict(s: ServeEstimate, confidence: float) -> dict[str, Any]:
    """The per-GPU figure within the engine budget: the estimate, and at the high edge what the KV pool may
    come short by (``planned_serving_bytes``)."""
    return {
        "low": s.memory.per_gpu,
        "high": s.planned_bytes(confidence),
        "confidence": confidence,
        "records": s.kv_band.records,
        "pooled": s.kv_band.pooled,
        "basis": s.kv_band.describe(),
    }


def _serve_speed_bands(s: ServeEstimate, confidence: float) -> dict[str, Any]:
    figures = {
        "ttft_ms_band": ("ttft", s.speed.ttft_s * 1000, MS_DIGITS),
        "ttft_median_ms_band": ("ttft", s.speed.ttft_median_s * 1000, MS_DIGITS),
        "ttft_p90_ms_band": ("ttft", s.speed.ttft_p90_s * 1000, MS_DIGITS),
        "tpot_ms_band": ("tpot", s.speed.tpot_s * 1000, TPOT_MS_DIGITS),
        "tokens_per_s_band": ("tokens_per_s", s.speed.tokens_per_s, RATE_DIGITS),
    }
    return {
        key: _speed_band_dict(s.bands[metric], figure if s.loads else None, confidence, digits)
        for key, (metric, figure, digits) in figures.items()
    }


def estimate_document(
    analysis: Analysis, figures_only: bool = False, settings: Settings | None = None
) -> dict[str, Any]:
    """The documented JSON object of ``gpuplan estimate --format json``. ``figures_only`` leaves out the
    assumptions (words) and ``max_concurrency`` and ``max_context`` (a binary search each, whole numbers
    >= 0 by construction): what lint's guard on the estimate's figures needs to check."""
    result: dict[str, Any] = {
        "name": analysis.spec.name,
        "model": analysis.spec.model.label,
        "currency": analysis.spec.budget.currency,  # of every cost and price below
    }
    if analysis.finetune:
        f = analysis.finetune
        result["finetune"] = {
            "params": f.memory.params,
            "trainable_params": f.memory.trainable_params,
            "per_gpu_bytes": f.memory.per_gpu,
            "per_gpu_bytes_band": _memory_band_dict(f, analysis.spec.plan.confidence),
            # What PyTorch's max_memory_allocated counts (no CUDA context, no allocator cache), with its
            # own measured band; per_gpu_bytes is the device figure the fit verdict uses.
            "allocated_bytes": f.memory.allocated,
            # The caching allocator's segments at their peak (max_memory_reserved): allocated plus the cache.
            "reserved_bytes": f.memory.reserved,
            "allocated_bytes_band": _memory_band_dict(f, analysis.spec.plan.confidence, "allocated"),
            "peak_phase": f.memory.peak_phase,
            "breakdown": f.memory.breakdown,
            "phases": f.memory.phases,
            "gpu": f.gpu.id,
            "gpus": f.gpus,
            "usable_bytes": f.gpu.usable_bytes,
            "fits": f.fits,
            "training_hours": None if f.hours is None else rounded(f.hours, HOURS_DIGITS),
            "tokens_per_s": rounded(f.speed.tokens_per_s, RATE_DIGITS),
            "tokens_per_s_per_gpu": round(f.speed.tokens_per_s_per_gpu, 1),
            "mfu": round(f.speed.mfu, 4),
            "step_s": round(f.speed.step_s, 4),
            "gradient_sync_s": round(f.speed.gradient_sync_s, 4),
            "offload_s": round(f.speed.offload_s, 4),
            "tokens_per_s_band": _speed_band_dict(
                f.bands["training_tokens_per_s"], f.speed.tokens_per_s, analysis.spec.plan.confidence, RATE_DIGITS
            ),
            "cost": None if f.cost is None else rounded(f.cost, CENT_DIGITS),
            "price_per_gpu_hour": f.price_per_hour,
            "checkpoint_bytes": f.checkpoint_bytes,
            "vision_params": f.setup.architecture.vision_params,
            "host_bytes": f.memory.host * min(f.gpus, GPUS_PER_NODE),
            "host_bytes_per_gpu": f.memory.host,
            "nvme_bytes_per_gpu": f.memory.nvme,
            **({} if figures_only else {"assumptions": dict(f.assumptions)}),
        }
    if analysis.serve:
        s = analysis.serve
        result["serve"] = {
            "params": s.setup.architecture.params,
            "per_gpu_bytes": s.memory.per_gpu,
            "per_gpu_bytes_band": _serving_band_dict(s, analysis.spec.plan.confidence),
            "breakdown": s.memory.breakdown,
            # per_gpu_bytes and breakdown are of the pipeline stage whose KV room is tightest (it sizes every
            # stage's pool); another stage may hold more: the most any one GPU holds
            "peak_gpu_bytes": s.memory.peak_per_gpu,
            "gpu": s.gpu.id,
            "gpus": s.gpus,
            "usable_bytes": s.memory.budget,
            "fits": s.fits,
            "kv_bytes_per_token": s.memory.kv_bytes_per_token,
            "kv_cache_tokens": s.memory.kv_cache_tokens,
            # the KV cache the engine allocates: what its budget leaves (negative: it refuses to start)
            "kv_pool_bytes": s.memory.kv_available,
            "kv_pool_bytes_band": _kv_pool_band_dict(s, analysis.spec.plan.confidence),
            "non_kv_bytes": s.memory.non_kv,
            "vision_params": s.setup.architecture.vision_params,
            "vision_weight_bytes": s.memory.vision_weights,
            "cuda_graph_bytes": s.memory.cuda_graphs,
            "cuda_graphs_in_budget": s.memory.graphs_in_budget,
            # Besides graphs captured outside it, what the engine holds beside its budget (the fit counts it).
            "outside_budget_bytes": s.memory.outside_budget,
            "outside_budget_what": s.memory.outside_what or None,
            "lora_slot_bytes": s.memory.lora_slots,
            "lora_host_bytes_per_gpu": None
            if s.job.lora is None
            else math.ceil(host_bytes(s.setup.architecture, s.job.lora, s.setup.model_dtype_bytes)),
            "draft_weight_bytes": s.memory.draft_weights,
            "speculative_tokens_per_step": None
            if s.job.speculation is None
            else round(expected_tokens(s.job.speculation.acceptance_rate, s.job.speculation.num_tokens), 4),
            "memory_engine": s.setup.release.label if s.job.engine == "vllm" else memory_engine(s.job.engine),
            **({} if figures_only else {"max_concurrency": s.max_concurrency, "max_context": s.max_context}),
            "engine": s.job.engine,
            # A layout that cannot start has no speed: null figures, and ``loads`` says why they are null.
            "loads": s.loads,
            "arrival": s.job.arrival,
            "rate_rps": s.job.rate_rps,
            "endpoint": s.job.endpoint,
            # TTFT statistics are null where a steady stream outruns the deployment (``saturated``).
            "ttft_ms": _finite_ms(s.speed.ttft_s, s.speed.saturated) if s.loads else None,
            "ttft_median_ms": _finite_ms(s.speed.ttft_median_s, s.speed.saturated) if s.loads else None,
            "ttft_p90_ms": _finite_ms(s.speed.ttft_p90_s, s.speed.saturated) if s.loads else None,
            # Each speed figure's band at plan.confidence, measured on runs not used to tune the model.
            **_serve_speed_bands(s, analysis.spec.plan.confidence),
            "ttft_single_ms": milliseconds(s.speed.ttft_single_s) if s.loads else None,
            "frontend_ms": milliseconds(s.speed.frontend_s),
            "tpot_ms": milliseconds(s.speed.tpot_s, TPOT_MS_DIGITS) if s.loads else None,
            "tokens_per_s": rounded(s.speed.tokens_per_s, RATE_DIGITS) if s.loads else None,
            "requests_per_s": rounded(s.speed.requests_per_s, REQUEST_RATE_DIGITS) if s.loads else None,
            "saturated": s.speed.saturated if s.loads else None,
            "burst_duration_s": None
            if s.speed.duration_s is None or not s.loads
            else rounded(s.speed.duration_s, RATE_DIGITS),
            "running_sequences": round(s.speed.running, 1) if s.loads else None,
            "preempted_sequences": s.speed.preempted if s.loads else None,  # a burst's, for want of KV cache
            # What caps the running batch (concurrency, engine, kv-cache, arrival-rate, front-end), what limits
            # TPOT (memory, compute, front-end), and the requests/s one replica's server process serves.
            "limited_by": s.speed.limited_by if s.loads else None,
            "decode_bound": s.speed.decode_bound if s.loads else None,
            "frontend_capacity_rps": _frontend_capacity(s),
            # A steady stream's ceiling: the most requests/s the deployment completes, and its band (GP406, GP407).
            **_stream_capacity(s, analysis.spec.plan.confidence),
            **({} if figures_only else {"metrics": METRIC_CONTRACT, "categories": _categories_dict(s)}),
            **({} if figures_only else {"evidence": _evidence(s, settings, analysis.spec.plan.confidence)}),
            "monthly_cost": None if s.monthly_cost is None else rounded(s.monthly_cost, CENT_DIGITS),
            "cost_per_million_tokens": None
            if s.cost_per_million_tokens is None
            else round(s.cost_per_million_tokens, 3),
            "price_per_gpu_hour": s.price_per_hour,
            **({} if figures_only else {"assumptions": dict(s.assumptions)}),
        }
    return result


def render_estimate_json(summary: RunSummary) -> str:
    """The one spec of ``summary`` (linted with its analysis kept): ``estimate_document`` (empty when the
    spec has problems that stop an estimate), its findings and the run's exit code."""
    (result,) = summary.results
    settings = result.options.settings if result.options is not None else None
    document = estimate_document(result.analysis, settings=settings) if result.analysis is not None else {}
    document["findings"] = [finding.to_dict() for finding in result.findings]
    document["exit_code"] = summary.exit_code
    return json_text(document) + "\n"
