"""Fine-tuning memory per GPU: which tensors are live in each phase (forward, backward, optimizer step).

The model follows what PyTorch and Hugging Face ``transformers``/``peft`` allocate, calibrated against
PyTorch's own accounting (MemTracker under FakeTensorMode; the ground-truth rows of the accuracy
benchmark, ``benchmarks/data/``):
- model states: weights, gradients and optimizer states by precision regime (Rajbhandari et al. 2020,
  "ZeRO", sections 3 and 5 for the sharded forms; ZeRO-Offload, Ren et al. 2021, for offload);
- saved activations counted tensor by tensor for a pre-norm decoder layer with SDPA or eager
  attention (Korthikanti et al. 2022, arXiv 2205.05198, Table 2, adapted to RMSNorm/GQA/SwiGLU), with
  full or selective recomputation, sequence parallelism and activation offloading;
- the loss upcasts logits to fp32 and its backward holds two fp32 logit-sized gradients while the
  caller still holds the returned logits;
- ``foreach`` AdamW allocates one trainable-parameter-sized temporary at the step (torch.optim.AdamW);
- hybrid models sum their layers by kind: LoRA targets and MLP tensors only where a layer has them,
  Mamba-2 layers as mamba_ssm's fused ``MambaSplitConv1dScanCombinedFn`` saves them, Gated DeltaNet layers
  by their convolution, kernel and gated-norm tensors (the FLA kernel's own saved chunk intermediates
  are not counted: an assumption every such estimate states).
The peak is the maximum over the phases, not the sum of everything. Bytes moved off the GPU (offload)
are reported as host (or NVMe) bytes, never dropped.
"""

from __future__ import annotations

import functools
import math

from gpuplan.architecture import Architecture
from gpuplan.records import record
from gpuplan.releases import parse_version
from gpuplan.spec import Finetune
from gpuplan.units import DTYPE_BYTES

# precision -> (weight, gradient, optimizer-state, activation bytes, autocast keeps 16-bit weight copies)
REGIMES: dict[str, tuple[int, int, int, int, bool]] = {
    "bf16": (2, 2, 2, 2, False),
    "bf16-mixed": (4, 4, 4, 2, True),
    "fp16-mixed": (4, 4, 4, 2, True),
    # Transformer Engine FP8 (NVIDIA TE docs, "Using FP8 with Transformer Engine"): fp32 master weights,
    # gradients and Adam states as bf16-mixed; GEMMs run on fp8 casts. The cached fp8 weight and its
    # transpose (Hopper's FP8 GEMMs need both layouts) take the 2 B/linear parameter the bf16 autocast
    # copies take; activations are counted at 2 B (TE saves some GEMM inputs in fp8: an overestimate).
    "fp8-mixed": (4, 4, 4, 2, True),
    "fp32": (4, 4, 4, 4, False),
}
MIXED = ("bf16-mixed", "fp16-mixed", "fp8-mixed")


def has_master_weights(precision: str) -> bool:
    """Mixed regimes keep fp32 master weights beside the 16-bit (or fp8) compute copies."""
    return precision in MIXED


# ZeRO paper convention for mixed precision without autocast (and for sharded mixed precision):
# 2-byte working weights and gradients, fp32 master weights + states in the optimizer.
SHARDED_WEIGHT_BYTES = {"bf16": 2, "bf16-mixed": 2, "fp16-mixed": 2, "fp8-mixed": 2, "fp32": 4}
NF4_PACKED_BYTES = 0.5  # two 4-bit codes a byte: the Params4bit data, what FSDP or ZeRO-3 shards and offloads
# The quantization constants (Dettmers 2023): an fp32 absmax per block of 64, or, double-quantized, an 8-bit
# one and an fp32 constant per 256 of those. bitsandbytes keeps them in the parameter's quant_state.
NF4_BYTES_PER_PARAM = NF4_PACKED_BYTES + 1 / 64 + 4 / (64 * 256)
NF4_BYTES_NO_DQ = NF4_PACKED_BYTES + 4 / 64
ADAM8BIT_BLOCK = 2048  # bitsandbytes block-wise 8-bit optimizer block (Dettmers et al. 2022)
FUSED_LOSS_CHUNK_TOKENS = 2048  # chunked/fused cross-entropy: one fp32 chunk of logits and its grad
OFFLOADED_LAYERS_ON_GPU = 2  # activation offloading keeps the layer in use and the one prefetched


