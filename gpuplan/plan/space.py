"""The planner's search space: which GPUs it may use, which parallel layouts a model allows on them, and
how a layout fills nodes.

Placement follows how the engines run: tensor parallelism (TP) inside one NVLink domain, or inside one
PCIe server for cards without NVLink; pipeline stages (PP), serving replicas and data-parallel ranks
anywhere, across nodes if need be.
"""

from __future__ import annotations

import functools
import math

from gpuplan.architecture import Architecture
from gpuplan.catalog import Gpu, gpu_catalog
from gpuplan.conflicts import BF16_PRECISIONS
from gpuplan.records import record
from gpuplan.spec import Hardware, PlanLimits, Spec

HOST_GPUS = 8  # PCIe cards one server holds (8 x L40S / 8 x H100 NVL servers: two CPUs, 8 x16 slots)
MAX_PIPELINE = 8  # pipeline stages the planner tries: beyond 8 the bubble and per-token hops dominate
# GPUs per model copy (TP x PP) and data-parallel widths are powers of two: HGX boards and cloud
# instances come with 1, 2, 4 or 8 GPUs, and published deployments use TP 1/2/4/8 and PP 1/2/4.
POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
# vLLM and SGLang pad the vocabulary to a multiple of 64 and split the padded rows evenly over the TP
# ranks (vllm/model_executor/layers/vocab_parallel_embedding.py, DEFAULT_VOCAB_PADDING_SIZE = 64):
# `divide(num_embeddings_padded, tp_size)` refuses a TP degree that does not divide the padded size.
VOCAB_PADDING = 64


@record
class TrainingSettings:
    """The fine-tuning settings the planner may change without changing the model's numerics.

    The global batch (micro_batch x gradient_accumulation x data-parallel ranks) is held fixed, so a
    layout with more data-parallel ranks accumulates fewer micro-batches, never trains on a larger batch.
    """

    activation_checkpointing: str  # none | full | selective, as finetune.activation_checkpointing
    fused_loss: bool
    sharding: str
    micro_batch: int
    gradient_accumulation: int


