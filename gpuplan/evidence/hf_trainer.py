"""Hugging Face Trainer memory metrics: the ``***** train metrics *****`` block, or its results JSON.

``Trainer(args=TrainingArguments(skip_memory_metrics=False))`` reports, through
``TrainerMemoryTracker`` (huggingface/transformers, src/transformers/trainer_utils.py, ``update_metrics``),
the keys ``before_init_mem_gpu``, ``init_mem_gpu_alloc_delta``, ``init_mem_gpu_peaked_delta``,
``train_mem_gpu_alloc_delta`` and ``train_mem_gpu_peaked_delta`` (bytes, from
``torch.cuda.memory_allocated()`` and ``max_memory_allocated()`` on GPU 0 of rank 0). ``log_metrics``
(src/transformers/trainer_pt_utils.py) prints them as ``  train_mem_gpu_peaked_delta =  7MB`` after
``metrics_format`` turned bytes into ``v >> 20`` MiB; ``save_metrics`` writes the raw bytes to
``train_results.json`` / ``all_results.json``.

The training peak of allocated memory is the memory at the start of ``train`` plus the two deltas:
``before_init_mem_gpu + init_mem_gpu_alloc_delta + train_mem_gpu_alloc_delta + train_mem_gpu_peaked_delta``
(the tracker's own docstring: "add up alloc_delta + peaked_delta"). Reserved memory is not reported.
"""

from __future__ import annotations

import re
from typing import Any, BinaryIO

from gpuplan.errors import GpuplanError
from gpuplan.evidence.collect import Collector
from gpuplan.evidence.lines import (
    MAX_BYTES_VALUE,
    MIB,
    LineReader,
    clean,
    first_char,
    json_number,
    load_json,
    memory_bytes,
    number,
)
from gpuplan.evidence.model import BYTES, FINETUNE, PEAK_ALLOCATED, Evidence

KIND = "hf-trainer"
ENGINE = "Hugging Face Trainer memory metrics"
PARTS = ("before_init_mem_gpu", "init_mem_gpu_alloc_delta", "train_mem_gpu_alloc_delta", "train_mem_gpu_peaked_delta")
REQUIRED = ("train_mem_gpu_alloc_delta", "train_mem_gpu_peaked_delta")
MARKERS = ("train_mem_gpu_peaked_delta", "train_mem_gpu_alloc_delta")
_METRIC = re.compile(
    r"\b(?P<key>before_init_mem_gpu|(?:init|train)_mem_gpu_(?:alloc|peaked)_delta)\s*=\s*(?P<sign>-?)(?P<value>\S{1,24}?)MB\b"
)


def claims(document: object) -> bool:
    return isinstance(document, dict) and any(key in document for key in MARKERS)


def read(stream: BinaryIO, path: str) -> Evidence:
    if first_char(stream) == b"{":
        document = load_json(stream, path)
        if not isinstance(document, dict):
            raise GpuplanError(f"{clean(path)}: expected the Trainer's metrics object")
        return from_document(document, path)
    reader = LineReader(stream)
    parts: dict[str, tuple[float, int]] = {}
    for line_number, line in reader:
        if "_mem_gpu" not in line:
            continue
        for found in _METRIC.finditer(line):
            value = number(found.group("value"), MAX_BYTES_VALUE / MIB)
            if (
                value is not None and found.group("key") in PARTS
            ):  # a later block (another train() call) replaces an earlier one
                parts[found.group("key")] = ((-value if found.group("sign") else value) * MIB, line_number)
    # metrics_format floors each value to whole MiB (v >> 20): each printed part is up to 1 MiB low.
    return _evidence(parts, path, reader.count, per_part_resolution=MIB)


def from_document(document: dict[str, Any], path: str) -> Evidence:
    shown = clean(path)
    # save_metrics writes bytes as JSON numbers; the deltas may be negative (memory freed).
    parts = {key: (json_number(document[key], key, shown), 0) for key in PARTS if key in document}
    return _evidence(parts, path, 0, per_part_resolution=0.0, from_json=True)


def _evidence(
    parts: dict[str, tuple[float, int]], path: str, lines: int, per_part_resolution: float, from_json: bool = False
) -> Evidence:
    shown = clean(path)
    absent = [key for key in REQUIRED if key not in parts]
    if absent:
        raise GpuplanError(
            f"{shown}: no Trainer training memory metrics ({', '.join(absent)} missing); run with "
            "TrainingArguments(skip_memory_metrics=False) and keep the '***** train metrics *****' block"
        )
    collector = Collector()
    missing = []
    if "before_init_mem_gpu" not in parts:
        missing.append("before_init_mem_gpu (memory already on the GPU when the Trainer was created)")
        collector.note("before_init_mem_gpu absent: a model placed on the GPU before Trainer() is not counted")
    if "init_mem_gpu_alloc_delta" not in parts:
        missing.append("init_mem_gpu_alloc_delta")
    peak = sum(value for value, _ in parts.values())
    line = min(at for _, at in parts.values())
    advice = (
        "the JSON holds bytes (the printed block shows MB)"
        if from_json
        else "run the Trainer on the GPU with skip_memory_metrics=False"
    )
    memory_bytes(peak, f"{' + '.join(parts)} add up to", shown, advice)
    collector.measure(
        PEAK_ALLOCATED,
        "rank 0",
        peak,
        unit=BYTES,
        line=line,
        phrase="Trainer memory metrics (start + alloc + peaked deltas)",
        resolution=per_part_resolution * len(parts),
    )
    # TrainerMemoryTracker resets the peak statistics as each stage starts, and TRL's SFTTrainer prepares the
    # model before Trainer.__init__ starts the init stage: a preparation's copies are in no peak it reports
    # (what they leave is in before_init_mem_gpu), and the train stage's peak is the steps'.
    return collector.evidence(shown, KIND, FINETUNE, ENGINE, lines, tuple(missing), peaks_from_training=True)