@record
class TrainingSetup:
    """A fine-tuning job as the memory and speed models read it: the resolved job (``gpuplan.spec.Finetune``,
    every default the schema's, the one record of the job's settings) on its model. The planner varies
    the job (``evolve(job, ...)``), never a copy of its fields."""

    architecture: Architecture
    job: Finetune
    model_dtype_bytes: int  # the frozen base of LoRA and QLoRA's 16-bit parts (model.dtype)

    @property
    def tensor_parallel(self) -> int:
        return self.job.hardware.tensor_parallel

    @property
    def pipeline_parallel(self) -> int:
        return self.job.hardware.pipeline_parallel

    @property
    def stage_layers(self) -> int:
        """Decoder layers on the most loaded pipeline stage (every stage but the last takes one of a remainder:
        ``Architecture.stage_layers``)."""
        return math.ceil(self.architecture.layers / self.pipeline_parallel)

    @property
    def gpus(self) -> int:
        return self.job.hardware.count

    @property
    def data_parallel(self) -> int:
        return self.job.hardware.replicas

    @property
    def running_sharding(self) -> str:
        """The sharding that runs: the declared one over several data-parallel ranks, and DeepSpeed's ZeRO on one
        too (``runs_deepspeed_zero``); over one rank FSDP is taken as nothing ("none")."""
        return self.job.sharding if self.data_parallel > 1 or runs_deepspeed_zero(self) else "none"

    @property
    def sixteen_bit_working_weights(self) -> bool:
        """Whether a mixed-precision full fine-tune keeps 16-bit working weights and gradients beside fp32 master
        weights in its optimizer (``training_memory._model_states``): without autocast, and wherever it is sharded
        (DeepSpeed casts the model to 16 bits; gpuplan counts FSDP's working copies so too)."""
        if self.job.precision not in MIXED:
            return False
        return not self.job.autocast or (not self.is_adapter and self.running_sharding != "none")

    @property
    def tokens(self) -> int:
        """Tokens of one micro-batch on one data-parallel rank."""
        return self.job.micro_batch * self.job.seq_len

    @property
    def is_adapter(self) -> bool:
        return self.job.method in ("lora", "qlora")

    @property
    def lora_bytes(self) -> int:
        return DTYPE_BYTES[self.job.lora_dtype]

    @property
    def uses_autocast(self) -> bool:
        """fp32 weights run under torch.autocast: fp32 residual stream and cached 16-bit weight copies."""
        return self.job.precision in MIXED and self.job.autocast

    @property
    def residual_bytes(self) -> int:
        """Bytes per element of the residual stream: fp32 when autocast runs over fp32 weights, and in a QLoRA
        model prepared for k-bit training with its norms left fp32 (their fp32 outputs make it fp32)."""
        fp32_weights = not self.is_adapter or self.model_dtype_bytes == 4
        if self.fp32_norms:
            return 4
        return 4 if self.uses_autocast and fp32_weights else self.activation_bytes

    @property
    def fp32_norms(self) -> bool:
        """Whether a QLoRA preparation left the norms fp32 (peft, trl; Axolotl casts them back): their fp32
        outputs make the residual stream, the MLP and each 4-bit linear's input fp32."""
        return self.kbit_preparation in ("peft", "trl")

    @property
    def fp32_compute(self) -> bool:
        """Whether attention and the LM head compute in fp32 too: PEFT's preparation without autocast, where the
        4-bit q, k and v projections return their fp32 input's dtype (``Linear4bit.forward``:
        ``out.to(inp_dtype)``), nothing casts them down before SDPA, and the fp32 head returns fp32 logits;
        TRL trains under autocast, which runs SDPA and the head in 16 bits."""
        return self.kbit_preparation == "peft" and not self.uses_autocast

    @property
    def shards_parameters(self) -> bool:
        """Whether FSDP or ZeRO-3 shards the parameters over several data-parallel ranks."""
        return self.data_parallel > 1 and self.job.sharding in ("zero3", "fsdp")

    @property
    def nf4_saves_inputs(self) -> bool:
        """Whether each 4-bit linear saves its input for backward: bitsandbytes before 0.43.2 did
        (``MatMul4Bit.forward``: ``ctx.tensors = (A, B)``); from 0.43.2 it keeps ``(None, B)`` (#1270,
        "delete useless buffered activation": a frozen weight's input gradient needs the weight only), as
        torchao's ``linear_nf4`` keeps the weight alone."""
        version = self.job.bitsandbytes_version
        return self.job.method == "qlora" and version is not None and parse_version(version) < (0, 43, 2)

    @property
    def kbit_preparation(self) -> str:
        """What the training stack did to a QLoRA model's unquantized weights (``finetune.kbit_preparation``):
        none, peft (all fp32), trl (TRL 0.7-0.24: norms fp32, the embeddings and LM head back in bf16) or
        axolotl (all back in the model dtype), as it holds for this layout.

        TRL and Axolotl skip their preparation when FSDP or ZeRO-3 shards the 4-bit weights (TRL
        ``prepare_peft_model``: ``is_sharded_qlora``, the weights are on the CPU or meta device at load;
        Axolotl ``skip_prepare_model_for_kbit_training`` under ``qlora_fsdp``). TRL casts the embeddings and
        LM head back only when it trains in bf16 (``peft_module_casting_to_bf16`` under ``args.bf16``): in
        another precision they stay fp32, as PEFT's ``prepare_model_for_kbit_training`` leaves them."""
        job = self.job
        if job.method != "qlora":
            return "none"
        if job.kbit_preparation in ("trl", "axolotl") and self.shards_parameters:
            return "none"
        if job.kbit_preparation == "trl" and job.precision not in ("bf16", "bf16-mixed"):
            return "peft"
        return job.kbit_preparation

    @property
    def activation_bytes(self) -> int:
        return REGIMES[self.job.precision][3]

    @property
    def sequence_shards(self) -> int:
        """Ranks the norm/residual regions are split over (sequence parallelism), else 1."""
        return self.tensor_parallel if self.job.sequence_parallel else 1


