"""Fine-tuning memory per GPU: which tensors are live in each phase (forward, backward, optimizer step).

The model follows what PyTorch and Hugging Face ``transformers``/``peft`` allocate, calibrated against
PyTorch's own accounting (shared/reference/groundtruth.md, MemTracker under FakeTensorMode):
- model states: weights, gradients and optimizer states by precision regime (Rajbhandari et al. 2020,
  "ZeRO", section 3 and 5 for the sharded forms);
- saved activations counted tensor by tensor for a pre-norm decoder layer with SDPA or eager
  attention (Korthikanti et al. 2022, arXiv 2205.05198, Table 2, adapted to RMSNorm/GQA/SwiGLU);
- the loss upcasts logits to fp32 and its backward holds two fp32 logit-sized gradients;
- ``foreach`` AdamW allocates one trainable-parameter-sized temporary at the step (torch.optim.AdamW).
The peak is the maximum over the phases, not the sum of everything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.architecture import Architecture

# precision -> (weight, gradient, optimizer-state, activation bytes, autocast keeps 16-bit weight copies)
REGIMES: dict[str, tuple[int, int, int, int, bool]] = {
    "bf16": (2, 2, 2, 2, False),
    "bf16-mixed": (4, 4, 4, 2, True),
    "fp16-mixed": (4, 4, 4, 2, True),
    "fp32": (4, 4, 4, 4, False),
}
# ZeRO paper convention for sharded mixed precision: 2-byte weights and gradients, K bytes of
# fp32 master weights + states per parameter (K = 12 for Adam) partitioned over data parallel ranks.
SHARDED_WEIGHT_BYTES = {"bf16": 2, "bf16-mixed": 2, "fp16-mixed": 2, "fp32": 4}
NF4_BYTES_PER_PARAM = 0.5 + 1 / 64 + 4 / (64 * 256)  # QLoRA NF4 + double quantization (Dettmers 2023)
NF4_BYTES_NO_DQ = 0.5 + 4 / 64
ADAM8BIT_BLOCK = 2048  # bitsandbytes block-wise 8-bit optimizer block (Dettmers et al. 2022)
FUSED_LOSS_CHUNK_TOKENS = 2048  # chunked/fused cross-entropy: one fp32 chunk of logits and its grad
LORA_TARGETS_ALL = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class TrainingSetup:
    """Everything the fine-tuning memory depends on (defaults resolved by gpuplan.spec)."""

    architecture: Architecture
    method: str = "full"  # full | lora | qlora
    precision: str = "bf16-mixed"
    optimizer: str = "adamw"
    model_dtype_bytes: int = 2  # frozen base of lora (model.dtype)
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = LORA_TARGETS_ALL
    lora_bytes: int = 4  # peft keeps adapters in fp32
    micro_batch: int = 1
    seq_len: int = 2048
    gradient_accumulation: int = 1
    checkpointing: bool = False
    attention: str = "flash"
    fused_loss: bool = False
    sharding: str = "none"
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    gpus: int = 1
    double_quant: bool = True

    @property
    def data_parallel(self) -> int:
        return max(1, self.gpus // (self.tensor_parallel * self.pipeline_parallel))

    @property
    def tokens(self) -> int:
        return self.micro_batch * self.seq_len

    @property
    def is_adapter(self) -> bool:
        return self.method in ("lora", "qlora")


@dataclass(frozen=True)
class TrainingMemory:
    """Per-GPU bytes. ``phases`` maps each phase to its live tensors; the peak is their maximum."""

    params: int
    trainable_params: int
    phases: dict[str, dict[str, int]]
    overhead: int

    @property
    def phase_totals(self) -> dict[str, int]:
        return {name: sum(parts.values()) for name, parts in self.phases.items()}

    @property
    def peak_phase(self) -> str:
        totals = self.phase_totals
        return max(totals, key=lambda name: totals[name])

    @property
    def tensor_peak(self) -> int:
        return max(self.phase_totals.values())

    @property
    def per_gpu(self) -> int:
        return self.tensor_peak + self.overhead

    @property
    def breakdown(self) -> dict[str, int]:
        """The peak phase's tensors plus the framework overhead; sums to ``per_gpu``."""
        return {**self.phases[self.peak_phase], "framework_overhead": self.overhead}


