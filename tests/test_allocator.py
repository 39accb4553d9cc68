"""The caching allocator's model (gpuplan/estimate/allocator.py), on hand-worked sequences, and what it adds
to a training step's memory (training_step.SimulatedStep): device >= reserved >= allocated, by construction of
the three figures and never by a negative cache."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from test_properties_memory import FIELD_VALUES, varied_setups
from training_jobs import training_setup, vary

from gpuplan.analysis import training_setup as spec_training_setup
from gpuplan.catalog import get_model
from gpuplan.estimate import training_memory, training_step
from gpuplan.estimate.allocator import (
    STREAM_SPAN,
    Alike,
    Allocation,
    CachingAllocator,
    Tensors,
    round_size,
    segment_size,
)
from gpuplan.estimate.training_memory import estimate_training
from gpuplan.linter import LintOptions, lint_bytes
from tests.tiny_architectures import TINY

MIB = 2**20
RECORDS = Path(__file__).parent.parent / "benchmarks" / "data" / "published_finetune_peaks.yaml"


def test_requests_round_to_512_bytes_and_segments_by_pool():
    # round_size: up to the next multiple of kMinBlockSize (512 B), never below it.
    assert [round_size(n) for n in (1, 512, 513, 3000)] == [512, 512, 1024, 3072]
    # get_allocation_size: a small-pool block (<= 1 MiB) maps a 2 MiB segment; up to 10 MiB a 20 MiB one;
    # from kMinLargeAlloc (10 MiB) on, the block rounded up to 2 MiB.
    assert segment_size(MIB) == 2 * MIB
    assert segment_size(MIB + 512) == 20 * MIB
    assert segment_size(10 * MIB) == 10 * MIB
    assert segment_size(11 * MIB) == 12 * MIB


def test_a_freed_block_serves_a_request_of_its_size_again():
    cache = CachingAllocator()
    cache.give(cache.take(100 * MIB))
    cache.take(100 * MIB)
    assert (cache.peak_live, cache.reserved_peak()) == (100 * MIB, 100 * MIB)


def test_a_smaller_freed_block_cannot_serve_a_larger_request():
    # 64 MiB cached, 100 MiB asked: a new 100 MiB segment beside the cached one (164 MiB reserved), while
    # at most 100 MiB is ever live: 64 MiB of cache above the live peak.
    cache = CachingAllocator()
    cache.give(cache.take(64 * MIB))
    cache.take(100 * MIB)
    assert (cache.peak_live, cache.reserved_peak()) == (100 * MIB, 164 * MIB)


def test_a_larger_cached_block_is_split_and_keeps_a_rest_over_1_mib():
    # A cached 100 MiB block serves two 40 MiB requests (100 // 40 = 2) and keeps 20 MiB free: nothing new
    # is mapped.
    cache = CachingAllocator()
    cache.give(cache.take(100 * MIB))
    cache.take(40 * MIB, 2)
    assert (cache.peak_live, cache.reserved_peak()) == (100 * MIB, 100 * MIB)
    assert cache.live == 80 * MIB and cache.free == {20 * MIB: 1}


def test_a_rest_of_at_most_1_mib_goes_with_the_block():
    # should_split is false when 1 MiB or less would be left: the cached 40 MiB block (a 40 MiB segment, a
    # multiple of 2 MiB) is handed out whole for a 39.5 MiB request, and PyTorch's allocated bytes count all
    # 40 MiB. A 38.5 MiB request leaves 1.5 MiB: that is split off and stays free.
    cache = CachingAllocator()
    cache.give(cache.take(40 * MIB))
    cache.give(cache.take(39.5 * MIB))
    assert cache.peak_live == 40 * MIB and cache.free == {40 * MIB: 1}
    cache.take(38.5 * MIB)
    assert cache.live == 38.5 * MIB and cache.free == {int(1.5 * MIB): 1}


def test_pieces_merge_back_into_their_block_once_freed():
    # Two 40 MiB pieces of a cached 100 MiB block, freed while the 20 MiB rest is still free, merge into the
    # 100 MiB block again, which then holds a 100 MiB request: 100 MiB reserved in all.
    cache = CachingAllocator()
    cache.give(cache.take(100 * MIB))
    cache.give(cache.take(40 * MIB, 2))
    cache.take(100 * MIB)
    assert cache.reserved_peak() == 100 * MIB


def test_pieces_stay_apart_while_the_rest_of_their_block_is_in_use():
    # As above, but the 20 MiB rest is taken before the pieces are freed: they come back as two 40 MiB
    # blocks, and an 80 MiB request maps a new segment: 100 + 80 = 180 MiB reserved.
    cache = CachingAllocator()
    cache.give(cache.take(100 * MIB))
    pieces = cache.take(40 * MIB, 2)
    cache.take(20 * MIB)
    cache.give(pieces)
    assert cache.free == {40 * MIB: 2}
    cache.take(80 * MIB)
    assert cache.reserved_peak() == 180 * MIB


def test_mid_sized_requests_share_20_mib_segments():
    # Six 4 MiB requests: a 20 MiB segment holds five (20 // 4, no rest), the sixth maps a second one and
    # leaves 16 MiB of it free: 40 MiB reserved for 24 MiB live.
    cache = CachingAllocator()
    cache.take(4 * MIB, 6)
    assert (cache.live, cache.segments, cache.free) == (24 * MIB, 40 * MIB, {16 * MIB: 1})


def test_small_requests_pack_into_2_mib_segments():
    cache = CachingAllocator()
    cache.take(1000, 3)  # 3 x 1,024 B blocks in one 2 MiB segment
    assert (cache.small_live, cache.reserved_peak()) == (3072, 2 * MIB)


def test_expandable_segments_need_the_live_bytes_in_whole_pages():
    # The 64 MiB then 100 MiB sequence of the default allocator, with expandable segments: the free pages
    # are unmapped before the range grows, so the step needs 100 MiB (50 pages), not 164.
    cache = CachingAllocator(expandable=True)
    cache.give(cache.take(64 * MIB))
    cache.take(100 * MIB)
    assert cache.reserved_peak() == 100 * MIB
    cache = CachingAllocator(expandable=True)
    cache.take(3 * MIB)  # 2 pages for 3 MiB
    assert cache.reserved_peak() == 4 * MIB


def test_a_block_freed_on_a_side_stream_serves_only_that_stream():
    # A 100 MiB block freed on stream 1 stays in stream 1's pool: a 100 MiB request on the default stream maps
    # a segment of its own, 200 MiB reserved for 100 MiB ever live; on stream 1 the request takes the block
    # again (100 MiB), as it does when both are the default stream's.
    cache = CachingAllocator()
    cache.give(cache.take(100 * MIB, stream=1))
    cache.take(100 * MIB)
    assert (cache.peak_live, cache.reserved_peak()) == (100 * MIB, 200 * MIB)
    assert cache.free == {100 * MIB - STREAM_SPAN: 1}  # keyed below every default-stream block
    cache = CachingAllocator()  # and the other way round
    cache.give(cache.take(100 * MIB))
    cache.take(100 * MIB, stream=1)
    assert (cache.peak_live, cache.reserved_peak()) == (100 * MIB, 200 * MIB)
    for stream in (1, 0):
        cache = CachingAllocator()
        cache.give(cache.take(100 * MIB, stream=stream))
        cache.take(100 * MIB, stream=stream)
        assert (cache.peak_live, cache.reserved_peak()) == (100 * MIB, 100 * MIB)


def test_each_stream_packs_its_small_tensors_in_segments_of_its_own():
    # Three 1,024 B blocks on stream 1, freed, then three on the default stream: one 2 MiB small segment each,
    # 4 MiB reserved (2 MiB when both groups are the default stream's).
    cache = CachingAllocator()
    cache.give(cache.take(1000, 3, stream=1))
    cache.take(1000, 3)
    assert (cache.peak_live, cache.reserved_peak()) == (3072, 4 * MIB)


def test_expandable_segments_need_every_streams_live_bytes_with_a_range_each():
    # The 64 MiB then 100 MiB sequence of the expandable test above with the 64 MiB tensor on stream 1: when
    # the default stream's range must grow on a full device, stream 1's free pages are unmapped as its own
    # would be (release_cached_blocks), so the step needs its 100 MiB live (50 pages) and a page for stream
    # 1's range, which rounds apart: 102 MiB (max_memory_reserved on a device with room would read 164).
    cache = CachingAllocator(expandable=True)
    cache.give(cache.take(64 * MIB, stream=1))
    cache.take(100 * MIB)
    assert cache.reserved_peak() == 102 * MIB


def test_a_side_streams_unit_stays_reserved_beside_the_default_streams_blocks():
    # FSDP's pattern: each of eight runs gathers a 40 MiB unit on stream 1, frees it, then keeps a 40 MiB
    # activation on the default stream. One stream: the activation takes the unit's freed block, so each run
    # maps one 40 MiB segment: 320 MiB reserved for 320 MiB live at the end. Run 0 begins and ends with
    # nothing cached: a period of one run, applied for runs 1 to 7. Two streams: the unit's block stays in
    # stream 1's pool (each later unit takes it again) and every activation maps its own segment: 40 + 8 x 40
    # = 360 MiB reserved, the same 320 MiB live; run 0 ends with stream 1's block cached, run 1 begins and
    # ends so: a period from run 1, applied for runs 2 to 7.
    def build(unit_stream):
        def built(cache):
            def once(_):
                cache.give(cache.take(40 * MIB, stream=unit_stream))
                return cache.take(40 * MIB)

            return once, [None] * 8

        return built

    for unit_stream, reserved, ran in ((0, 320, 1), (1, 360, 2)):
        fast, runs = _fast_and_every(build(unit_stream))
        assert runs == ran
        assert (fast.peak_live, fast.live, fast.reserved_peak()) == (320 * MIB, 320 * MIB, reserved * MIB)


def test_a_group_is_taken_largest_first_with_its_small_tensors_pooled():
    tensors = Tensors.of([(30 * MIB, 2), (100, 4), (50 * MIB, 1), (30 * MIB, 1)])
    assert tensors == Tensors(((50 * MIB, 1), (30 * MIB, 3)), 4 * 512)
    cache = CachingAllocator()
    held = cache.take_all(tensors, times=2)
    assert held.held == 2 * (50 + 90) * MIB + 2 * 2048 and held.small == 4096
    cache.give(held)
    assert (cache.live, cache.small_live) == (0, 0)


def test_a_transient_cycle_is_a_take_then_a_give():
    # cycle(tensors) is give(take_all(tensors)) without the allocation between them. A cached 100 MiB block
    # serves the two 40 MiB tensors (a 20 MiB rest split off); nothing cached holds the 30 MiB one, which
    # maps its own 30 MiB segment: 110 MiB live at the peak, 130 MiB mapped. Freed, the 40s merge back into
    # the 100 MiB block and the 30 MiB segment stays cached.
    tensors = Tensors.of([(40 * MIB, 2), (30 * MIB, 1)])
    caches = CachingAllocator(), CachingAllocator()
    for cache in caches:
        cache.give(cache.take(100 * MIB))
    caches[0].cycle(tensors)
    caches[1].give(caches[1].take_all(tensors))
    for cache in caches:
        assert (cache.live, cache.peak_live, cache.segments) == (0, 110 * MIB, 130 * MIB)
        assert cache.free == {30 * MIB: 1, 100 * MIB: 1} and cache.sizes == [30 * MIB, 100 * MIB]


@settings(max_examples=150, deadline=None)
@given(varied_setups(), st.booleans())
def test_device_is_never_below_reserved_nor_reserved_below_allocated(setup, expandable):
    # MoE, MLA, sliding windows, tied embeddings, pipeline parallelism, LoRA, QLoRA, offloading: whatever the
    # step, the allocator's cache is a whole number of bytes >= 0, so the three figures are ordered; with
    # expandable segments it is the page rounding of the two pools on each stream the step uses (under 2 pages of
    # 2 MiB each; the default stream and at most three side ones: GATHER, STAGE, REDUCE).
    memory = estimate_training(vary(setup, expandable_segments=expandable), overhead=123)
    assert memory.allocator_cache >= 0
    assert memory.per_gpu == memory.reserved + 123 >= memory.reserved >= memory.allocated
    if expandable:
        assert memory.allocator_cache < 4 * 2 * 2 * MIB


@settings(max_examples=150, deadline=None)
@given(varied_setups(), st.data())
def test_the_remembered_cache_reads_every_field_the_step_reads(setup, data):
    # The cache is remembered by _step_read: two setups with the same key must run the same step.
    name = data.draw(st.sampled_from(sorted(FIELD_VALUES)))
    changed = vary(setup, **{name: data.draw(FIELD_VALUES[name])})
    if training_memory._step_read(changed) == training_memory._step_read(setup):
        run = training_step.SimulatedStep
        first = run(setup, *training_memory._step_read(setup)[:2]).run()
        second = run(changed, *training_memory._step_read(changed)[:2]).run()
        assert first == second, name


def _published_setups() -> list[tuple[str, object]]:
    setups = []
    for record in yaml.safe_load(RECORDS.read_text())["records"]:
        document = {"version": 1, "name": record["id"], **record["spec"]}
        result = lint_bytes(f"{record['id']}.yaml", yaml.safe_dump(document).encode(), LintOptions())
        if result.analysis is not None and result.analysis.spec.finetune is not None:
            spec = result.analysis.spec
            setups.append((record["id"], spec_training_setup(spec, spec.finetune)))
    return setups


def _both_ways(setup) -> tuple[tuple[int, int], tuple[int, int]]:
    """(peak allocated, peak reserved) of the step with repeat's fast-forward and running every layer."""
    states, acts = training_memory._step_read(setup)[:2]
    return (
        training_step.SimulatedStep(setup, states, acts).run(),
        training_step.SimulatedStep(setup, states, acts, fast_forward=False).run(),
    )


