"""DeepSpeed ZeRO's optimizer step on the GPU: the copies it makes of the gradients, moment by moment.

A step without optimizer offload (microsoft/DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py
``DeepSpeedZeroOptimizer.step``, stage3.py ``DeepSpeedZeroOptimizer_Stage3.step``):

0. By then only the partition's gradients are left: backward's epilogue keeps this rank's pieces in
   ``averaged_gradients`` and drops every parameter's ``.grad`` (``independent_gradient_partition_epilogue``:
   ``self.zero_grad(set_to_none=True)``, "All gradients required by the step are in
   self.averaged_gradients"). ZeRO-1, which reduces once backward is done, first copies the partition's
   gradients into a buffer of their own beside every whole gradient (``copy_grads_in_partition`` under
   contiguous_gradients, the default): the phase model's end of backward holds both. ZeRO-2 copies them into
   that buffer during backward, as each bucket is reduced: it allocates it whole at the first reduce
   (``layers_before_first_reduce``), a new one every micro-batch, the first micro-batch's kept by
   ``averaged_gradients``' views and the later ones added to it at their epilogue (DeepSpeed 0.16's
   ``accumulated_grad.add_(new_avg_grad)``; 0.17.6 and later ``all_grad_tensors``), so a later backward holds two.
1. **Under fp16, the overflow check** first (``check_overflow``): ZeRO-1 and ZeRO-2 test each gradient of the
   partition in turn (``_has_inf_or_nan``: an fp32 copy, isnan, isinf and their union as bools, and that as
   fp32: 4 + 1 + 1 + 1 + 4 bytes an element of one gradient, all live as it returns); ZeRO-3 tests its whole
   gradient buffer (``torch.isinf(grad_partitions_flat_buffer).any()``, then isnan: a byte an element of the
   partition, on its reduce-and-partition stream).
   **The norm** (``scaled_global_norm`` -> ``get_grad_norm_direct``): for each gradient of this rank's
   partition, ``torch.linalg.vector_norm(g.data.double())`` (ZeRO-3: ``g.double().norm(2)``), an fp64 copy
   of one gradient at a time.
2. **The flatten**: ``self.flatten(averaged_gradients)`` copies the partition's gradients into one flat
   tensor in their dtype and ``.to(fp32)`` casts it to the master weights' dtype, a second copy (``.to``
   returns the flat copy itself where the dtypes agree); the 16-bit flat copy goes as the statement ends.
   ZeRO-3 does the same per sub-group, one at a time (``_prepare_fp32_grad_for_sub_group``): its parameters'
   partitions in order until they reach ``sub_group_size`` elements (``_create_fp16_sub_groups``), so the
   largest is under ``sub_group_size`` plus one parameter's partition.
3. **The update**: ZeRO-1 and ZeRO-2 release the 16-bit gradients (``averaged_gradients[i] = None``, the
   last reference to their contiguous buffer) and step the fp32 partition with its fp32 gradient, then
   drop it (``single_partition_of_fp32_groups[i].grad = None``). ZeRO-3's gradients live in a flat
   buffer it allocates as it initialises and keeps all run (``grad_partitions_flat_buffer``), so they stay
   beside each sub-group's fp32 gradient.

With optimizer offload the step runs on the host from gradients copied there during backward: none of this
is on the GPU. Megatron's distributed optimizer is not DeepSpeed's: none of this either.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpuplan.estimate.training import (
    SHARDED_WEIGHT_BYTES,
    reduce_buckets,
    runs_deepspeed_zero,
    stage_edges,
)
from gpuplan.estimate.training_step import wrapped_unit_elements
from gpuplan.records import record
from gpuplan.units import DTYPE_BYTES

if TYPE_CHECKING:
    from gpuplan.estimate.training import TrainingSetup

# zero_optimization.sub_group_size's default (deepspeed/runtime/zero/config.py: Field(pp_int(1e9))).
SUB_GROUP_ELEMENTS = 10**9
FP64_BYTES = 8
FP32_BYTES = DTYPE_BYTES["fp32"]  # a ``.float()`` cast (of the flattened gradients, of an offloaded piece)
# ZeRO-1/2's fp16 overflow check of one gradient, bytes an element (_has_inf_or_nan): an fp32 copy, three bool
# tensors and the union's fp32 copy, as the module docstring lists them.
OVERFLOW_CHECK_PARTS = (4, 1, 1, 1, 4)


@record
class ZeroStep:
    """The gradient copies of one rank's step (bytes), and what stays beside them."""

    stage: str  # zero1, zero2 or zero3
    partition_gradients: float  # the 16-bit gradients left for the step: the partition's (whole parameters)
    norm_copy: float  # the fp64 copy of the largest gradient (piece) in the partition
    flat_copy: float  # the largest sub-group's gradients flattened, in their dtype
    fp32_gradients: float  # their cast to the master weights' dtype (0 where the dtypes agree)
    sub_group_share: float  # the largest sub-group's share of the partition (ZeRO-3; else 1)
    keeps_gradients: bool  # ZeRO-3: the gradients' flat buffer lives all run, through the update
    # Under fp16: the overflow check's tensors (bytes each, taken together and freed), ZeRO-1/2's of one
    # gradient, ZeRO-3's of its buffer (a side stream's); () otherwise.
    overflow_check: tuple[float, ...] = ()
    # ZeRO-2: the decoder layers whose backward completes before the first bucket reduce allocates its gradient
    # buffer whole (``layers_before_first_reduce``); None for the other stages.
    buffer_after_layers: int | None = None

    @property
    def step_gradient(self) -> float:
        """The gradient one sub-group's update reads: its fp32 cast, or the flat copy itself."""
        return self.fp32_gradients or self.flat_copy

    def moments(self, step_temporaries: float) -> tuple[tuple[float, float], ...]:
        """(16-bit gradients live, the step's copies and temporaries) at the fp16 overflow check, the norm, the
        flatten and the update (module docstring).

        ``step_temporaries``: the optimizer's own over the whole partition (a sub-group's share at a time).
        """
        kept = self.partition_gradients
        return (
            (kept, sum(self.overflow_check)),
            (kept, self.norm_copy),
            (kept, self.flat_copy + self.fp32_gradients),
            (kept if self.keeps_gradients else 0.0, self.step_gradient + step_temporaries * self.sub_group_share),
        )


