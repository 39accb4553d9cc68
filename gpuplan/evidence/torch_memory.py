"""PyTorch memory statistics as JSON: what ``torch.cuda.memory_stats()`` and the peak counters return.

One object per rank, a list of them, or ``{"ranks": [...]}`` (a list of N ranks is a run of at least N
GPUs, ``rank_records``). Read from each object: ``max_memory_allocated`` / ``max_memory_reserved``
(``torch.cuda.max_memory_allocated()`` and ``max_memory_reserved()``), or the same peaks inside
``memory_stats`` (or at the top level, when the whole ``torch.cuda.memory_stats()`` dict was dumped):
``allocated_bytes.all.peak`` and ``reserved_bytes.all.peak``; ``num_ooms`` and ``num_alloc_retries``
(allocator pressure); ``total_memory`` (``torch.cuda.get_device_properties(i).total_memory``), ``rank``,
``world_size`` and a ``run`` object with ``micro_batch``, ``seq_len``, ``gradient_accumulation`` (the
snippet in docs/verify.md).
Allocated is the tensors live at the peak; reserved adds the caching allocator's unused blocks.

``num_ooms`` counts the times the caching allocator raised ``torch.OutOfMemoryError``: above 0 on any rank, the
run ran out of memory (a failure, GP804), whatever the loop did next. ``num_alloc_retries`` counts allocations
that succeeded after the allocator freed its cached blocks and retried: pressure, noted, not a failure.
"""

from __future__ import annotations

from typing import Any, BinaryIO

from gpuplan.errors import GpuplanError
from gpuplan.evidence.collect import Collector, refuse_allocated_above_reserved
from gpuplan.evidence.lines import MAX_COUNT_VALUE, clean, json_bytes, load_json
from gpuplan.evidence.model import BYTES, FINETUNE, GPU_TOTAL, PEAK_ALLOCATED, PEAK_RESERVED, Evidence, Failure

KIND = "torch-memory"
ENGINE = "PyTorch memory statistics"
PEAKS = {
    PEAK_ALLOCATED: ("max_memory_allocated", "allocated_bytes.all.peak"),
    PEAK_RESERVED: ("max_memory_reserved", "reserved_bytes.all.peak"),
}
RUN_SETTINGS = ("micro_batch", "seq_len", "gradient_accumulation")
RANK_RECORDS = "rank_records"  # how many ranks a list of records holds: a world of at least that many GPUs
MAX_RANK_OBJECTS = 4096


def claims(document: object) -> bool:
    """Whether a parsed JSON document looks like memory statistics: it names a peak (whatever its value: a
    value that cannot be a byte count is the reader's to refuse, by name)."""
    return any(_peak_key(item, keys) is not None for item in _ranks(document)[:1] for keys in PEAKS.values())


def read(stream: BinaryIO, path: str) -> Evidence:
    return from_document(load_json(stream, path), path)


def from_document(document: object, path: str) -> Evidence:
    shown = clean(path)
    collector = Collector()
    ranks = _ranks(document)
    if not ranks:
        raise GpuplanError(f"{shown}: expected a JSON object of memory statistics (or a list of them, one per rank)")
    ooms: list[tuple[str, int]] = []
    for index, item in enumerate(ranks[:MAX_RANK_OBJECTS]):
        rank = _rank_label(item, index)
        named = f"{rank}: " if len(ranks) > 1 else ""
        for term, keys in PEAKS.items():
            if (found := _peak_key(item, keys)) is not None:
                source, key = found
                value = json_bytes(source[key], named + key, shown)
                collector.measure(term, rank, value, unit=BYTES, line=0, phrase=keys[0])
        if "total_memory" in item:
            total = json_bytes(item["total_memory"], named + "total_memory", shown)
            collector.measure(GPU_TOTAL, rank, total, unit=BYTES, line=0, phrase="total_memory")
        _settings(collector, item)
        if (count := _pressure(collector, item, rank)) is not None:
            ooms.append((rank, count))
    if ooms:
        collector.failure = _out_of_memory(ooms)
    if len(ranks) > 1:
        # Each record is a rank of the run: a world of at least as many GPUs (fewer than the spec's is a subset).
        records = len({_rank_label(item, index) for index, item in enumerate(ranks[:MAX_RANK_OBJECTS])})
        collector.setting(RANK_RECORDS, records, 0, f"{records:,} rank records")
    if PEAK_ALLOCATED not in collector.terms and PEAK_RESERVED not in collector.terms:
        raise GpuplanError(
            f"{shown}: no peak memory in it (looked for max_memory_allocated, max_memory_reserved, "
            "allocated_bytes.all.peak, reserved_bytes.all.peak)"
        )
    refuse_allocated_above_reserved(collector, shown)
    missing = tuple(
        f"{keys[0]} (or memory_stats['{keys[1]}'])" for term, keys in PEAKS.items() if term not in collector.terms
    )
    return collector.evidence(shown, KIND, FINETUNE, ENGINE, 0, missing)


