"""Request lengths that vary: a lognormal through a mean and a 90th percentile, cut into the classes a
scheduler simulation gives its requests, and the moments the steady states read.

- **The lognormal** through (mean, p90): its mean is exp(mu + sigma^2 / 2), so ln(p90 / mean) = z90 sigma -
  sigma^2 / 2, whose smaller root is sigma: the least spread lognormal through both (the larger root passes
  through them too, with its median far below the mean and a heavier tail, a shape the two figures do not
  ask for). A p90 beyond the lognormal's reach (more than 2.27 x the mean, where the root is z90) is held at
  the widest one, which the assumption line says. E[X^2] = mean^2 exp(sigma^2).
- **The classes**: the lognormal cut at the quantiles ``CUTS``, finer toward the tail (the few longest
  requests decide when a burst ends, with few sequences left to batch), each class the mean of its share:
  E[X; X <= x_q] = mean Phi(z_q - sigma) (the lognormal's partial expectation: Johnson, Kotz and
  Balakrishnan, *Continuous Univariate Distributions*, vol. 1, ch. 14), so the share between quantiles a and
  b has mean x (Phi(z_b - sigma) - Phi(z_a - sigma)) / (b - a). A class longer than the context allows is
  held at that length, one shorter than a token at one, and the others scaled to keep the stated mean.
- **Which request has which length** (``Lengths.drawn``): a burst of n requests is cut into n equal strata
  of the classes' distribution (at most ``STRATA``), each request the mean of its stratum, so any n keeps the
  mean (two requests: the shorter half's mean and the longer half's). The k-th request takes the stratum
  that frac(1/2 + k / golden ratio) ranks it to, a Weyl sequence (the most evenly spread of its kind:
  Kuipers and Niederreiter, *Uniform Distribution of Sequences*, 1974, ch. 1), so every stretch of arrivals
  holds the lengths at about their shares, and the estimate stays deterministic. Past ``STRATA`` requests
  the k-th takes the stratum holding that point itself: the sequence spreads evenly over the strata.
- **What a running sequence holds**: a steady state catches a request in proportion to how long it runs,
  one decode step a token, so a sequence seen decoding has made E[O^2] / (2 E[O]) tokens on average, not
  E[O] / 2 (the renewal process's mean age at a random time: Feller, *An Introduction to Probability Theory
  and Its Applications*, vol. 2, XI.4): long answers hold the KV cache for longer.
"""

from __future__ import annotations

import functools
import itertools
import math

from gpuplan.records import record

# The standard normal's 90th percentile, statistics.NormalDist().inv_cdf(0.9) to the last bit (a test holds
# it there): written out, as importing statistics would cost lint's start-up some 10 ms (its random and
# fractions), where only answers that vary need the normal's functions (``lognormal`` imports it then).
Z90 = 1.2815515655446008
P90 = 0.9  # the share of the requests a stated p90 (and a quoted p90 TTFT) is the quantile of
MEDIAN = 0.5
WIDEST_P90_RATIO = math.exp(Z90 * Z90 / 2)  # 2.27: the p90 over the mean of the widest lognormal (sigma = z90)
# Quantiles the classes are cut at: halves, then ever finer shares of the tail (the last class is the longest
# 0.2%: in a burst of a thousand requests, two of them).
CUTS = (0.5, 0.75, 0.9, 0.96, 0.99, 0.998)
GOLDEN = (math.sqrt(5) - 1) / 2  # 1 / golden ratio
STRATA = 256  # the most strata a burst's lengths are cut into: some dozen distinct lengths, whatever the burst


def lognormal_sigma(mean: float, p90: float) -> float:
    """The sigma of the lognormal through ``mean`` and ``p90`` (module docstring); 0 for a fixed length."""
    ratio = math.log(max(p90, mean) / mean) if mean > 0 else 0.0
    root = Z90 * Z90 - 2 * ratio
    return Z90 - math.sqrt(root) if root > 0 else Z90


