"""Serving speed: TTFT, TPOT and output tokens/s of one deployment, from one consistent steady state.

The model, term by term (sources in brackets):
- a forward step of ``d`` decoding sequences and ``k`` prefill tokens (chunked prefill mixes both: vLLM V1
  scheduler; Sarathi-Serve, Agrawal et al. 2024) costs, per GPU of a pipeline stage,
  linear layers:  roofline(weight bytes read / (HBM bandwidth x bandwidth efficiency),
                           2 x matmul parameters x (d + k) / (tensor peak x MAMF ceiling x GEMM efficiency))
                  [roofline per operator class, LLM-Viewer, Yuan et al. 2024, arXiv 2402.16363; the smooth
                  p-norm form because measured kernels bend between the bounds]; weights are read once per
                  step, less the embedding table (a step gathers its tokens' rows; the head's matmul reads
                  a tied table whole) and a vision tower (prefill of image prompts only), on the stage that
                  reads the most (``decode_weight_reads``); a mixture-of-experts layer reads only the
                  experts the step's tokens touch, E x (1 - (1 - k/E)^tokens) under uniform routing;
                  prefill tokens skip the LM head
  attention:      roofline(KV bytes of every decoding sequence / bandwidth, their QK and PV FLOPs / attention
                  rate) + the prefill tokens' causal attention FLOPs (sliding-window layers stop at the
                  window; MLA decodes in the absorbed latent form); a linear-attention or Mamba layer
                  instead reads and writes its sequence's fixed state each step (vLLM's GDN and Mamba-2
                  decode kernels update it in place), whatever the context
  communication:  an all-reduce per block (attention or state mixer, MLP: a decoder layer has two, a
                  Nemotron-H layer one) under tensor parallelism, each latency + 2(t-1)/t x tokens x
                  hidden x 2 bytes / link bandwidth (Megatron-LM, Shoeybi et al. 2019; NCCL ring); two
                  all-to-alls per MoE layer under expert parallelism
  fixed costs:    the engine's per-step and per-running-sequence overheads + a kernel floor per block (half
                  the fitted per-decoder-layer figure)
- continuous batching at concurrency C is a closed loop (each finished request replaced at once, as
  benchmark clients do). The running slots (C, unless the engine's sequence cap or the KV cache holds
  fewer) each cycle through a prefill, in chunks of the token budget beside the other slots' decodes,
  and O decode steps whose steps carry the other slots' decodes and prefill chunks. One unknown, the share
  of its cycle a slot spends decoding, balances those flows (Little's law); it is bracketed in [0, 1] and
  solved to 1e-9 (Illinois false position), so TPOT, the prefill time S and output tokens/s =
  slots x O / (S + O x TPOT) come from one exact steady state. Prefill chunks queue for the budget
  (Pollaczek-Khinchine, the service's spread following the prompt lengths'); a mixture-of-experts step
  touches the experts of its decodes and, in a share of steps, of a whole prompt chunk (touching is
  concave: chunks are not smeared).
  Requests beyond the slots wait: TTFT under load = (C - slots) / request rate + the rest of the step in
  flight when another slot keeps the replica busy (``_residual_step``) + the prompt's prefill under that
  load + the engine's request overhead + the server's front end, at the prompts each statistic is priced
  at (``ServingWorkload.ttft_prompts``); the single-request TTFT (the full prompt alone) is reported beside
  it. Behind an online endpoint one server process per replica takes requests in and streams tokens back,
  at most ``frontend.frontend_capacity`` requests a second: a loop that would outrun it is
  front-end-bound (``_frontend_bound``), a faster steady stream saturates.
- the first token: most engines sample it at the end of the prompt's pass; TurboMind's context decoder
  stops one prompt token short and the next decode step of the running batch feeds it and samples the
  first output, so there TTFT = pass of P - 1 tokens + one decode step (a 1-token prompt: the step alone).
- a burst under ``serve.arrival: burst``: the wave the scheduler steps through (``serving_load.wave``); a
  lock-step benchmark round, as the calibration's LMDeploy harness runs it: ``serving_lockstep.burst_ttft``.
- static batching: the batch prefills together, then decodes together until its longest answer ends (the
  mean of the longest of the batch's answers, ``Lengths.longest_of``); a client whose answer ended sooner
  waits for it before its next request starts; waves of it queue the rest.
- pipeline parallelism: microbatches of the running batch flow through the stages; a token crosses every
  stage (TPOT = the longer of the stages' sum and microbatches x the step of the stage that reads the
  most weights, which paces the pipeline), and with fewer sequences than stages it idles (bubbles).
Every evaluation is closed form but for that root (some 10-30 evaluations of two steps each), so the
planner can call it for hundreds of layouts. Figures per engine and the shared kernel figures are in
``gpuplan.estimate.calibration``; ``gpuplan.estimate.performance`` holds the FLOP counts and collectives.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

from gpuplan.estimate.calibration import CALIBRATION, Calibration
from gpuplan.estimate.frontend import frontend_capacity, frontend_seconds, request_overhead
from gpuplan.estimate.lengths import held_tokens, lognormal_square_mean
from gpuplan.estimate.performance import (
    Efficiency,
    allreduce_time,
    attention_dims,
    attention_flops,
    compute_dtype,
    link_bandwidth,
    matmul_ceiling,
    matmul_params,
    on_fast_link,
    roofline,
)
from gpuplan.estimate.roots import bracketed_root
from gpuplan.estimate.serving import chunks_by_itself
from gpuplan.estimate.serving_load import (
    P90,
    LoadTerms,
    burst_speed,
    queue_wait_factor,
    state_at_rate,
    ttft_statistics,
    wait_quantile,
)
from gpuplan.estimate.serving_workload import ServingSpeed, ServingWorkload
from gpuplan.estimate.vllm_releases import vllm_release
from gpuplan.records import record

ACTIVATION_BYTES = 2  # bf16 activations on the wire (all-reduce and all-to-all payloads)


class StepCost(NamedTuple):
    seconds: float  # on one GPU of the stage that reads the most weights
    memory_bound: bool
    bytes_read: float
    mean_seconds: float  # the stages' mean (their weights' mean): a stage pipeline's sum over stages / stages


# A StepCost from its fields without the named tuple's Python-level __new__ (the speed model's inner loop
# builds some twenty per estimate).
_new_step: Callable[[tuple[float, bool, float, float]], StepCost] = functools.partial(tuple.__new__, StepCost)
ChunkStep = Callable[[float, float], StepCost]  # a prompt chunk's step from its tokens and attention FLOPs


class Rates:
    """What a step of one replica runs at on its GPU: the engine's limits, the GEMM, attention and memory
    rates, the linear FLOPs per token and the fixed cost of one step on one GPU of a stage."""

    def __init__(self, w: ServingWorkload, calibration: Calibration, efficiency: Efficiency) -> None:
        arch, gpu = w.architecture, w.gpu
        self.engine = calibration.engine(w.engine)
        # vLLM's scheduler runs at its release's defaults for the GPU, as its memory was profiled
        chunks = chunks_by_itself(arch, gpu.arch, w.adapter_slots > 0, w.speculation is not None)
        release = vllm_release(w.engine_version)
        default_tokens, default_sequences = self.engine.limits(gpu, release, w.full_prompt + w.output_tokens, chunks)
        self.token_budget = w.max_batched_tokens or default_tokens  # tokens one step may carry
        self.sequence_cap = w.max_sequences or default_sequences  # sequences the engine runs at once
        mechanisms = calibration.serving
        tp, pp = w.tensor_parallel, w.pipeline_parallel
        stage_layers = math.ceil(arch.layers / pp)
        self.stage_share = stage_layers / arch.layers
        self.stage_layers = stage_layers
        dtype = compute_dtype(w.quantization, gpu)
        # GEMMs reach the engine's share of what the GPU can sustain (its MAMF ceiling), unless the
        # configuration overrides the share of the datasheet peak directly.
        if efficiency.prefill_mfu is not None:
            gemm = efficiency.prefill_mfu
        else:
            gemm = matmul_ceiling(gpu, dtype) * self.engine.gemm_efficiency
        bandwidth = efficiency.decode_bandwidth or self.engine.bandwidth_efficiency
        self.gemm_rate = gpu.peak_flops(dtype) * gemm
        ceiling16 = matmul_ceiling(gpu, "bf16")
        self.attention_rate = gpu.peak_flops("bf16") * ceiling16 * mechanisms.attention_efficiency
        self.bandwidth = gpu.bandwidth * bandwidth
        # Linear FLOPs per token on this GPU; a prefill token skips the LM head (only the last position of a
        # prompt is sampled), a decode token does not.
        self.head_flops = 2 * arch.vocab * arch.hidden * self.stage_share / tp
        self.body_flops = 2 * matmul_params(arch) * self.stage_share / tp - self.head_flops
        # Blocks of this stage: a decoder layer is two (an attention and an MLP block), a Nemotron-H layer one, with
        # about half a decoder layer's kernels (a norm, the mixer's or MLP's kernels, its output projection).
        self.stage_blocks = arch.block_count(range(stage_layers))  # the first stage's (stages differ by a layer)
        self.fixed = self.engine.step_overhead_s + self.stage_blocks / 2 * mechanisms.layer_overhead_s
        self.sharpness = mechanisms.roofline_sharpness
        self.inverse_sharpness = 1 / self.sharpness


class Deployment:
    """Per-GPU rates and per-step costs of one replica; every method is closed form."""

    def __init__(self, w: ServingWorkload, calibration: Calibration, efficiency: Efficiency) -> None:
        arch, gpu = w.architecture, w.gpu
        rates = Rates(w, calibration, efficiency)
        self.w, self.engine = w, rates.engine
        self.token_budget, self.sequence_cap = rates.token_budget, rates.sequence_cap
        mechanisms = calibration.serving
        tp, pp, ep = w.tensor_parallel, w.pipeline_parallel, w.expert_parallel
        self.stage_layers, self.stage_share = rates.stage_layers, rates.stage_share
        self.stage_blocks = rates.stage_blocks
        stage_layers = rates.stage_layers
        self.gemm_rate, self.attention_rate, self.bandwidth = rates.gemm_rate, rates.attention_rate, rates.bandwidth
        self.head_flops, self.body_flops = rates.head_flops, rates.body_flops
        # Weights: every step reads the stage's other weights; the routed experts this GPU holds are read
        # only when a token is routed to them.
        self.dense_bytes = w.weights_read
        self.adapter_slots, self.adapter_bytes = w.adapter_slots, w.adapter_bytes  # serve.lora
        if arch.is_moe and w.routed_expert_bytes:
            per_expert = w.routed_expert_bytes / arch.experts * self.stage_share
            if ep > 1:
                self.local_experts = math.ceil(arch.experts / ep)
                self.expert_bytes = per_expert  # whole experts per GPU
                self.expert_group = max(1, ep // tp)  # replicas whose tokens reach one expert group
            else:
                self.local_experts = arch.experts
                self.expert_bytes = per_expert / tp
                self.expert_group = 1
        else:
            self.local_experts, self.expert_bytes, self.expert_group = 0, 0.0, 1
        self.above_mean = w.weights_above_mean
        # KV: bytes per cached token per layer on this GPU; sliding layers keep at most the window.
        self.kv_layer_bytes = arch.kv_elements_per_token_per_layer(tp) * w.kv_dtype_bytes
        attention_layers = min(math.ceil(arch.attention_layers / pp), stage_layers)
        sliding = math.ceil(arch.sliding_layer_count / pp)
        self.sliding_layers = min(sliding, attention_layers)
        self.full_layers = attention_layers - self.sliding_layers
        # Linear-attention and Mamba layers: one fixed state per sequence, read and written back each step.
        state_layers = min(math.ceil(arch.state_layers / pp), stage_layers)
        self.state_bytes = state_layers * arch.state_bytes_per_layer(w.state_dtype_bytes, tp)
        self.heads_share = self.stage_share / tp  # attention FLOPs split by heads over TP
        d_qk, d_v = attention_dims(arch, decode=True)
        self.decode_attention = 2 * arch.heads * (d_qk + d_v) * self.heads_share  # per cached token per layer
        self.window = arch.sliding_window
        self.attention_memo: dict[float, float] = {}
        self.decode_memo: dict[float, tuple[float, float]] = {}  # context -> (KV bytes read, keys attended)
        # The continuous-batching steady state by its arguments (``serving_speed``'s ``state_at``): a planner's
        # replica counts of one family search the same states (their root searches begin alike).
        self.state_memo: dict[tuple[float, ...], SteadyState] = {}
        # Collectives: an all-reduce per block over the TP group; two all-to-alls per MoE layer under EP.
        self.tp_bandwidth = link_bandwidth(gpu, tp, w.network_gbs) * mechanisms.link_efficiency
        fast = on_fast_link(gpu, tp)
        self.tp_latency = mechanisms.allreduce_latency_nvlink_s if fast else mechanisms.allreduce_latency_pcie_s
        self.ep_bandwidth = link_bandwidth(gpu, ep, w.network_gbs) * mechanisms.link_efficiency
        ep_fast = on_fast_link(gpu, ep)
        self.ep_latency = mechanisms.allreduce_latency_nvlink_s if ep_fast else mechanisms.allreduce_latency_pcie_s
        self.moe_layers = math.ceil(arch.moe_layers / pp) if arch.is_moe else 0
        self.fixed = rates.fixed
        self.sharpness, self.inverse_sharpness = rates.sharpness, rates.inverse_sharpness
        self.sequence_overhead = self.engine.sequence_overhead_s
        self.hop = self.tp_latency if pp > 1 else 0.0  # activations handed to the next stage
        self.communicates = tp > 1 or (ep > 1 and self.moe_layers > 0)

    # -- one forward step on one GPU of a stage --------------------------------------------------------
    def weights_read(self, tokens: float) -> float:
        if not self.local_experts:
            return self.dense_bytes
        arch = self.w.architecture
        routed = tokens * self.expert_group
        touched = self.local_experts * (1 - (1 - arch.experts_per_token / arch.experts) ** routed)
        return self.dense_bytes + touched * self.expert_bytes

    def decode_attention_keys(self, context: float) -> float:
        """Keys one decode token attends to, summed over all the model's layers (sliding ones capped)."""
        arch = self.w.architecture
        sliding = arch.sliding_layer_count
        return (arch.attention_layers - sliding) * context + sliding * min(context, self.window or context)

    def prompt_attention(self, tokens: float) -> float:
        """Causal attention FLOPs of a whole prompt of ``tokens`` (all layers, all heads), memoised."""
        if tokens not in self.attention_memo:
            self.attention_memo[tokens] = attention_flops(self.w.architecture, 0, tokens)
        return self.attention_memo[tokens]

    def kv_read(self, context: float) -> float:
        """KV bytes one decoding sequence holds and reads on this GPU per step (its recurrent states included)."""
        window = self.w.architecture.sliding_window or context
        kv = self.kv_layer_bytes * (self.full_layers * context + self.sliding_layers * min(context, window))
        return kv + self.state_bytes

    def communication(self, tokens: float) -> float:
        w, arch = self.w, self.w.architecture
        seconds = 0.0
        payload = tokens * arch.hidden * ACTIVATION_BYTES
        if w.tensor_parallel > 1:
            # one all-reduce a block (``Architecture.block_count``); under EP an MoE block exchanges tokens all-to-all
            reduces = self.stage_blocks - (self.moe_layers if w.expert_parallel > 1 else 0)
            seconds += reduces * allreduce_time(payload, w.tensor_parallel, self.tp_bandwidth, self.tp_latency)
        if w.expert_parallel > 1 and self.moe_layers:
            ep = w.expert_parallel
            routed = payload * arch.experts_per_token * (ep - 1) / ep
            seconds += self.moe_layers * 2 * (self.ep_latency + routed / self.ep_bandwidth)
        return seconds

    def step(
        self, decode: float, prefill: float, context: float, prefill_attention: float, chunk: float = 0.0
    ) -> StepCost:
        """A step of ``decode`` decoding sequences at ``context`` and ``prefill`` prompt tokens.

        ``prefill`` may be a mean over steps of prompts that arrive as whole chunks of ``chunk`` tokens in
        a share prefill / chunk of them: the experts such a step touches are then the mean over both kinds
        of step, not those of the mean token count (touching is concave in the tokens: a chunk of 500
        tokens touches every expert once, not 500 steps' worth of one token each)."""
        tokens = decode + prefill
        if not self.local_experts:
            weights = self.dense_bytes
        elif 0 < prefill < chunk:
            share = prefill / chunk
            weights = (1 - share) * self.weights_read(decode) + share * self.weights_read(decode + chunk)
        else:
            weights = self.weights_read(tokens)
        if self.adapter_bytes:  # the slots of the adapters in the batch, one per sequence: lora_serving
            weights += min(self.adapter_slots, max(1.0, decode)) * self.adapter_bytes
        linear_memory = weights / self.bandwidth
        linear_compute = (self.body_flops * tokens + self.head_flops * decode) / self.gemm_rate
        reads = self.decode_memo.get(context)
        if reads is None:  # the steady state steps at one context: read and attended keys once
            reads = self.decode_memo[context] = (self.kv_read(context), self.decode_attention_keys(context))
        kv = decode * (reads[0] + self.state_bytes)  # a state is read, then written back
        attention_memory = kv / self.bandwidth
        attention_compute = decode * reads[1] * self.decode_attention / self.attention_rate
        prefill_compute = prefill_attention * self.heads_share / self.attention_rate
        p, inverse = self.sharpness, self.inverse_sharpness
        linear = roofline(linear_memory, linear_compute, p, inverse)
        seconds = (
            linear
            + roofline(attention_memory, attention_compute, p, inverse)
            + prefill_compute
            + (self.communication(tokens) if self.communicates else 0.0)
            + self.fixed
            + decode * self.sequence_overhead
        )
        memory_bound = linear_memory + attention_memory >= linear_compute + attention_compute + prefill_compute
        mean_seconds = seconds
        if self.above_mean:
            mean_linear = roofline((weights - self.above_mean) / self.bandwidth, linear_compute, p, inverse)
            mean_seconds = seconds - linear + mean_linear
        return _new_step((seconds, memory_bound, weights + kv, mean_seconds))

    # -- a pipeline of stages ---------------------------------------------------------------------------
    def cycle(self, step: StepCost, microbatches: float) -> float:
        """A decode token's time through every stage with ``microbatches`` in flight, each a ``step``.

        A token crosses every stage in turn (their sum: stages x their mean), and the stage that reads the
        most takes every microbatch in turn before a microbatch's next token (microbatches x its step);
        the longer paces the pipeline [GPipe, Huang et al. 2019: a pipeline runs at its slowest stage].
        Equal stages: stages x step, whatever the microbatches (at most the stages)."""
        pp = self.w.pipeline_parallel
        return max(pp * step.mean_seconds, microbatches * step.seconds) + (pp - 1) * self.hop

    def microbatches(self, sequences: float) -> float:
        """The microbatches ``sequences`` running sequences split into: one per stage, at most one each."""
        return min(self.w.pipeline_parallel, max(1.0, sequences))

    def pass_time(self, step: StepCost, chunks: float) -> float:
        """``chunks`` prompt chunks, each a ``step``, one after another through every stage: the first
        crosses them all, the others follow at the pace of the stage that reads the most."""
        pp = self.w.pipeline_parallel
        return pp * step.mean_seconds + (chunks - 1) * step.seconds + (pp - 1) * self.hop

    def pass_beside(self, one: StepCost, other: StepCost, others: float) -> float:
        """A microbatch ``one`` and ``others`` microbatches ``other`` through every stage. Microbatches that
        take the same time on every stage end a pipeline after the sum of their times plus stages - 1 times
        the longest (a flow shop of identical machines: the order does not matter), the crossing at the
        stages' means and hops: ``pass_time`` where all are alike."""
        pp = self.w.pipeline_parallel
        slowest = max(one.seconds, other.seconds)
        crossing = pp * max(one.mean_seconds, other.mean_seconds) + (pp - 1) * self.hop
        return crossing + one.seconds + others * other.seconds - slowest

    # -- prefill of one prompt --------------------------------------------------------------------------
    def prompt_pass(self, prompt: float) -> float:
        """Tokens of a prompt that its forward pass computes: one fewer where a decode step feeds the last."""
        return prompt - 1 if self.engine.first_token_from_decode_step else prompt

    def first_token_step(self, decoders: float, context: float) -> float:
        """The decode step that samples a new sequence's first token, where the engine's prompt pass does not.

        ``decoders`` sequences (the new one included) decode at ``context``; a token crosses every stage."""
        if not self.engine.first_token_from_decode_step:
            return 0.0
        microbatches = self.microbatches(decoders)
        return self.cycle(self.step(decoders / microbatches, 0, context, 0.0), microbatches)

    def chunked_pass(self, tokens: float, room: float | None, chunk: ChunkStep) -> float:
        """A pass over ``tokens`` prompt tokens cut as vLLM's chunked prefill cuts it: chunks of ``room``, the
        rest last (None: one chunk), each priced by ``chunk(tokens, attention FLOPs)``, one after another
        through the stages. Chunks that take the same time on every stage end a pipeline after the sum of
        their times and, once, the other stages' crossing of the one that takes longest (a proportionate flow
        shop: C = sum p + (m - 1) max p, in any order, Pinedo, Scheduling, sec. 6.1): the chunks' times are
        linear in their attention, so their sum is the whole prompt's at the mean chunk, and the longest is the
        last whole chunk, whose causal attention is the whole chunks' largest, or the smaller one after it
        (``serving_load.wave`` steps a burst's chunks alike). An even split would shorten the fill as chunks
        multiply, starting a prompt sooner under more load."""
        whole, full, last = self.chunks(tokens, room, chunk)
        paces = full * whole.seconds + (last.seconds if last is not None else 0.0)
        if self.w.pipeline_parallel == 1:
            return paces
        size = tokens if room is None else min(room, tokens)
        heaviest = [chunk(size, self.prompt_attention(full * size) - self.prompt_attention((full - 1) * size))]
        if last is not None:
            heaviest.append(
                chunk(tokens - full * size, self.prompt_attention(tokens) - self.prompt_attention(full * size))
            )
        return paces + max(self.pass_time(step, 1) - step.seconds for step in heaviest)

    def stage_means(self, tokens: float, room: float | None, chunk: ChunkStep) -> float:
        """The pass of ``chunked_pass`` with each chunk at its stages' mean: without its pipeline fill."""
        whole, full, last = self.chunks(tokens, room, chunk)
        return full * whole.mean_seconds + (last.mean_seconds if last is not None else 0.0)

    def chunks(self, tokens: float, room: float | None, chunk: ChunkStep) -> tuple[StepCost, int, StepCost | None]:
        """(a whole chunk's step, how many whole chunks, the smaller last one's step or None):
        ``chunked_pass``'s cut."""
        per_token = self.prompt_attention(tokens) / tokens
        size = tokens if room is None else min(room, tokens)
        full = max(1, math.floor(tokens / size * (1 + 1e-12)))  # a float quotient a hair short of a whole one
        rest = tokens - full * size
        last = chunk(rest, per_token * rest) if rest > 1e-9 * tokens else None  # float noise is no chunk
        return chunk(size, per_token * size), full, last

    def prefill_alone(self, prompt: int, budget: int | None) -> float:
        """The prompt through an idle replica: chunks of ``budget`` tokens (None: one pass), to its first token."""
        first = self.first_token_step(1, prompt)
        prompt = int(self.prompt_pass(prompt))
        if prompt <= 0:
            return first
        return self.chunked_pass(prompt, budget, lambda tokens, attention: self.step(0, tokens, 0, attention)) + first