def _ranks(document: object) -> list[dict[str, Any]]:
    if isinstance(document, dict) and isinstance(document.get("ranks"), list):
        document = document["ranks"]
    items = document if isinstance(document, list) else [document]
    return [item for item in items if isinstance(item, dict)]


def _peak_key(item: dict[str, Any], keys: tuple[str, str]) -> tuple[dict[str, Any], str] | None:
    """Where ``item`` states a peak: the object and key (``max_memory_allocated``, else
    ``memory_stats['allocated_bytes.all.peak']``, else that key at the top level), or None."""
    top, inner = keys
    stats = item.get("memory_stats")
    for source, key in ((item, top), (stats, inner), (item, inner)):
        if isinstance(source, dict) and key in source:
            return source, key
    return None


def _rank_label(item: dict[str, Any], index: int) -> str:
    rank = item.get("rank")
    if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < MAX_COUNT_VALUE:
        return f"rank {rank}"
    return f"rank {index}"


def _settings(collector: Collector, item: dict[str, Any]) -> None:
    run = _object(item.get("run"))
    values = {"world_size": item.get("world_size", run.get("world_size"))}
    values |= {name: run.get(name) for name in RUN_SETTINGS}
    for name, value in values.items():
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_COUNT_VALUE:
            collector.setting(name, value, 0)
    device = item.get("device")
    if isinstance(device, str):
        collector.note(f"device: {clean(device, 60)}")


def _pressure(collector: Collector, item: dict[str, Any], rank: str) -> int | None:
    """Note the allocator's retries on ``rank``; its out-of-memory count when above 0 (a failure), else None."""
    stats = _object(item.get("memory_stats")) or item
    ooms = stats.get("num_ooms")
    retries = _count(stats.get("num_alloc_retries"))
    if retries is not None:
        meaning = "allocations retried after freeing cached blocks (memory pressure)"
        collector.note(f"{rank}: {retries:,} {meaning} (num_alloc_retries)")
    # Any positive count is a failure, even one past any real count (capped for display: it says as much).
    if isinstance(ooms, int) and not isinstance(ooms, bool) and ooms > 0:
        return min(ooms, MAX_COUNT_VALUE + 1)
    return None


def _count(value: object) -> int | None:
    """A positive count as the allocator states it, else None (0, absent, or not a count)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_COUNT_VALUE:
        return value
    return None


def _out_of_memory(ooms: list[tuple[str, int]]) -> Failure:
    """The run ran out of memory: the allocator raised out-of-memory errors (num_ooms) on these ranks."""
    total = sum(count for _, count in ooms)
    shown = ", ".join(f"{_counted(count)} on {rank}" for rank, count in ooms[:4])
    shown = f"num_ooms on {ooms[0][0]}" if len(ooms) == 1 else f"num_ooms: {shown}"
    more = f" and {len(ooms) - 4:,} more ranks" if len(ooms) > 4 else ""
    errors = "error" if total == 1 else "errors"
    return Failure(
        f"PyTorch's allocator raised {_counted(total)} out-of-memory {errors} ({shown}{more})", 0, True, "run"
    )


def _counted(count: int) -> str:
    return f"{count:,}" if count <= MAX_COUNT_VALUE else f"more than {MAX_COUNT_VALUE:,}"


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