@record
class TrainingMemory:
    """Per-GPU bytes. ``phases`` maps each phase to its live tensors; the tensor peak is their maximum.

    Three figures, each the one above plus what it adds: ``allocated`` (the live tensors at the peak, what
    ``torch.cuda.max_memory_allocated()`` reports), ``reserved`` (plus ``allocator_cache``, the blocks the
    caching allocator keeps above that peak: ``max_memory_reserved()``) and ``per_gpu``, the device figure
    (plus ``overhead``, the memory outside the allocator: CUDA context, NCCL), which is what the GPU shows
    and what the fit verdict, the headroom rules and the planner judge.
    ``host`` and ``nvme`` are the bytes each GPU's process keeps off the GPU (offload), per GPU.
    """

    params: int
    trainable_params: int
    phases: dict[str, dict[str, int]]
    overhead: int
    host: int = 0
    nvme: int = 0
    allocator_cache: int = 0

    @functools.cached_property
    def phase_totals(self) -> dict[str, int]:
        """Bytes each phase holds per GPU with the memory outside the allocator (there in every phase); the
        allocator's cache is the step's, not a phase's, and is left out."""
        return {name: sum(parts.values()) + self.overhead for name, parts in self.phases.items()}

    @property
    def peak_phase(self) -> str:
        totals = self.phase_totals
        return max(totals, key=lambda name: totals[name])

    @property
    def allocated(self) -> int:
        """The tensor peak: what PyTorch's allocator counts as allocated (max_memory_allocated)."""
        return max(self.phase_totals.values()) - self.overhead

    @property
    def step_allocated(self) -> int:
        """The tensor peak of the training steps alone: ``allocated`` without the loading phase (a QLoRA
        preparation's copies), what a counter that starts with training sees."""
        return max(total for name, total in self.phase_totals.items() if name != "loading") - self.overhead

    @property
    def reserved(self) -> int:
        """The allocator's segments at their peak (max_memory_reserved)."""
        return self.allocated + self.allocator_cache

    @property
    def per_gpu(self) -> int:
        """The device figure: the allocator's segments plus the memory outside it."""
        return self.reserved + self.overhead

    @property
    def breakdown(self) -> dict[str, int]:
        """The peak phase's tensors, the allocator's cache and the memory outside it; sums to ``per_gpu``."""
        return {
            **self.phases[self.peak_phase],
            "allocator_cache": self.allocator_cache,
            "framework_overhead": self.overhead,
        }


# -- parameters ---------------------------------------------------------------------------------


def adapted_shapes(arch: Architecture) -> dict[str, tuple[int, int]]:
    """(in, out) features of each linear LoRA can adapt (experts: one expert's matrices)."""
    h = arch.hidden
    width = arch.expert_width if arch.is_moe else arch.intermediate
    return {
        "q_proj": (h, arch.q_width * (2 if arch.attention_gate else 1)),
        "k_proj": (h, arch.kv_width),
        "v_proj": (h, arch.kv_width),
        "o_proj": (arch.q_width, h),
        "gate_proj": (h, width) if arch.mlp == "gated" else (0, 0),
        "up_proj": (h, width),
        "down_proj": (width, h),
    }


@functools.lru_cache(maxsize=256)  # the same few adapters in every estimate of a planner's search
def adapter_params_per_layer(arch: Architecture, rank: int, targets: tuple[str, ...], variant: str = "lora") -> int:
    """LoRA adds r x (d_in + d_out) per adapted matrix (Hu et al. 2021); DoRA adds a magnitude per output
    (Liu et al. 2024, peft ``DoraLinearLayer``)."""
    shapes = adapted_shapes(arch)
    adapted = [shapes[name] for name in targets if shapes[name][0]]
    magnitude = sum(out for _, out in adapted) if variant == "dora" else 0
    return sum(rank * (d_in + d_out) for d_in, d_out in adapted) + magnitude


_ATTENTION_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
_MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")


def matrix_copies(arch: Architecture, name: str) -> int:
    """How many of ``adapted_shapes``' matrix ``name`` a decoder layer holds: one per expert for an MoE's
    MLP matrices, else one."""
    return arch.experts if arch.is_moe and name in _MLP_TARGETS else 1


@functools.lru_cache(maxsize=64)
def layer_kinds(arch: Architecture) -> tuple[tuple[str, bool, int], ...]:
    """(token mixer, has an MLP, how many layers) of each kind of layer the model has."""
    counts: dict[tuple[str, bool], int] = {}
    for index in range(arch.layers):
        key = (arch.mixer(index), arch.has_mlp(index))
        counts[key] = counts.get(key, 0) + 1
    return tuple((mixer, mlp, count) for (mixer, mlp), count in counts.items())


def layer_targets(targets: tuple[str, ...], mixer: str, mlp: bool) -> tuple[str, ...]:
    """The LoRA targets a layer has: peft matches module names, so q/k/v/o_proj only in attention layers
    and the MLP projections only in layers with an MLP (none in linear-attention or Mamba mixers)."""
    return tuple(
        name for name in targets if (name in _ATTENTION_TARGETS and mixer in "AS") or (name in _MLP_TARGETS and mlp)
    )


def trainable_params(setup: TrainingSetup) -> int:
    arch = setup.architecture
    if not setup.is_adapter:
        return arch.params
    job = setup.job
    if not arch.hybrid:
        return arch.layers * adapter_params_per_layer(arch, job.lora_rank, job.lora_targets, job.lora_variant)
    return sum(
        count
        * adapter_params_per_layer(arch, job.lora_rank, layer_targets(job.lora_targets, mixer, mlp), job.lora_variant)
        for mixer, mlp, count in layer_kinds(arch)
    )


def stage_fraction(setup: TrainingSetup) -> float:
    """Share of the decoder layers held by the most loaded pipeline stage, per tensor-parallel rank."""
    return setup.stage_layers / setup.architecture.layers / setup.tensor_parallel


def stage_edges(setup: TrainingSetup) -> tuple[bool, bool]:
    """Whether the most loaded GPU holds the embedding (with any vision tower) and whether it holds the LM
    head and final norm: both when there is one stage; else the heavier edge's stage, the last on a tie."""
    if setup.pipeline_parallel == 1:
        return True, True
    arch = setup.architecture
    first = arch.embedding_params() + arch.vision_params
    last = arch.lm_head_params() + arch.norm_params()
    return first > last, last >= first