def test_skipping_repeated_layers_changes_nothing_on_the_published_runs():
    # CachingAllocator.repeat applies the layers it has seen repeat by arithmetic: the figures must be the
    # ones running every layer gives, to the byte.
    setups = _published_setups()
    assert len(setups) >= 45
    for name, setup in setups:
        fast, every = _both_ways(setup)
        assert fast == every, name


@settings(max_examples=150, deadline=None)
@given(varied_setups(), st.booleans())
def test_skipping_repeated_layers_changes_nothing(setup, expandable):
    fast, every = _both_ways(vary(setup, expandable_segments=expandable))
    assert fast == every


def _repeated(build, fast: bool, expandable: bool = False) -> tuple[CachingAllocator, list[object], int]:
    """``build(cache)`` gives (once, inputs); the cache after ``repeat``, its results and how many runs ran."""
    cache = CachingAllocator(expandable=expandable, fast_forward=fast)
    once, inputs = build(cache)
    ran = [0]

    def counted(item):
        ran[0] += 1
        return once(item)

    results = cache.repeat(counted, inputs)
    assert len(results) == len(inputs)
    return cache, results, ran[0]


def _fast_and_every(build, expandable: bool = False) -> tuple[CachingAllocator, int]:
    """Run ``build`` with and without fast-forward: the same state, results and peaks, or the test fails;
    the fast cache and how many runs it ran."""
    (fast, fast_results, ran) = _repeated(build, True, expandable)
    (every, every_results, _) = _repeated(build, False, expandable)
    assert fast_results == every_results
    assert (fast.free, fast.segments, fast.live, fast.peak_live) == (
        every.free,
        every.segments,
        every.live,
        every.peak_live,
    )
    assert (fast.small_live, fast.small_segments, fast.carry) == (every.small_live, every.small_segments, every.carry)
    sides = [{stream: (p.small, p.small_high, p.ranged) for stream, p in c.side.items()} for c in (fast, every)]
    assert sides[0] == sides[1]
    assert fast.reserved_peak() == every.reserved_peak()
    return fast, ran