def prepare(
    w: ServingWorkload, efficiency: Efficiency | None = None, calibration: Calibration = CALIBRATION
) -> Deployment:
    """The per-GPU rates and per-step costs of ``w``'s deployment, which its load (``concurrency``,
    ``kv_capacity_bytes``, ``replicas``) leaves as they are: a planner that tries many loads of one
    deployment prepares it once for ``serving_speed`` and ``latency_floors``."""
    return Deployment(w, calibration, efficiency or Efficiency())


def kv_sequences(w: ServingWorkload, d: Deployment) -> float:
    """Running sequences the KV cache of one GPU holds: its bytes over one sequence's (its prompt and the
    tokens it holds on average, ``held_tokens``); unbounded where a sequence holds none on this GPU."""
    per_sequence = d.kv_read(held_tokens(max(1.0, w.prompt_tokens), w.outputs(), d.engine.reserves_full_context))
    return w.kv_capacity_bytes / per_sequence if per_sequence > 0 else math.inf


def serving_speed(
    w: ServingWorkload,
    efficiency: Efficiency | None = None,
    calibration: Calibration = CALIBRATION,
    prepared: Deployment | None = None,
) -> ServingSpeed:
    """TTFT, TPOT and tokens/s of the deployment ``w`` (see the module docstring for the model);
    ``prepared``: ``prepare`` of ``w`` at any load with the same efficiency and calibration."""
    efficiency = efficiency or Efficiency()
    d = prepared or Deployment(w, calibration, efficiency)
    arch, engine = w.architecture, d.engine
    budget = d.token_budget
    prompt, output = max(1.0, w.prompt_tokens), max(1, w.output_tokens)
    outputs = w.outputs()
    context = prompt + outputs.held()  # a running sequence's, caught in proportion to its run
    # Attention of a prompt drawn from the distribution: quadratic, so it follows E[P^2], not E[P]^2.
    square_mean = lognormal_square_mean(prompt, w.prompt_p90)
    prompt_attention = attention_flops(arch, 0, math.sqrt(square_mean))
    # Running slots: the declared concurrency, unless the engine's cap or the KV cache holds fewer.
    caps = {
        "concurrency": float(w.concurrency),
        "engine": float(d.sequence_cap),
        "kv-cache": max(kv_sequences(w, d), 1.0),
    }
    limited_by = min(caps, key=lambda name: caps[name])
    slots = min(caps.values())
    steps, gain = float(output), 1.0  # decode steps per request, tokens each yields per sequence
    if w.speculation is not None:  # speculative rounds instead of steps: gpuplan.estimate.speculative_speed
        from gpuplan.estimate.speculative_speed import speculative_rounds  # it imports this module

        d, gain = speculative_rounds(d, context, calibration, efficiency)
        steps = output / gain
    frontend = frontend_seconds(w.endpoint, w.full_prompt)
    overhead_of = functools.partial(request_overhead, engine.request_overhead_s, w.endpoint)  # of a prompt
    alone = d.prefill_alone(w.full_prompt, None if w.batching == "static" else budget)
    ttft_single = alone + overhead_of(w.full_prompt)
    # The server process takes requests in and streams tokens back at most this fast (serving_load).
    capacity = frontend_capacity(w.endpoint, prompt, output)
    make: Callable[..., ServingSpeed] = functools.partial(
        ServingSpeed,
        engine=engine.id,
        prefill_flops=2 * (matmul_params(arch) - arch.vocab * arch.hidden) * w.full_prompt
        + d.prompt_attention(w.full_prompt),
        arrival=w.arrival,
        frontend_s=frontend,
        frontend_capacity_rps=capacity,
        ttft_single_s=ttft_single,
    )
    continuous = w.batching != "static"  # static: a closed loop (GP024 refuses other arrivals)
    terms = LoadTerms(caps, output, steps, overhead_of, capacity, make, outputs)
    if w.burst:
        return burst_speed(w, d, prompt, terms)
    spread = square_mean / (prompt * prompt)

    def state_at(held: float) -> SteadyState:
        """The continuous-batching steady state with ``held`` sequences running (memoised on the deployment)."""
        key = (held, budget, prompt, steps, prompt_attention, spread, context)
        state = d.state_memo.get(key)
        if state is None:
            state = d.state_memo[key] = _continuous(d, held, budget, prompt, steps, prompt_attention, spread, context)
        return state

    if continuous and w.arrival == "steady" and w.rate_rps:
        return _steady_speed(w, state_at, terms)
    behind = (0.0, 0.0, 0.0)  # (mean, median, p90) of a static batch's wait for its longest answer
    if w.batching == "static":
        # A batch decodes until its longest answer ends: that many steps, its finished sequences still in it.
        longest = steps * outputs.longest_of(slots) / outputs.mean
        state = _static(d, slots, prompt, longest, prompt_attention)
        # A client whose answer ended sends its next request, which waits for the batch's longest to end:
        # max(0, longest of the others - its own answer) steps. On average (E[longest] - E[own]) steps
        # (Little's law: C / X less prefill and own decode); its median and p90 are the quantiles of that
        # wait over both draws (``Lengths.longest_past``). One client alone waits for no one.
        scale = steps / outputs.mean  # decode steps per token
        others = slots - 1
        behind = (
            (longest - steps) * state.tpot,
            outputs.longest_past(others, 0.5) * scale * state.tpot,
            outputs.longest_past(others, P90) * scale * state.tpot,
        )
        if state.requests_per_s > capacity:  # batches wait on the server process: its rate, the stream's lag
            queued = max(0.0, w.concurrency - slots) / capacity
            ttft = ttft_statistics(state, w, overhead_of, queued, behind)
            return _streamed(make, w, state, slots, ttft, state.tpot / gain, capacity, output)
    else:
        state = state_at(slots)
        if state.requests_per_s > capacity:
            most = min(caps["engine"], caps["kv-cache"])  # the same state however many clients wait
            return _frontend_bound(w, state_at, most, slots, output, overhead_of, capacity, gain, make)
    # Requests beyond the running slots wait for one to free (the closed loop's clients keep them queued).
    waiting = max(0.0, w.concurrency - slots) / state.requests_per_s
    ttft = ttft_statistics(state, w, overhead_of, waiting, behind)
    return _from_state(make, w, state, slots, limited_by, ttft, state.tpot / gain, state.requests_per_s, output)


