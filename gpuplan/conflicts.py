"""Settings no framework runs together (optimizer-in-backward with accumulation, a precision the GPU has no
units for, a quantization the serving engine refuses on the GPU, ...): each a finding at its field with a
hint, checked when the spec is resolved; the planner never proposes a GPU a job's engine refuses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuplan.estimate.serving import VLLM_MIN_CAPABILITY

if TYPE_CHECKING:
    from gpuplan.catalog import Gpu
    from gpuplan.spec import Finetune


def engine_refusal(engine: str, quantization: str, gpu: Gpu) -> str | None:
    """Why ``engine`` will not serve ``quantization`` on ``gpu``, or None when it does (as far as gpuplan
    knows: only vLLM's minimum compute capabilities are checked)."""
    needed = VLLM_MIN_CAPABILITY.get(quantization) if engine == "vllm" else None
    capability = gpu.compute_capability
    if needed is None or capability is None or capability >= needed:
        return None
    return (
        f"vLLM serves {quantization} from compute capability {needed / 10:.1f} "
        f"(get_min_capability of its {quantization} config); {gpu.id} is {capability / 10:.1f}, so the engine "
        "refuses the model at startup"
    )


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
                "capability below 8.0): Trainers before PyTorch's bf16 emulation refuse it ('Your setup doesn't "
                "support bf16/gpu'); newer ones start (torch.cuda.is_bf16_supported counts emulation) and run the "
                "bf16 math without tensor cores, far below the fp16 rate gpuplan would time it at",
                "set precision: fp16-mixed",
            )
        )
    return problems


# Fine-tuning precisions whose 16-bit math is bf16 (fp8-mixed keeps bf16 autocast around its fp8 GEMMs).
BF16_PRECISIONS = ("bf16", "bf16-mixed", "fp8-mixed")