def _take_forty_then_free(cache: CachingAllocator):
    """A run that takes a 40 MiB tensor, then frees its input."""

    def once(item: Allocation) -> Allocation:
        taken = cache.take(40 * MIB)
        cache.give(item)
        return taken

    return once


def test_a_repeat_that_runs_out_of_a_block_size_stops_skipping():
    # Eight 30 MiB tensors (eight 30 MiB segments), then four 40 MiB blocks cached. Each run takes a 40 MiB
    # block and frees one 30 MiB tensor. Run 1 begins with {40} cached and ends with {30, 40}; run 2 begins
    # and ends with {30, 40}: a period of one run that drew the 40 MiB blocks down to two, one a run, so
    # runs 3 and 4 are applied by arithmetic. Then no 40 MiB block is left: run 5 maps a 40 MiB segment (a
    # 30 MiB block cannot hold it) and begins and ends with {30}; runs 6 to 8 do the same and are applied.
    # 8 x 30 + 4 x 40 + 4 x 40 = 560 MiB of segments, eight 30 MiB blocks cached, as running each gives.
    def build(cache):
        thirty = [cache.take(30 * MIB) for _ in range(8)]
        for allocation in [cache.take(40 * MIB) for _ in range(4)]:
            cache.give(allocation)
        return _take_forty_then_free(cache), thirty

    fast, ran = _fast_and_every(build)
    assert ran == 3  # runs 1, 2 and 5
    assert (fast.segments, fast.free) == (560 * MIB, {30 * MIB: 8})


