"""vLLM V1 startup logs: what the engine allocated, per rank, and the settings it ran with.

Read against the lines vLLM 0.19 prints (``vllm/v1/worker/gpu_worker.py``, ``gpu_model_runner.py``,
``v1/core/kv_cache_utils.py``, ``v1/engine/core.py``, ``entrypoints/utils.py``):

- ``non-default args: {...}`` and ``Initializing a V1 LLM engine (vX) with config: ...``: max_model_len,
  tensor/pipeline parallel size, dtype, kv_cache_dtype, quantization, gpu_memory_utilization;
- ``Model loading took X GiB memory``: weights on the rank;
- ``Memory profiling takes ... Total non KV cache memory: X; torch peak memory increase: X; non-torch
  forward increase memory: X; weights memory: X`` (DEBUG): the profile run, per rank;
- ``Available KV cache memory: X GiB`` and, per rank at DEBUG, ``Current kv cache memory in use is X``;
- ``GPU KV cache size: N tokens`` and ``Maximum concurrency for N tokens per request: Xx`` (engine-wide);
- ``Graph capturing finished in S secs, took X GiB`` / ``CUDA graph pool memory: X GiB (actual)``;
- ``Requested memory: U (util), X GiB`` and ``Free memory on device (F/T GiB)`` (DEBUG): the budget.

A worker's lines carry its process name, ``(Worker_PP1_TP0 pid=...)``, which names the rank; a
single-GPU engine logs from ``(EngineCore pid=...)``. A failed start is the first exception line of
the start (the root cause vLLM prints before its wrappers). An out-of-memory error anywhere else in the
start's lines is a failure too, whether or not the log holds the line that says the engine is up
(``init engine (profile, create kv cache, warmup model) took``, or the API server's ``Starting vLLM API
server [N] on`` / ``Starting vLLM server on``, as vLLM's releases word it): once the engine has reported
its KV cache, it ran out of memory while running. When a log holds several starts (a restarted
container), the last one is read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import BinaryIO

from gpuplan.errors import GpuplanError
from gpuplan.estimate.engines import VLLM_MEMORY_UTILIZATION
from gpuplan.estimate.vllm_releases import vllm_release
from gpuplan.evidence.collect import Collector
from gpuplan.evidence.lines import MAX_COUNT_VALUE, LineReader, clean, number, parse_lines, resolution, size
from gpuplan.evidence.model import (
    BYTES,
    CUDA_GRAPHS,
    GPU_TOTAL,
    KV_POOL,
    KV_TOKENS,
    MAX_CONCURRENCY,
    NON_TORCH,
    REQUESTED,
    SEQUENCES,
    SERVE,
    TOKENS,
    TORCH_PEAK,
    WEIGHTS,
    Evidence,
    Failure,
)

KIND = "vllm"
ENGINE = "vLLM"
KNOWN_VERSION = "0.19"  # the line formats below were read from v0.19 logs
ROUNDED_TO = 2  # decimals: vLLM prints memory with round(x, 2), so "1.1GiB" is 1.10 +- 0.005 GiB
DEFAULT_MEMORY_UTILIZATION = VLLM_MEMORY_UTILIZATION  # what vLLM used when the args do not set it
MARKERS = ("Initializing a V1 LLM engine", "Model loading took", "Available KV cache memory", "GPU KV cache size")

_PREFIX = re.compile(
    r"(?:\((?P<proc>[A-Za-z]\w{0,63}) pid=\d{1,10}\)\s+)?"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]{0,200}\]\s?"
    r"(?P<message>.*)"
)
_BARE = re.compile(r"\((?P<proc>[A-Za-z]\w{0,63}) pid=\d{1,10}\)\s?(?P<message>.*)")
_V = r"(\S{1,100}?)"  # a printed value; checked by lines.number/size, never trusted as it stands
_U = r" ?(GiB|GB|MiB|MB)"

_ENGINE = re.compile(r"Initializing a V1 LLM engine \(v?(?P<version>[^)\s]{1,40})\) with config: (?P<config>.*)")
_CONFIG = {
    "dtype": re.compile(r"(?<![\w])dtype=(?:torch\.)?(\w{1,20})"),
    "max_model_len": re.compile(r"max_seq_len=(\d{1,9})\b"),
    "tensor_parallel": re.compile(r"tensor_parallel_size=(\d{1,6})\b"),
    "pipeline_parallel": re.compile(r"pipeline_parallel_size=(\d{1,6})\b"),
    "data_parallel": re.compile(r"(?<![\w])data_parallel_size=(\d{1,6})\b"),
    "quantization": re.compile(r"quantization=([\w-]{1,40})"),
    "kv_cache_dtype": re.compile(r"kv_cache_dtype=(\w{1,20})"),
    "enforce_eager": re.compile(r"enforce_eager=(True|False)"),
}
_ARGS = {
    "dtype": re.compile(r"'dtype': '(\w{1,20})'"),
    "max_model_len": re.compile(r"'max_model_len': (\d{1,9})\b"),
    "tensor_parallel": re.compile(r"'tensor_parallel_size': (\d{1,6})\b"),
    "pipeline_parallel": re.compile(r"'pipeline_parallel_size': (\d{1,6})\b"),
    "quantization": re.compile(r"'quantization': '([\w-]{1,40})'"),
    "kv_cache_dtype": re.compile(r"'kv_cache_dtype': '(\w{1,20})'"),
    "memory_utilization": re.compile(r"'gpu_memory_utilization': ([0-9.]{1,12})[,}]"),
    "enforce_eager": re.compile(r"'enforce_eager': (True|False)"),
    "max_num_seqs": re.compile(r"'max_num_seqs': (\d{1,9})\b"),
    "max_num_batched_tokens": re.compile(r"'max_num_batched_tokens': (\d{1,9})\b"),
}
_MODEL = re.compile(r"(?:model=|'model': )'([^']{1,300})'")
_MAX_LEN = re.compile(r"Using max model len (\d{1,9})\b")
_LOADED = re.compile(rf"Model loading took {_V}{_U}")
_PROFILE = {
    term: (phrase, re.compile(rf"{phrase}: {_V}{_U}"))
    for term, phrase in (
        (WEIGHTS, "weights memory"),
        (TORCH_PEAK, "torch peak memory increase"),
        (NON_TORCH, "non-torch forward increase memory"),
    )
}
_KV_AVAILABLE = re.compile(rf"Available KV cache memory: {_V}{_U}")
_KV_TOKENS = re.compile(r"GPU KV cache size: (\S{1,40}) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for (\S{1,40}) tokens per request: (\S{1,40}?)x")
_GRAPHS_TOOK = re.compile(rf"Graph capturing finished in \S{{1,20}} secs?, took {_V}{_U}")
_GRAPH_POOL = re.compile(rf"CUDA graph pool memory: {_V}{_U} \(actual\)")
_REQUESTED = re.compile(rf"Requested memory: ([0-9.]{{1,12}}) \(util\), {_V}{_U}")
_SNAPSHOT = re.compile(rf"total_memory={_V}{_U}")
_USAGE = re.compile(
    rf"Free memory on device \(\S{{1,40}}/{_V}{_U}\) on startup\. Desired GPU memory utilization is "
    rf"\(([0-9.]{{1,12}}), {_V}{_U}\)\. Actual usage is {_V}{_U} for weight, {_V}{_U} for peak activation, "
    rf"{_V}{_U} for non-torch memory, and {_V}{_U} for CUDAGraph memory"
)
_KV_IN_USE = re.compile(rf"Current kv cache memory in use is {_V}{_U}")
_EXCEPTION = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w{0,60}\.){0,6}[A-Za-z_]\w{0,80}(?:Error|Exception))(?::\s*(?P<text>.*))?$"
)
_WRAPPERS = ("WorkerProc initialization failed", "Engine core initialization failed")
_OOM = re.compile(r"out of memory|OutOfMemoryError|No available memory for the cache blocks|KV cache is needed", re.I)
# The engine is up: its own line, or the API server's (vLLM 0.19 prints "Starting vLLM API server 0 on URL",
# earlier releases "Starting vLLM API server on URL", later ones "Starting vLLM server on URL").
_STARTED = (
    "init engine (profile, create kv cache, warmup model) took",
    "Starting vLLM server",
    "Starting vLLM API server",
)
_FAILED = ("failed to start", "initialization failed")

_DTYPES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16", "fp16": "fp16"}
_DTYPES |= {"float32": "fp32", "float": "fp32", "fp32": "fp32"}
_QUANTIZATION = {"None": "none", "none": "none", "fp8": "fp8", "awq": "int4-awq", "awq_marlin": "int4-awq"}
_QUANTIZATION |= {"gptq": "int4-gptq", "gptq_marlin": "int4-gptq", "bitsandbytes": "bitsandbytes"}

# Substrings of the lines worth parsing, handlers first. A 100 MB log is mostly lines none of them is in:
# `_worth_a_look` rules those out with a few plain `in` tests, several times faster than a regex alternation.
_HANDLED = (
    "Initializing a V1 LLM engine",
    "non-default args",
    "Using max model len",
    "Model loading took",
    "Memory profiling takes",
    "Available KV cache memory",
    "GPU KV cache size",
    "Maximum concurrency for",
    "Graph capturing finished",
    "CUDA graph pool memory",
    "Requested memory:",
    "memory snapshot",
    "Free memory on device",
)
_OTHER = (*_STARTED, "Error", "Exception", "failed", "out of memory")


def read(stream: BinaryIO, path: str) -> Evidence:
    """Read a vLLM V1 log from ``stream`` (named ``path`` in messages). Raises GpuplanError if it is not one."""
    return parse_lines(stream, path, _Parse())


def _default_utilization(version: str | None) -> float:
    """The gpu_memory_utilization vLLM ran at when its args do not set it: its release's default (0.92 from
    0.20, 1.0 from 0.34: gpuplan.estimate.vllm_releases), the memory model's when the version is unread."""
    try:
        return vllm_release(version).default_utilization
    except ValueError:  # a development build's name gpuplan cannot read
        return DEFAULT_MEMORY_UTILIZATION


