"""SGLang startup logs: what the server allocated, per rank, and the settings it ran with.

Read against the lines SGLang v0.5.3-v0.5.4 prints (``srt/entrypoints/engine.py``,
``srt/model_executor/model_runner.py``, ``srt/mem_cache/memory_pool.py``, ``srt/managers/scheduler.py``),
each prefixed ``[YYYY-MM-DD hh:mm:ss TP3]`` (``DP``/``PP``/``TP`` name the rank; none on one GPU):

- ``server_args=ServerArgs(...)``: model_path, tp_size, pp_size, dtype, kv_cache_dtype, quantization,
  context_length, mem_fraction_static (resolved by the server when not given), chunked_prefill_size,
  cuda_graph_max_bs, max_total_tokens;
- ``Init torch distributed ends. mem usage=X GB``: what the communicators took (runtime);
- ``Load weight begin. avail mem=X GB``: the memory free at start, of which mem_fraction_static is taken;
- ``Load weight end. type=..., dtype=..., avail mem=X GB, mem usage=W GB.``: weights on the rank;
- ``KV Cache is allocated. #tokens: N, K size: a GB, V size: b GB`` (``KV size`` for MLA): the pool;
- ``max_total_num_tokens=N, ..., context_len=L, available_gpu_mem=X GB`` (rank 0): the pool in tokens;
- ``Capture cuda graph end. Time elapsed: S s. mem usage=X GB.``: the CUDA graphs.

Without the ``server_args`` line (an excerpt), the ranks those lines name give tp_size and pp_size
(:func:`~gpuplan.evidence.collect.parallel_degree`), and free at start plus what the communicators took
before it is the least memory the device had (``GPU_AT_LEAST``: the memory ``get_available_gpu_memory``
found once the CUDA context was up, before ``init_torch_distributed``).

SGLang prints memory in GiB (``/ (1 << 30)``) with the unit "GB", to two decimals. A failed start is the
first exception line before "The server is fired up"; "Not enough memory" is SGLang's own refusal.
"""

from __future__ import annotations

import re
from typing import BinaryIO

from gpuplan.errors import GpuplanError
from gpuplan.evidence.collect import MAX_RANKS, Collector, parallel_degree
from gpuplan.evidence.lines import MAX_COUNT_VALUE, LineReader, clean, number, parse_lines, resolution, size
from gpuplan.evidence.model import (
    BYTES,
    CUDA_GRAPHS,
    FREE_AT_START,
    GPU_AT_LEAST,
    KV_POOL,
    KV_TOKENS,
    NON_TORCH,
    SERVE,
    TOKENS,
    WEIGHTS,
    Evidence,
    Failure,
)

KIND = "sglang"
ENGINE = "SGLang"
KNOWN_VERSION = "0.5.3-0.5.4"  # the line formats below were read from these releases' code
ROUNDED_TO = 2  # SGLang prints memory with :.2f
MARKERS = ("server_args=ServerArgs(", "KV Cache is allocated", "max_total_num_tokens=", "Load weight end. ")

