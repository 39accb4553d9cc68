"""Lower bounds of a serving deployment's latency that the planner prunes with: ``latency_floors`` (one
sequence decoding alone; the full prompt's chunks on an idle replica, without its pipeline fill),
``floor_bounds`` (below those, without preparing the deployment) and ``latency_bounds`` (at a closed
loop's load; for a burst, ``burst_ttft_bound``: its front-end queue and its prefill). Each is proved below
what ``serving_speed`` gives for every load of the deployment; the planner drops a layout whose bound
already misses the SLO."""

from __future__ import annotations

import math
from collections.abc import Callable

from gpuplan.estimate.calibration import CALIBRATION, Calibration
from gpuplan.estimate.frontend import frontend_capacity, request_overhead
from gpuplan.estimate.lengths import lognormal_square_mean
from gpuplan.estimate.performance import Efficiency, attention_flops, roofline
from gpuplan.estimate.roots import PHI_TOLERANCE
from gpuplan.estimate.serving_load import TTFT_SHARES, prompt_floor, queue_wait_factor
from gpuplan.estimate.serving_speed import Deployment, Rates, kv_sequences
from gpuplan.estimate.serving_workload import ServingWorkload
from gpuplan.estimate.speculative import tpot_floor


def latency_floors(
    w: ServingWorkload,
    efficiency: Efficiency | None = None,
    calibration: Calibration = CALIBRATION,
    prepared: Deployment | None = None,
    statistic: str = "mean",
) -> tuple[float, float]:
    """(TTFT at ``statistic``, TPOT) that ``serving_speed`` never goes below for this deployment, whatever its
    concurrency or replicas; a planner skips a layout family whose floors already miss the SLO.

    Every term of a step (rooflines, attention, communication, overheads) only grows with its
    sequences and tokens, and a roofline is at least its larger bound. TPOT: every decode step of
    either batching mode carries at least one decoding sequence per microbatch at the same context, and
    TPOT is stages x such a step (plus hops) or an average of such values.

    TTFT (continuous batching): the full prompt's pass under load is cut as the scheduler cuts it
    (``Deployment.chunked_pass``): steps that fill the token budget, D decodes of the chunk's microbatch
    taking room from it, then the rest; then it queues (a factor >= 1); waiting, the residual step and
    the request overhead only add. A whole step holds D decodes and budget - D prompt tokens where the
    idle replica's holds budget prompt tokens, and a decode costs at least a prompt token in its place
    (the same body FLOPs and weights, a mixture's experts touched alike, plus the LM head, its KV read
    and the per-sequence overhead; the prompt's causal attention is the same in total, at its mean per
    token); there are at least as many whole steps, and with as many a rest at least as large. So
    TTFT >= the idle chunks' stage means + the stage hops + the first token's decode step (where the engine
    samples it from one: one sequence at the steady state's context) + the request overhead: the idle
    replica's TTFT less its pipeline fill, which a smaller first chunk beside decodes shortens. That holds
    for each prompt a TTFT statistic is priced at (``_over_prompts``). Static batching prefills mean
    prompts in waves: its TTFT floor is 0 (no claim)."""
    d = prepared or Deployment(w, calibration, efficiency or Efficiency())
    prompt, output = max(1.0, w.prompt_tokens), max(1, w.output_tokens)
    burst = w.burst
    # The least decode context: a steady state's running sequence holds E[O^2] / (2 E[O]) >= E[O] / 2
    # (``Lengths.held``); a burst's TPOT is each request's own, and a short answer decodes at little more than
    # its prompt (the wave's requests are each the mean prompt), each of its tokens a step of at least one
    # sequence (a wave cut past its event budget paces the rest at such steps or slower).
    context = max(0.0, prompt - 1) if burst else prompt + output / 2  # (a first token from a decode step: -1)
    tpot = tpot_floor(w.pipeline_parallel * d.step(1, 0, context, 0.0).mean_seconds, w.speculation)
    if burst and output <= 1:
        # A burst of one request makes the mean answer, here its first token alone: no TPOT to bound (a
        # larger burst's longer answers come with a TPOT of their own, at or above the floor above).
        tpot = 0.0
    if w.batching == "static":
        return 0.0, tpot
    first = d.first_token_step(1, prompt if burst else context)  # a burst's first token: at its prompt

    def floor(tokens: int) -> float:
        ttft = request_overhead(d.engine.request_overhead_s, w.endpoint, tokens)
        passed = int(d.prompt_pass(tokens))
        if passed > 0:
            means = d.stage_means(passed, d.token_budget, lambda size, attention: d.step(0, size, 0, attention))
            ttft += means + (w.pipeline_parallel - 1) * d.hop
        return ttft

    return first + _over_prompts(w, statistic, floor), tpot


