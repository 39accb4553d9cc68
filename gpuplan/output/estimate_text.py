"""The readable ``gpuplan estimate`` table: per job, per GPU, against the GPU's usable memory."""

from __future__ import annotations

import math

from gpuplan.analysis import NOT_LOADED, Analysis, ServeEstimate
from gpuplan.assumptions import (
    GPUS_PER_NODE,
    alone_words,
    fullest_stage_words,
    load_phrase,
    sequences_words,
    ttft_prompt_phrase,
    ttft_tail_words,
)
from gpuplan.config import Settings, default_settings
from gpuplan.decision.offered import offered_figures
from gpuplan.estimate.bands import SpeedBand, capacity_band
from gpuplan.estimate.serving_categories import SHORT_OUTPUT, SHORT_PROMPT
from gpuplan.estimate.speculative import expected_tokens
from gpuplan.layout import replicas
from gpuplan.plan.evaluate import slo_figure
from gpuplan.units import (
    GIB,
    HOURS_DIGITS,
    MIB,
    RATE_DIGITS,
    apportioned_gib,
    format_figure,
    format_gib,
    format_latency_ms,
    format_money,
    format_ms,
    plural,
)
from gpuplan.visible import visible


def _gib(value: float) -> str:
    return f"{format_gib(value, 2):>13}"


def _breakdown(breakdown: dict[str, int]) -> list[str]:
    """The terms at two decimals, apportioned so they add up to the total line below them (units.py)."""
    shown = apportioned_gib(list(breakdown.values()), 2)
    return [f"    {name:<28}{f'{value:,.2f} GiB':>13}" for name, value in zip(breakdown, shown, strict=True)]


def _band(band: SpeedBand, figure: float, confidence: float, unit: str, digits: int = 0) -> str:
    """`` (90% band 120-340 ms over 76 measured runs ... not used to tune the model)``: the figure's edges at
    ``confidence``, what they were measured on."""
    low, high = sorted(band.edges(figure, confidence))
    # A band wholly on one side says the estimate itself leans: each edge is the ratio measured / estimate
    # that a share ``confidence`` of the runs stayed on the far side of.
    leans = ""
    if low > figure:
        leans = f"; {confidence:.0%} of them measured above the estimate"
    elif high < figure:
        leans = f"; {confidence:.0%} of them measured below the estimate"
    return f" ({confidence:.0%} band {low:,.{digits}f}-{high:,.{digits}f}{unit} over {band.describe()}{leans})"


def _seconds(value: float) -> str:
    """A step time: seconds from one up, milliseconds below."""
    return f"{value:,.2f} s" if value >= 1 else f"{value * 1000:,.0f} ms"


def _shouted(verdict: str) -> str:
    """A fit verdict as the terminal prints it: a failing one in capitals, so that it stands out."""
    return (
        verdict if verdict == "fits" else verdict.replace("does not fit", "DOES NOT FIT").replace("at risk", "AT RISK")
    )


