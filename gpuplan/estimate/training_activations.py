"""Activation bytes per token of a training step: what each decoder layer saves for backward (by kind of layer,
under full or selective recomputation, with adapters, QLoRA's dequantised inputs and autocast's casts), the
widths its saved tensors split into, the logits and the loss's fp32 copies, and what the model returns with them
(its key and value states under use_cache; the outputs as the training loop gets them). ``training_memory`` sizes a
micro-batch's activations from them; see ``training``'s docstring for the sources."""

from __future__ import annotations

from gpuplan.architecture import Architecture
from gpuplan.estimate.training import (
    FUSED_LOSS_CHUNK_TOKENS,
    TrainingSetup,
    adapted_matrices,
    copies_per_token,
    layer_kinds,
    layer_targets,
)


def norm_bytes(setup: TrainingSetup, act: int) -> float:
    """RMSNorm upcasts its input to fp32 and saves it; LayerNorm saves its input as it is. A trainable
    weight also saves the normalised output. Sequence parallelism splits the region over TP ranks."""
    arch = setup.architecture
    h = arch.hidden
    saved = (4 if arch.norm == "rms" else setup.residual_bytes) * h + (2 * act * h if not setup.is_adapter else 0)
    return saved / setup.sequence_shards


def _attention_bytes(setup: TrainingSetup, act: int, seq: int) -> float:
    """Per token: what SDPA (or eager softmax attention) keeps for backward.

    A fused QKV projection hands SDPA a view of V into its output, so the whole q/k/v output stays
    alive beside the rotated copies of q and k (GPT-NeoX, Phi-3, Falcon, litgpt). A gated attention
    (Qwen3NextAttention: ``attn_output * sigmoid(gate)``) also keeps the gate and the gated product, the
    o_proj input apart from the attention output.
    """
    arch, t = setup.architecture, setup.tensor_parallel
    q, kv = arch.q_width / t, max(1, arch.n_kv // t) * arch.d_head
    heads = arch.heads / t
    fused = act * (q + kv) if arch.fused_qkv else 0.0
    gated = 2 * act * q if arch.attention_gate else 0.0
    if setup.job.attention == "eager":
        probabilities = (4 + (act if act != 4 else 0)) * heads * seq  # fp32 softmax + its cast
        return act * 4 * q + probabilities + fused + gated  # q, repeated k and v, o_proj input
    return act * (2 * q + 2 * kv) + 4 * heads + fused + gated  # q, k, v, output (= o_proj input), logsumexp


def _state_mixer_bytes(setup: TrainingSetup, act: int) -> float:
    """Per token: what a linear-attention or Mamba-2 mixer keeps for backward (its input, the norm output,
    is counted with the norms), on one tensor-parallel rank.

    Mamba-2: transformers' NemotronHMamba2Mixer trains through mamba_ssm ``mamba_split_conv1d_scan_combined``,
    whose ``MambaSplitConv1dScanCombinedFn.forward`` saves the in_proj output zxbcdt (2 d_inner + 2 groups x
    d_state + heads), the pre-norm scan output out_x (d_inner) and the gated norm's fp32 rstd per group.
    Gated DeltaNet (Qwen3NextGatedDeltaNet.forward): the conv input and output (conv_dim each; causal_conv1d
    saves its input), q and k repeated to the value heads for the kernel, g (fp32) and beta per value head,
    the kernel output and the gate z (the gated norm's inputs) and the out_proj input (value_dim each).
    The FLA ``chunk_gated_delta_rule`` kernel's own saved chunk intermediates are not counted.
    """
    arch, t = setup.architecture, setup.tensor_parallel
    if arch.state_kind == "M":
        zxbcdt = 2 * arch.mamba_inner + 2 * arch.ssm_groups * arch.ssm_state + arch.mamba_heads
        return (act * (zxbcdt + arch.mamba_inner) + 4 * arch.ssm_groups) / t
    repeat = arch.linear_value_heads // arch.linear_key_heads
    width = 2 * arch.conv_channels + 2 * arch.linear_key_dim * repeat + 3 * arch.linear_value_dim
    return (act * width + (4 + act) * arch.linear_value_heads) / t


def _state_mixer_selective_bytes(setup: TrainingSetup, act: int) -> float:
    """Per token, under selective checkpointing: a state mixer's matmul outputs (its in_proj outputs and
    out_proj output, split by sequence parallelism) and its kernel output, as attention keeps SDPA's."""
    arch, t = setup.architecture, setup.tensor_parallel
    out = act * arch.hidden / setup.sequence_shards
    if arch.state_kind == "M":
        zxbcdt = 2 * arch.mamba_inner + 2 * arch.ssm_groups * arch.ssm_state + arch.mamba_heads
        return act * (zxbcdt + arch.mamba_inner) / t + out
    projected = 2 * arch.linear_key_dim + 2 * arch.linear_value_dim + 2 * arch.linear_value_heads
    return act * (projected + arch.linear_value_dim) / t + out


def _mlp_bytes(setup: TrainingSetup, act: int, down_input: bool | None = None) -> float:
    """Per token: the MLP's saved tensors; ``down_input``: whether the down_proj input is among them (by
    default when down_proj trains: an adapted or full down_proj saves it)."""
    arch, t = setup.architecture, setup.tensor_parallel
    frozen_down = (
        (setup.is_adapter and "down_proj" not in setup.job.lora_targets) if down_input is None else not down_input
    )
    if arch.is_moe:
        # Per routed expert: its gated MLP tensors plus the gathered copy of the token and its weighted
        # output (2h each); the router keeps fp32 logits, softmax and top-k weights (3 x 4 B per expert).
        # Together within 0.1% of the mixtral-8x7b ground-truth row.
        width = arch.expert_width / t
        per_expert = (4 * act * width if not frozen_down else 3 * act * width) + 2 * act * arch.hidden
        shared = arch.shared_experts * 4 * act * arch.shared_width / t
        return arch.experts_per_token * per_expert + shared + 12 * arch.experts
    width = arch.intermediate / t
    if arch.mlp == "gated":  # gate, up, silu(gate), and the down_proj input
        return (3 if frozen_down else 4) * act * width
    return (1 if frozen_down else 2) * act * width


_INPUT_GROUP = {
    "q_proj": "norm",
    "k_proj": "norm",
    "v_proj": "norm",
    "o_proj": "attention",
    "gate_proj": "norm2",
    "up_proj": "norm2",
    "down_proj": "mlp",
}


def input_widths(setup: TrainingSetup) -> dict[str, float]:
    """Per-token width of each linear input, per GPU: norm outputs are split by sequence parallelism."""
    arch, t = setup.architecture, setup.tensor_parallel
    width = (arch.expert_width * arch.experts_per_token if arch.is_moe else arch.intermediate) / t
    norm = arch.hidden / setup.sequence_shards
    return {"norm": norm, "norm2": norm, "attention": arch.q_width / t, "mlp": width}


def _lora_input_bytes(setup: TrainingSetup, act: int, targets: tuple[str, ...] | None = None) -> float:
    """peft casts each adapted layer's input to the adapter dtype and saves it (plus the r-dim output).

    Without a cast the adapters save their input itself: once per distinct input; the o_proj input
    (the attention output) and the down_proj input (counted in the MLP) are saved anyway. With LoRA
    dropout each adapter keeps a 1-byte mask and its own dropped copy of the input. DoRA keeps, per
    adapted layer, the base and the adapter outputs (scaled by the trainable magnitude) in the adapter
    dtype (peft ``DoraLinearLayer.forward``).
    """
    if not setup.is_adapter:
        return 0.0
    targets = setup.job.lora_targets if targets is None else targets
    if not targets:
        return 0.0
    widths = input_widths(setup)
    lora = setup.lora_bytes
    total = _adapter_output_bytes(setup, targets)
    if setup.job.lora_dropout > 0:
        total += sum((1 + lora) * widths[_INPUT_GROUP[name]] for name in targets)
    elif lora != act:
        total += sum(lora * widths[_INPUT_GROUP[name]] for name in targets)
    else:
        inputs = {_INPUT_GROUP[name] for name in targets} - {"attention", "mlp"}
        total += sum(act * widths[group] for group in inputs)
    return total


def _adapter_output_bytes(setup: TrainingSetup, targets: tuple[str, ...]) -> float:
    """Per token: what the adapters keep of their own outputs, whatever their inputs: each adapter's rank-wide
    intermediate and, with DoRA, the base and adapter outputs in the adapter dtype."""
    lora, arch, job = setup.lora_bytes, setup.architecture, setup.job
    # per adapted matrix a token passes through (an MoE layer's: each expert it is routed to)
    matrices = [
        (d_out, copies_per_token(arch, copies))
        for name in targets
        for _, d_out, copies in adapted_matrices(arch, name, arch.moe_layers > 0, job.lora_experts)
    ]
    total = float(lora * job.lora_rank * sum(passes for _, passes in matrices)) / setup.tensor_parallel
    if job.lora_variant == "dora":
        total += sum(2 * lora * d_out * passes for d_out, passes in matrices)
    return total


def _qlora_input_bytes(
    setup: TrainingSetup, act: int, targets: tuple[str, ...] | None = None, mixer: str = "A", mlp: bool = True
) -> float:
    """What a QLoRA layer keeps of its 4-bit linears' inputs beyond what the adapters keep.

    bitsandbytes before 0.43.2 saved the input of every quantized linear (``nf4_saves_inputs``), frozen or
    not: the norm outputs, the attention output's contiguous copy and the down_proj input. From 0.43.2 it
    saves none: what a layer keeps is then what it keeps with frozen 16-bit linears (an adapter on o_proj
    keeps SDPA's output, already counted with attention: flash and memory-efficient SDPA return a
    transposed view whose ``.contiguous()`` copies nothing). A layer without an MLP (or without a mixer)
    has only the other half; a state mixer's out_proj input is counted with the mixer."""
    if not setup.nf4_saves_inputs:  # QLoRA on a release before 0.43.2 only
        return 0.0
    targets = setup.job.lora_targets if targets is None else targets
    widths = input_widths(setup)
    kept_by_adapters = set()
    if setup.job.lora_dropout == 0 and setup.lora_bytes == act:
        kept_by_adapters = {_INPUT_GROUP[name] for name in targets} - {"attention", "mlp"}
    groups = (("norm",) if mixer != "-" else ()) + (("norm2",) if mlp else ())
    saved = sum(act * widths[group] for group in groups if group not in kept_by_adapters)
    if mixer in "AS":
        saved += act * widths["attention"]
    if mlp and "down_proj" not in targets:
        saved += act * widths["mlp"]
    return saved


def _group_readers(arch: Architecture, mixer: str) -> dict[str, int]:
    """4-bit linears that read each input group, per token: q, k and v (one fused QKV) or a state mixer's
    in-projections; gate and up (one plain MLP), in each of the experts a token is routed to; down_proj."""
    norm = len(arch.state_mixer_modules) - 1 if mixer in "LM" else (1 if arch.fused_qkv else 3)
    routed = arch.experts_per_token if arch.is_moe else 1
    return {"norm": norm, "norm2": (2 if arch.mlp == "gated" else 1) * routed, "mlp": 1}


def _prepared_qlora_bytes(
    setup: TrainingSetup, act: int, targets: tuple[str, ...], mixer: str = "A", mlp: bool = True
) -> float:
    """Per token, in a QLoRA model prepared for k-bit training with its norms left fp32 (peft, trl): the MLP's
    tensors, what the 4-bit linears and the adapters save of their inputs.

    The norms are fp32, so a norm's output is fp32 (RMSNorm returns ``weight * x.to(input_dtype)``), and
    bitsandbytes' ``Linear4bit.forward`` returns its output in its input's dtype (``out.to(inp_dtype)``):
    the gate and up outputs, the activation and the down_proj input are fp32 (the MLP's saved tensors at
    4 B). Before bitsandbytes 0.43.2 (``nf4_saves_inputs``) each 4-bit linear saved its own compute-dtype
    cast of an fp32 input (``x.to(self.compute_dtype)`` is what ``matmul_4bit`` saved), and each adapter
    its own 16-bit cast under autocast, else its cast to the adapter dtype (peft ``_cast_input_dtype``), or,
    with dropout, its mask and dropped copy. The attention output reaches o_proj as SDPA returns it: in the
    compute dtype, or fp32 where attention runs in fp32 (``fp32_compute``)."""
    arch = setup.architecture
    widths = input_widths(setup)
    readers = _group_readers(arch, mixer)
    fp32_groups = (("norm",) if mixer != "-" else ()) + (("norm2", "mlp") if mlp else ())
    saves = setup.nf4_saves_inputs
    saved = sum(readers[group] * act * widths[group] for group in fp32_groups) if saves else 0.0
    attention = 4 if setup.fp32_compute else act  # SDPA's output: fp32 only where attention runs in fp32
    if mixer in "AS" and saves:
        saved += attention * widths["attention"]  # the o_proj input
    if mlp:
        saved += _mlp_bytes(setup, 4, down_input=False)
    lora = setup.lora_bytes
    saved += _adapter_output_bytes(setup, targets)
    # An adapter's matmul saves its input as it multiplies it: autocast's 16-bit cast, else peft's cast to the
    # adapter dtype; one in that dtype already is the input itself, saved once for the adapters reading it.
    cast_to = act if setup.uses_autocast else lora
    for group in dict.fromkeys(_INPUT_GROUP[name] for name in targets):
        adapters = sum(1 for name in targets if _INPUT_GROUP[name] == group)
        arriving = attention if group == "attention" else 4
        if setup.job.lora_dropout > 0:
            saved += adapters * (1 + lora) * widths[group]
        elif cast_to != arriving:
            saved += adapters * cast_to * widths[group]
        elif group != "attention":  # o_proj's input is SDPA's output, counted with attention (and above)
            saved += arriving * widths[group]
    return saved


def _autocast_norm_bytes(setup: TrainingSetup) -> float:
    """Under autocast the residual stream is fp32: each norm saves x and x_hat in fp32, and every
    linear that reads the norm's output saves its own bf16 cast (autocast caches weights, not inputs)."""
    arch = setup.architecture
    readers = 3 + (2 if arch.mlp == "gated" else 1)
    return (2 * (4 * arch.hidden + 4 * arch.hidden) + readers * 2 * arch.hidden) / setup.sequence_shards


def _kind_bytes_per_token(setup: TrainingSetup, mixer: str, mlp: bool) -> float:
    """Bytes one token saves for backward in one layer of a kind (no checkpointing): its norms, its
    mixer's tensors (attention, linear attention or Mamba-2), its MLP's, and what the adapters keep."""
    act = setup.activation_bytes
    norms = (
        _autocast_norm_bytes(setup)
        if setup.uses_autocast and not setup.is_adapter
        else (setup.architecture.norms_per_layer * norm_bytes(setup, act))
    )
    if mixer in "AS":
        mixing = _attention_bytes(setup, 4 if setup.fp32_compute else act, setup.job.seq_len)
    else:
        # A state mixer's in-projections return their fp32 input's dtype in a model whose norms are fp32.
        mixing = _state_mixer_bytes(setup, 4 if setup.fp32_norms else act) if mixer in "LM" else 0.0
    targets = layer_targets(setup.job.lora_targets, mixer, mlp)
    if setup.fp32_norms:
        return norms + mixing + _prepared_qlora_bytes(setup, act, targets, mixer, mlp)
    return (
        norms
        + mixing
        + (_mlp_bytes(setup, act) if mlp else 0.0)
        + _lora_input_bytes(setup, act, targets)
        + _qlora_input_bytes(setup, act, targets, mixer, mlp)
    )


def layer_activation_bytes_per_token(setup: TrainingSetup) -> float:
    """Bytes one token saves in one decoder layer for backward (no checkpointing); a hybrid model's
    mean over its layers (their sum over the layer count)."""
    arch = setup.architecture
    if not arch.hybrid:
        return _kind_bytes_per_token(setup, "A", True)
    return (
        sum(count * _kind_bytes_per_token(setup, mixer, mlp) for mixer, mlp, count in layer_kinds(arch)) / arch.layers
    )


def largest_layer_activation_bytes_per_token(setup: TrainingSetup) -> float:
    """The saved bytes per token of the layer that saves most (the one a backward step holds)."""
    arch = setup.architecture
    if not arch.hybrid:
        return _kind_bytes_per_token(setup, "A", True)
    return max(_kind_bytes_per_token(setup, mixer, mlp) for mixer, mlp, _ in layer_kinds(arch))


def _selective_kind_bytes(setup: TrainingSetup, mixer: str, mlp: bool) -> float:
    arch, t, act = setup.architecture, setup.tensor_parallel, setup.activation_bytes
    sharded = arch.hidden / setup.sequence_shards
    kept = act * sharded  # the layer input
    if mixer in "AS":
        q, kv = arch.q_width / t, max(1, arch.n_kv // t) * arch.d_head
        gate = act * q if arch.attention_gate else 0.0  # q_proj's second half, the gate
        # q, k, v projections, SDPA output, logsumexp, o_proj output
        kept += act * (2 * q + 2 * kv) + 4 * arch.heads / t + gate + act * sharded
    elif mixer in "LM":
        kept += _state_mixer_selective_bytes(setup, act)
    if mlp:
        matrices = 2 if arch.mlp == "gated" else 1
        kept += act * (matrices * input_widths(setup)["mlp"] + sharded)  # gate/up outputs, down output
    return kept + _selective_adapter_bytes(setup, layer_targets(setup.job.lora_targets, mixer, mlp))


def _selective_adapter_bytes(setup: TrainingSetup, targets: tuple[str, ...]) -> float:
    """What the adapters keep under selective checkpointing: their own matmul outputs (the rank-wide
    intermediates; DoRA's outputs), which the save list keeps as it keeps every matmul's. Their inputs (the norm
    outputs, or peft's cast of them to the adapter dtype, and the dropout) are no matmul's output: recomputed,
    as the frozen linears' weight gradients recompute theirs."""
    return _adapter_output_bytes(setup, targets) if setup.is_adapter and targets else 0.0


def selective_layer_bytes_per_token(setup: TrainingSetup) -> float:
    """Selective activation checkpointing (PyTorch SAC with a save list of matmuls and attention, as
    torchtitan and torchtune use it): the layer input, every matmul output (q, k, v, o_proj, gate, up,
    down) and the attention output and logsumexp are kept; norms, rotary, activation functions and
    products are recomputed. Row-parallel outputs and the layer input are split by sequence parallelism.
    A hybrid model's mean over its layers; its state mixers keep their projections and kernel output.
    """
    arch, t, act = setup.architecture, setup.tensor_parallel, setup.activation_bytes
    if arch.hybrid:
        kinds = layer_kinds(arch)
        return sum(count * _selective_kind_bytes(setup, mixer, mlp) for mixer, mlp, count in kinds) / arch.layers
    q, kv = arch.q_width / t, max(1, arch.n_kv // t) * arch.d_head
    width = input_widths(setup)["mlp"]
    sharded = arch.hidden / setup.sequence_shards
    attention = act * (2 * q + 2 * kv) + 4 * arch.heads / t  # q, k, v projections, SDPA output, logsumexp
    gate = act * q if arch.attention_gate else 0.0
    matrices = 2 if arch.mlp == "gated" else 1
    return (
        act * (3 * sharded + matrices * width)
        + attention
        + gate
        + _selective_adapter_bytes(setup, setup.job.lora_targets)
    )


def logits_bytes(setup: TrainingSetup) -> tuple[float, float, float]:
    """(returned logits, fp32 log-softmax saved by the loss, fp32 upcast transient) for the micro-batch."""
    act = setup.activation_bytes
    vocab = setup.architecture.vocab / setup.tensor_parallel
    if setup.job.fused_loss:
        return 0.0, 0.0, 2 * 4 * vocab * min(setup.tokens, FUSED_LOSS_CHUNK_TOKENS)
    tokens = setup.tokens
    if setup.fp32_compute:
        act = 4  # PEFT's fp32 LM head on the fp32 stream returns fp32 logits: the loss has nothing to upcast
    return act * vocab * tokens, 4 * vocab * tokens, (4 * vocab * tokens if act != 4 else 0.0)


def returned_cache_bytes(setup: TrainingSetup) -> float:
    """The key and value states a model returns with its output under ``use_cache`` (Hugging Face attention:
    ``past_key_value = (key_states, value_states)`` after RoPE, before GQA's repeat; an MLA layer's full
    per-head K and V), for every attention layer of one micro-batch. They are extra only where nothing else
    keeps them: under recompute, where the layer saves nothing, or in a GQA layer whose attention saves
    repeated copies instead (eager, and SDPA, which ``flash`` also names: transformers' ``repeat_kv`` runs
    before it; FlashAttention-2's own kernel takes them unrepeated, so for it this over-counts); a multi-head
    layer, or FlashAttention-3 and cuDNN, which take GQA as it is, save these very tensors for backward."""
    arch, job = setup.architecture, setup.job
    repeated = arch.n_kv < arch.heads and job.attention not in ("flash3", "cudnn")
    if not job.use_cache or (job.checkpointing == "none" and not repeated):
        return 0.0
    return key_value_bytes(setup)


def key_value_bytes(setup: TrainingSetup) -> float:
    """Every attention layer's key and value states for one micro-batch, as a Hugging Face model caches them."""
    arch = setup.architecture
    if arch.is_mla:
        width = arch.heads * (arch.qk_nope_head_dim + arch.qk_rope_head_dim + arch.v_head_dim)
    else:
        width = 2 * arch.kv_width
    return arch.attention_layers * setup.tokens * width / setup.tensor_parallel * setup.activation_bytes


def outputs_widened(setup: TrainingSetup) -> int:
    """How many times its 16-bit size a model's output is when the loop gets it: under autocast the framework
    hands it back in fp32 (accelerate's prepare_model wraps forward in convert_outputs_to_fp32; Lightning Fabric's
    precision plugin convert_output likewise), 2; else 1."""
    return 2 if setup.uses_autocast and setup.activation_bytes == 2 else 1
