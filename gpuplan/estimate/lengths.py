"""Request lengths that vary: a lognormal through a mean and a 90th percentile, cut into the classes a
scheduler simulation gives its requests, and the moments the steady states read.

- **The lognormal** through (mean, p90): its mean is exp(mu + sigma^2 / 2), so ln(p90 / mean) = z90 sigma -
  sigma^2 / 2, whose smaller root is sigma. A p90 beyond the lognormal's reach (more than 2.27 x the mean,
  where the root is z90) is held at the widest one. E[X^2] = mean^2 exp(sigma^2).
- **The classes**: the lognormal cut at the quantiles ``CUTS``, finer toward the tail (the few longest
  requests decide when a burst ends, with few sequences left to batch), each class the mean of its share:
  E[X; X <= x_q] = mean Phi(z_q - sigma) (the lognormal's partial expectation: Johnson, Kotz and
  Balakrishnan, *Continuous Univariate Distributions*, vol. 1, ch. 14), so the share between quantiles a and
  b has mean x (Phi(z_b - sigma) - Phi(z_a - sigma)) / (b - a). A class longer than the context allows is
  held at that length, and the others scaled to keep the stated mean.
- **Which request has which length**: the k-th request draws the class holding frac(1/2 + k / golden ratio)
  (a Weyl sequence, the most evenly spread of its kind: Kuipers and Niederreiter, *Uniform Distribution of
  Sequences*, 1974, ch. 1), so every stretch of arrivals holds the classes at about their shares, and the
  estimate stays deterministic.
- **What a running sequence holds**: a steady state catches a request in proportion to how long it runs,
  one decode step a token, so a sequence seen decoding has made E[O^2] / (2 E[O]) tokens on average, not
  E[O] / 2 (the renewal process's mean age at a random time: Feller, *An Introduction to Probability Theory
  and Its Applications*, vol. 2, XI.4): long answers hold the KV cache for longer.
"""

from __future__ import annotations

import functools
import itertools
import math
from statistics import NormalDist

from gpuplan.records import record

Z90 = 1.2816  # standard normal 90th percentile
# Quantiles the classes are cut at: halves, then ever finer shares of the tail (the last class is the longest
# 0.2%: in a burst of a thousand requests, two of them).
CUTS = (0.5, 0.75, 0.9, 0.96, 0.99, 0.998)
GOLDEN = (math.sqrt(5) - 1) / 2  # 1 / golden ratio
_NORMAL = NormalDist()


def lognormal_sigma(mean: float, p90: float) -> float:
    """The sigma of the lognormal through ``mean`` and ``p90`` (module docstring); 0 for a fixed length."""
    ratio = math.log(max(p90, mean) / mean) if mean > 0 else 0.0
    root = Z90 * Z90 - 2 * ratio
    return Z90 - math.sqrt(root) if root > 0 else Z90


def lognormal_square_mean(mean: float, p90: float) -> float:
    """E[X^2] of the lognormal through ``mean`` and ``p90`` (attention is quadratic in a prompt's length)."""
    sigma = lognormal_sigma(mean, p90)
    return mean * mean * math.exp(sigma * sigma)


@record
class Lengths:
    """Request lengths as classes: (share of the requests, tokens), the shares summing to 1."""

    classes: tuple[tuple[float, int], ...]

    @property
    def mean(self) -> float:
        return sum(share * tokens for share, tokens in self.classes)

    @property
    def longest(self) -> int:
        return max(tokens for _, tokens in self.classes)

    @property
    def varies(self) -> bool:
        return len(self.classes) > 1

    def square_mean(self) -> float:
        return sum(share * tokens * tokens for share, tokens in self.classes)

    def held(self) -> float:
        """Tokens a running sequence has made on average, caught in proportion to its run: E[L^2] / (2 E[L])."""
        return self.square_mean() / (2 * self.mean)

    def of(self, k: int) -> int:
        """The length of the ``k``-th request (0 first) of a stream (module docstring)."""
        point = (0.5 + k * GOLDEN) % 1.0
        for share, tokens in self.classes:
            point -= share
            if point < 0:
                return tokens
        return self.classes[-1][1]  # the shares' float sum a hair short of 1

    def in_steps(self, tokens_per_step: float) -> Lengths:
        """The same requests counted in decode steps that yield ``tokens_per_step`` tokens each (speculation)."""
        if tokens_per_step == 1:
            return self
        return Lengths(tuple((share, max(1, round(tokens / tokens_per_step))) for share, tokens in self.classes))


def through(mean: int, p90: float | None, most: int) -> Lengths:
    """The lengths a spec states by a mean and a 90th percentile (none or at most the mean: fixed), none above
    ``most``."""
    mean = max(1, mean)
    return lognormal(mean, p90, most) if p90 is not None and p90 > mean else fixed(mean)


def fixed(tokens: int) -> Lengths:
    """Every request the same length."""
    return Lengths(((1.0, tokens),))


@functools.lru_cache(maxsize=256)  # a planner prices many layouts of one workload
def lognormal(mean: int, p90: float, most: int) -> Lengths:
    """The classes of the lognormal through ``mean`` and ``p90`` (module docstring), none above ``most``;
    a fixed length where the p90 is the mean (or ``most`` leaves no room above it)."""
    sigma = lognormal_sigma(mean, p90)
    if sigma <= 0 or most <= mean:
        return fixed(min(mean, most) if most >= 1 else mean)
    edges = (0.0, *CUTS, 1.0)
    below = [0.0, *(_NORMAL.cdf(_NORMAL.inv_cdf(q) - sigma) for q in CUTS), 1.0]
    shares = [high - low for low, high in itertools.pairwise(edges)]
    means = [mean * (b - a) / share for (a, b), share in zip(itertools.pairwise(below), shares, strict=True)]
    # The classes above ``most`` are held there; the others grow to keep the stated mean (a lognormal is only
    # the shape of traffic whose answers never outgrow the context), until none grows past it.
    held = [False] * len(means)
    scale = 1.0
    while True:
        capped = sum(share * most for share, at in zip(shares, held, strict=True) if at)
        free = sum(share * value for share, value, at in zip(shares, means, held, strict=True) if not at)
        scale = (mean - capped) / free if free > 0 else 1.0
        over = [not at and value * scale > most for value, at in zip(means, held, strict=True)]
        if not any(over):
            break
        held = [at or grows for at, grows in zip(held, over, strict=True)]
    classes: list[tuple[float, int]] = []
    for share, value, at in zip(shares, means, held, strict=True):
        tokens = most if at else min(most, max(1, round(value * scale)))
        if classes and classes[-1][1] == tokens:  # a cap or rounding that makes two classes one
            classes[-1] = (classes[-1][0] + share, tokens)
        else:
            classes.append((share, tokens))
    return Lengths(tuple(classes))
