"""Serving under the load users run: the front end a request crosses, a burst's wave, a steady stream's queue.

``serving_speed`` prices one forward step of a replica (``Deployment.step``); this module turns steps into
what a client measures under each arrival shape (``serve.arrival``):

- the **front end** (``frontend_seconds``): an OpenAI-compatible server parses the HTTP request, renders the
  chat template, tokenizes the prompt and streams tokens back; a benchmark client's TTFT includes all of it,
  an in-process benchmark (``endpoint: offline``: trtllm-bench, LMDeploy's profile_generation, LLM.generate
  with token ids) none. Figures: vLLM PR #54628 (client TTFT less the server's own TTFT metric) and PR #10635
  (tokenizing a 256K-token prompt takes a few hundred milliseconds). That work is done by one process for
  every request (vLLM's API server: "the API server runs in a single process, utilizing a single CPU", RFC
  #12705, ``--api-server-count`` 1 by default; SGLang's TokenizerManager; trtllm-serve), so requests that
  arrive together leave it one after another: a burst's k-th request reaches the scheduler k front ends
  after the first.
- a **burst** (``wave``; ``burst_speed``, what its clients measure): N requests reach an idle replica at
  once (``vllm bench serve --request-rate inf``, a batch job's start). The scheduler is stepped as vLLM's V1 scheduler runs it: each step first gives one
  token to every running sequence (decodes and partly prefilled prompts, in admission order), then admits
  waiting requests first-come-first-served into what is left of the token budget, while the running
  sequences stay within the engine's cap and the KV cache; a prompt's first token comes at the end of the
  step that completes its prefill. So early requests' decode steps carry later requests' prefill chunks, and
  TTFT grows across the wave. Stretches where only decodes run are priced in one go (equal steps).
- a **steady** stream (``steady_state``): Poisson arrivals at a rate. The running sequences are the rate
  times a request's latency (Little's law), found on the closed loop's steady state; a prompt then waits
  for the token budget the others' prompts use (the M/G/1 wait the closed loop already has), its
  distribution taken as exponential with an atom at zero, P(W > t) = rho exp(-rho t / E[W]) (exact for
  M/M/1; the usual approximation for M/G/1, Kleinrock 1975 vol. 2 sec. 2.7), so a quantile of TTFT is the
  service of the prompt at that quantile plus the wait at it (a sum of quantiles: on the safe side).

The closed loop (``arrival: closed-loop``, today's benchmark clients) stays ``serving_speed``'s own model.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from gpuplan.estimate.performance import attention_flops
from gpuplan.records import evolve, record

if TYPE_CHECKING:  # serving_speed imports this module; its types are only named here
    from gpuplan.estimate.serving_speed import Deployment, ServingSpeed, ServingWorkload

ARRIVALS = ("closed-loop", "steady", "burst")
ENDPOINTS = ("chat", "completions", "offline")

# HTTP parsing, request objects, the chat template and streaming the first chunk back: a client's TTFT less
# the engine's own TTFT metric (vllm:time_to_first_token_seconds), vLLM PR #54628, Qwen2.5-0.5B, 512 in /
# 128 out, two rounds each: /v1/completions 8.4 and 12.0 ms, /v1/chat/completions 12.2 and 11.0 ms.
HTTP_SECONDS = {"completions": (0.0084 + 0.0120) / 2, "chat": (0.0122 + 0.0110) / 2, "offline": 0.0}
# The prompt's tokenization in the server process: vLLM PR #10635, "when dealing with long sequence lengths
# (256K), tokenization can take a few hundred milliseconds" (HF fast tokenizer): about 1 microsecond a token.
TOKENIZE_SECONDS_PER_TOKEN = 1.0e-6
# Streaming a generated token back: the server process's own time per token (incremental detokenization, the
# response chunk, the SSE write). vLLM PR #12287 measured its V1 front end as the bottleneck (Llama-3.2-1B-Instruct
# on an A100, 400 clients, ShareGPT with --ignore-eos, /v1/completions): with the PR (and #12298), 70.84 requests/s
# of 202 output tokens (1,211,959 over 6,000 requests), i.e. 14.12 ms of that process per request; less the front
# end of a 225-token completion (1,350,511 prompt tokens over 6,000), 3.69 ms over 202 tokens. The front end's
# figure is a latency (HTTP_SECONDS), at least the process's own time, so this share is if anything low. (Little's
# law then gives its clients a TPOT of (400 / 70.84 s - TTFT 0.20 s) / 201 = 27.1 ms; the PR measured 26.76 ms.)
STREAM_SECONDS_PER_TOKEN = (1 / 70.84 - (HTTP_SECONDS["completions"] + 225 * TOKENIZE_SECONDS_PER_TOKEN)) / 202
# The share of a steady stream's requests whose TTFT is quoted as "p90".
P90 = 0.9


def frontend_seconds(endpoint: str, prompt_tokens: float) -> float:
    """Time a request spends in the server's front end before and after its first token's pass."""
    if endpoint == "offline":
        return 0.0
    return HTTP_SECONDS[endpoint] + TOKENIZE_SECONDS_PER_TOKEN * prompt_tokens


def frontend_capacity(endpoint: str, prompt_tokens: float, output_tokens: float) -> float:
    """Requests per second one server process takes in and streams back (its front end for each request and
    the stream of each generated token): the most a replica serves, whatever its GPUs; none offline."""
    if endpoint == "offline":
        return math.inf
    return 1 / (frontend_seconds(endpoint, prompt_tokens) + output_tokens * STREAM_SECONDS_PER_TOKEN)


def wait_quantile(mean_wait: float, rho: float, share: float) -> float:
    """The ``share`` quantile of a queueing wait with mean ``mean_wait`` and load ``rho``:
    P(W > t) = rho exp(-rho t / mean_wait) (module docstring), so t = mean_wait / rho x ln(rho / (1 - share))
    when more than 1 - share of arrivals wait at all, else 0."""
    tail = 1 - share
    if mean_wait <= 0 or rho <= tail:
        return 0.0
    if math.isinf(mean_wait):
        return math.inf
    return mean_wait / rho * math.log(rho / tail)


# Scheduler events a wave steps through before the rest is extrapolated: a thousand steps keep one
# wave within tens of milliseconds; bursts the size of an engine's running cap fit whole.
MAX_EVENTS = 1024


def _extrapolated(
    requests: int,
    output: int,
    now: float,
    step: int,
    ttfts: list[tuple[float, int]],
    first_tokens: int,
    tpot_sum: float,
    finished: int,
    events: list[tuple[float, int]],
) -> Wave:
    """The wave cut after ``events``: the requests still without a first token get theirs at the rate
    the second half of the events gave first tokens (the pace the caps allow), in 64 groups; every request
    not finished decodes at the mean TPOT of those that did (or of the last event's step)."""
    start_time, start_tokens = events[len(events) // 2]
    rate = (first_tokens - start_tokens) / (now - start_time) if now > start_time else 0.0
    if rate <= 0:
        rate = first_tokens / now if now > 0 and first_tokens else 1.0 / max(now, 1e-9)
    waiting = requests - first_tokens
    out = list(ttfts)
    groups = min(64, waiting)
    for group in range(groups):
        size = waiting // groups + (1 if group < waiting % groups else 0)
        middle = sum(waiting // groups + (1 if g < waiting % groups else 0) for g in range(group)) + (size + 1) / 2
        out.append((now + middle / rate, size))
    last_step = (events[-1][0] - events[-2][0]) if len(events) > 1 else now
    tpot = tpot_sum / finished if finished else last_step
    mean_tpot = tpot if output > 1 else 0.0
    makespan = now + waiting / rate + (output - 1) * tpot
    return Wave(tuple(out), mean_tpot, makespan, step, requests)


# A step's time from (decoding sequences, prefill tokens, the decoders' mean context, the prefill tokens'
# causal attention FLOPs).
StepTime = Callable[[float, float, float, float], float]


@record
class Wave:
    """What a burst of identical requests measures on one replica, times from the burst's arrival."""

    ttfts: tuple[tuple[float, int], ...]  # (TTFT, requests with it), in the order the requests got it
    mean_tpot: float  # per request (its decode time over output - 1 tokens), averaged over requests
    makespan: float  # until the last request's last token
    steps: int  # scheduler steps the wave took
    requests: int
    peak_running: int = 0  # the most sequences running at once (decoding or prefilling)

    def quantile(self, share: float) -> float:
        """The smallest TTFT that at least ``share`` of the requests have (nearest rank)."""
        rank = max(1, math.ceil(share * self.requests))
        for value, count in sorted(self.ttfts):
            rank -= count
            if rank <= 0:
                return value
        return max(value for value, _ in self.ttfts)

    @property
    def mean_ttft(self) -> float:
        return sum(value * count for value, count in self.ttfts) / self.requests


def wave(
    requests: int,
    prompt: int,
    output: int,
    budget: int,
    running_cap: int,
    step_time: StepTime,
    chunk_attention: Callable[[int, int], float],
    admission_gap: float = 0.0,
    first_token_from_decode_step: bool = False,
    max_events: int = MAX_EVENTS,
) -> Wave:
    """A burst of ``requests`` identical requests (``prompt`` tokens in, ``output`` out) on an idle replica
    whose steps carry at most ``budget`` tokens and ``running_cap`` sequences (the engine's cap or the KV
    cache's, whichever is lower); ``step_time`` prices a step, ``chunk_attention(s, e)`` is the causal
    attention FLOPs of a prompt's positions [s, e) (``performance.attention_flops``). Request k
    reaches the scheduler k x ``admission_gap`` after the burst (the front end admits one after another).
    Where the engine samples the first token from a decode step (``first_token_from_decode_step``), the
    prompt's pass stops one token short and the next step, with the prompt's last token, gives it.

    At most ``max_events`` scheduler events are stepped (a planner prices many layouts; a burst may be a
    million requests): past them the wave has long reached the pace its caps allow, and the requests still
    waiting get their first tokens at the rate of the events' second half, each then decoding at the mean
    TPOT of those done (``_extrapolated``)."""
    passed = prompt - 1 if first_token_from_decode_step else prompt
    running_cap = max(1, running_cap)
    budget = max(1, budget)
    now, step = 0.0, 0
    arrived, admitted, finished = 0, 0, 0
    prefilling: list[int] = []  # tokens done of each admitted, partly prefilled prompt (admission order)
    # Decoding cohorts: (requests, step that gave their first token, its time); a sequence decodes one token
    # per step, so its tokens so far follow from the step counter.
    cohorts: deque[tuple[int, int, float]] = deque()
    decoders, start_sum = 0, 0
    ttfts: list[tuple[float, int]] = []
    tpot_sum = 0.0
    peak = 0

    def arrival(k: int) -> float:
        return k * admission_gap

    events: list[tuple[float, int]] = []  # (time, requests with a first token) after each event
    first_tokens = 0
    while finished < requests:
        events.append((now, first_tokens))
        if len(events) > max_events:
            cut = _extrapolated(requests, output, now, step, ttfts, first_tokens, tpot_sum, finished, events)
            return evolve(cut, peak_running=peak)  # the pace its caps allow was reached by then
        while arrived < requests and arrival(arrived) <= now:
            arrived += 1
        running = decoders + len(prefilling)
        can_admit = arrived > admitted and running < running_cap
        if not prefilling and not can_admit:
            if decoders == 0:  # idle until the next request reaches the scheduler
                now = arrival(arrived)
                continue
            # Only decodes until the first cohort finishes (or, with room, the next arrival): equal steps.
            count, first_step, first_time = cohorts[0]
            stretch = first_step + output - 1 - step
            mean_context = prompt + step - start_sum / decoders + stretch / 2
            seconds = step_time(decoders, 0.0, mean_context, 0.0)
            if arrived < requests and running < running_cap:
                stretch = max(1, min(stretch, math.ceil((arrival(arrived) - now) / seconds)))
            now += stretch * seconds
            step += stretch
            while cohorts and cohorts[0][1] + output - 1 <= step:
                count, first_step, first_time = cohorts.popleft()
                decoders -= count
                start_sum -= count * first_step
                finished += count
                end = now - (step - (first_step + output - 1)) * seconds
                tpot_sum += count * (end - first_time) / (output - 1)
            continue
        # One mixed step: every running sequence's token first, then new prompts into what is left.
        room = budget - decoders
        chunks: list[tuple[int, int]] = []  # (prompt index in prefilling, tokens this step)
        for index, done in enumerate(prefilling):
            if room <= 0:
                break
            take = min(passed - done, room)
            chunks.append((index, take))
            room -= take
        new = 0
        while room > 0 and admitted + new < arrived and decoders + len(prefilling) + new < running_cap:
            take = min(passed, room)
            prefilling.append(0)
            chunks.append((len(prefilling) - 1, take))
            room -= take
            new += 1
        admitted += new
        peak = max(peak, decoders + len(prefilling))
        tokens = sum(take for _, take in chunks)
        attention = sum(chunk_attention(prefilling[i], prefilling[i] + take) for i, take in chunks)
        context = prompt + step - start_sum / decoders if decoders else 0.0
        seconds = step_time(decoders, tokens, context, attention)
        now += seconds
        step += 1
        for index, take in chunks:
            prefilling[index] += take
        complete = sum(1 for done in prefilling if done >= passed)
        prefilling = [done for done in prefilling if done < passed]
        while cohorts and cohorts[0][1] + output - 1 <= step:
            count, first_step, first_time = cohorts.popleft()
            decoders -= count
            start_sum -= count * first_step
            finished += count
            tpot_sum += count * (now - first_time) / (output - 1)
        if complete:
            if first_token_from_decode_step:
                # The prompt's last token rides the next step as a decode: its first token comes then.
                first_seconds = step_time(decoders + complete, 0.0, prompt, 0.0)
                first_time, first_step = now + first_seconds, step + 1
            else:
                first_time, first_step = now, step
            ttfts.append((first_time, complete))
            first_tokens += complete
            if output <= 1:
                finished += complete
            else:
                cohorts.append((complete, first_step, first_time))
                decoders += complete
                start_sum += complete * first_step
    mean_tpot = tpot_sum / requests if output > 1 else 0.0
    return Wave(tuple(ttfts), mean_tpot, now, step, requests, peak)


Z90 = 1.2816  # standard normal 90th percentile, for the lognormal prompt-length distribution


def prompt_square_mean(mean: float, p90: float) -> float:
    """E[P^2] of a lognormal prompt length through its mean and 90th percentile (attention is quadratic).

    ln(p90 / mean) = z90 sigma - sigma^2 / 2 gives sigma; E[P^2] = mean^2 exp(sigma^2). A p90 beyond the
    lognormal's reach (more than 2.27 x the mean) is held at the widest lognormal.
    """
    ratio = math.log(max(p90, mean) / mean) if mean > 0 else 0.0
    root = Z90 * Z90 - 2 * ratio
    sigma = Z90 - math.sqrt(root) if root > 0 else Z90
    return mean * mean * math.exp(sigma * sigma)


def queue_wait_factor(rho: float, spread: float) -> float:
    """Prefill time over service time for a prompt that queues for the token budget: 1 + the mean wait.

    Pollaczek-Khinchine (M/G/1): wait = rho / (1 - rho) x E[S^2] / (2 E[S]); a prompt's service grows
    with its length, so E[S^2] / E[S]^2 = E[P^2] / E[P]^2 = ``spread`` (1 for a fixed length,
    exp(sigma^2) for a lognormal). Without bound as rho reaches 1."""
    return math.inf if rho >= 1 else 1 + rho * spread / (2 * (1 - rho))


class _Served(Protocol):
    @property
    def requests_per_s(self) -> float: ...


S = TypeVar("S", bound=_Served)


def state_at_rate(state_at: Callable[[float], S], most: float, rate: float) -> tuple[S, float]:
    """The steady state whose throughput is ``rate`` (below what ``most`` running sequences complete), and
    its running sequences: bisection on log(slots), to 0.1% of the slots (some 25 root solves). The
    throughput grows with the slots (Little's law on a closed loop)."""
    low, high = math.log(1e-6), math.log(most)
    state = state_at(most)
    while high - low > 1e-3:
        middle = (low + high) / 2
        candidate = state_at(math.exp(middle))
        if candidate.requests_per_s < rate:
            low = middle
        else:
            high, state = middle, candidate
    return state, math.exp(high)


@record
class LoadTerms:
    """What every load shape prices its requests with: the caps on running sequences (by name), the tokens a
    request yields and the decode steps that yield them, the per-request overhead (the engine's and the
    front end's), the server process's capacity (requests per second) and the maker of the result, which
    carries the figures every shape shares."""

    caps: dict[str, float]
    output: int
    steps: float
    overhead: float
    capacity: float
    make: Callable[..., ServingSpeed]


def burst_speed(w: ServingWorkload, d: Deployment, prompt: float, terms: LoadTerms) -> ServingSpeed:
    """``w.concurrency`` requests per replica at once on an idle replica (``serving_load.wave``): the
    scheduler stepped with this deployment's steps; the server's front end admits one request after
    another, its own time and the engine's request overhead apart (``serving_load.frontend_seconds``: one
    process does that work for every request), and the running sequences stay within the engine's cap
    and the sequences whose whole context the KV cache holds. The wave ends no sooner than that process
    has taken every request in and streamed every token back (``terms.capacity`` requests per second)."""
    caps, output, steps, overhead = terms.caps, terms.output, terms.steps, terms.overhead
    pp = d.w.pipeline_parallel

    def step_time(decoders: float, prefill: float, context: float, attention: float) -> float:
        microbatches = min(pp, max(1.0, decoders))
        step = d.step(decoders / microbatches, prefill / microbatches, context, attention / microbatches)
        return d.cycle(step, microbatches) if decoders else d.pass_time(step, 1)

    whole = d.kv_read(prompt + output)
    kv_slots = w.kv_capacity_bytes / whole if whole > 0 else math.inf
    cap = max(1, int(min(caps["engine"], kv_slots)))
    requests = max(1, w.concurrency)
    mean_prompt = max(1, round(prompt))
    result = wave(
        requests,
        mean_prompt,
        max(1, round(steps)),  # decode steps (speculative rounds yield more than a token each)
        d.token_budget,
        cap,
        step_time,
        lambda start, end: attention_flops(w.architecture, start, end),
        admission_gap=overhead,
        first_token_from_decode_step=d.engine.first_token_from_decode_step,
    )
    makespan = max(result.makespan, requests / terms.capacity)
    decode = d.step(min(requests, cap), 0, prompt + output / 2, 0.0)
    limited_by = "concurrency" if requests <= cap else ("engine" if caps["engine"] <= kv_slots else "kv-cache")
    if makespan > result.makespan:  # the server process, not the GPUs, set the wave's end
        limited_by = "front-end"
    duration = makespan + overhead  # from the first request's send to the last token, as a client times the run
    return terms.make(
        ttft_s=result.mean_ttft + overhead,
        tpot_s=result.mean_tpot * steps / output,
        tokens_per_s=w.replicas * requests * output / duration,
        decode_bound="memory" if decode.memory_bound else "compute",
        running=float(result.peak_running),
        limited_by=limited_by,
        decode_bytes_per_step=decode.bytes_read,
        ttft_median_s=result.quantile(0.5) + overhead,
        ttft_p90_s=result.quantile(P90) + overhead,
        requests_per_s=w.replicas * requests / duration,
        duration_s=duration,
        # the k-th request reaches the scheduler k turns at the front end after the first
        frontend_wait_s=(requests - 1) / 2 * overhead,
    )
