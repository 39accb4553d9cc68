"""What an estimate assumes, in words: the assumption lines ``gpuplan estimate`` and the report print beside
the figures (the optimizer's states, the loss path, the engine's limits, the load, the price), worded only
when an output reads them (``FinetuneEstimate.assumptions``, ``ServeEstimate.assumptions``)."""

from __future__ import annotations

from gpuplan.defaults import property_node
from gpuplan.estimate.calibration import CALIBRATION, Calibration
from gpuplan.estimate.engines import (
    SGLANG_ENGINE,
    VLLM_ENGINE,
    engine_memory_notes,
    engine_short_name,
    memory_engine,
)
from gpuplan.estimate.frontend import STREAM_SECONDS_PER_TOKEN
from gpuplan.estimate.kernels import FRAMEWORKS
from gpuplan.estimate.lengths import MEDIAN, P90, WIDEST_P90_RATIO, stated_quantile, through
from gpuplan.estimate.lora_serving import adapters_read, host_bytes, unmodelled_mixers
from gpuplan.estimate.nccl import describe, nccl_bytes
from gpuplan.estimate.performance import Efficiency, attention_ceiling
from gpuplan.estimate.serving import ServingMemory, ServingSetup, kv_pages, max_concurrency
from gpuplan.estimate.serving_workload import ServingSpeed
from gpuplan.estimate.speculative import rounds_note
from gpuplan.estimate.training import (
    MIXED,
    REGIMES,
    TrainingSetup,
    bucket_lifetime,
    full_state_bytes,
    holds_ddp_buckets,
    reduce_bucket_bytes,
    reduce_buckets,
    runs_deepspeed_zero,
)
from gpuplan.estimate.training_memory import OUTPUTS_HELD
from gpuplan.estimate.training_speed import TrainingSpeed, gemm_peak
from gpuplan.spec import HOURS_PER_MONTH, Finetune, Serve, Spec
from gpuplan.units import GIB, format_gib, format_latency_ms
from gpuplan.validate import load_schema

OPTIMIZER_NOTES = {
    "adamw": "AdamW, PyTorch foreach: two states and one trainable-size temporary at the step",
    "adamw-fused": "AdamW fused kernel: two states, no step temporary",
    "adamw-8bit": "bitsandbytes 8-bit AdamW: two 1-byte states + block constants (block 2048)",
    "adamw-8bit-paged": "bitsandbytes paged 8-bit AdamW: states in CUDA unified memory, outside PyTorch's "
    "allocator (torch.cuda.max_memory_allocated does not count them); on the GPU for the step, paged to "
    "host memory under pressure",
    "sgd": "SGD: one momentum buffer (none with momentum 0)",
    "adafactor": "Adafactor: factored fp32 second moment (rows + columns), no first moment",
}
GPUS_PER_NODE = 8  # host memory is reported per node of 8 GPUs (HGX/DGX and most PCIe servers)


# What each k-bit preparation leaves of the unquantized weights (TrainingSetup.kbit_preparation), in words.
KBIT_PREPARATION = {
    "none": "embeddings, LM head and norms in 16-bit (no k-bit preparation)",
    "peft": "embeddings, LM head and norms fp32 (PEFT's prepare_model_for_kbit_training), so the stream is fp32",
    "trl": "prepared as TRL 0.7-0.24 does: norms fp32 (so the stream and MLP are fp32), embeddings and LM head cast"
    " back to bf16, their fp32 copies left in PyTorch's cache",
    "axolotl": "prepared as Axolotl does: embeddings, LM head and norms upcast, then cast back to the model dtype,"
    " their fp32 copies left in PyTorch's cache",
}


def _preparation_reason(job: Finetune, preparation: str) -> str:
    """Why the preparation the estimate holds is not the one the spec states (TrainingSetup.kbit_preparation)."""
    if preparation == job.kbit_preparation:
        return ""
    if preparation == "none":
        stack = {"trl": "TRL", "axolotl": "Axolotl"}[job.kbit_preparation]
        why = f"{stack} skips its preparation when {job.sharding} shards the 4-bit weights over several GPUs"
    else:
        why = f"TRL casts back in bf16 only, and this job trains in {job.precision}"
    return f" (stated {job.kbit_preparation}: {why})"


DEEPSPEED_BUCKET = ("finetune", "deepspeed", "reduce_bucket_size")  # its schema default is DeepSpeed's own


