"""Training speed: tokens/s per GPU, time and cost of a fine-tuning run, from the work of one step.

Per micro-batch, on one GPU (a tensor-parallel shard of a pipeline stage):
- GEMMs: 2 x matmul parameters per token forward, twice that backward (full fine-tuning: 6N, Kaplan et
  al. 2020); LoRA/QLoRA skip the frozen weights' gradients (forward + input gradients: 4N, plus 6 x the
  adapters; Hu et al. 2021), at the dense tensor peak of the compute dtype x a GEMM efficiency (fp8-mixed
  GEMMs at the fp8 peak x a low-precision factor: Transformer Engine, torchao float8);
- attention: causal QK and PV FLOPs (PaLM appendix B), forward + backward (3x), at an attention efficiency
  of the attention kernel's ceiling on the GPU (``attention_ceiling``; ``finetune.attention`` names the
  kernel: FlashAttention-2 reaches 73% of peak on A100 but 35% on H100, cuDNN's fused attention 61% and
  FlashAttention-3 75% on H100, so which kernel runs decides how much long sequences gain from Hopper);
- elementwise kernels (norms, activations, residuals, rotary, dropout; the fp32 loss over the vocabulary
  unless the loss is fused): bytes moved over HBM bandwidth. Their share grows as the hidden size shrinks
  (FLOPs scale with h^2, bytes with h) and with the GPU's FLOP/byte ratio, which is why model FLOPs
  utilisation depends on the model's size and the GPU, not only on a constant;
- activation checkpointing recomputes the forward: extra time at the same hardware rates, not extra "model
  FLOPs" (MFU, Chowdhery et al. 2022, excludes recompute);
- QLoRA dequantizes each NF4 linear to bf16 per pass: its bytes over HBM bandwidth.
Per optimizer step: the micro-batches, the 1F1B pipeline bubble ((stages - 1) micro-batch slots, Narayanan
et al. 2021), the optimizer's pass over its states (memory-bound), tensor-parallel all-reduces (4 per layer
per micro-batch, 6 with recompute; Korthikanti et al. 2022) and the exposed part of data-parallel traffic:
DDP/ZeRO-1/2 all-reduce the gradients once per step, overlapped with the last backward (PyTorch DDP
buckets); ZeRO-3/FSDP gather the parameters for forward and again for backward and reduce-scatter the
gradients on every micro-batch (3x the parameter bytes, not DDP's 2x; Rajbhandari et al. 2020), overlapped
with that micro-batch's compute by prefetching. Only what the overlap cannot hide is reported as sync.
A data-parallel group that spans nodes moves at the network bandwidth of all its GPUs in one node together
(NCCL runs one ring per NIC), capped by the node's own link (``group_bandwidth``); its members per node are
the node's GPUs over the tensor-parallel degree (data parallelism is laid out outside tensor parallelism).

Offload (``finetune.offload``, ``offload_time``) adds the host's side of the step, per GPU (ZeRO-Offload,
Ren et al. 2021, sections 4-5; ZeRO-Infinity, Rajbhandari et al. 2021): an offloaded optimizer copies the
GPU's gradient partition to the host, in fp32 at the accumulation boundary (DeepSpeed
``async_inplace_copy_grad_to_fp32_buffer_from_gpu`` casts on the GPU) and in 16-bit between micro-batches
when accumulating (``async_accumulate_grad_in_cpu_via_gpu``: the running sum goes out and comes back),
each copy behind the backward that produces it (section 4.1); the optimizer then steps on the CPU, moving
the bytes the GPU's pass would move through the host's memory bandwidth (shared by the node's GPUs, which
step at once), and the updated 16-bit parameters go back to the GPU in tiles overlapped with that step
(section 5.1). The CPU step itself is on the critical path: only the one-step delayed parameter update
(section 5.2), which changes the training semantics and is not a DeepSpeed or FSDP default, hides it.
NVMe adds the optimizer states' read before the step and write after it (DeepSpeed ``pipeline_read`` and
``pipeline_write`` default false: not overlapped). Offloaded parameters are fetched for every forward and
every backward of a micro-batch, prefetched behind compute as gathers are. A copy moves at the GPU's host
link (one direction of the catalog's bidirectional PCIe figure) or its share of host memory bandwidth,
whichever is lower.
"""

from __future__ import annotations