# -- parameters ---------------------------------------------------------------------------------


def adapter_params_per_layer(arch: Architecture, rank: int, targets: tuple[str, ...]) -> int:
    """LoRA adds r x (d_in + d_out) per adapted matrix (Hu et al. 2021)."""
    h, i = arch.hidden, arch.intermediate
    shapes = {
        "q_proj": (h, arch.q_width),
        "k_proj": (h, arch.kv_width),
        "v_proj": (h, arch.kv_width),
        "o_proj": (arch.q_width, h),
        "gate_proj": (h, i) if arch.mlp == "gated" else (0, 0),
        "up_proj": (h, i),
        "down_proj": (i, h),
    }
    return sum(rank * (shapes[name][0] + shapes[name][1]) for name in targets if shapes[name][0])


def trainable_params(setup: TrainingSetup) -> int:
    arch = setup.architecture
    if not setup.is_adapter:
        return arch.params
    return arch.layers * adapter_params_per_layer(arch, setup.lora_rank, setup.lora_targets)


def _shard(setup: TrainingSetup) -> tuple[float, float]:
    """Fractions of (layer parameters, embedding parameters) held by one GPU under TP and PP."""
    layers_per_stage = math.ceil(setup.architecture.layers / setup.pipeline_parallel)
    layer_fraction = layers_per_stage / setup.architecture.layers / setup.tensor_parallel
    return layer_fraction, 1 / setup.tensor_parallel


def _local_params(setup: TrainingSetup, total_layer_params: int, embedding_params: int) -> float:
    layer_fraction, embed_fraction = _shard(setup)
    # The most loaded pipeline stage holds the embedding (first) or the LM head (last), not both.
    edge = embedding_params if setup.pipeline_parallel == 1 else embedding_params / 2
    return total_layer_params * layer_fraction + edge * embed_fraction


# -- activations --------------------------------------------------------------------------------


def _norm_bytes(setup: TrainingSetup, act: int) -> int:
    """RMSNorm upcasts its input to fp32 and saves it; a trainable weight also saves its product."""
    h = setup.architecture.hidden
    return 4 * h + (2 * act * h if not setup.is_adapter else 0)


