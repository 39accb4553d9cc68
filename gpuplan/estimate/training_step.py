"""One training step's tensors run through PyTorch's caching allocator (gpuplan/estimate/allocator.py), in
the order a step takes and frees them: what ``max_memory_reserved`` adds to the tensors' peak
(training_memory.estimate_training reads it as the allocator's cache)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpuplan.estimate.allocator import EMPTY, Alike, Allocation, CachingAllocator, Tensors
from gpuplan.estimate.training import (
    TrainingSetup,
    adapted_matrices,
    adapted_shapes,
    matrix_copies,
    runs_deepspeed_zero,
)
from gpuplan.estimate.training_activations import input_widths
from gpuplan.records import record

if TYPE_CHECKING:
    from gpuplan.architecture import Architecture
    from gpuplan.estimate.training_tensors import Evaluation, MicroBatchActivations, ModelStates
    from gpuplan.estimate.zero_step import ZeroStep

# The CUDA streams a step allocates on besides the default (compute) stream, 0; the allocator keeps a pool
# per stream. GATHER: the all-gather outputs, FSDP1's "unshard" stream (pytorch/pytorch
# torch/distributed/fsdp/_runtime_utils.py _init_streams: "allocating the all-gather destination tensors"),
# FSDP2's all-gather copy-in stream (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py
# foreach_all_gather: all_gather_output allocated under all_gather_copy_in_stream). STAGE: FSDP1's "pre_unshard"
# stream, an offloaded shard's H2D copy (_init_streams: "allocations and writes for CPU offloading (H2D copy)"; FSDP2
# makes its copy on the copy-in stream, FSDPParam.all_gather_inputs). REDUCE: the reduce-scatter outputs, the sharded
# gradients, FSDP1's "post_backward" stream (_post_backward_hook: new_sharded_grad, kept as _saved_grad_shard, then
# .grad) and FSDP2's reduce_scatter_stream (_fsdp_collectives.py foreach_reduce: "The RS output is allocated in the RS
# stream and used in the default stream (for optimizer)"). DeepSpeed ZeRO-3 gathers on a stream of its own too
# (deepspeed/runtime/zero/partitioned_param_coordinator.py __all_gather_params_: all_gather_coalesced under
# __allgather_stream, its own when overlap_comm, which stage 3 turns on by default: runtime/zero/config.py
# overlap_comm_valid), but submodule by submodule in prefetch buckets, not a layer at a time; gpuplan holds its two
# units all step (``ModelStates.gathered``, one block), as a pool of their own would hold them.
GATHER, STAGE, REDUCE = 1, 2, 3


@record
class Gathering:
    """What FSDP all-gathers, unit by unit, as ``_Units`` allocates it (bytes; the phase model counts the
    same units in ``ModelStates.gathered``)."""

    framework: str  # fsdp1 | fsdp2
    root: float  # FSDP's root unit (the embedding, an untied LM head, the final norm), as gathered
    unit: float  # a decoder unit as gathered (in 16-bit under FSDP's MixedPrecision, else as stored)
    staged_root: float  # an offloaded shard's GPU copy before its all-gather: the root's, a unit's (0: no offload)
    staged_unit: float
    unit_gradient: float  # a unit's unsharded gradient (full fine-tuning), on the default stream
    reduced: float  # FSDP2 with parameter offload: the gradient shards, each freed once copied to the host
    stored_root: float  # the root and a decoder unit as stored, as FSDP1 wraps them (``wrap_model``)
    stored_unit: float
    # An offloaded shard cast under MixedPrecision: its GPU copy as stored, which the cast to the staged 16-bit
    # copy reads and drops at once (the root's, a unit's; 0: no such cast).
    cast_root: float = 0.0
    cast_unit: float = 0.0
    # Full fine-tuning: the root unit's unsharded gradients, reduced only as backward ends: the LM head's weight
    # gradient, held from the loss, the embedding's, and the root's flat gradient built beside them
    # (training_memory._model_states says why).
    head_gradient: float = 0.0
    embedding_gradient: float = 0.0
    root_gradient: float = 0.0


# FSDP1 broadcasts a unit's tensors from rank 0 as it wraps it (sync_module_states) in buckets of this many bytes
# (torch/distributed/fsdp/_init_utils.py PARAM_BROADCAST_BUCKET_SIZE, handed to _sync_params_and_buffers), at
# most two of them in flight (torch/csrc/distributed/c10d/comm.cpp broadcast_coalesced: max_in_flight = 2).
BROADCAST_BUCKET = 250 * 2**20
BROADCASTS_IN_FLIGHT = 2


def broadcast_buckets(sizes: Sequence[float]) -> list[tuple[float, int]]:
    """(bytes, tensors) of each bucket ``broadcast_coalesced`` cuts tensors of ``sizes`` bytes into, in order: a
    bucket closes once it holds BROADCAST_BUCKET bytes or more, and the last takes what is left
    (torch/csrc/distributed/c10d/reducer.cpp compute_bucket_assignment_by_size, which keeps a bucket per dtype
    and device: one here, a unit's tensors taken as the model's dtype; an fp32 adapter or buffer among bf16
    weights would open a bucket of its own)."""
    buckets: list[tuple[float, int]] = []
    held, count = 0.0, 0
    for size in sizes:
        held, count = held + size, count + 1
        if held >= BROADCAST_BUCKET:
            buckets.append((held, count))
            held, count = 0.0, 0
    if count:
        buckets.append((held, count))
    return buckets


def wrapped_unit_elements(arch: Architecture) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Elements of each parameter of a decoder unit and of FSDP's root unit, in ``module.parameters()`` order
    (a Llama-style layer: q, k, v, o, the MLP's matrices, each expert's apart, then its two norms; the root:
    the embedding, the final norm, an untied LM head): how FSDP1 moves and broadcasts them as it wraps."""
    layer = [
        d_in * d_out
        for name, (d_in, d_out) in adapted_shapes(arch).items()
        if d_in
        for _ in range(matrix_copies(arch, name))
    ]
    head = () if arch.tie_embeddings else (arch.vocab * arch.hidden,)
    return (*layer, arch.hidden, arch.hidden), (arch.vocab * arch.hidden, arch.hidden, *head)