def _frontend_bound(
    w: ServingWorkload,
    state_at: Callable[[float], SteadyState],
    most: float,
    slots: float,
    output: int,
    overhead_of: Callable[[float], float],
    capacity: float,
    gain: float,
    make: Callable[..., ServingSpeed],
) -> ServingSpeed:
    """A closed loop whose GPUs would outrun its server process (``frontend.frontend_capacity``) completes
    requests at that capacity; the engine holds the sequences that serve it, and the clients' wait is the
    stream's lag (``_streamed``; vLLM PR #12287, 400 clients over an engine capped at 256: TTFT near the
    engine's, TPOT five times a decode step). Crossing into this regime moves the wait from TTFT (for a
    slot) to TPOT; throughput and each request stay continuous. Searched up to ``most``, what the engine could
    run, the loop's own ``slots`` outrunning the capacity (``state_at_rate``'s ``beyond``)."""
    state, held = state_at_rate(state_at, most, capacity, beyond=slots)
    ttft = ttft_statistics(state, w, overhead_of)
    return _streamed(make, w, state, held, ttft, state.tpot / gain, capacity, output)


def _streamed(
    make: Callable[..., ServingSpeed],
    w: ServingWorkload,
    state: SteadyState,
    running: float,
    ttft: tuple[float, float, float],
    decoded: float,
    capacity: float,
    output: int,
) -> ServingSpeed:
    """A loop served at the server process's ``capacity`` X: by Little's law, C = X (TTFT + (O - 1) TPOT),
    what is left of each client's turn C / X after its first token and its decoded tokens is the stream's
    lag, spread over its tokens; a one-token answer waits for its only token."""
    wait = max(0.0, w.concurrency / capacity - ttft[0] - (output - 1) * decoded)
    if output <= 1:
        ttft = (ttft[0] + wait, ttft[1] + wait, ttft[2] + wait)
        make = functools.partial(make, frontend_wait_s=wait)
        return _from_state(make, w, state, running, "front-end", ttft, decoded, capacity, output)
    tpot = decoded + wait / (output - 1)
    return _from_state(make, w, state, running, "front-end", ttft, tpot, capacity, output, streamed=wait > 0)