def finetune_assumptions(
    spec: Spec,
    job: Finetune,
    efficiency: Efficiency,
    overhead: int,
    price: str,
    speed: TrainingSpeed,
    calibration: Calibration = CALIBRATION,
) -> tuple[tuple[str, str], ...]:
    setup = TrainingSetup(spec.model.architecture, job, 2)  # for what QLoRA's base holds (the dtype is unread)
    weight, grad, state, activation, _ = REGIMES[job.precision]
    if not setup.is_adapter:  # a full fine-tune's bytes as the memory model counts them (fp32 master in states)
        weight, grad, state, _ = full_state_bytes(setup)
    zero = runs_deepspeed_zero(setup) and not setup.is_adapter
    regime = f"{job.precision}: weights/grads/states/activations bytes {(weight, grad, state, activation)}"
    preparation = setup.kbit_preparation
    if job.precision == "fp32":
        peak, units = gemm_peak(job, job.hardware.gpu)
        regime += f"; GEMMs on {units}, {peak / 1e12:,.1f} TFLOPS"
        if not job.tf32:
            regime += " (PyTorch's default matmul precision does not use TF32: finetune.tf32 allows it)"
    if zero:
        regime += (
            f"; DeepSpeed {job.sharding}: working weights and gradients in the training dtype, fp32 master weights and"
            " fp32 optimizer states in its partition whatever the precision"
        )
        if setup.uses_autocast:
            regime += (
                "; activations with autocast's fp32 residual stream, as the spec states (accelerate runs no autocast"
                " under DeepSpeed: on the safe side)"
            )
    elif job.precision in MIXED:
        if not job.autocast:
            regime += "; no autocast: 16-bit working weights and activations, fp32 master weights in the optimizer"
        elif setup.sixteen_bit_working_weights:
            regime += (
                f"; {job.sharding} mixed precision: fp32 sharded parameters and gradients, gathered in 16 bits"
                " (counted as 16-bit working copies beside fp32 master weights: the same bytes)"
            )
        else:
            regime += "; torch.autocast over fp32 weights (fp32 residual stream, cached 16-bit weight copies)"
    optimizer = OPTIMIZER_NOTES[job.optimizer]
    if job.optimizer == "sgd" and job.momentum == 0:
        optimizer = "SGD without momentum: no optimizer state"
    if job.optimizer_in_backward:
        optimizer += "; stepped in backward, one gradient alive at a time"
    checkpointing = {
        "none": "none: every layer keeps its activations for backward",
        "full": "full: each layer keeps its input and is recomputed in backward",
        "selective": "selective: matmul and attention outputs kept, norms and activation functions recomputed",
    }[job.checkpointing]
    if job.activation_offloading:
        checkpointing += "; saved activations offloaded to host, two layers' worth on the GPU"
    if job.sequence_parallel:
        checkpointing += f"; norm regions split over the {job.hardware.tensor_parallel} tensor-parallel ranks"
    offload = "none"
    if job.offload_optimizer != "none" or job.offload_parameters != "none":
        offload = (
            f"optimizer {job.offload_optimizer}, parameters {job.offload_parameters} (host bytes per node of"
            f" {GPUS_PER_NODE} GPUs); copies at the {job.hardware.gpu.id}'s PCIe link"
            f" ({job.hardware.gpu.pcie_gbs / 2:g} GB/s each way), behind the backward and forward that need them"
        )
        if job.offload_optimizer != "none":
            offload += (
                f"; the optimizer step runs on the CPU, not overlapped, at offload.host_memory_gbs"
                f" {job.offload_host_gbs:g} GB/s per node shared by its GPUs (a peak: CPU optimizers measured in"
                " practice sustain less)"
            )
        if "nvme" in (job.offload_optimizer, job.offload_parameters):
            offload += f"; NVMe at offload.nvme_gbs {job.offload_nvme_gbs:g} GB/s per node"
    lora = "n/a"
    if job.method != "full":
        lora = f"{job.lora_variant} rank {job.lora_rank}, adapters {job.lora_dtype} on {', '.join(job.lora_targets)}"
        if job.lora_dropout:
            lora += f", dropout {job.lora_dropout:g} (a mask and a dropped input per adapter)"
        lora += "; 6 small GEMMs per adapted linear at the roofline of their FLOPs and bytes"
    buckets = "n/a"
    count, elements = reduce_buckets(setup)
    if holds_ddp_buckets(setup):
        buckets = (
            "PyTorch DDP: flat buckets as large as the trainable gradients, all step, and the gradients views"
            " into them (finetune.ddp.gradient_as_bucket_view)"
            if job.gradient_as_bucket_view
            else "PyTorch DDP: flat buckets as large as the trainable gradients, all step, beside them"
            " (gradient_as_bucket_view false, PyTorch's and accelerate's default)"
        )
    elif count:
        lifetime = {
            "step": "all step",
            "backward": "from each backward until its gradients are reduced",
            "accumulation": "from each backward until its gradients are reduced (ZeRO-1: at the accumulation"
            " boundary, so through the forwards between)",
        }[bucket_lifetime(setup)]
        source = "finetune.deepspeed.reduce_bucket_size"
        if job.reduce_bucket_size is None:
            source += ": auto, hidden_size squared"
        elif job.reduce_bucket_size == property_node(load_schema(), *DEEPSPEED_BUCKET)["default"]:
            source = f"DeepSpeed's default; {source}"
        buckets = (
            f"DeepSpeed ZeRO-{job.sharding[-1]}: {count} x {elements:,} elements,"
            f" {reduce_bucket_bytes(setup) / GIB:.2f} GiB per GPU {lifetime}"
            f" ({source}{', overlap_comm' if count == 2 else ''})"
        )
    loss = "fused/chunked cross-entropy" if job.fused_loss else LOSS_NOTES[job.framework]
    loss += f"; the model outputs held {OUTPUTS_HELD[job.loop]}"
    return (
        ("precision", regime),
        ("optimizer", optimizer),
        ("activation checkpointing", checkpointing),
        ("offload", offload),
        ("gradient buckets", buckets),
        (
            "attention",
            f"{job.attention} (SDPA/FlashAttention keeps O(s) per layer; eager keeps s x s scores); its kernels reach"
            f" {attention_ceiling(job.hardware.gpu, job.attention):.0%} of the {job.hardware.gpu.id}'s dense 16-bit"
            " peak",
        ),
        ("loss", loss),
        (
            "evaluation",
            f"{job.eval_micro_batch} x {job.eval_seq_len or job.seq_len:,} tokens between steps under no_grad: the"
            " logits, their fp32 copy and the loss's log-softmax of that batch"
            f"{_cached_keys_and_values(job)}, no gradients, in the blocks"
            f" training left cached (what fits none maps segments of its own); {_kept_predictions(job)}"
            " (finetune.evaluation)"
            if job.eval_micro_batch
            else "none counted (finetune.evaluation states one; the Hugging Face Trainer evaluates"
            " per_device_eval_batch_size sequences at once, 8 by default)",
        ),
        ("lora", lora),
        (
            "qlora base",
            f"NF4{' + double quantization: 0.516' if job.double_quant else ': 0.5625'} B/param for linears; "
            f"{KBIT_PREPARATION[preparation]}{_preparation_reason(job, preparation)}; "
            + (
                f"bitsandbytes {job.bitsandbytes_version}: each 4-bit linear saves its input for backward (until "
                "0.43.2)"
                if setup.nf4_saves_inputs
                else "no 4-bit linear keeps its input for backward (bitsandbytes from 0.43.2, torchao's NF4)"
            )
            if job.method == "qlora"
            else "n/a",
        ),
        *_model_notes(spec),
        *_hybrid_finetune_notes(spec),
        ("framework overhead", _overhead_note(setup, overhead)),
        ("framework", _framework_note(job, speed, calibration)),
        ("training speed", _training_speed_note(efficiency, speed, calibration)),
        ("network", f"{job.hardware.network_gbps:g} Gb/s per GPU between nodes (hardware.network_gbps)"),
        ("price", price),
    )


