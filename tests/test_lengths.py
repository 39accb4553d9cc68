"""Request lengths that vary (gpuplan.estimate.lengths): the lognormal's classes, worked out by hand from the
normal distribution's tables, and what a running sequence holds."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.estimate.lengths import (
    Lengths,
    fixed,
    lognormal,
    lognormal_sigma,
    lognormal_square_mean,
    stated_quantile,
    through,
)


def test_the_lognormal_through_a_mean_and_its_p90():
    # p90 / mean = 450 / 200 = 2.25: ln 2.25 = 0.81093 = z s - s^2 / 2 (z = 1.281552, the normal's 90th
    # percentile), the smaller root s = 1.281552 - sqrt(1.642374 - 2 x 0.810930) = 1.281552 - sqrt(0.020514)
    # = 1.281552 - 0.143227 = 1.138325.
    assert lognormal_sigma(200, 450) == pytest.approx(1.138325, abs=1e-5)
    lengths = lognormal(200, 450, 10**6)
    # The shorter half: E[X; X <= median] = mean x Phi(0 - s) = 200 x Phi(-1.138325) = 200 x 0.127492 = 25.50,
    # over its share 0.5: 51 tokens. The longest 0.2%: z(0.998) = 2.878162, 1 - Phi(2.878162 - 1.138325) =
    # 1 - Phi(1.739837) = 0.040944, 200 x 0.040944 / 0.002 = 4,094 tokens.
    assert lengths.classes[0] == (0.5, 51)
    assert lengths.classes[-1] == (pytest.approx(0.002), 4094)
    assert [share for share, _ in lengths.classes] == pytest.approx([0.5, 0.25, 0.15, 0.06, 0.03, 0.008, 0.002])
    assert lengths.mean == pytest.approx(200, abs=0.5)  # each class rounded to a whole token


def test_classes_past_the_context_are_held_there_and_the_rest_keep_the_mean():
    # As above, no answer longer than 1,000: the classes from the 96th percentile on (1,018, 1,912 and 4,094
    # tokens) are held at 1,000, 0.04 x 1,000 = 40 of the mean. The four shorter classes (51.00, 155.11, 314.08,
    # 576.35 before rounding: 0.5 x 51.00 + 0.25 x 155.11 + 0.15 x 314.08 + 0.06 x 576.35 = 145.97) grow by
    # (200 - 40) / 145.97 = 1.0961: 55.9, 170.0, 344.3, 631.7.
    lengths = lognormal(200, 450, 1000)
    assert [tokens for _, tokens in lengths.classes] == [56, 170, 344, 632, 1000]
    assert lengths.classes[-1][0] == pytest.approx(0.04)
    assert lengths.mean == pytest.approx(200, abs=0.5)


def test_a_running_sequence_is_more_often_a_long_one():
    # Half the answers 100 tokens, half 300: a sequence caught running has made E[O^2] / (2 E[O]) =
    # (0.5 x 100^2 + 0.5 x 300^2) / (2 x 200) = 50,000 / 400 = 125 tokens, not 200 / 2 = 100.
    assert Lengths(((0.5, 100), (0.5, 300))).held() == 125
    assert fixed(200).held() == 100
    assert fixed(7).square_mean() == 49


def test_a_burst_of_any_size_draws_the_mean():
    lengths = Lengths(((0.5, 100), (0.5, 300)))
    # Three equal strata: the first third all 100, the middle third half each, (100 + 300) / 2 = 200, the
    # last all 300. The points frac(1/2 + k / golden ratio) = 0.5, 0.118, 0.736 rank request 1 first,
    # request 0 second, request 2 third.
    assert lengths.strata(3) == pytest.approx([100, 200, 300])
    three = lengths.drawn(3)
    assert [three.of(k) for k in range(3)] == [200, 100, 300] and three.total(3) == 600
    # Two requests: the shorter half and the longer; one: the mean.
    assert lengths.drawn(2).total(2) == 400 and lengths.drawn(1).total(1) == 200
    # Past 256 requests, 256 strata (128 of each length), the k-th at its point: 1,000 requests make
    # 1,000 x 200 tokens.
    many = lengths.drawn(1000)
    assert not many.exact and many.total(1000) == 200_000 and many.longest == 300
    assert abs(sum(many.of(k) for k in range(1000)) - 200_000) <= 200  # the points spread evenly


@given(st.integers(1, 10_000), st.floats(1.0, 3.0), st.integers(1, 300))
def test_every_burst_size_keeps_the_mean(mean, ratio, requests):
    lengths = through(mean, mean * ratio, 100 * mean)
    drawn = lengths.drawn(requests)
    # each request is its stratum's mean, rounded: half a token at most, and none below one token
    assert drawn.total(requests) / requests == pytest.approx(lengths.mean, abs=0.5)
    assert drawn.longest <= lengths.longest


def test_a_p90_at_the_mean_or_no_room_above_it_is_a_fixed_length():
    assert through(200, None, 1000) == fixed(200)
    assert through(200, 200, 1000) == fixed(200)
    assert through(200, 450, 200) == fixed(200)  # the context leaves no longer answer
    assert not fixed(200).varies and through(200, 450, 1000).varies


def test_the_square_mean_of_prompts():
    # E[P^2] = mean^2 exp(s^2): 200^2 x exp(1.138325^2) = 40,000 x exp(1.295784) = 40,000 x 3.65385 = 146,154.
    assert lognormal_square_mean(200, 450) == pytest.approx(146154, rel=1e-5)


@given(st.integers(1, 100_000), st.floats(1.0, 5.0), st.integers(0, 400_000))
def test_the_classes_keep_the_mean_under_the_cap(mean, ratio, room):
    # As a spec has them (GP024): the p90 at most the longest answer the context allows.
    most = math.ceil(mean * ratio) + room
    lengths = through(mean, mean * ratio, most)
    assert all(1 <= tokens <= most for _, tokens in lengths.classes)
    assert sum(share for share, _ in lengths.classes) == pytest.approx(1.0)
    # rounding moves a class by half a token at most; classes held at one token or at the cap are exact
    assert lengths.mean == pytest.approx(mean, abs=0.5)
    # Jensen: E[O^2] >= E[O]^2, so a running sequence holds at least half the mean
    assert lengths.held() >= lengths.mean / 2 * (1 - 1e-12)


def test_the_longest_of_a_batch():
    # Half the answers 100 tokens, half 300 (mean 200). The longest of n is 100 only when all n are:
    # 0.5^n; else 300. n = 2: 100 x 0.25 + 300 x 0.75 = 250; n = 3: 100 x 0.125 + 300 x 0.875 = 275.
    halves = Lengths(((0.5, 300), (0.5, 100)))  # in any order: the classes are read shortest first
    assert halves.longest_of(2) == pytest.approx(250)
    assert halves.longest_of(3) == pytest.approx(275)
    assert halves.longest_of(1) == halves.longest_of(0.5) == halves.mean == 200  # one answer: its mean
    # A fractional batch (as the KV cache sizes one): n = 1.5, 0.5^1.5 = 0.353553: 100 x 0.353553 + 300 x
    # 0.646447 = 229.29.
    assert halves.longest_of(1.5) == pytest.approx(229.289, rel=1e-5)
    assert fixed(200).longest_of(64) == 200


@given(st.integers(1, 10_000), st.floats(1.0, 3.0), st.integers(1, 4096))
def test_the_longest_of_a_batch_grows_with_it_between_the_mean_and_the_longest(mean, ratio, batch):
    lengths = through(mean, mean * ratio, 100 * mean)
    longest = lengths.longest_of(batch)
    assert lengths.mean * (1 - 1e-12) <= longest <= lengths.longest * (1 + 1e-12)
    assert lengths.longest_of(batch + 1) >= longest * (1 - 1e-12)


def test_how_far_the_longest_of_the_others_runs_past_an_answer():
    # Halves of 100 and 300 tokens, one other answer: past an answer drawn apart it runs 300 - 100 = 200 when
    # that answer is short and the other long (1/4), else 0: the median is 0, the p90 200. Three others: the
    # longest of them is 100 only with 1/8, so 200 past a short answer with 1/2 x 7/8 = 7/16: median 0
    # (9/16 wait none), p90 200. No other: nothing to wait for.
    halves = Lengths(((0.5, 100), (0.5, 300)))
    assert (halves.longest_past(1, 0.5), halves.longest_past(1, 0.9)) == (0.0, 200.0)
    assert (halves.longest_past(3, 0.5), halves.longest_past(3, 0.9)) == (0.0, 200.0)
    assert halves.longest_past(3, 0.4) == 0.0 and halves.longest_past(0, 0.9) == 0.0
    # Speculative steps: an answer of more than one token takes at least one step past its first.
    assert Lengths(((0.5, 1), (0.5, 4))).in_steps(3.36).classes == ((0.5, 1), (0.5, 2))


def test_z90_is_the_normals_own_90th_percentile():
    # Written out so that lint's start-up need not import statistics: it must be NormalDist's value, to the bit.
    from statistics import NormalDist

    from gpuplan.estimate.lengths import Z90

    assert NormalDist().inv_cdf(0.9) == Z90


def test_the_prompt_at_a_stated_quantile():
    # Mean 2,500 and p90 6,000 (a support assistant's prompts in an 8,192-token context, 512 out): the p90 is
    # the statement itself; 6,000 / 2,500 = 2.4 is beyond the widest lognormal's 2.27, so sigma is held at z90
    # = 1.28155 and the median is 2,500 exp(-1.28155^2 / 2) = 2,500 x 0.43991 = 1,099.8: 1,100.
    assert stated_quantile(2500, 6000, 0.9, 7680) == 6000
    assert stated_quantile(2500, 6000, 0.5, 7680) == 1100
    # None longer than the most: a p90 past the full prompt is read at it.
    assert stated_quantile(2500, 9000, 0.9, 7680) == 7680
    # Fixed lengths (no p90, or one at the mean): every quantile is the mean.
    assert stated_quantile(2500, None, 0.5, 7680) == stated_quantile(2500, 2500, 0.9, 7680) == 2500
    # Another share: the lognormal's own quantile, mean exp(sigma z - sigma^2 / 2); at 0.9 through (4, 8) it
    # would be 8 exactly (that is what the sigma is solved for), so 0.75: z = 0.67449, sigma 0.77550,
    # 4 exp(0.52307 - 0.30070) = 4 x 1.24905 = 4.996: 5.
    assert stated_quantile(4, 8, 0.75, 100) == 5
