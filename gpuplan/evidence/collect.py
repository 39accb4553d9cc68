"""The mutable scratchpad a reader fills while it streams, turned into a frozen Evidence at the end."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuplan.errors import GpuplanError
from gpuplan.evidence.model import PEAK_ALLOCATED, PEAK_RESERVED, Evidence, Failure, Measurement, Setting
from gpuplan.units import format_gib

MAX_RANKS = 4096  # more distinct ranks than any real job: the rest are ignored (a hostile log cannot grow memory)
MAX_NOTES = 20


@dataclass
class _Term:
    unit: str
    phrase: str
    line: int
    values: dict[str, float] = field(default_factory=dict)
    resolution: float = 0.0


# Settings that are counts of GPUs, sequences or tokens: at least 1 in any run (vLLM's names, and
# TensorRT-LLM's and SGLang's caps as their readers record them).
AT_LEAST_ONE = frozenset(
    {
        "tensor_parallel",
        "pipeline_parallel",
        "data_parallel",
        "max_model_len",
        "max_num_seqs",
        "max_num_batched_tokens",
        "max_sequences",
        "max_batched_tokens",
    }
)


class Collector:
    """What has been read so far: first value per term and rank, settings, notes, a failure."""

    def __init__(self) -> None:
        self.terms: dict[str, _Term] = {}
        self.settings: dict[str, Setting] = {}
        self.notes: list[str] = []
        self.failure: Failure | None = None
        self.version: str | None = None
        self.model: str | None = None
        self._ranks: set[str] = set()

    def measure(
        self,
        term: str,
        rank: str,
        value: float,
        *,
        unit: str,
        line: int,
        phrase: str,
        resolution: float = 0.0,
        replace: bool = False,
    ) -> None:
        """Record ``value`` for ``term`` on ``rank``; the first reading wins unless ``replace`` (a running peak)."""
        if rank not in self._ranks:
            if len(self._ranks) >= MAX_RANKS:
                return
            self._ranks.add(rank)
        entry = self.terms.setdefault(term, _Term(unit, phrase, line))
        if rank in entry.values and not replace:
            return
        entry.values[rank] = value
        entry.resolution = max(entry.resolution, resolution)

    def peak(self, term: str, rank: str, value: float, *, unit: str, line: int, phrase: str, resolution: float) -> None:
        """Keep the largest value seen (a peak logged every step)."""
        current = self.terms.get(term)
        if current is None or value > current.values.get(rank, -1.0):
            self.measure(term, rank, value, unit=unit, line=line, phrase=phrase, resolution=resolution, replace=True)

    def setting(self, name: str, value: str | int | float, line: int, raw: str = "") -> None:
        self.settings.setdefault(name, Setting(name, value, line, raw))

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES and text not in self.notes:
            self.notes.append(text)

    def evidence(
        self,
        path: str,
        kind: str,
        job: str,
        engine: str,
        lines: int,
        missing: tuple[str, ...] = (),
        incomplete: str = "",
        peaks_from_training: bool = False,
    ) -> Evidence:
        for name, setting in self.settings.items():
            if name in AT_LEAST_ONE and isinstance(setting.value, (int, float)) and setting.value < 1:
                # a count of GPUs or sequences or tokens that is 0 is no setting a run had (exit 2, as a byte
                # count in the wrong unit is): a degree of 0 would divide a layout by zero
                raise GpuplanError(
                    f"{path}:{setting.line}: {name} is {setting.value}: impossible, it is at least 1 in any run"
                )
        measurements = {
            term: Measurement(
                term,
                entry.unit,
                tuple(sorted(entry.values.items(), key=lambda item: rank_order(item[0]))),
                entry.resolution,
                entry.line,
                entry.phrase,
            )
            for term, entry in self.terms.items()
        }
        return Evidence(
            path=path,
            kind=kind,
            job=job,
            engine=engine,
            version=self.version,
            model=self.model,
            settings=dict(self.settings),
            measurements=measurements,
            failure=self.failure,
            missing=missing,
            incomplete=incomplete,
            notes=tuple(self.notes),
            lines=lines,
            peaks_from_training=peaks_from_training,
        )


def refuse_allocated_above_reserved(collector: Collector, shown: str) -> None:
    """GpuplanError when a rank's allocated peak is above its reserved peak beyond the two printings: the
    caching allocator's reserved segments hold every allocation, so at every instant, and so at the peaks,
    reserved >= allocated (PyTorch's CUDA caching allocator). The two are swapped, or from different runs."""
    allocated, reserved = collector.terms.get(PEAK_ALLOCATED), collector.terms.get(PEAK_RESERVED)
    if allocated is None or reserved is None:
        return
    allowed = allocated.resolution + reserved.resolution
    for rank, value in allocated.values.items():
        held = reserved.values.get(rank)
        if held is not None and value - held > allowed:
            raise GpuplanError(
                f"{shown}: {rank}: {allocated.phrase} ({format_gib(value, 2)}) is above {reserved.phrase} "
                f"({format_gib(held, 2)}): impossible, as the reserved memory holds every allocation; are the "
                "two swapped, or from different runs?"
            )


_RANK_PARTS = re.compile(r"(DP|PP|PCP|TP|DCP|rank ?)(\d{1,9})")
_PART_ORDER = {"DP": 0, "PP": 1, "PCP": 2, "TP": 3, "DCP": 4}


def parallel_degree(first_lines: dict[str, int], kind: str) -> tuple[int, int, str] | None:
    """The degree of ``kind`` ("TP", "PP") that rank labels imply, the line it is first seen on, and how:
    the highest index + 1 (TP0..TP7: 8), or 1 when no label names ``kind`` (SGLang names a kind in its
    prefixes only when its degree is above 1: scheduler.py ``run_scheduler_process``). None when rank 0 of
    ``kind`` alone is named: its label proves a degree of 2 or more, and an excerpt of rank 0's lines (a
    common way to cut a log down) says no more. ``first_lines`` maps each label to the first line it is
    on, and must hold the labels of lines every rank prints."""
    highest, at = -1, min(first_lines.values(), default=0)
    for label, line in first_lines.items():
        for part, index in _RANK_PARTS.findall(label):
            if part == kind and (int(index), -line) > (highest, -at):
                highest, at = int(index), line
    if highest < 0:
        return 1, at, f"no rank named {kind}"
    if highest == 0:
        return None
    return highest + 1, at, f"ranks {kind}0-{kind}{highest}"


def rank_order(label: str) -> tuple[tuple[int, int], ...]:
    """Sort key: data-parallel rank, then pipeline stage, then tensor rank (vLLM's process naming order)."""
    parts = _RANK_PARTS.findall(label)
    if not parts:
        return ((-1, 0),) if label == "0" else ((99, 0),)
    return tuple((_PART_ORDER.get(kind, 5), int(index)) for kind, index in parts)
