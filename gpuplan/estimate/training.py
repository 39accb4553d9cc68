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
from gpuplan.estimate.nccl import Communicator, training_communicators
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
    def communicators(self) -> tuple[Communicator, ...]:
        """The NCCL communicators the job opens on each GPU (``nccl.training_communicators``)."""
        return training_communicators(
            self.gpus, self.data_parallel, self.tensor_parallel, self.pipeline_parallel, runs_deepspeed_zero(self)
        )

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
    def peak_phase_name(self) -> str:
        """The peak phase in words: "optimizer step"."""
        return self.peak_phase.replace("_", " ")

    @property
    def peak_words(self) -> str:
        """Where the peak is, as the findings and ``estimate`` word it: "at the optimizer step peak"."""
        return f"at the {self.peak_phase_name} peak"

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


_ATTENTION_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
_MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")


def matrix_copies(arch: Architecture, name: str) -> int:
    """How many of ``adapted_shapes``' matrix ``name`` a decoder layer holds: one per expert for an MoE's
    MLP matrices, else one."""
    return arch.experts if arch.is_moe and name in _MLP_TARGETS else 1


def adapted_matrices(arch: Architecture, name: str, moe_layer: bool, experts: str) -> tuple[tuple[int, int, int], ...]:
    """(in, out, copies) of the linears target ``name`` adapts in one decoder layer: in a mixture-of-experts
    layer each routed expert's (``experts`` "all"; none under "shared") and one for the shared experts (a
    DeepSeek layer's shared experts are one MLP of their summed width, ``shared_experts`` x its width); in a
    dense layer (a dense model's, or the leading dense layers of an MoE model) one of the dense width."""
    d_in, d_out = adapted_shapes(arch)[name]
    if not d_in:  # gate_proj of a plain MLP
        return ()
    if name not in _MLP_TARGETS:
        return ((d_in, d_out, 1),)
    widths: list[tuple[int, int]] = []  # (MLP width, copies)
    if not moe_layer:
        widths.append((arch.intermediate, 1))
    else:
        if experts == "all":
            widths.append((arch.expert_width, arch.experts))
        if arch.shared_experts:
            widths.append((arch.shared_experts * arch.shared_width, 1))
    return tuple(
        (width, arch.hidden, copies) if name == "down_proj" else (arch.hidden, width, copies)
        for width, copies in widths
    )


def copies_per_token(arch: Architecture, copies: int) -> int:
    """How many of a layer's ``copies`` of an adapted matrix one token passes through: the experts it is routed
    to, of a routed expert's (``adapted_matrices``), else the one."""
    return min(copies, arch.experts_per_token) if copies > 1 else 1


@functools.lru_cache(maxsize=256)  # the same few adapters in every estimate of a planner's search
def adapter_params_per_layer(
    arch: Architecture,
    rank: int,
    targets: tuple[str, ...],
    variant: str = "lora",
    moe_layer: bool = False,
    experts: str = "all",
) -> int:
    """LoRA adds r x (d_in + d_out) per adapted matrix (Hu et al. 2021); DoRA adds a magnitude per output
    (Liu et al. 2024, peft ``DoraLinearLayer``); a mixture-of-experts layer's MLP targets adapt each expert
    they reach (``adapted_matrices``)."""
    adapted = [matrix for name in targets for matrix in adapted_matrices(arch, name, moe_layer, experts)]
    magnitude = sum(copies * out for _, out, copies in adapted) if variant == "dora" else 0
    return sum(copies * rank * (d_in + d_out) for d_in, d_out, copies in adapted) + magnitude


@functools.lru_cache(maxsize=64)
def layer_kinds(arch: Architecture) -> tuple[tuple[str, bool, int], ...]:
    """(token mixer, has an MLP, how many layers) of each kind of layer the model has (``adapter_layer_kinds``
    without the mixture-of-experts split)."""
    counts: dict[tuple[str, bool], int] = {}
    for mixer, mlp, _, count in adapter_layer_kinds(arch):
        counts[(mixer, mlp)] = counts.get((mixer, mlp), 0) + count
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
    return sum(
        count
        * adapter_params_per_layer(
            arch, job.lora_rank, layer_targets(job.lora_targets, mixer, mlp), job.lora_variant, moe, job.lora_experts
        )
        for mixer, mlp, moe, count in adapter_layer_kinds(arch)
    )


@functools.lru_cache(maxsize=64)
def adapter_layer_kinds(arch: Architecture) -> tuple[tuple[str, bool, bool, int], ...]:
    """(token mixer, has an MLP, a mixture-of-experts layer, how many layers) of each kind of layer, for the
    adapters each holds (a DeepSeek model's leading dense layers are apart from its MoE layers)."""
    counts: dict[tuple[str, bool, bool], int] = {}
    for index in range(arch.layers):
        key = (arch.mixer(index), arch.has_mlp(index), arch.is_moe_layer(index))
        counts[key] = counts.get(key, 0) + 1
    return tuple((mixer, mlp, moe, count) for (mixer, mlp, moe), count in counts.items())


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
