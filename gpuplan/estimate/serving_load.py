"""Serving under the load users run: the front end a request crosses, a burst's wave, a steady stream's queue.

``serving_speed`` prices one forward step of a replica (``Deployment.step``); this module turns steps into
what a client measures under each arrival shape (``serve.arrival``):

- the **front end** (``gpuplan.estimate.frontend``): an OpenAI-compatible server parses the HTTP request, renders the
  chat template, tokenizes the prompt and streams tokens back; a benchmark client's TTFT includes all of it,
  an in-process benchmark (``endpoint: offline``: trtllm-bench, LMDeploy's profile_generation, LLM.generate
  with token ids) none. Figures: vLLM PR #54628 (client TTFT less the server's own TTFT metric) and PR #10635
  (tokenizing a 256K-token prompt takes a few hundred milliseconds). That work is done by one process for
  every request (vLLM's API server: "the API server runs in a single process, utilizing a single CPU", RFC
  #12705, ``--api-server-count`` 1 by default; SGLang's TokenizerManager; trtllm-serve), so requests that
  arrive together leave it one after another: a burst's k-th request reaches the scheduler k front ends
  after the first.
- a **burst** (``wave``; ``burst_speed``, what its clients measure): N requests reach an idle replica at
  once (``vllm bench serve --request-rate inf``, a batch job's start). The scheduler is stepped as vLLM's V1 scheduler
  runs it: each step first gives one token to every running sequence (decodes and partly prefilled prompts, in
  admission order), then admits waiting requests first-come-first-served into what is left of the token budget, while
  the running sequences stay within the engine's cap and the KV cache; a prompt's first token comes at the end of the
  step that completes its prefill. vLLM admits a request while the cache has room for its prompt's next chunk and
  preempts the last running sequence when decodes outgrow the cache (it recomputes later, from what the prefix cache
  still holds of it); other engines run the sequences that fit whole. So early requests' decode steps carry later
  requests' prefill chunks (SGLang instead runs a step of prompts alone whenever it can form one, the decodes
  waiting), and TTFT grows across the wave. Stretches where only decodes run are priced in one go (equal steps).
- a **steady** stream (``steady_state``): Poisson arrivals at a rate. The running sequences are the rate
  times a request's latency (Little's law), found on the closed loop's steady state; a prompt then waits
  for the token budget the others' prompts use (the M/G/1 wait the closed loop already has), its
  distribution taken as exponential with an atom at zero, P(W > t) = rho exp(-rho t / E[W]) (exact for
  M/M/1; the usual approximation for M/G/1, Kleinrock 1975 vol. 2 sec. 2.7), so a quantile of TTFT is the
  service of the prompt at that quantile plus the wait at it (a sum of quantiles: on the safe side).

The closed loop (``arrival: closed-loop``, today's benchmark clients) stays ``serving_speed``'s own model.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from gpuplan.estimate.lengths import MEDIAN, P90, Lengths, fixed, held_tokens, whole_steps
from gpuplan.estimate.performance import attention_flops
from gpuplan.records import evolve, record

if TYPE_CHECKING:  # serving_speed imports this module; its types are only named here
    from gpuplan.estimate.serving_speed import Deployment, SteadyState
    from gpuplan.estimate.serving_workload import ServingSpeed, ServingWorkload

ARRIVALS = ("closed-loop", "steady", "burst")
ENDPOINTS = ("chat", "completions", "offline")

# The nearest-rank share of each TTFT statistic (serve.slo.ttft_statistic); None: the mean.
TTFT_SHARES: dict[str, float | None] = {"mean": None, "median": MEDIAN, "p90": P90}


def prompt_floor(d: Deployment, prompt: float) -> float:
    """The least time the wave's steps spend on one prompt's pass, however chunked and whatever rides beside it: its
    tokens at ``prefill_pace``, and its causal attention, which ``Deployment.step`` adds outside the rooflines,
    linear in a chunk's attention (the chunks' sum to the prompt's): seven eighths of a 130,816-token pass of
    Llama 3.1 8B on an H100. Over stages the attention adds to each microbatch's stage step, and a cycle of m
    microbatches at least pp >= m times their stages' mean (``Deployment.cycle``, ``pass_time``): at least the
    whole prompt's attention at one stage's share of the heads, as on one stage."""
    passed = d.prompt_pass(prompt)
    return passed * prefill_pace(d) + d.prompt_attention(passed) * d.heads_share / d.attention_rate


def prefill_pace(d: Deployment) -> float:
    """The least time a prompt token takes in any step the wave prices: an idle step of the whole token budget at
    its stages' mean, over the budget. A step's time per prompt token falls with its tokens (fixed costs, weights
    read once, expert weights touched more slowly than tokens, collectives' latency plus a linear term, a roofline
    that scales with its terms), and decodes or attention beside them only add. On one stage that is the step
    itself. Over pp stages a step of m <= pp microbatches, x <= budget / m prompt tokens each, is a cycle of at
    least pp x the stages' mean of one (``Deployment.cycle``), and a step of prompts alone at least its slowest
    stage's time (``wave``'s ``prefill_follows``), itself at least the stages' mean: its tokens take at least
    mean(step(x)) / x >= mean(step(budget)) / budget each: about a stage's share of a one-stage replica's pace, a
    floor that holds however the scheduler splits the microbatches."""
    budget = max(1, d.token_budget)
    return d.step(0.0, float(budget), 0.0, 0.0).mean_seconds / budget


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


# Whole chunks of a prompt (alone or beside decodes) priced in one go rather than stepped (``wave``): from two. A step
# is linear in its attention but for a pipelined cycle that changes term (a review saw +1e-3 of a TTFT, never less).
STRETCH_CHUNKS = 2
# Scheduler events a wave steps through before the rest is extrapolated: a thousand steps keep one
# wave within tens of milliseconds; bursts the size of an engine's running cap fit whole.
MAX_EVENTS = 1024
# The most the event budget is raised to step a few long prompts to their first tokens (``wave``): a few
# tenths of a second of stepping.
MAX_RAISED_EVENTS = 16 * MAX_EVENTS
# First tokens a wave has before it is cut and the rest extrapolated at their pace (``wave``).
FIRST_TOKENS_BEFORE_CUT = 4


def _extrapolated(
    requests: int,
    longest: int,
    now: float,
    steps: int,  # taken so far
    ttfts: list[tuple[float, int]],
    first_tokens: int,
    tpot_sum: float,
    tpot_count: int,
    events: list[tuple[float, int]],
    decode_step: float,
    admission_gap: float,
    prompt_floor_s: float,
) -> Wave:
    """The wave cut after ``events``: the requests still without a first token get theirs at the rate
    the second half of the events gave first tokens (the pace the caps allow), in 64 groups, a group no
    sooner than its last request reaches the scheduler (request k at k x ``admission_gap``; the requests
    get first tokens in the order they arrive, so those waiting are the last ones) nor than the prompts of
    every request up to it take at ``prompt_floor_s`` each (``prompt_floor``; 0 where none is claimed); every request
    not finished decodes at the mean TPOT of those that did (or, none done yet, at ``decode_step``: a step
    of the sequences running then, decoding alone), and the wave ends when the last of them has made the
    ``longest`` output."""
    start_time, start_tokens = events[len(events) // 2]
    rate = (first_tokens - start_tokens) / (now - start_time) if now > start_time else 0.0
    if rate <= 0:
        rate = first_tokens / now if now > 0 and first_tokens else 1.0 / max(now, 1e-9)
    waiting = requests - first_tokens
    out = list(ttfts)
    groups = min(64, waiting)
    before = 0  # waiting requests in the groups so far
    last_first = now
    for group in range(groups):
        size = waiting // groups + (1 if group < waiting % groups else 0)
        last = first_tokens + before + size  # the group's last request, counted from 1
        last_first = max(now + (before + (size + 1) / 2) / rate, (last - 1) * admission_gap, last * prompt_floor_s)
        out.append((last_first, size))
        before += size
    tpot = tpot_sum / tpot_count if tpot_count else decode_step
    mean_tpot = tpot if longest > 1 else 0.0
    makespan = max(now + waiting / rate, last_first) + (longest - 1) * tpot
    return Wave(tuple(out), mean_tpot, makespan, steps, requests)


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
    preempted: int = 0  # sequences the scheduler preempted for want of KV cache (each recomputed later)
    kv_bound: bool = False  # the KV cache, not a sequence cap, held a request back at some step

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


class _Sequences:
    """The running and waiting sequences of a wave, in the scheduler's order, and the KV cache they hold.

    Running: decoding cohorts (sequences of one output length that produce a token every step, grouped by
    the step they would have given their first token at: ``first_step``), then partly prefilled prompts,
    both in admission order (prompts complete in the order they were admitted, so every prefill was
    admitted after every decode). A sequence that produced ``g`` tokens holds ``prompt + g - 1`` tokens of
    KV cache. Waiting: preempted sequences first (vLLM's ``waiting.prepend_request``), then requests that
    reached the scheduler and were not yet admitted.

    A cohort is ``[count, first_step, first_time, output]``, shared by two views: ``running``, every cohort
    in admission order (the scheduler preempts from its end), and ``lines``, the cohorts of each output
    length in admission order, which finish in that order (their last step is ``first_step + output - 1``)
    unless a recomputed sequence joined a line late. A cohort that finished or was preempted whole is
    emptied (count 0) and dropped from a view when it reaches the end that view is read from.

    A preempted sequence's blocks go back to the free queue but keep their prefix-cache hashes (vLLM V1's
    prefix caching is on by default): they are evicted only once the blocks
    freed before them are used up (``KVCacheManager.free`` queues them last; ``FreeKVCacheBlockQueue``
    hands out the oldest first), so a sequence re-admitted soon finds most of its tokens cached and
    recomputes only what was evicted, and at least its last token (``num_computed_tokens`` stays below
    ``num_tokens``)."""

    def __init__(self, prompt: int, passed: int, kv_tokens: float) -> None:
        self.prompt, self.passed, self.kv_tokens = prompt, passed, kv_tokens
        self.running: deque[list[Any]] = deque()
        self.lines: dict[int, deque[list[Any]]] = {}
        self.out_of_order: set[int] = set()  # lines a recomputed sequence joined ahead of its place
        self.decoders, self.start_sum = 0, 0
        # [done, target, tokens made before, first token's time, output]
        self.prefilling: list[list[Any]] = []
        # Preempted: (tokens made, first token's time, KV tokens it held, free tokens queued before them,
        # ``allocated`` then, output).
        self.resumed: deque[tuple[int, float, float, float, float, int]] = deque()
        self.allocated = 0.0  # tokens taken from the free queue so far (new blocks and prefix-cache hits)
        # KV tokens the partly prefilled prompts held as this step began (this step's chunks and prefix-cache
        # hits are counted apart until it ends)
        self.prefill_held = 0.0
        self.preempted = 0

    def add_cohort(self, count: int, first_step: int, first_time: float, output: int) -> None:
        cohort = [count, first_step, first_time, output]
        self.running.append(cohort)
        line = self.lines.get(output)
        if line is None:
            line = self.lines[output] = deque()
        while line and not line[-1][0]:
            line.pop()
        if line and first_step < line[-1][1]:
            self.out_of_order.add(output)
        line.append(cohort)
        self.decoders += count
        self.start_sum += count * first_step

    def earliest_end(self) -> int:
        """The step at which the first running cohort to finish makes its last token."""
        ends = []
        for output, line in self.lines.items():
            while line and not line[0][0]:
                line.popleft()
            if line:
                first = min(c[1] for c in line if c[0]) if output in self.out_of_order else line[0][1]
                ends.append(first + output - 1)
        return min(ends)

    def pop_finished(self, step: int) -> list[tuple[int, int, float, int]]:
        """The cohorts whose last token came by ``step`` (count, first_step, first_time, output), taken out."""
        done: list[list[Any]] = []
        for output, line in self.lines.items():
            last_first = step - output + 1
            if output not in self.out_of_order:
                while line and (not line[0][0] or line[0][1] <= last_first):
                    cohort = line.popleft()
                    if cohort[0]:
                        done.append(cohort)
            elif any(c[0] and c[1] <= last_first for c in line):
                done.extend(c for c in line if c[0] and c[1] <= last_first)
                kept = [c for c in line if c[0] and c[1] > last_first]
                line.clear()
                line.extend(kept)
                if all(a[1] <= b[1] for a, b in itertools.pairwise(kept)):
                    self.out_of_order.discard(output)
        out = []
        for cohort in done:
            count, first_step, first_time, output = cohort
            cohort[0] = 0
            self.decoders -= count
            self.start_sum -= count * first_step
            out.append((count, first_step, first_time, output))
        running = self.running
        while running and not running[0][0]:  # finished at the front: no longer read, so no longer kept
            running.popleft()
        return out

    def last_running(self) -> list[Any] | None:
        """The cohort admitted last that still runs, or None."""
        running = self.running
        while running and not running[-1][0]:
            running.pop()
        return running[-1] if running else None

    def free(self, step: int) -> float:
        """KV tokens free before this step's allocations (``step`` is the last step taken)."""
        held = self.decoders * (self.prompt + step) - self.start_sum + self.prefill_held
        return self.kv_tokens - held

    def preempt_last(self, step: int) -> int:
        """Preempt the last running sequence (vLLM's ``self.running.pop()``): its KV freed, it waits at the
        front to recompute its prompt and the tokens it made; how many decoders that took (0 or 1)."""
        self.preempted += 1
        ahead = self.free(step)
        if self.prefilling:
            done, _, made, first, output = self.prefilling.pop()
            self.prefill_held -= done
            # a fresh prompt (made 0) starts over as a fresh one
            self.resumed.appendleft((int(made), first, done, ahead, self.allocated, output))
            return 0
        cohort = self.last_running()
        assert cohort is not None, "a decode to preempt"
        _, first_step, first_time, output = cohort
        cohort[0] -= 1
        self.decoders -= 1
        self.start_sum -= first_step
        held = self.prompt + step - first_step
        self.resumed.appendleft((step - first_step + 1, first_time, held, ahead, self.allocated, output))
        return 1

    def preempt_for_decodes(self, step: int) -> None:
        """Preempt from the end until this step's decodes fit (a token each): the prompts still prefilling
        first (they come last), then decoders, the last cohort's a batch at a time."""
        free = self.free(step)
        while free < self.decoders and self.prefilling:
            self.preempt_last(step)
            free = self.free(step)
        while free < self.decoders:
            cohort = self.last_running()
            if cohort is None:
                break
            holds = self.prompt + step - cohort[1]  # each frees its KV and its decode slot
            short = self.decoders - free
            for _ in range(min(cohort[0], math.ceil(short / (holds + 1)))):
                self.preempt_last(step)
            free = self.free(step)

    def next_need(self, arrived_waiting: int, pending: float) -> tuple[int, int] | None:
        """(tokens the prefix cache still holds, tokens its pass must reach) of the next waiting sequence,
        or None when none waits; ``pending``: tokens this step already took (its decodes' slots, earlier
        chunks), which came off the free queue before this lookup."""
        if self.resumed:
            made, _, held, ahead, at, _ = self.resumed[0]
            target = self.prompt + made if made else self.passed
            evicted = max(0.0, self.allocated + pending - at - ahead)
            return int(min(max(0.0, held - evicted), target - 1)), target
        return (0, self.passed) if arrived_waiting > 0 else None