def _overhead_note(setup: TrainingSetup, overhead: int) -> str:
    """The bytes outside the allocator: the CUDA context's, and NCCL's by communicator (``estimate.nccl``)."""
    gpu, communicators = setup.job.hardware.gpu, setup.communicators
    nccl = nccl_bytes(gpu, communicators)
    context = f"{(overhead - nccl) / GIB:.1f} GiB per GPU (CUDA context, workspaces)"
    if not nccl:
        return context
    return f"{context} + NCCL {nccl / GIB:.2f} GiB: {describe(gpu, communicators)}"


def _quantization_notes(job: Serve, setup: ServingSetup) -> tuple[tuple[str, str], ...]:
    if job.quantization != "mxfp4":
        return ()
    intermediate, hidden = setup.expert_alignment
    padding = (
        f"; vLLM pads each expert's intermediate size to a multiple of {intermediate} and the hidden size to "
        f"{hidden} for its MoE kernels on this GPU (the largest padding of the backends it may pick)"
        if setup.expert_alignment != (1, 1)
        else ""
    )
    return (
        (
            "mxfp4",
            f"the checkpoint's layout: 4.25 bits per quantized weight (32 values + one scale byte per block){padding}",
        ),
    )


def _model_notes(spec: Spec) -> tuple[tuple[str, str], ...]:
    """What reading the model's config.json assumed, if anything."""
    return (("model config", "; ".join(spec.model.notes)),) if spec.model.notes else ()


