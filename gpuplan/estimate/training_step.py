"""One training step's tensors run through PyTorch's caching allocator (gpuplan/estimate/allocator.py), in
the order a step takes and frees them: what ``max_memory_reserved`` adds to the tensors' peak
(training_memory.estimate_training reads it as the allocator's cache)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpuplan.estimate.allocator import EMPTY, Allocation, CachingAllocator, Tensors
from gpuplan.estimate.training import TrainingSetup, adapted_shapes, input_widths

if TYPE_CHECKING:
    from gpuplan.estimate.training_memory import _Activations, _States


def _preparation_events(states: _States) -> tuple[tuple[bool, int, float], ...]:
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


def _prepared_bytes(states: _States) -> float:
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
    layers = math.ceil(arch.layers / setup.pipeline_parallel)
    if setup.is_adapter:
        rank = job.lora_rank
        layer = tuple(rank * side for name in job.lora_targets if shapes[name][0] for side in shapes[name])
        return layer, (), layers
    experts = {
        name: arch.experts if arch.is_moe and name in ("gate_proj", "up_proj", "down_proj") else 1 for name in shapes
    }
    layer = tuple(d_in * d_out * experts[name] for name, (d_in, d_out) in shapes.items() if d_in)
    edges = (arch.vocab * arch.hidden,) * (1 if arch.tie_embeddings else 2)
    if setup.data_parallel > 1 and job.sharding in ("zero2", "zero3", "fsdp"):
        return (sum(layer),), (sum(edges),), layers
    return layer, edges, layers


class _Step:
    """One training step's tensors, in the order a step takes and frees them, run through the allocator:
    the weights (loaded once); per layer in forward, its autocast weight copies and kept activations, and
    a transient; the logits, their fp32 upcast (freed once the loss is computed) and the log-softmax; the
    loss gradients and the LM head's gradient; per layer in backward, the recomputed tensors and the
    backward's transients, the layer's gradients, then its activations freed; the embedding's gradient;
    at the first step's optimizer step the states (created lazily), then the step's temporaries, then
    the gradients freed (``zero_grad(set_to_none=True)``). Gradient accumulation runs a second micro-batch
    with the gradients alive. Totals are the phase model's; only their split into tensors is read here.

    How long the loop holds the model outputs (``loop``), and a returned KV cache (``use_cache``), are the
    phase model's alone: the simulation runs one lifetime for every loop, the returned logits released once
    the loss backward is done. Simulated as each loop holds them, the held blocks filled holes the cache
    would otherwise keep, and the cache above the live peak could fall by more than they added to the phase
    total (a review found a job that held more reading lower; so did the Trainer against a loop that holds
    the outputs, by a few hundred bytes): with one simulation per step shape, holding more never reads as
    less."""

    def __init__(self, setup: TrainingSetup, states: _States, acts: _Activations, fast_forward: bool = True) -> None:
        arch, job = setup.architecture, setup.job
        self.cache = CachingAllocator(expandable=job.expandable_segments, fast_forward=fast_forward)
        self.job, self.states, self.acts = job, states, acts
        self.layer_shares, self.edge_shares, self.layers = _parameter_shares(setup)
        elements = self.layers * sum(self.layer_shares) + sum(self.edge_shares)
        self.per_element = 1 / elements if elements else 0.0
        widths = input_widths(setup)
        q, kv = arch.q_width / setup.tensor_parallel, arch.kv_width / setup.tensor_parallel
        matrices = 3 if arch.mlp == "gated" else 1
        # One layer's saved tensors by width: the norms' outputs, q, k, v and the attention output, the MLP's.
        shares = (widths["norm"], widths["norm2"], q, kv, kv, q) + (widths["mlp"],) * (matrices + 1)
        # 1F1B keeps a whole model's activations on the first stage whatever the PP degree; offloading
        # keeps two layers' on the GPU: per layer of this GPU, the kept bytes scale by that ratio.
        on_gpu = acts.layers_kept / max(self.layers, 1)
        full = job.checkpointing == "full"
        self.kept = Tensors.of(
            _pairs((acts.kept_per_layer * on_gpu,) if full else _split(acts.kept_per_layer * on_gpu, shares))
        )
        self.recompute = Tensors.of(_pairs(_split(acts.per_layer, shares) if job.checkpointing != "none" else ()))
        self.forward_transient = Tensors.of([(acts.layer_forward_temporaries, 1)])
        # A layer's backward holds the gradients of the down_proj input, of act and up, and of gate (a plain
        # MLP: two of them), as _activations counts layer_backward_temporaries.
        gradients = 3 if arch.mlp == "gated" else 2
        self.backward_transients = Tensors.of([(acts.layer_backward_temporaries / gradients, gradients)])
        self.copies, self.edge_copies, _ = self._params(states.autocast_copies)
        self.grads, self.embedding_grad, self.head_grad = self._params(states.gradients)

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

    def _give(self, *held: Allocation) -> None:
        for allocation in held:
            self.cache.give(allocation)

    def _load(self) -> None:
        """The weights, loaded once and never freed, and a QLoRA preparation's copies in the order it makes and
        frees them (``_preparation_events``): what it frees stays cached for the step."""
        states = self.states
        events = _preparation_events(states)
        self.cache.take(states.weights + states.gathered - _prepared_bytes(states))
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
            for micro_batch in range(2 if job.gradient_accumulation > 1 else 1):
                grads += self._micro_batch(first=micro_batch == 0)
            if step == 0:
                for part in self._params(states.optimizer, 2):
                    self._take(part)
            if not job.optimizer_in_backward:
                temporaries = [self._take(part) for part in self._params(states.step_temporaries)]
                self._give(*temporaries, self.cache.take(states.paged_optimizer))
            self._give(*grads)  # zero_grad(set_to_none=True)
        return self.cache.peak_live, self.cache.reserved_peak()

    def _micro_batch(self, first: bool) -> list[Allocation]:
        """Forward and backward of one micro-batch, layer by layer; the gradients it creates (none but the
        first micro-batch's: the later ones accumulate into them)."""
        acts, job, cache = self.acts, self.job, self.cache
        # Bound once: the layers below call them thousands of times.
        take, give, cycle = cache.take_all, cache.give, cache.cycle
        edge_copies = take(self.edge_copies)

        def forward(_: None) -> tuple[Allocation, Allocation]:
            held = take(self.copies), take(self.kept)
            cycle(self.forward_transient)  # the layer's transient comes and goes
            return held

        kept = cache.repeat(forward, [None] * self.layers)
        # The returned logits, released once the loss backward is done whatever the loop (the class
        # docstring says why how long a loop holds them is the phase model's alone).
        returned = cache.take(acts.returned_logits)
        self._give(cache.take(acts.upcast))
        log_softmax = cache.take(acts.log_softmax)
        loss = cache.take(acts.loss_gradients / 2, 2)
        grads = [take(self.head_grad)] if first else []
        self._give(loss, log_softmax, returned)

        def backward(held: tuple[Allocation, Allocation]) -> Allocation:
            # The layer's gradients are taken before its activations are freed; the next layer's can use
            # the blocks this one frees.
            again = take(self.recompute)
            cycle(self.backward_transients)
            taken = take(self.grads) if first else EMPTY
            for allocation in (again, *held):
                give(allocation)
            if job.optimizer_in_backward:
                give(taken)  # stepped and freed as soon as each is complete
                return EMPTY
            return taken

        grads += cache.repeat(backward, kept[::-1])
        self._give(edge_copies)
        return grads + ([self._take(self.embedding_grad)] if first else [])


def _pairs(sizes: tuple[float, ...]) -> list[tuple[float, int]]:
    return [(size, 1) for size in sizes]
