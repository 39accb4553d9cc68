"""Per-GPU memory of one fine-tuning step, phase by phase: which tensors are live when (forward; the start,
middle and end of backward; the optimizer step), from the model states and one micro-batch's activations
(gpuplan/estimate/training.py sizes the parameters and the optimizer states, training_activations.py the activations
per token)."""

from __future__ import annotations

import functools
import math

from gpuplan.estimate.training import (
    MIXED,
    NF4_BYTES_NO_DQ,
    NF4_BYTES_PER_PARAM,
    NF4_PACKED_BYTES,
    OFFLOADED_LAYERS_ON_GPU,
    REGIMES,
    SHARDED_WEIGHT_BYTES,
    TrainingMemory,
    TrainingSetup,
    adapted_shapes,
    bucket_lifetime,
    full_state_bytes,
    gradient_shares,
    holds_ddp_buckets,
    local_params,
    optimizer_state_bytes,
    reduce_bucket_bytes,
    reduce_buckets,
    runs_deepspeed_zero,
    stage_fraction,
    trainable_params,
)
from gpuplan.estimate.training_activations import (
    input_widths,
    key_value_bytes,
    largest_layer_activation_bytes_per_token,
    layer_activation_bytes_per_token,
    logits_bytes,
    norm_bytes,
    outputs_widened,
    returned_cache_bytes,
    selective_layer_bytes_per_token,
)
from gpuplan.estimate.training_keys import ACTIVATIONS_IGNORE, STATES_IGNORE, Keyed, reading
from gpuplan.estimate.training_step import Gathering, SimulatedStep, preparation_events
from gpuplan.estimate.training_tensors import Evaluation, MicroBatchActivations, ModelStates
from gpuplan.estimate.zero_step import (
    FP32_BYTES,
    FP64_BYTES,
    OVERFLOW_CHECK_PARTS,
    held_partition,
    optimizer_order,
    scatter_copy,
    zero2_first_reduce,
    zero_step,
)
from gpuplan.records import evolve


def _base_bytes_per_param(setup: TrainingSetup) -> float:
    if setup.job.method == "qlora":
        return NF4_BYTES_PER_PARAM if setup.job.double_quant else NF4_BYTES_NO_DQ
    return float(setup.model_dtype_bytes)