def wrap_model(
    cache: CachingAllocator,
    layers: Sequence[tuple[float, ...]],
    root: tuple[float, ...],
    world: int,
    broadcast: bool,
    offloaded: bool,
) -> float:
    """FSDP1 wrapping a model that is not yet on the GPU (``fsdp_loading`` from-cpu or broadcast): the decoder
    units, each of its tensors ``layers[i]`` (bytes as stored), then the root unit's ``root`` (auto_wrap wraps a
    module's children before it), on the default stream, each unit in turn: its tensors moved to the GPU
    (torch/distributed/fsdp/_init_utils.py _move_states_to_device); with ``broadcast``, sent from rank 0 in
    buckets whose flat copies come and go (_sync_module_params_and_buffers -> broadcast_coalesced; a bucket of
    one tensor is a view of it: flatten_dense_tensors); concatenated into the flat parameter (_flat_param.py
    flatten_tensors: torch.cat), whose shard over ``world`` ranks is cloned (_get_shard: chunk.clone()) before
    its storage is freed (FlatParamHandle.shard: _resize_(0)); then the originals dropped (FSDP keeps views
    into the flat parameter only); ``offloaded``, the shard goes to the host as well (flat_param_to(cpu)).
    What they free stays cached. The shards' bytes left on the GPU."""

    def unit(tensors: tuple[float, ...]) -> float:
        originals = [cache.take(size) for size in tensors]
        if broadcast:
            flying: deque[Allocation] = deque()
            for size, count in broadcast_buckets(tensors):
                if len(flying) == BROADCASTS_IN_FLIGHT:
                    cache.give(flying.popleft())
                flying.append(cache.take(size) if count > 1 else EMPTY)
            for copy in flying:
                cache.give(copy)
        whole = sum(tensors)
        flat = cache.take(whole)
        shard = cache.take(whole / world)
        cache.give(flat)
        for original in originals:
            cache.give(original)
        if offloaded:
            cache.give(shard)
            return 0.0
        return whole / world

    return sum(cache.repeat(unit, list(layers))) + unit(root)


def preparation_events(states: ModelStates) -> tuple[tuple[bool, int, float], ...]:
    """A QLoRA preparation's allocations (True) and frees (False) in order, as (take, tensor, bytes): each
    16-bit tensor as loaded; its fp32 copy, taken before the 16-bit one is freed (peft
    ``prepare_model_for_kbit_training``: ``param.data = param.data.to(torch.float32)``); with ``cast_back``,
    a bf16 copy taken before the fp32 one is freed (TRL ``peft_module_casting_to_bf16``: ``module.to``).
    Empty without a preparation on the GPU."""
    count = len(states.upcast)
    events = [(True, index, 2 * elements) for index, elements in enumerate(states.upcast)]
    for index, elements in enumerate(states.upcast):
        events += [(True, count + index, 4 * elements), (False, index, 0.0)]
    if states.cast_back:
        for index, elements in enumerate(states.upcast):
            events += [(True, 2 * count + index, 2 * elements), (False, count + index, 0.0)]
    return tuple(events)


def _prepared_bytes(states: ModelStates) -> float:
    """Bytes of the tensors a preparation leaves (part of ``states.weights``): fp32, or bf16 once cast back."""
    return (2 if states.cast_back else 4) * sum(states.upcast)


def _split(total: float, shares: tuple[float, ...]) -> tuple[float, ...]:
    """``total`` bytes cut into tensors in proportion to ``shares``."""
    whole = sum(shares)
    return tuple(total * share / whole for share in shares) if whole and total > 0 else ()


def _parameter_shares(setup: TrainingSetup) -> tuple[tuple[float, ...], tuple[float, ...], int]:
    """(elements of each trainable tensor of one decoder layer, of the embedding and LM head, layers) on
    the most loaded GPU: the shapes a step's gradients, optimizer states and step temporaries take. Sharded
    data parallelism keeps one flat shard per layer (FSDP's flat parameter, ZeRO's partition)."""
    arch, job = setup.architecture, setup.job
    shapes = adapted_shapes(arch)
    layers = setup.stage_layers
    if setup.is_adapter:  # lora_A and lora_B of each adapted matrix (an MoE layer's experts' each one tensor)
        rank, moe = job.lora_rank, arch.moe_layers > 0
        layer = tuple(
            rank * side * copies
            for name in job.lora_targets
            for d_in, d_out, copies in adapted_matrices(arch, name, moe, job.lora_experts)
            for side in (d_in, d_out)
        )
        return layer, (), layers
    layer = tuple(d_in * d_out * matrix_copies(arch, name) for name, (d_in, d_out) in shapes.items() if d_in)
    edges = (arch.vocab * arch.hidden,) * (1 if arch.tie_embeddings else 2)
    # ZeRO-2's and ZeRO-3's gradients live in their flat buffers on one rank too (runs_deepspeed_zero)
    if (setup.data_parallel > 1 or runs_deepspeed_zero(setup)) and job.sharding in ("zero2", "zero3", "fsdp"):
        return (sum(layer),), (sum(edges),), layers
    return layer, edges, layers


