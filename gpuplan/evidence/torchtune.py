"""torchtune training logs: the peak memory its recipes log every ``log_every_n_steps`` steps.

With ``log_peak_memory_stats: True`` a recipe adds ``training.get_memory_stats(device)``
(pytorch/torchtune, torchtune/training/memory.py: ``peak_memory_active``, ``peak_memory_alloc``,
``peak_memory_reserved``, in GiB from ``torch.cuda.memory_stats()['active_bytes.all.peak']``,
``max_memory_allocated()`` and ``max_memory_reserved()``) to the step's metrics, which the metric
loggers write as ``Step 5 | loss:1.02 lr:3e-05 ... peak_memory_alloc:16.43 peak_memory_reserved:18.02``
(torchtune/training/metric_logging.py, ``DiskLogger.log_dict`` / ``StdoutLogger.log_dict``). The
largest value over all steps is the run's peak. ``log_memory_stats`` also logs ``Memory stats after
model init: ... peak memory allocation: X GiB``, which is not the training peak and is not used.
"""

from __future__ import annotations

import re
from typing import BinaryIO

from gpuplan.errors import GpuplanError
from gpuplan.evidence.collect import Collector, refuse_allocated_above_reserved
from gpuplan.evidence.lines import GIB, MAX_BYTES_VALUE, LineReader, clean, number, resolution
from gpuplan.evidence.model import BYTES, FINETUNE, PEAK_ALLOCATED, PEAK_RESERVED, Evidence

KIND = "torchtune"
ENGINE = "torchtune"
MARKERS = ("peak_memory_alloc:", "peak_memory_reserved:")
_STEP = re.compile(r"peak_memory_(?P<which>alloc|reserved):(?P<value>\S{1,40})")
_TERMS = {"alloc": PEAK_ALLOCATED, "reserved": PEAK_RESERVED}
_AFTER_INIT = "Memory stats after model init"


def read(stream: BinaryIO, path: str) -> Evidence:
    shown = clean(path)
    reader = LineReader(stream)
    collector = Collector()
    init_only = False
    for line_number, line in reader:
        if _AFTER_INIT in line:
            init_only = True
        if "peak_memory_" not in line:
            continue
        for found in _STEP.finditer(line):
            value = number(found.group("value"), MAX_BYTES_VALUE / GIB)
            if value is None:
                collector.note(f"line {line_number}: unreadable peak_memory value; ignored")
                continue
            collector.peak(
                _TERMS[found.group("which")],
                "rank 0",
                value * GIB,
                unit=BYTES,
                line=line_number,
                phrase=f"peak_memory_{found.group('which')}",
                resolution=resolution(found.group("value"), "GiB"),
            )
    if not collector.terms:
        advice = "set log_peak_memory_stats: True in the recipe config to log the training peak"
        what = "only the memory after model init" if init_only else "no peak_memory_alloc/peak_memory_reserved"
        raise GpuplanError(f"{shown}: {what} in {reader.count:,} lines; {advice}")
    refuse_allocated_above_reserved(collector, shown)
    missing = tuple(f"peak_memory_{which}" for which, term in _TERMS.items() if term not in collector.terms)
    return collector.evidence(shown, KIND, FINETUNE, ENGINE, reader.count, missing)