def test_a_period_of_two_runs_is_applied_whole():
    # Eight 30 MiB and eight 50 MiB tensors (their own segments), freed alternately, one a run, after the run
    # takes a 40 MiB block. Runs 0 and 1 map 40 MiB segments (nothing cached holds 40 MiB); run 2 cuts the
    # 50 MiB block run 1 freed (40 + a 10 MiB rest). From then on the runs alternate: one maps a 40 MiB
    # segment (no 50 MiB block cached) and frees a 50, the next cuts that 50 and frees a 30. Runs 3 and 4
    # begin with {10, 30} and {10, 30, 50} and run 4 ends with {10, 30}: a period of two, applied for runs 5
    # to 14; run 15 runs. Segments: 8 x 30 + 8 x 50 + 40 x (2 + 7 runs that map one) = 1,000 MiB. Cached: the
    # eight 30s, a 10 MiB rest from each of the 7 cuts (runs 2, 4, .., 14) and run 15's 50. Live peaks in
    # run 1 at 640 + 10 (run 0 took 40, freed 30) + 40 = 690 MiB.
    def build(cache):
        tensors = [cache.take(size * MIB) for _ in range(8) for size in (30, 50)]
        return _take_forty_then_free(cache), tensors

    fast, ran = _fast_and_every(build)
    assert ran == 6  # runs 0 to 4, and 15
    assert (fast.segments, fast.free) == (1000 * MIB, {10 * MIB: 7, 30 * MIB: 8, 50 * MIB: 1})
    assert fast.peak_live == 690 * MIB


def test_a_freed_piece_that_could_not_merge_stops_a_size_growing_past_its_room():
    # Each item is two 30 MiB tensors cut from two 40 MiB blocks whose 10 MiB rests were then taken (so the
    # pieces merge back only if two 10 MiB blocks are cached when they are freed), and one of those 10 MiB
    # tensors. A run frees the two 30s, then the 10. Run 1 begins and ends with {10, 30} cached, one more 10
    # each time: alike by the cached sizes, but run 2 finds two 10s and merges (two 40s cached). That is
    # the room ``give`` records (two needed, one there: none to spare), so run 1 is not applied again. From
    # run 2 on the runs alternate merge / no merge, a period of two (runs 3-4), applied for runs 5 to 8.
    # Of ten runs, six do not merge (0, 1, 3, 5, 7, 9: twelve 30s) and four do (2, 4, 6, 8: eight 40s, each
    # taking two of the ten 10s).
    def build(cache):
        items = []
        for _ in range(10):
            cache.give(cache.take(40 * MIB, 2))
            thirty = cache.take(30 * MIB, 2)
            ten, _kept = cache.take(10 * MIB), cache.take(10 * MIB)
            items.append((thirty, ten))
        assert cache.free == {}

        def once(item):
            thirty, ten = item
            cache.give(thirty)
            cache.give(ten)

        return once, items

    fast, ran = _fast_and_every(build)
    assert ran == 6  # runs 0 to 4, and 9
    assert fast.free == {10 * MIB: 2, 30 * MIB: 12, 40 * MIB: 8}


def test_a_draw_that_took_every_block_stops_that_size_growing():
    # A 100 MiB block cached; each run takes three 20 MiB tensors, frees them and then an item of 20 MiB:
    # one more 20 MiB block cached each run. Runs 0-2 want three and find fewer (0, 1, 2), so they cut the
    # 100 MiB block for the rest: a run with more would cut it less, so none of them is applied again. Run
    # 3 finds exactly three: it empties the size without wanting more, and runs with more take the same
    # three, so runs 4 to 7 are applied. 8 x 20 + 100 = 260 MiB of segments; the eight items cached.
    def build(cache):
        items = [cache.take(20 * MIB) for _ in range(8)]
        cache.give(cache.take(100 * MIB))

        def once(item):
            cache.give(cache.take(20 * MIB, 3))
            cache.give(item)

        return once, items

    fast, ran = _fast_and_every(build)
    assert ran == 4
    assert (fast.segments, fast.free) == (260 * MIB, {20 * MIB: 8, 100 * MIB: 1})
    assert fast.peak_live == (160 + 100) * MIB  # before the runs (which reach 160 + 60)


def test_a_search_that_passed_an_emptied_size_stops_it_growing():
    # Three 20 MiB and one 100 MiB block cached. A run takes three 20 MiB tensors, then one of 19.5 MiB,
    # frees all four and an item of 20 MiB. Run 0 takes the three 20s exactly, so the 19.5 MiB request
    # finds no 20 and cuts the 100 MiB block: with one more 20 cached (as run 1 has) it would take the 20
    # whole (a 0.5 MiB rest is not split off). Run 0 is therefore not applied again though it begins and
    # ends with {20, 100} cached; run 1 is (its 19.5 MiB comes from a 20 MiB block with more left), for runs
    # 2 to 5. The results (the 19.5 MiB tensor's block) show which block each run cut.
    def build(cache):
        items = [cache.take(20 * MIB) for _ in range(6)]
        for allocation in [cache.take(20 * MIB) for _ in range(3)] + [cache.take(100 * MIB)]:
            cache.give(allocation)

        def once(item):
            twenties, other = cache.take(20 * MIB, 3), cache.take(19.5 * MIB)
            cache.give(twenties)
            cache.give(other)
            cache.give(item)
            return other.carves

        return once, items

    _, ran = _fast_and_every(build)
    assert ran == 2
    results = _repeated(build, True)[1]
    assert results[0] == ((100 * MIB, 1, 1, int(19.5 * MIB), int(80.5 * MIB)),)
    assert results[1:] == [((20 * MIB, 1, 1, int(19.5 * MIB), 0),)] * 5


def test_a_size_emptied_in_one_run_and_passed_over_in_another_stops_it_growing():
    # A period of two runs (found in review): run A takes one cached 12 MiB block (exactly what it wants,
    # so its own search goes past nothing) and keeps it; run C holds the 20 MiB block, wants two 12 MiB
    # blocks, takes what is cached of them and maps a 12 MiB segment for the rest, then frees all: 12 MiB
    # grows by one a period. Had one more 12 been cached, A would have left one and C taken it instead of a
    # new segment: C went past 12 MiB wanting more, so the period may not be applied. Segments: 12 + 20 +
    # 2 x 12 (the first C finds none) + 5 x 12 = 116 MiB; A's six 12s are live (72 MiB).
    def build(cache):
        cache.give(cache.take(12 * MIB))
        cache.give(cache.take(20 * MIB))

        def once(item):
            if item == "A":
                cache.take(12 * MIB)
                return ()
            held = cache.take(20 * MIB)
            twelves = cache.take(12 * MIB, 2)
            cache.give(twelves)
            cache.give(held)
            return twelves.carves

        return once, ["A", "C"] * 6

    fast, _ = _fast_and_every(build)
    assert (fast.segments, fast.free, fast.live) == (116 * MIB, {12 * MIB: 2, 20 * MIB: 1}, 72 * MIB)


