"""Settings no framework runs together (optimizer-in-backward with accumulation, a precision the GPU has no
units for, a quantization the serving engine refuses on the GPU, ...): each a finding at its field with a
hint, checked when the spec is resolved; the planner never proposes a GPU a job's engine refuses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuplan.estimate.weights import VLLM_MIN_CAPABILITY

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


# QLoRA under Megatron is NeMo's: the NF4 linear wrappers of the NeMo Framework 24.07 container
# (nemo/collections/nlp/modules/common/megatron/adapters/qlora.py: "Tensor Parallel is not supported"), run by
# Megatron's data parallelism and distributed optimizer, which shards the optimizer states (ZeRO-1). The NF4
# weights are held outside the parameters FSDP or ZeRO-3 would shard, and NeMo 2.0 has no QLoRA. The other
# stacks shard QLoRA every way: Hugging Face + PEFT with bitsandbytes' quant_storage under FSDP or DeepSpeed
# ZeRO-3, torchtune under FSDP2.
MEGATRON_QLORA_SHARDINGS = ("none", "zero1")


def runs_sharding(method: str, framework: str, sharding: str) -> bool:
    """Whether the training stack of ``framework`` runs ``method`` with data-parallel ``sharding``."""
    return not (method == "qlora" and framework == "megatron") or sharding in MEGATRON_QLORA_SHARDINGS


# DeepSpeed's pipeline engine takes ZeRO-1 alone (deepspeed/runtime/pipe/engine.py: "ZeRO-2 and ZeRO-3 are
# incompatible with pipeline parallelism"); pipelining over sharded parameters is FSDP's (torchtitan).
PIPELINE_SHARDINGS = ("none", "zero1", "fsdp")


def runs_pipeline(sharding: str, pipeline_parallel: int) -> bool:
    """Whether a training stack runs data-parallel ``sharding`` with ``pipeline_parallel`` stages."""
    return pipeline_parallel == 1 or sharding in PIPELINE_SHARDINGS


def offload_rests_on_sharding(job: Finetune) -> bool:
    """Whether the job offloads through its sharding: DeepSpeed and FSDP offload through their sharded optimizers
    (the Hugging Face Trainer offloads nothing without them), so a plain layout keeps the declared sharding."""
    return job.offload_optimizer != "none" or job.offload_parameters != "none"


# QLoRA over tensor-parallel ranks: of the stacks each framework stands for, only Unsloth shards the 4-bit NF4 weights
# over them (its 2026.10 release, unsloth/models/tp_native.py: "v1: LoRA / QLoRA training forward on dense decoders",
# _shard_params4bit slices the packed weights and their quantization state per rank), which framework: fused names.
# The others do not: Transformers' bitsandbytes quantizer builds each Params4bit from the whole weight under a tp_plan
# (quantizers/quantizer_bnb_4bit.py takes no shard, 4.57; in 5.x tensor parallelism re-wraps the 4-bit weights as
# plain parameters) and PEFT tests tensor parallelism on unquantized models alone; torchtune's LoRA recipe refuses
# it ("Tensor parallelism is not supported in this recipe", lora_finetune_distributed.py); DeepSpeed's AutoTP splits
# dense weights only; NeMo's NF4 wrappers above. FSDP-QLoRA (sharding: fsdp or zero3) is how they spread QLoRA.
def runs_tensor_parallel(method: str, framework: str) -> bool:
    """Whether the training stack of ``framework`` runs ``method`` with tensor parallelism above 1."""
    return method != "qlora" or framework == "fused"


# Checkpoints stored as packed integer weights with no dequantizing load in Transformers (AWQ and GPTQ 4-bit): a full
# fine-tune trains the model's own weights, which the Hugging Face Trainer refuses on a quantized model without
# adapters ("You cannot perform fine-tuning on purely quantized models. Please attach trainable adapters on top of
# the quantized model", trainer.py in 4.57, trainer_utils.validate_quantization_for_training in 5.x; neither
# quantizer is QAT-trainable). MXFP4 and FP8 checkpoints load dequantized where asked (Mxfp4Config(dequantize=True),
# as Axolotl's GPT-OSS full fine-tunes do), so they are not refused.
PACKED_CHECKPOINTS = frozenset({"int4-awq", "int4-gptq"})


def trains_checkpoint(method: str, checkpoint: str) -> bool:
    """Whether a fine-tune of ``method`` runs on a checkpoint stored as ``checkpoint`` (the model's quantization)."""
    return method != "full" or checkpoint not in PACKED_CHECKPOINTS


def finetune_conflicts(job: Finetune) -> list[tuple[tuple[str, ...], str, str]]:
    """Settings no framework runs together: (pointer under finetune, message, hint) for each."""
    problems: list[tuple[tuple[str, ...], str, str]] = []
    if not runs_sharding(job.method, job.framework, job.sharding):
        problems.append(
            (
                ("sharding",),
                f"sharding {job.sharding} does not run QLoRA under Megatron: NeMo's QLoRA (its 24.07 NF4 "
                "wrappers; NeMo 2.0 has none) keeps the 4-bit weights outside the parameters FSDP or ZeRO-3 "
                "shard, and Megatron's distributed optimizer shards the optimizer states only (zero1)",
                "set sharding: zero1 or none, or framework: eager (Hugging Face + PEFT runs FSDP-QLoRA and "
                "DeepSpeed ZeRO-3 QLoRA)",
            )
        )
    if job.hardware.tensor_parallel > 1 and not runs_tensor_parallel(job.method, job.framework):
        problems.append(
            (
                ("hardware", "tensor_parallel"),
                "NeMo's QLoRA NF4 linear wrappers do not support tensor parallelism "
                "(nemo/collections/nlp/modules/common/megatron/adapters/qlora.py)"
                if job.framework == "megatron"
                else f"QLoRA's 4-bit weights do not run with tensor parallelism under framework {job.framework}: "
                "Transformers' bitsandbytes quantizer keeps each rank's whole weight under a tp_plan, PEFT tests "
                "tensor parallelism on unquantized models only, and torchtune's LoRA recipe refuses it",
                "set hardware.tensor_parallel: 1 and shard the 4-bit weights over the data-parallel ranks (FSDP-QLoRA: "
                "sharding fsdp or zero3), or framework: fused where the stack is Unsloth (it shards NF4 weights over "
                "tensor-parallel ranks from its 2026.10 release)",
            )
        )
    if not runs_pipeline(job.sharding, job.hardware.pipeline_parallel):
        problems.append(
            (
                ("sharding",),
                f"sharding {job.sharding} does not run with pipeline parallelism: DeepSpeed's pipeline engine takes "
                'ZeRO-1 alone (deepspeed/runtime/pipe/engine.py: "ZeRO-2 and ZeRO-3 are incompatible with pipeline '
                'parallelism")',
                "set sharding: zero1, or fsdp (torchtitan pipelines over FSDP2), or hardware.pipeline_parallel: 1",
            )
        )
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
    # DeepSpeed's ZeRO-1/2 optimizer never reads offload_param (engine.py hands it to the stage-3 classes alone;
    # config.py: "Valid only with stage 3"), on one GPU too; over several, plain DDP has no offload either.
    unsharded = data_parallel > 1 and job.sharding not in ("zero3", "fsdp")
    if job.offload_parameters != "none" and (unsharded or job.sharding in ("zero1", "zero2")):
        problems.append(
            (
                ("offload", "parameters"),
                f"offloading parameters needs them sharded (ZeRO-3 or FSDP); sharding is {job.sharding}",
                "set sharding: zero3 (DeepSpeed) or fsdp"
                if runs_sharding(job.method, job.framework, "zero3")
                else "set offload.parameters: none (QLoRA under Megatron shards no parameters to offload)",
            )
        )
    if job.fsdp_loading != "sharded" and job.sharding == "fsdp" and job.fsdp_version == 2:
        problems.append(
            (
                ("fsdp_loading",),
                f"fsdp_loading {job.fsdp_loading} describes FullyShardedDataParallel's wrap (fsdp_version 1); how"
                " fully_shard (fsdp_version 2) receives a model loaded on the CPU is not modelled",
                "set fsdp_loading: sharded (each rank loads its own shards), or fsdp_version: 1",
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
    if job.eval_predictions != "none" and job.eval_samples is None:
        problems.append(
            (
                ("evaluation", "predictions"),
                f"evaluation.predictions {job.eval_predictions} keeps every evaluation batch's predictions on the GPU"
                " until accumulation_steps moves them: how many batches there are takes the evaluation set's size",
                "set evaluation.samples to len(eval_dataset)",
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