def _from_state(
    make: Callable[..., ServingSpeed],
    w: ServingWorkload,
    state: SteadyState,
    slots: float,
    limited_by: str,
    ttft: tuple[float, float, float],
    tpot: float,
    served: float,
    output: int,
    saturated: bool = False,
    streamed: bool = False,
) -> ServingSpeed:
    """The speed a steady state gives: (mean, median, p90) ``ttft``, ``tpot``, and ``served`` requests per
    second on each replica of ``output`` tokens (the closed loop's and the steady stream's alike);
    ``streamed``: the TPOT is the server process's pace of streaming tokens back, not the decode step's."""
    mean, median, p90 = ttft
    return make(
        ttft_s=mean,
        tpot_s=tpot,
        tokens_per_s=w.replicas * served * output,
        decode_bound="front-end" if streamed else "memory" if state.decode.memory_bound else "compute",
        running=slots,
        limited_by=limited_by,
        decode_bytes_per_step=state.decode.bytes_read,
        ttft_median_s=median,
        ttft_p90_s=p90,
        requests_per_s=w.replicas * served,
        saturated=saturated,
    )


def _steady_speed(w: ServingWorkload, state_at: Callable[[float], SteadyState], terms: LoadTerms) -> ServingSpeed:
    """Poisson arrivals at ``w.rate_rps``, split evenly over the replicas: the running sequences L are the
    rate times a request's latency (Little's law), i.e. the closed loop's steady state at L slots whose
    throughput is the rate. Throughput grows with the slots; past the most the caps allow, or past what
    the server process takes in and streams back (``capacity``), the stream outruns the deployment
    (saturated: TTFT without bound, throughput at the caps)."""
    caps, capacity, make = terms.caps, terms.capacity, terms.make
    rate = w.replica_rate
    limited_by = min(caps, key=lambda name: caps[name])
    most = min(caps.values())
    full = state_at(most)
    make = functools.partial(make, stream_capacity_rps=w.replicas * min(full.requests_per_s, capacity))
    if rate >= min(full.requests_per_s, capacity):
        state, slots, saturated = full, most, True
        if capacity < full.requests_per_s:
            state, slots = state_at_rate(state_at, most, capacity)
            limited_by = "front-end"
    else:
        state, slots = state_at_rate(state_at, most, rate)
        saturated, limited_by = False, "arrival-rate"
    ttft = (math.inf,) * 3 if saturated else ttft_statistics(state, w, terms.overhead)
    if not saturated and math.isfinite(capacity):
        # The server process is a queue of its own: Poisson arrivals, the same work for each request
        # (M/D/1: Pollaczek-Khinchine with no spread), its quantiles as the token budget's wait's.
        load = rate / capacity
        mean_wait = (queue_wait_factor(load, 1.0) - 1) / capacity
        waits = (mean_wait, wait_quantile(mean_wait, load, 0.5), wait_quantile(mean_wait, load, P90))
        ttft = (ttft[0] + waits[0], ttft[1] + waits[1], ttft[2] + waits[2])
        make = functools.partial(make, frontend_wait_s=mean_wait)
    served = min(rate, state.requests_per_s, capacity)
    tpot = state.tpot * terms.steps / terms.output  # a step's time over the tokens a step yields
    return _from_state(make, w, state, slots, limited_by, ttft, tpot, served, terms.output, saturated)


