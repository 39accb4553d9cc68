"""Serving under a load shape: the burst's wave, the steady stream's queue, the front end (serving_load).

The wave's figures are worked out by hand from a toy step price (1 ms + 0.5 ms per token the step carries),
scheduling as vLLM's V1 scheduler does: running sequences (decodes, then partly prefilled prompts) first,
then waiting prompts into what is left of the token budget.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from conftest import run_cli
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.config import default_settings
from gpuplan.estimate.calibration import CALIBRATION
from gpuplan.estimate.frontend import (
    HTTP_SECONDS,
    STREAM_SECONDS_PER_TOKEN,
    TOKENIZE_SECONDS_PER_TOKEN,
    frontend_capacity,
    frontend_seconds,
)
from gpuplan.estimate.lengths import Lengths
from gpuplan.estimate.performance import Efficiency
from gpuplan.estimate.serving_load import Wave, wait_quantile, wave
from gpuplan.estimate.serving_speed import serving_speed
from gpuplan.plan.configured import planner_for
from gpuplan.plan.evaluate import capacity_factor
from tests.test_properties_speed import fewer_and_more, workloads
from tests.test_serving_speed import CAL, workload
from tests.toy_gpu import unit_ceiling  # noqa: F401  (the autouse fixture)


def no_attention(start: int, end: int) -> float:
    return 0.0


def toy_step(decoders: float, prefill: float, context: float, attention: float) -> float:
    return 1 + 0.5 * (decoders + prefill)


def test_a_wave_of_three_prompts_sharing_the_token_budget():
    # 3 prompts of 6 tokens, 3 out, budget 8, no cap:
    # step 1: A's 6 tokens + B's first 2 (8 tokens) -> 1 + 4 = 5 ms; A's first token at 5.
    # step 2: A decodes (1) + B's last 4 + C's first 3 (8) -> 5 ms, t = 10; B's first token at 10.
    # step 3: A and B decode (2) + C's last 3 -> 1 + 2.5 = 3.5 ms, t = 13.5: C's first token; A's third, done.
    # step 4: B and C decode -> 2 ms, t = 15.5: B done.  step 5: C -> 1.5 ms, t = 17: C done.
    # TPOT over the 2 tokens after the first: A (13.5 - 5) / 2, B (15.5 - 10) / 2, C (17 - 13.5) / 2.
    result = wave(3, 6, 3, 8, 10, toy_step, no_attention)
    assert result.ttfts == ((5.0, 1), (10.0, 1), (13.5, 1))
    assert result.makespan == 17.0
    assert result.steps == 5
    assert result.mean_tpot == pytest.approx((4.25 + 2.75 + 1.75) / 3)
    assert result.mean_ttft == pytest.approx(9.5)
    assert (result.quantile(0.5), result.quantile(0.9)) == (10.0, 13.5)
    assert result.peak_running == 3  # from step 2: A decoding, B and C prefilling


def test_a_wave_whose_answers_vary_ends_with_its_longest():
    # As above (3 prompts of 6 tokens, budget 8, no cap) with answers of 2 or 4 tokens, half each (a mean of
    # 3). Three requests cut the answers into three equal strata: 2, (2 + 4) / 2 = 3 and 4 tokens; the k-th
    # request's point frac(1/2 + k / golden ratio) = 0.5, 0.118, 0.736 ranks A second, B first, C third:
    # A makes 3, B 2, C 4. Steps 1-3 as above: first tokens at 5 (A), 10 (B), 13.5 (C); step 3 gives A its
    # third token and B its second: both done at 13.5. Steps 4-6: C alone, 1.5 ms each, t = 18. TPOT: A
    # (13.5 - 5) / 2 = 4.25, B (13.5 - 10) / 1 = 3.5, C (18 - 13.5) / 3 = 1.5. The same mean fixed (the test
    # above) ends at 17: the longest answer decodes last, alone.
    answers = Lengths(((0.5, 2), (0.5, 4)))
    result = wave(3, 6, answers, 8, 10, toy_step, no_attention)
    assert result.ttfts == ((5.0, 1), (10.0, 1), (13.5, 1))
    assert result.makespan == 18.0
    assert result.steps == 6
    assert result.mean_tpot == pytest.approx((4.25 + 3.5 + 1.5) / 3)


def test_one_token_answers_end_at_their_first_token_and_have_no_tpot():
    # Answers of 1 or 3 tokens, two requests: the shorter half (1) and the longer (3); A's point 0.5 ranks
    # above B's 0.118, so A makes 3, B 1. One step of both prompts
    # (12 tokens, budget 16): 1 + 6 = 7 ms, both first tokens; B is done. A decodes twice alone: 1.5 ms
    # each, t = 10. TPOT is A's alone: (10 - 7) / 2.
    result = wave(2, 6, Lengths(((0.5, 1), (0.5, 3))), 16, 10, toy_step, no_attention)
    assert (result.ttfts, result.makespan) == (((7.0, 2),), 10.0)
    assert result.mean_tpot == pytest.approx(1.5)


def test_a_wave_one_sequence_at_a_time_under_a_running_cap_of_one():
    # Cap 1: each prompt waits for the one before to finish. A: a 6-token step (4 ms), then two decode steps
    # of 1.5 ms (priced in one stretch): done at 7. B is admitted at the next step: 7 + 4 = 11, decodes to 14;
    # C: 14 + 4 = 18, decodes to 21.
    result = wave(3, 6, 3, 8, 1, toy_step, no_attention)
    assert result.ttfts == ((4.0, 1), (11.0, 1), (18.0, 1))
    assert result.makespan == 21.0
    assert result.mean_tpot == pytest.approx(1.5)


def unit_step(decoders: float, prefill: float, context: float, attention: float) -> float:
    return 1.0


def test_a_decode_that_outgrows_the_cache_preempts_the_last_sequence():
    # 3 prompts of 4 tokens, 3 out, a cache of 12 tokens, every step 1 s. Step 1: all three prompts fit
    # (12 tokens), first tokens at 1. Step 2: three decodes need 3 more slots and none is free: the last
    # sequence is preempted (its 4 tokens freed: the other two take 2 of them), nothing is admitted that step.
    # Step 3: the two decode (2 of the 2 free); the preempted one's 5 tokens (4 + the token it made) do not
    # fit; the two finish (TPOT (3 - 1) / 2 = 1). Its blocks went to the two decodes' new slots: step 4
    # recomputes all 5 and makes its second token, step 5 its third: TPOT (5 - 1) / 2 = 2, TTFT still 1.
    # Without the cache's limit all three finish at 3 with TPOT 1.
    result = wave(3, 4, 3, 100, 10, unit_step, no_attention, kv_tokens=12)
    assert result.ttfts == ((1.0, 3),)
    assert (result.makespan, result.steps, result.preempted, result.kv_bound) == (5.0, 5, 1, True)
    assert result.mean_tpot == pytest.approx((1 + 1 + 2) / 3)
    free = wave(3, 4, 3, 100, 10, unit_step, no_attention)
    assert (free.makespan, free.mean_tpot, free.preempted, free.kv_bound) == (3.0, 1.0, 0, False)


def test_a_preempted_prompt_finds_its_blocks_in_the_prefix_cache():
    # 2 prompts of 6 tokens, 3 out, budget 4, a cache of 10 tokens, every step 1 s. Step 1: A's first 4.
    # Step 2: A's last 2 (first token at 2), B's first 2. Step 3: A decodes (1 slot of the 2 free) and B's next
    # 3 do not fit in the 1 left: B, the last running, is preempted (its 2 tokens queued behind the 2 free
    # ones; the decode takes one of those). Step 4: B's 2 cached tokens and the 3 the budget leaves would need
    # 5 where 2 are free beside A's decode: A decodes alone (taking the other free one) and finishes (TPOT
    # (4 - 2) / 2 = 1). Step 5: B is admitted with its 2 tokens still cached (2 taken since it was preempted,
    # both of those queued before them) and computes its last 4: first token at 5, done at 7. Recomputing all
    # 6 would have taken steps 5 and 6 (first token at 6, done at 8).
    result = wave(2, 6, 3, 4, 10, unit_step, no_attention, kv_tokens=10)
    assert result.ttfts == ((2.0, 1), (5.0, 1))
    assert (result.makespan, result.steps, result.preempted) == (7.0, 7, 1)
    assert result.mean_tpot == pytest.approx(1.0)


def test_an_engine_that_runs_prompts_first_holds_the_decodes_back():
    # The three prompts of 6 tokens above, 3 out, budget 8, on an engine that runs a step of prompts alone
    # whenever it can form one (SGLang): step 1: A's 6 + B's 2 (5 ms, A's first token at 5); step 2: B's
    # last 4 + C's first 4, prompts alone (5 ms, B's first at 10); step 3: C's last 2 (1 + 1 = 2 ms, C's
    # first at 12). Then the three decode together: two steps of 2.5 ms, all done at 17. TPOT: A (17 - 5)
    # / 2 = 6, B 3.5, C 2.5 (mixed with the decodes: 4.25, 2.75, 1.75, and C's first token at 13.5).
    result = wave(3, 6, 3, 8, 10, toy_step, no_attention, mixes_prefill=False)
    assert result.ttfts == ((5.0, 1), (10.0, 1), (12.0, 1))
    assert (result.makespan, result.steps) == (17.0, 5)
    assert result.mean_tpot == pytest.approx((6 + 3.5 + 2.5) / 3)


def test_this_steps_decodes_evict_before_a_preempted_prompt_is_looked_up():
    # 3 prompts of 2 tokens, 4 out, budget 3, cap 3, a cache of 10, every step 1 s. Steps 1-3: A's prompt and
    # B's first token; B's last, C's first; C's last (first tokens at 1, 2, 3; 9 tokens held). Step 4: three
    # decodes find 1 free: C is preempted (its 2 tokens queued behind that 1), A and B decode (taking the free
    # one and one of C's); A is done (TPOT 1). Step 5: B's decode takes C's other token before C is looked up,
    # so nothing of C is cached: it recomputes 3 tokens (prompt + the one it made), 2 at step 5, 1 at step 6,
    # and makes its second token at 6; B is done at 5 (TPOT 1). C's third and fourth at 7 and 8: TPOT
    # (8 - 3) / 3. Mean (1 + 1 + 5/3) / 3 = 11/9. Counting the cache hit before step 5's decode (1 token)
    # would have ended at 7.
    result = wave(3, 2, 4, 3, 3, unit_step, no_attention, kv_tokens=10)
    assert result.ttfts == ((1.0, 1), (2.0, 1), (3.0, 1))
    assert (result.makespan, result.preempted) == (8.0, 1)
    assert result.mean_tpot == pytest.approx(11 / 9)


def test_sequences_that_complete_together_run_on_in_the_order_they_were_admitted():
    # 4 one-token prompts, 3 out, budget 3, cap 3, a cache of 4, every step 1 s. Step 1: A, B, C (first
    # tokens at 1). Step 2: C is preempted (made 1); A and B decode. Step 3: B is preempted (made 2); A is
    # done (TPOT 1). Step 4: B returns first with 1 token still cached and computes 2 (its third token: done,
    # TPOT (4 - 1) / 2); C returns and computes its first of 2 (nothing cached). Step 5: C's last, making its
    # second token, and D's prompt (its first token at 5): C was admitted before D, so it runs ahead of it.
    # Step 6: two decodes, one free token: the last admitted, D, is preempted; C is done (TPOT (6 - 1) / 2).
    # Step 7: D returns with its token cached, recomputes 1, makes its second; step 8 its third: TPOT
    # (8 - 5) / 2. Mean (1 + 1.5 + 2.5 + 1.5) / 4 = 1.625 (preempting C at step 6 instead would give 1.75).
    result = wave(4, 1, 3, 3, 3, unit_step, no_attention, kv_tokens=4)
    assert result.ttfts == ((1.0, 3), (5.0, 1))
    assert (result.makespan, result.preempted) == (8.0, 3)
    assert result.mean_tpot == pytest.approx(1.625)


def test_a_first_token_from_the_decode_step_is_priced_after_the_finished_leave():
    # Toy steps, 2 prompts of 2 tokens, 2 out, the first token from the next decode step (a prompt's pass
    # stops a token short), B arriving 1.7 s after A. Step 1: A's 1 token, 1.5 s; its first token rides the
    # next step (one decode, 1.5 s): at 3.0. B arrives during that step. Step 3: A's second token and B's 1
    # token, 2 s, to 5.0: A is done, so B's first-token step decodes B alone: 1.5 s, at 6.5.
    result = wave(2, 2, 2, 2, 2, toy_step, no_attention, admission_gap=1.7, first_token_from_decode_step=True)
    assert result.ttfts == ((3.0, 1), (6.5, 1))


@given(
    st.integers(1, 30),
    st.integers(1, 40),
    st.integers(2, 20),
    st.integers(1, 120),
    st.integers(1, 40),
    st.floats(1.0, 6.0),
    st.booleans(),
    st.booleans(),
)
def test_a_cache_that_holds_less_never_ends_a_wave_sooner(requests, prompt, output, budget, cap, share, late, mixes):
    # With every step priced alike, a cache that holds fewer tokens only holds work back (admissions wait,
    # preempted sequences recompute): no earlier end, no earlier mean first token; every request gets one
    # first token and finishes; a cache that holds every request whole changes nothing. Also where the
    # first token comes from the next decode step (``late``), and where prompts run alone (not ``mixes``).
    kv = (prompt + output) * share
    options = {"first_token_from_decode_step": late, "mixes_prefill": mixes}
    tight = wave(requests, prompt, output, budget, cap, unit_step, no_attention, kv_tokens=kv, **options)
    free = wave(requests, prompt, output, budget, cap, unit_step, no_attention, **options)
    assert sum(count for _, count in tight.ttfts) == requests
    assert tight.makespan >= free.makespan - 1e-9
    assert tight.mean_ttft >= free.mean_ttft - 1e-9
    whole = requests * (prompt + output)
    roomy = wave(requests, prompt, output, budget, cap, unit_step, no_attention, kv_tokens=whole, **options)
    assert (roomy.ttfts, roomy.makespan, roomy.mean_tpot, roomy.preempted) == (
        free.ttfts,
        free.makespan,
        free.mean_tpot,
        0,
    )


def test_a_burst_on_an_engine_that_admits_by_the_prompt_runs_more_than_fit_whole():
    # TINY holds 32 B of KV per token (2 layers x 16 B): a cache of 768 B holds 3 sequences of 4 + 4 tokens
    # whole, or 24 tokens. Ten requests reach the scheduler 10 ms apart (the engine's request overhead) while
    # a step takes seconds: step 1 prefills the first alone. At step 2 its decode takes a slot beside the 4
    # tokens it holds, and an engine that admits while a prompt fits (vLLM's V1) starts 19 // 4 = 4 more
    # prompts: 5 running, more than fit whole (it preempts as they decode); one that runs whole sequences
    # (the unit engine as it stands) runs 3 at a time. Both say the KV cache set the pace.
    admits = dataclasses.replace(
        CAL, engines={"vllm": dataclasses.replace(CAL.engines["vllm"], admits_by_prompt_chunk=True)}
    )
    job = workload(arrival="burst", concurrency=10, kv_capacity_bytes=768.0)
    by_prompt = serving_speed(job, calibration=admits)
    whole = serving_speed(job, calibration=CAL)
    assert (by_prompt.running, whole.running) == (5, 3)
    assert by_prompt.limited_by == whole.limited_by == "kv-cache"


def test_requests_admitted_one_after_another_by_the_front_end():
    # Two 4-token prompts, one token out, the second reaching the scheduler 10 ms after the first: the
    # first is a lone 3 ms step; the replica idles until 10, and the second's step ends at 13.
    result = wave(2, 4, 1, 8, 8, toy_step, no_attention, admission_gap=10.0)
    assert result.ttfts == ((3.0, 1), (13.0, 1))
    assert result.peak_running == 1  # the first was done before the second arrived
    assert result.mean_tpot == 0.0


def test_a_burst_crosses_the_front_end_one_request_after_another(monkeypatch):
    # The server's front end (HTTP, chat template, tokenizer) is one process for every request, so a burst's
    # requests reach the scheduler one front end and one engine request overhead apart: for 4-token prompts
    # on the chat endpoint, 11.6 ms (HTTP) + 4 x 1 us (tokenizer) + the engine's overhead; offline, the
    # overhead alone. (With this gap at the engine overhead alone, as before, a 500-request burst of 512-token
    # prompts on Qwen3-0.6B was 0.33 s of mean TTFT against 2.9 s measured; benchmarks/load_accuracy.py.)
    import gpuplan.estimate.serving_load as load

    seen = []

    def recording_wave(*args, **kwargs):
        seen.append(kwargs["admission_gap"])
        return wave(*args, **kwargs)

    monkeypatch.setattr(load, "wave", recording_wave)
    overhead = CAL.engines["vllm"].request_overhead_s
    chat = serving_speed(workload(arrival="burst", endpoint="chat"), calibration=CAL)
    serving_speed(workload(arrival="burst", endpoint="offline"), calibration=CAL)
    assert seen == [pytest.approx((0.0122 + 0.0110) / 2 + 4e-6 + overhead), pytest.approx(overhead)]
    assert chat.frontend_s == pytest.approx((0.0122 + 0.0110) / 2 + 4e-6)


def test_the_first_token_from_the_next_decode_step():
    # TurboMind's way: the pass covers 5 of 6 tokens (1 + 2.5 = 3.5 ms); the next step decodes the last
    # prompt token with the one sequence (1.5 ms) and gives the first output at 5.
    result = wave(1, 6, 2, 8, 8, toy_step, no_attention, first_token_from_decode_step=True)
    assert result.ttfts == ((5.0, 1),)


def test_each_chunk_carries_the_attention_of_its_own_positions():
    # A 10-token prompt in a budget of 4: chunks [0, 4), [4, 8), [8, 10), each step priced with its
    # positions' attention (here the count of query-key pairs of a causal prompt, e(e+1)/2 - s(s+1)/2:
    # 10, 26 and 19).
    seen = []

    def step(decoders, prefill, context, attention):
        seen.append(attention)
        return 1.0

    wave(1, 10, 1, 4, 8, step, lambda s, e: e * (e + 1) / 2 - s * (s + 1) / 2)
    assert seen == [10.0, 26.0, 19.0]


def test_front_end_of_a_one_token_prompt():
    # One prompt token: the HTTP path's measured gap and one token's tokenization; nothing offline.
    assert frontend_seconds("chat", 1) == pytest.approx((0.0122 + 0.0110) / 2 + 1e-6)
    assert frontend_seconds("completions", 1) == pytest.approx((0.0084 + 0.0120) / 2 + 1e-6)
    assert frontend_seconds("offline", 1) == 0.0
    # Through the speed model: a one-token prompt's TTFT alone differs between the chat endpoint and an
    # in-process run by exactly that front end.
    one = {"prompt_tokens": 1, "prompt_p90": 1, "full_prompt": 1}
    chat = serving_speed(workload(endpoint="chat", **one), calibration=CAL)
    offline = serving_speed(workload(endpoint="offline", **one), calibration=CAL)
    assert chat.ttft_single_s - offline.ttft_single_s == pytest.approx(
        HTTP_SECONDS["chat"] + TOKENIZE_SECONDS_PER_TOKEN
    )
    assert chat.frontend_s == pytest.approx(HTTP_SECONDS["chat"] + TOKENIZE_SECONDS_PER_TOKEN)


def test_a_bursts_requests_cross_the_front_end_with_their_own_prompt():
    # Three requests of 4-token prompts in a context whose full prompt is 1,004 tokens: each crosses the front
    # end in the engine's 10 ms + the chat path + 4 tokens' tokenization, so the wait at the front end is
    # (3 - 1) / 2 of that on average; tokenizing the full prompt would add 1,000 x 1 us to each.
    burst = workload(arrival="burst", endpoint="chat", concurrency=3, prompt_tokens=4, prompt_p90=4, full_prompt=1004)
    speed = serving_speed(burst, calibration=CAL)
    assert speed.frontend_wait_s == pytest.approx(
        0.01 + HTTP_SECONDS["chat"] + 4 * TOKENIZE_SECONDS_PER_TOKEN, rel=1e-12
    )


def test_wait_quantiles_of_an_exponential_tail_with_an_atom_at_zero():
    # P(W > t) = rho exp(-rho t / mean): rho 0.5, mean 1 -> p90 at 2 ln 5; the median waits not at all
    # (half the arrivals find no queue); a tenth never waits beyond 0 when rho <= 0.1.
    assert wait_quantile(1.0, 0.5, 0.9) == pytest.approx(2 * math.log(5))
    assert wait_quantile(1.0, 0.5, 0.5) == 0.0
    assert wait_quantile(1.0, 0.1, 0.9) == pytest.approx(0.0, abs=1e-12)
    assert wait_quantile(1.0, 0.8, 0.5) == pytest.approx(1.25 * math.log(1.6))


def test_a_burst_on_the_toy_deployment_is_the_wave_of_its_steps():
    # Two requests of 4 tokens, 4 out, on the unit engine: the burst's mean TTFT is the wave's mean plus
    # the engine's request overhead (the second request reaches the scheduler one overhead later); its
    # rates are over the run as a client times it, from the first send to the last token.
    burst = serving_speed(workload(arrival="burst"), calibration=CAL)
    single = serving_speed(workload(concurrency=1), calibration=CAL)
    assert burst.ttft_median_s <= burst.ttft_p90_s
    assert burst.ttft_median_s >= single.ttft_single_s
    assert burst.duration_s is not None and burst.duration_s > burst.ttft_p90_s
    assert burst.tokens_per_s == pytest.approx(2 * 4 / burst.duration_s)
    assert burst.requests_per_s == pytest.approx(2 / burst.duration_s)


def test_a_steady_stream_between_idle_and_saturated():
    closed = serving_speed(workload(concurrency=2), calibration=CAL)
    capacity = closed.requests_per_s
    slow = serving_speed(workload(arrival="steady", rate_rps=capacity * 0.01), calibration=CAL)
    busy = serving_speed(workload(arrival="steady", rate_rps=capacity * 0.9), calibration=CAL)
    over = serving_speed(workload(arrival="steady", rate_rps=capacity * 1.1), calibration=CAL)
    # A trickle: about one request at a time, TTFT near the prompt alone; throughput is the rate.
    assert slow.running < 0.1
    assert slow.requests_per_s == pytest.approx(capacity * 0.01)
    assert slow.ttft_s == pytest.approx(slow.ttft_single_s, rel=0.05)
    # Near capacity more run at once and each waits longer; beyond it the queue has no bound.
    assert busy.running > slow.running and busy.ttft_s >= slow.ttft_s
    assert not busy.saturated and over.saturated
    assert math.isinf(over.ttft_s) and over.requests_per_s == pytest.approx(capacity)


@given(workloads)
def test_a_burst_never_beats_the_same_requests_arriving_one_by_one(case):
    # Every request of a burst is at least as late to its first token as a lone request of the same prompt
    # (the wave's first prompt is alone, the others share steps and wait), and a larger burst's p90 is no
    # earlier than a smaller one's; across MoE, MLA, sliding windows, tied embeddings and two stages.
    _, few, many, fits = fewer_and_more(*case)
    if not fits or few.job.batching != "continuous":
        return
    small = serving_speed(dataclasses.replace(few.workload, arrival="burst"))
    large = serving_speed(dataclasses.replace(many.workload, arrival="burst"))
    alone = serving_speed(
        dataclasses.replace(
            few.workload,
            concurrency=1,
            full_prompt=max(1, round(few.workload.prompt_tokens)),
        )
    ).ttft_single_s
    assert small.ttft_median_s >= alone * (1 - 1e-9)
    assert large.ttft_p90_s >= small.ttft_p90_s * (1 - 1e-9)


@given(st.floats(0.05, 0.95), st.floats(0.05, 0.95))
def test_a_busier_stream_never_starts_sooner(first, second):
    low, high = sorted((first, second))
    capacity = serving_speed(workload(concurrency=2), calibration=CAL).requests_per_s
    calm = serving_speed(workload(arrival="steady", rate_rps=capacity * low), calibration=CAL)
    busy = serving_speed(workload(arrival="steady", rate_rps=capacity * high), calibration=CAL)
    assert busy.ttft_s >= calm.ttft_s * (1 - 1e-6)
    assert busy.running >= calm.running * (1 - 1e-6)


def test_a_wave_past_its_event_budget_continues_at_the_pace_it_reached():
    # 3,000 prompts of 2,000 tokens, 200 out, 256 running at most: stepped whole, and cut after 600 events
    # with the rest extrapolated at the rate of first tokens of the events' second half. The two agree on
    # mean TTFT within 1%, on p90 TTFT within 3% (the wave admits 256 at a time, and the last of those rounds,
    # which set the p90, come at the pace of the half-round the cut measured) and on TPOT and the wave's end
    # within 10%; a million-request burst costs no more events than the budget.
    def step(decoders, prefill, context, attention):
        return 1 + 0.0005 * (decoders + prefill)

    whole = wave(3000, 2000, 200, 8192, 256, step, no_attention)
    cut = wave(3000, 2000, 200, 8192, 256, step, no_attention, max_events=600)
    assert cut.mean_ttft == pytest.approx(whole.mean_ttft, rel=0.01)
    assert cut.quantile(0.9) == pytest.approx(whole.quantile(0.9), rel=0.03)
    assert cut.mean_tpot == pytest.approx(whole.mean_tpot, rel=0.1)
    assert cut.makespan == pytest.approx(whole.makespan, rel=0.1)
    huge = wave(1_000_000, 2000, 200, 8192, 256, step, no_attention)
    assert sum(count for _, count in huge.ttfts) == 1_000_000
    assert huge.quantile(0.9) > huge.quantile(0.5) > whole.quantile(0.9)


def test_a_prompt_beside_a_decode_is_priced_in_stretches_as_stepping_would():
    # Two requests of 1,000-token prompts and 100-token answers, a budget of 2 tokens, 2 running, toy_step's
    # 1 + 0.5 x tokens a step. The first prompt alone: 500 steps of 2 -> its first token at 1,000. Then each
    # step carries its decode and one token of the second prompt (step(1, 1) = 2) for its 99 decodes, to
    # 1,198, when 901 prompt tokens are left alone: 450 steps of 2 and one of 1.5 -> 2,099.5; its 99 decodes
    # at step(1, 0) = 1.5 end the wave at 2,248; TPOTs 2 and 1.5. Stepped, that is 1,149 steps; priced in
    # stretches (the equal steps beside the decode, the prompt's whole chunks alone), 13.
    priced = []

    def counted(decoders, prefill, context, attention):
        priced.append(1)
        return toy_step(decoders, prefill, context, attention)

    result = wave(2, 1000, 100, 2, 2, counted, no_attention)
    assert result.ttfts == ((1000.0, 1), (2099.5, 1))
    assert result.makespan == 2248.0 and result.mean_tpot == 1.75 and result.steps == 1149
    assert len(priced) == 13


def test_a_cut_wave_gives_no_request_its_first_token_before_it_arrives():
    # 200 one-token prompts of 4 tokens, the front end admitting one every 10 ms, each prompt a 3 ms step
    # (toy_step: 1 + 0.5 x 4): request k's first token at 10 k + 3 ms. Cut after 9 events, five have theirs
    # (3, 13, ..., 43); the 195 left (64 groups: 3 of 4, 61 of 3) came, before the fix, at the pace the
    # events' second half measured: the group of requests 5-8 at 68 ms, though request 8 arrives at 80,
    # and the last group (197-199) at 1,983 ms, though 199 arrives at 1,990. Now each group's first token
    # comes no sooner than its last request's arrival: 80 ms and 1,990 ms.
    cut = wave(200, 4, 1, 8, 8, toy_step, no_attention, admission_gap=10.0, max_events=9)
    expanded = sorted(value for value, count in cut.ttfts for _ in range(count))
    assert len(expanded) == 200
    assert all(value >= 10.0 * rank for rank, value in enumerate(expanded))
    assert cut.ttfts[5] == (80.0, 4)
    assert max(expanded) == 1990.0


@given(
    st.integers(2, 3000),
    st.integers(1, 4096),
    st.integers(1, 300),
    st.integers(1, 8192),
    st.integers(1, 512),
    st.floats(0.0, 0.05),
    st.integers(4, 200),
)
def test_the_r_th_first_token_of_a_burst_comes_no_sooner_than_r_front_ends(
    requests, prompt, output, budget, cap, gap, events
):
    # What the planner's burst bound (serving_bounds.burst_ttft_bound) rests on: request k reaches the
    # scheduler k x gap after the burst and gets its first token no sooner, and r first tokens need r
    # prompts' pass, each step of x <= budget prompt tokens taking at least x / budget of a full one (this
    # step's time per token falls with its tokens), stepped or extrapolated past the event budget: the
    # r-th smallest TTFT (from 0) is at least r x gap and (r + 1) x prompt x step(0, budget) / budget.
    def step(decoders, prefill, context, attention):
        return 0.004 + 1e-5 * (decoders + prefill)

    pace = step(0, budget, 0, 0) / budget  # one stage, no attention: the floor burst_speed gives (prompt_floor)
    result = wave(
        requests,
        prompt,
        output,
        budget,
        cap,
        step,
        no_attention,
        admission_gap=gap,
        max_events=events,
        prompt_floor_s=prompt * pace,
    )
    expanded = sorted(value for value, count in result.ttfts for _ in range(count))
    assert len(expanded) == requests
    per_prompt = prompt * pace
    assert all(value >= gap * rank * (1 - 1e-12) for rank, value in enumerate(expanded))
    assert all(value >= (rank + 1) * per_prompt * (1 - 1e-12) for rank, value in enumerate(expanded))


def test_a_bursts_ttft_bound_on_the_toy_deployment_is_its_prefill():
    # Ten 4-token prompts at once, offline (no front end: G = the unit engine's 10 ms of request overhead),
    # a budget of 4 tokens: an idle step of 4 prompt tokens is hypot(8.688 s of weights, 4 x 2,384 / 500 =
    # 19.072 s of GEMMs) + 1.2 ms fixed = 20.95884 s, and the prompt's causal attention, 640 FLOPs / 250 =
    # 2.56 s, adds to whatever steps carry it (test_serving_speed's prefill step): 23.51884 s a prompt, so the
    # r-th first token comes no sooner than r x 23.51884 s: p90 (rank 9) 211.6796 s, median (rank 5)
    # 117.6042 s, mean (rank 5.5) 129.3636 s, each with G; the front end's 9 G is far below. (Without the
    # attention the bound was 188.6 s at the p90: it left out what is most of a long prompt's pass.)
    from gpuplan.estimate.serving_bounds import burst_ttft_bound
    from gpuplan.estimate.serving_speed import Deployment

    burst = workload(arrival="burst", concurrency=10, max_batched_tokens=4)
    d = Deployment(burst, CAL, Efficiency())
    assert CAL.engines["vllm"].request_overhead_s == 0.01
    prompt = math.hypot(8.688, 19.072) + 0.0012 + 2.56
    assert burst_ttft_bound(burst, d, "p90") == pytest.approx(9 * prompt + 0.01, rel=1e-9)
    assert burst_ttft_bound(burst, d, "median") == pytest.approx(5 * prompt + 0.01, rel=1e-9)
    assert burst_ttft_bound(burst, d, "mean") == pytest.approx(5.5 * prompt + 0.01, rel=1e-9)
    assert 9 * prompt + 0.01 == pytest.approx(211.6796, abs=1e-4)
    speed = serving_speed(burst, calibration=CAL)
    assert speed.ttft_p90_s >= 211.6795 and speed.ttft_median_s >= 117.6041 and speed.ttft_s >= 129.3635


@given(workloads, st.floats(0.05, 0.95), st.floats(0.05, 0.95))
def test_across_architectures_a_busier_stream_never_starts_sooner(case, first, second):
    # The same property on the models that stress the speed model (MoE, MLA, sliding windows, tied
    # embeddings, two pipeline stages, every engine): a steady stream's mean TTFT and running sequences
    # never fall as its rate rises below what the closed loop at the declared concurrency completes.
    _, few, _, fits = fewer_and_more(*case)
    if not fits or few.job.batching != "continuous":
        return
    low, high = sorted((first, second))
    capacity = few.speed.requests_per_s
    calm = serving_speed(dataclasses.replace(few.workload, arrival="steady", rate_rps=capacity * low))
    busy = serving_speed(dataclasses.replace(few.workload, arrival="steady", rate_rps=capacity * high))
    assert not calm.saturated and not busy.saturated
    assert busy.ttft_s >= calm.ttft_s * (1 - 1e-6)
    assert busy.running >= calm.running * (1 - 1e-6)


def test_the_front_end_assumption_says_a_burst_crosses_it_in_turn():
    # The estimate's assumption names the front end's time per request and per streamed token, what one
    # process for every request caps, and, for a burst, that its requests cross it in turn (what spaces the
    # wave's arrivals at the scheduler).
    from gpuplan.linter import lint_bytes

    def front_end(arrival: str) -> str:
        text = (
            "version: 1\nname: wave\nmodel: {id: llama-3.2-1b}\n"
            f"serve: {{context: 640, output_tokens: 128, concurrency: 50, arrival: {arrival}, endpoint: completions,"
            " hardware: {gpu: h100-sxm, count: 1}}\n"
        )
        result = lint_bytes("burst.yaml", text.encode())
        assert result.analysis is not None and result.analysis.serve is not None
        return dict(result.analysis.serve.assumptions)["front end"]

    # 512 prompt tokens: (8.4 + 12.0) / 2 ms of HTTP path + 512 x 1 us of tokenizer = 10.7 ms; with 128 tokens
    # streamed at 18.27 us, 1 / 13.05 ms = 77 requests/s per replica.
    for arrival in ("burst", "closed-loop"):
        assert front_end(arrival).startswith("completions: 10.7 ms per request")
        assert "at most 77 requests/s per replica" in front_end(arrival)
    assert front_end("burst").endswith("a burst crosses it one request after another")
    assert "a burst crosses it" not in front_end("closed-loop")


def _served(serve: str, model: str = "llama-3.2-1b"):
    from gpuplan.linter import lint_bytes

    text = f"version: 1\nname: front end\nmodel: {{id: {model}}}\nserve: {{{serve}}}\n"
    result = lint_bytes("front.yaml", text.encode())
    assert result.analysis is not None and result.analysis.serve is not None, result.findings
    return result


def test_a_replicas_server_process_caps_its_requests_per_second():
    # One process takes each request in (HTTP path + tokenizer) and streams each token back: 1 / (10.2 ms +
    # 225 x 1 us + 202 x 18.27 us) = 70.84 requests/s for 225-token completions of 202 tokens, whatever the GPU.
    assert frontend_capacity("completions", 225, 202) == pytest.approx(70.84, rel=1e-9)
    # A 1-token chat prompt with one token out: 1 / (11.6 ms + 1 us + 18.27 us).
    assert frontend_capacity("chat", 1, 1) == pytest.approx(1 / (0.0116 + 1e-6 + STREAM_SECONDS_PER_TOKEN))
    assert math.isclose(STREAM_SECONDS_PER_TOKEN, 18.27e-6, rel_tol=1e-3)
    assert math.isinf(frontend_capacity("offline", 225, 202))


def test_a_closed_loop_a_small_model_outruns_is_front_end_bound():
    # vLLM PR #12287's run: Llama-3.2-1B on an A100, 400 clients, 225-token prompts, 202 tokens out. The GPU
    # could complete far more than 70.84 requests/s; the server process completes that many, and by Little's
    # law over a client's request, 400 = 70.84 x (TTFT + 201 TPOT): TPOT = (5.647 s - TTFT) / 201, 28.0 ms
    # with the model's TTFT of some 20 ms (the PR measured 26.76 ms and a TTFT of 0.20 s; its throughput set
    # the per-token figure, its TPOT did not).
    serve = (
        "context: 427, output_tokens: 202, concurrency: 400, endpoint: completions,"
        " prompt_tokens: {mean: 225}, hardware: {gpu: a100-sxm-80gb, count: 1}"
    )
    speed = _served(serve).analysis.serve.speed
    assert speed.limited_by == "front-end" and speed.decode_bound == "front-end"
    assert speed.requests_per_s == pytest.approx(70.84, rel=1e-9)
    assert speed.tpot_s == pytest.approx((400 / 70.84 - speed.ttft_s) / 201, rel=1e-9)
    assert speed.tpot_s == pytest.approx(0.02676, rel=0.06)
    # Two GPUs are two replicas, each with a server process of its own and 400 clients: twice the rate.
    two = _served(serve.replace("count: 1", "count: 2")).analysis.serve.speed
    assert two.requests_per_s == pytest.approx(2 * 70.84, rel=1e-9)
    # Offline (prompts as token ids, in process) the GPUs set the pace: more requests, and no front end.
    offline = _served(serve.replace("completions", "offline")).analysis.serve.speed
    assert offline.requests_per_s > 1.5 * speed.requests_per_s and offline.limited_by != "front-end"


def test_a_stream_faster_than_the_front_end_saturates_and_a_burst_ends_no_sooner():
    serve = "context: 427, output_tokens: 202, concurrency: 400, endpoint: completions, prompt_tokens: {mean: 225},"
    steady = _served(serve + " arrival: steady, rate_rps: 80, hardware: {gpu: a100-sxm-80gb, count: 1}")
    speed = steady.analysis.serve.speed
    assert speed.saturated and speed.limited_by == "front-end"
    assert speed.requests_per_s == pytest.approx(70.84, rel=1e-9)
    assert math.isinf(speed.ttft_s)
    # With no TTFT SLO to miss, GP406 says the queue grows without bound, at the rate's field.
    (finding,) = [f for f in steady.findings if f.code == "GP406"]
    assert "at most 70.84/s, limited by the server's front end" in finding.message
    assert finding.hint == "more replicas"
    burst = _served(serve + " arrival: burst, hardware: {gpu: a100-sxm-80gb, count: 1}").analysis.serve.speed
    # 400 requests through one process: 400 / 70.84 s = 5.65 s until the last token is streamed, and the
    # first request's front end before its send reached the scheduler: the run as its client times it.
    assert burst.limited_by == "front-end"
    overhead = CALIBRATION.engines["vllm"].request_overhead_s
    assert burst.duration_s == pytest.approx(400 / 70.84 + burst.frontend_s + overhead, rel=1e-9)
    assert burst.requests_per_s == pytest.approx(400 / burst.duration_s, rel=1e-9)


def test_a_stream_the_estimate_keeps_up_with_is_at_risk_below_the_slow_edge_of_its_ceiling():
    # The same server process completes at most 70.84 requests/s (1 / (10.2 ms + 225 x 1 us + 202 x 18.27 us),
    # above). Closed-loop runs gpuplan was not tuned on measured less throughput than it gave them: at
    # plan.confidence 0.9 the ceiling is planned at 70.84 x capacity_factor(0.9), at 0.5 at about the estimate.
    # 65 requests/s sit between the two (checked first: the factors come from the generated bands).
    assert capacity_factor(0.9) < 65 / 70.84 < capacity_factor(0.5)
    from gpuplan.linter import lint_bytes

    def stream(rate: float, confidence: float):
        text = (
            "version: 1\nname: at risk\nmodel: {id: llama-3.2-1b}\nserve: {context: 427, output_tokens: 202,"
            " concurrency: 400, endpoint: completions, prompt_tokens: {mean: 225}, arrival: steady,"
            f" rate_rps: {rate}, hardware: {{gpu: a100-sxm-80gb, count: 1}}}}\nplan: {{confidence: {confidence}}}\n"
        )
        result = lint_bytes("stream.yaml", text.encode())
        plan = planner_for(result.analysis.spec, default_settings()).job("serve")
        return result, plan.evaluator.evaluate(plan.evaluator.declared)

    result, declared = stream(65, 0.9)
    speed = result.analysis.serve.speed
    assert not speed.saturated and speed.stream_capacity_rps == pytest.approx(70.84, rel=1e-9)
    (finding,) = [f for f in result.findings if f.code == "GP407"]
    assert finding.pointer == "/serve/rate_rps"
    assert f"{70.84 * capacity_factor(0.9):,.2f}/s" in finding.message
    assert not declared.sound and dict(declared.meets)["arrival_rate"] is False  # the planner does not recommend it
    result, declared = stream(65, 0.5)
    assert "GP407" not in {f.code for f in result.findings} and dict(declared.meets)["arrival_rate"] is True
    # Faster than the estimate's own ceiling: GP406, not GP407 as well.
    result, _ = stream(80, 0.9)
    assert {"GP406"} <= {f.code for f in result.findings} and "GP407" not in {f.code for f in result.findings}
    # A rate under the edge draws neither.
    result, declared = stream(round(0.97 * 70.84 * capacity_factor(0.9), 2), 0.9)
    assert not {"GP406", "GP407"} & {f.code for f in result.findings} and dict(declared.meets)["arrival_rate"]


def test_a_front_end_bound_tpot_slo_points_at_replicas():
    result = _served(
        "context: 427, output_tokens: 202, concurrency: 400, endpoint: completions, prompt_tokens: {mean: 225},"
        " slo: {tpot_ms: 10}, hardware: {gpu: a100-sxm-80gb, count: 1}"
    )
    (finding,) = [f for f in result.findings if f.code == "GP404"]
    assert "(front-end-bound)" in finding.message
    assert finding.hint.startswith("more replicas")


def test_a_steady_stream_below_the_front_ends_capacity_queues_at_it(monkeypatch):
    # Half the capacity (35.42 of 70.84 requests/s): the process is an M/D/1 queue at load 0.5, a mean wait
    # of 0.5 / (2 x 0.5) / 70.84 s = 7.06 ms; its median is 0 (half the arrivals find it idle) and its p90
    # (mean / load) x ln(load / 0.1) = 14.12 ms x ln 5 = 22.7 ms, each added to the TTFT without that queue.
    import gpuplan.estimate.serving_speed as speed_module

    serve = (
        "context: 427, output_tokens: 202, concurrency: 400, endpoint: completions, prompt_tokens: {mean: 225},"
        " arrival: steady, rate_rps: 35.42, hardware: {gpu: a100-sxm-80gb, count: 1}"
    )
    queued = _served(serve).analysis.serve.speed
    monkeypatch.setattr(speed_module, "frontend_capacity", lambda *_: math.inf)
    unqueued = _served(serve).analysis.serve.speed
    mean = 0.5 / (2 * 0.5) / 70.84
    assert queued.ttft_s - unqueued.ttft_s == pytest.approx(mean, rel=1e-6)
    assert queued.ttft_median_s == pytest.approx(unqueued.ttft_median_s, rel=1e-9)
    assert queued.ttft_p90_s - unqueued.ttft_p90_s == pytest.approx(2 * mean * math.log(5), rel=1e-6)


def test_static_batching_is_capped_by_the_front_end_too():
    serve = (
        "context: 427, output_tokens: 202, concurrency: 400, endpoint: completions, prompt_tokens: {mean: 225},"
        " batching: static, engine: generic, hardware: {gpu: a100-sxm-80gb, count: 1}"
    )
    speed = _served(serve).analysis.serve.speed
    assert speed.limited_by == "front-end" and speed.requests_per_s == pytest.approx(70.84, rel=1e-9)
    # Little's law over a client's request, as in continuous batching.
    assert speed.ttft_s + 201 * speed.tpot_s == pytest.approx(400 / 70.84, rel=1e-9)


def test_a_stream_the_front_end_cannot_take_points_at_replicas():
    result = _served(
        "context: 427, output_tokens: 202, concurrency: 400, endpoint: completions, prompt_tokens: {mean: 225},"
        " arrival: steady, rate_rps: 80, slo: {ttft_ms: 500}, hardware: {gpu: a100-sxm-80gb, count: 1}"
    )
    (finding,) = [f for f in result.findings if f.code == "GP403"]
    assert "grows without bound" in finding.message and finding.hint == "more replicas"


def test_the_estimates_json_says_what_limits_the_replica():
    # The front-end-bound closed loop of PR #12287's run: what caps the batch and paces TPOT is the server's
    # front end, whose capacity is 1 / (10.2 ms + 225 x 1 us + 202 x 18.27 us) = 70.84 requests/s; the
    # high-throughput category at the engine's most sequences is capped by it too. Offline there is none.
    from gpuplan.output.estimate_json import estimate_document

    serve = (
        "context: 427, output_tokens: 202, concurrency: 400, endpoint: completions,"
        " prompt_tokens: {mean: 225}, hardware: {gpu: a100-sxm-80gb, count: 1}"
    )
    document = estimate_document(_served(serve).analysis)["serve"]
    assert (document["limited_by"], document["decode_bound"]) == ("front-end", "front-end")
    assert document["frontend_capacity_rps"] == pytest.approx(70.84, abs=0.01)
    assert document["categories"]["high-throughput"]["limited_by"] == "front-end"
    offline = estimate_document(_served(serve.replace("completions", "offline")).analysis)["serve"]
    assert offline["frontend_capacity_rps"] is None and offline["limited_by"] != "front-end"


def test_the_lone_prompt_reads_the_same_in_the_ttft_line_and_the_assumption():
    # A 1,848-token prompt of Llama-3.2-1B alone on an A100 behind completions: 32.5 ms (JSON's ttft_single_ms).
    # The TTFT line and the "steady state" assumption both say 33 ms (half up); one said 32 (half to even).
    from gpuplan.output.estimate_json import estimate_document
    from gpuplan.output.estimate_text import render_estimate

    result = _served(
        "context: 2048, output_tokens: 200, prompt_tokens: {mean: 256, p90: 512}, concurrency: 400,"
        " endpoint: completions, hardware: {gpu: a100-sxm-80gb, count: 1}"
    )
    assert estimate_document(result.analysis)["serve"]["ttft_single_ms"] == 32.5
    # The TTFT figures are over prompts of mean 256, p90 512, so both name the prompt that took 33 ms alone.
    assert dict(result.analysis.serve.assumptions)["steady state"].endswith("a 1,848-token prompt alone 33 ms")
    assert "(a 1,848-token prompt alone 33 ms;" in render_estimate(result.analysis)


def test_a_burst_that_outgrows_the_kv_cache_says_how_often_it_preempted():
    # Llama 3.1 8B on one L4 holds about 33,600 tokens of KV cache: 200 requests of 3,584 + 512 tokens cannot
    # run whole more than 8 at a time. vLLM admits by the prompt's chunk, so its burst runs more and preempts
    # as they decode; TensorRT-LLM reserves whole sequences and never preempts; a closed loop has no wave.
    serve = "context: 4096, output_tokens: 512, concurrency: 200, endpoint: offline, hardware: {gpu: l4}"
    from gpuplan.output.estimate_json import estimate_document

    vllm = _served(f"{serve}, arrival: burst", "llama-3.1-8b")
    document = estimate_document(vllm.analysis, figures_only=True)["serve"]
    assert document["preempted_sequences"] > 0 and document["limited_by"] == "kv-cache"
    assert document["running_sequences"] > document["kv_cache_tokens"] // 4096
    note = dict(vllm.analysis.serve.assumptions)["steady state"]
    assert f"the KV cache ran out: {document['preempted_sequences']:,} preemptions" in note
    trtllm = _served(f"{serve}, arrival: burst, engine: trtllm", "llama-3.1-8b")
    assert trtllm.analysis.serve.speed.preempted == 0
    closed = _served(serve, "llama-3.1-8b")
    assert estimate_document(closed.analysis, figures_only=True)["serve"]["preempted_sequences"] == 0


def test_the_burst_assumption_names_the_order_the_engine_steps_in():
    # vLLM puts prompt chunks into decode steps; SGLang runs a step of prompts alone whenever it can.
    serve = "context: 2048, output_tokens: 128, concurrency: 64, endpoint: offline, arrival: burst, hardware: {gpu: l4}"
    vllm = dict(_served(serve).analysis.serve.assumptions)["steady state"]
    sglang = dict(_served(f"{serve}, engine: sglang").analysis.serve.assumptions)["steady state"]
    assert "(decodes first, then prompt chunks in the token budget)" in vllm
    assert "(a step of prompts alone whenever one can be formed, the decodes waiting)" in sglang


@pytest.mark.parametrize("output, p90", [(2, None), (3, None), (4, None), (5, None), (4, 5), (2, 3)])
def test_a_speculative_burst_of_short_answers_has_a_tpot(output, p90):
    # EAGLE with 4 draft tokens at 0.8 acceptance yields 3.36 tokens a round: 4 tokens are 1.19 rounds,
    # which rounded to one, the first token's, and read a TPOT of 0 (any TPOT SLO passed). An answer of
    # more than one token takes at least one round after its first token.
    from conftest import make_spec

    from gpuplan.analysis import analyse

    varies = f"  output_tokens_p90: {p90}\n  prompt_tokens: {{mean: 1000}}\n" if p90 else ""
    text = (
        "version: 1\nname: s\nmodel: {id: llama-3.1-8b}\nserve:\n  context: 2048\n"
        f"  output_tokens: {output}\n{varies}  concurrency: 8\n  arrival: burst\n"
        "  speculative: {method: eagle, num_tokens: 4, acceptance_rate: 0.8}\n  hardware: {gpu: h100-sxm}\n"
    )
    speed = analyse(make_spec(text)).serve.speed
    assert speed.tpot_s > 0


@pytest.mark.parametrize("mixes", [True, False])
def test_a_lone_long_prompt_is_priced_in_one_go_as_stepping_it_would(mixes, monkeypatch):
    # A burst of 3 requests of 100,000 prompt tokens at a budget of 64 tokens a step, arriving 1 s apart:
    # each prompt is alone while it prefills (the next arrives later), so its whole chunks (1,561 of 64
    # tokens) are priced in one go. A step here costs 1 ms + 1 us a token + 10 us a decoder + 1e-12 s per
    # attention FLOP (linear in the attention, as Deployment.step is), and a chunk's attention is
    # end^2 - start^2 (additive over chunks): the wave must equal the one stepped chunk by chunk (a wave
    # this short is never cut at its event budget, where a stretch counts as one event, not as its chunks).
    import gpuplan.estimate.serving_load as serving_load

    calls = []

    def step_time(decoders: float, prefill: float, context: float, attention: float) -> float:
        calls.append(prefill)
        return 1e-3 + prefill * 1e-6 + decoders * 1e-5 + attention * 1e-12

    def run() -> Wave:
        return wave(3, 100_000, 8, 64, 16, step_time, lambda s, e: float(e * e - s * s), 1.0, mixes_prefill=mixes)

    fast = run()
    priced = len(calls)
    monkeypatch.setattr(serving_load, "STRETCH_CHUNKS", 10**9)
    stepped = run()
    # The chunks were priced in one go, not stepped, every prompt's: where prompts ride decode steps, and where
    # they do not (SGLang: the later prompts prefill alone while the first one's decodes wait; stepped, those
    # were 2 x 1,561 steps, and 131,072-token prompts at 16 tokens a step kept a plan 81 s).
    assert priced < 100 < 3 * 1500 < len(calls) - priced
    assert fast.steps == stepped.steps and fast.requests == stepped.requests
    assert [count for _, count in fast.ttfts] == [count for _, count in stepped.ttfts]
    for (a, _), (b, _) in zip(fast.ttfts, stepped.ttfts, strict=True):
        assert a == pytest.approx(b, rel=1e-9)
    assert fast.makespan == pytest.approx(stepped.makespan, rel=1e-9)
    assert fast.mean_tpot == pytest.approx(stepped.mean_tpot, rel=1e-9)


def test_a_prompt_beside_decodes_is_priced_as_stepping_it_would_at_the_decodes_context(monkeypatch):
    # Two requests of 10,000-token prompts and 2,000 out, a budget of 64, the second reaching the scheduler
    # 0.5 s after the first: by then the first decodes, and the second's chunks of 63 tokens ride its decode
    # steps, a stretch priced in one go. Here a step's time also grows by 10 us a token of the decodes' context
    # (linear, as a decode's KV read is), so the stretch must take its decodes' mean context, the one each
    # stepped step sees before it adds its token: step + (stretch - 1) / 2. At step + stretch / 2, half a
    # token too many, each step of such a stretch came out 5 us a decoder long (0.78 ms on the second TTFT).
    import gpuplan.estimate.serving_load as serving_load

    def step_time(decoders: float, prefill: float, context: float, attention: float) -> float:
        return 1e-3 + prefill * 1e-6 + decoders * (1e-5 + context * 1e-5) + attention * 1e-12

    def run() -> Wave:
        return wave(2, 10_000, 2_000, 64, 4, step_time, lambda s, e: float(e * e - s * s), admission_gap=0.5)

    priced = run()
    monkeypatch.setattr(serving_load, "STRETCH_CHUNKS", 10**9)
    stepped = run()
    assert priced.steps == stepped.steps
    for (a, _), (b, _) in zip(priced.ttfts, stepped.ttfts, strict=True):
        assert a == pytest.approx(b, rel=1e-12)
    assert priced.makespan == pytest.approx(stepped.makespan, rel=1e-12)


def test_a_pipelined_burst_cut_past_its_event_budget_continues_as_stepping_it_would(monkeypatch):
    # Llama 3.1 70B over 2 x 4 H100s (TP 2, PP 4), 3,000 requests of 1,920-token prompts and 128 out at once,
    # a budget of 2,048 tokens: cut at the event budget (1,024 events), the wave's mean and p90 TTFT are those
    # of the same wave stepped whole (3,122 steps), within 1% and 3%. Over stages the cut is floored at a stage's
    # share of a prompt (serving_load.prompt_floor: the idle step's stages' mean per budget token): an idle
    # chunk's pass through every stage, taken as one, was about 1.8 times the stepped pace and more than doubled
    # such a cut's TTFT (a review's finding). The floor is a floor of the stepped wave: its r-th first token
    # comes no sooner than r floors. And it is no lower than the prompt's GEMMs at the H100's dense peak:
    # 2 x 70.6e9 parameters x 1,920 tokens over 8 GPUs (TP 2 x PP 4) at 989 TFLOP/s = 34 ms.
    import gpuplan.estimate.serving_load as load
    from gpuplan.analysis import estimate_serve
    from gpuplan.config import default_settings
    from gpuplan.plan.configured import efficiency_of
    from tests.test_properties_plan import make_spec

    calls = []
    monkeypatch.setattr(load, "wave", lambda *args, **kwargs: calls.append((args, kwargs)) or wave(*args, **kwargs))
    document = {
        "version": 1,
        "name": "p",
        "model": {"id": "llama-3.1-70b"},
        "serve": {
            "context": 2048,
            "output_tokens": 128,
            "concurrency": 3000,
            "arrival": "burst",
            "engine": "vllm",
            "endpoint": "offline",
            "max_batched_tokens": 2048,
            "hardware": {"gpu": "h100-sxm", "count": 8, "tensor_parallel": 2, "pipeline_parallel": 4},
        },
    }
    spec = make_spec(document)
    efficiency = efficiency_of(default_settings())
    estimate_serve(spec, spec.serve, efficiency)
    args, kwargs = calls[-1]
    floor = kwargs["prompt_floor_s"]
    assert floor > 2 * 70.6e9 * 1920 / 8 / 989e12 > 0.034
    cut = wave(*args, **kwargs)  # cut at the event budget
    whole = wave(*args, **{**kwargs, "max_events": 10**7})
    expanded = sorted(value for value, count in whole.ttfts for _ in range(count))
    assert all(value >= (rank + 1) * floor * (1 - 1e-12) for rank, value in enumerate(expanded))
    assert whole.steps > 3000 > cut.steps
    assert cut.mean_ttft == pytest.approx(whole.mean_ttft, rel=0.01)
    assert cut.quantile(0.9) == pytest.approx(whole.quantile(0.9), rel=0.03)


def test_long_prompts_at_a_budget_of_one_token_are_priced_not_stepped_while_others_wait():
    # 2,000 requests of 100,000-token prompts, 2 tokens out, a budget of 1 token, one reaching the scheduler
    # every millisecond. Each prompt's whole chunks are equal one-token steps that leave no room to admit the
    # requests waiting: priced in one go (a stretch, one event), so the first request's first token comes
    # after 100,000 steps of toy_step(0, 1) = 1.5 s, 150,000 s. Stepped token by token while others waited
    # (and the event budget raised to 4 x 100,000 chunks to reach a first token), the wave priced 400,000
    # steps; a fuzz run's burst of a million 10,000,000-token prompts kept lint in it for minutes. Now at most
    # MAX_RAISED_EVENTS events, each a step or a stretch or a few steps' bookkeeping.
    from gpuplan.estimate.serving_load import MAX_RAISED_EVENTS

    priced = []

    def counted(decoders, prefill, context, attention):
        priced.append(1)
        return toy_step(decoders, prefill, context, attention)

    result = wave(2000, 100_000, 2, 1, 256, counted, no_attention, admission_gap=0.001)
    assert result.ttfts[0] == (pytest.approx(150_000.0), 1)
    assert sum(count for _, count in result.ttfts) == 2000
    assert len(priced) < 2 * MAX_RAISED_EVENTS
    # Beside decodes (a budget of 2: a decode and a prompt token a step, answers of 1,000 tokens) a prompt's
    # steps are equal too while no decode ends: priced in stretches (``test_a_prompt_beside_a_decode_...``),
    # a few events a request, the wave cut once some have first tokens and the rest extrapolated.
    priced.clear()
    beside = wave(2000, 100_000, 1000, 2, 256, counted, no_attention, admission_gap=0.001)
    assert sum(count for _, count in beside.ttfts) == 2000
    assert len(priced) < MAX_RAISED_EVENTS // 4


@pytest.mark.parametrize(("engine", "tp", "pp"), [("sglang", 1, 2), ("vllm", 1, 2), ("vllm", 2, 4), ("trtllm", 1, 2)])
def test_a_burst_of_one_request_through_stages_is_that_request_alone(tmp_path, engine, tp, pp):
    # A burst of one request on an idle deployment is one request alone. Under pipeline parallelism the wave
    # stepped each chunk of the lone prompt through every stage before the next (3,386 ms for Qwen3-32B on two
    # B200s, PP 2, on SGLang) where its chunks overlap across the stages (2,577 ms alone, as the estimate said
    # beside it): a hunt found 32 of 80 pipeline layouts apart by more than 1%, up to 3.3 x.
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "version: 1\nname: b\nmodel: {id: qwen3-32b}\nserve:\n  context: 32768\n  output_tokens: 1024\n"
        f"  concurrency: 1\n  engine: {engine}\n  arrival: burst\n"
        f"  hardware: {{gpu: b200-hgx, count: {tp * pp}, tensor_parallel: {tp}, pipeline_parallel: {pp}}}\n"
    )
    _, out, _ = run_cli("estimate", "--format", "json", str(spec))
    serve = json.loads(out)["serve"]
    assert serve["ttft_ms"] == pytest.approx(serve["ttft_single_ms"], abs=0.1)