from gpuplan.architecture import Architecture
from gpuplan.catalog import Gpu
from gpuplan.estimate.calibration import CALIBRATION, Calibration
from gpuplan.estimate.kernels import adapter_work, decoder_work, layer_path, loss_work, model_linears
from gpuplan.estimate.performance import (
    Efficiency,
    allreduce_time,
    attention_ceiling,
    attention_flops,
    fp32_matmul_peak,
    gather_time,
    group_bandwidth,
    link_bandwidth,
    matmul_ceiling,
    matmul_params,
)
from gpuplan.estimate.training import REGIMES, SHARDED_WEIGHT_BYTES, TrainingSetup, stage_fraction
from gpuplan.records import record
from gpuplan.spec import Finetune

NF4_DEQUANT_BYTES = 2.5  # per NF4 weight per pass: read 0.5 B, write the bf16 copy (2 B) (bitsandbytes)
# An optimizer step reads and writes the weights and each state and reads the gradient, per trainable
# parameter. Per optimizer (every finetune.optimizer): its states per parameter and their bytes, None for
# the precision regime's state dtype. AdamW has two states (one byte each in 8-bit, paged or not: paging
# moves where they live, not what the step reads), SGD one, Adafactor a factored second moment
# (negligible per parameter).
OPTIMIZER_STATES: dict[str, tuple[int, int | None]] = {
    "adamw": (2, None),
    "adamw-fused": (2, None),
    "adamw-8bit": (2, 1),
    "adamw-8bit-paged": (2, 1),
    "sgd": (1, None),
    "adafactor": (0, None),
}
OFFLOAD_GRADIENT_BYTES = 4  # DeepSpeed ZeRO-1/2 offload casts each gradient to fp32 on the GPU, then copies it out
HOST_NODE_GPUS = 8  # GPUs sharing one host's memory and NVMe (HGX/DGX and 8-card PCIe servers)


@record
class TrainingWorkload:
    """What a fine-tuning run's speed rests on: the job on its model and layout, the GPU it runs on, and
    its trainable parameters (which the memory model counts)."""

    setup: TrainingSetup
    gpu: Gpu
    trainable_params: int

    @property
    def total_tokens(self) -> int | None:
        """The run's training tokens (``finetune.tokens``); None without a run length."""
        return self.setup.job.tokens

    @property
    def recomputes(self) -> bool:
        """Full checkpointing recomputes each layer's whole forward (``recompute_work`` says what selective
        recomputes, framework by framework)."""
        return self.setup.job.checkpointing == "full"


@record
class TrainingSpeed:
    flops_per_token: float  # model FLOPs per token (6N + attention for full fine-tuning; recompute excluded)
    hours: float | None  # the run's; None without finetune.tokens (the rates stand without a run length)
    step_compute_s: float  # compute per optimizer step on one GPU: micro-batches, recompute, bubble, optimizer
    gradient_sync_s: float  # exposed communication per optimizer step (what overlap does not hide)
    sync_bandwidth: float  # bytes/s one direction per GPU of the data-parallel ring (0 on one rank)
    tokens_per_s: float  # all GPUs together
    tokens_per_s_per_gpu: float
    mfu: float  # model FLOPs utilisation against the 16-bit dense peak
    step_s: float
    offload_s: float = 0.0  # per optimizer step: what offload adds (exposed copies and the host's step)
    host_step_s: float = 0.0  # of which the optimizer step on the CPU (NVMe swaps included)
    micro_batch_s: float = 0.0  # one micro-batch on this GPU: the longer of its GPU time and its launches
    launch_s: float = 0.0  # of which the host's time launching its kernels
    kernels: float = 0.0  # kernel launches of one micro-batch on this GPU (recompute included)


def model_flops_per_token(arch: Architecture, method: str, seq_len: int, trainable: int) -> float:
    """Model FLOPs per trained token: 6N + causal attention (full), 4N + attention + 6 x adapters (LoRA)."""
    attention = 3 * attention_flops(arch, 0, seq_len) / seq_len
    if method == "full":
        return 6 * matmul_params(arch) + attention
    return 4 * matmul_params(arch) + 6 * trainable + attention