@record
class SteadyState:
    tpot: float
    requests_per_s: float  # per replica
    decode: StepCost
    full_prompt_service: Callable[[int], float]  # prefill time of a full prompt under this load
    # The same without the wait for the token budget (the residual step and first-token step kept), and
    # that wait's load and spread (queue_wait_factor): a TTFT quantile adds the wait's quantile to it.
    unqueued_service: Callable[[int], float] = lambda _: 0.0
    rho: float = 0.0
    spread: float = 1.0


def _static(d: Deployment, slots: float, prompt: float, longest: float, prompt_attention: float) -> SteadyState:
    """A batch of ``slots`` sequences prefills together, then decodes together, wave after wave, for the
    ``longest`` steps its longest answer takes: a sequence that ends sooner keeps its place (and its cache,
    padded) until the batch ends (transformers ``generate``: finished sequences take pad tokens)."""
    microbatches = d.microbatches(slots)
    passed = d.prompt_pass(prompt)
    prefill_time = 0.0
    if passed > 0:
        attention = prompt_attention * (passed / prompt) ** 2  # causal attention is quadratic in the tokens
        prefill = d.step(0, slots * passed / microbatches, 0, slots * attention / microbatches)
        # The microbatches follow one another through the stages, and the activations cross each stage
        # boundary once on the way (as in ``prefill_alone`` and the continuous pass).
        prefill_time = d.pass_time(prefill, microbatches)
    decode = d.step(slots / microbatches, 0, prompt + longest / 2, 0.0)
    tpot = d.cycle(decode, microbatches)
    requests_per_s = slots / (prefill_time + longest * tpot)
    first_step = d.first_token_step(slots, prompt)

    mean_attention = prompt_attention * (passed / prompt) ** 2  # quadratic in the tokens a pass computes

    def to_first_token(tagged: float) -> float:
        """A prompt of ``tagged`` tokens' first token: its batch's prefill, the others at the mean prompt, then
        the step that samples it. The prompt sits in one microbatch, beside the mean ones of its share; the
        other microbatches hold mean prompts (``Deployment.pass_beside``)."""
        own = d.prompt_pass(tagged)
        share = slots / microbatches  # sequences a microbatch holds
        beside = max(0.0, share - 1)
        if beside * passed + own <= 0:
            return first_step
        heavy = d.step(
            0,
            beside * passed + own,
            0,
            beside * mean_attention + d.prompt_attention(tagged) * (own / tagged) ** 2,
        )
        if microbatches <= 1:
            return d.pass_time(heavy, 1) + first_step
        other = d.step(0, share * passed, 0, share * mean_attention)
        return d.pass_beside(heavy, other, microbatches - 1) + first_step

    return SteadyState(tpot, requests_per_s, decode, to_first_token, to_first_token)


