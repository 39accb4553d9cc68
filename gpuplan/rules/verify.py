"""GP8xx: a spec held against a real run (``gpuplan verify``; the checks live in gpuplan.verify)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpuplan.rules.registry import documentation_only, rule


@rule("GP801")
@documentation_only
def measured_exceeds_estimate(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    `gpuplan verify` compares each term of the estimate (weights, activations, runtime, the training
    peak) with what a real run measured, per GPU, taking the GPU that used most. It reports a term
    the run spent more on than `estimate x (1 + thresholds.verify_tolerance_pct / 100)` plus the
    evidence's printing precision (vLLM rounds to 0.01 GiB). It is an error when the measured memory
    leaves less than `thresholds.headroom_pct` free (for serving: the measured KV pool minus the
    declared concurrency's need at the run's own bytes per sequence, as GP803 counts them; for
    training: the GPU's memory minus the measured peak), a warning otherwise.

    ## Why is this bad?
    The plan was approved on the estimate. A term that costs more in reality eats the headroom
    first and, at the next longer sequence or larger batch, causes the out-of-memory crash the plan
    promised would not happen.

    ## Example
    ```text
    ft.yaml:14:26: GP801 [warning] activations: the run used 2.8 GiB per GPU, the estimate 2.0 GiB (+43%; tolerance 10%)
    ```

    ## Use instead
    Plan with the measured figure (more headroom, a larger GPU, or a smaller batch), and send the
    estimate/measured pair back as a calibration record so the estimator learns the mechanism.
    """
    yield from ()


@rule("GP802")
@documentation_only
def run_settings_differ(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Before comparing numbers, `gpuplan verify` checks the settings the run used (the serving
    engine, max_model_len, tensor/pipeline parallel size, dtype, KV-cache dtype, quantization, the
    engine's memory fraction (vLLM gpu_memory_utilization, SGLang mem_fraction_static, TensorRT-LLM
    free_gpu_memory_fraction), the model and the GPU's memory; a training run's micro_batch, seq_len,
    gradient_accumulation and world size when its evidence states them) against the spec, and
    reports each difference at the spec's field. A list of N ranks' PyTorch memory statistics is a
    run of at least N GPUs: more than `finetune.hardware.count` differs, as a `world_size` does. An
    SGLang log without its `server_args` line still names its tensor and pipeline ranks
    (`TP0`..`TP7`), and the memory it found free at start is more than a smaller GPU has. The terms
    are then compared with the estimate recomputed at the run's settings.

    ## Why is this bad?
    A spec that says one thing while production runs another is not the plan anyone approved: its
    estimate, cost and sign-off describe a different deployment.

    ## Example
    ```yaml
    serve:
      context: 8192     # the engine ran with --max-model-len 4096
    ```

    ## Use instead
    Change the spec to what runs (and re-review it), or rerun with the spec's settings.
    """
    yield from ()


@rule("GP803")
@documentation_only
def measured_capacity_below_declared(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reads the serving engine's own capacity, vLLM's `Maximum concurrency for N tokens per request`
    (or its KV-cache tokens divided by the spec's context when the log's max_model_len differs or
    the engine prints no concurrency), and reports it when it is below `serve.concurrency`. The
    KV-cache line `gpuplan verify` prints under its table counts the same sequences, so it says
    "short by" exactly when this fires. A burst (`arrival: burst`) waits for the pool
    anyway: it is reported when the engine holds less than one sequence (it cannot start), and as a
    warning when it holds fewer than the estimate planned (the wave runs fewer at once than it priced).

    ## Why is this bad?
    The engine cannot hold the declared number of full-length requests at once: the rest wait in
    the queue, and the latency the spec promises is not met at the declared load.

    ## Example
    ```yaml
    serve: {context: 32768, concurrency: 64, hardware: {gpu: h100-sxm}}
    ```
    while the log says `Maximum concurrency for 32,768 tokens per request: 33.45x`.

    ## Use instead
    Lower the concurrency or context, use an fp8 KV cache, raise `memory_utilization`, or add GPUs
    (tensor parallelism or replicas).
    """
    yield from ()


