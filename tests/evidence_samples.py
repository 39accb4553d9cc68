"""Run evidence written for the tests, in the formats the readers know (numbers are the tests' own).

``vllm_log`` writes the lines a vLLM 0.19 V1 engine prints at start-up (same wording, prefixes and
rounding: memory to two decimals in GiB); the other helpers write a PyTorch memory-statistics JSON,
a Hugging Face Trainer metrics block, torchtune step lines and Accelerate's peak-memory lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

GIB = 2**30


@dataclass(frozen=True)
class RankMemory:
    """What one GPU of a vLLM engine reports, in GiB."""

    weights: float
    torch_peak: float
    non_torch: float
    graphs: float
    kv_pool: float
    requested: float = 75.23
    total: float = 79.19


@dataclass(frozen=True)
class VllmRun:
    ranks: dict[str, RankMemory]  # process suffix ("" for the single-process engine, "TP0", "PP1_TP0")
    kv_tokens: int
    concurrency: float
    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    max_model_len: int = 8192
    tp: int = 1
    pp: int = 1
    dtype: str = "bfloat16"
    kv_cache_dtype: str = "auto"
    quantization: str = "None"
    utilization: float = 0.95
    version: str = "0.19.0"
    debug: bool = True
    enforce_eager: bool = False
    extra_args: dict[str, object] = field(default_factory=dict)


def _line(proc: str, level: str, where: str, message: str, clock: str = "00:04:20") -> str:
    return f"({proc}) {level} 04-22 {clock} [{where}] {message}"


def _gib(value: float) -> str:
    """As vLLM prints memory: round(x, 2), so trailing zeros drop (1.1, 58.11)."""
    return repr(round(value, 2))


def vllm_header(run: VllmRun) -> list[str]:
    args: dict[str, object] = {"model_tag": run.model, "model": run.model, "max_model_len": run.max_model_len}
    if run.tp > 1:
        args["tensor_parallel_size"] = run.tp
    if run.pp > 1:
        args["pipeline_parallel_size"] = run.pp
    if run.kv_cache_dtype != "auto":
        args["kv_cache_dtype"] = run.kv_cache_dtype
    args["gpu_memory_utilization"] = run.utilization
    args |= run.extra_args
    api = "APIServer pid=1"
    engine = "EngineCore pid=242"
    first = next(iter(run.ranks.values()), None)
    config = (
        f"model='{run.model}', speculative_config=None, tokenizer='{run.model}', skip_tokenizer_init=False, "
        f"tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype=torch.{run.dtype}, "
        f"max_seq_len={run.max_model_len}, download_dir=None, load_format=auto, tensor_parallel_size={run.tp}, "
        f"pipeline_parallel_size={run.pp}, data_parallel_size=1, disable_custom_all_reduce=False, "
        f"quantization={run.quantization}, enforce_eager={run.enforce_eager}, kv_cache_dtype={run.kv_cache_dtype}, "
        "device_config=cuda, seed=0"
    )
    snapshot = []
    if run.debug and first is not None:
        snapshot.append(
            _line(
                "Worker pid=442" if run.tp * run.pp > 1 else engine,
                "DEBUG",
                "v1/worker/gpu_worker.py:284",
                "worker init memory snapshot: torch_peak=0.0GiB, free_memory=78.68GiB, "
                f"total_memory={_gib(first.total)}GiB, "
                "cuda_memory=0.51GiB, torch_memory=0.0GiB, non_torch_memory=0.51GiB, auto_measure=True",
                "00:03:47",
            )
        )
    return [
        _line(
            api, "INFO", "entrypoints/utils.py:299", f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {run.version}", "00:03:35"
        ),
        _line(api, "INFO", "entrypoints/utils.py:233", f"non-default args: {args!r}", "00:03:35"),
        _line(api, "INFO", "config/model.py:1678", f"Using max model len {run.max_model_len}", "00:03:36"),
        _line(
            engine,
            "INFO",
            "v1/engine/core.py:105",
            f"Initializing a V1 LLM engine (v{run.version}) with config: {config}",
            "00:03:46",
        ),
        *snapshot,
    ]


def vllm_log(run: VllmRun, *, stop_after_loading: bool = False) -> str:
    """A start-up log of ``run``: header, per-rank loading and profiling, engine KV lines, graph capture."""
    lines = vllm_header(run)
    procs = {
        suffix: (f"Worker_{suffix} pid={440 + index}" if suffix else "EngineCore pid=242")
        for index, suffix in enumerate(run.ranks)
    }
    for suffix, memory in run.ranks.items():
        lines.append(
            _line(
                procs[suffix],
                "INFO",
                "v1/worker/gpu_model_runner.py:4820",
                f"Model loading took {_gib(memory.weights)} GiB memory and 14.429680 seconds",
                "00:04:02",
            )
        )
    if stop_after_loading:
        return "\n".join(lines) + "\n"
    for suffix, memory in run.ranks.items():
        non_kv = memory.weights + memory.torch_peak + memory.non_torch
        if run.debug:
            lines.append(
                _line(
                    procs[suffix],
                    "DEBUG",
                    "v1/worker/gpu_worker.py:424",
                    f"Initial free memory: 78.68 GiB; Requested memory: {run.utilization:.6f} (util), "
                    f"{_gib(memory.requested)} GiB",
                )
            )
            lines.append(
                _line(
                    procs[suffix],
                    "DEBUG",
                    "v1/worker/gpu_worker.py:435",
                    f"Memory profiling takes 17.96 seconds. Total non KV cache memory: {_gib(non_kv)}GiB; "
                    f"torch peak memory increase: {_gib(memory.torch_peak)}GiB; non-torch forward increase memory: "
                    f"{_gib(memory.non_torch)}GiB; weights memory: {_gib(memory.weights)}GiB.",
                )
            )
        lines.append(
            _line(
                procs[suffix],
                "INFO",
                "v1/worker/gpu_worker.py:436",
                f"Available KV cache memory: {_gib(memory.kv_pool)} GiB",
            )
        )
    lines.append(
        _line(
            "EngineCore pid=242",
            "INFO",
            "v1/core/kv_cache_utils.py:1319",
            f"GPU KV cache size: {run.kv_tokens:,} tokens",
        )
    )
    lines.append(
        _line(
            "EngineCore pid=242",
            "INFO",
            "v1/core/kv_cache_utils.py:1324",
            f"Maximum concurrency for {run.max_model_len:,} tokens per request: {run.concurrency:.2f}x",
        )
    )
    if not run.enforce_eager:
        lines.append("Capturing CUDA graphs (decode, FULL): 100%|██████████| 51/51 [00:01<00:00, 47.35it/s]")
        for suffix, memory in run.ranks.items():
            lines.append(
                _line(
                    procs[suffix],
                    "INFO",
                    "v1/worker/gpu_worker.py:597",
                    f"CUDA graph pool memory: {_gib(memory.graphs)} GiB (actual), 0.84 GiB (estimated), "
                    "difference: 0.07 GiB (7.7%).",
                    "00:04:24",
                )
            )
            if run.debug:
                lines.append(
                    _line(
                        procs[suffix],
                        "DEBUG",
                        "v1/worker/gpu_worker.py:661",
                        f"Free memory on device (78.68/{_gib(memory.total)} GiB) on startup. Desired GPU memory "
                        f"utilization is ({run.utilization}, {_gib(memory.requested)} GiB). Actual usage is "
                        f"{_gib(memory.weights)} GiB for weight, {_gib(memory.torch_peak)} GiB for peak activation, "
                        f"{_gib(memory.non_torch)} GiB for non-torch memory, and {_gib(memory.graphs)} GiB for "
                        f"CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=1` "
                        f"(0.0 GiB) to fit into requested memory. Current kv cache memory in use is "
                        f"{_gib(memory.kv_pool)} GiB.",
                        "00:04:24",
                    )
                )
    lines.append(
        _line(
            "EngineCore pid=242",
            "INFO",
            "v1/engine/core.py:283",
            "init engine (profile, create kv cache, warmup model) took 21.45 seconds",
            "00:04:24",
        )
    )
    lines.append(
        _line(
            "APIServer pid=1",
            "INFO",
            "entrypoints/openai/api_server.py:594",
            "Starting vLLM server on http://0.0.0.0:8000",
        )
    )
    return "\n".join(lines) + "\n"


def vllm_failed_start(run: VllmRun, cause: str) -> str:
    """A start that dies in the workers: vLLM's own wrapper lines around the root cause, as v0.19 prints them."""
    lines = vllm_header(run)
    where = "v1/executor/multiproc_executor.py:857"
    for rank in range(run.tp):
        proc = f"Worker_TP{rank} pid={442 + rank}"
        lines += [
            _line(proc, "ERROR", where, "WorkerProc failed to start.", "00:27:44"),
            _line(proc, "ERROR", where, "Traceback (most recent call last):", "00:27:44"),
            _line(
                proc,
                "ERROR",
                where,
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 323, in '
                "load_model",
                "00:27:44",
            ),
            _line(
                proc,
                "ERROR",
                where,
                "    self.model_runner.load_model(load_dummy_weights=load_dummy_weights)",
                "00:27:44",
            ),
            _line(proc, "ERROR", where, cause, "00:27:44"),
        ]
    lines += [
        _line("EngineCore pid=243", "ERROR", "v1/engine/core.py:1108", "EngineCore failed to start.", "00:27:46"),
        _line(
            "EngineCore pid=243", "ERROR", "v1/engine/core.py:1108", "Traceback (most recent call last):", "00:27:46"
        ),
        _line(
            "EngineCore pid=243",
            "ERROR",
            "v1/engine/core.py:1108",
            "Exception: WorkerProc initialization failed due to an exception in a background process. "
            "See stack trace for root cause.",
            "00:27:46",
        ),
        "(APIServer pid=1) Traceback (most recent call last):",
        "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {}",
    ]
    return "\n".join(lines) + "\n"