def _continuous(
    d: Deployment,
    slots: float,
    budget: int,
    prompt: float,
    output: float,
    prompt_attention: float,
    spread: float,
    context: float,
) -> SteadyState:
    """Each of ``slots`` running sequences cycles: prefill (chunks beside the others' decodes), then decode.

    The steady state is one number: the share phi of its cycle a slot spends decoding. Given phi, the
    other slots decode others x phi sequences beside the tagged one and, arriving at others x phi /
    (O x TPOT) requests per second, add others x phi x P / O prompt tokens to every decode step (within
    the token budget): TPOT follows, with no other unknown. While a slot prefills, its chunks share
    steps with the others' decodes and queue for the budget the others' prompts use, a share
    rho = others x phi x P / (O x room) of it: S = service x ``queue_wait_factor(rho, spread)``
    (Pollaczek-Khinchine; ``spread`` = E[P^2] / E[P]^2 of the prompt lengths, 1 when fixed). The cycle then implies
    a share O x TPOT / (S + O x TPOT); the steady state is the phi that implies itself. The implied share
    is at least 0 at phi = 0 and at most 1 at phi = 1, so a root lies in [0, 1]: bracketed and found by
    the Illinois variant of false position, to PHI_TOLERANCE (Little's law holds at the root exactly).
    """
    others = max(0.0, slots - 1)
    first_token = d.engine.first_token_from_decode_step  # the prompt's last token rides a decode step
    passed = d.prompt_pass(prompt)
    prompt_attention *= (passed / prompt) ** 2

    def decode_cycle(decoders: float, prefill: float, attention: float, chunk: float) -> tuple[float, StepCost]:
        """(TPOT, one microbatch's step) of ``decoders`` sequences decoding beside ``prefill`` prompt tokens."""
        microbatches = d.microbatches(decoders)
        step = d.step(
            decoders / microbatches, prefill / microbatches, context, attention / microbatches, chunk / microbatches
        )
        return d.cycle(step, microbatches), step

    def prefill_time(tokens: float, decoders: float, rho: float, queued: bool = True) -> float:
        if tokens <= 0:
            return 0.0
        if rho >= 1 and queued:
            return math.inf  # the others' prompts alone fill the budget: the queue never drains
        # A chunk of one prompt rides one microbatch whole, a batch the scheduler forms with its own token
        # budget (vLLM runs one per stage in flight): its room is what that batch's decodes leave.
        alongside = decoders / d.microbatches(decoders)
        passes = d.chunked_pass(
            tokens,
            max(1.0, budget - alongside),
            lambda chunk, attention: d.step(alongside, chunk, context, attention),
        )
        return passes * (queue_wait_factor(rho, spread) if queued else 1.0)

    def balance(phi: float) -> tuple[float, float, StepCost, float]:
        """(TPOT, prefill time S, the decode step, rho) when the other slots decode a share ``phi``."""
        decoding_others = others * phi
        with_tagged = 1 + decoding_others
        arriving = decoding_others * passed / output  # the others' prompt tokens per decode step
        chunk_tokens = min(arriving, max(0.0, budget - with_tagged))
        chunk_attention = chunk_tokens / passed * prompt_attention if passed > 0 else 0.0
        room = max(1.0, budget - with_tagged)
        chunk = _chunk(passed, room)
        tpot, decode = decode_cycle(with_tagged, chunk_tokens, chunk_attention, chunk)
        rho = arriving / max(1.0, budget - decoding_others)
        return tpot, prefill_time(passed, decoding_others, rho), decode, rho

    balances: dict[float, tuple[float, float, StepCost, float]] = {}

    def excess(phi: float) -> float:
        tpot, service, _, _ = balances[phi] = balance(phi)
        return output * tpot / (service + output * tpot) - phi

    phi = bracketed_root(excess, 0.0, 1.0)
    tpot, service, decode, rho = balances[phi]  # bracketed_root returns one of the shares it evaluated
    decoders = others * phi
    # A request that arrives while another slot keeps the replica busy waits for the step in flight to
    # end before the scheduler sees it; with no other slot the replica is idle when it arrives.
    room = max(1.0, budget - 1 - decoders)
    chunk = _chunk(passed, room) if passed > 0 else 0.0

    def carrying(tokens: float) -> float:  # a step of the decodes with ``tokens`` of whole chunks beside them
        return decode_cycle(1 + decoders, tokens, tokens / passed * prompt_attention, chunk)[1].seconds

    residual = min(1.0, others) * _residual_step(decode, decoders * passed / output, chunk, room, carrying)
    first = tpot if first_token else 0.0
    return SteadyState(
        tpot,
        slots / (service + output * tpot),
        decode,
        lambda tokens: residual + prefill_time(d.prompt_pass(tokens), decoders, rho) + first,
        lambda tokens: residual + prefill_time(d.prompt_pass(tokens), decoders, rho, queued=False) + first,
        rho,
        spread,
    )