_STATE_KINDS = {"L": "linear-attention (Gated DeltaNet)", "M": "Mamba-2"}


def _hybrid_finetune_notes(spec: Spec) -> tuple[tuple[str, str], ...]:
    """What the fine-tuning estimate assumes of a hybrid model's linear-attention or Mamba layers."""
    arch = spec.model.architecture
    if not arch.state_layers:
        return ()
    kind = _STATE_KINDS[arch.state_kind]
    saved = (
        "as mamba_ssm's fused scan saves them (its in_proj output and scan output)"
        if arch.state_kind == "M"
        else "as their convolution, kernel-input, gate and gated-norm tensors; the FLA chunk kernel's own "
        "saved intermediates are not counted (a lower bound for these layers)"
    )
    return (
        (
            "hybrid layers",
            f"{arch.state_layers} of {arch.layers} layers are {kind}: activations counted {saved}; "
            f"{arch.attention_layers} attention and {arch.mlp_layers} MLP layers; LoRA targets adapt only "
            "the layers that have those projections",
        ),
    )


def _hybrid_serve_notes(setup: ServingSetup) -> tuple[tuple[str, str], ...]:
    """How the engine holds a hybrid model's per-sequence state (vLLM v0.19's hybrid KV-cache manager;
    SGLang's and TensorRT-LLM's state pools are not modelled: ``gpuplan.estimate.engines``)."""
    arch, tp = setup.architecture, setup.tensor_parallel
    if not arch.state_layers:
        return ()
    state = arch.state_bytes_per_layer(setup.model_dtype_bytes, tp)
    block, page = kv_pages(arch, setup.kv_dtype_bytes, tp, setup.model_dtype_bytes, setup.context)
    recurrent = "fp32" if arch.state_fp32 else "the model dtype"
    if memory_engine(setup.engine) != VLLM_ENGINE:
        pools = "max_mamba_cache_size" if memory_engine(setup.engine) == SGLANG_ENGINE else "MambaHybridCacheManager"
        return (
            (
                "recurrent state",
                f"{arch.state_layers} {_STATE_KINDS[arch.state_kind]} layers keep {state:,} B per sequence each on"
                f" one GPU whatever its length (conv state in the model dtype, recurrent state in {recurrent}),"
                f" counted per sequence beside its KV in the same pool; {engine_short_name(setup.engine)}'s own"
                f" state pool ({pools}) is not sized as such",
            ),
        )
    paging = (
        f"padded to one attention page of {block:,} tokens ({page:,.0f} B): vLLM raises the block from 16 "
        "tokens until a page holds a state"
        if arch.attention_layers
        else "one page each"
    )
    return (
        (
            "recurrent state",
            f"{arch.state_layers} {_STATE_KINDS[arch.state_kind]} layers keep {state:,} B per sequence each on one "
            f"GPU whatever its length (conv state in the model dtype, recurrent state in {recurrent}), {paging}; "
            "without prefix caching (v0.19's default for hybrid models) one page per layer and sequence",
        ),
    )