def gemm_peak(job: Finetune, gpu: Gpu) -> tuple[float, str]:
    """(dense FLOP/s, the units) the job's linear GEMMs run at: fp8-mixed at the fp8 peak where the GPU has
    fp8 units, fp32 on the CUDA cores unless ``finetune.tf32`` (then TF32 tensor cores: ``fp32_matmul_peak``),
    bf16 and fp16 on the 16-bit tensor cores."""
    if job.precision == "fp8-mixed" and bool(gpu.tflops.get("fp8")):
        return gpu.peak_flops("fp8"), "fp8 tensor cores"
    if job.precision == "fp32":
        return fp32_matmul_peak(gpu, job.tf32)
    return gpu.peak_flops("fp16" if job.precision == "fp16-mixed" else "bf16"), "16-bit tensor cores"


def _gemm_rate(w: TrainingWorkload, calibration: Calibration) -> float:
    """FLOP/s of the job's linear GEMMs on its GPU: the peak they run at x its MAMF ceiling x the GEMM
    efficiency (fp8-mixed GEMMs at the fp8 rate where the GPU has it, less the low-precision factor; fp32
    ones at the fp32 or TF32 peak x the 16-bit ceiling: the MAMF table measures none of them)."""
    cal, gpu = calibration.training, w.gpu
    peak, units = gemm_peak(w.setup.job, gpu)
    if units.startswith("fp8"):
        return peak * matmul_ceiling(gpu, "fp8") * cal.gemm_efficiency * cal.low_precision_gemm_factor
    return peak * matmul_ceiling(gpu, "bf16") * cal.gemm_efficiency


def _attention_rate(w: TrainingWorkload, calibration: Calibration) -> float:
    """FLOP/s of attention: the kernel's share of the 16-bit peak (``attention_ceiling``) x the attention
    efficiency. In fp32 SDPA has no flash kernel (FlashAttention takes 16-bit inputs only): the
    memory-efficient kernel runs on the CUDA cores, taken at FlashAttention-2's share of the fp32 peak."""
    job, gpu = w.setup.job, w.gpu
    efficiency = calibration.training.attention_efficiency
    if job.precision == "fp32":
        return fp32_matmul_peak(gpu, False)[0] * attention_ceiling(gpu, "flash") * efficiency
    return gpu.peak_flops("bf16") * attention_ceiling(gpu, job.attention) * efficiency


def _adapter_rate(w: TrainingWorkload, calibration: Calibration) -> float:
    """FLOP/s of the adapters' GEMMs: 16-bit under autocast or with 16-bit adapters, else fp32 (or TF32)."""
    setup, gpu = w.setup, w.gpu
    ceiling = matmul_ceiling(gpu, "bf16") * calibration.training.gemm_efficiency
    if setup.uses_autocast or setup.lora_bytes == 2:
        return gpu.peak_flops("bf16") * ceiling
    return fp32_matmul_peak(gpu, setup.job.tf32)[0] * ceiling


def seconds_per_token_floor(
    w: TrainingWorkload, efficiency: Efficiency | None = None, calibration: Calibration = CALIBRATION
) -> float:
    """A lower bound of ``training_speed(w)``'s step time per token it trains on one GPU (step_s x tensor
    x pipeline parallel / the tokens of a step's micro-batches): the micro-batches' linear GEMMs alone,
    forward and backward (or, under a configured MFU, their model FLOPs at it). Every other term of a
    micro-batch (attention, elementwise bytes, the loss, dequantization, recompute, adapters) and of a step
    (the bubble, collectives, the optimizer, exposed sync) is never negative; a relative 1e-9 lower, for
    rounding. A planner bounds each GPU kind's cost floor with it before solving the speed there."""
    efficiency = efficiency or Efficiency()
    job, arch, gpu = w.setup.job, w.setup.architecture, w.gpu
    tp, pp = w.setup.tensor_parallel, w.setup.pipeline_parallel
    share = stage_fraction(w.setup)
    if efficiency.training_mfu is not None:
        fp8 = job.precision == "fp8-mixed" and bool(gpu.tflops.get("fp8"))
        rate = (gpu.peak_flops("fp8") if fp8 else gpu.peak_flops("bf16")) * efficiency.training_mfu
        per_token = model_flops_per_token(arch, job.method, job.seq_len, w.trainable_params) * share / rate
    else:
        passes = 3 if job.method == "full" else 2
        per_token = 2 * matmul_params(arch) * share * passes / _gemm_rate(w, calibration)
    return per_token * tp * pp * (1 - 1e-9)