class _Units:
    """FSDP's gathered units, taken and freed in the order FSDP takes and frees them, each on its stream;
    what one layer hands the next (FSDP2's all-gather output, kept until the next copy-out, or a unit
    gathered ahead) is the allocator's ``carry``, which ``repeat`` compares runs by.

    FSDP1: the root unit is gathered as forward begins and kept to backward's end (_runtime_utils.py
    _post_forward_reshard: "Do not free the root's parameters in the post-forward"; _catch_all_reshard);
    each decoder unit is gathered before its layer's forward and freed after it (_pre_forward_unshard,
    _post_forward_reshard; no forward_prefetch); at the loss the root's pre-backward hook prefetches the last
    layer's unit, and each layer's pre-backward hook the next one's (_pre_backward_hook -> _prefetch_handles,
    BACKWARD_PRE), which its post-backward hook frees (_post_backward_hook -> _reshard). An offloaded shard's
    GPU copy is made on the pre-unshard stream before its all-gather and freed once the unshard returns
    (_flat_param.py FlatParamHandle.pre_unshard -> flat_param_to; unshard -> _use_unsharded_flat_param drops
    the last reference).

    FSDP2 (_fsdp_param_group.py FSDPParamGroup): each group's all-gather output is allocated on the copy-in
    stream and its parameters copied out on the default stream (wait_for_unshard ->
    foreach_all_gather_copy_out). In forward the output is kept until the next group's copy-out ("Defer free
    to allow for overlap of this copy-out with next all-gather"), and the last is flushed as forward ends; in
    backward it is freed at its copy-out, after which the group prefetches the next (pre_backward ->
    _backward_prefetch). The root group's parameters stay from forward to backward's end.

    FSDP1's units are all one size, so which of them is live is all the allocator sees: the unit a layer's
    forward gathers and frees is held across the forward loop (its block is the one each layer's unit
    takes again), and in backward one unit is held while each layer gathers and frees a second one (the
    next unit takes the block the current one frees): the same live bytes at every allocation and the same
    cached blocks between layers as gathering and freeing each unit, without a carry between layers."""

    def __init__(self, cache: CachingAllocator, gathering: Gathering) -> None:
        self.cache, self.gathering = cache, gathering
        self.unit = Tensors.of([(gathering.unit, 1)])
        self.staging = STAGE if gathering.framework == "fsdp1" else GATHER
        self.root: list[Allocation] = []
        self.held = EMPTY  # FSDP1: the unit held across a loop
        # Whether a layer's forward allocates anything of FSDP's (FSDP1: its unit is held, the class docstring).
        self.gathers_in_forward = gathering.framework == "fsdp2" or gathering.staged_unit > 0

    def _stage(self, staged: float, cast: float) -> Allocation:
        """A shard's GPU copy for its all-gather; an offloaded one cast under MixedPrecision first comes to the
        GPU as stored, and that copy goes once the cast is made. FSDP1 allocates the 16-bit copy before it
        moves the shard (FlatParamHandle._use_low_precision_shard: _alloc_storage(_mp_shard), then
        _mp_shard.copy_(_local_shard.to(device))); FSDP2 moves, then casts (FSDPParam.all_gather_inputs:
        sharded_param_data.to(device), then _to_dtype_if_needed), the moved copy dropped as it returns."""
        cache, stream = self.cache, self.staging
        if not cast:
            return cache.take(staged, stream=stream)
        if self.gathering.framework == "fsdp1":
            copy = cache.take(staged, stream=stream)
            cache.give(cache.take(cast, stream=stream))
            return copy
        moved = cache.take(cast, stream=stream)
        copy = cache.take(staged, stream=stream)
        cache.give(moved)
        return copy

    def _gather(self, size: float, staged: float, cast: float) -> Allocation:
        """One unit's all-gather output, after its shard's GPU copy (offloaded or cast), which it frees."""
        cache = self.cache
        if not staged:
            return cache.take(size, stream=GATHER)
        copy = self._stage(staged, cast)
        gathered = cache.take(size, stream=GATHER)
        cache.give(copy)
        return gathered

    def _gather_root(self) -> Allocation:
        """The root unit's all-gather output (``_gather``)."""
        gathering = self.gathering
        return self._gather(gathering.root, gathering.staged_root, gathering.cast_root)

    def _gather_unit(self) -> Allocation:
        """A decoder unit's all-gather output (``_gather``)."""
        gathering = self.gathering
        return self._gather(gathering.unit, gathering.staged_unit, gathering.cast_unit)

    def _carried(self) -> Allocation:
        return self.cache.carry or EMPTY

    def forward_begins(self) -> None:
        gathering, cache = self.gathering, self.cache
        if gathering.framework == "fsdp1":
            self.root = [self._gather_root()]
            self.held = cache.take(gathering.unit, stream=GATHER)  # the forward's unit (its copy: each layer's)
        else:
            cache.carry = self._gather_root()
            self.root = [cache.take(gathering.root)]

    def layer_forward(self) -> Allocation:
        """Before a layer's forward: what the caller frees after it (FSDP2: the copied-out parameters)."""
        gathering, cache = self.gathering, self.cache
        if gathering.framework == "fsdp1":  # the unit is held (the class docstring); a shard's copy comes and goes
            if gathering.staged_unit:
                cache.give(self._stage(gathering.staged_unit, gathering.cast_unit))
            return EMPTY
        gathered = self._gather_unit()
        current = self._carried()
        cache.carry = gathered
        cache.give(current)  # the previous group's all-gather output, freed before this copy-out
        return cache.take(gathering.unit)

    def forward_ends(self) -> None:
        if self.gathering.framework == "fsdp1":
            self.cache.give(self.held)
        else:  # the last group's all-gather output, flushed
            self.cache.give(self._carried())
            self.cache.carry = None

    def loss(self) -> None:
        """The root's pre-backward hook prefetches the last layer's unit."""
        gathered = self._gather_unit()
        if self.gathering.framework == "fsdp1":
            self.held = gathered
        else:
            self.cache.carry = gathered

    def layer_backward(self, prefetch: bool) -> Allocation:
        """Before a layer's backward: what the caller frees when the layer's gradients are reduced (its unit);
        the next layer's unit is gathered ahead unless this is the first layer."""
        gathering, cache = self.gathering, self.cache
        if gathering.framework == "fsdp1":  # a second unit while a layer runs, the held one after the last
            if prefetch:
                if gathering.staged_unit:
                    return self._gather_unit()
                return cache.take_all(self.unit, stream=GATHER)
            held, self.held = self.held, EMPTY
            return held
        params = cache.take(gathering.unit)  # copied out; the all-gather output freed at once in backward
        cache.give(self._carried())
        cache.carry = self._gather_unit() if prefetch else None
        return params

    def backward_ends(self) -> None:
        for allocation in self.root:
            self.cache.give(allocation)
        self.root = []
        self.cache.carry = None