def _lora_serve_notes(job: Serve, setup: ServingSetup) -> tuple[tuple[str, str], ...]:
    """What multi-LoRA serving adds: the slots, the host cache and the kernels' reads."""
    lora = job.lora
    if lora is None:
        return ()
    arch = setup.architecture
    missing = unmodelled_mixers(arch)
    low = f"; {missing} projections not counted (low by their slots)" if missing else ""
    host = host_bytes(arch, lora, setup.model_dtype_bytes)
    return (
        (
            "lora",
            f"{lora.max_adapters} adapter slots of rank {lora.max_rank} preallocated on each GPU (vLLM max_loras,"
            " max_lora_rank): an A and a B stack per wrapped linear (attention, MLP, each routed expert,"
            f" embedding, LM head) in the model dtype{low}; {lora.max_cpu_adapters} whole adapters cached in host"
            f" memory per engine worker ({host / GIB:,.2f} GiB); a decode step reads the slots of the adapters in"
            f" its batch, one per sequence up to {lora.max_adapters} (at {job.concurrency:,} in flight:"
            f" {adapters_read(lora.max_adapters, job.concurrency):g}; punica BGMV/SGMV)",
        ),
    )


def _speculative_notes(job: Serve, setup: ServingSetup) -> tuple[tuple[str, str], ...]:
    """What speculative decoding adds: the proposer, its memory and the speed-up it is credited with."""
    speculation = job.speculation
    if speculation is None:
        return ()
    proposer = {
        "draft": f"draft model {speculation.draft_label}, its weights and KV cache beside the model's",
        "eagle": "an EAGLE head (one decoder layer of the model's dimensions and a 2h x h fc; the model's"
        " embedding and LM head shared), one layer of KV",
        "mtp": "the model's MTP layer (one decoder layer of its kind and a 2h x h eh_proj; embedding and LM"
        " head shared), one layer of KV",
    }[speculation.method]
    return (
        (
            "speculative decoding",
            f"{proposer}; {rounds_note(speculation)}; a step verifies {speculation.num_tokens + 1} tokens per"
            f" sequence and runs {speculation.num_tokens} proposer steps; the steady state is solved without"
            " speculation and its decode time rescaled (gpuplan.estimate.speculative)",
        ),
    )


def _sixteen_bit_notes(spec: Spec, job: Serve) -> tuple[tuple[str, str], ...]:
    """How a bf16 model is served on a GPU without bf16 tensor cores (T4): in fp16, as vLLM requires."""
    gpu = job.hardware.gpu
    if gpu.has_bf16 or spec.model.dtype != "bf16":
        return ()
    return (
        (
            "16-bit math",
            f"{gpu.id} has no bf16 tensor cores: vLLM refuses a bf16 model there and serves it in fp16 with"
            " --dtype half (the same bytes); timed at the fp16 tensor rate",
        ),
    )


LOSS_NOTES = {
    "eager": "logits upcast to fp32 for the loss, kernel by kernel (transformers)",
    "compiled": "logits upcast to fp32 for the loss, fused by Inductor",
    "fused": "logits upcast to fp32 for the loss (transformers'; fused_loss for Liger's)",
    "megatron": "vocabulary-parallel cross-entropy over fp32 logits (Megatron)",
}


def _framework_note(job: Finetune, speed: TrainingSpeed, calibration: Calibration) -> str:
    """The code path's kernels and whether the host's launches pace the step."""
    note = f"{job.framework}: {FRAMEWORKS[job.framework]}"
    if not speed.kernels:
        return note
    launch_us = calibration.training.kernel_launch_s * 1e6
    paced = speed.launch_s >= speed.micro_batch_s
    note += (
        f"; {speed.kernels:,.0f} launches per micro-batch, {speed.launch_s * 1000:,.0f} ms of host time at"
        f" {launch_us:g} µs each, " + ("pacing it: more than the GPU's work" if paced else "behind the GPU's work")
    )
    return note


def _training_speed_note(efficiency: Efficiency, speed: TrainingSpeed, calibration: Calibration) -> str:
    t = calibration.training
    if efficiency.training_mfu is not None:
        basis = f"MFU {efficiency.training_mfu:.0%} set by thresholds.training_mfu (recompute and exposed sync on top)"
    else:
        basis = (
            f"calibrated: GEMMs at {t.gemm_efficiency:.0%} of the GPU's matmul ceiling (MAMF; fp8"
            f" x{t.low_precision_gemm_factor:.2f}),"
            f" attention at {t.attention_efficiency:.0%} of its kernel's ceiling, the framework's elementwise"
            f" bytes at {t.bandwidth_efficiency:.0%} of HBM bandwidth, data-parallel traffic hidden behind up to"
            f" {t.overlap:.0%} of compute"
        )
    note = f"{basis}; MFU {speed.mfu:.0%} of dense bf16 peak here (recompute excluded)"
    return note if speed.hours is not None else note + "; no finetune.tokens: rates only, no run length"