def floor_bounds(
    w: ServingWorkload,
    efficiency: Efficiency | None = None,
    calibration: Calibration = CALIBRATION,
    statistic: str = "mean",
) -> tuple[float, float]:
    """(TTFT, TPOT) at or below ``latency_floors``, from the GPU's rates and the weights each step reads
    alone (no deployment is prepared): a planner tries these first on each layout family and prepares
    the family's deployment only where they do not already miss the SLO.

    ``latency_floors`` takes stages x one decode step's stage mean (TPOT) and the idle chunks' stage means
    plus the first token's decode step, the stage hops and the request overhead (TTFT). Each step's mean
    is its linear roofline over the stages' mean weights read (a mixture's experts only add to what it
    reads), its attention roofline, the prompt chunk's attention, its collectives, the fixed costs and the
    decode's per-sequence overhead; these keep the linear roofline, the prompt attention, the fixed
    costs and the per-sequence overhead, and leave out the rest, which is never negative. A relative
    1e-9 lower, for rounding. Static batching claims no TTFT floor (as ``latency_floors``). A burst's floors
    take its mean prompt's pass, and no TPOT where the mean answer is its first token alone, as
    ``latency_floors`` does; the decode roofline above reads no KV, so it bounds the burst's TPOT at any context."""
    rates = Rates(w, calibration, efficiency or Efficiency())
    arch, pp, engine = w.architecture, w.pipeline_parallel, rates.engine
    p, inverse = rates.sharpness, rates.inverse_sharpness
    mean_read = (w.weights_read - w.weights_above_mean) / rates.bandwidth
    decode = roofline(mean_read, (rates.body_flops + rates.head_flops) / rates.gemm_rate, p, inverse)
    tpot = tpot_floor(pp * (decode + rates.fixed + engine.sequence_overhead_s), w.speculation)
    if w.burst and max(1, w.output_tokens) <= 1:
        tpot = 0.0
    if w.batching == "static":
        return 0.0, tpot * (1 - 1e-9)

    def floor(prompt: int) -> float:
        ttft = request_overhead(engine.request_overhead_s, w.endpoint, prompt)
        passed = int(prompt - 1 if engine.first_token_from_decode_step else prompt)
        if passed > 0:
            chunks = max(1, math.ceil(passed / rates.token_budget))
            tokens = passed / chunks
            linear = roofline(mean_read, rates.body_flops * tokens / rates.gemm_rate, p, inverse)
            attention = attention_flops(arch, 0, passed) / chunks * (rates.stage_share / w.tensor_parallel)
            ttft += chunks * (linear + attention / rates.attention_rate + rates.fixed)
        return ttft

    return _over_prompts(w, statistic, floor) * (1 - 1e-9), tpot * (1 - 1e-9)


