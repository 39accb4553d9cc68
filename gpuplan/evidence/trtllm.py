"""TensorRT-LLM startup logs (PyTorch backend): what the executor allocated for its KV cache, and why.

Read against the lines TensorRT-LLM v0.19-v1.0 prints: Python (``[date] [TRT-LLM] [I] ...``, from
``tensorrt_llm/_torch/pyexecutor/_util.py`` ``KvCacheCreator``) and C++ (``[TensorRT-LLM][INFO] ...``, from
``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp``):

- ``[TensorRT-LLM] TensorRT-LLM version: X``;
- ``Memory used after loading model weights (inside torch) in memory usage profiling: X GiB``: weights;
- ``Memory dynamically allocated during inference (inside torch) in memory usage profiling: X GiB``: the
  profile forward's activations;
- ``Peak memory during memory usage profiling (torch + non-torch): P GiB, available KV cache memory when
  calculating max tokens: A GiB, fraction is set F, ... device total memory T GiB, , tmp kv_mem M GiB``:
  the room for the KV cache is ``T - P + M`` (``A = F x room``);
- ``Memory usage when calculating max tokens in paged kv cache: total: T GiB, available: A GiB``: the
  room the C++ manager found free when it sized the pool (``free_gpu_memory_fraction`` of it);
- ``Both ... are set (to F and N, respectively)``: the fraction, and a token cap beside it;
- ``max_seq_len=L, max_num_requests=R, max_num_tokens=T``: the executor's limits;
- ``[MemUsageChange] Allocated X GiB for max tokens in paged KV cache (N).``: the pool and its tokens.

Memory is printed in GiB (``/ (1 << 30)``) to two decimals. A log with several pool sizings (the
estimation pass, then the real pool) is read for the last; a failed start is its first exception line.
"""

from __future__ import annotations

import re
from typing import BinaryIO

from gpuplan.errors import GpuplanError
from gpuplan.evidence.collect import Collector
from gpuplan.evidence.lines import MAX_COUNT_VALUE, LineReader, clean, number, parse_lines, resolution, size
from gpuplan.evidence.model import (
    BYTES,
    GPU_TOTAL,
    KV_POOL,
    KV_ROOM,
    KV_TOKENS,
    SERVE,
    TOKENS,
    TORCH_PEAK,
    WEIGHTS,
    Evidence,
    Failure,
)

KIND = "trtllm"
ENGINE = "TensorRT-LLM"
KNOWN_VERSION = "0.19-1.0"
ROUNDED_TO = 2
MARKERS = (
    "TensorRT-LLM version:",
    "for max tokens in paged KV cache",
    "when calculating max tokens in paged kv cache",
    "memory usage profiling",
)

_RANK = re.compile(r"\[RANK (\d{1,6})\]")
_V = r"(\S{1,40}?)"
_U = r" ?(GiB|GB|MiB|MB)"
_VERSION = re.compile(r"TensorRT-LLM version: (\S{1,40})")
_WEIGHTS = re.compile(rf"Memory used after loading model weights \(inside torch\) in memory usage profiling: {_V}{_U}")
_ACTIVATIONS = re.compile(rf"Memory dynamically allocated during inference \(inside torch\) [^:]*: {_V}{_U}")
_PEAK = re.compile(
    rf"Peak memory during memory usage profiling \(torch \+ non-torch\): {_V}{_U}, .*?fraction is set ([0-9.]{{1,20}}),"
    rf".*?device total memory {_V}{_U}, , tmp kv_mem {_V}{_U}"
)
_CPP_ROOM = re.compile(rf"when calculating max tokens in paged kv cache: total: {_V}{_U}, available: {_V}{_U}")
_BOTH = re.compile(r"are set \(to ([0-9.]{1,20}) and (\d{1,13}), respectively\)")
_LIMITS = re.compile(r"max_seq_len=(\d{1,9}), max_num_requests=(\d{1,9}), max_num_tokens=(\d{1,9})")
_POOL = re.compile(rf"Allocated {_V}{_U} for max tokens in paged KV cache \((\d{{1,13}})\)")
_EXCEPTION = re.compile(r"(?P<type>(?:[A-Za-z_]\w{0,60}\.){0,6}[A-Za-z_]\w{0,80}(?:Error|Exception)):\s*(?P<text>.*)$")
_OOM = re.compile(r"out of memory|OutOfMemoryError", re.I)


def read(stream: BinaryIO, path: str) -> Evidence:
    """Read a TensorRT-LLM log from ``stream`` (named ``path`` in messages). Raises GpuplanError."""
    return parse_lines(stream, path, _Parse())