def _model_states(setup: TrainingSetup) -> ModelStates:
    arch = setup.architecture
    weight_b, grad_b, state_b, _, _ = REGIMES[setup.job.precision]
    n = setup.data_parallel
    sharding = setup.running_sharding
    # The embedding and an untied LM head, which a QLoRA preparation casts whole (none without one).
    edges = _edge_tensors(setup) if setup.kbit_preparation != "none" else ()
    local_all = local_params(setup)
    fraction = stage_fraction(setup)
    autocast = setup.uses_autocast
    # FSDP's MixedPrecision, which accelerate (and so the Hugging Face Trainer) sets to the 16-bit dtype under
    # bf16 or fp16 mixed precision, gathers each flat parameter in that dtype whatever it is stored in: the shard
    # is cast to a low-precision copy and all-gathered into a 16-bit unsharded flat parameter (torch/distributed/
    # fsdp/_flat_param.py FlatParamHandle._use_low_precision_shard, _fwd_bwd_param_dtype), so an fp32 model's
    # weights reach the layers in 16-bit and autocast copies none of them.
    fsdp_casts = sharding == "fsdp" and setup.job.precision in MIXED
    master = 0.0
    whole = 0.0  # bytes every GPU keeps whole, however the weights are sharded or offloaded
    if setup.is_adapter:
        trainable_local = trainable_params(setup) * fraction
        if setup.job.method == "qlora":
            quantized = arch.linear_params() * fraction
            base = quantized * NF4_PACKED_BYTES + (local_all - quantized) * 2  # embeddings, norms 16-bit
            if setup.kbit_preparation == "peft":  # every unquantized weight fp32 (prepare_model_for_kbit_training)
                base += (local_all - quantized) * 2
            elif setup.kbit_preparation == "trl":  # the same, then the embeddings and LM head back to bf16
                base += (local_all - quantized - sum(edges)) * 2
            # axolotl: everything back in the model dtype, as loaded
            # The quantization constants live in each Params4bit's quant_state, which is neither a parameter
            # nor a buffer: FSDP flattens, shards and offloads parameters only, ZeRO-3 partitions them only,
            # so every rank keeps all of them on its GPU (AnswerDotAI/fsdp_qlora PR #4: "leaves the
            # quant_state dictionary attached to all rank's Linear4bit layers").
            whole = quantized * (_base_bytes_per_param(setup) - NF4_PACKED_BYTES)
        else:
            base = local_all * setup.model_dtype_bytes
        weights = base + trainable_local * setup.lora_bytes
        grad_b = state_b = setup.lora_bytes
        # An fp32 frozen base under autocast is cast to bf16 per linear (the LM head included), and the
        # casts live until backward: the matmul saves its bf16 weight to compute the input gradient.
        head = arch.vocab * arch.hidden / setup.tensor_parallel
        copies = 2 * (arch.linear_params() * fraction + head) if autocast and setup.model_dtype_bytes == 4 else 0.0
        if autocast and setup.kbit_preparation == "peft":
            copies = 2 * head  # the fp32 LM head's bf16 cast, saved by its matmul (the linears are NF4)
        if fsdp_casts:
            copies = 0.0
        largest_param = max(arch.hidden, arch.intermediate) * setup.job.lora_rank / setup.tensor_parallel
    else:
        trainable_local = local_all
        weight_b, grad_b, state_b, master_b = full_state_bytes(setup)
        master = master_b * trainable_local
        weights = local_all * weight_b
        tied_head = arch.vocab * arch.hidden if arch.tie_embeddings else 0
        linears = arch.linear_params() + arch.lm_head_params() + tied_head
        copies = 2 * linears * fraction if autocast and sharding == "none" else 0.0
        largest_param = arch.largest_linear_params() / setup.tensor_parallel
    grad_elements = trainable_local
    optimizer, step_temp = optimizer_state_bytes(setup, trainable_local, state_b)
    optimizer += master
    # FSDP shards every unit's flat parameter, the adapters' too: each LoRA linear is a unit of its own
    # (AnswerDotAI/fsdp_qlora train.py get_wrapping_policy, lambda_policy_fn; huggingface/peft utils/other.py
    # fsdp_auto_wrap_policy, which transformers' Trainer._fsdp_qlora_plugin_updates sets for a PEFT model).
    partition = trainable_local  # the trainable elements this rank's optimizer steps
    if sharding != "none" and (not setup.is_adapter or sharding == "fsdp"):
        optimizer, step_temp, partition = optimizer / n, step_temp / n, partition / n
        if sharding in ("zero2", "zero3", "fsdp"):
            grad_elements /= n
    grads = grad_elements * grad_b
    # PyTorch DDP reduces the gradients through flat buckets that together hold every trainable parameter in its
    # dtype, allocated as it wraps the model and kept (torch/csrc/distributed/c10d/reducer.cpp,
    # Reducer::initialize_buckets: bucket.gradients = at::empty(...)); under gradient_as_bucket_view false,
    # PyTorch's and accelerate's default, the gradients are tensors of their own, copied in as each is ready;
    # under true they are views into the buckets (Reducer::initialize_bucket_views), held there all step.
    ddp = holds_ddp_buckets(setup)
    buckets = grads if ddp else reduce_bucket_bytes(setup)
    if ddp and setup.job.gradient_as_bucket_view:
        grads = 0.0
    gathered = gathered_forward = gathered_loss = gathered_end = gathered_step = 0.0
    gathering: Gathering | None = None  # its ``reduced`` known once the offload is
    streams = setup.shards_parameters or setup.job.offload_parameters != "none"
    if streams:
        # The unit in use and the one prefetched are gathered in 16-bit (NF4 for QLoRA: FSDP-QLoRA gathers
        # the quantized storage), with the current unit's full gradient when several ranks reduce it. Units:
        # each decoder layer, and the embedding and output layer wrapped apart (torchtitan, FSDP2; DeepSpeed's
        # estimator likewise sizes its buffers by the largest module), whichever is largest.
        unit_params = max(arch.largest_layer_params, arch.embedding_params()) / setup.tensor_parallel
        sixteen_bit = SHARDED_WEIGHT_BYTES[setup.job.precision]
        # Gathered as stored: NF4 codes (QLoRA's decoder linears; its embedding is not quantized: 16-bit, fp32
        # once PEFT's preparation upcast it), the frozen base's dtype (LoRA), 16-bit working weights.
        stored = {"qlora": NF4_PACKED_BYTES, "lora": setup.model_dtype_bytes}.get(setup.job.method, sixteen_bit)
        embedding_stored = stored
        if setup.job.method == "qlora":
            embedding_stored = 4 if setup.kbit_preparation == "peft" else 2
        tp = setup.tensor_parallel
        # as FSDP gathers them: in the 16-bit dtype under its MixedPrecision (``fsdp_casts``)
        gathered_as, embedding_gathered_as = stored, embedding_stored
        if fsdp_casts:
            gathered_as, embedding_gathered_as = min(stored, sixteen_bit), min(embedding_stored, sixteen_bit)
        layer_stored = arch.largest_layer_params * stored / tp
        layer_bytes = arch.largest_layer_params * gathered_as / tp
        unit_bytes = max(layer_bytes, arch.embedding_params() * embedding_gathered_as / tp)
        unit_gradient = sixteen_bit * unit_params if setup.shards_parameters and not setup.is_adapter else 0.0
        gathered = min(2 * unit_bytes, weights) + unit_gradient
        gathered_forward = gathered_loss = gathered_end = gathered_step = gathered
        if sharding == "fsdp" and setup.pipeline_parallel == 1:
            # FSDP's root unit, what no wrapped decoder layer holds (the embedding, an untied LM head, the
            # final norm), stays unsharded from forward's start to backward's end (pytorch/pytorch
            # torch/distributed/fsdp/_runtime_utils.py _post_forward_reshard: "Do not free the root's
            # parameters in the post-forward"; _catch_all_reshard; FSDP2's _fsdp_state.py FSDPState._lazy_init:
            # the root's post_forward_mesh_info = None). Decoder units are gathered one at a time in forward
            # (FSDP1 without forward_prefetch; FSDP2 keeps the current one's all-gather output until the next
            # one's copy-out: _fsdp_param_group.py FSDPParamGroup.wait_for_unshard) and two in backward, the
            # current one and the one prefetched (_runtime_utils.py _pre_backward_hook -> _prefetch_handle;
            # FSDP2 FSDPParamGroup._backward_prefetch; the root's hook prefetches the last layer at the loss);
            # none through the step (_post_backward_final_callback reshards them all).
            root_params = (arch.embedding_params() + arch.lm_head_params() + arch.norm_params()) / tp
            root, root_stored = root_params * embedding_gathered_as, root_params * embedding_stored
            both = min(2, arch.layers) * layer_bytes
            gathered_forward = root + (both if setup.job.fsdp_version == 2 else layer_bytes)
            head_gradient = embedding_gradient = root_gradient = 0.0
            if unit_gradient:
                # Full fine-tuning: each decoder unit's unsharded gradient lives until its post-backward reduces
                # it; the root unit's are reduced only as backward ends. Its parameters are views of one flat
                # parameter (FSDP1 _flat_param.py _use_unsharded_views: flat_param.split(_numels)), so the LM
                # head's weight gradient, made at the loss, waits in SplitWithSizesBackward's input buffer until
                # the embedding's arrives, and the flat gradient is then built beside both (split's backward:
                # a cat); FSDP2 reduces its root group in the final callback (_fsdp_state.py
                # _root_post_backward_final_callback), copying the gradients into one reduce-scatter input
                # (_fsdp_collectives.py foreach_reduce) before they go. A tied head's gradient of the shared
                # weight waits the same way.
                unit_gradient = sixteen_bit * arch.largest_layer_params / tp
                head_gradient = sixteen_bit * arch.vocab * arch.hidden / tp
                embedding_gradient = sixteen_bit * arch.embedding_params() / tp
                root_gradient = sixteen_bit * root_params
            gathered_loss = root + layer_bytes + head_gradient
            # FSDP2 keeps a group's reduce-scatter input, its gradients copied flat, until the next group's
            # post-backward (_fsdp_param_group.py post_backward: comm_ctx.reduce_scatter_state), beside that
            # group's own unsharded gradient.
            held_input = unit_gradient if setup.job.fsdp_version == 2 else 0.0
            gathered = root + both + unit_gradient + held_input + head_gradient
            gathered_end, gathered_step = root + head_gradient + embedding_gradient + root_gradient, 0.0
            staged_root = staged_unit = cast_root = cast_unit = 0.0
            if fsdp_casts:
                # Under MixedPrecision each shard is first cast to a 16-bit copy on the GPU, the all-gather's
                # input, and freed once the unshard returns (_flat_param.py FlatParamHandle.pre_unshard ->
                # _use_low_precision_shard: flat_param._mp_shard; post_unshard -> _free_low_precision_sharded_param;
                # FSDP2 FSDPParam.all_gather_inputs casts to param_dtype, freed after the copy-in).
                staged_root, staged_unit = root / n, layer_bytes / n
                if setup.job.offload_parameters != "none" and stored > gathered_as:
                    # An offloaded shard reaches the GPU as stored before the cast reads it (_use_low_precision_
                    # shard: _local_shard.to(self.device); FSDP2: sharded_param_data.to(self.device)), a copy
                    # dropped once the cast is made, before the all-gather allocates its output.
                    cast_root, cast_unit = root_stored / n, layer_stored / n
            elif setup.job.offload_parameters != "none":
                # Offloaded, each shard is copied to the GPU as stored before its all-gather and freed once the
                # unshard returns (FlatParamHandle.pre_unshard -> flat_param_to(self.device), unshard ->
                # _use_unsharded_flat_param drops the copy; FSDP2 _fsdp_param.py FSDPParam.all_gather_inputs,
                # _fsdp_collectives.py foreach_all_gather: del param_all_gather_inputs).
                staged_root, staged_unit = root_stored / n, layer_stored / n
            # One unit's copy is live while a layer's backward prefetches the next unit, and at the loss, which
            # prefetches the last; the blocks these copies leave on their own stream are the allocator's
            # (training_step._Units). A cast's copy as stored adds to no point: it goes before the prefetched
            # unit is gathered and is no larger (a shard over n >= 2 ranks, at most 4 / 2 of the 16-bit unit).
            gathered_loss, gathered = gathered_loss + staged_unit, gathered + staged_unit
            framework = f"fsdp{setup.job.fsdp_version}"
            gathering = Gathering(
                framework=framework,
                root=root,
                unit=layer_bytes,
                staged_root=staged_root,
                staged_unit=staged_unit,
                unit_gradient=unit_gradient,
                reduced=0.0,
                stored_root=root_stored,
                stored_unit=layer_stored,
                cast_root=cast_root,
                cast_unit=cast_unit,
                head_gradient=head_gradient,
                embedding_gradient=embedding_gradient,
                root_gradient=root_gradient,
            )
        unsharded = weights
        if setup.shards_parameters:
            weights /= n
        if sharding == "fsdp" and n > 1 and setup.pipeline_parallel > 1:
            # Pipelining over FSDP keeps the stage's parameters unsharded, as they are stored (NF4 codes for
            # QLoRA), from each micro-batch's forward to its backward (torchtitan: reshard_after_forward =
            # not pp_enabled, "to avoid per-microbatch all-gathers"), and over several micro-batches
            # accumulates their gradients unsharded until the last one's backward (torch.distributed.
            # pipelining stage.py: set_requires_gradient_sync(last_backward)), in the reduce dtype: fp32
            # under mixed precision (FSDP2 FSDPParam.to_accumulated_grad_if_needed).
            gathered = gathered_forward = gathered_loss = gathered_end = gathered_step = max(gathered, unsharded)
            if setup.job.gradient_accumulation > 1:
                grads = trainable_local * (4 if setup.job.precision in MIXED else grad_b)
    paged = 0.0
    if setup.job.optimizer == "adamw-8bit-paged":
        paged, optimizer = optimizer, 0.0
    host = nvme = saved_grad_shards = reduced = offload_copies = 0.0
    if setup.job.offload_optimizer != "none":
        # The step runs on the CPU: fp32 master weights, the states, an fp32 copy of the gradients and the
        # step's own temporaries live there (DeepSpeed ZeRO-Offload: 16 B/param on the host for mixed-precision
        # Adam; torch's foreach AdamW on CPU tensors, as FSDP cpu_offload runs it, adds its temporary).
        moved = optimizer + paged + 4 * grad_elements + step_temp
        optimizer = paged = step_temp = 0.0
        if sharding == "zero2" and runs_deepspeed_zero(setup):
            # ZeRO-2 copies each partition gradient to the host as its bucket is reduced and drops it (stage_1_and_2.py
            # copy_grads_in_partition under cpu_offload: async_inplace_copy_grad_to_fp32_buffer_from_gpu, then
            # param.grad = None; the other ranks' cleared): none stays on the GPU past its bucket. It keeps a GPU
            # buffer of the largest parameter's size all run (temp_grad_buffer_for_gpu_offload), and at each gradient
            # copies its piece to fp64 for the norm (set_norm_for_param_grad_in_gpu: .double().norm(2)), frees it,
            # then checks the whole gradient for overflow whatever the precision (update_overflow_tracker_for_param_
            # grad -> _has_inf_or_nan: 11 bytes an element live at once, zero_step.OVERFLOW_CHECK_PARTS).
            grads = 0.0
            optimizer = largest_param * SHARDED_WEIGHT_BYTES[setup.job.precision]
            offload_copies = max(FP64_BYTES, sum(OVERFLOW_CHECK_PARTS)) * largest_param
        if sharding == "zero3" and runs_deepspeed_zero(setup):
            # ZeRO-3 keeps its flat 16-bit gradient partition on the host (stage3.py: grad_partitions_flat_buffer on
            # self.device, the CPU under any optimizer offload, pinned); each reduced piece is copied there, and on the
            # GPU copied back (.to(device)) and cast to fp32 for the fp32 gradient one parameter at a time
            # (partition_grads), beside the bucket's reduce-scatter copy.
            host += grads
            grads = 0.0
            offload_copies = (grad_b + FP32_BYTES) * largest_param / n
        if setup.job.offload_optimizer == "cpu":
            host += moved
        else:
            nvme += moved
    if setup.job.offload_parameters != "none":
        moved = weights + (grads if setup.job.offload_optimizer != "none" else 0.0)
        if setup.job.offload_optimizer != "none":
            if sharding == "fsdp" and setup.job.fsdp_version == 1:
                # FSDP1 keeps each unit's reduced gradient shard on the GPU beside its host copy until backward
                # ends (_runtime_utils.py _accumulate_sharded_grad: flat_param._saved_grad_shard; freed by
                # FlatParamHandle.prepare_gradient_for_optim); FSDP2 drops it once copied to the host
                # (_fsdp_collectives.py foreach_reduce: "we can free it here by not keeping a ref").
                saved_grad_shards = grads
            elif sharding == "fsdp":
                reduced = grads
            grads = 0.0
        weights = 0.0
        if setup.job.offload_parameters == "cpu":
            host += moved
        else:
            nvme += moved
    weights += whole
    largest_gradient = min(grads, largest_param * grad_b) if setup.job.optimizer_in_backward else grads
    if setup.job.optimizer_in_backward:
        # Each parameter is stepped (and its gradient freed) as soon as its gradient is complete.
        step_temp = step_temp * min(1.0, largest_param / max(trainable_local, 1.0))
    # The preparation runs on the GPU once the model is loaded there, not on weights that stream from the
    # host or from other ranks (FSDP or ZeRO-3 loads them on the CPU; offloaded ones live there).
    upcast = edges if not streams else ()
    zero = None
    if runs_deepspeed_zero(setup) and setup.job.offload_optimizer == "none" and not setup.job.optimizer_in_backward:
        # ZeRO-3 partitions each parameter: the norm's largest copy is one parameter's partition (the fp32 cast of
        # the flattened gradients: zero_step.FP32_BYTES).
        largest = largest_param / n if sharding == "zero3" else largest_param
        held = (
            held_partition(optimizer_order(setup), n) if sharding != "zero3" and partition < trainable_local else None
        )
        first_reduce = zero2_first_reduce(setup, trainable_local) if sharding == "zero2" else None
        fp16 = setup.job.precision == "fp16-mixed"
        zero = zero_step(sharding, partition, grad_b, largest, fp16=fp16, held=held, buffer_after_layers=first_reduce)
        if sharding == "zero2":  # its gradient buffer holds whole parameters (held_partition) from backward on
            grads = zero.partition_gradients
        if sharding == "zero3":
            # The step releases every gathered parameter first (stage3.py step: _partition_all_parameters).
            gathered_step = 0.0
    scatter = scatter_copy(setup, trainable_local)
    return ModelStates(
        weights,
        grads,
        optimizer,
        paged,
        step_temp,
        copies,
        gathered,
        largest_gradient,
        host,
        nvme,
        gathered_forward,
        gathered_loss,
        gathered_end,
        gathered_step,
        saved_grad_shards,
        upcast,
        setup.kbit_preparation in ("trl", "axolotl"),
        evolve(gathering, reduced=reduced) if gathering is not None else None,
        buckets,
        bucket_lifetime(setup),
        max(1, reduce_buckets(setup)[0]),
        zero,
        (scatter[0] + offload_copies, scatter[1] + offload_copies),
    )


