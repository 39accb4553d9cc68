"""The root the speed model's steady state is found at: a share in [0, 1] where a balance changes sign."""

from __future__ import annotations

from collections.abc import Callable

# The steady state's root: numerical settings, not measured figures. The decoding share phi lies in [0, 1];
# the bracket is narrowed until it is PHI_TOLERANCE wide (a TPOT and a prefill time exact to about that
# relative amount); false position with the Illinois step needs some 10-30 evaluations for it, and the
# bound on steps is never reached (bisection alone would be done in 40).
PHI_TOLERANCE = 1e-9
ROOT_STEPS = 100


def bracketed_root(function: Callable[[float], float], low: float, high: float) -> float:
    """A root of ``function`` in [low, high], where it is >= 0 at low and <= 0 at high (Illinois method),
    always one of the points it evaluated ``function`` at.

    False position with the Illinois halving of a stale end (Dowell and Jarratt 1971): the bracket always
    holds a sign change, so the answer is within PHI_TOLERANCE of one, and convergence is superlinear.
    At a jump of the function (a prompt crossing into one more chunk) it is the jump's location, taken
    on its non-negative side: beyond a jump to where the others' prompts fill the token budget, the
    prefill queue never drains, and the steady state is the last share before it (a closed loop of
    sequences always drains; only the queueing formula has no finite value there)."""
    f_low, f_high = function(low), function(high)
    if f_low <= 0:
        return low
    if f_high >= 0:
        return high
    side = 0
    for _ in range(ROOT_STEPS):
        middle = (low * f_high - high * f_low) / (f_high - f_low)
        if not low < middle < high or high - low <= PHI_TOLERANCE:
            middle = (low + high) / 2
        f_middle = function(middle)
        if f_middle == 0 or high - low <= PHI_TOLERANCE:
            return middle if f_middle >= 0 else low
        if f_middle > 0:
            low, f_low = middle, f_middle
            if side == 1:
                f_high /= 2
            side = 1
        else:
            high, f_high = middle, f_middle
            if side == -1:
                f_low /= 2
            side = -1
    while high - low > PHI_TOLERANCE:  # false position stalled for ROOT_STEPS: halve the bracket to the tolerance
        middle = (low + high) / 2
        f_middle = function(middle)
        if f_middle == 0:
            return middle
        low, high = (middle, high) if f_middle > 0 else (low, middle)
    return low