def test_a_piece_the_size_of_its_rest_does_not_count_itself_as_room_to_merge():
    # Found in review: a 40 MiB block cut into a 20 MiB tensor and a 20 MiB rest (which another tensor then
    # took). Freed while no 20 MiB block is cached, the piece cannot merge; its room (how many more 20s
    # there could be and it still would not) is 1 - 1 - 0 = 0, counted before the piece itself joins the
    # cache (it used to be counted after: -1, and a negative number of periods was applied). Each run takes
    # a 20 MiB block, frees one such piece and a plain 20 MiB tensor: the runs alternate no merge / merge,
    # six runs leave three 40s and a 20 cached; live: the six taken rests and the six runs' takes, 240 MiB.
    def build(cache):
        plain = [cache.take(20 * MIB) for _ in range(6)]
        spare = cache.take(20 * MIB)
        cache.give(cache.take(40 * MIB, 6))
        items = []
        for other in plain:
            piece = cache.take(20 * MIB)  # cut from a 40: a 20 MiB rest cached
            cache.take(20 * MIB)  # that rest, taken and kept
            items.append((piece, other))
        cache.give(spare)
        assert cache.free == {20 * MIB: 1}

        def once(item):
            piece, other = item
            cache.take(20 * MIB)
            cache.give(piece)
            cache.give(other)

        return once, items

    fast, _ = _fast_and_every(build)
    assert (fast.free, fast.live, fast.segments) == ({40 * MIB: 3, 20 * MIB: 1}, 240 * MIB, 380 * MIB)


def test_a_period_rises_as_high_as_its_highest_run_not_its_last():
    # Run A keeps a 30 MiB tensor and takes and frees a 40 MiB one (each a new segment: nothing cached holds
    # them), so it peaks 70 MiB above where it began and leaves a 40 MiB block cached; run B keeps 30 MiB cut
    # from that block, leaving a 10 MiB rest: 60 MiB more live a period, one more 10 MiB block cached. Runs
    # A1 and B1 begin and end with {10} cached: a period of two, applied for runs 4 to 9. Its rise is A's
    # (70 MiB above A1's 60 MiB), not B's (60): the last A, run 8, begins at 60 x 4 = 240 MiB and peaks at
    # 310 MiB. Segments: 70 MiB a period, five periods; the five rests cached.
    def build(cache):
        def once(item):
            if item == "A":
                cache.take(30 * MIB)
                cache.give(cache.take(40 * MIB))
            else:
                cache.take(30 * MIB)

        return once, ["A", "B"] * 5

    fast, ran = _fast_and_every(build)
    assert ran == 4
    assert (fast.peak_live, fast.live) == (310 * MIB, 300 * MIB)
    assert (fast.segments, fast.free) == (350 * MIB, {10 * MIB: 5})


# Programs of several streams for the property below: a few kinds of run, each a fixed list of steps, and a
# pattern of runs repeated (so that ``repeat`` finds periods), each run with an input: a 12 MiB tensor taken
# first (a segment of its own, so inputs on one stream are alike) on a stream of its own. A step takes
# tensors on a stream and keeps them to the run's end, frees them at once, hands them to a later run (the
# allocator's carry, freed when the next carry is taken) or frees the run's input.
SIZES_MIB = (1 / 2048, 0.7, 3, 12, 20, 30, 40)  # small-pool blocks, 20 MiB segments, segments of their own
STREAMS = (0, 0, 1, 2)
STEP = st.tuples(
    st.sampled_from(("keep", "free", "carry", "input")),
    st.sampled_from(SIZES_MIB),
    st.integers(1, 3),
    st.sampled_from(STREAMS),
)


@st.composite
def stream_programs(draw: st.DrawFn):
    kinds = draw(st.lists(st.lists(STEP, min_size=1, max_size=5), min_size=1, max_size=3))
    run = st.tuples(st.integers(0, len(kinds) - 1), st.sampled_from(STREAMS))
    pattern = draw(st.lists(run, min_size=1, max_size=3))
    runs = pattern * draw(st.integers(2, 8)) + draw(st.lists(run, max_size=2))
    before = draw(st.lists(st.tuples(st.sampled_from(SIZES_MIB), st.sampled_from(STREAMS), st.booleans())))

    def build(cache: CachingAllocator):
        inputs = [(kind, cache.take(12 * MIB, stream=stream)) for kind, stream in runs]
        for size, stream, freed in before:  # a cache to start from, some of it freed
            taken = cache.take(size * MIB, stream=stream)
            if freed:
                cache.give(taken)

        def once(item):
            kind, given = item
            kept = []
            for action, size, count, stream in kinds[kind]:
                if action == "input":
                    cache.give(given)
                    continue
                taken = cache.take(size * MIB, count, stream=stream)
                if action == "keep":
                    kept.append(taken)
                elif action == "free":
                    cache.give(taken)
                else:
                    if cache.carry is not None:
                        cache.give(cache.carry)
                    cache.carry = taken
            return kept

        return once, inputs

    return build


@settings(max_examples=300, deadline=None)
@given(stream_programs(), st.booleans())
def test_skipping_repeated_runs_changes_nothing_on_several_streams(build, expandable):
    # Runs on the default stream and two side streams, with a carry between runs: applying the periods
    # ``repeat`` finds by arithmetic leaves every stream's pool and counters, the carry and the peaks as
    # running each run does.
    _fast_and_every(build, expandable)