def latency_bounds(
    w: ServingWorkload,
    efficiency: Efficiency | None = None,
    calibration: Calibration = CALIBRATION,
    prepared: Deployment | None = None,
    statistic: str = "mean",
) -> tuple[float, float]:
    """(TTFT, TPOT) that ``serving_speed(w)`` does not go below at ``w``'s own load, from a few steps
    instead of the steady state's root: a planner skips the full estimate of a load whose bound already
    misses the SLO. 0 where nothing is claimed (static batching); with speculative decoding the family's
    ``latency_floors`` are returned, a rounding lower, and for a burst (no steady state) the higher of those
    and ``burst_ttft_bound``.

    As for ``latency_floors``, every term of a step only grows with its decoding sequences, prompt
    tokens and prompt attention (and a mixture's weights read, concave in the tokens, are at least
    those of the decodes alone). In the steady state (``_continuous``) the share phi of its cycle a
    slot spends decoding is a root of implied(phi) - phi, implied(phi) = O T(phi) / (S(phi) + O T(phi)),
    with TPOT T and prefill time S; over phi in [0, 1]:
      T(phi) >= T0, one sequence decoding alone (the TPOT floor at this context);
      S(phi) <= S1: the queue factor at phi = 1 (rho grows with phi; once rho(1) >= 1 no bound on S,
        and phi is bounded by 0 only), the most chunks (phi = 1: the least room), each a step with every
        other slot of its microbatch decoding beside the scheduler's whole chunk at the most room (phi =
        0), with that chunk's share of the prompt's attention;
      implied(phi) >= q = O T0 / (S1 + O T0), as x / (S + x) grows with x and falls with S.
    The root ``bracketed_root`` returns is within PHI_TOLERANCE of the upper end of its last bracket,
    where implied - phi < 0, so it is above q - PHI_TOLERANCE (or it is 1, or a point where implied =
    phi). At any phi >= phi_b = q - 2 PHI_TOLERANCE a decode step carries at least 1 + others x phi_b
    sequences and, on one stage of a dense model, at least min(others x phi_b x P / O, budget - 1 -
    others) prompt tokens (the others' arrivals grow with phi; the room left is at least that) with
    their share of the attention; over stages or with a mixture only the decodes are counted (a
    microbatch's share of the prompt tokens shrinks as microbatches are added; a mixture's prompt
    chunk is averaged over steps). TPOT, that step's cycle, grows with the decodes.
    TTFT on one stage: at least half that decode step while another slot runs, the full prompt's
    prefill at phi_b (with more decodes beside it the scheduler's cut costs at least as much, as
    ``latency_floors`` shows, and its first chunk crosses the stages as at least the thinnest first
    chunk, at phi = 1, does; its queue factor grows with rho), that TPOT where the engine samples the
    first token from a decode step, and the request overhead; the wait of requests beyond the slots only
    adds. Each bound is
    taken a relative 1e-9 lower, for rounding, as the floors are. ``statistic``: the TTFT figure bounded,
    "mean", "median" or "p90" (serve.slo.ttft_statistic); for a quantile the wait for the token budget is
    left out (its quantiles can be 0). A burst's is the higher of its floors and ``burst_ttft_bound`` (its
    front-end queue and its prefill).
    The front end adds the same to every TTFT; behind it, a front-end-bound loop decodes fewer sequences
    than its clients, bounded as the code says."""
    d = prepared or Deployment(w, calibration, efficiency or Efficiency())
    if w.batching == "static":
        return 0.0, 0.0
    if w.speculation is not None or w.burst:
        # Rounds yielding several tokens a step (speculation): the family's floors hold. A burst has no steady
        # state: the floors, which a burst of one request meets, and its queue at the front end and its
        # prefill (a round with no decodes is a step of the base deployment, whose prefill this bounds).
        ttft, tpot = latency_floors(w, efficiency, calibration, d, statistic)
        if w.burst:
            ttft = max(ttft, burst_ttft_bound(w, d, statistic))
        return ttft * (1 - 1e-9), tpot * (1 - 1e-9)
    engine, arch, pp = d.engine, w.architecture, w.pipeline_parallel
    budget = d.token_budget
    prompt, output = max(1.0, w.prompt_tokens), max(1, w.output_tokens)
    square_mean = lognormal_square_mean(prompt, w.prompt_p90)
    spread = square_mean / (prompt * prompt)
    outputs = w.outputs()
    others = max(0.0, min(float(w.concurrency), float(d.sequence_cap), max(kv_sequences(w, d), 1.0)) - 1)
    context = prompt + outputs.held()  # the steady state's, as ``serving_speed`` takes it
    single_tpot = d.cycle(d.step(1.0, 0.0, context, 0.0), 1.0)
    # A front-end-bound loop (``_frontend_bound``) runs fewer than these: the engine serves the server
    # process's capacity X, so it decodes X x O x TPOT >= X x O x T0 sequences (T0: one decoding alone),
    # and at least that many less the tagged one beside a prompt. Below, phi and the rooms come from
    # ``others`` (the engine-bound loop's bounds, proved as above); the decoding others are the fewer of
    # the two bounds, which holds in either regime.
    fed = max(0.0, frontend_capacity(w.endpoint, prompt, output) * output * single_tpot - 1)
    passed = d.prompt_pass(prompt)
    phi = 0.0
    if passed <= 0:
        phi = 1 - 2 * PHI_TOLERANCE  # no prompt to prefill: the slots only decode
    elif others * passed / output / max(1.0, budget - others) < 1:
        least_tpot = single_tpot
        most = max(1, math.ceil(passed / max(1.0, budget - others)))
        microbatches = d.microbatches(others)
        size = min(max(1.0, budget), passed)  # the scheduler's whole chunk at phi = 0, the most room
        # at the most causal attention a chunk of that size carries (the prompt's last positions): each chunk's
        # pace and the longest one's crossing of the other stages (``chunked_pass``) are at most this step's
        heaviest = d.prompt_attention(passed) - d.prompt_attention(passed - size)
        largest = d.step(others / microbatches, size, context, heaviest)
        rho = others * passed / output / max(1.0, budget - others)
        longest = d.pass_time(largest, most) * queue_wait_factor(rho, spread)
        total = longest + output * least_tpot
        if total > 0:
            phi = max(0.0, output * least_tpot / total * (1 - 1e-9) - 2 * PHI_TOLERANCE)
    decoders = min(others * phi, fed)
    running = 1 + decoders
    microbatches = d.microbatches(running)
    prefill = attention = 0.0
    if passed > 0 and (pp == 1 or running >= pp):  # as many microbatches at every phi >= phi_b
        prefill = min(decoders * passed / output, max(0.0, budget - 1 - others))
        prompt_attention = attention_flops(arch, 0, math.sqrt(square_mean)) * (passed / prompt) ** 2
        attention = prefill / passed * prompt_attention
    # A chunk of infinite size: a mixture's step reads the experts of its decodes alone.
    step = d.step(running / microbatches, prefill / microbatches, context, attention / microbatches, math.inf)
    tpot = d.cycle(step, microbatches)
    busy = min(1.0, others, fed)  # another slot keeps the replica busy
    ttft = busy * step.seconds / 2
    if engine.first_token_from_decode_step:
        ttft += tpot
    alongside = decoders / d.microbatches(decoders)  # the decodes in a chunk's microbatch
    rho = decoders * passed / output / max(1.0, budget - decoders)
    queued = queue_wait_factor(rho, spread) if statistic == "mean" else 1.0

    def bound(prompt: int) -> float:
        own = request_overhead(engine.request_overhead_s, w.endpoint, prompt)
        tokens = d.prompt_pass(prompt)
        if tokens <= 0:
            return own
        means = d.stage_means(
            tokens, max(1.0, budget - alongside), lambda size, attention: d.step(alongside, size, context, attention)
        )
        # chunked_pass with each chunk's step at its stages' mean: its longest chunk crosses the other
        # stages as at least the thinnest first chunk (the least room: phi = 1, and the causal attention of the
        # prompt's first positions, the least any chunk of that size carries) would.
        size = min(max(1.0, budget - others), tokens)
        thinnest = d.step(alongside, size, context, d.prompt_attention(size))
        return own + ((pp - 1) * (thinnest.mean_seconds + d.hop) + means) * queued

    return (ttft + _over_prompts(w, statistic, bound)) * (1 - 1e-9), tpot * (1 - 1e-9)