def training_speed(
    w: TrainingWorkload, efficiency: Efficiency | None = None, calibration: Calibration = CALIBRATION
) -> TrainingSpeed:
    efficiency = efficiency or Efficiency()
    cal = calibration.training
    job, arch, gpu = w.setup.job, w.setup.architecture, w.gpu
    tp, pp, dp = w.setup.tensor_parallel, w.setup.pipeline_parallel, w.setup.data_parallel
    stage_layers = w.setup.stage_layers
    share = stage_fraction(w.setup)  # of the model's layers (and heads) on this GPU
    tokens = job.micro_batch * job.seq_len
    fp8 = job.precision == "fp8-mixed" and bool(gpu.tflops.get("fp8"))
    peak16 = gpu.peak_flops("bf16")

    # Compute of one micro-batch on this GPU.
    linear_forward = 2 * matmul_params(arch) * share * tokens
    attention_forward = attention_flops(arch, 0, job.seq_len) * share * job.micro_batch
    recompute = 1 if w.recomputes else 0
    flops_per_token = model_flops_per_token(arch, job.method, job.seq_len, w.trainable_params)
    if efficiency.training_mfu is not None:
        rate = (gpu.peak_flops("fp8") if fp8 else peak16) * efficiency.training_mfu
        model = flops_per_token * share * tokens
        micro = (model + recompute * (linear_forward + attention_forward)) / rate
        launch = kernels = 0.0
    else:
        micro, launch, kernels = micro_batch_time(w, calibration, linear_forward, attention_forward, share)

    # Tensor-parallel all-reduces of every micro-batch (on the critical path).
    link_efficiency = cal.link_efficiency
    activations = tokens * arch.hidden * 2
    tp_comm = 0.0
    if tp > 1:
        tp_bandwidth = link_bandwidth(gpu, tp, job.hardware.network_gbs) * link_efficiency
        tp_comm = stage_layers * (4 + 2 * recompute) * allreduce_time(activations, tp, tp_bandwidth, 0.0)

    # Data-parallel traffic, overlapped with compute.
    weight_bytes, grad_bytes, state_bytes, _, mixed = REGIMES[job.precision]
    replica_params = arch.params * stage_layers / arch.layers / tp  # this GPU's shard of one model replica
    trainable = (w.trainable_params if job.method != "full" else arch.params) * stage_layers / arch.layers / tp
    sharded = w.setup.shards_parameters
    ring = group_bandwidth(gpu, dp, tp, job.hardware.network_gbs)  # a data-parallel group's link, one direction per GPU
    dp_bandwidth = ring * link_efficiency
    m = job.gradient_accumulation
    exposed = 0.0
    if dp > 1:
        reduced = trainable * (2 if job.method == "full" else 4)  # bf16 gradients; peft adapters in fp32
        if sharded:
            gathered = replica_params * 2  # bf16 parameters gathered for forward and again for backward
            per_micro = 2 * gather_time(gathered, dp, dp_bandwidth) + gather_time(reduced, dp, dp_bandwidth)
            exposed = m * max(0.0, per_micro - cal.overlap * micro)
        else:
            sync = allreduce_time(reduced, dp, dp_bandwidth, 0.0)
            exposed = max(0.0, sync - cal.overlap * micro * 2 / 3)  # behind the last micro-batch's backward

    # The optimizer's pass over weights, states and gradients of the trainable shard (memory-bound), on
    # the GPU unless the optimizer is offloaded (then the same bytes move on the host: offload_time).
    local_trainable = trainable / dp if (job.sharding != "none" and dp > 1) else trainable
    count, element_bytes = OPTIMIZER_STATES[job.optimizer]
    states = count * (element_bytes or state_bytes)
    per_param = 2 * weight_bytes + grad_bytes + 2 * states + (2 if mixed else 0)
    optimizer = 0.0
    if job.offload_optimizer == "none":
        optimizer = local_trainable * per_param / (gpu.bandwidth * cal.bandwidth_efficiency)
    replica_shard = replica_params / dp if sharded else replica_params  # 16-bit parameters this GPU keeps
    offload, host_step = offload_time(
        w, micro * cal.overlap, local_trainable, per_param, (4 if mixed else weight_bytes) + states, replica_shard
    )

    compute = (m + pp - 1) * micro + m * tp_comm + optimizer
    step = compute + exposed + offload
    per_gpu = m * tokens / (tp * pp)
    per_gpu_rate = per_gpu / step
    total = per_gpu_rate * w.setup.gpus
    run = w.total_tokens
    hours = None if run is None else (run / total if total else 0.0) / 3600
    return TrainingSpeed(
        flops_per_token=flops_per_token,
        hours=hours,
        step_compute_s=compute,
        gradient_sync_s=exposed,
        sync_bandwidth=ring if dp > 1 else 0.0,
        tokens_per_s=total,
        tokens_per_s_per_gpu=per_gpu_rate,
        mfu=flops_per_token * per_gpu_rate / peak16,
        step_s=step,
        offload_s=offload,
        host_step_s=host_step,
        micro_batch_s=micro,
        launch_s=launch,
        kernels=kernels,
    )