def _limits_source(job: Serve) -> str:
    """Where the engine's batch limits of the memory model come from, in words (the settings its memory
    model reads: ``engine_memory_limits``)."""
    engine = memory_engine(job.engine)
    settings = [("max_batched_tokens", job.max_batched_tokens)]
    if engine == VLLM_ENGINE:
        settings.append(("max_sequences", job.max_sequences))
    given = [name for name, value in settings if value]
    name = engine_short_name(job.engine)
    if not given:
        return f"{name}'s defaults for the GPU"
    rest = f", the rest {name}'s default" if len(given) < len(settings) else ""
    return " and ".join(f"serve.{setting}" for setting in given) + rest


def serve_assumptions(
    spec: Spec,
    job: Serve,
    setup: ServingSetup,
    efficiency: Efficiency,
    price: str,
    speed: ServingSpeed,
    calibration: Calibration = CALIBRATION,
) -> tuple[tuple[str, str], ...]:
    engine = calibration.engine(job.engine)
    gemm = (
        f"{efficiency.prefill_mfu:.0%} of dense peak (thresholds.prefill_mfu)"
        if efficiency.prefill_mfu
        else f"{engine.gemm_efficiency:.0%} of the GPU's matmul ceiling (MAMF)"
    )
    bandwidth = (
        f"{efficiency.decode_bandwidth:.0%} (thresholds.decode_bandwidth)"
        if efficiency.decode_bandwidth
        else f"{engine.bandwidth_efficiency:.0%}"
    )
    memory_notes = engine_memory_notes(setup, _limits_source(job))
    prompt = _prompt_note(job)
    if job.output_p90 and job.output_p90 > job.output_tokens:
        outputs = through(job.output_tokens, job.output_p90, job.answer_room)
        prompt += (
            f"; answers of mean {job.output_tokens:,}, p90 {job.output_p90:,} tokens (a lognormal, none longer than"
            f" {job.answer_room:,}): a running sequence holds {outputs.held():,.0f} generated tokens"
            f" on average, not {job.output_tokens / 2:,.0f}"
        )
        widest = job.output_tokens * WIDEST_P90_RATIO
        if job.output_p90 > widest:
            prompt += f" (no lognormal of that mean has a p90 above {widest:,.0f}: the spread is held at that)"
        if job.batching == "static":
            prompt += (
                f"; a static batch of {speed.running:,.0f} decodes until its longest answer ends:"
                f" {outputs.longest_of(speed.running):,.0f} tokens on average"
            )
    return (
        memory_notes[0],
        ("kv cache dtype", job.kv_cache_dtype if job.kv_cache_dtype != "auto" else f"auto ({spec.model.dtype})"),
        *memory_notes[1:],
        *_quantization_notes(job, setup),
        *_model_notes(spec),
        *_hybrid_serve_notes(setup),
        *_lora_serve_notes(job, setup),
        *_speculative_notes(job, setup),
        *_sixteen_bit_notes(spec, job),
        (
            "engine",
            # static batching, as declared, instead of the engine's own scheduling (its name's parenthesis)
            f"{engine.name if job.batching != 'static' else engine.name.split(' (')[0]}, {job.batching} batching:"
            f" GEMMs at {gemm}, decode at {bandwidth} of HBM"
            f" bandwidth, {engine.step_overhead_s * 1e6:,.0f} us per step + {engine.sequence_overhead_s * 1e6:.0f} us"
            f" per running sequence + {calibration.serving.layer_overhead_s * 1e6:.0f} us per decoder layer,"
            f" {engine.request_overhead_s * 1e3:.0f} ms per request",
        ),
        ("steady state", _load_note(job, speed, engine.mixes_prefill)),
        (
            "front end",
            "none (offline: prompts as token ids, in process)"
            if job.endpoint == "offline"
            else _frontend_note(job, speed),
        ),
        ("prompt", prompt),
        ("month", f"{HOURS_PER_MONTH} hours"),
        ("price", price),
    )


