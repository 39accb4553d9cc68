"""PyTorch's CUDA caching allocator, by its rules: what a sequence of allocations reserves on the device.

``torch.cuda.max_memory_allocated()`` counts the blocks tensors hold; what the GPU shows (and what an
out-of-memory error is about) is the allocator's segments, ``max_memory_reserved()``, plus memory outside
it. The allocator never hands a freed block back to the driver: it caches it for a later request that
fits, so a step reserves its live peak plus every cached block that a later, larger request could not
use. The rules below are c10/cuda/CUDACachingAllocator.cpp's (PyTorch 2.x), constants by their names:

- a request rounds up to a multiple of kMinBlockSize (512 B) (``round_size``); requests up to kSmallSize
  (1 MiB) use the small pool, larger ones the large pool, and a block never moves between pools;
- a request takes the smallest cached block of its pool that holds it (``get_free_block``: best fit),
  and splits it when the rest is worth keeping (``should_split``: more than kSmallSize left in the large
  pool, at least kMinBlockSize in the small one); otherwise the whole block is handed out;
- when no cached block holds it, a new segment is mapped (``get_allocation_size``): kSmallBuffer (2 MiB)
  for the small pool, kLargeBuffer (20 MiB) for requests under kMinLargeAlloc (10 MiB), else the request
  rounded up to kRoundLarge (2 MiB);
- a freed block merges with the free blocks beside it in its own segment (``free_block``); blocks of
  different segments never merge.

The model runs on populations: ``count`` tensors of one size taken or freed together (the tensors of one
shape in a span of layers), so a step costs the same few operations at any depth. Pieces carved out of one
cached block go back into it when their population is freed whole (their segment's neighbours are free
again); the small pool is counted as packed (its 2 MiB segments hold any mix of small blocks).

With ``expandable_segments:True`` (PYTORCH_CUDA_ALLOC_CONF) each pool is one virtual range that grows by
2 MiB pages, and when a request finds no room the allocator unmaps the free pages of the range before it
asks for more (``ExpandableSegment``, ``release_cached_blocks``): the step needs its live bytes rounded to
pages, whatever the cache held before.

Every pool is a CUDA stream's: a cached block serves only requests on the stream it was allocated on
("Once freed, blocks can be re-allocated on the same stream, but not on any other stream": the file's
header; ``BlockComparatorSize`` orders a pool by stream first and ``get_free_block``'s search key carries
the request's stream, so the search ends at the first block of another stream), and a freed block goes
back to its own stream's pool whatever stream frees it. max_memory_reserved counts every stream's
segments. Expandable segments are per stream too (``find_expandable_block`` maps and searches ranges of
the request's stream alone), but when one must grow and the device is full the allocator unmaps the free
pages of every stream's ranges (``release_cached_blocks`` -> ``release_blocks`` -> ``unmap_block``), so
what the step needs is still its live bytes, all streams', in whole pages: a range per stream and pool
only rounds apart. The default stream is stream 0; a side stream s (``take``'s ``stream``) keys its cached blocks
``size - s * STREAM_SPAN``: below every other stream's, as the pool sorts them, so best fit searches each stream's
blocks alone and the default stream's keys are its sizes, as they were.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, overload

from gpuplan.records import record

MIN_BLOCK = 512  # kMinBlockSize
SMALL_SIZE = 1 << 20  # kSmallSize: the largest small-pool request
SMALL_BUFFER = 2 << 20  # kSmallBuffer: a small-pool segment
LARGE_BUFFER = 20 << 20  # kLargeBuffer: the segment of a request under kMinLargeAlloc
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc
ROUND_LARGE = 2 << 20  # kRoundLarge: larger segments round up to this (also the expandable page)
STREAM_SPAN = 1 << 50  # the keys of one side stream's cached blocks: above any block size (a PiB)

T = TypeVar("T")
R = TypeVar("R")


def round_size(size: float) -> int:
    """``round_size``: bytes of the block a request of ``size`` bytes gets (a multiple of 512)."""
    return max(MIN_BLOCK, math.ceil(size / MIN_BLOCK) * MIN_BLOCK)


def segment_size(block: int) -> int:
    """``get_allocation_size``: bytes of the segment mapped for a block no cached block holds."""
    if block <= SMALL_SIZE:
        return SMALL_BUFFER
    if block < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return math.ceil(block / ROUND_LARGE) * ROUND_LARGE


# A carve: (hole, holes, pieces, piece, rest): ``holes`` cached blocks of ``hole`` bytes, each cut into
# ``pieces`` blocks of ``piece`` bytes with ``rest`` bytes left free (0 when the last piece took the rest
# whole, as should_split decides). A plain tuple: the planner runs thousands of these per estimate.
Carve = tuple[int, int, int, int, int]


@record
class Allocation:
    """What one population holds: where its blocks were cut from, and the bytes they hold (a rest taken
    whole counts as held, as PyTorch's allocated_bytes counts a block's whole size)."""

    carves: tuple[Carve, ...]
    held: int  # both pools
    small: int  # of which the small pool's
    stream: int = 0  # the stream it was allocated on (0: the default stream), whose pool takes it back


@record
class Tensors:
    """Tensors as the allocator sees them: (block bytes, how many) of the large pool, largest first (the
    order best fit leaves the fewest pieces in), and the small pool's bytes."""

    large: tuple[tuple[int, int], ...]
    small: int

    @classmethod
    def of(cls, tensors: list[tuple[float, int]] | tuple[tuple[float, int], ...]) -> Tensors:
        """From (bytes each, how many) pairs."""
        small, large = 0, dict[int, int]()
        for size, count in tensors:
            if count <= 0 or size <= 0:
                continue
            block = round_size(size)
            if block <= SMALL_SIZE:
                small += block * count
            else:
                large[block] = large.get(block, 0) + count
        return cls(tuple(sorted(large.items(), reverse=True)), small)