_PREFIX = re.compile(
    r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?P<ranks>(?: (?:DP|PP|TP|EP|CP)\d{1,6}){0,4})\]\s?(?P<message>.*)"
)
_V = r"(\S{1,40}?)"  # a printed value; checked by lines.number/size
_ARGS = {
    "tensor_parallel": re.compile(r"(?<![\w])tp_size=(\d{1,6})\b"),
    "pipeline_parallel": re.compile(r"(?<![\w])pp_size=(\d{1,6})\b"),
    "data_parallel": re.compile(r"(?<![\w])dp_size=(\d{1,6})\b"),
    "max_model_len": re.compile(r"(?<![\w])context_length=(\d{1,9})\b"),
    "memory_utilization": re.compile(r"(?<![\w])mem_fraction_static=([0-9.]{1,12})[,)]"),
    "dtype": re.compile(r"(?<![\w])dtype='(\w{1,20})'"),
    "kv_cache_dtype": re.compile(r"(?<![\w])kv_cache_dtype='(\w{1,20})'"),
    "quantization": re.compile(r"(?<![\w])quantization=(?:'([\w-]{1,40})'|(None))"),
    "max_batched_tokens": re.compile(r"(?<![\w])chunked_prefill_size=(\d{1,9})\b"),
    "cuda_graph_max_bs": re.compile(r"(?<![\w])cuda_graph_max_bs=(\d{1,9})\b"),
    "max_total_tokens": re.compile(r"(?<![\w])max_total_tokens=(\d{1,12})\b"),
}
_MODEL = re.compile(r"(?<![\w])model_path='([^']{1,300})'")
_DIST = re.compile(rf"Init torch distributed ends\. (?:elapsed=\S{{1,20}} s, )?mem usage={_V} GB")
_LOAD_BEGIN = re.compile(rf"Load weight begin\. avail mem={_V} GB")
_LOAD_END = re.compile(
    rf"Load weight end\. (?:elapsed=\S{{1,20}} s, )?type=\w{{1,80}}, (?:dtype=(?:torch\.)?(\w{{1,20}}), )?"
    rf"avail mem={_V} GB, mem usage={_V} GB"
)
_KV_DTYPE = re.compile(r"Using KV cache dtype: (?:torch\.)?(\w{1,20})")
_KV_ALLOCATED = re.compile(
    rf"KV Cache is allocated\. (?:dtype: (?:torch\.)?\w{{1,20}}, )?#tokens: (\d{{1,13}}), "
    rf"(?:K size: {_V} GB, V size: {_V} GB|KV size: {_V} GB)"
)
_MAX_TOTAL = re.compile(r"max_total_num_tokens=(\d{1,13}), chunked_prefill_size=(-?\d{1,9}), .*?context_len=(\d{1,9})")
_GRAPHS = re.compile(rf"Capture cuda graph end\. Time elapsed: \S{{1,20}} s\. mem usage={_V} GB")
_EXCEPTION = re.compile(r"^(?P<type>(?:[A-Za-z_]\w{0,60}\.){0,6}[A-Za-z_]\w{0,80}(?:Error|Exception)):\s*(?P<text>.*)$")
_OOM = re.compile(r"out of memory|OutOfMemoryError|Not enough memory", re.I)
_STARTED = "The server is fired up and ready to roll"