@record
class Layout:
    """One deployment of a job: GPU kind, TP x PP per model copy, copies, and (fine-tuning) settings.

    ``replicas`` is the number of serving replicas, or the data-parallel ranks of a fine-tuning run;
    ``concurrency`` the sequences each serving replica holds; ``expert_parallel`` a serving layout's routed
    experts spread over that many GPUs (the declared one's: the planner proposes none, but judges the
    declared layout as it is declared).
    """

    gpu: Gpu
    tensor_parallel: int
    pipeline_parallel: int
    replicas: int
    concurrency: int = 0
    settings: TrainingSettings | None = None
    expert_parallel: int = 1

    @property
    def gpus(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel * self.replicas

    @property
    def key(self) -> tuple[object, ...]:
        """Identity for memoisation and comparison (a Gpu holds a dict, so it is not hashable)."""
        return (
            self.gpu.id,
            self.tensor_parallel,
            self.pipeline_parallel,
            self.replicas,
            self.concurrency,
            self.settings,
            self.expert_parallel,
        )

    def describe(self) -> str:
        parts = [f"{self.gpus:,} x {self.gpu.id}"]
        if self.tensor_parallel > 1:
            parts.append(f"tensor_parallel {self.tensor_parallel}")
        if self.pipeline_parallel > 1:
            parts.append(f"pipeline_parallel {self.pipeline_parallel}")
        if self.expert_parallel > 1:
            parts.append(f"expert_parallel {self.expert_parallel}")
        if self.settings is None and self.replicas > 1:
            parts.append(f"{self.replicas:,} replicas of {self.concurrency:,} sequences")
        if self.settings is not None:
            if self.settings.sharding != "none" and self.replicas > 1:
                parts.append(f"sharding {self.settings.sharding}")
            if self.settings.activation_checkpointing != "none":
                parts.append(f"{self.settings.activation_checkpointing} activation checkpointing")
            if self.settings.fused_loss:
                parts.append("fused loss")
        return ", ".join(parts)


def declared_shape(
    hardware: Hardware, copies: int, *, concurrency: int = 0, settings: TrainingSettings | None = None
) -> Layout:
    """The layout a job's ``hardware`` declares, with its copies (replicas or data-parallel ranks)."""
    return Layout(
        hardware.gpu,
        hardware.tensor_parallel,
        hardware.pipeline_parallel,
        copies,
        concurrency,
        settings,
        hardware.expert_parallel,
    )


def max_tensor_parallel(gpu: Gpu) -> int:
    """The largest TP group one scale-up link holds: the NVLink domain, or one PCIe server of cards."""
    return gpu.domain if gpu.has_nvlink else HOST_GPUS


def gpus_per_node(gpu: Gpu) -> int:
    """GPUs of one node: an NVLink domain of 8 or more (HGX board, NVL72 rack), else one server of 8 cards."""
    return max(gpu.domain, HOST_GPUS)


def nodes_needed(gpu: Gpu, tensor_parallel: int, pipeline_parallel: int, copies: int) -> int:
    """Nodes a layout spans: copies (replicas or data-parallel ranks) pack whole into nodes; a copy larger
    than a node puts whole TP groups (pipeline stages) on each node."""
    per_node = gpus_per_node(gpu)
    group = tensor_parallel * pipeline_parallel
    if group <= per_node:
        return math.ceil(copies / (per_node // group))
    stages_per_node = max(1, per_node // tensor_parallel)
    return copies * math.ceil(pipeline_parallel / stages_per_node)


def heads_allow(arch: Architecture, tensor_parallel: int) -> bool:
    """TP splits whole attention heads; KV heads are split too, or replicated when TP is a multiple of
    them (vLLM ``get_num_kv_heads``, Megatron); MLA's latent cache is replicated on every rank. The heads
    of linear-attention and Mamba-2 layers are split whole too (vLLM ``MambaStateShapeCalculator`` divides
    them: Gated DeltaNet key and value heads, Mamba-2 heads)."""
    if arch.heads % tensor_parallel:
        return False
    if arch.state_kind == "L" and (
        arch.linear_key_heads % tensor_parallel or arch.linear_value_heads % tensor_parallel
    ):
        return False
    if arch.state_kind == "M" and arch.mamba_heads % tensor_parallel:
        return False
    return arch.is_mla or arch.n_kv % tensor_parallel == 0 or tensor_parallel % arch.n_kv == 0


def padded_vocab(arch: Architecture) -> int:
    return math.ceil(arch.vocab / VOCAB_PADDING) * VOCAB_PADDING


def vocab_allows(arch: Architecture, tensor_parallel: int) -> bool:
    """Serving engines split the padded vocabulary evenly (training frameworks pad it per TP degree)."""
    return padded_vocab(arch) % tensor_parallel == 0


def tensor_parallel_problem(arch: Architecture, tensor_parallel: int, *, serving: bool) -> str | None:
    """Why a TP degree cannot run this model, or None."""
    if not heads_allow(arch, tensor_parallel):
        heads = f"{arch.heads} attention heads / {arch.n_kv} KV heads"
        if arch.state_kind == "L":
            heads += f" / {arch.linear_key_heads} linear-attention key and {arch.linear_value_heads} value heads"
        elif arch.state_kind == "M":
            heads += f" / {arch.mamba_heads} Mamba heads"
        return f"tensor_parallel {tensor_parallel} does not divide {heads}"
    if serving and not vocab_allows(arch, tensor_parallel):
        return (
            f"tensor_parallel {tensor_parallel} does not divide the padded vocabulary of {padded_vocab(arch):,} rows "
            f"(vLLM/SGLang pad {arch.vocab:,} to a multiple of {VOCAB_PADDING})"
        )
    return None


def domain_problem(gpu: Gpu, tensor_parallel: int) -> str | None:
    """Why a TP group does not fit one scale-up link of ``gpu``, or None."""
    limit = max_tensor_parallel(gpu)
    if tensor_parallel <= limit:
        return None
    if gpu.has_nvlink:
        return f"tensor_parallel {tensor_parallel} exceeds the NVLink domain of {gpu.domain} GPUs on {gpu.id}"
    return f"tensor_parallel {tensor_parallel} exceeds one PCIe server of {HOST_GPUS} {gpu.id} cards"


def pipeline_problem(arch: Architecture, pipeline_parallel: int, *, serving: bool) -> str | None:
    """Serving engines spread a remainder of layers over the stages (vLLM ``get_pp_indices``); training
    frameworks split the layers evenly (Megatron-LM requires num_layers % pipeline size == 0)."""
    if pipeline_parallel > arch.layers:
        return f"pipeline_parallel {pipeline_parallel} exceeds the {arch.layers} layers"
    if not serving and arch.layers % pipeline_parallel:
        return f"pipeline_parallel {pipeline_parallel} does not divide the {arch.layers} layers"
    return None


def tensor_parallel_degrees(arch: Architecture, gpu: Gpu, *, serving: bool) -> list[int]:
    """TP degrees the planner tries on ``gpu``: powers of two within its scale-up link that the model allows."""
    return list(_tensor_parallel_degrees(arch, max_tensor_parallel(gpu), serving))


def proposed_serving_tensor_parallel(arch: Architecture, gpu: Gpu) -> list[int]:
    """TP degrees the serving planner proposes on ``gpu``: those it allows, but only TP 1 on a card without a
    scale-up link, where tensor parallelism all-reduces over PCIe on every token (GP312 warns of that); the
    planner spreads a model over such cards by pipeline stages, which cross PCIe once per stage, or
    proposes GPUs that link. A recommended layout then draws no GP312 (the declared one is judged as it is)."""
    degrees = tensor_parallel_degrees(arch, gpu, serving=True)
    return degrees if gpu.has_nvlink else degrees[:1]


def pipeline_degrees(arch: Architecture, *, serving: bool) -> list[int]:
    """PP degrees the planner tries: powers of two up to 8 that the model (and the framework) allow."""
    return list(_pipeline_degrees(arch, serving))


# The degrees depend on the model and the scale-up link's size alone; a planner asks for them on every
# GPU kind of every search.
@functools.lru_cache(maxsize=1024)
def _tensor_parallel_degrees(arch: Architecture, most: int, serving: bool) -> tuple[int, ...]:
    return tuple(
        tp for tp in POWERS_OF_TWO if tp <= most and tensor_parallel_problem(arch, tp, serving=serving) is None
    )


@functools.lru_cache(maxsize=1024)
def _pipeline_degrees(arch: Architecture, serving: bool) -> tuple[int, ...]:
    return tuple(
        pp for pp in POWERS_OF_TWO if pp <= MAX_PIPELINE and pipeline_problem(arch, pp, serving=serving) is None
    )


def vendor_of(gpu: Gpu) -> str:
    return gpu.vendor.lower()


def allowed_gpus(spec: Spec, limits: PlanLimits) -> list[Gpu]:
    """The GPUs the planner may propose: those named, else every data-centre GPU (catalog and spec's own),
    narrowed to the named vendors. Consumer cards are proposed only when named."""
    pool = {**gpu_catalog(), **spec.custom_gpus}
    if limits.gpus:
        chosen = [pool[gpu_id] for gpu_id in limits.gpus if gpu_id in pool]
    else:
        chosen = [gpu for gpu in pool.values() if gpu.suggestable]
    if limits.vendors:
        chosen = [gpu for gpu in chosen if vendor_of(gpu) in limits.vendors]
    return chosen


def computes_in_bf16(spec: Spec, kind: str) -> bool:
    """Whether the job's 16-bit math is bf16, which a GPU without bf16 tensor cores (T4) cannot run: a bf16
    fine-tuning precision (GP025 on a declared T4), or bf16 weights to serve (vLLM refuses them there; with
    --dtype half they are served in fp16, a change of the model's numerics, which the planner never
    recommends). Such GPUs are proposed for fp16-mixed or fp32 runs and fp16 or fp32 models only."""
    if kind == "finetune":
        return spec.finetune is not None and spec.finetune.precision in BF16_PRECISIONS
    tenants = spec.serve.tenants if spec.serve is not None else ()
    return any(model.dtype == "bf16" for model in (spec.model, *(tenant.model for tenant in tenants)))


def gpu_outside_limits(gpu: Gpu, limits: PlanLimits) -> str | None:
    """Why ``gpu`` is outside the GPUs and vendors the spec's plan section (or the command line) allows, or None:
    what a declared layout is judged against. A consumer card is not proposed unless named (the pool above), but
    one the spec declares is the team's own choice, judged as declared: "breaks limits" there had no finding in
    lint and an APPROVE in the report beside it."""
    if limits.gpus and gpu.id not in limits.gpus:
        return f"{gpu.id} is not among the allowed GPUs ({', '.join(limits.gpus)})"
    if limits.vendors and vendor_of(gpu) not in limits.vendors:
        return f"{gpu.id} is not from an allowed vendor ({', '.join(limits.vendors)})"
    return None


def size_problem(layout: Layout, nodes: int, limits: PlanLimits) -> str | None:
    """Why a layout is larger than max_gpus or max_nodes allow, or None."""
    if layout.gpus > limits.max_gpus:
        return f"{layout.gpus} GPUs exceed max_gpus {limits.max_gpus}"
    if nodes > limits.max_nodes:
        return f"{nodes} nodes exceed max_nodes {limits.max_nodes}"
    return None