def micro_batch_time(
    w: TrainingWorkload, calibration: Calibration, linear_forward: float, attention_forward: float, share: float
) -> tuple[float, float, float]:
    """(seconds, of which the host's launches, launches) of one micro-batch on this GPU, by mechanism.

    GPU time: the linear GEMMs (3 passes for full fine-tuning, 2 for adapters: no weight gradient) at the
    GEMM rate; attention forward + backward (3x) at the attention rate; the framework's elementwise bytes
    (``kernels.decoder_work``), the loss's (``kernels.loss_work``), autocast's weight casts (6 B
    per fp32 weight each forward, 6 B per trained weight's gradient) and QLoRA's dequantization over HBM
    bandwidth; the adapters' GEMMs at the roofline of their FLOPs and bytes (``kernels.adapter_work``).
    Recompute (``recompute_work``) adds what it runs again at the same rates. The host launches every
    kernel; queued ahead of a busy GPU, a micro-batch takes the longer of the two.
    """
    cal = calibration.training
    setup, gpu = w.setup, w.gpu
    job, arch = setup.job, setup.architecture
    framework = job.framework
    tokens = job.micro_batch * job.seq_len
    tp = setup.tensor_parallel
    layer_share = share * tp  # of the layers: this GPU's pipeline stage
    bandwidth = gpu.bandwidth * cal.bandwidth_efficiency
    work, launches = decoder_work(setup, framework, tokens, layer_share)
    loss = loss_work(framework, setup.activation_bytes, tokens * arch.vocab / tp, job.fused_loss)
    adapters = adapter_work(setup, framework, tokens, layer_share)
    full = w.recomputes
    selective = job.checkpointing == "selective"
    # What recompute runs again: full, each layer's forward; selective, the elementwise forward (PyTorch
    # selective activation checkpointing keeps matmul and attention outputs, as torchtune and torchtitan
    # use it; under torch.compile the recomputed pointwise work fuses into the backward's kernels) or,
    # under Megatron, core attention (Korthikanti et al. 2022, section 4.2; recompute_granularity
    # selective recomputes core_attn).
    attention_again = full or (selective and framework == "megatron")
    again_bytes = work.forward_bytes * (full or (selective and framework != "megatron"))
    again_bytes += adapters.elementwise.forward_bytes * full
    again_kernels = 0.0
    if full:
        again_kernels = work.forward_kernels + launches.forward_kernels + adapters.elementwise.forward_kernels
        again_kernels += adapters.gemm_kernels / 3
    elif selective and framework in ("eager", "fused"):
        again_kernels = work.forward_kernels
    elif selective and framework == "megatron":
        again_kernels = arch.attention_layers * layer_share

    linear_passes = 3 if job.method == "full" else 2
    gemm = linear_forward * (linear_passes + full) / _gemm_rate(w, calibration)
    attention = attention_forward * (3 + attention_again) / _attention_rate(w, calibration)
    casts = 0.0
    if layer_path(setup, framework).autocast_fp32:
        weights = arch.linear_params() * share + arch.vocab * arch.hidden / tp  # decoder linears and the head
        casts = 6 * weights * (1 + full) + (6 * weights if not setup.is_adapter else 0.0)
    dequant = 0.0
    if job.method == "qlora":
        dequant = arch.linear_params() * share * NF4_DEQUANT_BYTES * (2 + full)
    streamed = work.bytes + loss.bytes + adapters.elementwise.bytes + again_bytes + casts + dequant
    adapter_gemms = (1 + full / 3) * max(
        adapters.gemm_flops / _adapter_rate(w, calibration), adapters.gemm_bytes / bandwidth
    )
    dora = (1 + full) * max(
        adapters.weight_flops / (gpu.peak_flops("bf16") * matmul_ceiling(gpu, "bf16") * cal.gemm_efficiency),
        adapters.weight_bytes / bandwidth,
    )
    gpu_time = gemm + attention + streamed / bandwidth + adapter_gemms + dora
    kernels = work.kernels + launches.kernels + loss.kernels + adapters.elementwise.kernels + adapters.gemm_kernels
    kernels += again_kernels
    if job.method == "qlora":  # bitsandbytes dequantizes each NF4 linear in its own kernel, every pass
        kernels += model_linears(arch, framework) * layer_share * (2 + full)
    launch = kernels * cal.kernel_launch_s
    return max(gpu_time, launch), launch, kernels