def _preparation_excess(states: ModelStates) -> float:
    """How far the live bytes rise above the prepared weights while the preparation runs (0 without one)."""
    held: dict[int, float] = {}
    live = peak = 0.0
    for take, tensor, size in preparation_events(states):
        if take:
            held[tensor] = size
            live += size
            peak = max(peak, live)
        else:
            live -= held.pop(tensor)
    return peak - live


def _edge_tensors(setup: TrainingSetup) -> tuple[float, ...]:
    """Elements on the most loaded GPU of the embedding and of an untied LM head (``local_params``' edges:
    both on one stage, else the larger end's), the 16-bit tensors a QLoRA preparation casts whole."""
    arch, tp = setup.architecture, setup.tensor_parallel
    embedding, head = arch.vocab * arch.hidden / tp, arch.lm_head_params() / tp
    tensors: tuple[float, ...] = (embedding, head)
    if setup.pipeline_parallel > 1:
        first = arch.embedding_params() + arch.vision_params
        last = arch.lm_head_params() + arch.norm_params()
        tensors = (embedding,) if first >= last else (head,)
    return tuple(elements for elements in tensors if elements >= arch.hidden)  # a tied head is the embedding


def _activations(setup: TrainingSetup) -> MicroBatchActivations:
    arch = setup.architecture
    act_b = setup.activation_bytes
    tokens = setup.tokens
    tp = setup.tensor_parallel
    per_layer = layer_activation_bytes_per_token(setup) * tokens
    largest_layer = largest_layer_activation_bytes_per_token(setup) * tokens if arch.hybrid else per_layer
    returned, log_softmax, upcast = logits_bytes(setup)
    final_norm = norm_bytes(setup, act_b) * tokens
    layer_input = setup.residual_bytes * arch.hidden / setup.sequence_shards
    # 1F1B pipelining keeps L layers' worth of activations in flight on the first stage, whatever PP is.
    if setup.job.checkpointing == "full":
        kept_per_layer = layer_input * tokens
    elif setup.job.checkpointing == "selective":
        kept_per_layer = selective_layer_bytes_per_token(setup) * tokens
    else:
        kept_per_layer = per_layer
    on_gpu_layers = min(arch.layers, OFFLOADED_LAYERS_ON_GPU) if setup.job.activation_offloading else arch.layers
    offloaded = kept_per_layer * (arch.layers - on_gpu_layers)
    layers = kept_per_layer * on_gpu_layers
    scores = arch.heads / tp * setup.job.seq_len**2 * setup.job.micro_batch
    eager_scores = 0.0
    if setup.job.attention == "eager":
        # Beyond what is saved: the bf16 masked scores (2 B); when the layer keeps nothing of its own
        # (full checkpointing), masked scores, their fp32 upcast and the fp32 softmax coexist (10 B).
        eager_scores = (10 if setup.job.checkpointing == "full" else 2) * scores
    # bitsandbytes dequantizes one NF4 linear at a time to bf16 (embeddings and LM head are not NF4).
    widest = max(
        arch.hidden * max(arch.expert_width if arch.is_moe else arch.intermediate, arch.q_width),
        max((weights for _, weights in arch.state_mixer_modules), default=0),
    )
    dequant = 2 * widest / tp if setup.job.method == "qlora" else 0.0
    # DoRA computes each adapted layer's full weight norm in the adapter dtype: an identity of d_in^2, the
    # merged B @ A, the base weight cast and their sum, for the largest adapted matrix at a time.
    dora = 0.0
    if setup.is_adapter and setup.job.lora_variant == "dora":
        shapes = adapted_shapes(arch)
        dora = max(
            (
                (d_in * d_in + 3 * d_in * d_out) * setup.lora_bytes / tp
                for d_in, d_out in (shapes[name] for name in setup.job.lora_targets)
                if d_in
            ),
            default=0.0,  # no target the model has (gate_proj alone on a plain MLP): nothing adapted
        )
    mlp_width = input_widths(setup)["mlp"]
    # A layer's backward holds the gradients of the down_proj input, of act and up, and of gate at once
    # (3 x i per token; 2 for a plain MLP): 0.66 GiB at 8B, 1x8192, matching the ground truth.
    layer_backward = (3 if arch.mlp == "gated" else 2) * act_b * mlp_width * tokens
    if setup.job.attention == "eager":
        layer_backward = max(layer_backward, 6 * scores)  # bf16 + fp32 score gradients
    loss_gradients = 0.0 if setup.job.fused_loss else 2 * 4 * (arch.vocab / tp) * tokens
    recomputing = setup.job.checkpointing != "none"
    return MicroBatchActivations(
        saved=layers + final_norm + returned + log_softmax,
        returned_logits=returned,
        returned_cache=returned_cache_bytes(setup),
        per_layer=largest_layer,
        recomputed={"full": largest_layer, "selective": largest_layer - kept_per_layer}.get(
            setup.job.checkpointing, 0.0
        ),
        final_norm=final_norm,
        checkpoint_input=layer_input * tokens if setup.job.checkpointing == "full" else 0.0,
        forward_temporaries=max(upcast, eager_scores, dequant, dora),
        loss_gradients=loss_gradients,
        layer_backward_temporaries=layer_backward + dequant + (dora if recomputing else 0.0),
        host=offloaded,
        kept_per_layer=kept_per_layer,
        layers_kept=on_gpu_layers,
        log_softmax=log_softmax,
        upcast=upcast,
        layer_forward_temporaries=max(eager_scores, dequant, dora),
    )