def _prompt_note(job: Serve) -> str:
    """The prompts the load and TTFT are priced over, in words (``ServingWorkload.ttft_prompts``)."""
    if not job.prompt_mean:
        return f"{job.full_prompt:,} tokens (context - output_tokens), for the load and TTFT"
    if not job.prompts_vary:
        return f"{job.prompt_mean:,} tokens each, for the load and TTFT"
    p90 = job.prompt_p90
    at = {share: stated_quantile(job.prompt_mean, p90, share, job.full_prompt) for share in (P90, MEDIAN)}
    return (
        f"mean {job.prompt_mean:,}, p90 {p90:,} tokens (a lognormal through both, none longer than"
        f" {job.full_prompt:,}: context - output_tokens), for the load and TTFT: its p90 at a prompt of"
        f" {at[P90]:,} tokens, its median at {at[MEDIAN]:,} (the lognormal's), its mean over the prompts'"
        f" classes; the long-context line prices the longest"
    )


def _frontend_note(job: Serve, speed: ServingSpeed) -> str:
    """The server's front end in words: its time per request and per streamed token, and what that caps."""
    capacity = speed.frontend_capacity_rps
    burst = "; a burst crosses it one request after another" if job.arrival == "burst" else ""
    return (
        f"{job.endpoint}: {speed.frontend_s * 1000:,.1f} ms per request of {job.full_prompt:,} tokens (vLLM PR"
        f" #54628, #10635) and {STREAM_SECONDS_PER_TOKEN * 1e6:.0f} us per streamed token (PR #12287), in one"
        f" process for every request: at most {capacity:,.0f} requests/s per replica at the mean prompt of"
        f" {job.mean_prompt:,.0f} tokens and {job.output_tokens:,} out{burst}"
    )


def load_phrase(job: Serve) -> str:
    """The declared load in words: 'at 32 in flight', 'at 2.5 requests/s', 'across a burst of 64'."""
    if job.arrival == "steady":
        return f"at {job.rate_rps:,g} requests/s"
    if job.arrival == "burst":
        return f"across a burst of {job.concurrency:,} per replica"
    return f"at {job.concurrency:,} in flight"


def ttft_prompt_phrase(job: Serve) -> str:
    """The prompts TTFT figures are priced over, as words before ``load_phrase``: 'over prompts of mean 2,500,
    p90 6,000 tokens ' (serve.prompt_tokens), 'for a prompt of 7,680 tokens ' (one length: the stated mean, or
    context - output_tokens where none is stated); '' for a burst, whose wave draws its prompts."""
    if job.arrival == "burst":
        return ""
    if job.prompts_vary:
        return f"over prompts of mean {job.prompt_mean:,}, p90 {job.prompt_p90:,} tokens "
    return f"for a prompt of {job.mean_prompt:,} tokens "


def ttft_tail_words(speed: ServingSpeed) -> str:
    """What a mean TTFT above its p90 says, where it is: at most one request in ten takes longer than the
    p90 (its definition), so those few take much longer, enough to lift the mean over it. Only that: the
    cause differs (a steady stream's rare queue, P(wait) = rho below 0.1, serving_load.wait_quantile; a
    closed loop's clients waiting their turn at a KV cache that holds fewer); "" otherwise."""
    if speed.saturated or round(speed.ttft_s * 1000) <= round(speed.ttft_p90_s * 1000):
        return ""  # as the figures print (whole milliseconds), not above
    return "the mean is above the p90: at most 1 request in 10 takes longer, and those take much longer"


def sequences_words(setup: ServingSetup, memory: ServingMemory) -> str:
    """The sequences each replica's KV cache is sized for, in words: '32 x 8,192 tokens per replica', or a
    burst and what its pool holds of it: 'a burst of 200 x 4,096 tokens per replica, sized for one sequence
    (the KV cache holds 8 at the full context; the others wait their turn)'."""
    sequences = f"{setup.concurrency:,} x {setup.context:,} tokens per replica"
    if not setup.burst:
        return sequences
    held = max_concurrency(memory)
    if held <= 0:
        holds = "the KV cache holds none at the full context: the engine cannot start"
    elif held >= setup.concurrency:
        holds = "the KV cache holds all of them at the full context"
    else:
        holds = f"the KV cache holds {held:,} at the full context; the others wait their turn"
    return f"a burst of {sequences}, sized for one sequence ({holds})"


def fullest_stage_words(memory: ServingMemory) -> str:
    """Where a pipeline stage holds more than the one the breakdown shows, in words; "" where none does (the
    breakdown is of the stage whose KV room is tightest: it sizes every stage's pool)."""
    if memory.peak_per_gpu <= memory.per_gpu:
        return ""
    return (
        f"on another pipeline stage's GPUs; the breakdown is of the stage whose KV cache room is tightest, which"
        f" sizes every stage's pool: {format_gib(memory.per_gpu)}"
    )


