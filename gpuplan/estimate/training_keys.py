"""The memo keys of the fine-tuning memory model: which of a setup's fields each remembered half reads.

The planner estimates many settings of one shape, so ``training_memory`` remembers the model states and the
activations by the fields each reads (``Keyed``, ``reading``); the sets below name the fields each leaves out.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from gpuplan.spec import Finetune

if TYPE_CHECKING:
    from gpuplan.estimate.training import TrainingSetup

# The planner estimates many settings of one shape: the same model states at every micro-batch, the same
# activations at every sharding. Each half is remembered by the setup's fields it reads (all but those
# below) and by the k-bit preparation the layout holds (which reads the sharding and the GPUs); a property
# test changes each field below and finds no difference where the preparation stays. A bounded lru_cache
# holds them (the mutation benchmark drops it, as a remembered result would hide a mutant).
STATES_IGNORE = frozenset(
    {"micro_batch", "seq_len", "checkpointing", "attention", "fused_loss", "use_cache"}
    | {"activation_offloading", "sequence_parallel", "lora_dropout", "expandable_segments", "bitsandbytes_version"}
    | {
        "fsdp_loading",
        "eval_micro_batch",
        "eval_seq_len",
        "eval_samples",
        "eval_predictions",
        "eval_accumulation_steps",
    }
)
ACTIVATIONS_IGNORE = frozenset(
    {"optimizer", "gradient_accumulation", "sharding", "fsdp_version", "gpus", "offload_optimizer"}
    | {"offload_parameters", "optimizer_in_backward", "momentum", "double_quant", "expandable_segments"}
    | {"fsdp_loading", "reduce_bucket_size", "overlap_comm", "framework", "gradient_as_bucket_view"}
    # the evaluation's activations are remembered as a micro-batch of its own; what it keeps is counted apart
    | {"eval_micro_batch", "eval_seq_len", "eval_samples", "eval_predictions", "eval_accumulation_steps"}
)


class Keyed:
    """A setup that hashes and compares by some of its fields only: a memo key that carries the setup."""

    __slots__ = ("key", "setup")

    def __init__(self, setup: TrainingSetup, fields_read: Callable[[TrainingSetup], Any]) -> None:
        self.setup, self.key = setup, fields_read(setup)

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Keyed) and self.key == other.key


# What the memory model reads of a setup, by name: the model, the job's settings and its layout; not the
# run's length, its checkpoints, the GPU kind or the host's bandwidths (memory per GPU depends on none of them).
_NOT_MEMORY = frozenset(
    {"tokens", "checkpoint_every_hours", "checkpoint_keep", "checkpoint_storage_gb", "hardware"}
    | {"offload_host_gbs", "offload_nvme_gbs", "tf32"}
)
MEMORY_INPUTS: dict[str, str] = {
    "architecture": "architecture",
    "model_dtype_bytes": "model_dtype_bytes",
    "gpus": "job.hardware.count",
    "tensor_parallel": "job.hardware.tensor_parallel",
    "pipeline_parallel": "job.hardware.pipeline_parallel",
    **{f.name: f"job.{f.name}" for f in fields(Finetune) if f.name not in _NOT_MEMORY},
    # Read as the layout holds it (TRL and Axolotl skip it under FSDP or ZeRO-3): one key per preparation run.
    "kbit_preparation": "kbit_preparation",
}


def reading(ignored: frozenset[str]) -> operator.attrgetter[Any]:
    """The getter of every memory input but the ``ignored`` ones: a remembered half's key."""
    return operator.attrgetter(*(path for name, path in MEMORY_INPUTS.items() if name not in ignored))
