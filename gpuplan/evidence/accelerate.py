"""Accelerate's peak-memory tracking lines (its ``TorchTracemalloc`` examples).

huggingface/accelerate, examples/by_feature/fsdp_with_peak_mem_tracking.py and
peak_memory_usage_tracker.py print, per epoch, in MiB (``b2mb(x) = int(x / 2**20)``):
``Memory before entering the train : N``, ``Memory consumed at the end of the train (end-begin): N``,
``Peak Memory consumed during the train (max-begin): N`` and
``Total Peak Memory consumed during the train (max): N`` (``torch.cuda.max_memory_allocated()``). The
largest total over the epochs is the run's allocated peak; reserved memory is not reported.
"""

from __future__ import annotations

import re
from typing import BinaryIO

from gpuplan.errors import GpuplanError
from gpuplan.evidence.collect import Collector
from gpuplan.evidence.lines import MAX_BYTES_VALUE, MIB, LineReader, clean, number
from gpuplan.evidence.model import BYTES, FINETUNE, PEAK_ALLOCATED, Evidence

KIND = "accelerate"
ENGINE = "Accelerate TorchTracemalloc"
MARKERS = ("Total Peak Memory consumed during the train", "Peak Memory consumed during the train")
_TOTAL = re.compile(r"Total Peak Memory consumed during the train \(max\): (\S{1,24})")
_BEGIN = re.compile(r"Memory before entering the train : (\S{1,24})")
_PEAKED = re.compile(r"(?<!Total )Peak Memory consumed during the train \(max-begin\): (\S{1,24})")
# Two b2mb() truncations (peaked and begin) make the printed total up to 2 MiB low.
TOTAL_RESOLUTION = 2 * MIB


def read(stream: BinaryIO, path: str) -> Evidence:
    shown = clean(path)
    reader = LineReader(stream)
    collector = Collector()
    begin: float | None = None
    for line_number, line in reader:
        if "Memory" not in line:
            continue
        for pattern in (_TOTAL, _BEGIN, _PEAKED):
            found = pattern.search(line)
            if found is None:
                continue
            value = number(found.group(1), MAX_BYTES_VALUE / MIB)
            if value is None:
                collector.note(f"line {line_number}: unreadable memory value; ignored")
            elif pattern is _BEGIN:
                begin = value
            elif pattern is _TOTAL or begin is not None:
                total = value if pattern is _TOTAL else value + (begin or 0.0)
                collector.peak(
                    PEAK_ALLOCATED,
                    "rank 0",
                    total * MIB,
                    unit=BYTES,
                    line=line_number,
                    phrase="Total Peak Memory consumed during the train",
                    resolution=TOTAL_RESOLUTION,
                )
    if not collector.terms:
        raise GpuplanError(
            f"{shown}: no 'Total Peak Memory consumed during the train (max)' line in {reader.count:,} lines"
        )
    # TorchTracemalloc measures each epoch's peak from the epoch's start: loading came before.
    return collector.evidence(shown, KIND, FINETUNE, ENGINE, reader.count, peaks_from_training=True)