def host_rates(w: TrainingWorkload) -> tuple[float, float, float]:
    """(bytes/s of one host copy, of this GPU's share of host memory, of its share of NVMe), one direction.

    A copy between GPU and host memory moves at the GPU's host link (half the catalog's bidirectional PCIe
    figure, as ``link_bandwidth``) unless the GPU's share of the host's memory bandwidth is lower: the node's
    GPUs copy and step at once (ZeRO-Infinity measured 12 GB/s to CPU memory for one V100 of a DGX-2, 3 GB/s
    each when all 16 copy together; Rajbhandari et al. 2021, table 2b).
    """
    job = w.setup.job
    node_gpus = min(w.setup.gpus, HOST_NODE_GPUS)
    host = job.offload_host_gbs * 1e9 / node_gpus
    nvme = job.offload_nvme_gbs * 1e9 / node_gpus
    return min(w.gpu.pcie_gbs / 2 * 1e9, host), host, nvme


def offload_time(
    w: TrainingWorkload,
    hidden: float,
    local_trainable: float,
    per_param: float,
    state_bytes: float,
    replica_shard: float,
) -> tuple[float, float]:
    """(seconds offload adds to an optimizer step, of which the host's optimizer step) on one GPU.

    ``hidden``: the compute of one micro-batch a prefetched copy can hide behind (its backward, 2/3 of it,
    for the gradients); ``local_trainable``: the parameters this GPU's optimizer partition steps;
    ``per_param``: the bytes the optimizer step moves per parameter (weights, gradient and states read,
    weights and states written, the 16-bit copy written); ``state_bytes``: the optimizer's bytes per
    parameter that live off the GPU (fp32 master and states) and NVMe swaps in and out;
    ``replica_shard``: the parameters this GPU holds of its replica (its ZeRO-3/FSDP shard).
    """
    job = w.setup.job
    if job.offload_optimizer == job.offload_parameters == "none":
        return 0.0, 0.0
    copy, host, nvme = host_rates(w)
    m = job.gradient_accumulation
    working = SHARDED_WEIGHT_BYTES[job.precision]  # the 16-bit working copy (4 B under fp32)
    backward = hidden * 2 / 3
    exposed = host_step = 0.0
    if job.offload_optimizer != "none":
        # Gradients out behind each backward: 16-bit running sums between micro-batches (out after every
        # micro-batch but the last, back in before every one but the first), fp32 at the boundary.
        # Per micro-batch the two directions run at once: micro-batch 0 sends a running sum out (nothing
        # comes back), the middle ones send one out and take one back, the last sends the fp32 gradients
        # out and takes the running sum back; summed in closed form (m reaches millions in the planner).
        running = local_trainable * working / copy
        final = local_trainable * OFFLOAD_GRADIENT_BYTES / copy
        if m == 1:
            exposed += max(0.0, final - backward)
        else:
            exposed += (m - 1) * max(0.0, running - backward) + max(0.0, max(final, running) - backward)
        # The step on the CPU moves the optimizer's bytes through host memory; NVMe first reads the states
        # in and afterwards writes them back; the updated 16-bit parameters go back to the GPU in tiles
        # while the step runs (ZeRO-Offload section 5.1).
        step = local_trainable * per_param / host
        if job.offload_optimizer == "nvme":
            step += 2 * local_trainable * state_bytes / nvme
        host_step = max(step, local_trainable * working / copy)
    if job.offload_parameters != "none":
        fetch_rate = copy if job.offload_parameters == "cpu" else min(copy, nvme)
        fetch = 2 * replica_shard * working / fetch_rate  # the shard in for forward and again for backward
        exposed += m * max(0.0, fetch - hidden)
        if job.offload_optimizer == "none":
            exposed += local_trainable * working / fetch_rate  # the GPU's updated shard written back out
    return exposed + host_step, host_step