def limit_words(speed: ServingSpeed) -> str:
    """What caps the running batch, in words."""
    return "the server's front end" if speed.limited_by == "front-end" else speed.limited_by


def alone_words(job: Serve, speed: ServingSpeed) -> str:
    """The TTFT of the full prompt on an idle replica, in words: 'alone 641 ms', or 'a 7,680-token prompt
    alone 641 ms' where the TTFT figures are over other prompts (``ttft_prompt_phrase``), rounded as they are."""
    alone = f"alone {format_latency_ms('ttft', speed.ttft_single_s)} ms"
    over_full = job.mean_prompt == job.full_prompt and not job.prompts_vary
    return alone if over_full else f"a {job.full_prompt:,}-token prompt {alone}"


def _load_note(job: Serve, speed: ServingSpeed, mixes_prefill: bool) -> str:
    """How the arrival shape was modelled, in words (the assumptions' "steady state")."""
    alone = alone_words(job, speed)
    if job.arrival == "burst" and job.batching == "continuous":
        preempted = (
            f"; the KV cache ran out: {speed.preempted:,} preemptions, each request recomputed from what the"
            " prefix cache still held of it"
            if speed.preempted
            else ""
        )
        order = (
            "decodes first, then prompt chunks in the token budget"
            if mixes_prefill
            else "a step of prompts alone whenever one can be formed, the decodes waiting"
        )
        return (
            f"a burst of {job.concurrency:,} requests per replica on an idle replica, stepped as the engine's"
            f" scheduler runs it ({order}), up to"
            f" {speed.running:,.0f} running (limited by {limit_words(speed)}){preempted}; TTFT across the wave;"
            f" {alone}"
        )
    if job.arrival == "steady" and job.batching == "continuous":
        if speed.saturated:
            return (
                f"requests arrive at {job.rate_rps:,g}/s, faster than the deployment completes them (at most"
                f" {speed.requests_per_s:,.2f}/s with {speed.running:,.0f} running per replica, limited by"
                f" {limit_words(speed)}): the queue grows without bound; {alone}"
            )
        server = " and for the server process" if job.endpoint != "offline" else ""
        return (
            f"Poisson arrivals at {job.rate_rps:,g} requests/s: {speed.running:,.1f} sequences running per replica"
            f" (Little's law); TTFT includes the wait for the token budget{server} (median and p90 from their"
            f" exponential tails) and prefill beside the running batch; {alone}"
        )
    shown = round(float(speed.running), 1)  # 31.96 is "32", not "32.0"
    running = f"{shown:,.0f}" if shown.is_integer() else f"{shown:,.1f}"
    running += " sequence" if shown == 1 else " sequences"
    if speed.limited_by == "front-end":
        return (
            f"{running} running per replica (limited by {limit_words(speed)}: the engine serves"
            f" what that process takes in, the rest of the {job.concurrency:,} clients wait on its stream, so"
            f" TPOT holds their wait); {alone}"
        )
    if job.batching == "static":
        return (
            f"{running} running per replica (limited by {limit_words(speed)}) in static batches:"
            f" each prefills together and decodes until its longest answer ends; TTFT includes the wait for"
            f" a batch to start and its prefill; {alone}"
        )
    return (
        f"{running} running per replica (limited by {limit_words(speed)}); TTFT includes"
        f" queueing and prefill beside the running batch; {alone}"
    )


def _cached_keys_and_values(job: Finetune) -> str:
    """What an evaluation forward adds where the model's config keeps use_cache (eval mode does not turn it off)."""
    return ", every layer's keys and values (use_cache)" if job.use_cache else ""


def _kept_predictions(job: Finetune) -> str:
    """What the evaluation keeps of its batches for compute_metrics, in the evaluation assumption's words."""
    if job.eval_predictions == "none":
        return "no predictions kept (no compute_metrics: the loss alone)"
    what = "logits" if job.eval_predictions == "logits" else "argmax token ids"
    steps = job.eval_accumulation_steps
    if steps is None:
        until = "kept to the evaluation's end"
    elif steps == 1:
        until = "moved to the host after every batch"
    else:
        until = f"moved to the host every {steps:,} batches"
    return (
        f"every batch's {what} of {job.eval_samples:,} samples gathered from all ranks and kept on the GPU,"
        f" {until} (compute_metrics)"
    )