def zero_step(
    stage: str,
    partition: float,
    gradient_bytes: float,
    largest: float,
    fp16: bool = False,
    held: float | None = None,
    buffer_after_layers: int | None = None,
) -> ZeroStep:
    """The step of ZeRO ``stage`` (zero1, zero2, zero3) over a ``partition`` of that many elements per rank,
    whose gradients are ``gradient_bytes`` an element (master weights: fp32); ``largest``: the
    elements of the largest gradient the norm copies (ZeRO-1 and ZeRO-2 hold whole parameters, cut at the
    partition's edges; ZeRO-3 each parameter's own partition); ``fp16``: loss-scaled fp16, whose step checks
    the gradients for overflow first; ``held``: the gradient elements ZeRO-1/2 keep for the step, whole
    parameters (``held_partition``; the partition where not given); ``buffer_after_layers``: ZeRO-2's
    ``layers_before_first_reduce``."""
    sub_group = min(partition, SUB_GROUP_ELEMENTS + largest) if stage == "zero3" else partition
    overflow: tuple[float, ...] = ()
    if fp16:
        piece = min(largest, partition)
        overflow = (float(partition),) if stage == "zero3" else tuple(part * piece for part in OVERFLOW_CHECK_PARTS)
    return ZeroStep(
        stage=stage,
        partition_gradients=(partition if held is None or stage == "zero3" else max(held, partition)) * gradient_bytes,
        norm_copy=FP64_BYTES * min(largest, partition),
        flat_copy=gradient_bytes * sub_group,
        fp32_gradients=FP32_BYTES * sub_group if gradient_bytes != FP32_BYTES else 0.0,
        sub_group_share=sub_group / partition if partition > 0 else 1.0,
        keeps_gradients=stage == "zero3",
        overflow_check=overflow,
        buffer_after_layers=buffer_after_layers if stage == "zero2" else None,
    )


def layers_before_first_reduce(head: float, layer: float, layers: int, bucket: float) -> int:
    """The decoder layers of this GPU whose backward completes before ZeRO-2's first bucket reduce, which
    allocates its gradient buffer whole: ``copy_grads_in_partition`` runs ``torch.empty(total_size)`` over every
    parameter of the rank's partition the first time a reduce holds one of them (stage_1_and_2.py, DeepSpeed
    0.16 to 0.19), and the rank whose partition ends the model (the LM head, the last layers) meets its own
    gradients in the very first. A reduce comes when the next gradient would overflow the bucket
    (``reduce_independent_p_g_buckets_and_remove_grads``: ``bucket.elements + param.numel() >
    reduce_bucket_size``): the untied LM head's gradient (``head`` elements; none where tied, whose gradient
    completes at the embedding) and then ``layer`` elements a layer, so during the first layer j (counted from
    the last) with head + j x layer > bucket, after floor((bucket - head) / layer) whole layers; none before the
    epilogue (``layers``) where the gradients never fill it. Until then they sit in the bucket itself."""
    if head > bucket:
        return 0
    if layer <= 0:
        return layers
    return min(layers, math.floor((bucket - head) / layer))