class _Parse:
    def __init__(self) -> None:
        self.collector = Collector()
        self.pools = 0
        self.cause: tuple[str, int] | None = None

    def line(self, number_: int, line: str) -> None:
        ranked = _RANK.search(line)
        rank = f"rank {ranked.group(1)}" if ranked else "0"
        if "TensorRT-LLM version:" in line:
            found = _VERSION.search(line)
            if found and self.collector.version is None:
                self.collector.version = clean(found.group(1), 40)
        elif "memory usage profiling" in line:
            self._profile(line, rank, number_)
        elif "when calculating max tokens in paged kv cache" in line:
            self._room(line, rank, number_)
        elif "respectively)" in line:
            found = _BOTH.search(line)
            if found:
                self._fraction(found.group(1), number_)
                self.collector.note(f"line {number_}: a token cap ({found.group(2)}) was set beside the fraction")
        elif "max_num_tokens=" in line:
            self._limits(line, number_)
        elif "for max tokens in paged KV cache" in line:
            self._pool(line, rank, number_)
        elif "Error" in line or "Exception" in line:
            self._problem(line, number_)

    def _measure(self, term: str, rank: str, value: str, unit: str, number_: int, phrase: str) -> None:
        amount = size(value, unit)
        if amount is None:
            self.collector.note(f"line {number_}: {phrase!r} has an unreadable value {clean(value, 40)!r}; ignored")
            return
        self.collector.measure(
            term,
            rank,
            amount,
            unit=BYTES,
            line=number_,
            phrase=phrase,
            resolution=resolution(value, unit, ROUNDED_TO),
            replace=True,  # the last sizing (the real pool after the estimation pass) wins
        )

    def _fraction(self, raw: str, number_: int) -> None:
        value = number(raw, 1.0)
        if value is not None:
            # The fraction travels as a float32: 0.800000011920929 is 0.8.
            self.collector.settings.pop("memory_utilization", None)
            self.collector.setting("memory_utilization", round(value, 6), number_)

    def _profile(self, line: str, rank: str, number_: int) -> None:
        for term, pattern, phrase in (
            (WEIGHTS, _WEIGHTS, "Memory used after loading model weights (inside torch)"),
            (TORCH_PEAK, _ACTIVATIONS, "Memory dynamically allocated during inference (inside torch)"),
        ):
            found = pattern.search(line)
            if found:
                self._measure(term, rank, found.group(1), found.group(2), number_, phrase)
        peak = _PEAK.search(line)
        if peak is None:
            return
        peak_value, peak_unit, fraction, total, total_unit, tmp, tmp_unit = peak.groups()
        values = (size(peak_value, peak_unit), size(total, total_unit), size(tmp, tmp_unit))
        self._fraction(fraction, number_)
        if values[1] is not None:
            self._measure(GPU_TOTAL, rank, total, total_unit, number_, "device total memory")
        if all(value is not None for value in values):
            used, whole, held = (value or 0.0 for value in values)
            step = 3 * resolution(total, total_unit, ROUNDED_TO)
            self.collector.measure(
                KV_ROOM,
                rank,
                whole - used + held,
                unit=BYTES,
                line=number_,
                phrase="Peak memory",
                resolution=step,
                replace=True,
            )

    def _room(self, line: str, rank: str, number_: int) -> None:
        found = _CPP_ROOM.search(line)
        if found:
            total, total_unit, available, available_unit = found.groups()
            self._measure(GPU_TOTAL, rank, total, total_unit, number_, "Memory usage when calculating max tokens")
            self._measure(KV_ROOM, rank, available, available_unit, number_, "Memory usage when calculating max tokens")

    def _limits(self, line: str, number_: int) -> None:
        found = _LIMITS.search(line)
        if found is None:
            return
        for name, raw in zip(("max_model_len", "max_sequences", "max_batched_tokens"), found.groups(), strict=True):
            value = number(raw, MAX_COUNT_VALUE)
            if value is not None:
                self.collector.settings.pop(name, None)
                self.collector.setting(name, int(value), number_)

    def _pool(self, line: str, rank: str, number_: int) -> None:
        found = _POOL.search(line)
        if found is None:
            return
        self.pools += 1
        value, unit, tokens = found.groups()
        self._measure(KV_POOL, rank, value, unit, number_, "Allocated for max tokens in paged KV cache")
        count = number(tokens, MAX_COUNT_VALUE)
        if count is not None:
            self.collector.measure(
                KV_TOKENS, rank, count, unit=TOKENS, line=number_, phrase="max tokens in paged KV cache", replace=True
            )

    def _problem(self, line: str, number_: int) -> None:
        found = _EXCEPTION.search(line)
        if found is None:
            return
        text = clean(line[found.start() :])
        if self.pools and KV_POOL in self.collector.terms:
            if _OOM.search(text) and self.collector.failure is None:
                self.collector.failure = Failure(text, number_, True, "run")
        elif self.cause is None:
            self.cause = (text, number_)

    def finish(self, path: str, reader: LineReader) -> Evidence:
        collector = self.collector
        shown = clean(path)
        if not collector.terms and not collector.settings and collector.version is None:
            raise GpuplanError(
                f"{shown}: no TensorRT-LLM KV cache lines in {reader.count:,} lines (looked for "
                f"{', '.join(repr(m) for m in MARKERS)}); is it a TensorRT-LLM log? --kind names the format"
            )
        collector.setting("engine", "trtllm", 0)
        if self.cause and collector.failure is None and KV_POOL not in collector.terms:
            cause, at = self.cause
            collector.failure = Failure(cause, at, bool(_OOM.search(cause)), "startup")
        if self.pools > 1:
            collector.note(f"the log sizes the KV cache {self.pools} times; the last pool is read")
        if reader.overlong:
            collector.note(f"{reader.overlong} line(s) longer than 64 KiB skipped")
        if collector.version and not collector.version.startswith(("0.19", "0.2", "1.0")):
            collector.note(
                f"read with the TensorRT-LLM {KNOWN_VERSION} line formats; this log is from {collector.version}"
            )
        failed = collector.failure is not None and collector.failure.during == "startup"
        incomplete = ""
        if not failed and KV_POOL not in collector.terms:
            incomplete = "the log ends before the executor allocated its KV cache: truncated, or still starting"
        missing: list[str] = []
        if not failed:
            for term, phrase in (
                (WEIGHTS, "'Memory used after loading model weights (inside torch)' (weights)"),
                (KV_ROOM, "'Memory usage when calculating max tokens' or 'Peak memory' (the room for the KV cache)"),
                (KV_POOL, "'[MemUsageChange] Allocated ... for max tokens in paged KV cache' (the pool)"),
            ):
                if term not in collector.terms:
                    missing.append(phrase)
        return collector.evidence(shown, KIND, SERVE, ENGINE, reader.count, tuple(missing), incomplete)