def _attention_bytes(setup: TrainingSetup, act: int, seq: int) -> float:
    """Per token: what SDPA (or eager softmax attention) keeps for backward."""
    arch, t = setup.architecture, setup.tensor_parallel
    q, kv = arch.q_width / t, max(1, arch.n_kv // t) * arch.d_head
    heads = arch.heads / t
    if setup.attention == "eager":
        probabilities = (4 + (act if act != 4 else 0)) * heads * seq  # fp32 softmax + its cast
        return act * 4 * q + probabilities  # q, repeated k and v, o_proj input
    return act * (2 * q + 2 * kv) + 4 * heads  # q, k, v, output (= o_proj input), logsumexp


def _mlp_bytes(setup: TrainingSetup, act: int) -> float:
    arch, t = setup.architecture, setup.tensor_parallel
    frozen_down = setup.is_adapter and "down_proj" not in setup.lora_targets
    if arch.is_moe:
        # Per routed expert: its gated MLP tensors plus the gathered copy of the token and its weighted
        # output (2h each); the router keeps fp32 logits, softmax and top-k weights (3 x 4 B per expert).
        # Together within 0.1% of the mixtral-8x7b ground-truth row (groundtruth.md).
        width = arch.expert_width / t
        per_expert = (4 * act * width if not frozen_down else 3 * act * width) + 2 * act * arch.hidden
        return arch.experts_per_token * per_expert + arch.shared_experts * 4 * act * width + 12 * arch.experts
    width = arch.intermediate / t
    if arch.mlp == "gated":  # gate, up, silu(gate), and the down_proj input
        return (3 if frozen_down else 4) * act * width
    return (1 if frozen_down else 2) * act * width


def _lora_input_bytes(setup: TrainingSetup, act: int) -> float:
    """peft casts each adapted layer's input to the adapter dtype and saves it (plus the r-dim output).

    Without a cast the adapters save their input itself: once per distinct input; the o_proj input
    (the attention output) and the down_proj input (counted in the MLP) are saved anyway.
    """
    if not setup.is_adapter:
        return 0
    arch = setup.architecture
    groups = {
        "q_proj": "norm",
        "k_proj": "norm",
        "v_proj": "norm",
        "o_proj": "attention",
        "gate_proj": "norm2",
        "up_proj": "norm2",
        "down_proj": "mlp",
    }
    widths = {"norm": arch.hidden, "norm2": arch.hidden, "attention": arch.q_width, "mlp": arch.intermediate}
    total = float(setup.lora_bytes * setup.lora_rank * len(setup.lora_targets))
    if setup.lora_bytes != act:
        total += sum(setup.lora_bytes * widths[groups[name]] for name in setup.lora_targets)
    else:
        inputs = {groups[name] for name in setup.lora_targets} - {"attention", "mlp"}
        total += sum(act * widths[group] for group in inputs)
    return total / setup.tensor_parallel


def _autocast_norm_bytes(setup: TrainingSetup) -> int:
    """Under autocast the residual stream is fp32: each norm saves x and x_hat in fp32, and every
    linear that reads the norm's output saves its own bf16 cast (autocast caches weights, not inputs)."""
    arch = setup.architecture
    readers = 3 + (2 if arch.mlp == "gated" else 1)
    return 2 * (4 * arch.hidden + 4 * arch.hidden) + readers * 2 * arch.hidden


def layer_activation_bytes_per_token(setup: TrainingSetup) -> float:
    """Bytes one token saves in one decoder layer for backward (no checkpointing)."""
    _, _, _, act, autocast = REGIMES[setup.precision]
    norms = (
        _autocast_norm_bytes(setup)
        if autocast and not setup.is_adapter
        else (setup.architecture.norms_per_layer * _norm_bytes(setup, act))
    )
    return norms + _attention_bytes(setup, act, setup.seq_len) + _mlp_bytes(setup, act) + _lora_input_bytes(setup, act)


def logits_bytes(setup: TrainingSetup) -> tuple[float, float, float]:
    """(returned logits, fp32 log-softmax saved by the loss, fp32 upcast transient) for the micro-batch."""
    _, _, _, act, _ = REGIMES[setup.precision]
    vocab = setup.architecture.vocab / setup.tensor_parallel
    if setup.fused_loss:
        return 0.0, 0.0, 2 * 4 * vocab * min(setup.tokens, FUSED_LOSS_CHUNK_TOKENS)
    tokens = setup.tokens
    return act * vocab * tokens, 4 * vocab * tokens, (4 * vocab * tokens if act != 4 else 0.0)


# -- the phases ---------------------------------------------------------------------------------


def _optimizer(setup: TrainingSetup, trainable_local: float, state_bytes: int) -> tuple[float, float]:
    """(optimizer states, step temporaries) in bytes."""
    arch = setup.architecture
    if setup.optimizer == "adamw":
        return 2 * state_bytes * trainable_local, state_bytes * trainable_local
    if setup.optimizer == "adamw-fused":
        return 2 * state_bytes * trainable_local, 0.0
    if setup.optimizer == "adamw-8bit":
        return trainable_local * (2 + 2 * 4 / ADAM8BIT_BLOCK), 0.0
    if setup.optimizer == "sgd":
        return state_bytes * trainable_local, 0.0
    # Adafactor (Shazeer & Stern 2018): factored second moment, rows + columns per matrix, fp32;
    # HF's implementation updates one parameter at a time with two fp32 temporaries of its size.
    fraction = trainable_local / max(1, trainable_params(setup))
    dims = arch.layers * (3 * arch.hidden + arch.q_width + 2 * arch.kv_width + 3 * (arch.hidden + arch.intermediate))
    states = 4 * (dims + arch.vocab + arch.hidden) * fraction
    largest = arch.largest_linear_params() if not setup.is_adapter else arch.hidden * setup.lora_rank
    return states, 2 * 4 * largest


@dataclass(frozen=True)
class _States:
    """Per-GPU model states: what lives for the whole step, and what the step itself adds."""

    weights: float
    gradients: float
    optimizer: float
    step_temporaries: float
    autocast_copies: float
    gathered: float


@dataclass(frozen=True)
class _Activations:
    """Per-GPU activation memory of one micro-batch."""

    saved: float  # live at the end of forward, logits included
    returned_logits: float  # held by the caller until it drops the output
    per_layer: float  # one decoder layer's saved tensors (recomputed ones with checkpointing)
    checkpoint_inputs: float  # one layer's input, kept per layer under checkpointing
    forward_temporaries: float
    loss_gradients: float  # the loss backward's two fp32 logit-sized gradients
    layer_backward_temporaries: float


def _model_states(setup: TrainingSetup) -> _States:
    arch = setup.architecture
    weight_b, grad_b, state_b, _, autocast = REGIMES[setup.precision]
    n = setup.data_parallel
    sharding = setup.sharding if n > 1 else "none"
    layer_params = sum(arch.layer_params(index) for index in range(arch.layers))
    edge_params = arch.embedding_params() + arch.lm_head_params() + arch.norm_params()  # + final norm
    local_all = _local_params(setup, layer_params, edge_params)
    layer_fraction, _ = _shard(setup)
    if setup.is_adapter:
        trainable_local = trainable_params(setup) * layer_fraction
        if setup.method == "qlora":
            nf4 = NF4_BYTES_PER_PARAM if setup.double_quant else NF4_BYTES_NO_DQ
            quantized = arch.linear_params() * layer_fraction
            base = quantized * nf4 + (local_all - quantized) * 2  # embeddings, LM head, norms stay 16-bit
        else:
            base = local_all * setup.model_dtype_bytes
        weights = base + trainable_local * setup.lora_bytes
        grads = trainable_local * setup.lora_bytes
        state_bytes = setup.lora_bytes
        # An fp32 frozen base under autocast is cast to bf16 per linear, and the casts live until backward.
        copies = 2 * arch.linear_params() * layer_fraction if autocast and setup.model_dtype_bytes == 4 else 0.0
    else:
        trainable_local = local_all
        if sharding != "none":
            weight_b = grad_b = SHARDED_WEIGHT_BYTES[setup.precision]
        weights, grads, state_bytes = local_all * weight_b, local_all * grad_b, state_b
        tied_head = arch.vocab * arch.hidden if arch.tie_embeddings else 0
        linears = arch.linear_params() + arch.lm_head_params() + tied_head
        copies = 2 * linears * layer_fraction if autocast and sharding == "none" else 0.0
    optimizer, step_temp = _optimizer(setup, trainable_local, state_bytes)
    gathered = 0.0
    if sharding != "none" and not setup.is_adapter:
        master = 4 * trainable_local if setup.precision in ("bf16-mixed", "fp16-mixed") else 0.0
        optimizer, step_temp = (optimizer + master) / n, step_temp / n
        if sharding in ("zero2", "zero3", "fsdp"):
            grads /= n
    if sharding in ("zero3", "fsdp"):
        unit = 2 * max(arch.layer_params(index) for index in range(arch.layers)) * layer_fraction
        weights /= n
        # The current and the prefetched unit gathered in bf16, and the current unit's full gradient.
        gathered = 2 * unit + (0.0 if setup.is_adapter else unit)
    return _States(weights, grads, optimizer, step_temp, copies, gathered)


def _activations(setup: TrainingSetup) -> _Activations:
    arch = setup.architecture
    _, _, _, act_b, autocast = REGIMES[setup.precision]
    tokens = setup.tokens
    tp = setup.tensor_parallel
    per_layer = layer_activation_bytes_per_token(setup) * tokens
    returned, log_softmax, upcast = logits_bytes(setup)
    final_norm = (4 * arch.hidden + (2 * act_b * arch.hidden if not setup.is_adapter else 0)) * tokens
    checkpoint_inputs = (4 if autocast and not setup.is_adapter else act_b) * arch.hidden * tokens
    # 1F1B pipelining keeps L layers' worth of activations in flight on the first stage, whatever PP is.
    layers = checkpoint_inputs * arch.layers if setup.checkpointing else per_layer * arch.layers
    scores = arch.heads / tp * setup.seq_len**2 * setup.micro_batch
    forward = upcast
    if setup.attention == "eager":
        # Beyond what is saved: the bf16 masked scores (2 B); under checkpointing nothing is saved, so
        # masked scores, their fp32 upcast and the fp32 softmax coexist (10 B), as in the HF prefill.
        forward = max(forward, (10 if setup.checkpointing else 2) * scores)
    # bitsandbytes dequantizes one NF4 linear at a time to bf16 (embeddings and LM head are not NF4).
    widest = arch.hidden * max(arch.expert_width if arch.is_moe else arch.intermediate, arch.q_width)
    dequant = 2 * widest / tp if setup.method == "qlora" else 0.0
    mlp_width = (arch.expert_width * arch.experts_per_token if arch.is_moe else arch.intermediate) / tp
    # A layer's backward holds the gradients of the down_proj input, of act and up, and of gate at once
    # (3 x i per token; 2 for a plain MLP): 0.66 GiB at 8B, 1x8192, matching the ground truth.
    layer_backward = (3 if arch.mlp == "gated" else 2) * act_b * mlp_width * tokens
    if setup.attention == "eager":
        layer_backward = max(layer_backward, 6 * scores)  # bf16 + fp32 score gradients
    loss_gradients = 0.0 if setup.fused_loss else 2 * 4 * (arch.vocab / tp) * tokens
    return _Activations(
        saved=layers + final_norm + returned + log_softmax,
        returned_logits=returned,
        per_layer=per_layer,
        checkpoint_inputs=checkpoint_inputs,
        forward_temporaries=max(forward, dequant),
        loss_gradients=loss_gradients,
        layer_backward_temporaries=layer_backward + dequant,
    )


def estimate_training(setup: TrainingSetup, overhead: int) -> TrainingMemory:
    """Per-GPU memory of one steady-state step; ``overhead`` is the documented framework constant."""
    arch = setup.architecture
    states = _model_states(setup)
    acts = _activations(setup)
    grads = states.gradients
    accumulating = grads if setup.gradient_accumulation > 1 else 0.0  # grads persist across micro-batches
    if setup.is_adapter:
        grads_before_first_layer = grads
    else:
        layer_params = sum(arch.layer_params(index) for index in range(arch.layers))
        total = layer_params + arch.embedding_params() + arch.lm_head_params()
        first_layer_and_embedding = (arch.layer_params(0) + arch.embedding_params()) / total
        grads_before_first_layer = grads * (1 - first_layer_and_embedding)
    fixed = {"weights": states.weights, "optimizer": states.optimizer, "gathered_parameters": states.gathered}
    forward = {
        **fixed,
        "gradients": accumulating,
        "autocast_weight_copies": states.autocast_copies,
        "activations": acts.saved,
        "temporaries": acts.forward_temporaries,
    }
    # Backward peaks at its start (the caller has dropped the returned logits; the loss gradients are
    # live), while the first layer is processed (most gradients, one layer's activations), or at its end.
    start = {
        **fixed,
        "gradients": accumulating,
        "autocast_weight_copies": states.autocast_copies,
        "activations": acts.saved - acts.returned_logits,
        "temporaries": acts.loss_gradients,
    }
    middle = {
        **fixed,
        "gradients": max(accumulating, grads_before_first_layer),
        "autocast_weight_copies": states.autocast_copies / arch.layers,
        "activations": acts.per_layer + (acts.checkpoint_inputs if setup.checkpointing else 0.0),
        "temporaries": acts.layer_backward_temporaries,
    }
    end = {**fixed, "gradients": grads}
    backward = max((start, middle, end), key=lambda parts: sum(parts.values()))
    step = {**fixed, "gradients": grads, "optimizer_step_temporaries": states.step_temporaries}
    phases = {"forward": _ints(forward), "backward": _ints(backward), "optimizer_step": _ints(step)}
    return TrainingMemory(arch.params, trainable_params(setup), phases, overhead)


def _ints(parts: dict[str, float]) -> dict[str, int]:
    return {name: math.ceil(value) for name, value in parts.items() if value}