# -- training evidence --------------------------------------------------------------------------


def torch_memory_json(allocated: float, reserved: float | None = None, **extra: object) -> str:
    """What docs/verify.md's snippet writes: peaks in bytes, plus whatever the test adds."""
    document: dict[str, object] = {"max_memory_allocated": allocated}
    if reserved is not None:
        document["max_memory_reserved"] = reserved
    document |= extra
    return json.dumps(document)


def hf_trainer_block(parts_mib: dict[str, int]) -> str:
    """The '***** train metrics *****' block ``Trainer.log_metrics`` prints (memory keys as ``v >> 20`` MB)."""
    metrics = {key: f"{value}MB" for key, value in parts_mib.items()} | {
        "epoch": "1.0",
        "train_loss": "1.2345",
        "train_runtime": "0:12:03.41",
        "train_samples_per_second": "5.532",
    }
    k_width = max(len(key) for key in metrics)
    v_width = max(len(value) for value in metrics.values())
    lines = ["***** train metrics *****"]
    lines += [f"  {key: <{k_width}} = {metrics[key]:>{v_width}}" for key in sorted(metrics)]
    return "\n".join(lines) + "\n"


def torchtune_steps(steps: list[tuple[float, float, float]]) -> str:
    """StdoutLogger/DiskLogger lines: ``Step N | name:value ...`` with peak memory in GiB."""
    return "".join(
        f"Step {index} | loss:1.{index:03d} lr:2e-05 tokens_per_second_per_gpu:1523.7 "
        f"peak_memory_active:{active} peak_memory_alloc:{alloc} peak_memory_reserved:{reserved} \n"
        for index, (active, alloc, reserved) in enumerate(steps, start=1)
    )


def accelerate_epochs(epochs: list[tuple[int, int]]) -> str:
    """The TorchTracemalloc example's lines per epoch: (memory before, peak over it), in MiB."""
    lines = []
    for begin, peaked in epochs:
        lines += [
            f"Memory before entering the train : {begin}",
            "Memory consumed at the end of the train (end-begin): 12",
            f"Peak Memory consumed during the train (max-begin): {peaked}",
            f"Total Peak Memory consumed during the train (max): {peaked + begin}",
        ]
    return "\n".join(lines) + "\n"