# How long each training loop (finetune.loop) holds the model outputs: the phases below count them so; the
# assumptions and GP211 say it in these words.
OUTPUTS_HELD = {
    "manual": "until the next step's forward returns (through backward and the optimizer step, and beside it)",
    "after-step": "through backward and the optimizer step",
    "trainer": "to the end of the forward (released before backward, as the Trainer does)",
}


_STATES_READ = reading(STATES_IGNORE)
_ACTIVATIONS_READ = reading(ACTIVATIONS_IGNORE)


@functools.lru_cache(maxsize=4096)
def _remembered_states(keyed: Keyed) -> ModelStates:
    return _model_states(keyed.setup)


@functools.lru_cache(maxsize=4096)
def _remembered_activations(keyed: Keyed) -> MicroBatchActivations:
    return _activations(keyed.setup)


def _step_read(setup: TrainingSetup) -> tuple[object, ...]:
    """What ``SimulatedStep`` reads of a setup: its model states and activations (``ModelStates``,
    ``MicroBatchActivations``), its evaluation (which reads the replica count where predictions are kept), the shapes
    they fall into and the order of the step; else not the replica count beyond whether there are several (a search
    tries many that share one step)."""
    job = setup.job
    return (
        _remembered_states(Keyed(setup, _STATES_READ)),
        _remembered_activations(Keyed(setup, _ACTIVATIONS_READ)),
        _evaluation_read(setup),
        setup.architecture,
        setup.pipeline_parallel,
        setup.tensor_parallel,
        setup.sequence_shards,
        # the ranks a wrap shards each unit over (training_step.wrap_model); else only whether there are several
        setup.data_parallel if job.fsdp_loading != "sharded" else setup.data_parallel > 1,
        job.method,
        job.lora_rank,
        job.lora_targets,
        job.sharding,
        job.checkpointing,
        job.expandable_segments,
        job.fsdp_loading,
        job.offload_parameters,
        job.gradient_accumulation > 1,
        job.optimizer_in_backward,
    )


