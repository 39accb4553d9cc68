"""Request lengths that vary (gpuplan.estimate.lengths): the lognormal's classes, worked out by hand from the
normal distribution's tables, and what a running sequence holds."""

from __future__ import annotations

import collections

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.estimate.lengths import Lengths, fixed, lognormal, lognormal_sigma, lognormal_square_mean, through


def test_the_lognormal_through_a_mean_and_its_p90():
    # p90 / mean = 450 / 200 = 2.25: ln 2.25 = 0.81093 = 1.2816 s - s^2 / 2, the smaller root
    # s = 1.2816 - sqrt(1.2816^2 - 2 x 0.81093) = 1.2816 - sqrt(0.02064) = 1.13794.
    assert lognormal_sigma(200, 450) == pytest.approx(1.13794, abs=1e-5)
    lengths = lognormal(200, 450, 10**6)
    # The shorter half: E[X; X <= median] = mean x Phi(0 - s) = 200 x Phi(-1.13794) = 200 x 0.127573 = 25.51,
    # over its share 0.5: 51 tokens. The longest 0.2%: z(0.998) = 2.87816, 1 - Phi(2.87816 - 1.13794) =
    # 1 - Phi(1.74022) = 0.040910, 200 x 0.040910 / 0.002 = 4,091 tokens.
    assert lengths.classes[0] == (0.5, 51)
    assert lengths.classes[-1] == (pytest.approx(0.002), 4091)
    assert [share for share, _ in lengths.classes] == pytest.approx([0.5, 0.25, 0.15, 0.06, 0.03, 0.008, 0.002])
    assert lengths.mean == pytest.approx(200, abs=0.5)  # each class rounded to a whole token


def test_classes_past_the_context_are_held_there_and_the_rest_keep_the_mean():
    # As above, no answer longer than 1,000: the classes from the 96th percentile on (1,018, 1,911 and 4,091
    # tokens) are held at 1,000, 0.04 x 1,000 = 40 of the mean. The four shorter classes (51.03, 155.16, 314.10,
    # 576.27 before rounding: 0.5 x 51.03 + 0.25 x 155.16 + 0.15 x 314.10 + 0.06 x 576.27 = 146.00) grow by
    # (200 - 40) / 146.00 = 1.0959: 55.9, 170.0, 344.2, 631.5.
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


def test_requests_draw_the_classes_at_their_shares_in_every_stretch():
    lengths = Lengths(((0.5, 1), (0.25, 2), (0.25, 3)))
    # frac(1/2 + k / golden ratio) for k = 0, 1, 2, 3: 0.5 (the second class, [0.5, 0.75): 0.5 is not below
    # the first's end), 0.118 (the first), 0.736 (the second), 0.354 (the first); 0.972 at k = 4, the third.
    assert [lengths.of(k) for k in range(5)] == [2, 1, 2, 1, 3]
    counts = collections.Counter(lengths.of(k) for k in range(1000))
    assert abs(counts[1] - 500) <= 2 and abs(counts[2] - 250) <= 2 and abs(counts[3] - 250) <= 2
    # and in the first hundred alone, within a few of their shares
    first = collections.Counter(lengths.of(k) for k in range(100))
    assert abs(first[1] - 50) <= 2 and abs(first[2] - 25) <= 2


def test_a_p90_at_the_mean_or_no_room_above_it_is_a_fixed_length():
    assert through(200, None, 1000) == fixed(200)
    assert through(200, 200, 1000) == fixed(200)
    assert through(200, 450, 200) == fixed(200)  # the context leaves no longer answer
    assert not fixed(200).varies and through(200, 450, 1000).varies


def test_the_square_mean_of_prompts():
    # E[P^2] = mean^2 exp(s^2): 200^2 x exp(1.13794^2) = 40,000 x 3.6500 = 146,000.
    assert lognormal_square_mean(200, 450) == pytest.approx(146000, rel=1e-3)


@given(st.integers(1, 100_000), st.floats(1.0, 5.0), st.integers(1, 400_000))
def test_the_classes_keep_the_mean_under_the_cap(mean, ratio, most):
    lengths = through(mean, mean * ratio, most)
    assert all(1 <= tokens <= max(most, mean) for _, tokens in lengths.classes)
    assert sum(share for share, _ in lengths.classes) == pytest.approx(1.0)
    if most > mean and lengths.classes[0][1] > 1:  # rounding moves each class by half a token at most (a
        assert lengths.mean == pytest.approx(mean, abs=0.5)  # class under one token is held at one)
    # Jensen: E[O^2] >= E[O]^2, so a running sequence holds at least half the mean
    assert lengths.held() >= lengths.mean / 2 * (1 - 1e-12)