def test_a_side_streams_small_pool_rises_in_skipped_runs_as_in_run_ones():
    # Each of eight runs keeps a 512 B tensor on stream 1: runs 1 to 7 are one period applied by arithmetic
    # after run 1 (run 0 maps stream 1's small segment); stream 1's small pool holds 8 x 512 = 4,096 B at the
    # end, its high water, as running each run gives.
    def build(cache):
        return (lambda _: cache.take(512, stream=1)), [None] * 8

    fast, ran = _fast_and_every(build)
    assert ran == 2
    assert (fast.side[1].small, fast.side[1].small_high, fast.reserved_peak()) == (4096, 4096, 2 * MIB)


@settings(max_examples=100, deadline=None)
@given(varied_setups(), st.sampled_from([1, 2]), st.sampled_from(["none", "cpu"]), st.booleans())
def test_fsdp_steps_skip_repeated_layers_exactly(setup, version, offload, expandable):
    # FSDP gathers its units on their own streams (training_step._Units): the step's figures are the ones
    # running every layer gives, whatever the version, parameter offload or expandable segments, and the
    # three figures stay ordered.
    setup = vary(
        setup,
        sharding="fsdp",
        fsdp_version=version,
        offload_parameters=offload,
        offload_optimizer=offload,
        pipeline_parallel=1,
        expandable_segments=expandable,
    )
    fast, every = _both_ways(setup)
    assert fast == every
    memory = estimate_training(setup, overhead=123)
    assert memory.per_gpu == memory.reserved + 123 >= memory.reserved >= memory.allocated
    if expandable:  # the pages of the default stream's two pools and of each side stream's (three at most)
        assert memory.allocator_cache < (2 + 2 * 3) * 2 * MIB


def test_an_fsdp_lora_job_reserves_its_side_streams_pools():
    # TINY (tests/tiny_architectures.py) with LoRA rank 1 over 2 GPUs under FSDP1: every tensor is under 1 MiB,
    # so each stream packs its tensors in one 2 MiB small segment. The unshard stream holds the root unit
    # (1,040 B, a 1,536 B block) and at most two decoder units (1,184 B, 1,536 B each): 4,608 B; the
    # post-backward stream the adapters' gradient shards, fourteen tensors a layer of 512 B blocks each, two
    # layers: 14,336 B. Reserved: three segments, 6 MiB; DDP allocates all of it on the default stream: 2 MiB.
    lora = training_setup(
        architecture=TINY, method="lora", precision="bf16", lora_rank=1, lora_bytes=2, seq_len=4, gpus=2
    )
    for sharding, reserved, pools in (("fsdp", 6 * MIB, {1: 4608, 3: 14336}), ("none", 2 * MIB, {})):
        setup = vary(lora, sharding=sharding)
        step = training_step.SimulatedStep(setup, *training_memory._step_read(setup)[:2])
        assert step.run()[1] == reserved
        assert {stream: pool.small_high for stream, pool in step.cache.side.items()} == pools
    # Llama-2-7B, the same over 2 GPUs at 1 x 2,048: the root unit is 524,296,192 B (a 251 x 2 MiB segment,
    # 526,385,152 B), a decoder unit 404,766,720 B (194 x 2 MiB, 406,847,488 B). The unshard stream maps the
    # root's segment and a unit's in forward, a second unit's when backward gathers one ahead; once the step
    # ends all three are cached there, 1,340,080,128 B the default stream never reuses.
    setup = vary(lora, architecture=get_model("llama-2-7b").architecture, lora_rank=8, seq_len=2048, sharding="fsdp")
    step = training_step.SimulatedStep(setup, *training_memory._step_read(setup)[:2])
    step.run()
    unshard = {key + STREAM_SPAN: count for key, count in step.cache.free.items() if -STREAM_SPAN <= key < 0}
    assert unshard == {526_385_152: 1, 406_847_488: 2}


def test_an_offloaded_fp32_shard_cast_for_its_all_gather_leaves_its_copy_cached():
    # Llama-2-7B with an fp32 base, LoRA over 2 GPUs under bf16 mixed precision, parameters offloaded: FSDP1 casts
    # each shard to a 16-bit copy on the pre-unshard stream (stream 2), allocating the copy, then the shard as
    # stored, fp32, moved to the GPU for the cast to read and dropped once it is made (_use_low_precision_shard).
    # The root (262,148,096 parameters): its 16-bit shard 262,148,096 B maps 126 x 2 MiB = 264,241,152 B, its fp32
    # shard 524,296,192 B 251 x 2 MiB = 526,385,152 B. A decoder unit (202,383,360 parameters): 202,383,360 B
    # and 404,766,720 B, each cut from the smallest cached block that holds it (best fit), and merged back. The
    # stream ends the step with both blocks cached; without the fp32 copy (a bf16 base, nothing to cast) only the
    # first, and the device figure is 526,385,152 B less (the base is on the host either way).
    lora = training_setup(
        architecture=get_model("llama-2-7b").architecture,
        method="lora",
        precision="bf16-mixed",
        autocast=False,
        lora_rank=8,
        lora_bytes=2,
        seq_len=2048,
        gpus=2,
        sharding="fsdp",
        offload_parameters="cpu",
        offload_optimizer="cpu",
    )
    figures = {}
    for stored, pool in ((4, {526_385_152: 1, 264_241_152: 1}), (2, {264_241_152: 1})):
        setup = vary(lora, model_dtype_bytes=stored)
        step = training_step.SimulatedStep(setup, *training_memory._step_read(setup)[:2])
        step.run()
        free = step.cache.free
        assert {key + 2 * STREAM_SPAN: n for key, n in free.items() if -2 * STREAM_SPAN <= key < -STREAM_SPAN} == pool
        figures[stored] = estimate_training(setup, 0).per_gpu
    assert figures[4] - figures[2] == 526_385_152