@rule("GP804")
@documentation_only
def run_failed(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports a run whose evidence shows it failed: a vLLM engine that did not start (with the root
    cause, the first exception of the start, not vLLM's wrappers), or an out-of-memory error while
    serving or training: one anywhere in a vLLM log (after the KV-cache lines it ran out of memory
    while running, whether or not the log keeps the line that says the engine is up), or PyTorch's
    memory statistics with `num_ooms` above 0 (the caching allocator raised `torch.OutOfMemoryError`,
    whatever the loop did next; `num_alloc_retries` alone is not one).

    ## Why is this bad?
    A failed run verifies nothing: an out-of-memory failure means the estimate missed memory; any
    other failure (a tensor-parallel degree that does not divide the vocabulary, a missing kernel)
    means the planned layout cannot run as specified.

    ## Example
    ```text
    spec.yaml:6:1: GP804 [error] the run failed to start: AssertionError: 151936 is not divisible by 5
    ```

    ## Use instead
    Fix the cause (for out of memory: the terms `gpuplan verify` measured show which one; a start
    that died before logging any holds only the cause's own figures), rerun, and verify again.
    """
    yield from ()


@rule("GP805")
@documentation_only
def incomplete_evidence(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports evidence that stops before the lines `gpuplan verify` needs: a vLLM log without the
    KV-cache lines (`Available KV cache memory`, `GPU KV cache size`) and without a failure, which
    is a truncated log or an engine still starting. What the evidence does state is compared; the
    text output lists what is missing.

    ## Why is this bad?
    The checks that matter most (the KV pool, the engine's concurrency against the declared one)
    were not made: a pass on such evidence would say nothing about them.

    ## Example
    ```text
    spec.yaml:5:1: GP805 [warning] vllm.log: the log ends before the engine reported its KV cache
    ```

    ## Use instead
    Give the whole log of a start that reached `Starting vLLM server` (for vLLM, keep at least the
    engine's start-up lines; `VLLM_LOGGING_LEVEL=DEBUG` adds the profiler's split of the non-KV memory).
    """
    yield from ()


@rule("GP806")
@documentation_only
def measured_kv_pool_below_band(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Compares the KV cache pool a serving run allocated on each GPU (the smallest rank's: vLLM's
    `Available KV cache memory`, SGLang's `KV Cache is allocated`, TensorRT-LLM's paged KV cache) with
    the low edge of the estimate's measured band at `plan.confidence`: the estimated pool times the
    ratio measured / estimate that that share of published engine start-up logs stayed at or above
    (`gpuplan estimate` prints the edge; at 90% it is about x 0.96). It warns when the pool is below that
    edge beyond the log's printing precision. The estimate it holds the pool to is the one the terms are
    compared with (at the run's settings when they differ from the spec's: GP802). Whether the declared
    load still fits the smaller pool is GP803's to say.

    ## Why is this bad?
    Every KV-cache figure the plan rests on (the sequences it holds, the headroom, the fit at the
    band's edge) planned for at least that edge. A run below it is outside the estimator's measured
    error: the plan promised more capacity than this engine gives, and the next longer context or
    larger concurrency will find less room than the plan said.

    ## Example
    ```text
    chat.yaml:7:16: GP806 [warning] KV cache pool: the run allocated 45.0 GiB per GPU, below 55.7 GiB,
    the low edge at 90% confidence (the engine's KV cache 58.2 GiB estimated x 0.96, the ratio ...)
    ```

    ## Use instead
    Plan with the measured pool (the concurrency it holds is in `gpuplan verify`'s table), look for
    what else took the GPU's memory (another process, a larger graph pool or profile than the log's
    settings suggest), and send the estimate/measured pair back as a calibration record.
    """
    yield from ()