def local_params(setup: TrainingSetup) -> float:
    """Parameters on the most loaded GPU: its stage's layers plus the edges ``stage_edges`` gives it."""
    arch = setup.architecture
    layers = arch.total_layer_params * stage_fraction(setup)
    holds_embedding, holds_head = stage_edges(setup)
    first = arch.embedding_params() + arch.vision_params if holds_embedding else 0
    last = arch.lm_head_params() + arch.norm_params() if holds_head else 0
    return layers + (first + last) / setup.tensor_parallel


def gradient_shares(setup: TrainingSetup) -> tuple[float, float]:
    """Of this GPU's gradients (``local_params``): the share made when its last layer's backward runs, the
    first decoder layer backward runs (that layer's, and the LM head's where the GPU holds it: a tied head's
    gradient waits in the shared weight's input buffer until the embedding's backward adds its own), and the
    share made before its first layer's (all but that layer's and an untied embedding's)."""
    arch, tp = setup.architecture, setup.tensor_parallel
    holds_embedding, holds_head = stage_edges(setup)
    one_stage = setup.pipeline_parallel == 1
    head = arch.lm_head_params() or (arch.embedding_params() if arch.tie_embeddings and one_stage else 0)
    local = local_params(setup)
    at_last = (arch.layer_params(arch.layers - 1) + (head if holds_head else 0)) / tp / local
    embedding = arch.embedding_params() if holds_embedding and not arch.tie_embeddings else 0
    before_first = 1 - (arch.layer_params(0) + embedding) / tp / local
    return min(1.0, at_last), max(0.0, before_first)


# -- activations --------------------------------------------------------------------------------


def norm_bytes(setup: TrainingSetup, act: int) -> float:
    """RMSNorm upcasts its input to fp32 and saves it; LayerNorm saves its input as it is. A trainable
    weight also saves the normalised output. Sequence parallelism splits the region over TP ranks."""
    arch = setup.architecture
    h = arch.hidden
    saved = (4 if arch.norm == "rms" else setup.residual_bytes) * h + (2 * act * h if not setup.is_adapter else 0)
    return saved / setup.sequence_shards


