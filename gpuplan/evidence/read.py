"""Choose a reader by content (or by name) and read one piece of evidence."""

from __future__ import annotations

import re
from types import ModuleType

from gpuplan.errors import GpuplanError
from gpuplan.evidence import accelerate, hf_trainer, sglang, torch_memory, torchtune, trtllm, vllm
from gpuplan.evidence.lines import LineReader, clean, load_json, open_regular, starts_json
from gpuplan.evidence.model import KINDS, Evidence

READERS: dict[str, ModuleType] = {
    module.KIND: module for module in (vllm, sglang, trtllm, torch_memory, hf_trainer, torchtune, accelerate)
}
# Text formats, in the order a line is tested against them.
_LINE_MARKERS = {
    kind: READERS[kind].MARKERS for kind in ("vllm", "sglang", "trtllm", "hf-trainer", "torchtune", "accelerate")
}
_ANY_MARKER = re.compile("|".join(re.escape(marker) for markers in _LINE_MARKERS.values() for marker in markers))


def read_evidence(path: str, kind: str | None = None) -> Evidence:
    """The evidence in ``path``; ``kind`` (one of KINDS) skips detection. Raises GpuplanError."""
    chosen = detect(path) if kind in (None, "auto") else kind
    if chosen not in READERS:
        raise GpuplanError(f"unknown evidence kind {clean(str(chosen), 40)!r}; one of {', '.join(KINDS)}")
    with open_regular(path) as stream:
        evidence: Evidence = READERS[chosen].read(stream, path)
    return evidence


def detect(path: str) -> str:
    """Which reader ``path`` is for, from its content: JSON keys, or the first known line (streamed)."""
    with open_regular(path) as stream:
        if starts_json(stream):
            document = load_json(stream, path)
            for module in (torch_memory, hf_trainer):
                if module.claims(document):
                    return str(module.KIND)
            raise GpuplanError(
                f"{clean(path)}: a JSON document without memory statistics (max_memory_allocated, "
                "allocated_bytes.all.peak) or Trainer memory metrics (train_mem_gpu_peaked_delta)"
            )
        reader = LineReader(stream)
        for _, line in reader:
            found = _ANY_MARKER.search(line)
            if found:
                return next(kind for kind, markers in _LINE_MARKERS.items() if found.group(0) in markers)
    raise GpuplanError(
        f"cannot tell what run evidence {clean(path)} is: no vLLM, SGLang, TensorRT-LLM, Trainer, torchtune or "
        f"Accelerate memory line in {reader.count:,} lines; name the format with --kind ({', '.join(KINDS)})"
    )


__all__ = ["READERS", "detect", "read_evidence"]