def _over_prompts(w: ServingWorkload, statistic: str, bound: Callable[[int], float]) -> float:
    """A TTFT ``statistic``'s bound from ``bound``, a bound of one request's TTFT less what every request shares,
    for a prompt of that many tokens, at the prompts the statistic is priced at (``ServingWorkload.ttft_prompts``):
    at a quantile's prompt, its bound; for the mean, the classes' bounds at their shares (a class's TTFT is at
    least its bound, so their mean is at least the bounds')."""
    return sum(share * bound(tokens) for share, tokens in w.ttft_prompts(TTFT_SHARES[statistic]))


def burst_ttft_bound(w: ServingWorkload, d: Deployment, statistic: str) -> float:
    """A lower bound of a burst's TTFT at ``statistic`` ("mean", "median", "p90"), from what the r-th first
    token (counted from 1) waits for in ``serving_load.wave``, stepped or extrapolated past its event budget:
    - the front end: request k reaches the scheduler k x the request overhead G after the burst
      (``burst_speed``) and gets its first token no sooner, so the r-th comes at (r - 1) G or later;
    - the prefill: r first tokens need r prompts' pass of P tokens each (a preempted one recomputes: more),
      each at least ``serving_load.prompt_floor`` (its tokens at the prefill pace and its causal attention; over
      stages at a stage's share), so the r-th comes at r x that floor or later.
    A client's TTFT adds G once more. The nearest-rank quantile of a share s is the bound at rank ceil(s N)
    over N requests; the mean is at least the larger of the two bounds' means over the ranks."""
    gap = request_overhead(d.engine.request_overhead_s, w.endpoint, w.burst_prompt)
    requests = max(1, w.concurrency)
    per_prompt = prompt_floor(d, w.burst_prompt)
    share = TTFT_SHARES[statistic]
    rank = (requests + 1) / 2 if share is None else math.ceil(share * requests)  # the mean rank for the mean
    return max((rank - 1) * gap, rank * per_prompt) + gap


def outruns_front_end(w: ServingWorkload, factor: float = 1.0) -> bool:
    """Whether a steady stream brings each replica at least the requests its server process takes in and streams
    back (``frontend_capacity``, at the prompt and answer ``serving_speed`` prices) times ``factor``: then the
    stream saturates the replica whatever its GPUs do (``serving_speed``'s steady state: a rate at or above the
    lesser of the engine's and the front end's), or, with a ``factor`` below 1 (``plan.evaluate.capacity_factor``),
    outruns that edge of the ceiling, so a planner reads it without solving any state."""
    if w.arrival != "steady" or not w.rate_rps:
        return False
    capacity = frontend_capacity(w.endpoint, max(1.0, w.prompt_tokens), max(1, w.output_tokens))
    return w.replica_rate >= capacity * factor