class SimulatedStep:
    """One training step's tensors, in the order a step takes and frees them, run through the allocator:
    the weights (loaded once); per layer in forward, its autocast weight copies and kept activations, and
    a transient; the logits, their fp32 upcast (freed once the loss is computed) and the log-softmax; the
    loss gradients and the LM head's gradient; per layer in backward, the recomputed tensors and the
    backward's transients, the layer's gradients, then its activations freed; the embedding's gradient;
    at the first step's optimizer step the states (created lazily), then the step's temporaries, then
    the gradients freed (``zero_grad(set_to_none=True)``). The data-parallel gradient buckets as
    ``training.bucket_lifetime`` has them: taken with the weights, or as each backward begins and freed once its
    gradients are reduced. Gradient accumulation runs a second micro-batch with the gradients alive. Totals are the
    phase model's; only their split into tensors is read here.

    How long the loop holds the model outputs (``loop``), and a returned KV cache (``use_cache``), are the
    phase model's alone: the simulation runs one lifetime for every loop, the returned logits released once
    the loss backward is done. Simulated as each loop holds them, the held blocks filled holes the cache
    would otherwise keep, and the cache above the live peak could fall by more than they added to the phase
    total (a review found a job that held more reading lower; so did the Trainer against a loop that holds
    the outputs, by a few hundred bytes): with one simulation per step shape, holding more never reads as
    less."""

    def __init__(
        self,
        setup: TrainingSetup,
        states: ModelStates,
        acts: MicroBatchActivations,
        evaluation: Evaluation | None = None,
        fast_forward: bool = True,
    ) -> None:
        arch, job = setup.architecture, setup.job
        self.cache = CachingAllocator(expandable=job.expandable_segments, fast_forward=fast_forward)
        self.job, self.states, self.acts, self.evaluation = job, states, acts, evaluation
        self.bucket: Allocation | None = None  # the buckets a backward took, while they live
        self.layer_shares, self.edge_shares, self.layers = _parameter_shares(setup)
        elements = self.layers * sum(self.layer_shares) + sum(self.edge_shares)
        self.per_element = 1 / elements if elements else 0.0
        widths = input_widths(setup)
        q, kv = arch.q_width / setup.tensor_parallel, arch.kv_width / setup.tensor_parallel
        matrices = 3 if arch.mlp == "gated" else 1
        # One layer's saved tensors by width: the norms' outputs, q, k, v and the attention output, the MLP's.
        shares = (widths["norm"], widths["norm2"], q, kv, kv, q) + (widths["mlp"],) * (matrices + 1)
        self.layer_widths = shares
        # 1F1B keeps a whole model's activations on the first stage whatever the PP degree; offloading
        # keeps two layers' on the GPU: per layer of this GPU, the kept bytes scale by that ratio.
        on_gpu = acts.layers_kept / max(self.layers, 1)
        full = job.checkpointing == "full"
        self.kept = Tensors.of(
            _pairs((acts.kept_per_layer * on_gpu,) if full else _split(acts.kept_per_layer * on_gpu, shares))
        )
        self.recompute = Tensors.of(_pairs(_split(acts.recomputed, shares)))
        self.forward_transient = Tensors.of([(acts.layer_forward_temporaries, 1)])
        # A layer's backward holds the gradients of the down_proj input, of act and up, and of gate (a plain
        # MLP: two of them), as _activations counts layer_backward_temporaries.
        gradients = 3 if arch.mlp == "gated" else 2
        self.backward_transients = Tensors.of([(acts.layer_backward_temporaries / gradients, gradients)])
        self.copies, self.edge_copies, _ = self._params(states.autocast_copies)
        self.grads, self.embedding_grad, self.head_grad = self._params(states.gradients)
        # DeepSpeed ZeRO-3 reduces every gradient into a flat buffer it allocates as it initialises and keeps
        # (zero_step): one block taken with the weights, none a layer's backward takes.
        self.gradient_buffer = states.gradients if states.zero_step and states.zero_step.keeps_gradients else 0.0
        if self.gradient_buffer:
            self.grads = self.embedding_grad = self.head_grad = Tensors((), 0)
        # DeepSpeed ZeRO-2 copies each gradient autograd makes into its bucket and frees it (contiguous_gradients:
        # ``grad_reduc.data = new_grad_tensor.data``), in every micro-batch; the first reduce allocates its buffer
        # whole, a backward's own (zero_step.layers_before_first_reduce).
        zero = states.zero_step
        self.buffer_after_layers = zero.buffer_after_layers if zero is not None else None
        self.buffer_bytes = zero.partition_gradients if zero is not None else 0.0
        # The copies a bucket's reduce makes (in a layer's backward, at the epilogue): ZeRO-3's on its reduce
        # stream, ZeRO-2 offload's norm and overflow copies on the default one.
        during, after = states.reduce_copies
        self.reduce_copies = Tensors.of([(during, 1)]), Tensors.of([(after, 1)])
        self.copy_stream = REDUCE if job.sharding == "zero3" else 0
        gathering = states.gathering
        self.units = _Units(self.cache, gathering) if gathering is not None else None
        if gathering is not None:
            # FSDP1 parameter offload keeps each shard on the GPU until backward ends (ModelStates.saved_grad_shards).
            self.saved = states.saved_grad_shards > 0
            if self.saved:
                self.grads, self.embedding_grad, self.head_grad = self._params(states.saved_grad_shards)
            self.reduced = self._params(gathering.reduced)
            self.unit_gradient = gathering.unit_gradient
        if arch.tie_embeddings:
            # A tied LM head's gradient of the shared weight is made at the loss and waits in its input buffer
            # for the embedding's backward, which adds to it (training.gradient_shares): the shared
            # weight's gradient is taken as the head's, none at the embedding.
            self.embedding_grad, self.head_grad = self.head_grad, self.embedding_grad
            if gathering is not None:
                reduced_layer, reduced_embedding, reduced_head = self.reduced
                self.reduced = (reduced_layer, reduced_head, reduced_embedding)
        # FSDP1 wrapping a model that is not yet on the GPU (``wrap_model``): each unit's tensors as stored, and
        # FSDP's root.
        self.wrapping: tuple[tuple[tuple[float, ...], ...], tuple[float, ...], int] | None = None
        if gathering is not None and gathering.framework == "fsdp1" and job.fsdp_loading != "sharded":
            layer, root = wrapped_unit_elements(arch)
            # Each decoder unit at its own size (a hybrid's or an MoE's dense layers are smaller than the largest,
            # which the gathered unit is sized by), split as a standard layer's tensors are.
            largest = arch.largest_layer_params
            units = tuple(
                _split(gathering.stored_unit * arch.layer_params(index) / largest, layer)
                for index in range(self.layers)
            )
            self.wrapping = (units, _split(gathering.stored_root, root), setup.data_parallel)

    def _params(self, total: float, per_parameter: int = 1) -> tuple[Tensors, Tensors, Tensors]:
        """A per-parameter total (gradients, states, copies) as tensors: one layer's, the embedding's and the
        untied LM head's (``per_parameter`` tensors of each shape)."""
        unit = total * self.per_element / per_parameter
        layer = Tensors.of([(unit * share, per_parameter) for share in self.layer_shares])
        edges = [Tensors.of([(unit * share, per_parameter)]) for share in self.edge_shares]
        empty = Tensors((), 0)
        return layer, (edges[0] if edges else empty), (edges[1] if len(edges) > 1 else empty)

    def _take(self, tensors: Tensors, times: int = 1) -> Allocation:
        return self.cache.take_all(tensors, times)

    def _take_all_layers(self, parts: tuple[Tensors, Tensors, Tensors]) -> list[Allocation]:
        """A per-parameter total as ``_params`` splits it (one layer's tensors, the embedding's, the LM
        head's), taken for every layer of this GPU and the edges."""
        layer, embedding, head = parts
        return [self._take(layer, self.layers), self._take(embedding), self._take(head)]

    def _give(self, *held: Allocation) -> None:
        for allocation in held:
            self.cache.give(allocation)

    def _load(self) -> None:
        """The weights, loaded once and never freed (as FSDP1 wraps them where the model is not yet on the GPU,
        ``wrap_model``), and a QLoRA preparation's copies in the order it makes and frees them
        (``preparation_events``): what either frees stays cached for the step."""
        states = self.states
        events = preparation_events(states)
        gathered = states.gathered if self.units is None else 0.0  # gathered unit by unit (_Units) otherwise
        weights = states.weights + gathered - _prepared_bytes(states)
        if self.wrapping is not None:
            job = self.job
            broadcast, offloaded = job.fsdp_loading == "broadcast", job.offload_parameters != "none"
            units, root, world = self.wrapping
            weights -= wrap_model(self.cache, units, root, world, broadcast, offloaded)
            # The training script resets the peaks before its first step (reset_peak_memory_stats): the live
            # bytes start again from the shards, the reserved ones from the segments the wrap mapped.
            self.cache.reset_peaks()
        self.cache.take(weights)
        if self.gradient_buffer:
            self.cache.take(self.gradient_buffer)
        if states.bucket_lifetime == "step":  # DDP's, as it wraps the model; ZeRO-3's, as its optimizer initialises
            self.cache.take(states.reduce_buckets / states.bucket_tensors, states.bucket_tensors)
        held: dict[int, Allocation] = {}
        for take, tensor, size in events:
            if take:
                held[tensor] = self.cache.take(size)
            else:
                self.cache.give(held.pop(tensor))

    def run(self, steps: int = 2) -> tuple[int, int]:
        """(peak allocated, peak reserved) over ``steps`` steps, the first creating the optimizer states."""
        states, job = self.states, self.job
        self._load()
        for step in range(steps):
            grads: list[Allocation] = []
            micro_batch_run = self._micro_batch if self.units is None else self._gathered_micro_batch
            micro_batches = 2 if job.gradient_accumulation > 1 else 1
            for micro_batch in range(micro_batches):
                grads += micro_batch_run(first=micro_batch == 0)
                # a backward's buckets go once its gradients are reduced, at the accumulation boundary under
                # "accumulation"
                last = micro_batch == micro_batches - 1
                if self.bucket is not None and (last or states.bucket_lifetime != "accumulation"):
                    self._give(self.bucket)
                    self.bucket = None
            if step == 0:  # every layer's states (``_params`` gives one layer's tensors), then the edges'
                self._take_all_layers(self._params(states.optimizer, 2))
            if states.zero_step is not None:
                grads = self._zero_step(states.zero_step, grads)
            elif not job.optimizer_in_backward:
                temporaries = self._take_all_layers(self._params(states.step_temporaries))
                self._give(*temporaries, self.cache.take(states.paged_optimizer))
            self._give(*grads)  # zero_grad(set_to_none=True)
        if self.evaluation is not None:
            self._evaluate(self.evaluation)
        return self.cache.peak_live, self.cache.reserved_peak()

    def _evaluate(self, evaluation: Evaluation) -> None:
        """An evaluation after the steps (finetune.evaluation; training_memory._evaluation, whose totals these are),
        in the blocks the steps left cached, so that its tensors map new segments only where no cached block holds
        them (a batch's logits larger than any block training freed are a segment of their own). The predictions
        kept for compute_metrics, as one tensor through the forward; per layer its autocast weight copies and its
        keys and values (use_cache), held through the forward, and its tensors (split by width, as a training
        layer's) and transient, taken and freed, as nothing is saved for backward (FSDP's units gathered as in
        training); the logits, their fp32 upcast and cross_entropy's log-softmax of it, live at once; then, the
        forward's tensors freed, what the window's last batch adds (``Evaluation.after_forward``)."""
        cache, units, acts = self.cache, self.units, evaluation.activations
        kept = cache.take(evaluation.kept)
        # Each layer's keys and values where the model caches them (use_cache), held to the forward's end.
        layer_cache = Tensors.of([(evaluation.cache / max(self.layers, 1) / 2, 2)])
        layer = Tensors.of([*_pairs(_split(acts.per_layer, self.layer_widths)), (acts.layer_forward_temporaries, 1)])
        gathers = units is not None and units.gathers_in_forward
        edge_copies = cache.take_all(self.edge_copies)
        if units is not None:
            units.forward_begins()

        def forward(_: None) -> tuple[Allocation, Allocation]:
            unit = units.layer_forward() if units is not None and gathers else EMPTY
            held = cache.take_all(self.copies), cache.take_all(layer_cache)
            cache.cycle(layer)
            cache.give(unit)
            return held

        copies = [allocation for held in cache.repeat(forward, [None] * self.layers) for allocation in held]
        if units is not None:
            units.forward_ends()
        returned = cache.take(acts.returned_logits)
        upcast = cache.take(acts.upcast)
        log_softmax = cache.take(acts.log_softmax)  # cross_entropy's, of the upcast logits, which live until it returns
        self._give(upcast, returned, log_softmax, *copies, edge_copies)
        if units is not None:
            units.backward_ends()  # the root unit resharded (FSDP1 keeps it gathered from forward on)
        self._give(kept, *[cache.take(size) for size in evaluation.after_forward])

    def _zero_step(self, zero: ZeroStep, grads: list[Allocation]) -> list[Allocation]:
        """DeepSpeed ZeRO's step (zero_step's moments): ZeRO-1 copies the partition's gradients into a buffer of
        their own as backward ends and drops every gradient; the norm's fp64 copy comes and goes; then per
        sub-group the gradients are flattened, cast to fp32 (the flat copy freed) and, but under ZeRO-3, the
        16-bit gradients released before the update steps the fp32 partition. The gradients still held, for
        ``run`` to free."""
        cache, states = self.cache, self.states
        if zero.stage == "zero1":  # the partition's gradients copied into a buffer, then every gradient dropped
            buffer = cache.take(zero.partition_gradients)
            self._give(*grads)
            grads = [buffer]
        if zero.overflow_check:  # fp16: ZeRO-3 checks its buffer on its reduce-and-partition stream
            cache.cycle(Tensors.of(_pairs(zero.overflow_check)), stream=REDUCE if zero.keeps_gradients else 0)
        cache.cycle(Tensors.of([(zero.norm_copy, 1)]))
        # ZeRO-3's sub-groups one after another, each the largest's size (the blocks each takes back, alike): run as
        # layers are (``repeat``), since a model of millions of sub-groups (1e9 elements each) steps them alike.
        share = zero.sub_group_share

        def sub_group(freed: tuple[Allocation, ...]) -> None:
            flat = cache.take(zero.flat_copy)
            gradient = cache.take(zero.fp32_gradients) if zero.fp32_gradients else flat
            if zero.fp32_gradients:
                cache.give(flat)
            self._give(*freed)
            temporaries = cache.take(states.step_temporaries * share)
            self._give(temporaries, cache.take(states.paged_optimizer * share), gradient)

        # The first frees the 16-bit gradients but under ZeRO-3 (ZeRO-1 and -2: their one sub-group); ``repeat``
        # takes the rest, which free nothing else: runs that read the cache alone, as its periods require.
        kept = grads if zero.keeps_gradients else []
        sub_group(() if zero.keeps_gradients else tuple(grads))
        cache.repeat(lambda _: sub_group(()), Alike(max(1, round(1 / share)) - 1), keep=False)
        return kept

    def _loss(self) -> tuple[Allocation, Allocation, Allocation]:
        """The loss after the last layer's forward: the returned logits, the upcast copy (taken and freed), the
        log-softmax, the buckets a backward takes as it begins (``bucket``, which ``run`` frees) and the loss
        gradients in two halves; the caller frees the three it returns once the loss backward is done. The returned
        logits go then whatever the loop (the class docstring says why how long a loop holds them is the phase model's
        alone)."""
        acts, cache = self.acts, self.cache
        returned = cache.take(acts.returned_logits)
        self._give(cache.take(acts.upcast))
        log_softmax = cache.take(acts.log_softmax)
        states = self.states
        if states.reduce_buckets and states.bucket_lifetime in ("backward", "accumulation"):
            # DeepSpeed ZeRO-1/2 allocate their buckets as backward begins, dropping the last micro-batch's first
            # (stage_1_and_2.py backward: ``self.ipg_buffer = []``, then the new ones)
            if self.bucket is not None:
                self._give(self.bucket)
            self.bucket = cache.take(states.reduce_buckets / states.bucket_tensors, states.bucket_tensors)
        return cache.take(acts.loss_gradients / 2, 2), log_softmax, returned

    def _micro_batch(self, first: bool) -> list[Allocation]:
        """Forward and backward of one micro-batch, layer by layer; the gradients it creates (none but the
        first micro-batch's: the later ones accumulate into them)."""
        job, cache = self.job, self.cache
        # Bound once: the layers below call them thousands of times.
        take, give, cycle = cache.take_all, cache.give, cache.cycle
        copies, kept_tensors, forward_transient = self.copies, self.kept, self.forward_transient
        edge_copies = take(self.edge_copies)

        def forward(_: None) -> tuple[Allocation, Allocation]:
            held = take(copies), take(kept_tensors)
            cycle(forward_transient)  # the layer's transient comes and goes
            return held

        kept = cache.repeat(forward, [None] * self.layers)
        loss = self._loss()
        copied = self.buffer_after_layers is not None  # ZeRO-2: each gradient copied into the bucket and freed
        if copied:
            cycle(self.head_grad)
        grads = [take(self.head_grad)] if first and not copied else []
        self._give(*loss)

        recompute, backward_transients, layer_grads = self.recompute, self.backward_transients, self.grads
        in_backward = job.optimizer_in_backward

        (scatter, epilogue), copy_stream = self.reduce_copies, self.copy_stream

        def backward(held: tuple[Allocation, Allocation]) -> Allocation:
            # The layer's gradients are taken before its activations are freed; the next layer's can use
            # the blocks this one frees.
            again = take(recompute)
            cycle(backward_transients)
            if scatter.large or scatter.small:
                cycle(scatter, copy_stream)
            if copied:
                cycle(layer_grads)
            taken = take(layer_grads) if first and not copied else EMPTY
            give(again)
            give(held[0])
            give(held[1])
            if in_backward:
                give(taken)  # stepped and freed as soon as each is complete
                return EMPTY
            return taken

        if self.buffer_after_layers is None:
            grads += cache.repeat(backward, kept[::-1])
            if epilogue.large or epilogue.small:  # the epilogue reduces what is left in the bucket
                cycle(epilogue, copy_stream)
        else:
            # ZeRO-2: the first micro-batch's buffer is kept for the step; a later one's is added to it and freed
            before, after = kept[::-1][: self.buffer_after_layers], kept[::-1][self.buffer_after_layers :]
            cache.repeat(backward, before)
            buffer = cache.take(self.buffer_bytes)
            cache.repeat(backward, after)
            if first:
                grads.append(buffer)
            else:
                give(buffer)
        self._give(edge_copies)
        if copied:
            cycle(self.embedding_grad)
        return grads + ([self._take(self.embedding_grad)] if first and not copied else [])

    def _gathered_micro_batch(self, first: bool) -> list[Allocation]:
        """``_micro_batch`` under FSDP: the units gathered around each layer (``_Units``), each unit's
        unsharded gradient, and the sharded gradients on the stream that reduces them: the first
        micro-batch's kept, a later one's allocated, added to them and freed (_post_backward_hook:
        _saved_grad_shard += new_sharded_grad; FSDP2 foreach_reduce)."""
        job, cache = self.job, self.cache
        units = self.units
        assert units is not None
        take, give, cycle = cache.take_all, cache.give, cache.cycle
        stream, saved = REDUCE, self.saved
        creates = first or saved  # gradients a micro-batch allocates and keeps

        def reduce(tensors: Tensors, reduced: Tensors) -> Allocation:
            """A unit's gradients reduced: kept (the first micro-batch's, or FSDP1 offload's shards), or
            allocated, added to the kept ones and freed; FSDP2 offload's copied to the host and freed."""
            if reduced.large or reduced.small:
                cycle(reduced, stream)
            if creates:
                return take(tensors, stream=stream)
            cycle(tensors, stream)
            return EMPTY

        edge_copies = take(self.edge_copies)
        units.forward_begins()
        gathers = units.gathers_in_forward

        def forward(_: None) -> tuple[Allocation, Allocation]:
            unit = units.layer_forward() if gathers else EMPTY
            held = take(self.copies), take(self.kept)
            cycle(self.forward_transient)
            give(unit)  # resharded after the layer's forward
            return held

        kept = cache.repeat(forward, [None] * self.layers)
        units.forward_ends()
        loss = self._loss()
        units.loss()
        gathering = units.gathering
        # The LM head's unsharded weight gradient waits for the root's post-backward (full fine-tuning);
        # otherwise the head's gradients are reduced at once.
        held_head = cache.take(gathering.head_gradient) if gathering.root_gradient else EMPTY
        head = EMPTY if gathering.root_gradient else reduce(self.head_grad, self.reduced[2])
        self._give(*loss)
        unit_gradient, layer_grads, layer_reduced = self.unit_gradient, self.grads, self.reduced[0]
        recompute, backward_transients = self.recompute, self.backward_transients
        # The common case, bound once: an FSDP1 unit gathered ahead without a staged copy, the gradients kept.
        plain = units.gathering.framework == "fsdp1" and not units.gathering.staged_unit
        fsdp2_inputs = units.gathering.framework == "fsdp2" and bool(unit_gradient)
        plain_reduce = creates and not (layer_reduced.large or layer_reduced.small)
        unit_tensors = units.unit

        def backward_layer(held: tuple[Allocation, Allocation], prefetch: bool) -> Allocation:
            unit = take(unit_tensors, stream=GATHER) if plain and prefetch else units.layer_backward(prefetch)
            again = take(recompute)
            cycle(backward_transients)
            gradient = cache.take(unit_gradient) if unit_gradient else EMPTY  # autograd's, until it is reduced
            give(unit)  # the post-backward hook reshards, then reduce-scatters
            # FSDP2 copies the gradients into a reduce-scatter input it keeps until the next group's post-backward
            # (the phase model counts it there; here it goes with this layer, the same blocks a layer later)
            scatter = cache.take(unit_gradient) if fsdp2_inputs else EMPTY
            taken = take(layer_grads, stream=stream) if plain_reduce else reduce(layer_grads, layer_reduced)
            give(gradient)
            give(scatter)
            give(again)
            give(held[0])
            give(held[1])
            if job.optimizer_in_backward:
                give(taken)
                return EMPTY
            return taken

        def backward(held: tuple[Allocation, Allocation]) -> Allocation:
            return backward_layer(held, True)

        # Every layer but the first gathers the next one's unit ahead; the first runs apart.
        layers = kept[::-1]
        grads = [head, *cache.repeat(backward, layers[:-1])]
        grads += [backward_layer(held, False) for held in layers[-1:]]
        self._give(edge_copies)
        if gathering.root_gradient:  # the root's gradients: the embedding's, the flat one beside them, reduced
            embedding = cache.take(gathering.embedding_gradient)
            flat = cache.take(gathering.root_gradient)
            self._give(held_head, embedding)
            grads.append(reduce(self.head_grad, self.reduced[2]))
            grads.append(reduce(self.embedding_grad, self.reduced[1]))
            cache.give(flat)
        else:
            grads.append(reduce(self.embedding_grad, self.reduced[1]))
        units.backward_ends()
        if saved:  # prepare_gradient_for_optim frees each _saved_grad_shard: the host holds the gradients
            self._give(*grads)
            return []
        return grads


def _pairs(sizes: tuple[float, ...]) -> list[tuple[float, int]]:
    return [(size, 1) for size in sizes]