@functools.lru_cache(maxsize=1024)
def _remembered_cache(keyed: Keyed) -> int:
    """The allocator's cache above the live peak over two steps and the evaluation after them, if any."""
    states, acts, evaluation = keyed.key[:3]
    live, reserved = SimulatedStep(keyed.setup, states, acts, evaluation).run()
    return max(0, reserved - live)


def states_floor(setup: TrainingSetup) -> int:
    """A lower bound of ``estimate_training(setup, overhead).per_gpu - overhead`` from the model states
    alone, which no micro-batch, recompute or loss setting changes (``STATES_IGNORE``): a planner
    bounds every setting of a shape and sharding with one of these, before any estimate.

    Why it is a bound: ``per_gpu - overhead`` is the largest phase total, and the backward phase is
    the largest (by its float sum) of three dicts, one of which, its end, holds the fixed states and
    the gradients and DeepSpeed's buckets: ``end = weights + optimizer + gathered_end + gradients +
    saved_grad_shards + reduce_buckets`` (``largest_gradient`` under optimizer_in_backward). The phase's total rounds
    each part up (``_ints``), so ``per_gpu - overhead >= sum(ceil(backward part)) >= sum(backward part) >= sum(end
    part) - eps``, where eps (float sums that tie or nearly tie) is far below a byte. Each part is rounded down here
    and one byte taken off: ``sum(floor(end part)) - 1 < sum(end part) - eps``."""
    states = _remembered_states(Keyed(setup, _STATES_READ))
    gradients = states.largest_gradient if setup.job.optimizer_in_backward else states.gradients
    parts = (
        states.weights,
        states.optimizer,
        states.gathered_end,
        gradients,
        states.saved_grad_shards,
        states.reduce_buckets,
    )
    return sum(math.floor(part) for part in parts) - 1