def render_estimate(analysis: Analysis, settings: Settings | None = None) -> str:
    spec = analysis.spec
    currency = spec.budget.currency
    lines = [f"{spec.name}: {spec.model.label} ({spec.model.architecture.params:,} parameters, {spec.model.dtype})", ""]
    if analysis.finetune:
        f = analysis.finetune
        setup = f.setup
        lines.append(
            f"fine-tuning ({setup.job.method}, {setup.job.precision}, {setup.job.optimizer}) on {f.gpus:,} x "
            f"{f.gpu.id}: {_replicas(f.gpus, setup.tensor_parallel, setup.pipeline_parallel, 'data-parallel replica')}"
            f" (TP {setup.tensor_parallel}, PP {setup.pipeline_parallel}, sharding {setup.job.sharding})"
        )
        lines.append(f"  per GPU, {f.memory.peak_words}:")
        lines += _breakdown(f.memory.breakdown)
        lines.append(
            f"    {'total':<28}{_gib(f.memory.per_gpu)}   of {_gib(f.gpu.usable_bytes).strip()} usable"
            f" -> {_shouted(f.fit_verdict(spec.plan.confidence))}"
        )
        confidence = spec.plan.confidence
        lines.append(f"    {'of which PyTorch allocates':<28}{_gib(f.memory.allocated)}   (max_memory_allocated)")
        lines.append(
            f"    {f'at {confidence:.0%} confidence':<28}{_gib(f.planned_bytes(confidence))}"
            f"   x {f.memory_band.ratio(confidence):.2f}: measured on {f.memory_band.describe()}"
        )
        if f.memory.host or f.memory.nvme:
            lines.append(
                f"  offloaded per GPU: host {f.memory.host / GIB:,.2f} GiB, NVMe {f.memory.nvme / GIB:,.2f} GiB"
                f" (host memory per node of {min(f.gpus, GPUS_PER_NODE)} GPUs:"
                f" {f.memory.host * min(f.gpus, GPUS_PER_NODE) / GIB:,.1f} GiB)"
            )
        phases = ", ".join(f"{name} {total / GIB:.2f}" for name, total in f.memory.phase_totals.items())
        # The allocator's cache is the whole step's (what it keeps between the phases): in the total, not here.
        lines.append(f"  phases (GiB, framework overhead included, the allocator's cache not): {phases}")
        lines.append(f"  trainable parameters: {f.memory.trainable_params:,}")
        hours = f.hours
        lines.append(
            "  training time: n/a (finetune.tokens is not given); cost n/a"
            if hours is None
            else f"  training time: {format_figure(hours, 1, HOURS_DIGITS)} h"
            f" ({format_figure(hours * f.gpus, 1, HOURS_DIGITS)} GPU-hours); cost {format_money(f.cost, currency)}"
        )
        training = f.speed
        lines.append(
            f"  speed: {training.tokens_per_s_per_gpu:,.0f} tokens/s per GPU,"
            f" {format_figure(training.tokens_per_s, 0, RATE_DIGITS)} on {f.gpus}"
            f"{_band(f.bands['training_tokens_per_s'], training.tokens_per_s, spec.plan.confidence, '')},"
            f" MFU {training.mfu:.0%}, {_seconds(training.step_s)} per step,"
            f" exposed sync {training.gradient_sync_s * 1000:,.0f} ms"
        )
        if training.offload_s:
            lines.append(
                f"  offload: {_seconds(training.offload_s)} of each step, of which the optimizer step on the CPU"
                f" {_seconds(training.host_step_s)} (offload.host_memory_gbs {f.job.offload_host_gbs:g} GB/s per node)"
            )
        lines.append(f"  resumable checkpoint: {f.checkpoint_bytes / 1e9:,.1f} GB")
        lines += [f"  assumption: {key}: {value}" for key, value in f.assumptions]
        lines.append("")
    if analysis.serve:
        s = analysis.serve
        tp, pp = s.setup.tensor_parallel, s.setup.pipeline_parallel
        lines.append(
            f"serving on {s.gpus:,} x {s.gpu.id}: {_replicas(s.gpus, tp, pp, 'replica')} (TP {tp}, PP {pp}),"
            f" {sequences_words(s.setup, s.memory)}"
        )
        lines += _breakdown(s.memory.breakdown)
        if s.memory.graphs_inside:  # vLLM 0.20 on takes their estimate from the budget before the KV cache
            lines.append(f"    {'cuda_graphs (estimated)':<28}{_gib(s.memory.graphs_inside)}")
        confidence = spec.plan.confidence
        serve_verdict = _shouted(s.fit_verdict(confidence))
        lines.append(
            f"    {'total':<28}{_gib(s.memory.per_gpu + s.memory.graphs_inside)}   of"
            f" {_gib(s.memory.budget).strip()} engine budget"
            f" -> {serve_verdict}"
        )
        if s.memory.vision_weights:
            lines.append(f"    {'(of which vision tower)':<28}{_gib(s.memory.vision_weights)}")
        if words := fullest_stage_words(s.memory):
            lines.append(f"  peak per GPU: {_gib(s.memory.peak_per_gpu).strip()} {words}")
        graphs = f"{s.memory.cuda_graphs / GIB:,.2f} GiB"
        beside = f"{s.memory.outside_budget / GIB:,.2f} GiB of {s.memory.outside_what}"
        if not s.memory.outside_budget:
            where = f"{graphs} {'in' if s.memory.graphs_in_budget else 'outside'} the engine budget"
        elif s.memory.graphs_in_budget:
            where = f"{graphs} in the engine budget; {beside} outside it"
        else:
            where = f"{graphs} and {beside} outside the engine budget"
        lines.append(f"  CUDA graphs: {where}; KV cache size: {s.memory.kv_cache_tokens:,} tokens")
        if s.memory.kv_available > 0:
            band = s.kv_band
            lines.append(
                f"  KV cache the engine allocates: {s.memory.kv_available / GIB:,.2f} GiB; at {confidence:.0%}"
                f" confidence {s.planned_kv_pool(confidence) / GIB:,.2f} GiB (x {band.ratio(1 - confidence):.2f}:"
                f" measured on {band.describe()})"
            )
        state = (
            f" + {s.memory.state_bytes_per_sequence / MIB:,.1f} MiB recurrent state per sequence"
            if s.memory.state_bytes_per_sequence
            else ""
        )
        longest = f"{s.max_context:,}"
        limit = spec.model.architecture.max_position
        if limit and s.max_context > limit:  # the cache would hold more than the model takes
            longest = f"{limit:,}, the model's limit (the KV cache holds {s.max_context:,})"
        lines.append(
            f"  KV cache: {s.memory.kv_bytes_per_token:,.0f} B/token per GPU{state}; max concurrency at "
            f"{s.setup.context:,} tokens: {s.max_concurrency:,}; max context at {s.required_sequences:,}: {longest}"
        )
        speed = s.speed
        if s.loads:
            confidence = spec.plan.confidence
            ttft = slo_figure(s.job, speed, "ttft") * 1000
            ttft_band = _band(s.bands["ttft"], ttft, confidence, " ms") if math.isfinite(ttft) else ""
            lines.append(f"  {_ttft_line(s)}{ttft_band.replace(' band', f' band of the {s.job.ttft_statistic}', 1)}")
            tpot = format_latency_ms("tpot", speed.tpot_s)
            proposal = s.job.speculation
            rounds = (
                ""
                if proposal is None
                else f"; speculative: {expected_tokens(proposal.acceptance_rate, proposal.num_tokens):.2f} "
                "tokens per step"
            )
            lines.append(
                f"  TPOT {tpot} ms (mean inter-token latency, first token excluded; {speed.decode_bound}-bound"
                f"{rounds}){_band(s.bands['tpot'], speed.tpot_s * 1000, confidence, ' ms', 1)}"
            )
            lines.append(
                f"  {format_figure(speed.tokens_per_s, 0, RATE_DIGITS)} output tokens/s,"
                f" {speed.requests_per_s:,.2f} requests/s over the deployment"
                f"{_band(s.bands['tokens_per_s'], speed.tokens_per_s, confidence, '')}"
            )
            if speed.stream_capacity_rps is not None and not speed.saturated:
                ceiling = speed.stream_capacity_rps
                lines.append(
                    f"  the stream's ceiling: at most {ceiling:,.2f} requests/s completed, for {s.job.rate_rps:,g}"
                    f" arriving{_band(capacity_band(), ceiling, confidence, '', 2)}"
                )
            lines += _category_lines(s)
            lines += [
                f"  evidence offered: {o.words(confidence)}"
                for o in offered_figures(s, settings or default_settings(), confidence)
            ]
            per_token = f"{format_money(s.cost_per_million_tokens, currency)} per 1M output tokens"
        else:
            lines.append(f"  TTFT, TPOT and output tokens/s: {NOT_LOADED}: {s.not_loaded_reason}")
            per_token = f"per 1M output tokens {NOT_LOADED}"
        lines.append(f"  cost: {format_money(s.monthly_cost, currency)} per month; {per_token}")
        lines += [f"  assumption: {key}: {value}" for key, value in s.assumptions]
        lines.append("")
    return "\n".join(visible(line) for line in lines)  # names and labels come from the spec