class _Parse:
    def __init__(self) -> None:
        self.collector = Collector()
        self.args: dict[str, tuple[str, int]] = {}
        self.engine_procs: set[str] = set()
        self.starts = 0
        self.args_seen = False
        self.debug = False  # the log has DEBUG lines: the profiler's split should be in it
        self.started = False  # the engine reported it is up: later exceptions are not startup failures
        self.cause: tuple[str, int] | None = None  # first exception line of this start: the root cause
        self.failed: tuple[str, int] | None = None  # vLLM's own "failed to start" line
        # First out-of-memory exception of this start, and whether the engine had come up or reported its KV
        # cache by then (it ran out of memory while running, not while starting).
        self.oom: tuple[str, int, bool] | None = None
        self.handlers: dict[str, Callable[[str, str, str, int], None]] = {
            "Initializing a V1 LLM engine": self._engine,
            "non-default args": self._args,
            "Using max model len": self._max_len,
            "Model loading took": self._loaded,
            "Memory profiling takes": self._profile,
            "Available KV cache memory": self._kv_available,
            "GPU KV cache size": self._kv_tokens,
            "Maximum concurrency for": self._concurrency,
            "Graph capturing finished": self._graphs,
            "CUDA graph pool memory": self._graphs,
            "Requested memory:": self._requested,
            "memory snapshot": self._snapshot,
            "Free memory on device": self._usage,
        }

    # -- dispatch ------------------------------------------------------------------------------

    def line(self, number_: int, line: str) -> None:
        if not self.debug and " DEBUG " in line:
            self.debug = True
        if not _worth_a_look(line):
            return
        handler = next((self.handlers[text] for text in _HANDLED if text in line), None)
        if handler is None and not any(text in line for text in _OTHER):
            return
        parsed = _PREFIX.search(line)
        if parsed:
            proc, level, message = parsed.group("proc"), parsed.group("level"), parsed.group("message")
        else:
            bare = _BARE.search(line)
            proc, level, message = (bare.group("proc"), "", bare.group("message")) if bare else (None, "", line)
        if handler is not None:
            handler(message, _rank(proc), proc or "", number_)
        elif any(text in message for text in _STARTED):
            self.started = True
        else:
            self._problem(message, level, number_)

    def _problem(self, message: str, level: str, number_: int) -> None:
        """Exception lines at ERROR level (or printed bare): a startup's root cause, or an out-of-memory error
        wherever it comes (while starting or serving)."""
        if level not in ("", "ERROR", "CRITICAL"):
            return
        text = message.strip()
        if not self.started and any(marker in text for marker in _FAILED):
            self.failed = self.failed or (text, number_)
        exception = _EXCEPTION.match(text)
        if exception is None or any(wrapper in text for wrapper in _WRAPPERS):
            return
        if not self.started:
            self.cause = self.cause or (text, number_)
        if self.oom is None and _OOM.search(text):
            terms = self.collector.terms
            self.oom = (text, number_, self.started or KV_POOL in terms or KV_TOKENS in terms)

    # -- settings ------------------------------------------------------------------------------

    def _start(self) -> None:
        """A new engine start: forget the previous one (a restarted container logs several)."""
        self.starts += 1
        if self.starts > 1:
            notes = self.collector.notes
            self.collector = Collector()
            self.collector.notes = notes
        self.args, self.engine_procs = {}, set()
        self.args_seen = self.started = False
        self.cause = self.failed = None
        self.oom = None

    def _engine(self, message: str, rank: str, proc: str, number_: int) -> None:
        found = _ENGINE.search(message)
        if found is None:
            return
        if self.starts == 0 or proc in self.engine_procs:  # the same process initialising again: a restart
            self._start()
        self.engine_procs.add(proc)
        collector = self.collector
        collector.version = collector.version or clean(found.group("version"), 40)
        self._setting("engine_version", found.group("version"), number_)
        config = found.group("config")
        for name, pattern in _CONFIG.items():
            value = pattern.search(config)
            if value:
                self._setting(name, value.group(1), number_)
        model = _MODEL.search(config)
        if model and collector.model is None:
            collector.model = clean(model.group(1), 120)

    def _args(self, message: str, rank: str, proc: str, number_: int) -> None:
        if self.starts == 0 or self.args_seen or self.engine_procs or self.collector.terms:
            self._start()
        self.args_seen = True
        for name, pattern in _ARGS.items():
            value = pattern.search(message)
            if value:
                self.args[name] = (value.group(1), number_)
        model = _MODEL.search(message)
        if model:
            self.collector.model = clean(model.group(1), 120)

    def _max_len(self, message: str, rank: str, proc: str, number_: int) -> None:
        found = _MAX_LEN.search(message)
        if found:
            self.args.setdefault("max_model_len", (found.group(1), number_))

    def _setting(self, name: str, raw: str, number_: int) -> None:
        """Record a setting in gpuplan's vocabulary; the engine's resolved config wins over the args."""
        collector = self.collector
        if name in ("max_model_len", "tensor_parallel", "pipeline_parallel", "data_parallel") or name in (
            "max_num_seqs",
            "max_num_batched_tokens",
        ):
            value = number(raw, MAX_COUNT_VALUE)
            if value is not None:
                collector.setting(name, int(value), number_)
        elif name == "engine_version":
            collector.setting(name, clean(raw, 40), number_)
        elif name == "memory_utilization":
            value = number(raw, 1.0)
            if value is not None:
                collector.setting(name, value, number_)
        elif name == "dtype":
            shown = clean(raw, 20)
            collector.setting(name, _DTYPES.get(raw, shown), number_, shown)
        elif name == "kv_cache_dtype":
            shown = clean(raw, 20)
            collector.setting(name, "fp8" if raw.startswith("fp8") else _DTYPES.get(raw, shown), number_, shown)
        elif name == "quantization":
            shown = clean(raw, 40)
            collector.setting(name, _QUANTIZATION.get(raw, shown), number_, shown)
        elif name == "enforce_eager":
            collector.setting(name, raw, number_)

    # -- measurements --------------------------------------------------------------------------

    def _bytes(self, term: str, rank: str, value: str, unit: str, number_: int, phrase: str) -> None:
        amount = size(value, unit)
        if amount is None:
            self.collector.note(f"line {number_}: {phrase!r} has an unreadable value {clean(value, 40)!r}; ignored")
            return
        self.collector.measure(
            term, rank, amount, unit=BYTES, line=number_, phrase=phrase, resolution=resolution(value, unit, ROUNDED_TO)
        )

    def _loaded(self, message: str, rank: str, proc: str, number_: int) -> None:
        found = _LOADED.search(message)
        if found:
            self._bytes(WEIGHTS, rank, found.group(1), found.group(2), number_, "Model loading took")

    def _profile(self, message: str, rank: str, proc: str, number_: int) -> None:
        for term, (phrase, pattern) in _PROFILE.items():
            found = pattern.search(message)
            if found:
                self._bytes(term, rank, found.group(1), found.group(2), number_, phrase)

    def _kv_available(self, message: str, rank: str, proc: str, number_: int) -> None:
        found = _KV_AVAILABLE.search(message)
        if found:
            self._bytes(KV_POOL, rank, found.group(1), found.group(2), number_, "Available KV cache memory")

    def _kv_tokens(self, message: str, rank: str, proc: str, number_: int) -> None:
        found = _KV_TOKENS.search(message)
        if found is None:
            return
        value = number(found.group(1), MAX_COUNT_VALUE)
        if value is None:
            self.collector.note(f"line {number_}: 'GPU KV cache size' has an unreadable value; ignored")
            return
        self.collector.measure(KV_TOKENS, rank, value, unit=TOKENS, line=number_, phrase="GPU KV cache size")

    def _concurrency(self, message: str, rank: str, proc: str, number_: int) -> None:
        found = _CONCURRENCY.search(message)
        if found is None:
            return
        context, value = number(found.group(1), MAX_COUNT_VALUE), number(found.group(2), MAX_COUNT_VALUE)
        if context is None or value is None:
            self.collector.note(f"line {number_}: 'Maximum concurrency' has an unreadable value; ignored")
            return
        self.collector.setting("concurrency_context", int(context), number_)
        self.collector.measure(
            MAX_CONCURRENCY,
            rank,
            value,
            unit=SEQUENCES,
            line=number_,
            phrase="Maximum concurrency",
            resolution=resolution(found.group(2), "B", ROUNDED_TO),
        )

    def _graphs(self, message: str, rank: str, proc: str, number_: int) -> None:
        found = _GRAPH_POOL.search(message) or _GRAPHS_TOOK.search(message)
        if found:
            self._bytes(CUDA_GRAPHS, rank, found.group(1), found.group(2), number_, "CUDA graph pool memory")

    def _requested(self, message: str, rank: str, proc: str, number_: int) -> None:
        found = _REQUESTED.search(message)
        if found:
            self.args.setdefault("memory_utilization", (found.group(1), number_))
            self._bytes(REQUESTED, rank, found.group(2), found.group(3), number_, "Requested memory")

    def _snapshot(self, message: str, rank: str, proc: str, number_: int) -> None:
        found = _SNAPSHOT.search(message)
        if found and proc != "Worker":  # a worker not yet named after its rank
            self._bytes(GPU_TOTAL, rank, found.group(1), found.group(2), number_, "total_memory")

    def _usage(self, message: str, rank: str, proc: str, number_: int) -> None:
        found = _USAGE.search(message)
        if found:
            (total, total_unit, util, requested, req_unit, weights, w_unit) = found.groups()[:7]
            (activation, a_unit, non_torch, n_unit, graphs, g_unit) = found.groups()[7:]
            self.args.setdefault("memory_utilization", (util, number_))
            for term, value, unit in (
                (GPU_TOTAL, total, total_unit),
                (REQUESTED, requested, req_unit),
                (WEIGHTS, weights, w_unit),
                (TORCH_PEAK, activation, a_unit),
                (NON_TORCH, non_torch, n_unit),
                (CUDA_GRAPHS, graphs, g_unit),
            ):
                self._bytes(term, rank, value, unit, number_, "Free memory on device")
        in_use = _KV_IN_USE.search(message)
        if in_use:
            self._bytes(KV_POOL, rank, in_use.group(1), in_use.group(2), number_, "Current kv cache memory in use")

    # -- the end -------------------------------------------------------------------------------

    def finish(self, path: str, reader: LineReader) -> Evidence:
        collector = self.collector
        shown = clean(path)
        for name, (raw, number_) in self.args.items():
            self._setting(name, raw, number_)
        root = self.cause or self.failed
        never_up = not self.started and KV_TOKENS not in collector.terms and KV_POOL not in collector.terms
        if root and collector.failure is None and (self.failed or never_up):
            cause, at = root
            collector.failure = Failure(clean(cause), at, bool(_OOM.search(cause)), "startup")
        if self.oom and collector.failure is None:  # out of memory, with no failed start to blame it on
            cause, at, up = self.oom
            collector.failure = Failure(clean(cause), at, True, "run" if up else "startup")
        if not collector.terms and not collector.settings:
            raise GpuplanError(
                f"{shown}: no vLLM V1 startup lines in {reader.count:,} lines (looked for "
                f"{', '.join(repr(m) for m in MARKERS)}); is it a vLLM log? --kind names the format"
            )
        if self.starts > 1:
            collector.note(f"the log holds {self.starts} engine starts; the last one is read")
        if "memory_utilization" not in collector.settings and collector.settings:
            collector.setting("memory_utilization", _default_utilization(collector.version), 0, "vLLM default")
        if collector.settings:
            collector.setting("engine", "vllm", 0)
        eager = collector.settings.get("enforce_eager")
        if eager is not None and eager.value == "True" and CUDA_GRAPHS not in collector.terms:
            weights = collector.terms.get(WEIGHTS)
            for rank in weights.values if weights else ():
                collector.measure(CUDA_GRAPHS, rank, 0.0, unit=BYTES, line=eager.line, phrase="enforce_eager=True")
        if reader.overlong:
            collector.note(f"{reader.overlong} line(s) longer than 64 KiB skipped")
        if collector.version and not collector.version.startswith(KNOWN_VERSION):
            collector.note(
                f"read with the vLLM {KNOWN_VERSION} line formats; this log is from vLLM {collector.version}: "
                "a line whose wording changed is listed as missing"
            )
        incomplete = ""
        failed = collector.failure is not None and collector.failure.during == "startup"
        if not failed and KV_TOKENS not in collector.terms:  # a V1 start states the pool, then its size in tokens
            what = "the size of its KV cache" if KV_POOL in collector.terms else "its KV cache"
            incomplete = f"the log ends before the engine reported {what}: truncated, or the engine was still starting"
        missing = () if failed else self._missing()
        return collector.evidence(shown, KIND, SERVE, ENGINE, reader.count, missing, incomplete)

    def _missing(self) -> tuple[str, ...]:
        collector = self.collector
        terms, missing = collector.terms, []
        if "max_model_len" not in collector.settings:
            missing.append("the engine configuration ('Initializing a V1 LLM engine ... with config')")
        for term, phrase in (
            (WEIGHTS, "'Model loading took' (weights)"),
            (KV_POOL, "'Available KV cache memory' (the KV cache pool)"),
            (KV_TOKENS, "'GPU KV cache size' (tokens the KV cache holds)"),
            (MAX_CONCURRENCY, "'Maximum concurrency for N tokens per request'"),
            (CUDA_GRAPHS, "'CUDA graph pool memory' (graph capture)"),
        ):
            if term not in terms:
                missing.append(phrase)
        if TORCH_PEAK not in terms or NON_TORCH not in terms:
            advice = "" if self.debug else " (logged at DEBUG level: start vLLM with VLLM_LOGGING_LEVEL=DEBUG)"
            missing.append(f"'torch peak memory increase' and 'non-torch forward increase memory'{advice}")
        return tuple(missing)


def _worth_a_look(line: str) -> bool:
    """Whether ``line`` may hold any of _HANDLED or _OTHER (each contains one of these substrings)."""
    return (
        "emory" in line
        or "KV cache" in line
        or "concurren" in line
        or "engine" in line
        or "args" in line
        or "model len" in line
        or "loading took" in line
        or "Graph" in line
        or "rror" in line
        or "xception" in line
        or "failed" in line
        or "vLLM server" in line
        or "vLLM API server" in line
    )


def _rank(proc: str | None) -> str:
    """A rank label from a process name: Worker_PP1_TP0 -> PP1_TP0; the single-process engine is rank 0."""
    if not proc or proc in ("EngineCore", "APIServer", "LLMEngine"):
        return "0"
    for prefix in ("Worker_", "EngineCore_"):
        if proc.startswith(prefix):
            return proc[len(prefix) :]
    return proc