def estimate_training(setup: TrainingSetup, overhead: int, allocator: bool = True) -> TrainingMemory:
    """Per-GPU memory of one steady-state step; ``overhead`` is the memory outside PyTorch's allocator.
    ``allocator=False`` leaves the allocator's cache out (0): a lower bound of the device figure that
    costs the phase model alone, which a planner rules layouts out with before it runs the allocator."""
    arch = setup.architecture
    states = _remembered_states(Keyed(setup, _STATES_READ))
    acts = _remembered_activations(Keyed(setup, _ACTIVATIONS_READ))
    grads = states.gradients
    zero = states.zero_step
    # Gradients persist across micro-batches; ZeRO-3's live in a buffer allocated as its optimizer initialises.
    accumulating = grads if setup.job.gradient_accumulation > 1 or (zero and zero.keeps_gradients) else 0.0
    made_at_last, made_by_first = gradient_shares(setup)
    if setup.is_adapter or setup.job.optimizer_in_backward:
        # One parameter's at a time where each is stepped as it completes; the adapters' are small: all of
        # them (largest_gradient), the bound, at either moment.
        grads_at_last_layer = grads_before_first_layer = states.largest_gradient
    else:
        grads_at_last_layer = grads * made_at_last
        grads_before_first_layer = grads * made_by_first
    # DeepSpeed ZeRO-2's buffer, allocated whole at a backward's first bucket reduce, one a micro-batch: under
    # accumulation a later backward's beside the first's until its epilogue (zero_step's module docstring).
    buffer_from = zero.buffer_after_layers if zero else None
    buffered = accumulating + grads if buffer_from is not None else 0.0
    if buffer_from == 0:  # allocated before the last layer's backward
        grads_at_last_layer = buffered
    if buffer_from is not None and buffer_from < setup.stage_layers:
        grads_before_first_layer = buffered  # allocated before the first layer's backward
    in_backward_step = states.step_temporaries if setup.job.optimizer_in_backward else 0.0  # one parameter's
    fixed = {"weights": states.weights, "optimizer": states.optimizer}
    # The gradient buckets in every phase, through backward, or through backward and the forward after it
    # (training.bucket_lifetime).
    buckets = {"gradient_buckets": states.reduce_buckets}
    backward_buckets = buckets if states.bucket_lifetime in ("backward", "accumulation") else {}
    if states.bucket_lifetime == "step":
        fixed |= buckets
    forward = {
        **fixed,
        "gathered_parameters": states.gathered_forward,
        "gradients": accumulating,
        "autocast_weight_copies": states.autocast_copies,
        "activations": acts.saved,
        "temporaries": acts.forward_temporaries,
    }
    if states.bucket_lifetime == "accumulation":
        forward |= buckets
    # Backward peaks at its start (the loss gradients are live, and the model outputs too unless the
    # training loop released them first, as the Hugging Face Trainer and torchtune do), while the first
    # layer is processed (most gradients, one layer's activations), or at its end. A loop that holds the
    # outputs (loop: manual, after-step) keeps them through backward and the optimizer step; one that holds
    # them in a variable until the next step rebinds it (manual) keeps them beside the next forward too.
    outputs = acts.returned_logits + acts.returned_cache if setup.job.loop != "trainer" else 0.0
    # A loop that holds them holds them as the framework hands them back (``outputs_widened``). The copy is made as
    # forward returns, after the loss freed its own upcast: no moment holds more than the loss did.
    outputs *= outputs_widened(setup)
    forward["activations"] += acts.returned_cache
    forward["model_outputs"] = outputs if setup.job.loop == "manual" else 0.0  # the previous step's
    start = {
        **fixed,
        "gathered_parameters": states.gathered_loss,
        "gradients": accumulating,
        "autocast_weight_copies": states.autocast_copies,
        "activations": acts.saved - acts.returned_logits,
        "model_outputs": outputs,
        "temporaries": acts.loss_gradients,
        **backward_buckets,
    }
    # The last layer's backward, the first a step runs: every layer's kept tensors still live (the loss's
    # gradients, its log-softmax and the final norm's input freed once theirs is done), beside that layer's
    # recomputed tensors, its backward's transients and the gradients made so far
    # (training_step.SimulatedStep's first backward layer).
    last_layer = {
        **fixed,
        "gathered_parameters": states.gathered,
        # FSDP1 offload's gradient shards stay on the GPU as each unit's is reduced: the same share so far
        "gradients": max(accumulating, grads_at_last_layer) + states.saved_grad_shards * made_at_last,
        "autocast_weight_copies": states.autocast_copies,
        # the loss's log-softmax and the final norm's input went with their backward, before this layer's
        "activations": acts.saved - acts.returned_logits - acts.log_softmax - acts.final_norm + acts.recomputed,
        "model_outputs": outputs,
        "temporaries": acts.layer_backward_temporaries + in_backward_step + states.reduce_copies[0],
        **backward_buckets,
    }
    middle = {
        **fixed,
        "gathered_parameters": states.gathered,
        "gradients": max(accumulating, grads_before_first_layer) + states.saved_grad_shards,
        "autocast_weight_copies": states.autocast_copies / arch.layers,
        "activations": acts.per_layer + acts.checkpoint_input,
        "model_outputs": outputs,
        "temporaries": acts.layer_backward_temporaries + in_backward_step + states.reduce_copies[0],
        **backward_buckets,
    }
    # DeepSpeed ZeRO-1 copies the partition's gradients into a buffer of their own as backward ends
    # (stage_1_and_2.py copy_grads_in_partition, contiguous_gradients), beside every gradient until the
    # epilogue drops them (zero_step).
    partition_copy = zero.partition_gradients if zero and zero.stage == "zero1" else 0.0
    if buffer_from is None:
        gradients = states.largest_gradient if setup.job.optimizer_in_backward else grads
        end_gradients = gradients + states.saved_grad_shards + partition_copy
    else:  # ZeRO-2: a later micro-batch's buffer beside the first's until its epilogue
        end_gradients = buffered
    end = {
        **fixed,
        "gathered_parameters": states.gathered_end,
        "gradients": end_gradients,
        "model_outputs": outputs,
        "temporaries": states.reduce_copies[1],
        **backward_buckets,
    }
    backward = max((start, last_layer, middle, end), key=lambda parts: sum(parts.values()))
    phases: dict[str, dict[str, int]] = {}
    if states.upcast:  # a QLoRA preparation: its copies come and go before training (max_memory_allocated counts them)
        phases["loading"] = _ints({"weights": states.weights, "kbit_preparation_copies": _preparation_excess(states)})
    phases |= {"forward": _ints(forward), "backward": _ints(backward)}
    if not setup.job.optimizer_in_backward:
        # The step's largest moment: its gradients and temporaries, or DeepSpeed ZeRO's copies (zero_step).
        moments = zero.moments(states.step_temporaries) if zero else ((grads, states.step_temporaries),)
        step_gradients, step_copies = max(moments, key=sum)
        phases["optimizer_step"] = _ints(
            {
                **fixed,
                "gathered_parameters": states.gathered_step,
                "gradients": step_gradients,
                "paged_optimizer_states": states.paged_optimizer,
                "optimizer_step_temporaries": step_copies,
                "model_outputs": outputs,
            }
        )
    evaluation = _evaluation_read(setup)
    if evaluation is not None:
        phases["evaluation"] = _ints(_evaluation(states, evaluation, fixed, outputs))
    cache = _remembered_cache(Keyed(setup, _step_read)) if allocator else 0
    return TrainingMemory(
        arch.params,
        trainable_params(setup),
        phases,
        overhead,
        host=math.ceil(states.host + acts.host),
        nvme=math.ceil(states.nvme),
        allocator_cache=cache,
    )