@record
class _Effect:
    """What a period of runs changed: the cached blocks by size (size, change), the counters, and how far
    live and reserved memory rose above where the period began."""

    drift: tuple[tuple[int, int], ...]
    live: int
    small_live: int
    segments: int
    small_segments: int
    reserved: int
    rise_live: int
    rise_reserved: int
    rise_small: int
    # Each side stream's (in ``CachingAllocator.side``'s order): the change of its small pool's live bytes
    # and high water, and how far its small pool's live bytes rose.
    sides: tuple[tuple[int, int, int], ...] = ()


@dataclass(slots=True)
class _SidePool:
    """A side stream's small pool (its large blocks are in ``CachingAllocator.free``, by their keys). Its
    bytes count in the allocator's totals too: its live bytes in ``live``, its high water in ``segments``,
    so the peaks read every stream's."""

    small: int = 0  # the small pool's allocated bytes on this stream
    small_high: int = 0  # its high water: its 2 MiB segments, before rounding
    window: list[int] = field(default_factory=lambda: [0])  # its highest since ``repeat`` last marked it
    ranged: bool = False  # whether it mapped a large segment (with expandable segments: a range of its own)


@dataclass(slots=True)
class _Mark:
    """One run as ``repeat`` watched it: where the allocator stood as it began (the cached blocks, the
    counters), how high memory rose during it, and what its choices hung on, by size of cached block (what
    it would have chosen alike with fewer or more blocks of that size, and what not). The allocator's
    ``watch`` while the run goes."""

    free: dict[int, int]
    live: int
    small_live: int
    segments: int
    small_segments: int
    reserved: int
    # The highest live (both pools), reserved and small-pool live bytes in the run: the allocator's
    # ``window`` while it runs (``_count`` raises it), kept as it was when the run ended.
    high: list[int]
    # Each side stream's small pool as the run began (live bytes, high water) and its window.
    sides: tuple[tuple[int, int, list[int]], ...]
    # The fewest blocks of each size it drew on that were left.
    lows: dict[int, int] = field(default_factory=dict)
    # Sizes a freed piece found too few of to merge back with: how many more there could have been and it
    # still would not have merged.
    room: dict[int, int] = field(default_factory=dict)
    # The ranges of sizes [low, high) its best-fit searches went past: every block of those sizes that
    # was cached was taken whole and more were wanted (a size absent there was skipped). Had there been
    # more of one of them at that moment, the search would have taken it instead of going on, so none may
    # grow over a period (high = SEARCHED_ALL: the search went on to new segments).
    passed: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class CachingAllocator:
    """The large pool's cached free blocks by size, and the counters PyTorch keeps (bytes)."""

    expandable: bool = False
    free: dict[int, int] = field(default_factory=dict)  # block size -> how many are cached
    sizes: list[int] = field(default_factory=list)  # the keys of ``free``, sorted (best fit)
    live: int = 0  # the large pool's allocated bytes now
    segments: int = 0  # reserved bytes of the large pool
    small_live: int = 0  # the small pool's
    small_segments: int = 0  # the small pool's highest live bytes (its 2 MiB segments, before rounding)
    peak_live: int = 0  # max_memory_allocated
    peak_reserved: int = 0  # max_memory_reserved before rounding (``reserved_peak``)
    fast_forward: bool = True  # ``repeat`` may apply the periods it finds by arithmetic
    # The highest live (both pools), reserved and small-pool live bytes since ``repeat`` last marked them.
    window: list[int] = field(default_factory=lambda: [0, 0, 0])
    watch: _Mark | None = None  # the run ``repeat`` watches
    side: dict[int, _SidePool] = field(default_factory=dict)  # the side streams', by stream
    # What one run hands the next beside the cache (an all-gathered unit that a later layer frees): the runs
    # ``repeat`` finds alike began with the same one.
    carry: Allocation | None = None

    def take(self, size: float, count: int = 1, stream: int = 0) -> Allocation:
        """``count`` tensors of ``size`` bytes each, on ``stream``."""
        if count <= 0 or size <= 0:
            return EMPTY
        block = round_size(size)
        if stream:
            if block <= SMALL_SIZE:
                return self._take_side(stream, (), block * count, 1)
            return self._take_side(stream, ((block, count),), 0, 1)
        if block <= SMALL_SIZE:
            return self._take_small(block * count)
        live = self.live
        carves: list[Carve] = []
        self._take_large(carves, block, count)
        self._count()
        return Allocation(tuple(carves), self.live - live, 0)

    def take_all(self, tensors: Tensors, times: int = 1, stream: int = 0) -> Allocation:
        """A group of tensors taken one after another, ``times`` over, on ``stream``: the large pool's by
        size, largest first, then the small pool's."""
        if not (tensors.large or tensors.small) or times <= 0:
            return EMPTY
        small = tensors.small * times
        if stream:
            return self._take_side(stream, tensors.large, small, times)
        live = self.live
        carves: list[Carve] = []
        for block, count in tensors.large:
            self._take_large(carves, block, count * times)
        self.small_live += small
        self._count()
        return Allocation(tuple(carves), self.live - live + small, small)

    def give(self, allocation: Allocation) -> None:
        """Free a population whole: its pieces merge back into the blocks they were cut from when the
        rest of each is still free (nothing else was cut from it since), else they stay apart."""
        held = allocation.held
        if not held:
            return
        if allocation.stream:
            self._give_side(allocation)
            return
        small, carves = allocation.small, allocation.carves
        self.small_live -= small
        if carves:  # none: the small pool's alone (a LoRA layer's gradients), nothing to merge
            self.live -= held - small
            self._free(carves)

    def cycle(self, tensors: Tensors, stream: int = 0) -> None:
        """Tensors taken and freed at once, as a layer's transients: ``give(take_all(tensors))`` without the
        allocation between them."""
        if stream:
            self._give_side(self._take_side(stream, tensors.large, tensors.small, 1))
            return
        live = self.live
        carves: list[Carve] = []
        for block, count in tensors.large:
            self._take_large(carves, block, count)
        self.small_live += tensors.small
        self._count()
        self.small_live -= tensors.small
        self.live = live
        self._free(carves)

    def _free(self, carves: Sequence[Carve]) -> None:
        """Give back, in order, the pieces ``carves`` cut: each merges back into its block when the block's
        rest is still cached, else the pieces are cached apart (``give``, ``cycle``)."""
        free, sizes, watch = self.free, self.sizes, self.watch
        for hole, holes, pieces, piece, rest in carves:
            if rest:
                cached = free.get(rest, 0)
                if cached >= holes:  # merge back: the rests go, the holes come back
                    left = cached - holes
                    if left:
                        free[rest] = left
                    else:
                        del free[rest]
                        sizes.remove(rest)
                    if watch is not None and (rest not in watch.lows or left < watch.lows[rest]):
                        watch.lows[rest] = left
                else:
                    if watch is not None:  # it would merge once there were ``holes`` of them (counted
                        # before this carve's own pieces join the cache: a piece may be the rest's size)
                        room, more = watch.room, holes - 1 - cached
                        if rest not in room or more < room[rest]:
                            room[rest] = more
                    hole, holes = piece, holes * pieces  # the pieces are cached apart
            if hole in free:
                free[hole] += holes
            else:
                bisect.insort(sizes, hole)
                free[hole] = holes

    def _take_large(self, carves: list[Carve], block: int, need: int, base: int = 0) -> None:
        """``need`` blocks of ``block`` bytes, their carves added to ``carves``: best fit from the cached
        blocks, smallest first (as many whole holes of a size as ``need`` fills, then one cut part way),
        then new segments for what is left. ``base``: where the keys of the stream's cached blocks start
        (0 for the default stream's; a side stream's below, ``_take_side``): the search stops at the next
        stream's keys, as ``get_free_block`` stops at another stream's block."""
        free, sizes, watch = self.free, self.sizes, self.watch
        low = bisect.bisect_left(sizes, base + block)
        # The keys to search, copied: a cut removes its hole and adds a smaller rest, neither one still to
        # search. The default stream's keys are the highest (a side stream's are negative): its search runs
        # to the end.
        for key in sizes[low:] if not base else sizes[low : bisect.bisect_left(sizes, base + STREAM_SPAN)]:
            # Split while the rest exceeds kSmallSize; a smaller rest goes with the last piece (``_carve``).
            hole = key - base
            available, per_hole = free[key], hole // block
            full = min(available, need // per_hole)
            if full:
                carves.append(self._carve(hole, full, per_hole, block, base))
                need -= full * per_hole
            if need and available > full:
                carves.append(self._carve(hole, 1, need, block, base))
                need = 0
            if not need:
                if watch is not None and hole > block:  # went past [block, hole) to this one
                    watch.passed.append((base + block, key))
                return
        if watch is not None:  # went past every size of the stream from the block's up
            watch.passed.append((base + block, base + STREAM_SPAN if base else SEARCHED_ALL))
        hole = segment_size(block)  # new segments: as many cut whole as ``need`` fills, then one part way
        per_hole = hole // block
        segments = -(-need // per_hole)
        self.segments += segments * hole
        if base:
            self.side[-base // STREAM_SPAN].ranged = True
        self._add(base + hole, segments)
        if need // per_hole:
            carves.append(self._carve(hole, need // per_hole, per_hole, block, base))
        if need % per_hole:
            carves.append(self._carve(hole, 1, need % per_hole, block, base))

    def _take_side(self, stream: int, large: tuple[tuple[int, int], ...], small: int, times: int) -> Allocation:
        """``take_all`` on a side stream: its large blocks (block bytes, how many, ``times`` over) from its own
        cached blocks (``_take_large`` from its keys' base), its ``small`` bytes packed in its own small pool."""
        pool = self.side.get(stream)
        if pool is None:
            pool = self.side[stream] = _SidePool()
        base = -stream * STREAM_SPAN
        live = self.live
        carves: list[Carve] = []
        for block, count in large:
            self._take_large(carves, block, count * times, base)
        if small:
            pool.small += small
            if pool.small > pool.small_high:  # its small segments grow: reserved bytes, as ``segments``
                self.segments += pool.small - pool.small_high
                pool.small_high = pool.small
            self.live += small
            if pool.small > pool.window[0]:
                pool.window[0] = pool.small
        self._count()
        return Allocation(tuple(carves), self.live - live, small, stream)

    def _give_side(self, allocation: Allocation) -> None:
        """``give`` of a side stream's allocation: its blocks go back to that stream's pool."""
        self.live -= allocation.held
        self.side[allocation.stream].small -= allocation.small
        if allocation.carves:
            self._free(allocation.carves)

    def repeat(self, once: Callable[[T], R], inputs: Sequence[T], keep: bool = True) -> list[R]:
        """``once(input)`` for each input in turn, as the layers of a model run one after another.

        What a run does depends on the allocator only through which sizes of block are cached (best fit
        searches them in order) and whether there are enough of each for what it draws. So once the cached
        sizes are again the ones some earlier run began with, the runs since then (a period: one layer, or
        several when blocks are cut and freed in a cycle) would repeat as they ran, for as long as the
        inputs repeat with them, no size they drew on runs out, and no size grows that a choice hung on
        there being so few of (``_Mark``): those periods are applied at once, by arithmetic, and their
        results are the period's. The answer is the one running each would give, to the byte (a property
        test holds it); only the work is less. With ``keep`` False no results are kept (runs that return
        none, millions of them)."""
        results: list[R] = []
        marks: list[_Mark] = []  # the runs since periods were last applied, the first of them run ``first``
        first = 0
        began: dict[object, list[int]] = {}  # cached sizes (and carry) -> the runs since then that began with them
        sizes = self._began()  # as the next run begins
        done = 0  # inputs run or applied
        while done < len(inputs):
            if sizes in began:
                began[sizes].append(done)
            else:
                began[sizes] = [done]
            self.watch = self._mark()
            marks.append(self.watch)
            result = once(inputs[done])
            if keep:
                results.append(result)
            done += 1
            self.watch = None
            sizes = tuple(self.sizes) if self.carry is None else self._began()
            for since in reversed(began.get(sizes, []) if self.fast_forward else []):
                if done - since > MAX_PERIOD:
                    break
                if periods := self._apply_periods(marks[since - first :], inputs, done):
                    if keep:
                        results += results[since:] * periods
                    done += (done - since) * periods
                    marks.clear()
                    began.clear()
                    first = done
                    sizes = self._began()
                    break
        return results

    def _began(self) -> object:
        """What ``repeat`` compares runs by as they begin: the cached sizes, and the carry when one is held."""
        carry = self.carry
        if carry is None:
            return tuple(self.sizes)
        return tuple(self.sizes), carry.carves, carry.held, carry.stream  # the carry's fields hash in C

    def _apply_periods(self, period: list[_Mark], inputs: Sequence[T], following: int) -> int:
        """Apply as many more runs of ``period`` as would go as it went, from input ``following`` on; how
        many periods that was. The cheap refusals come first: too few inputs left, or a size grown that a
        choice hung on (most periods tried end there), before the rest of the period's effect is summed."""
        length = len(period)
        most = (len(inputs) - following) // length
        if not most:
            return 0
        # The period began with the sizes cached now (``repeat`` tries no other): only their counts changed.
        free, now = period[0].free, self.free
        drift: tuple[tuple[int, int], ...] = ()
        if free != now:
            drift = tuple((size, change) for size in self.sizes if (change := now[size] - free[size]))
        periods = _periods_that_last(drift, period, most)
        if periods > 0:
            periods = min(periods, _periodic_length(inputs, following, length, periods * length) // length)
        if periods > 0 and len(period[0].sides) != len(self.side):  # a stream first used within the period
            return 0
        if periods > 0:
            self._advance(self._effect(period, drift), periods)
        return max(0, periods)

    def _mark(self) -> _Mark:
        """Where the allocator stands as a run begins; restarts the window of how high memory rises."""
        live, small_live = self.live, self.small_live
        reserved = live + small_live if self.expandable else self.segments + self.small_segments
        self.window = [live + small_live, reserved, small_live]
        sides: tuple[tuple[int, int, list[int]], ...] = ()
        if self.side:
            marked = []
            for pool in self.side.values():
                window = pool.window = [pool.small]
                marked.append((pool.small, pool.small_high, window))
            sides = tuple(marked)
        return _Mark(
            self.free.copy(), live, small_live, self.segments, self.small_segments, reserved, self.window, sides
        )

    def _effect(self, period: list[_Mark], drift: tuple[tuple[int, int], ...]) -> _Effect:
        """What the runs since ``period[0]`` began changed: the cached blocks by size (``drift``), each
        counter, and how far live and reserved memory rose above where the period began."""
        start = period[0]
        high_live, high_reserved, high_small = map(max, zip(*(mark.high for mark in period), strict=True))
        sides = self._side_effects(period) if self.side else ()
        return _Effect(
            drift,
            self.live - start.live,
            self.small_live - start.small_live,
            self.segments - start.segments,
            self.small_segments - start.small_segments,
            self._reserved_now() - start.reserved,
            high_live - (start.live + start.small_live),
            high_reserved - start.reserved,
            high_small - start.small_live,
            sides,
        )

    def _side_effects(self, period: list[_Mark]) -> tuple[tuple[int, int, int], ...]:
        """Each side stream's part of ``_Effect``: what its small pool's live bytes and high water changed
        since ``period[0]`` began, and how far its live bytes rose above where they began."""
        return tuple(
            (pool.small - small, pool.small_high - small_high, max(mark.sides[index][2][0] for mark in period) - small)
            for index, (pool, (small, small_high, _)) in enumerate(
                zip(self.side.values(), period[0].sides, strict=True)
            )
        )

    def _advance(self, effect: _Effect, runs: int) -> None:
        """Apply ``runs`` more runs of ``effect`` at once. The counts of blocks, the live bytes and the
        segments mapped add up run by run; each run's live bytes are the last's shifted by one run's
        change, so their highest is in the first of these runs or the last. The small pool's high water
        is a maximum, not a sum: it is the higher of where it stood and the last run's high."""
        first_live, first_small, first_reserved = self.live + self.small_live, self.small_live, self._reserved_now()
        for size, change in effect.drift:
            if change > 0:
                self._add(size, change * runs)
            else:
                self._remove(size, -change * runs)
        self.live += effect.live * runs
        self.small_live += effect.small_live * runs
        self.segments += effect.segments * runs
        shift = runs - 1
        if self.side:
            self._advance_sides(effect, runs)
        last_small = first_small + effect.small_live * shift
        self.small_segments = max(self.small_segments, first_small + effect.rise_small, last_small + effect.rise_small)
        last_live = first_live + (effect.live + effect.small_live) * shift
        self.peak_live = max(self.peak_live, first_live + effect.rise_live, last_live + effect.rise_live)
        if self.expandable:  # reserved is the live bytes: shifted run by run as they are
            last_reserved = first_reserved + effect.reserved * shift
            rise = effect.rise_reserved
            self.peak_reserved = max(self.peak_reserved, first_reserved + rise, last_reserved + rise)
        else:  # segments and the small pool's high water only grow: the highest is where the runs end
            self.peak_reserved = max(self.peak_reserved, self._reserved_now())

    def _advance_sides(self, effect: _Effect, runs: int) -> None:
        """``_advance`` of each side stream's small pool, as of the default stream's: its high water is the
        higher of where it stood and the last run's high (it is in ``segments``, which ``_advance`` added as
        if it grew alike each period)."""
        shift = runs - 1
        for pool, (small, small_high, rise) in zip(self.side.values(), effect.sides, strict=True):
            began = pool.small
            pool.small += small * runs
            high = max(pool.small_high, began + rise, began + small * shift + rise)
            self.segments += high - pool.small_high - small_high * runs
            pool.small_high = high

    def _take_small(self, held: int) -> Allocation:
        """Small-pool blocks of ``held`` bytes in all, packed into 2 MiB segments."""
        self.small_live += held
        self._count()
        return Allocation((), held, held)

    @property
    def reserved(self) -> int:
        """Bytes of the segments mapped now (both pools): the cache never unmaps one."""
        return self.segments + self.small_segments

    def _carve(self, hole: int, holes: int, pieces: int, block: int, base: int = 0) -> Carve:
        """``holes`` cached blocks of ``hole`` bytes cut into ``pieces`` blocks of ``block``, now live; ``base``:
        where the stream's keys start (``_take_large``). The carve holds keys, which ``_free`` gives back to
        that stream's pool as they are."""
        free = self.free
        key = base + hole
        rest = hole - pieces * block
        # ``_remove`` written out: the default stream's carve is the simulation's hottest call
        left = free[key] - holes
        if left:
            free[key] = left
        else:
            del free[key]
            self.sizes.remove(key)
        watch = self.watch
        if watch is not None and (key not in watch.lows or left < watch.lows[key]):
            watch.lows[key] = left
        self.live += holes * (hole - rest if rest > SMALL_SIZE else hole)
        if rest <= SMALL_SIZE:  # should_split is false: the last piece takes the rest whole
            return (key, holes, pieces, base + block, 0)
        rest += base
        if rest in free:
            free[rest] += holes
        else:
            bisect.insort(self.sizes, rest)
            free[rest] = holes
        return (key, holes, pieces, base + block, rest)

    # ``_add`` and ``_remove`` keep ``free``, ``sizes`` and the watch's lows in step; ``_free`` and ``_carve``
    # write them out: they are the hot paths of the simulation, and these were its two most frequent calls.
    def _add(self, size: int, count: int) -> None:
        free = self.free
        if size in free:
            free[size] += count
        else:
            bisect.insort(self.sizes, size)
            free[size] = count

    def _remove(self, size: int, count: int) -> None:
        free = self.free
        left = free[size] - count
        if left:
            free[size] = left
        else:
            del free[size]
            self.sizes.remove(size)
        watch = self.watch
        if watch is not None and (size not in watch.lows or left < watch.lows[size]):
            watch.lows[size] = left

    def reset_peaks(self) -> None:
        """``torch.cuda.reset_peak_memory_stats``: each peak to where it stands now (``reset_peak_stat``: peak =
        current), so the segments mapped so far stay in the reserved peak and the live bytes start again."""
        self.peak_live = self.live + self.small_live
        self.peak_reserved = self._reserved_now()

    def reserved_peak(self) -> int:
        """max_memory_reserved: the highest reserved bytes, with the small pool's (and, expandable, both
        pools') bytes in whole 2 MiB segments or pages. The rounding is applied here, once, not as the
        step runs, so that layer after layer has the same effect (``repeat``); it adds under 2 MiB (two
        pages with expandable segments, one per pool) to what rounding each moment would give."""
        if self.expandable:  # and a page for each side stream's range and small pool: each rounds apart
            pages = -(-self.peak_reserved // ROUND_LARGE) + (1 if self.small_segments else 0)
            pages += sum(pool.ranged + (pool.small_high > 0) for pool in self.side.values())
            return pages * ROUND_LARGE
        small = -(-self.small_segments // SMALL_BUFFER) * SMALL_BUFFER - self.small_segments
        for pool in self.side.values():
            small += -(-pool.small_high // SMALL_BUFFER) * SMALL_BUFFER - pool.small_high
        return self.peak_reserved + small

    def _reserved_now(self) -> int:
        """Reserved bytes now, before rounding (``reserved_peak``)."""
        if self.expandable:  # free pages of every pool and stream are unmapped before one grows: the live bytes
            return self.live + self.small_live
        return self.reserved

    def _count(self) -> None:
        """Raise the peaks and the window to where memory stands now (``_reserved_now`` written out: this
        runs after every take)."""
        small_live = self.small_live
        live = self.live + small_live
        if live > self.peak_live:
            self.peak_live = live
        if small_live > self.small_segments:  # the small pool's high water (its segments, unrounded)
            self.small_segments = small_live
        reserved = live if self.expandable else self.segments + self.small_segments
        if reserved > self.peak_reserved:
            self.peak_reserved = reserved
        window = self.window
        if live > window[0]:
            window[0] = live
        if reserved > window[1]:
            window[1] = reserved
        if small_live > window[2]:
            window[2] = small_live


EMPTY = Allocation((), 0, 0)


class Alike(Sequence[None]):
    """``length`` inputs to ``repeat`` that are all alike (None), for runs that read none, without a list of them: a
    ZeRO-3 step's sub-groups are the partition over 1e9 elements, millions of them for the largest models."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length

    @overload
    def __getitem__(self, index: int) -> None: ...
    @overload
    def __getitem__(self, index: slice) -> Alike: ...
    def __getitem__(self, index: int | slice) -> Alike | None:
        if isinstance(index, slice):
            return Alike(len(range(*index.indices(self.length))))
        if not -self.length <= index < self.length:
            raise IndexError(index)
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Alike) and other.length == self.length


# The longest period ``repeat`` looks for, in runs: cycles seen in model steps are one layer, two, or the
# few layers it takes to cut a cached block down (eight in the corpus); a longer period would cost more to
# check than running it.
MAX_PERIOD = 16
SEARCHED_ALL = 1 << 62  # the end of a search's range that went on to new segments (above any block size)


def _periods_that_last(drift: tuple[tuple[int, int], ...], period: list[_Mark], most: int) -> int:
    """How many more times a period would run as it did (at most ``most``), ``drift`` the change it made
    to the count of each cached size: a size it draws down lasts while what is left covers a period's
    draw (its fewest blocks sink by the period's change each time round); a size it grows may grow while
    no search of any of its runs went past it and a merge that found too few of it still would
    (``_Mark``). Never below 0."""
    limits = [most]
    passed: list[tuple[int, int]] | None = None  # of all the period's runs, gathered once a size grows
    for size, change in drift:
        if change < 0:
            if lows := [mark.lows[size] for mark in period if size in mark.lows]:
                limits.append(min(lows) // -change)
            continue
        if passed is None:
            passed = [span for mark in period for span in mark.passed]
        if any(low <= size < high for low, high in passed):
            return 0
        if rooms := [mark.room[size] for mark in period if size in mark.room]:
            limits.append(min(rooms) // change)
    return max(0, min(limits))


def _periodic_length(inputs: Sequence[T], start: int, period: int, most: int) -> int:
    """How many of ``inputs`` from ``start`` on (at most ``most``) repeat the ones ``period`` before them,
    in a row."""
    end = min(len(inputs), start + most)
    if inputs[start:end] == inputs[start - period : end - period]:  # most do, to the end: one comparison
        return end - start
    count = 0
    for index in range(start, end):
        if inputs[index] != inputs[index - period]:
            break
        count += 1
    return count