def test_deepspeed_buckets_map_one_large_segment():
    # TINY's tensors are all under 1 MiB, the small pool's. A DeepSpeed bucket of 2**21 elements x 2 B = 4 MiB is a
    # large-pool request under kMinLargeAlloc (10 MiB): it maps a kLargeBuffer segment, 20 MiB. ZeRO-3 takes it as
    # its optimizer initialises and keeps it: the live peak rises by the 4 MiB. ZeRO-2's is freed once each
    # backward's gradients are reduced, cached, and taken again from that segment by the next step's backward;
    # overlap_comm's second bucket, a tensor of its own, is cut from the 16 MiB the first left of its segment
    # (more than kSmallSize: should_split). ZeRO-1 under accumulation keeps a micro-batch's bucket through the next
    # forward, until the next backward drops it and takes another. Either way the live peak rises by the buckets
    # (the backward's peak is the step's here) and the reserved bytes by the one segment. Without a bucket ZeRO-2's
    # first reduce comes at once (zero_step.layers_before_first_reduce), with this one only at the epilogue: its
    # gradient buffer (the partition's few KiB) is live from backward's start in the run without, so there the
    # live peaks differ by the buckets less at most that buffer. ZeRO-3 also copies the bucket's gradients as its
    # epilogue reduce-scatters them (zero_step.scatter_copy: TINY's few KiB of LoRA gradients, none without a
    # bucket, where each gradient is reduced alone), on the reduce stream: a small-pool segment there, 2 MiB.
    base = training_setup(architecture=TINY, precision="bf16-mixed", seq_len=4, gpus=2)

    def run(**changes: object) -> tuple[int, int]:
        setup = vary(base, **changes)
        return training_step.SimulatedStep(setup, *training_memory._step_read(setup)[:2]).run()

    cases = (("zero3", False, 1, 1), ("zero2", False, 1, 1), ("zero2", True, 2, 1), ("zero1", False, 1, 4))
    for sharding, overlap, buckets, accumulation in cases:
        changes = {"sharding": sharding, "overlap_comm": overlap, "gradient_accumulation": accumulation}
        live, reserved = run(**changes, reduce_bucket_size=2**21)
        live_without, reserved_without = run(**changes, reduce_bucket_size=0)
        assert reserved - reserved_without == 20 * MIB + (2 * MIB if sharding == "zero3" else 0), sharding
        zero = training_memory._model_states(vary(base, **changes)).zero_step
        earlier_buffer = zero.partition_gradients if sharding == "zero2" else 0
        assert 4 * MIB * buckets - earlier_buffer <= live - live_without <= 4 * MIB * buckets, sharding


def test_broadcast_buckets_close_at_250_mib_as_compute_bucket_assignment_by_size_does():
    # Llama-2-7B in bf16: q, k, v, o 4096 x 4096 x 2 = 33,554,432 bytes each; gate, up, down 4096 x 11008 x 2 =
    # 90,177,536; two norms of 8,192. A bucket closes once it holds 250 MiB (262,144,000) or more: after up
    # (4 x 33,554,432 + 2 x 90,177,536 = 314,572,800, six tensors), and the rest (down and the norms,
    # 90,193,920) is the last. The root: the embedding, 32,000 x 4,096 x 2 = 262,144,000, is 250 MiB exactly
    # and closes alone (a view, no copy); the final norm and the LM head make 262,152,192.
    layer, root = training_step.wrapped_unit_elements(get_model("llama-2-7b").architecture)
    assert training_step.broadcast_buckets([2 * e for e in layer]) == [(314_572_800, 6), (90_193_920, 3)]
    assert training_step.broadcast_buckets([2 * e for e in root]) == [(262_144_000, 1), (262_152_192, 2)]


def test_wrapping_from_the_cpu_leaves_each_units_transients_cached_by_hand():
    # One decoder unit of a 20 and a 12 MiB tensor, then a root of two 10 MiB tensors, sharded over 2 ranks
    # (every block 10 MiB or more: a segment is the block rounded to 2 MiB). The unit: 20 and 12 map their own
    # segments, the 32 MiB flat parameter a third, its 16 MiB shard a fourth (80 MiB mapped, 80 live); the flat
    # parameter and the originals are freed (cached: 12, 20, 32; live 16). The root: the first 10 is cut from
    # the 12 (best fit; its 2 MiB rest, over 1 MiB, split off), the second from the 20 (a 10 MiB rest), the
    # 20 MiB flat parameter from the 32 (a 12 MiB rest), its 10 MiB shard is the 20's rest; the flat parameter
    # merges back into the 32 (its rest still free), the first original into the 12, the second stays a 10
    # (its rest is the shard). No new segment: 80 MiB mapped, the two shards live (16 + 10 = 26 MiB).
    cache = CachingAllocator()
    kept = training_step.wrap_model(cache, [(20 * MIB, 12 * MIB)], (10 * MIB, 10 * MIB), 2, False, False)
    assert kept == 26 * MIB
    assert (cache.live, cache.segments, cache.peak_live) == (26 * MIB, 80 * MIB, 80 * MIB)
    assert cache.free == {10 * MIB: 1, 12 * MIB: 1, 32 * MIB: 1}
    cache.reset_peaks()  # the script's reset_peak_memory_stats: live starts again, the segments stay
    assert (cache.peak_live, cache.reserved_peak()) == (26 * MIB, 80 * MIB)