_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}
_KV_DTYPES = {"float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "bf16": "bf16"}
_QUANTIZATION = {"None": "none", "fp8": "fp8", "awq": "int4-awq", "awq_marlin": "int4-awq", "gptq": "int4-gptq"}
_QUANTIZATION |= {"gptq_marlin": "int4-gptq", "w8a8_int8": "int8", "modelopt_fp4": "nvfp4", "mxfp4": "mxfp4"}


def read(stream: BinaryIO, path: str) -> Evidence:
    """Read an SGLang server log from ``stream`` (named ``path`` in messages). Raises GpuplanError."""
    return parse_lines(stream, path, _Parse())


class _Parse:
    def __init__(self) -> None:
        self.collector = Collector()
        self.started = False
        self.starts = 0
        self.cause: tuple[str, int] | None = None
        # The first line of each rank label on the memory lines every scheduler prints ("0": none named).
        self.rank_lines: dict[str, int] = {}

    def line(self, number_: int, line: str) -> None:
        prefixed = _PREFIX.search(line)
        message = prefixed.group("message") if prefixed else line.strip()
        rank = ("_".join(prefixed.group("ranks").split()) or "0") if prefixed else "0"
        if "server_args=ServerArgs(" in message:
            self._args(message, number_)
            return
        if "Init torch distributed ends" in message:
            self._bytes(NON_TORCH, rank, _DIST, message, number_, "Init torch distributed ends")
        elif "Load weight begin" in message:
            self._bytes(FREE_AT_START, rank, _LOAD_BEGIN, message, number_, "Load weight begin")
        elif "Load weight end" in message:
            self._weights(message, rank, number_)
        elif "KV Cache is allocated" in message:
            self._pool(message, rank, number_)
        elif "Capture cuda graph end" in message:
            self._bytes(CUDA_GRAPHS, rank, _GRAPHS, message, number_, "Capture cuda graph end")
        else:
            self._other(message, number_)
            return
        # A memory line every scheduler prints: its prefix names the rank (the server's own lines name none).
        if prefixed and len(self.rank_lines) < MAX_RANKS:
            self.rank_lines.setdefault(rank, number_)

    def _other(self, message: str, number_: int) -> None:
        if "Using KV cache dtype" in message:
            found = _KV_DTYPE.search(message)
            if found:
                self._kv_dtype(found.group(1), number_)
        elif "max_total_num_tokens=" in message:
            self._tokens(message, number_)
        elif _STARTED in message:
            self.started = True
        elif "Error" in message or "Exception" in message or "Not enough memory" in message:
            self._problem(message, number_)

    # -- settings ------------------------------------------------------------------------------

    def _args(self, message: str, number_: int) -> None:
        self.starts += 1
        if self.starts > 1:  # a restarted server: read the last start
            notes = self.collector.notes
            self.collector = Collector()
            self.collector.notes = notes
            self.started, self.cause, self.rank_lines = False, None, {}
        collector = self.collector
        model = _MODEL.search(message)
        if model:
            collector.model = clean(model.group(1), 120)
        for name, pattern in _ARGS.items():
            found = pattern.search(message)
            if found is None:
                continue
            raw = next(group for group in found.groups() if group is not None)
            if name == "memory_utilization":
                value = number(raw, 1.0)
                if value is not None:
                    collector.setting(name, value, number_)
            elif name == "dtype":
                if raw != "auto":  # "auto" is resolved by the weights; "Load weight end" names the dtype
                    collector.setting(name, _DTYPES.get(raw, clean(raw, 20)), number_, clean(raw, 20))
            elif name == "kv_cache_dtype":
                self._kv_dtype(raw, number_)
            elif name == "quantization":
                collector.setting(name, _QUANTIZATION.get(raw, clean(raw, 40)), number_, clean(raw, 40))
            else:
                count = number(raw, MAX_COUNT_VALUE)
                if count is not None:
                    collector.setting(name, int(count), number_)

    def _kv_dtype(self, raw: str, number_: int) -> None:
        if raw == "auto":
            value = "auto"
        else:
            value = _KV_DTYPES.get(raw, _DTYPES.get(raw, clean(raw, 20)))
        self.collector.setting("kv_cache_dtype", value, number_, clean(raw, 20))

    # -- measurements --------------------------------------------------------------------------

    def _measure(self, term: str, rank: str, value: str, number_: int, phrase: str) -> None:
        amount = size(value, "GB")
        if amount is None:
            self.collector.note(f"line {number_}: {phrase!r} has an unreadable value {clean(value, 40)!r}; ignored")
            return
        self.collector.measure(
            term, rank, amount, unit=BYTES, line=number_, phrase=phrase, resolution=resolution(value, "GB", ROUNDED_TO)
        )

    def _bytes(self, term: str, rank: str, pattern: re.Pattern[str], message: str, number_: int, phrase: str) -> None:
        found = pattern.search(message)
        if found:
            self._measure(term, rank, found.group(1), number_, phrase)

    def _weights(self, message: str, rank: str, number_: int) -> None:
        found = _LOAD_END.search(message)
        if found is None:
            return
        dtype, _, usage = found.groups()
        if dtype:
            self.collector.setting("dtype", _DTYPES.get(dtype, clean(dtype, 20)), number_, clean(dtype, 20))
        self._measure(WEIGHTS, rank, usage, number_, "Load weight end")

    def _pool(self, message: str, rank: str, number_: int) -> None:
        found = _KV_ALLOCATED.search(message)
        if found is None:
            return
        tokens, k_size, v_size, kv_size = found.groups()
        count = number(tokens, MAX_COUNT_VALUE)
        if count is not None:
            self.collector.measure(KV_TOKENS, rank, count, unit=TOKENS, line=number_, phrase="KV Cache is allocated")
        parts = [kv_size] if kv_size else [k_size, v_size]
        amounts = [size(part, "GB") for part in parts]
        if any(amount is None for amount in amounts):
            self.collector.note(f"line {number_}: 'KV Cache is allocated' has an unreadable size; ignored")
            return
        step = resolution(parts[0], "GB", ROUNDED_TO) * len(parts)
        total = sum(amount for amount in amounts if amount is not None)
        self.collector.measure(
            KV_POOL, rank, total, unit=BYTES, line=number_, phrase="KV Cache is allocated", resolution=step
        )

    def _tokens(self, message: str, number_: int) -> None:
        found = _MAX_TOTAL.search(message)
        if found is None:
            return
        tokens, chunked, context = (number(group, MAX_COUNT_VALUE) for group in found.groups())
        if tokens is not None:
            self.collector.measure(KV_TOKENS, "0", tokens, unit=TOKENS, line=number_, phrase="max_total_num_tokens")
        if chunked is not None:
            self.collector.setting("max_batched_tokens", int(chunked), number_)
        if context is not None:
            self.collector.setting("max_model_len", int(context), number_, "context_len")

    def _layout(self) -> None:
        """What the log says of the GPUs without its server_args: the parallel degrees its ranks name, and
        the least memory each device had."""
        collector = self.collector
        if self.rank_lines:
            for name, kind in (("tensor_parallel", "TP"), ("pipeline_parallel", "PP")):
                implied = parallel_degree(self.rank_lines, kind)
                if implied is not None:  # (rank 0 alone: an excerpt, whose degree the log does not say)
                    collector.setting(name, *implied)  # a server_args value read earlier stands
        free = collector.terms.get(FREE_AT_START)
        if free is None:
            return
        runtime = collector.terms.get(NON_TORCH)
        before = runtime.values if runtime else {}
        step = free.resolution + (runtime.resolution if runtime else 0.0)
        for rank, value in free.values.items():
            collector.measure(
                GPU_AT_LEAST,
                rank,
                value + before.get(rank, 0.0),
                unit=BYTES,
                line=free.line,
                phrase="Load weight begin. avail mem + Init torch distributed ends. mem usage",
                resolution=step,
            )

    def _problem(self, message: str, number_: int) -> None:
        text = message.strip()
        if self.started:
            if _OOM.search(text) and self.collector.failure is None:
                self.collector.failure = Failure(clean(text), number_, True, "run")
            return
        if self.cause is None and (_EXCEPTION.match(text) or "Not enough memory" in text):
            self.cause = (text, number_)

    # -- the end -------------------------------------------------------------------------------

    def finish(self, path: str, reader: LineReader) -> Evidence:
        collector = self.collector
        shown = clean(path)
        if not collector.terms and not collector.settings:
            raise GpuplanError(
                f"{shown}: no SGLang startup lines in {reader.count:,} lines (looked for "
                f"{', '.join(repr(m) for m in MARKERS)}); is it an SGLang log? --kind names the format"
            )
        if collector.settings or collector.terms:
            collector.setting("engine", "sglang", 0)
        self._layout()
        never_up = not self.started and KV_POOL not in collector.terms
        if self.cause and collector.failure is None and never_up:
            cause, at = self.cause
            collector.failure = Failure(clean(cause), at, bool(_OOM.search(cause)), "startup")
        if self.starts > 1:
            collector.note(f"the log holds {self.starts} server starts; the last one is read")
        if reader.overlong:
            collector.note(f"{reader.overlong} line(s) longer than 64 KiB skipped")
        collector.note(f"read with the SGLang {KNOWN_VERSION} line formats")
        failed = collector.failure is not None and collector.failure.during == "startup"
        incomplete = ""
        if not failed and KV_POOL not in collector.terms and KV_TOKENS not in collector.terms:
            incomplete = "the log ends before the server reported its KV cache: truncated, or still starting"
        missing = () if failed else _missing(collector)
        return collector.evidence(shown, KIND, SERVE, ENGINE, reader.count, missing, incomplete)


def _missing(collector: Collector) -> tuple[str, ...]:
    missing = []
    if "memory_utilization" not in collector.settings:
        missing.append("the server's settings ('server_args=ServerArgs(...)': mem_fraction_static, tp_size)")
    for term, phrase in (
        (FREE_AT_START, "'Load weight begin. avail mem' (the memory free at start)"),
        (WEIGHTS, "'Load weight end ... mem usage' (weights)"),
        (KV_POOL, "'KV Cache is allocated' (the KV pool)"),
        (CUDA_GRAPHS, "'Capture cuda graph end ... mem usage' (graph capture)"),
    ):
        if term not in collector.terms:
            missing.append(phrase)
    return tuple(missing)
