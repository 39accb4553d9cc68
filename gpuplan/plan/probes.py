"""The two searches over replica counts that the planner steps through one probe at a time.

Each finds the smallest count in a range that passes a test, and can be set aside between probes, so that
a cost-ordered search advances only the families whose next count could still be the cheapest.
"""

from __future__ import annotations

from collections.abc import Callable


class Galloping:
    """The smallest n in [low, high] with ok(n), for ok monotone (False ... False True ... True), or None.

    An exponential search taken one probe per ``step``: low, low + 1, low + 3, low + 7, ... until a
    probe passes, then a binary search between the last failing probe and it (Bentley and Yao 1976). The
    memory bounds that give ``low`` are tight, so the answer is usually ``low`` itself (one probe) or
    just above it; a binary search over the whole range would probe about log2(high - low) counts for
    each. A cost-ordered search can set a family aside between steps: ``low`` never exceeds the answer."""

    def __init__(self, low: int, high: int, ok: Callable[[int], bool]) -> None:
        self.low, self.high, self.ok = low, high, ok
        self.done = low > high
        self.result: int | None = None
        self._start = low
        self._offset = 0  # the next probe's distance from the start while galloping: 0, 1, 3, 7, ...
        self._passing: int | None = None  # the smallest count found passing (then the search bisects)

    def step(self) -> None:
        if self.done:
            return
        if self._passing is None:
            probe = min(self._start + self._offset, self.high)
            self._offset = 2 * self._offset + 1
        else:
            probe = (self.low + self._passing) // 2
        if self.ok(probe):
            self._passing = probe
        else:
            self.low = probe + 1
        if self._passing is not None and self.low >= self._passing:
            self.done, self.result = True, self._passing
        elif self.low > self.high:
            self.done = True

    def run(self) -> int | None:
        while not self.done:
            self.step()
        return self.result


class Scan:
    """The smallest n in [low, high] with ok(n), for any ok, or None: one probe per ``step``, in ascending
    order, so that a cost-ordered search probes a family only while its next count could still win.
    ``low`` is the next count to probe and never exceeds the answer."""

    def __init__(self, low: int, high: int, ok: Callable[[int], bool]) -> None:
        self.low, self.high, self.ok = low, high, ok
        self.done = low > high
        self.result: int | None = None

    def step(self) -> None:
        if self.done:
            return
        if self.ok(self.low):
            self.done, self.result = True, self.low
            return
        self.low += 1
        self.done = self.low > self.high

    def run(self) -> int | None:
        while not self.done:
            self.step()
        return self.result