def _ttft_line(s: ServeEstimate) -> str:
    """TTFT at the declared load: p90, median and mean (the SLO's statistic first), or why it has no bound."""
    speed, load = s.speed, load_phrase(s.job)
    alone = alone_words(s.job, speed)
    frontend = f"; front end {format_ms(speed.frontend_s, 0)} ms" if speed.frontend_s else ""
    if speed.saturated:
        return (
            f"TTFT without bound {load}: the deployment completes at most"
            f" {speed.requests_per_s:,.2f} requests/s ({alone})"
        )
    tail_words = ttft_tail_words(speed)
    tail = f"; {tail_words}" if tail_words else ""
    p90, median, mean = (format_latency_ms("ttft", t) for t in (speed.ttft_p90_s, speed.ttft_median_s, speed.ttft_s))
    return (
        f"TTFT p90 {p90} ms, median {median} ms, mean {mean} ms"
        f" {ttft_prompt_phrase(s.job)}{load} ({alone}{frontend}{tail})"
    )


def _category_lines(s: ServeEstimate) -> list[str]:
    """One line per benchmark category: each answered by this deployment, whatever the declared load."""
    c = s.categories
    if c is None:
        return []
    return [
        f"  long-context input: TTFT {format_latency_ms('ttft', c.long_context_ttft_s)} ms"
        f" for a {c.long_context_tokens:,}-token prompt on an idle replica",
        f"  high-throughput batch: {format_figure(c.saturated_tokens_per_s, 0, RATE_DIGITS)} output tokens/s at"
        f" {plural(c.saturated_sequences, 'sequence')} per replica (the most the engine and KV cache run"
        + ("; the server's front end caps it)" if c.saturated_limited_by == "front-end" else ")"),
        f"  short fast output: TTFT {format_latency_ms('ttft', c.short_ttft_s)} ms + TPOT"
        f" {format_latency_ms('tpot', c.short_tpot_s)} ms for one {SHORT_PROMPT}-token prompt, {SHORT_OUTPUT} out",
    ]


def _replicas(gpus: int, tensor_parallel: int, pipeline_parallel: int, word: str) -> str:
    """A layout as replicas x GPUs per replica: ``2 replicas x 4 GPUs``."""
    per_replica = plural(tensor_parallel * pipeline_parallel, "GPU")
    return f"{plural(replicas(gpus, tensor_parallel, pipeline_parallel), word)} x {per_replica}"