def test_a_broadcast_bucket_of_several_tensors_is_copied_and_an_offloaded_shard_leaves():
    # The same unit broadcast: its two tensors (32 MiB, under 250) are one bucket, flattened into a 32 MiB copy
    # (its own segment) and freed; the flat parameter then takes that cached block, so the unit maps 20 + 12 +
    # 32 + 16 = 80 MiB as without the broadcast. Offloaded, each shard goes to the host as soon as it is cut,
    # so nothing is left live; the root's tensors, its 20 MiB copy, flat parameter and shard are all cut from
    # the four cached blocks (12, 16, 20, 32), which take every piece back: no segment is added.
    cache = CachingAllocator()
    kept = training_step.wrap_model(cache, [(20 * MIB, 12 * MIB)], (10 * MIB, 10 * MIB), 2, True, True)
    assert (kept, cache.live, cache.segments) == (0, 0, 80 * MIB)
    # Two buckets: 200 + 60 MiB closes at 260, 30 + 20 is the last. Their copies (260, 50) map segments of
    # their own beside the 310 MiB of originals, and are freed; the 310 MiB flat parameter fits neither (a
    # segment of its own); its 155 MiB shard is cut from the 260 copy's block (a 105 MiB rest): 930 MiB mapped,
    # 155 live. Moved from the CPU without the broadcast, the shard maps its own segment, 155 MiB rounded up to
    # 2 MiB, whose 1 MiB rest (not over kSmallSize) it holds whole: 310 + 310 + 156 = 776 mapped, 156 live.
    for broadcast, live, mapped in ((True, 155 * MIB, 930 * MIB), (False, 156 * MIB, 776 * MIB)):
        cache = CachingAllocator()
        root = (200 * MIB, 60 * MIB, 30 * MIB, 20 * MIB)
        assert training_step.wrap_model(cache, [], root, 2, broadcast, False) == 155 * MIB
        assert (cache.live, cache.segments) == (live, mapped)


@settings(max_examples=60, deadline=None)
@given(varied_setups(), st.sampled_from(["from-cpu", "broadcast"]), st.sampled_from(["none", "cpu"]))
def test_a_wrapped_fsdp_model_keeps_the_figures_ordered_and_repeat_exact(setup, loading, offload):
    # FSDP1 wrapping the model on the GPU (MoE, MLA, sliding windows, tied embeddings in the strategies):
    # the device figure is never below the reserved nor that below the allocated, the wrap's cache reads
    # the same whether repeat applies the units it finds alike by arithmetic or runs every one.
    fsdp = vary(setup, sharding="fsdp", fsdp_version=1, pipeline_parallel=1, offload_parameters=offload)
    wrapped = vary(fsdp, fsdp_loading=loading)
    memory = estimate_training(wrapped, overhead=123)
    assert memory.per_gpu == memory.reserved + 123 >= memory.reserved >= memory.allocated
    fast, every = _both_ways(wrapped)
    assert fast == every


def _resident_after_load(setup) -> int:
    step = training_step.SimulatedStep(setup, *training_memory._step_read(setup)[:2])
    step._load()
    return step.cache.live + step.cache.small_live


@pytest.mark.parametrize("model", ["llama-3.2-1b", "nemotron-h-8b", "deepseek-v3"])
@pytest.mark.parametrize("loading", ["from-cpu", "broadcast"])
def test_a_wrap_leaves_the_shards_a_sharded_load_leaves(model, loading):
    # What the wrap leaves on the GPU is each unit's shard: no more than loading the shards directly
    # (fsdp_loading: sharded) leaves, to the blocks' 2 MiB rounding per unit. Each decoder unit is wrapped at
    # its own size: a hybrid's state-mixer layers and an MoE's dense layers are smaller than the largest layer
    # the gathered unit is sized by (a review found the wrap leaving 26% more on Nemotron-H, 7.6 GiB more on
    # DeepSeek-V3 with every unit at the largest's size).
    arch = get_model(model).architecture
    sharded = training_setup(arch, method="lora", precision="bf16", sharding="fsdp", gpus=8, seq_len=16)
    wrapped = vary(sharded, fsdp_loading=loading)
    assert _resident_after_load(wrapped) == pytest.approx(
        _resident_after_load(sharded), abs=2 * MIB * (arch.layers + 1)
    )


def _sub_groups(cache: CachingAllocator, flat: int, temporaries: int, grads: list[Allocation]):
    """ZeRO-3's step over its sub-groups, as ``training_step._zero_step`` runs it: each takes a flat fp32 copy and
    the step's temporaries and gives both back; the first also drops the 16-bit gradients."""

    def once(_: object) -> None:
        copy = cache.take(flat)
        if grads:
            cache.give(grads.pop())
        cache.give(cache.take(temporaries))
        cache.give(copy)

    return once


def test_a_step_of_a_million_million_sub_groups_runs_a_few_and_applies_the_rest():
    # Sub-groups that read nothing (Alike: no list of them) and keep no results. A 100 MiB gradient is live; the
    # first sub-group takes a 60 MiB copy (a segment of its own: the gradient holds its block), drops the gradient,
    # cuts 30 MiB of temporaries from its 100 MiB block (merged back when given) and gives the copy back: 60 and
    # 100 MiB blocks cached. Each later one takes the 60 whole and cuts 30 from the 100: the same cached sizes
    # after each, a period of one run from the second on, applied by arithmetic to the 10^12 - 2 left. The state
    # is the one 1,000 sub-groups stepped one by one leave: 160 MiB of segments, the 60 and 100 MiB blocks cached,
    # a peak of 160 MiB live (the gradient beside the first copy).
    def run(count: int, fast: bool) -> tuple[CachingAllocator, int]:
        cache = CachingAllocator(fast_forward=fast)
        grads = [cache.take(100 * MIB)]
        ran = [0]
        once = _sub_groups(cache, 60 * MIB, 30 * MIB, grads)

        def counted(item: object) -> None:
            ran[0] += 1
            once(item)

        counted(None)  # the first drops the gradient: runs that change more than the cache are not repeated
        assert cache.repeat(counted, Alike(count - 1), keep=False) == []
        return cache, ran[0]

    huge, ran = run(10**12, True)
    every, stepped = run(1000, False)
    assert ran <= 4 and stepped == 1000
    state = (huge.free, huge.segments, huge.live, huge.peak_live, huge.reserved_peak())
    assert state == (every.free, every.segments, every.live, every.peak_live, every.reserved_peak())
    assert state == ({60 * MIB: 1, 100 * MIB: 1}, 160 * MIB, 0, 160 * MIB, 160 * MIB)


def test_alike_inputs_are_a_sequence_of_none_without_their_list():
    inputs = Alike(5)
    assert len(inputs) == 5 and list(inputs) == [None] * 5
    assert inputs[1:4] == Alike(3) and inputs[1:4] != Alike(2) and inputs[::2] == Alike(3)
    with pytest.raises(IndexError):
        inputs[5]