def _residual_step(
    decode: StepCost, arriving: float, chunk: float, room: float, step: Callable[[float], float]
) -> float:
    """The mean time an arrival waits for the step in flight to end: E[S^2] / (2 E[S]) over the steps
    (the residual life of a renewal process at a random moment: Feller, vol. 2, XI.4), half a step where all
    are alike. The others' prompts arrive at ``arriving`` tokens a step and ride the steps in whole chunks of
    ``chunk`` tokens, as many as ``room`` holds, so a step carries the fewest whole chunks that average that
    (n or n + 1 of them; ``step``: the seconds of a step with that many prompt tokens), not the average
    itself: the steps carrying one are longer, and an arrival more often lands in one. Never below half the
    step with the tokens spread evenly (``decode``)."""
    if arriving <= 0 or chunk <= 0:
        return decode.seconds / 2
    chunks = arriving / chunk
    if chunks >= max(1, math.floor(room / chunk)):
        return decode.seconds / 2  # every step as full as the budget lets it be: equal steps
    whole = math.floor(chunks)
    share = chunks - whole
    fewer, more = step(whole * chunk), step((whole + 1) * chunk)
    mean = (1 - share) * fewer + share * more
    square = (1 - share) * fewer * fewer + share * more * more
    return max(decode.seconds, square / mean) / 2


def _chunk(passed: float, room: float) -> float:
    """The size a prompt of ``passed`` tokens is cut into where a step has ``room`` for it: equal whole chunks."""
    return passed / max(1, math.ceil(passed / room))