def _evaluation(
    states: ModelStates, evaluation: Evaluation, fixed: dict[str, float], outputs: float
) -> dict[str, float]:
    """An evaluation forward between steps (finetune.evaluation: the Trainer's evaluation_loop -> prediction_step,
    ``with torch.no_grad(): loss, outputs = self.compute_loss(model, inputs, return_outputs=True)``), on its own
    micro-batch: the weights and optimizer states, the units a sharded forward gathers, autocast's weight copies
    (cached through the forward), no gradient (zero_grad(set_to_none=True) after each step) but ZeRO-3's buffer,
    and, as nothing is saved for backward, the larger of one layer's tensors and the loss's moment: the logits,
    their fp32 copy (transformers ForCausalLMLoss: ``logits.float()``) and cross_entropy's fp32 log-softmax.

    With compute_metrics the predictions of the window's earlier batches are kept beside that forward, and once it
    returns (the autocast cache cleared with its context, the units as between steps) the batch's own are gathered
    from every rank and concatenated to them: ``nested_concat`` -> torch.cat makes the longer tensor while the kept
    one and the gathered batch still live, 2 x window x gathered at once (a window of one batch keeps it as it is:
    ``Evaluation.after_forward``). Where the config keeps ``use_cache``, the forward builds every attention layer's
    keys and values, eval mode not turning it off (``Evaluation.cache``)."""
    acts = evaluation.activations
    zero = states.zero_step
    base = {
        **fixed,
        "gradients": states.gradients if zero is not None and zero.keeps_gradients else 0.0,
        "model_outputs": outputs,
    }
    loss = acts.returned_logits + acts.upcast + acts.log_softmax
    forward = {
        **base,
        "gathered_parameters": states.gathered_forward,
        "autocast_weight_copies": states.autocast_copies,
        "activations": max(loss, acts.per_layer + acts.layer_forward_temporaries) + evaluation.cache,
        "predictions": evaluation.kept,
    }
    # After the forward (its outputs, the key/value cache among them, dropped as prediction_step returns): what
    # stays gathered between steps (ZeRO-3's units, FSDP's resharded), and the window's predictions.
    concatenation = {
        **base,
        "gathered_parameters": states.gathered_step,
        "predictions": evaluation.kept + sum(evaluation.after_forward),
    }
    return max(forward, concatenation, key=lambda parts: sum(parts.values()))