def wave(
    requests: int,
    prompt: int,
    output: int | Lengths,
    budget: int,
    running_cap: int,
    step_time: StepTime,
    chunk_attention: Callable[[int, int], float],
    admission_gap: float = 0.0,
    first_token_from_decode_step: bool = False,
    max_events: int = MAX_EVENTS,
    kv_tokens: float = math.inf,
    mixes_prefill: bool = True,
    prompt_floor_s: float = 0.0,
    prefill_follows: StepTime | None = None,
) -> Wave:
    """A burst of ``requests`` requests (``prompt`` tokens in, ``output`` out: a number, or the lengths the
    lengths the burst draws, ``Lengths.drawn``) on an idle replica whose steps carry at most ``budget`` tokens and
    ``running_cap`` sequences; ``step_time`` prices a step, ``chunk_attention(s, e)`` is the causal attention FLOPs of
    a prompt's positions [s, e) (``performance.attention_flops``). Request k reaches the scheduler k x
    ``admission_gap`` after the burst (the front end admits one after another). Where the engine samples the first
    token from a decode step (``first_token_from_decode_step``), the prompt's pass stops one token short and the next
    step, with the prompt's last token, gives it.

    ``kv_tokens``: the tokens the KV cache holds, where the engine allocates it as tokens arrive (vLLM's V1
    scheduler, ``Scheduler.schedule``): a waiting request is admitted while the cache has room for its
    prompt's chunk, so more requests run than whole sequences would fit; when a decode finds no room, the
    scheduler preempts the last running sequence (``self.running.pop()``: its KV freed, the request put back
    at the front of the queue) until the decodes fit, admits nothing that step, and a preempted request
    recomputes its prompt and the tokens it made before it decodes on (recompute, as V1 does; its TTFT stays
    its first). Infinite: an engine that reserves whole sequences, whose cap ``running_cap`` then carries.

    ``mixes_prefill`` False: the engine runs a step of prompts alone whenever it can form one, and decodes
    only when it cannot (SGLang: ``Scheduler.get_next_batch_to_run``, "Run prefill first if possible";
    prompts ride decode steps only with ``--enable-mixed-chunk``, off by default). The running sequences
    make no token in such a step: ``step`` counts the decode steps, the wave's ``steps`` every step.

    At most ``max_events`` scheduler events are stepped, more only until a few requests have first tokens
    (``FIRST_TOKENS_BEFORE_CUT``, at most ``MAX_RAISED_EVENTS``; a planner prices many layouts, a burst may be a
    million requests): past them the wave has long reached the pace its caps allow, and the requests still
    waiting get their first tokens at the rate of the events' second half, no sooner than they arrive nor
    than their prompts take at ``prompt_floor_s`` seconds a prompt (``prompt_floor``), each then decoding
    at the mean TPOT of those done (``_extrapolated``).

    ``prefill_follows``: the pace of steps of prompts alone through a pipeline of stages (its slowest stage's
    time: the next chunk enters a stage as the last one leaves it, GPipe, Huang et al. 2019), where each such
    step's crossing of the other stages (``step_time`` less the pace: its drain) overlaps the steps after it.
    Steps that take the same time on every stage end a pipeline after the sum of their times and the longest
    one's drain, whatever their order (a proportionate flow shop: C = sum p + (m - 1) max p, Pinedo,
    Scheduling, sec. 6.1): a prompt's first token waits for the largest drain of the run so far, and so does a
    step of another kind. None: ``step_time``, one stage, which overlaps nothing."""
    drawn = (output if isinstance(output, Lengths) else fixed(output)).drawn(requests)
    drain = 0.0  # what the last step of prompts alone still takes to cross the stages
    longest = drawn.longest  # the longest any request of this burst makes
    alike = len(drawn.table) == 1  # one length: no draw per request
    passed = prompt - 1 if first_token_from_decode_step else prompt
    running_cap = max(1, running_cap)
    budget = max(1, budget)
    now, step = 0.0, 0
    arrived, admitted, finished = 0, 0, 0
    # An engine starts only when one whole sequence fits its cache (serving.kv_layout): never less.
    seqs = _Sequences(prompt, passed, max(kv_tokens, prompt + longest))
    prefilling = seqs.prefilling
    steps_taken = 0  # every step; ``step`` counts the decode steps (the same where prompts ride them)
    ttfts: list[tuple[float, int]] = []
    tpot_sum, tpot_count = 0.0, 0  # over the finished requests with a TPOT (more than one token)
    last_first = 0.0  # the latest first token of a one-token answer (it may come a step after its prompt)
    peak = 0
    kv_bound = False

    def arrival(k: int) -> float:
        return k * admission_gap

    def finish_cohorts(end: float, seconds: float) -> None:
        """Take out the cohorts done by ``step`` (its steps ``seconds`` each, ending at ``end``)."""
        nonlocal finished, tpot_sum, tpot_count
        for count, first_step, first_time, made in seqs.pop_finished(step):
            finished += count
            tpot_count += count
            last_token = end - (step - (first_step + made - 1)) * seconds
            tpot_sum += count * (last_token - first_time) / (made - 1)

    events: list[tuple[float, int]] = []  # (time, requests with a first token) after each event
    first_tokens = 0
    while finished < requests:
        events.append((now, first_tokens))
        # A wave cut before a few requests have their first tokens would extrapolate a pace it never saw: past
        # ``max_events`` it goes on until FIRST_TOKENS_BEFORE_CUT have theirs, at most to MAX_RAISED_EVENTS (a
        # prompt alone, or beside decodes alone, takes a few events whatever its length: its chunks are priced
        # in stretches, below; several prompts at once are stepped chunk by chunk, which the bound stops).
        if len(events) > max_events and (first_tokens >= FIRST_TOKENS_BEFORE_CUT or len(events) > MAX_RAISED_EVENTS):
            now, drain = now + drain, 0.0
            pace = step_time(max(1, seqs.decoders + len(prefilling)), 0.0, prompt, 0.0)  # none done: a decode step
            cut = _extrapolated(
                requests,
                longest,
                now,
                steps_taken,
                ttfts,
                first_tokens,
                tpot_sum,
                tpot_count,
                events,
                pace,
                admission_gap,
                prompt_floor_s,
            )
            return evolve(cut, peak_running=peak, preempted=seqs.preempted, kv_bound=kv_bound)
        while arrived < requests and arrival(arrived) <= now:
            arrived += 1
        decoders = seqs.decoders
        running = decoders + len(prefilling)
        need = seqs.next_need(arrived - admitted, decoders)
        free = seqs.free(step)
        room_for_next = need is not None and free - decoders >= need[0] + min(need[1] - need[0], budget - decoders)
        can_admit = need is not None and running < running_cap and room_for_next
        # (with prompts still prefilling, the mixed step below says whether the cache held one back)
        kv_bound = kv_bound or (not prefilling and need is not None and running < running_cap and not room_for_next)
        if not prefilling and not can_admit and free >= decoders:
            if decoders == 0:  # idle until the next request reaches the scheduler
                now, drain = max(now + drain, arrival(arrived)), 0.0
                continue
            now, drain = now + drain, 0.0
            # Only decodes until the first cohort finishes, the cache fills (each step takes a token per
            # decoder) or, with room, the next arrival: equal steps.
            stretch = seqs.earliest_end() - step
            if math.isfinite(free):
                stretch = max(1, min(stretch, int(free // decoders)))
            mean_context = prompt + step - seqs.start_sum / decoders + stretch / 2
            seconds = step_time(decoders, 0.0, mean_context, 0.0)
            if arrived < requests and running < running_cap:
                stretch = max(1, min(stretch, math.ceil((arrival(arrived) - now) / seconds)))
            now += stretch * seconds
            step += stretch
            steps_taken += stretch
            seqs.allocated += decoders * stretch
            finish_cohorts(now, seconds)
            continue
        if len(prefilling) == 1 and not seqs.resumed:
            # One prompt, alone or beside decodes: while its chunks take the whole room the decodes leave
            # (``budget`` alone), no request is admitted, waiting or not (none is left), and while no decode
            # ends nor outgrows the cache, its steps are equal but for their attention, which a step's time is
            # linear in (``Deployment.step`` adds it outside the rooflines), and the decodes' growing context:
            # priced in one go, as decode stretches are, the decodes' context at the stretch's middle (where
            # prompts do not ride decode steps, SGLang, the running sequences wait through its equal steps). A long
            # prompt at a small budget is then not stepped chunk by chunk (a million-token prompt alone at a budget
            # of 1 took seconds; 2 tokens a step beside a decode over 8,000-token prompts, or 16 on SGLang over
            # 131,072-token ones, kept a plan for minutes). The stretch is one event: a wave is cut later.
            riding = seqs.decoders if mixes_prefill else 0  # the decodes in the prompt's steps
            room = budget - riding
            start, target = int(prefilling[0][0]), int(prefilling[0][1])
            stretch = (target - start) // room - 1 if room > 0 else 0  # the last chunk is stepped as usual
            if riding:
                stretch = min(stretch, seqs.earliest_end() - step - 1)
            free = seqs.free(step)
            if math.isfinite(free):
                stretch = min(stretch, int(free // (riding + room)))
            if stretch >= STRETCH_CHUNKS:
                context = prompt + step - seqs.start_sum / riding + (stretch - 1) / 2 if riding else 0.0
                plain = step_time(riding, float(room), context, 0.0)
                attention = chunk_attention(start, start + stretch * room)
                if riding or prefill_follows is None:
                    now += drain + stretch * plain + (step_time(riding, float(room), context, attention) - plain)
                    drain = 0.0
                else:  # prompts alone through stages: at the pipeline's pace, the last (largest) chunk's drain after
                    pace = prefill_follows(0, float(room), context, 0.0)
                    now += (stretch - 1) * pace + prefill_follows(0, float(room), context, attention)
                    last = chunk_attention(start + (stretch - 1) * room, start + stretch * room)
                    drain = max(
                        drain, step_time(0, float(room), context, last) - prefill_follows(0, float(room), context, last)
                    )
                steps_taken += stretch
                if mixes_prefill:
                    step += stretch
                prefilling[0][0] = start + stretch * room
                seqs.allocated += stretch * (riding + room)
                seqs.prefill_held = prefilling[0][0]
                continue
        # One step with prompts: where they ride decode steps, every running sequence's token first
        # (preempting from the end where the cache has no room for them), then prompts into what is left;
        # where they do not, the prompts alone.
        preempted_before = seqs.preempted
        prefill_only = not mixes_prefill and (bool(prefilling) or can_admit)
        if not prefill_only:
            seqs.preempt_for_decodes(step)
        decoding = 0 if prefill_only else seqs.decoders
        room = budget - decoding
        chunks: list[tuple[int, int]] = []  # (index in prefilling, tokens this step)
        taken = decoding  # KV tokens this step takes: a slot per decode, the chunks, prefix-cache hits
        index = 0
        while index < len(prefilling) and room > 0:
            take = int(min(prefilling[index][1] - prefilling[index][0], room))
            if seqs.free(step) - taken < take:
                seqs.preempt_last(step)  # the last one, this one included: then no more this step
                decoding = 0 if prefill_only else seqs.decoders
                taken = decoding + sum(t for _, t in chunks)
                continue
            chunks.append((index, take))
            taken += take
            room -= take
            index += 1
        if seqs.preempted == preempted_before:  # vLLM admits nothing in a step that preempted
            while room > 0 and len(prefilling) + seqs.decoders < running_cap:
                need = seqs.next_need(arrived - admitted, taken)
                if need is None:
                    break
                hit, target = need
                take = min(target - hit, room)
                if seqs.free(step) - taken < hit + take:
                    kv_bound = True
                    break
                if seqs.resumed:
                    made, first, *_, length = seqs.resumed.popleft()
                    prefilling.append([hit, target, made, first, length])
                else:
                    prefilling.append([0, target, 0, math.nan, longest if alike else drawn.of(admitted)])
                    admitted += 1
                chunks.append((len(prefilling) - 1, take))
                taken += hit + take
                room -= take
        else:
            kv_bound = True
        if prefill_only and not chunks:  # no prompt could run after all: the decodes do
            prefill_only = False
            seqs.preempt_for_decodes(step)
            decoding = taken = seqs.decoders
        seqs.allocated += taken
        peak = max(peak, seqs.decoders + len(prefilling))
        decoders = decoding
        tokens = sum(take for _, take in chunks)
        attention = sum(chunk_attention(int(prefilling[i][0]), int(prefilling[i][0]) + take) for i, take in chunks)
        context = prompt + step - seqs.start_sum / decoders if decoders else 0.0
        if not decoders and tokens > 0 and prefill_follows is not None:  # prompts alone: at the pipeline's pace
            seconds = prefill_follows(decoders, tokens, context, attention)
            now, drain = now + seconds, max(drain, step_time(decoders, tokens, context, attention) - seconds)
        else:
            seconds = step_time(decoders, tokens, context, attention)
            now, drain = now + drain + seconds, 0.0
        steps_taken += 1
        if not prefill_only:
            step += 1
        for i, take in chunks:
            prefilling[i][0] += take
        complete = [entry for entry in prefilling if entry[0] >= entry[1]]
        prefilling[:] = [entry for entry in prefilling if entry[0] < entry[1]]
        seqs.prefill_held = sum(entry[0] for entry in prefilling)
        finish_cohorts(now, 0.0)
        # A prompt that never had a first token gets it now; one that had (a recomputed sequence) makes its
        # next token at the end of its prompt's pass: made + 1 tokens, as a sequence whose first came at
        # step - made. They join the running decodes in the order they were admitted.
        fresh = sum(1 for entry in complete if math.isnan(entry[3]))
        if fresh:
            if first_token_from_decode_step:
                # The prompt's last token rides the next step as a decode: its first token comes then.
                first_seconds = step_time(seqs.decoders + fresh, 0.0, prompt, 0.0)
                first_time, first_step = now + drain + first_seconds, step + 1
            else:
                first_time, first_step = now + drain, step
            ttfts.append((first_time, fresh))
            first_tokens += fresh
        # Fresh prompts in a row: how many of each output length. One cohort a length, in the order of each
        # length's last member: among prompts completing in one step, the scheduler's order (vLLM's
        # running.pop() preempts the last admitted) is kept between lengths only as far as that goes; the
        # members share their first step and first token, so only which length is preempted first can differ.
        run: dict[int, int] = {}
        for entry in [*complete, None]:
            if entry is not None and math.isnan(entry[3]):
                run[entry[4]] = run.pop(entry[4], 0) + 1  # each length after the others with a later member
                continue
            for length, count in run.items():  # one cohort a length, the last admitted last
                if length > 1:
                    seqs.add_cohort(count, first_step, first_time, length)
                else:
                    finished += count  # its only token was its first
                    last_first = max(last_first, first_time)
            run = {}
            if entry is None:
                break
            made, first, length = int(entry[2]), float(entry[3]), entry[4]
            if made + 1 >= length:
                finished += 1
                tpot_count += 1
                tpot_sum += (now - first) / (length - 1)
            else:
                seqs.add_cohort(1, step - made, first, length)
    mean_tpot = tpot_sum / tpot_count if tpot_count else 0.0
    makespan = max(now + drain, last_first)
    return Wave(tuple(ttfts), mean_tpot, makespan, steps_taken, requests, peak, seqs.preempted, kv_bound)


def queue_wait_factor(rho: float, spread: float) -> float:
    """Prefill time over service time for a prompt that queues for the token budget: 1 + the mean wait.

    Pollaczek-Khinchine (M/G/1): wait = rho / (1 - rho) x E[S^2] / (2 E[S]); a prompt's service grows
    with its length, so E[S^2] / E[S]^2 = E[P^2] / E[P]^2 = ``spread`` (1 for a fixed length,
    exp(sigma^2) for a lognormal). Without bound as rho reaches 1."""
    return math.inf if rho >= 1 else 1 + rho * spread / (2 * (1 - rho))


def ttft_statistics(
    state: SteadyState,
    w: ServingWorkload,
    overhead: Callable[[float], float],
    added: float = 0.0,
    behind: tuple[float, float, float] = (0.0, 0.0, 0.0),
) -> tuple[float, float, float]:
    """(mean, median, p90) TTFT under ``state``'s load at the prompts each is priced at (``ttft_prompts``), with
    each one's ``overhead``, ``added`` seconds and each statistic's own wait in ``behind`` (a static batch's): a
    quantile's unqueued service plus the wait at it (``wait_quantile``), the mean's queued service."""

    services: dict[int, tuple[float, float]] = {}  # a prompt's (queued, unqueued) service: statistics share prompts

    def statistic(share: float | None) -> float:
        total = 0.0
        for part, tokens in w.ttft_prompts(share):
            if tokens not in services:
                services[tokens] = (state.full_prompt_service(tokens), state.unqueued_service(tokens))
            queued, unqueued = services[tokens]
            if share is not None:  # the unqueued service and the wait at the quantile
                queued = unqueued + wait_quantile(queued - unqueued, state.rho, share)
            total += part * (queued + (added + overhead(tokens)))
        return total

    return statistic(None) + behind[0], statistic(MEDIAN) + behind[1], statistic(P90) + behind[2]


class _Served(Protocol):
    @property
    def requests_per_s(self) -> float: ...


S = TypeVar("S", bound=_Served)


def state_at_rate(
    state_at: Callable[[float], S], most: float, rate: float, beyond: float = math.inf
) -> tuple[S, float]:
    """The steady state whose throughput is ``rate`` (below what ``most`` running sequences complete), and
    its running sequences: bisection on log(slots), to 0.1% of the slots (some 25 root solves). The
    throughput grows with the slots (Little's law on a closed loop), but where prompts queue for the token
    budget it can peak and fall again: ``beyond``, slots known to outrun the rate (a closed loop's own),
    counts every state from there on as above it, so that the first crossing is found (searched to
    ``most`` alone, the fall past the peak read as below it, and seven clients ran 128 sequences), and the
    same one at any ``beyond`` past it."""
    low, high = math.log(1e-6), math.log(most)
    state = state_at(most)
    while high - low > 1e-3:
        middle = (low + high) / 2
        candidate = state_at(math.exp(middle))
        if candidate.requests_per_s < rate and math.exp(middle) < beyond:
            low = middle
        else:
            high, state = middle, candidate
    return state, math.exp(high)


@record
class LoadTerms:
    """What every load shape prices its requests with: the caps on running sequences (by name), the tokens a
    request yields (its mean, and the lengths they vary over) and the decode steps that yield them, the
    per-request overhead (the engine's and the front end's), the server process's capacity (requests per
    second) and the maker of the result, which carries the figures every shape shares."""

    caps: dict[str, float]
    output: int
    steps: float
    overhead: Callable[[float], float]  # a request's, for a prompt of that many tokens (``request_overhead``)
    capacity: float
    make: Callable[..., ServingSpeed]
    outputs: Lengths


def burst_speed(w: ServingWorkload, d: Deployment, prompt: float, terms: LoadTerms) -> ServingSpeed:
    """``w.concurrency`` requests per replica at once on an idle replica (``serving_load.wave``): the
    scheduler stepped with this deployment's steps; the server's front end admits one request after
    another, its own time and the engine's request overhead apart (``frontend.frontend_seconds``: one
    process does that work for every request), and the running sequences stay within the engine's cap
    and the sequences whose whole context the KV cache holds. The wave ends no sooner than that process
    has taken every request in and streamed every token back (``terms.capacity`` requests per second).
    Where the outputs vary (``terms.outputs``), the k-th request makes the k-th length (``Lengths.of``): the
    wave ends with its longest answers, decoding with fewer and fewer others."""
    caps, output, steps, outputs = terms.caps, terms.output, terms.steps, terms.outputs
    overhead = terms.overhead(w.burst_prompt)  # each request the mean prompt: its tokenization's time too

    def step_time(decoders: float, prefill: float, context: float, attention: float) -> float:
        microbatches = d.microbatches(decoders)
        step = d.step(decoders / microbatches, prefill / microbatches, context, attention / microbatches)
        return d.cycle(step, microbatches) if decoders else d.pass_time(step, 1)

    whole = d.kv_read(prompt + output)
    # An engine that reserves whole sequences holds a running one's whole length, caught in proportion to its
    # run (``held_tokens``), as the steady state counts it.
    reserved = d.kv_read(held_tokens(prompt, outputs, True))
    kv_slots = w.kv_capacity_bytes / reserved if reserved > 0 else math.inf
    requests = max(1, w.concurrency)
    mean_prompt = w.burst_prompt
    decode_steps = whole_steps(steps, output)  # speculative rounds yield more than a token each
    # An engine that admits while a prompt's chunk fits runs as many sequences as their tokens so far fit,
    # and preempts when decodes outgrow the cache (``wave``'s kv_tokens; ``EngineProfile``); others run the
    # sequences that fit whole. The tokens are counted so only where a sequence's bytes grow with its tokens
    # alone, one step one token: no sliding-window layer, no recurrent state, no speculation; otherwise the
    # wave keeps whole-sequence slots.
    grows = (
        d.engine.admits_by_prompt_chunk
        and d.sliding_layers == 0
        and d.state_bytes == 0
        and decode_steps == output
        and whole > 0
    )
    kv_tokens = w.kv_capacity_bytes / (whole / (prompt + output)) if grows else math.inf
    cap = max(1, int(caps["engine"] if grows else min(caps["engine"], kv_slots)))
    result = wave(
        requests,
        mean_prompt,
        outputs.in_steps(output / steps) if outputs.varies else decode_steps,
        d.token_budget,
        cap,
        step_time,
        lambda start, end: attention_flops(w.architecture, start, end),
        admission_gap=overhead,
        first_token_from_decode_step=d.engine.first_token_from_decode_step,
        kv_tokens=kv_tokens,
        mixes_prefill=d.engine.mixes_prefill,
        prompt_floor_s=prompt_floor(d, mean_prompt),
        # prompts alone in consecutive steps overlap across the stages: each after the first at the slowest's pace
        prefill_follows=lambda decoders, prefill, context, attention: (
            d.step(decoders, prefill, context, attention).seconds
        ),
    )
    makespan = max(result.makespan, requests / terms.capacity)
    # the decode step at the most sequences running: the cap, or where the cache set it, the wave's peak
    decode = d.step(min(requests, result.peak_running if grows else cap), 0, prompt + outputs.held(), 0.0)
    if grows:
        limited_by = "kv-cache" if result.kv_bound else ("concurrency" if requests <= cap else "engine")
    else:
        limited_by = "concurrency" if requests <= cap else ("engine" if caps["engine"] <= kv_slots else "kv-cache")
    if makespan > result.makespan:  # the server process, not the GPUs, set the wave's end
        limited_by = "front-end"
    duration = makespan + overhead  # from the first request's send to the last token, as a client times the run
    return terms.make(
        ttft_s=result.mean_ttft + overhead,
        tpot_s=result.mean_tpot * steps / output,
        tokens_per_s=w.replicas * outputs.drawn(requests).total(requests) / duration,
        decode_bound="memory" if decode.memory_bound else "compute",
        running=float(result.peak_running),
        limited_by=limited_by,
        decode_bytes_per_step=decode.bytes_read,
        ttft_median_s=result.quantile(MEDIAN) + overhead,
        ttft_p90_s=result.quantile(P90) + overhead,
        requests_per_s=w.replicas * requests / duration,
        duration_s=duration,
        preempted=result.preempted,
        # the k-th request reaches the scheduler k turns at the front end after the first
        frontend_wait_s=(requests - 1) / 2 * overhead,
    )
