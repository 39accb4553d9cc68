"""GP4xx: the benchmark category of the workload, the evidence offered for it, and the latency SLO."""

from __future__ import annotations

from collections.abc import Iterator

from gpuplan.analysis import ServeEstimate
from gpuplan.assumptions import alone_words, limit_words, load_phrase, ttft_prompt_phrase
from gpuplan.categories import derive_category
from gpuplan.estimate.bands import capacity_band
from gpuplan.findings import Finding
from gpuplan.plan.evaluate import capacity_factor, slo_figure, slo_miss, slow_factor, stream_outrun
from gpuplan.rules.context import RuleContext
from gpuplan.rules.registry import rule
from gpuplan.units import format_latency_ms, listing, plural


@rule("GP401")
def category_mismatch(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Derives the category from the shape: long-context when prompts reach
    `thresholds.long_context_min_prompt` tokens (default 8,192), else high-throughput from
    `thresholds.high_throughput_min_concurrency` sequences (default 32), else short-fast; and compares
    it with `serve.category`.

    ## Why is this bad?
    GPUs rank differently per category: prefill-heavy long prompts are compute-bound, large batches
    bandwidth- and memory-bound, short interactive requests latency-bound.

    ## Example
    ```yaml
    serve: {context: 32768, output_tokens: 512, concurrency: 8, category: short-fast}
    ```

    ## Use instead
    ```yaml
    serve: {context: 32768, output_tokens: 512, concurrency: 8, category: long-context}
    ```
    """
    job = ctx.spec.serve
    if job is None or job.category is None:
        return
    derived, reason = derive_category(job, ctx.settings)
    if derived != job.category:
        yield ctx.finding(
            "GP401",
            ("serve", "category"),
            f"declared category {job.category}, but the workload is {derived}: {reason}",
            f"category: {derived}",
        )


@rule("GP402")
def evidence_out_of_category(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Looks through `serve.evidence` for a figure measured in the workload's derived category and
    reports when there is none: only other categories, or figures with no category at all.

    ## Why is this bad?
    A number without its category is a marketing number: a high-throughput tokens/s figure says
    nothing about time to first token on 32k-token prompts.

    ## Example
    ```yaml
    serve:
      context: 32768
      evidence: [{category: high-throughput, metric: tokens_per_s, value: 12000}]
    ```

    ## Use instead
    ```yaml
    serve:
      context: 32768
      evidence: [{category: long-context, metric: ttft_ms, value: 1800, source: "provider run 2026-10"}]
    ```
    """
    job = ctx.spec.serve
    if job is None or not job.evidence:
        return
    derived, reason = derive_category(job, ctx.settings)
    if any(item.category == derived for item in job.evidence):
        return
    offered = sorted({item.category or "no category" for item in job.evidence})
    yield ctx.finding(
        "GP402",
        ("serve", "evidence"),
        f"the evidence has figures for {', '.join(offered)} but none for {derived}, the workload's category ({reason})",
        "ask for a run in the workload's category; a number without its category is a marketing number",
    )


def _missed_slo(ctx: RuleContext, metric: str) -> tuple[ServeEstimate, float] | None:
    """(serving estimate, SLO ms) when the estimated ``metric`` (ttft, tpot) misses its SLO. A layout whose
    engine cannot start has no latency to judge (GP201, GP203 or GP301 says why it cannot run): quoting
    the speed model's figure for it read as a latency the deployment would have."""
    s = ctx.analysis.serve
    missed = None if s is None or not s.loads else slo_miss(s, metric)
    return None if s is None or missed is None else (s, missed[1])


@rule("GP403")
def ttft_slo_missed(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Estimates the time to first token at the declared load, at the SLO's statistic over the prompts
    (`serve.prompt_tokens`: the p90 at their p90; without it every prompt is `context - output_tokens`):
    waiting for a running slot when the engine or the KV cache holds fewer sequences,
    then the prompt's prefill chunks (2 x active parameters x tokens + causal attention, over the
    tensor-parallel GPUs' achievable GEMM rate at the engine's calibrated efficiency, or
    `thresholds.prefill_mfu` of dense peak) in steps shared with the running batch's decodes, plus the
    engine's per-request overhead; compares it with `serve.slo.ttft_ms`.

    ## Why is this bad?
    Prefill is compute-bound, and under load it queues behind the running batch: no amount of memory
    makes a long prompt start faster on a slower or busier GPU. Behind an online endpoint the replica's
    server process also takes each request in (the front end), and a stream faster than it can serve
    saturates the replica whatever its GPUs.

    ## Example
    ```yaml
    serve: {context: 32768, slo: {ttft_ms: 500}, hardware: {gpu: l40s}}
    ```

    ## Use instead
    A faster GPU, tensor parallelism, shorter prompts, or an SLO that matches the category.
    """
    missed = _missed_slo(ctx, "ttft")
    if missed:
        s, slo = missed
        job = s.job
        where = f"on {s.gpu.id} (TP {job.hardware.tensor_parallel}; {alone_words(job, s.speed)})"
        if s.speed.saturated:
            message = (
                f"TTFT grows without bound {load_phrase(job)} {where}: the deployment completes at most"
                f" {s.speed.requests_per_s:,.2f} requests/s, so the SLO of {slo:,.0f} ms cannot hold"
            )
            hint = "more replicas" if s.speed.limited_by == "front-end" else "more replicas or a faster GPU"
            yield ctx.finding("GP403", ("serve", "slo", "ttft_ms"), message, hint)
            return
        figure = slo_figure(job, s.speed, "ttft")
        yield ctx.finding(
            "GP403",
            ("serve", "slo", "ttft_ms"),
            f"estimated {job.ttft_statistic} TTFT {format_latency_ms('ttft', figure)} ms"
            f" {ttft_prompt_phrase(job)}{load_phrase(job)}"
            f" {where}"
            f" exceeds the SLO of {slo:,.0f} ms",
            "more replicas, each with a server process of its own (its front end is most of this TTFT)"
            if s.speed.frontend_s + s.speed.frontend_wait_s >= s.speed.ttft_s / 2
            else "more TP, a faster GPU, or shorter prompts",
        )


@rule("GP404")
def tpot_slo_missed(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Estimates TPOT at the declared concurrency: each decode step reads the weights (not the embedding
    table, of which it gathers its tokens' rows, nor a vision tower; an MoE only the experts its tokens
    touch) and the KV cache of every running sequence over the GPU's bandwidth at the engine's
    calibrated efficiency (or `thresholds.decode_bandwidth`), or computes their FLOPs if that takes
    longer, carries the prefill chunks of arriving requests, and adds tensor-parallel all-reduces and
    the engine's per-step costs; pipeline stages run at the pace of the one that reads the most. Behind
    an online endpoint, tokens reach the clients no faster than the replica's server process streams
    them back (its time per request and per token): a small model at high concurrency is
    front-end-bound. Compares with `serve.slo.tpot_ms`.

    ## Why is this bad?
    Decode is memory-bound: the whole model and cache are read for every token.

    ## Example
    ```yaml
    serve: {concurrency: 128, slo: {tpot_ms: 20}, hardware: {gpu: l4}}
    ```

    ## Use instead
    A GPU with more bandwidth, fp8 weights or KV cache, or lower concurrency per replica; when
    front-end-bound, more replicas.
    """
    missed = _missed_slo(ctx, "tpot")
    if missed:
        s, slo = missed
        job = s.job
        yield ctx.finding(
            "GP404",
            ("serve", "slo", "tpot_ms"),
            f"estimated TPOT {format_latency_ms('tpot', s.speed.tpot_s)} ms"
            f" at {plural(job.concurrency, 'sequence')} on {s.gpu.id} "
            f"({s.speed.decode_bound}-bound) exceeds the SLO of {slo:,.1f} ms",
            _tpot_hint(s),
        )


def _tpot_hint(s: ServeEstimate) -> str:
    """What would shorten a step, as the step is bound, leaving out what the spec already has."""
    job = s.job
    if s.speed.decode_bound == "front-end":
        return "more replicas (each with a server process of its own), or fewer sequences per replica"
    memory_bound = s.speed.decode_bound == "memory"
    gpu = s.gpu.id
    ways = [
        f"a GPU with more memory bandwidth than {gpu}'s" if memory_bound else f"a GPU that computes faster than {gpu}"
    ]
    # fp8 weights halve the bytes a step reads and, on a GPU with fp8 tensor cores, its GEMMs' time; an fp8
    # KV cache halves the cache's bytes alone, which a compute-bound step does not wait for.
    if job.quantization == "none":
        ways.append("fp8 weights" + ("" if memory_bound else " (fp8 GEMMs on a GPU that has them)"))
    if memory_bound and job.kv_cache_dtype != "fp8":
        ways.append("an fp8 KV cache")
    if job.concurrency > 1:
        ways.append("fewer sequences per replica")
    return listing(ways, "or")


@rule("GP406")
def stream_outruns_deployment(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    For a steady stream (`serve.arrival: steady`), compares `serve.rate_rps` with the requests per
    second the deployment completes: each replica at the most sequences its engine and KV cache run,
    and no more than its server process takes in and streams back behind an online endpoint. Reports
    a stream it cannot keep up with when no TTFT SLO is declared (GP403 reports it where one is).

    ## Why is this bad?
    Requests that arrive faster than they complete queue without bound: every TTFT grows for as long
    as the stream lasts, until clients time out.

    ## Example
    ```yaml
    serve: {context: 4096, output_tokens: 256, arrival: steady, rate_rps: 200, hardware: {gpu: l4}}
    ```

    ## Use instead
    More replicas (`hardware.count`), a faster GPU where the GPUs are the limit, or a rate the
    deployment completes.
    """
    s, job = ctx.analysis.serve, ctx.spec.serve
    if s is None or job is None or not s.loads or not s.speed.saturated or job.ttft_ms is not None:
        return
    front = s.speed.limited_by == "front-end"
    limit = limit_words(s.speed)
    layout = f"{job.hardware.count:,} x {s.gpu.id}"
    yield ctx.finding(
        "GP406",
        ("serve", "rate_rps"),
        f"requests arrive at {job.rate_rps:,g}/s, faster than {layout} completes them (at most"
        f" {s.speed.requests_per_s:,.2f}/s, limited by {limit}): the queue and every TTFT grow without bound",
        "more replicas" if front else "more replicas or a faster GPU",
    )


@rule("GP405")
def slo_at_risk(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    Reports a serving job whose estimated TTFT or TPOT meets its SLO but whose slow edge at
    `plan.confidence` (default 0.9) does not: the estimate times the ratio measured / estimate that
    that share of measured runs under the job's load shape (`serve.arrival`) stayed at or below. The
    runs are ones the speed model was not tuned on: each calibration source estimated with the figures
    fitted on the others, and published load runs nothing was fitted on (`benchmarks/bands.py`).

    ## Why is this bad?
    An estimate is off by what it has been off by before, and latency estimates have erred fast:
    front ends, queueing behind other prompts and scheduler stalls add time no roofline shows. A
    deployment that meets its SLO only if gpuplan is right about it misses it in production.

    ## Example
    ```yaml
    model: {id: llama-3.1-70b}
    serve: {context: 8192, output_tokens: 512, prompt_tokens: {mean: 2500, p90: 6000}, concurrency: 32,
            kv_cache_dtype: fp8, slo: {ttft_ms: 1000},
            hardware: {gpu: h100-sxm, count: 4, tensor_parallel: 4}}
    ```
    estimated p90 TTFT 549 ms, while 90% of closed-loop runs came in at up to 3.26 x their estimate: 1,788 ms.

    ## Use instead
    A layout that meets the SLO at its slow edge (more tensor parallelism, a faster GPU, fewer
    sequences per replica: `gpuplan plan` lists them), or, knowingly, a lower `plan.confidence`.
    """
    s = ctx.analysis.serve
    if s is None or not s.loads or s.speed.saturated:
        return
    confidence = ctx.spec.plan.confidence
    for metric, name in (("ttft", f"{s.job.ttft_statistic} TTFT"), ("tpot", "TPOT")):
        if slo_miss(s, metric) is not None:
            continue  # GP403 or GP404 reports the estimate itself
        missed = slo_miss(s, metric, confidence)
        if missed is None:
            continue
        band = s.bands[metric]
        estimate = format_latency_ms(metric, slo_figure(s.job, s.speed, metric))  # as estimate prints them
        edge = format_latency_ms(metric, missed[0] / 1000)
        yield ctx.finding(
            "GP405",
            ("serve", "slo", f"{metric}_ms"),
            f"estimated {name} {estimate} ms meets the SLO of {missed[1]:,.0f} ms, but not at"
            f" {confidence:.0%} confidence: up to {edge} ms (x {slow_factor(band, confidence):.2f},"
            f" {band.describe()})",
            "a layout that holds at the slow edge (more TP, a faster GPU, fewer sequences per replica;"
            " gpuplan plan lists them), or a lower plan.confidence, knowingly",
        )


@rule("GP407")
def stream_at_risk(ctx: RuleContext) -> Iterator[Finding]:
    """
    ## What it does
    For a steady stream (`serve.arrival: steady`) the estimate keeps up with, compares `serve.rate_rps`
    with the slow edge of the most requests per second the deployment completes at `plan.confidence`
    (default 0.9): the estimate times the ratio measured / estimate that that share of measured
    closed-loop runs (a replica at its cap is one) came in at or above, runs the speed model was not tuned
    on (`benchmarks/bands.py`). GP406 reports a stream the estimate itself cannot keep up with.

    ## Why is this bad?
    A stream near the most a deployment completes queues without bound once it runs slower than the
    estimate, and throughput estimates have erred fast: every TTFT then grows for as long as the stream
    lasts. Headroom on the rate is what absorbs the estimate's error.

    ## Example
    ```yaml
    model: {id: llama-3.2-1b}
    serve: {context: 640, output_tokens: 128, concurrency: 256, arrival: steady, rate_rps: 70,
            endpoint: completions, hardware: {gpu: h100-sxm, count: 1}}
    ```
    one H100's server process completes at most 76.6 requests/s: 70 arrive, and at 90% confidence it
    completes 63.0.

    ## Use instead
    A layout that keeps up at the slow edge (more replicas, a faster GPU: `gpuplan plan` lists them), or,
    knowingly, a lower `plan.confidence`.
    """
    s, job = ctx.analysis.serve, ctx.spec.serve
    if s is None or job is None or not s.loads or s.speed.saturated:
        return
    confidence = ctx.spec.plan.confidence
    factor = capacity_factor(confidence)
    ceiling = s.speed.stream_capacity_rps
    outrun = stream_outrun(job, ceiling, factor)
    if outrun is None or ceiling is None:
        return
    # the server processes' own limit where they take in fewer than the engines complete
    front = ceiling >= s.speed.frontend_capacity_rps * job.hardware.replicas * (1 - 1e-9)
    server = (
        " (what its server process takes in)" if job.hardware.replicas == 1 else " (what its server processes take in)"
    )
    yield ctx.finding(
        "GP407",
        ("serve", "rate_rps"),
        f"{job.hardware.count:,} x {s.gpu.id} keeps up with the {outrun[1]:,g} requests/s that arrive on the"
        f" estimate, completing at most {ceiling:,.2f}/s{server if front else ''}, but not at {confidence:.0%}"
        f" confidence: {outrun[0]:,.2f}/s (x {factor:.2f}, {capacity_band().describe()})",
        "more replicas or a faster GPU (gpuplan plan lists layouts that keep up at the slow edge), or a lower"
        " plan.confidence, knowingly",
    )