# preprocess_logits_for_metrics returning logits.argmax(-1): a token's prediction as an int64 id; the labels
# prediction_step returns beside the predictions, which evaluation_loop gathers and keeps alike, are int64 ids too.
ARGMAX_BYTES = LABEL_BYTES = 8


def _evaluation_read(setup: TrainingSetup) -> Evaluation | None:
    """The evaluation (finetune.evaluation) as the memory model runs it, None without one: its own micro-batch and
    sequence length's activations (remembered as any micro-batch's) and, where the Trainer keeps predictions for
    compute_metrics, its window of batches and what each adds per GPU: the logits of every data-parallel rank's
    batch over the whole vocabulary in their own dtype, or their argmax as int64 token ids (8 B a token), and the
    batch's int64 labels, kept in a container of their own (counted with the predictions, as if one: the labels'
    own concatenation comes after the predictions', so this is an upper bound by at most a window of labels)."""
    job = setup.job
    if not job.eval_micro_batch:
        return None
    seq_len = job.eval_seq_len or job.seq_len
    # No fused loss in evaluation: Liger's (the Trainer's use_liger_kernel) skips the logits in training mode alone
    # (lce_forward: ``skip_logits = self.training and labels is not None``), so a model in eval mode makes them and
    # the standard loss; compute_metrics reads them anyway. (Cut Cross Entropy fuses in eval mode too unless
    # train_only: under it this errs on the safe side.)
    evaluated = evolve(job, micro_batch=job.eval_micro_batch, seq_len=seq_len, fused_loss=False)
    evaluated_setup = evolve(setup, job=evaluated)
    acts = _remembered_activations(Keyed(evaluated_setup, _ACTIVATIONS_READ))
    # Eval mode keeps the config's use_cache (transformers drops it under gradient checkpointing in training alone):
    # with no_grad nothing else holds these, so all of them count, however the training step saved its own.
    cache = key_value_bytes(evaluated_setup) if job.use_cache else 0.0
    if job.eval_predictions == "none" or job.eval_samples is None:
        return Evaluation(acts, cache)
    ranks = setup.data_parallel
    batches = math.ceil(job.eval_samples / (job.eval_micro_batch * ranks))
    window = min(job.eval_accumulation_steps or batches, batches)
    # A rank's logits as prediction_step gets them: the returned ones, whose vocabulary tensor parallelism splits,
    # in fp32 where the framework widens the model's outputs.
    tokens = job.eval_micro_batch * seq_len
    predictions = acts.returned_logits * setup.tensor_parallel * outputs_widened(setup)
    if job.eval_predictions == "argmax":
        predictions = ARGMAX_BYTES * tokens
    return Evaluation(acts, cache, window, (predictions + LABEL_BYTES * tokens) * ranks, ranks)


def _ints(parts: dict[str, float]) -> dict[str, int]:
    return {name: math.ceil(value) for name, value in parts.items() if value}