def zero2_first_reduce(setup: TrainingSetup, trainable_local: float) -> int:
    """``layers_before_first_reduce`` for this GPU: the untied LM head's gradient first, then a
    layer's (the adapters' alone under LoRA, which has no head gradient); ZeRO-2 never pipelines (GP025)."""
    arch, tp = setup.architecture, setup.tensor_parallel
    layers = setup.stage_layers
    if setup.is_adapter:
        head, layer = 0.0, trainable_local / layers
    else:
        head, layer = arch.lm_head_params() / tp, arch.total_layer_params / arch.layers / tp
    return layers_before_first_reduce(head, layer, layers, reduce_buckets(setup)[1])


def scatter_copy(setup: TrainingSetup, trainable_local: float) -> tuple[float, float]:
    """ZeRO-3's copy of a bucket's gradients as it reduce-scatters them, bytes (while a layer's backward runs, at
    backward's epilogue). With ``reduce_scatter`` on, DeepSpeed's default, ``__reduce_and_partition_ipg_grads``
    hands the bucket's gradients to ``__avg_scatter_grads`` -> ``reduce_scatter_coalesced``
    (runtime/comm/coalesced_collectives.py), which interleaves every rank's chunk of each into one tensor with
    ``torch.cat`` (no copy only for a lone gradient that splits evenly), on the reduce stream, until
    ``partition_grads`` has copied this rank's pieces out (on one rank too). A reduce holds at most the bucket's
    elements (it comes when the next gradient would overflow them), in the gradients' dtype; one comes during a
    layer's backward only where the gradients outgrow the bucket, else once, at the epilogue, with all of them."""
    if setup.job.sharding != "zero3" or not runs_deepspeed_zero(setup):
        return 0.0, 0.0
    bucket = reduce_buckets(setup)[1]
    copy = min(bucket, trainable_local) * SHARDED_WEIGHT_BYTES[setup.job.precision]
    return (copy if trainable_local > bucket else 0.0), copy


def held_partition(elements: Sequence[float], ranks: int) -> float:
    """The most gradient elements a rank of ZeRO-1/2 keeps for its step: the group's parameters are flattened in
    order and cut into ``ranks`` equal partitions, and a rank keeps the whole gradient of every parameter its
    partition touches (stage_1_and_2.py copy_grads_in_partition: ``total_size += param_in_partition.numel()``;
    the pieces it reads are views into them), so a parameter cut at a partition's edge counts whole, and one
    that spans several partitions (an embedding over many ranks) counts whole on each. ``elements``: each
    parameter's, in the order the optimizer holds them."""
    ends = list(itertools.accumulate(elements, initial=0.0))
    total = ends[-1]
    if ranks <= 1 or total <= 0:
        return total
    size = math.ceil(total / ranks)
    held = 0.0
    for rank in range(ranks):
        low, high = rank * size, min((rank + 1) * size, total)
        if low >= high:
            break
        first = bisect.bisect_right(ends, low) - 1  # the parameter holding element ``low``
        last = bisect.bisect_left(ends, high) - 1  # the parameter holding element ``high - 1``
        held = max(held, ends[last + 1] - ends[first])
    return held


def optimizer_order(setup: TrainingSetup) -> list[float]:
    """The elements of each parameter on the most loaded GPU in the order a full fine-tune's optimizer holds them,
    the model's (training_step.wrapped_unit_elements: the embedding, each layer's matrices and norms, the final
    norm, an untied LM head), its stage's, per tensor-parallel rank: what ZeRO flattens and partitions (the
    Trainer's no-decay group of norms and biases, partitioned apart, is counted with the rest: a few
    elements)."""
    arch, tp = setup.architecture, setup.tensor_parallel
    layer, (embedding, norm, *head) = wrapped_unit_elements(arch)
    holds_embedding, holds_head = stage_edges(setup)
    layers = setup.stage_layers
    order = [embedding] if holds_embedding else []
    order += list(layer) * layers
    order += [norm, *head] if holds_head else []
    return [elements / tp for elements in order]