def stated_quantile(mean: int, p90: float | None, share: float, most: int) -> int:
    """The length at the ``share`` quantile of lengths stated by a mean and a p90 (``through``), none above
    ``most``: at 0.9 the stated p90 itself (where it is beyond the widest lognormal's reach, the statement
    rather than the lognormal), elsewhere the lognormal's, mean exp(sigma z - sigma^2 / 2) (the median: z = 0)."""
    p90 = max(p90 or mean, mean)
    if share == P90:
        at = p90
    else:
        sigma = lognormal_sigma(mean, p90)
        z = 0.0
        if share != MEDIAN:  # the median's z is 0
            from statistics import NormalDist  # here, not at import: see Z90

            z = NormalDist().inv_cdf(share)
        at = mean * math.exp(sigma * z - sigma * sigma / 2)
    return max(1, min(most, round(at)))


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

    def _shortest_first(self) -> list[tuple[float, int]]:
        return sorted(self.classes, key=lambda item: item[1])

    def _longest_masses(self, count: float) -> list[tuple[float, int]]:
        """(P(M = t), t) of the longest M of ``count`` independent lengths, shortest first: P(M <= x) =
        F(x)^count (the largest order statistic), so P(M = t_i) = F_i^count - F_(i-1)^count. ``count`` may
        be fractional (a batch the KV cache sizes)."""
        masses, below, cumulative = [], 0.0, 0.0
        for share, tokens in self._shortest_first():
            cumulative = min(1.0, cumulative + share)
            at = cumulative**count
            masses.append((at - below, tokens))
            below = at
        return masses

    def longest_of(self, count: float) -> float:
        """The mean of the longest of ``count`` independent lengths (``_longest_masses``); one length or
        fewer: the mean."""
        if count <= 1 or not self.varies:
            return self.mean
        return sum(mass * tokens for mass, tokens in self._longest_masses(count))

    def longest_past(self, count: float, share: float) -> float:
        """The ``share`` quantile (nearest rank) of max(0, M - X): how far the longest of ``count`` other
        lengths M (``_longest_masses``) runs past one more, X, drawn apart; 0 with no others. Over the
        classes' pairs: X's share times M's mass."""
        if count <= 0:
            return 0.0
        longest = self._longest_masses(count)
        past = sorted((max(0.0, float(m - x)), p * q) for q, x in self._shortest_first() for p, m in longest)
        reached = 0.0
        for value, mass in past:
            reached += mass
            if reached >= share - 1e-12:
                return value
        return past[-1][0]

    def strata(self, count: int) -> list[float]:
        """The mean length of each of ``count`` equal strata of the classes' distribution, shortest first:
        they average to ``mean`` exactly (the classes' step function integrated over each stratum)."""
        out, index, start = [], 0, 0.0  # the class the next stratum starts in, and where that class starts
        for stratum in range(count):
            low, high = stratum / count, (stratum + 1) / count
            total = 0.0
            while index < len(self.classes):
                share, tokens = self.classes[index]
                end = start + share if index < len(self.classes) - 1 else 1.0
                total += tokens * max(0.0, min(high, end) - max(low, start))
                if end > high:
                    break
                index, start = index + 1, end
            out.append(total * count)
        return out

    def drawn(self, requests: int) -> Drawn:
        """The lengths of a burst of ``requests`` (module docstring)."""
        if not self.varies:
            return Drawn((self.classes[0][1],), exact=False)  # every request alike
        count = min(requests, STRATA)
        means = [max(1, round(value)) for value in self.strata(count)]
        if requests > STRATA:
            return Drawn(tuple(means), exact=False)
        points = sorted(range(requests), key=lambda k: (0.5 + k * GOLDEN) % 1.0)
        table = [0] * requests
        for rank, k in enumerate(points):
            table[k] = means[rank]
        return Drawn(tuple(table), exact=True)

    def in_steps(self, tokens_per_step: float) -> Lengths:
        """The same requests counted in decode steps that yield ``tokens_per_step`` tokens each (speculation)."""
        if tokens_per_step == 1:
            return self
        return Lengths(tuple((share, whole_steps(tokens / tokens_per_step, tokens)) for share, tokens in self.classes))


@record
class Drawn:
    """Each request's length in a burst: the table itself (``exact``, one a request), or its strata, which
    the k-th request of a longer burst takes by its point frac(1/2 + k / golden ratio)."""

    table: tuple[int, ...]
    exact: bool

    def of(self, k: int) -> int:
        if self.exact:
            return self.table[k]
        return self.table[int((0.5 + k * GOLDEN) % 1.0 * len(self.table))]

    @property
    def longest(self) -> int:
        return max(self.table)

    def total(self, requests: int) -> float:
        """The tokens ``requests`` requests make: the table's sum, or the strata's mean times the requests
        (past a few hundred requests the points spread evenly over the strata)."""
        if self.exact:
            return float(sum(self.table[:requests]))
        return requests * sum(self.table) / len(self.table)


def whole_steps(steps: float, tokens: float) -> int:
    """The decode steps (speculative rounds) an answer of ``tokens`` tokens takes, ``steps`` of them on
    average, whole: at least one, and one past its first token's where it has more than one token (rounded
    to none, a short answer's rounds read a TPOT of 0)."""
    return max(1 if tokens <= 1 else 2, round(steps))


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
    from statistics import NormalDist  # here, not at import: see Z90

    normal = NormalDist()
    below = [0.0, *(normal.cdf(normal.inv_cdf(q) - sigma) for q in CUTS), 1.0]
    shares = [high - low for low, high in itertools.pairwise(edges)]
    means = [mean * (b - a) / share for (a, b), share in zip(itertools.pairwise(below), shares, strict=True)]
    # A class is held at ``most`` when it would outgrow the context (a lognormal is only the shape of traffic
    # whose answers never outgrow it) and at one token when it would fall below one (no answer is shorter);
    # the others scale to keep the stated mean, until no class crosses a bound. Each round holds at least
    # one more class, so it ends within as many rounds as there are classes.
    held: list[int | None] = [None] * len(means)  # the length a class is held at, or None
    scale = 1.0
    while True:
        fixed_part = sum(share * at for share, at in zip(shares, held, strict=True) if at is not None)
        free = sum(share * value for share, value, at in zip(shares, means, held, strict=True) if at is None)
        scale = max(0.0, mean - fixed_part) / free if free > 0 else 1.0
        bounded = [
            (most if value * scale > most else 1 if value * scale < 1 else None) if at is None else at
            for value, at in zip(means, held, strict=True)
        ]
        if bounded == held:
            break
        held = bounded
    classes: list[tuple[float, int]] = []
    for share, value, at in zip(shares, means, held, strict=True):
        tokens = at if at is not None else min(most, max(1, round(value * scale)))
        if classes and classes[-1][1] == tokens:  # bounds or rounding that make two classes one
            classes[-1] = (classes[-1][0] + share, tokens)
        else:
            classes.append((share, tokens))
    return Lengths(tuple(classes))


def held_tokens(prompt: float, outputs: Lengths, whole: bool) -> float:
    """KV tokens a running sequence holds on average: its prompt and the tokens it has made, a sequence
    caught in proportion to its run (``Lengths.held``); where the engine reserves a sequence's whole length
    up front (``whole``), that length, in the same proportion: E[O^2] / E[O] = 2 x held."""
    return prompt + outputs.held() * (2 if whole else 1)
