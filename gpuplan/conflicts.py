"""Fine-tuning settings no framework runs together (optimizer-in-backward with accumulation, a precision the
GPU has no units for, ...): each a finding at its field with a hint, checked when the spec is resolved."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuplan.spec import Finetune


def finetune_conflicts(job: Finetune) -> list[tuple[tuple[str, ...], str, str]]:
    """Settings no framework runs together: (pointer under finetune, message, hint) for each."""
    problems: list[tuple[tuple[str, ...], str, str]] = []
    if job.optimizer_in_backward and job.gradient_accumulation > 1:
        problems.append(
            (
                ("optimizer_in_backward",),
                "optimizer_in_backward steps each parameter as its gradient arrives, so gradients cannot be "
                f"accumulated over {job.gradient_accumulation} micro-batches (torchtune refuses this)",
                "set gradient_accumulation: 1, or optimizer_in_backward: false",
            )
        )
    if job.optimizer_in_backward and job.offload_optimizer != "none":
        problems.append(
            (
                ("optimizer_in_backward",),
                "optimizer_in_backward runs the step on the GPU during backward; it cannot be combined with an "
                "offloaded optimizer",
                "keep one of optimizer_in_backward or offload.optimizer",
            )
        )
    data_parallel = job.hardware.replicas
    if job.offload_parameters != "none" and data_parallel > 1 and job.sharding not in ("zero3", "fsdp"):
        problems.append(
            (
                ("offload", "parameters"),
                f"offloading parameters needs them sharded (ZeRO-3 or FSDP); sharding is {job.sharding}",
                "set sharding: zero3 (DeepSpeed) or fsdp",
            )
        )
    if job.sequence_parallel and job.hardware.tensor_parallel == 1:
        problems.append(
            (
                ("sequence_parallel",),
                "sequence parallelism splits activations over the tensor-parallel ranks; tensor_parallel is 1",
                "set hardware.tensor_parallel above 1, or sequence_parallel: false",
            )
        )
    if job.lora_variant == "dora" and job.method == "full":
        problems.append(
            (
                ("lora", "variant"),
                "lora.variant dora applies to method lora or qlora, not a full fine-tune",
                "set method: lora, or remove lora.variant",
            )
        )
    gpu = job.hardware.gpu
    if job.precision in BF16_PRECISIONS and not gpu.has_bf16:
        problems.append(
            (
                ("precision",),
                f"precision {job.precision} computes in bf16, and {gpu.id} has no bf16 tensor cores (compute "
                "capability below 8.0): the Hugging Face Trainer refuses bf16 there ('Your setup doesn't support "
                "bf16/gpu')",
                "set precision: fp16-mixed",
            )
        )
    return problems


# Fine-tuning precisions whose 16-bit math is bf16 (fp8-mixed keeps bf16 autocast around its fp8 GEMMs).
BF16_PRECISIONS = ("bf16", "bf16-mixed", "fp8-mixed")
