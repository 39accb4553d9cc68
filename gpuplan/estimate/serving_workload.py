"""The records of the serving speed model: what it is given (``ServingWorkload``, one replica's workload
resolved from a spec and its memory estimate) and what it answers (``ServingSpeed``, what a client measures).
``serving_speed`` holds the model itself."""

from __future__ import annotations

import math

from gpuplan.architecture import Architecture
from gpuplan.catalog import Gpu
from gpuplan.estimate.lengths import Lengths, stated_quantile, through
from gpuplan.estimate.speculative import SpeculativeWorkload
from gpuplan.records import record


@record
class ServingWorkload:
    """What the serving speed depends on, resolved from a spec and its memory estimate (per replica)."""

    architecture: Architecture
    gpu: Gpu
    weights_read: float  # bytes a decode step reads on one GPU of the heaviest stage, routed experts apart
    routed_expert_bytes: float  # all routed experts of the model, in their stored format (0 if dense)
    kv_dtype_bytes: float
    kv_capacity_bytes: float  # KV bytes one GPU can hold after weights and reserves
    prompt_tokens: float  # mean prompt length
    prompt_p90: float  # 90th percentile (= mean when the prompt length is fixed)
    full_prompt: int  # the prompt of TTFT: context - output tokens
    output_tokens: int  # mean generated tokens
    concurrency: int
    # The job's own settings, as the resolved spec holds them (its schema defaults filled in once there).
    quantization: str
    engine: str
    batching: str
    tensor_parallel: int
    pipeline_parallel: int
    expert_parallel: int
    arrival: str  # closed-loop | steady | burst (serving_load)
    endpoint: str  # chat | completions | offline: the front end a request crosses (offline: none)
    network_gbs: float  # inter-node bandwidth per GPU, GB/s one direction
    state_dtype_bytes: int  # the model dtype: linear-attention and Mamba states are kept in it
    replicas: int = 1
    max_batched_tokens: int | None = None  # None: the engine's default for the GPU
    max_sequences: int | None = None
    weights_above_mean: float = 0.0  # weights_read less the stages' mean (uneven stages; decode_weight_reads)
    rate_rps: float | None = None  # steady: requests per second over the whole deployment
    speculation: SpeculativeWorkload | None = None  # serve.speculative (gpuplan.estimate.speculative)
    adapter_slots: int = 0  # serve.lora max_adapters: a step reads min(them, its decodes) adapters' slots
    adapter_bytes: float = 0.0  # ... of these bytes each, one slot on the stage that reads most (lora_serving)
    engine_version: str | None = None  # serve.engine_version: the vLLM release whose defaults the scheduler runs
    output_p90: float = 0.0  # serve.output_tokens_p90; at most output_tokens: every request makes that many

    @property
    def burst(self) -> bool:
        """Whether the load is a burst's wave (``serving_load.burst_speed``): continuous batching under
        ``arrival: burst`` (static batching is estimated for a closed loop alone)."""
        return self.arrival == "burst" and self.batching != "static"

    @property
    def replica_rate(self) -> float:
        """A steady stream's requests per second on each replica (split evenly over them); 0 without a rate."""
        return (self.rate_rps or 0.0) / max(1, self.replicas)

    @property
    def burst_prompt(self) -> int:
        """The prompt each request of a burst's wave carries: the mean prompt, whole."""
        return max(1, round(max(1.0, self.prompt_tokens)))

    def ttft_prompts(self, share: float | None) -> tuple[tuple[float, int], ...]:
        """The prompts (share of the requests, tokens) a TTFT statistic is priced at. For the ``share`` quantile
        the prompt at that quantile (a quantile of TTFT is the service of the prompt at it plus the wait at it,
        a sum of quantiles: ``serving_load``), ``stated_quantile``; for the mean (None), the prompts' classes
        (``lognormal``), each at its share. None longer than the full prompt (the context holds it beside a
        mean answer); without stated prompts, every one the full prompt. A burst's: each request the mean
        prompt (``burst_prompt``)."""
        if self.burst:
            return ((1.0, self.burst_prompt),)
        mean, most = max(1, round(self.prompt_tokens)), self.full_prompt
        if share is None:
            return through(mean, self.prompt_p90, most).classes
        return ((1.0, stated_quantile(mean, self.prompt_p90, share, most)),)

    @property
    def output_room(self) -> int:
        """The longest answer the context holds beside the mean prompt (``Serve.answer_room``): the context
        is the full prompt and the mean answer."""
        return round(self.full_prompt + self.output_tokens - self.prompt_tokens)

    def outputs(self) -> Lengths:
        """The generated tokens per request (``lengths``): a lognormal through the mean and the p90, none
        longer than ``output_room``; fixed without a p90 above the mean."""
        return through(self.output_tokens, self.output_p90, self.output_room)


@record
class ServingSpeed:
    """What a client measures under the workload's arrival shape. TTFT: mean, median and p90 over requests
    (closed loop and steady stream: over the prompts under the load, ``ServingWorkload.ttft_prompts``; burst:
    across the wave, each request at the mean prompt), front end and engine request overhead included; TPOT
    excludes the first token (mean inter-token latency of a running sequence); rates over the whole deployment."""

    ttft_s: float  # mean; inf when a steady stream arrives faster than the deployment serves (saturated)
    ttft_single_s: float  # the full prompt alone on an idle replica
    tpot_s: float  # time per output token of a running sequence (mean inter-token latency)
    tokens_per_s: float  # aggregate output tokens per second over all replicas
    decode_bound: str  # memory | compute: what limits the steady-state decode step; front-end: the streaming
    running: float  # sequences decoding at once per replica in the steady state
    limited_by: str  # what caps the running batch: concurrency | kv-cache | engine | arrival-rate | front-end
    engine: str
    prefill_flops: float  # of the full prompt
    decode_bytes_per_step: float  # per GPU, at the steady state
    arrival: str
    ttft_median_s: float = 0.0
    ttft_p90_s: float = 0.0
    requests_per_s: float = 0.0  # completed requests per second over all replicas
    frontend_s: float = 0.0  # of the TTFT: the server's front end (HTTP, chat template, tokenizer)
    frontend_capacity_rps: float = math.inf  # per replica's server process (frontend_capacity); inf offline
    # Of the mean TTFT, at least this long waiting on the server process: a burst's turn at it, a steady
    # stream's queue at it, a one-token answer's lag behind it.
    frontend_wait_s: float = 0.0
    saturated: bool = False  # steady: requests arrive faster than the deployment completes them
    # steady: the most requests per second the deployment completes (every replica at its caps, no more than its
    # server process takes in), which the stream's rate must stay under; None under other load shapes
    stream_capacity_rps: float | None = None
    duration_s: float | None = None  # burst: until the wave's last token
    preempted: int = 0  # burst: sequences preempted for want of KV cache on a replica (each recomputed later)