def _attention_bytes(setup: TrainingSetup, act: int, seq: int) -> float:
    """Per token: what SDPA (or eager softmax attention) keeps for backward.

    A fused QKV projection hands SDPA a view of V into its output, so the whole q/k/v output stays
    alive beside the rotated copies of q and k (GPT-NeoX, Phi-3, Falcon, litgpt). A gated attention
    (Qwen3NextAttention: ``attn_output * sigmoid(gate)``) also keeps the gate and the gated product, the
    o_proj input apart from the attention output.
    """
    arch, t = setup.architecture, setup.tensor_parallel
    q, kv = arch.q_width / t, max(1, arch.n_kv // t) * arch.d_head
    heads = arch.heads / t
    fused = act * (q + kv) if arch.fused_qkv else 0.0
    gated = 2 * act * q if arch.attention_gate else 0.0
    if setup.job.attention == "eager":
        probabilities = (4 + (act if act != 4 else 0)) * heads * seq  # fp32 softmax + its cast
        return act * 4 * q + probabilities + fused + gated  # q, repeated k and v, o_proj input
    return act * (2 * q + 2 * kv) + 4 * heads + fused + gated  # q, k, v, output (= o_proj input), logsumexp


def _state_mixer_bytes(setup: TrainingSetup, act: int) -> float:
    """Per token: what a linear-attention or Mamba-2 mixer keeps for backward (its input, the norm output,
    is counted with the norms), on one tensor-parallel rank.

    Mamba-2: transformers' NemotronHMamba2Mixer trains through mamba_ssm ``mamba_split_conv1d_scan_combined``,
    whose ``MambaSplitConv1dScanCombinedFn.forward`` saves the in_proj output zxbcdt (2 d_inner + 2 groups x
    d_state + heads), the pre-norm scan output out_x (d_inner) and the gated norm's fp32 rstd per group.
    Gated DeltaNet (Qwen3NextGatedDeltaNet.forward): the conv input and output (conv_dim each; causal_conv1d
    saves its input), q and k repeated to the value heads for the kernel, g (fp32) and beta per value head,
    the kernel output and the gate z (the gated norm's inputs) and the out_proj input (value_dim each).
    The FLA ``chunk_gated_delta_rule`` kernel's own saved chunk intermediates are not counted.
    """
    arch, t = setup.architecture, setup.tensor_parallel
    if arch.state_kind == "M":
        zxbcdt = 2 * arch.mamba_inner + 2 * arch.ssm_groups * arch.ssm_state + arch.mamba_heads
        return (act * (zxbcdt + arch.mamba_inner) + 4 * arch.ssm_groups) / t
    repeat = arch.linear_value_heads // arch.linear_key_heads
    width = 2 * arch.conv_channels + 2 * arch.linear_key_dim * repeat + 3 * arch.linear_value_dim
    return (act * width + (4 + act) * arch.linear_value_heads) / t


def _state_mixer_selective_bytes(setup: TrainingSetup, act: int) -> float:
    """Per token, under selective checkpointing: a state mixer's matmul outputs (its in_proj outputs and
    out_proj output, split by sequence parallelism) and its kernel output, as attention keeps SDPA's."""
    arch, t = setup.architecture, setup.tensor_parallel
    out = act * arch.hidden / setup.sequence_shards
    if arch.state_kind == "M":
        zxbcdt = 2 * arch.mamba_inner + 2 * arch.ssm_groups * arch.ssm_state + arch.mamba_heads
        return act * (zxbcdt + arch.mamba_inner) / t + out
    projected = 2 * arch.linear_key_dim + 2 * arch.linear_value_dim + 2 * arch.linear_value_heads
    return act * (projected + arch.linear_value_dim) / t + out


def _mlp_bytes(setup: TrainingSetup, act: int, down_input: bool | None = None) -> float:
    """Per token: the MLP's saved tensors; ``down_input``: whether the down_proj input is among them (by
    default when down_proj trains: an adapted or full down_proj saves it)."""
    arch, t = setup.architecture, setup.tensor_parallel
    frozen_down = (
        (setup.is_adapter and "down_proj" not in setup.job.lora_targets) if down_input is None else not down_input
    )
    if arch.is_moe:
        # Per routed expert: its gated MLP tensors plus the gathered copy of the token and its weighted
        # output (2h each); the router keeps fp32 logits, softmax and top-k weights (3 x 4 B per expert).
        # Together within 0.1% of the mixtral-8x7b ground-truth row.
        width = arch.expert_width / t
        per_expert = (4 * act * width if not frozen_down else 3 * act * width) + 2 * act * arch.hidden
        shared = arch.shared_experts * 4 * act * arch.shared_width / t
        return arch.experts_per_token * per_expert + shared + 12 * arch.experts
    width = arch.intermediate / t
    if arch.mlp == "gated":  # gate, up, silu(gate), and the down_proj input
        return (3 if frozen_down else 4) * act * width
    return (1 if frozen_down else 2) * act * width


_INPUT_GROUP = {
    "q_proj": "norm",
    "k_proj": "norm",
    "v_proj": "norm",
    "o_proj": "attention",
    "gate_proj": "norm2",
    "up_proj": "norm2",
    "down_proj": "mlp",
}


def input_widths(setup: TrainingSetup) -> dict[str, float]:
    """Per-token width of each linear input, per GPU: norm outputs are split by sequence parallelism."""
    arch, t = setup.architecture, setup.tensor_parallel
    width = (arch.expert_width * arch.experts_per_token if arch.is_moe else arch.intermediate) / t
    norm = arch.hidden / setup.sequence_shards
    return {"norm": norm, "norm2": norm, "attention": arch.q_width / t, "mlp": width}


def _lora_input_bytes(setup: TrainingSetup, act: int, targets: tuple[str, ...] | None = None) -> float:
    """peft casts each adapted layer's input to the adapter dtype and saves it (plus the r-dim output).

    Without a cast the adapters save their input itself: once per distinct input; the o_proj input
    (the attention output) and the down_proj input (counted in the MLP) are saved anyway. With LoRA
    dropout each adapter keeps a 1-byte mask and its own dropped copy of the input. DoRA keeps, per
    adapted layer, the base and the adapter outputs (scaled by the trainable magnitude) in the adapter
    dtype (peft ``DoraLinearLayer.forward``).
    """
    if not setup.is_adapter:
        return 0.0
    targets = setup.job.lora_targets if targets is None else targets
    if not targets:
        return 0.0
    widths = input_widths(setup)
    lora = setup.lora_bytes
    total = _adapter_output_bytes(setup, targets)
    if setup.job.lora_dropout > 0:
        total += sum((1 + lora) * widths[_INPUT_GROUP[name]] for name in targets)
    elif lora != act:
        total += sum(lora * widths[_INPUT_GROUP[name]] for name in targets)
    else:
        inputs = {_INPUT_GROUP[name] for name in targets} - {"attention", "mlp"}
        total += sum(act * widths[group] for group in inputs)
    return total


def _adapter_output_bytes(setup: TrainingSetup, targets: tuple[str, ...]) -> float:
    """Per token: what the adapters keep of their own outputs, whatever their inputs: each adapter's rank-wide
    intermediate and, with DoRA, the base and adapter outputs in the adapter dtype."""
    lora = setup.lora_bytes
    total = float(lora * setup.job.lora_rank * len(targets)) / setup.tensor_parallel
    if setup.job.lora_variant == "dora":
        shapes = adapted_shapes(setup.architecture)
        total += sum(2 * lora * shapes[name][1] for name in targets if shapes[name][0])
    return total


def _qlora_input_bytes(
    setup: TrainingSetup, act: int, targets: tuple[str, ...] | None = None, mixer: str = "A", mlp: bool = True
) -> float:
    """What a QLoRA layer keeps of its 4-bit linears' inputs beyond what the adapters keep.

    bitsandbytes before 0.43.2 saved the input of every quantized linear (``nf4_saves_inputs``), frozen or
    not: the norm outputs, the attention output's contiguous copy and the down_proj input. From 0.43.2 it
    saves none: what a layer keeps is then what it keeps with frozen 16-bit linears (an adapter on o_proj
    keeps SDPA's output, already counted with attention: flash and memory-efficient SDPA return a
    transposed view whose ``.contiguous()`` copies nothing). A layer without an MLP (or without a mixer)
    has only the other half; a state mixer's out_proj input is counted with the mixer."""
    if not setup.nf4_saves_inputs:  # QLoRA on a release before 0.43.2 only
        return 0.0
    targets = setup.job.lora_targets if targets is None else targets
    widths = input_widths(setup)
    kept_by_adapters = set()
    if setup.job.lora_dropout == 0 and setup.lora_bytes == act:
        kept_by_adapters = {_INPUT_GROUP[name] for name in targets} - {"attention", "mlp"}
    groups = (("norm",) if mixer != "-" else ()) + (("norm2",) if mlp else ())
    saved = sum(act * widths[group] for group in groups if group not in kept_by_adapters)
    if mixer in "AS":
        saved += act * widths["attention"]
    if mlp and "down_proj" not in targets:
        saved += act * widths["mlp"]
    return saved


def _group_readers(arch: Architecture, mixer: str) -> dict[str, int]:
    """4-bit linears that read each input group, per token: q, k and v (one fused QKV) or a state mixer's
    in-projections; gate and up (one plain MLP), in each of the experts a token is routed to; down_proj."""
    norm = len(arch.state_mixer_modules) - 1 if mixer in "LM" else (1 if arch.fused_qkv else 3)
    routed = arch.experts_per_token if arch.is_moe else 1
    return {"norm": norm, "norm2": (2 if arch.mlp == "gated" else 1) * routed, "mlp": 1}


def _prepared_qlora_bytes(
    setup: TrainingSetup, act: int, targets: tuple[str, ...], mixer: str = "A", mlp: bool = True
) -> float:
    """Per token, in a QLoRA model prepared for k-bit training with its norms left fp32 (peft, trl): the MLP's
    tensors, what the 4-bit linears and the adapters save of their inputs.

    The norms are fp32, so a norm's output is fp32 (RMSNorm returns ``weight * x.to(input_dtype)``), and
    bitsandbytes' ``Linear4bit.forward`` returns its output in its input's dtype (``out.to(inp_dtype)``):
    the gate and up outputs, the activation and the down_proj input are fp32 (the MLP's saved tensors at
    4 B). Before bitsandbytes 0.43.2 (``nf4_saves_inputs``) each 4-bit linear saved its own compute-dtype
    cast of an fp32 input (``x.to(self.compute_dtype)`` is what ``matmul_4bit`` saved), and each adapter
    its own 16-bit cast under autocast, else its cast to the adapter dtype (peft ``_cast_input_dtype``), or,
    with dropout, its mask and dropped copy. The attention output reaches o_proj as SDPA returns it: in the
    compute dtype, or fp32 where attention runs in fp32 (``fp32_compute``)."""
    arch = setup.architecture
    widths = input_widths(setup)
    readers = _group_readers(arch, mixer)
    fp32_groups = (("norm",) if mixer != "-" else ()) + (("norm2", "mlp") if mlp else ())
    saves = setup.nf4_saves_inputs
    saved = sum(readers[group] * act * widths[group] for group in fp32_groups) if saves else 0.0
    attention = 4 if setup.fp32_compute else act  # SDPA's output: fp32 only where attention runs in fp32
    if mixer in "AS" and saves:
        saved += attention * widths["attention"]  # the o_proj input
    if mlp:
        saved += _mlp_bytes(setup, 4, down_input=False)
    lora = setup.lora_bytes
    saved += _adapter_output_bytes(setup, targets)
    # An adapter's matmul saves its input as it multiplies it: autocast's 16-bit cast, else peft's cast to the
    # adapter dtype; one in that dtype already is the input itself, saved once for the adapters reading it.
    cast_to = act if setup.uses_autocast else lora
    for group in dict.fromkeys(_INPUT_GROUP[name] for name in targets):
        adapters = sum(1 for name in targets if _INPUT_GROUP[name] == group)
        arriving = attention if group == "attention" else 4
        if setup.job.lora_dropout > 0:
            saved += adapters * (1 + lora) * widths[group]
        elif cast_to != arriving:
            saved += adapters * cast_to * widths[group]
        elif group != "attention":  # o_proj's input is SDPA's output, counted with attention (and above)
            saved += arriving * widths[group]
    return saved


def _autocast_norm_bytes(setup: TrainingSetup) -> float:
    """Under autocast the residual stream is fp32: each norm saves x and x_hat in fp32, and every
    linear that reads the norm's output saves its own bf16 cast (autocast caches weights, not inputs)."""
    arch = setup.architecture
    readers = 3 + (2 if arch.mlp == "gated" else 1)
    return (2 * (4 * arch.hidden + 4 * arch.hidden) + readers * 2 * arch.hidden) / setup.sequence_shards


def _kind_bytes_per_token(setup: TrainingSetup, mixer: str, mlp: bool) -> float:
    """Bytes one token saves for backward in one layer of a kind (no checkpointing): its norms, its
    mixer's tensors (attention, linear attention or Mamba-2), its MLP's, and what the adapters keep."""
    act = setup.activation_bytes
    norms = (
        _autocast_norm_bytes(setup)
        if setup.uses_autocast and not setup.is_adapter
        else (setup.architecture.norms_per_layer * norm_bytes(setup, act))
    )
    if mixer in "AS":
        mixing = _attention_bytes(setup, 4 if setup.fp32_compute else act, setup.job.seq_len)
    else:
        # A state mixer's in-projections return their fp32 input's dtype in a model whose norms are fp32.
        mixing = _state_mixer_bytes(setup, 4 if setup.fp32_norms else act) if mixer in "LM" else 0.0
    targets = layer_targets(setup.job.lora_targets, mixer, mlp)
    if setup.fp32_norms:
        return norms + mixing + _prepared_qlora_bytes(setup, act, targets, mixer, mlp)
    return (
        norms
        + mixing
        + (_mlp_bytes(setup, act) if mlp else 0.0)
        + _lora_input_bytes(setup, act, targets)
        + _qlora_input_bytes(setup, act, targets, mixer, mlp)
    )


def layer_activation_bytes_per_token(setup: TrainingSetup) -> float:
    """Bytes one token saves in one decoder layer for backward (no checkpointing); a hybrid model's
    mean over its layers (their sum over the layer count)."""
    arch = setup.architecture
    if not arch.hybrid:
        return _kind_bytes_per_token(setup, "A", True)
    return (
        sum(count * _kind_bytes_per_token(setup, mixer, mlp) for mixer, mlp, count in layer_kinds(arch)) / arch.layers
    )


def largest_layer_activation_bytes_per_token(setup: TrainingSetup) -> float:
    """The saved bytes per token of the layer that saves most (the one a backward step holds)."""
    arch = setup.architecture
    if not arch.hybrid:
        return _kind_bytes_per_token(setup, "A", True)
    return max(_kind_bytes_per_token(setup, mixer, mlp) for mixer, mlp, _ in layer_kinds(arch))


def _selective_kind_bytes(setup: TrainingSetup, mixer: str, mlp: bool) -> float:
    arch, t, act = setup.architecture, setup.tensor_parallel, setup.activation_bytes
    sharded = arch.hidden / setup.sequence_shards
    kept = act * sharded  # the layer input
    if mixer in "AS":
        q, kv = arch.q_width / t, max(1, arch.n_kv // t) * arch.d_head
        gate = act * q if arch.attention_gate else 0.0  # q_proj's second half, the gate
        # q, k, v projections, SDPA output, logsumexp, o_proj output
        kept += act * (2 * q + 2 * kv) + 4 * arch.heads / t + gate + act * sharded
    elif mixer in "LM":
        kept += _state_mixer_selective_bytes(setup, act)
    if mlp:
        matrices = 2 if arch.mlp == "gated" else 1
        kept += act * (matrices * input_widths(setup)["mlp"] + sharded)  # gate/up outputs, down output
    return kept + _lora_input_bytes(setup, act, layer_targets(setup.job.lora_targets, mixer, mlp))


def selective_layer_bytes_per_token(setup: TrainingSetup) -> float:
    """Selective activation checkpointing (PyTorch SAC with a save list of matmuls and attention, as
    torchtitan and torchtune use it): the layer input, every matmul output (q, k, v, o_proj, gate, up,
    down) and the attention output and logsumexp are kept; norms, rotary, activation functions and
    products are recomputed. Row-parallel outputs and the layer input are split by sequence parallelism.
    A hybrid model's mean over its layers; its state mixers keep their projections and kernel output.
    """
    arch, t, act = setup.architecture, setup.tensor_parallel, setup.activation_bytes
    if arch.hybrid:
        kinds = layer_kinds(arch)
        return sum(count * _selective_kind_bytes(setup, mixer, mlp) for mixer, mlp, count in kinds) / arch.layers
    q, kv = arch.q_width / t, max(1, arch.n_kv // t) * arch.d_head
    width = input_widths(setup)["mlp"]
    sharded = arch.hidden / setup.sequence_shards
    attention = act * (2 * q + 2 * kv) + 4 * arch.heads / t  # q, k, v projections, SDPA output, logsumexp
    gate = act * q if arch.attention_gate else 0.0
    matrices = 2 if arch.mlp == "gated" else 1
    return act * (3 * sharded + matrices * width) + attention + gate + _lora_input_bytes(setup, act)


def logits_bytes(setup: TrainingSetup) -> tuple[float, float, float]:
    """(returned logits, fp32 log-softmax saved by the loss, fp32 upcast transient) for the micro-batch."""
    act = setup.activation_bytes
    vocab = setup.architecture.vocab / setup.tensor_parallel
    if setup.job.fused_loss:
        return 0.0, 0.0, 2 * 4 * vocab * min(setup.tokens, FUSED_LOSS_CHUNK_TOKENS)
    tokens = setup.tokens
    if setup.fp32_compute:
        act = 4  # PEFT's fp32 LM head on the fp32 stream returns fp32 logits: the loss has nothing to upcast
    return act * vocab * tokens, 4 * vocab * tokens, (4 * vocab * tokens if act != 4 else 0.0)


# -- optimizer ----------------------------------------------------------------------------------


def optimizer_state_bytes(setup: TrainingSetup, trainable: float, state_bytes: int) -> tuple[float, float]:
    """(optimizer states, step temporaries) in bytes for ``trainable`` parameters."""
    arch = setup.architecture
    if setup.job.optimizer == "adamw":
        return 2 * state_bytes * trainable, state_bytes * trainable
    if setup.job.optimizer == "adamw-fused":
        return 2 * state_bytes * trainable, 0.0
    if setup.job.optimizer in ("adamw-8bit", "adamw-8bit-paged"):
        return trainable * (2 + 2 * 4 / ADAM8BIT_BLOCK), 0.0
    if setup.job.optimizer == "sgd":
        return (state_bytes * trainable if setup.job.momentum > 0 else 0.0), 0.0
    # Adafactor (Shazeer & Stern 2018): factored second moment, rows + columns per matrix, fp32;
    # HF's implementation updates one parameter at a time with two fp32 temporaries of its size.
    fraction = trainable / max(1, trainable_params(setup))
    attention = 3 * arch.hidden + arch.q_width + 2 * arch.kv_width
    mlp = 3 * (arch.hidden + arch.intermediate)
    if arch.hybrid:  # rows + columns of each layer's own matrices: a state mixer's in_proj(s) and out_proj
        state = sum(arch.hidden + weights // arch.hidden for _, weights in arch.state_mixer_modules)
        mixers = {"A": attention, "S": attention, "L": state, "M": state, "-": 0}
        dims = sum(count * (mixers[mixer] + (mlp if has_mlp else 0)) for mixer, has_mlp, count in layer_kinds(arch))
    else:
        dims = arch.layers * (attention + mlp)
    states = 4 * (dims + arch.vocab + arch.hidden) * fraction
    largest = arch.largest_linear_params() if not setup.is_adapter else arch.hidden * setup.job.lora_rank
    return states, 2 * 4 * largest


# -- the data-parallel gradient buckets ---------------------------------------------------------

ZERO_STAGES = ("zero1", "zero2", "zero3")
# DeepSpeed keeps the partition's master weights in fp32 whatever the training dtype
# (stage_1_and_2.py / stage3.py: ``.clone().float().detach()`` of each 16-bit partition).
FP32_MASTER_BYTES = 4


def full_state_bytes(setup: TrainingSetup) -> tuple[int, int, int, int]:
    """Bytes per trainable parameter of a full fine-tune as it runs: (weights, gradients, each optimizer state,
    fp32 master weights). The precision's regime (REGIMES); 16-bit working weights and gradients where
    ``sixteen_bit_working_weights`` or sharded, with fp32 master weights under mixed precision; under DeepSpeed
    ZeRO an fp32 master and fp32 states whatever the precision, its optimizer stepping the fp32 partition it
    clones (``FP32_MASTER_BYTES``)."""
    precision = setup.job.precision
    weight, gradient, state, _, _ = REGIMES[precision]
    master = 0
    if setup.sixteen_bit_working_weights or setup.running_sharding != "none":
        weight = gradient = SHARDED_WEIGHT_BYTES[precision]
        master = FP32_MASTER_BYTES if precision in MIXED else 0
        if runs_deepspeed_zero(setup):
            master = state = FP32_MASTER_BYTES
    return weight, gradient, state, master


def runs_deepspeed_zero(setup: TrainingSetup) -> bool:
    """Whether DeepSpeed's ZeRO optimizer runs the job: a ZeRO stage, not Megatron's (its zero1 is its
    distributed optimizer), on any number of data-parallel ranks. DeepSpeed builds its ZeRO optimizer whatever
    the world size (stage_1_and_2.py: ``dp_size = dist.get_world_size(...)``, ``partition_count = [dp_size ...]``;
    stage3.py: ``partition_count = dist.get_world_size(...)``; 1 on one rank), so one GPU carries its 16-bit flat
    copy of the model, its fp32 partition (the whole model), the gradient buckets and the step's flat copies
    (ZeRO-3 also its gradient buffer), beside nothing sharded. ZeRO-3
    gathers nothing there: a partition of one is the whole parameter (partition_parameters.py
    all_gather_coalesced: ``if self.num_partitions == 1: return _no_gather_coalesced(params)``, which points the
    parameter at its partition), so no unit is gathered unless its parameters are offloaded."""
    job = setup.job
    return job.sharding in ZERO_STAGES and job.framework != "megatron"


def reduce_buckets(setup: TrainingSetup) -> tuple[int, int]:
    """(buckets, elements each) of DeepSpeed ZeRO's gradient buckets while they live ((0, 0) without DeepSpeed):
    flat buffers of ``zero_optimization.reduce_bucket_size`` elements, allocated on every GPU whatever the world
    size (contiguous_gradients, on by default; ZeRO-1's since DeepSpeed 0.13.0): one, or two under overlap_comm
    at ZeRO-1/2 (``bucket_lifetime`` says when). "auto" (None here) is the Hugging Face Trainer's hidden_size
    squared (transformers integrations/deepspeed.py, trainer_config_finalize). Megatron's zero1 is its
    distributed optimizer, which has no such bucket."""
    job = setup.job
    if not runs_deepspeed_zero(setup):
        return 0, 0
    elements = job.reduce_bucket_size if job.reduce_bucket_size is not None else setup.architecture.hidden**2
    return (2 if job.overlap_comm and job.sharding != "zero3" else 1), elements


def reduce_bucket_bytes(setup: TrainingSetup) -> float:
    """Bytes of ``reduce_buckets`` in the dtype of the optimizer's first parameter (stage3.py, stage_1_and_2.py:
    self.dtype): the 16-bit working copy DeepSpeed casts the model to under bf16 or fp16, fp32 without them."""
    count, elements = reduce_buckets(setup)
    return count * elements * SHARDED_WEIGHT_BYTES[setup.job.precision]


def bucket_lifetime(setup: TrainingSetup) -> str:
    """When the data-parallel gradient buckets live, "" without any: "step" for DDP's (allocated as it wraps the
    model) and ZeRO-3's (deepspeed/runtime/zero/stage3.py: __ipg_bucket_flat_buffer, allocated as the optimizer
    initialises), kept all run; "backward" for ZeRO-2's, from each backward's start until its gradients are
    reduced (stage_1_and_2.py: backward, then _release_ipg_buffers in the epilogue every micro-step); ZeRO-1
    reduces at the accumulation boundary only, so under accumulation its bucket lives from a backward through
    the forward after it, until the next backward drops it ("accumulation"), else as ZeRO-2's."""
    if holds_ddp_buckets(setup):
        return "step"
    if not reduce_buckets(setup)[0]:
        return ""
    if setup.job.sharding == "zero3":
        return "step"
    return "accumulation" if setup.job.sharding == "zero1" and setup.job.gradient_accumulation > 1 else "backward"


def holds_ddp_buckets(setup: TrainingSetup) -> bool:
    """Whether PyTorch DDP wraps the model: data parallelism over several ranks with nothing sharded (the Hugging
    Face Trainer's and accelerate's multi-GPU default); its buckets hold the trainable gradients' bytes again,
    all step (training_memory._model_states). Megatron's data parallelism keeps its gradients in a buffer of
    its own instead."""
    return setup.job.sharding == "none" and setup.data_parallel > 1 and setup.job.framework != "megatron"
