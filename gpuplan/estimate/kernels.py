"""What runs between the GEMMs of a training step, by framework: elementwise bytes and kernel launches.

A training step's GEMMs and attention are priced at the GPU's FLOP rates (``training_speed``); everything
else is elementwise work (norms, rotary embeddings, activations, residual adds, casts, dropout, the loss)
that streams its tensors through HBM, one kernel per operation in eager PyTorch and a few fused kernels
elsewhere. Which kernels run is the framework's (``finetune.framework``), counted here from the code each
one runs, per decoder layer and token, forward and backward:

- ``eager``: PyTorch without compilation, one kernel per ATen operation the modelling code calls, and
  autograd's backward of each (``tools/autograd/derivatives.yaml``). The code path is Hugging Face
  ``transformers``' (``modeling_llama.py``: ``LlamaRMSNorm.forward`` upcasts to fp32, squares, takes the
  mean, adds eps, takes rsqrt, multiplies, casts back and multiplies by the weight: 8 kernels, 6 when the
  stream is already fp32; ``apply_rotary_pos_emb`` with ``rotate_half``: multiply, negate, concatenate,
  multiply, add per tensor; ``repeat_kv`` copies K and V to every query head when KV heads are fewer;
  ``LlamaMLP``: ``act_fn(gate) * up``; two residual adds), as the Hugging Face Trainer, TRL, PEFT's own
  loops, Axolotl without Liger and torchtune without ``compile`` run it (torchtune's RMSNorm, rotary and
  SwiGLU are the same operations); Composer/llm-foundry's MPT layers are eager too (``F.layer_norm`` and
  ``F.gelu``, one kernel each). Under ``torch.autocast`` over fp32 weights each linear casts its fp32 input
  and its weight to bf16 (the weight once per forward: autocast caches leaf casts), and backward casts back.
- ``compiled``: ``torch.compile`` (Inductor) fuses each chain of pointwise and reduction operations between
  two GEMMs or attention calls into one kernel: residual add + norm, rotary (one per tensor), SwiGLU; the
  backward likewise, with the gradient sums of a norm output's several readers folded into the norm's
  backward. Its casts fuse into those kernels. torchtune ``compile=True`` and torchtitan run it.
- ``fused``: hand-written Triton kernels on the Hugging Face model (Liger Kernel: ``LigerRMSNorm``,
  ``liger_rotary_pos_emb`` over q and k in one kernel, ``LigerSiLUMulFunction``; Unsloth's equivalents):
  norms, rotary and SwiGLU one kernel each way; residual adds, ``repeat_kv``, casts and the rest stay eager.
- ``megatron``: Megatron-Core with Transformer Engine: the norm fused into the following linear
  (``TELayerNormColumnParallelLinear``), fused rotary (``fused_apply_rotary_pos_emb``), ``bias_swiglu``
  and bias-dropout-add fusions, one QKV and one fc1 GEMM, native GQA (no K/V copy), no autocast (the
  model runs in bf16 through ``Float16Module``).

Bytes are counted per element read or written (the per-token reductions, rstd, cos/sin tables are
negligible). The residual stream is fp32 under autocast over fp32 weights, else the activation dtype.
Kernel launches cost host time (``TrainingMechanisms.kernel_launch_s``): a micro-batch takes the longer
of its GPU time and its launches, the CPU queueing kernels ahead of a busy GPU.

LoRA adapters (``adapter_work``) add per targeted linear two GEMMs forward (x @ A, then @ B) and four
backward (the gradients of A and B and the inputs of both), priced by the roofline of their FLOPs and
bytes (rank-r GEMMs are memory-bound), and the elementwise kernels around them (peft ``lora.Linear.forward``:
the input cast to the adapter dtype, dropout, the scaling, the add to the base output).
"""

from __future__ import annotations

import functools

from gpuplan.architecture import Architecture
from gpuplan.estimate.training import (
    TrainingSetup,
    adapted_matrices,
    adapter_layer_kinds,
    copies_per_token,
    layer_kinds,
    layer_targets,
)
from gpuplan.records import record

FRAMEWORKS: dict[str, str] = {
    "eager": "a kernel per PyTorch operation (HF Trainer, TRL, PEFT)",
    "compiled": "torch.compile fuses the pointwise work",
    "fused": "Liger/Unsloth kernels for norms, rotary, SwiGLU",
    "megatron": "Megatron-Core with Transformer Engine",
}
FLASH_BACKWARD_KERNELS = 3  # FlashAttention-2 backward: dot(dO, O), the dq/dk/dv loop, the dq conversion
ADAPTER_GEMMS = 6  # x @ A and @ B forward; dA, dB and the input gradients of both backward


@record
class Work:
    """Elementwise bytes through HBM and kernel launches of one part of a micro-batch on one GPU."""

    forward_bytes: float = 0.0
    backward_bytes: float = 0.0
    forward_kernels: float = 0.0
    backward_kernels: float = 0.0

    def plus(self, other: Work) -> Work:
        return Work(
            self.forward_bytes + other.forward_bytes,
            self.backward_bytes + other.backward_bytes,
            self.forward_kernels + other.forward_kernels,
            self.backward_kernels + other.backward_kernels,
        )

    def times(self, count: float) -> Work:
        return Work(
            self.forward_bytes * count,
            self.backward_bytes * count,
            self.forward_kernels * count,
            self.backward_kernels * count,
        )

    @property
    def bytes(self) -> float:
        return self.forward_bytes + self.backward_bytes

    @property
    def kernels(self) -> float:
        return self.forward_kernels + self.backward_kernels


NONE = Work()


def _op(elements: float, forward_bpe: float, backward_bpe: float, forward_k: float, backward_k: float) -> Work:
    """One operation over ``elements`` per token: bytes per element each way, kernels per instance."""
    return Work(elements * forward_bpe, elements * backward_bpe, forward_k, backward_k)


# -- eager: one kernel per ATen operation ----------------------------------------------------------------


def _eager_rms_norm(width: float, r: int, trainable: bool) -> Work:
    """transformers ``LlamaRMSNorm``: forward to(fp32) [r+4], pow [8], mean [4], add eps and rsqrt (per
    token), mul [8], to(dtype) [4+r], weight mul [2r]; the two casts vanish on an fp32 stream. Backward
    (derivatives.yaml): the weight mul's input gradient [2r], the casts back [r+4 each], the mul's two
    gradients and the rsqrt path's sum [24], mean's expand [4], pow's 2x.grad [20], summing the two paths
    [12]; a trained weight adds its mul and sum over tokens [4r, 2 kernels]."""
    casts = r != 4
    forward = (r + 4 if casts else 0) + 8 + 4 + 8 + (4 + r if casts else 0) + 2 * r
    backward = 2 * r + (2 * (r + 4) if casts else 0) + 24 + 4 + 20 + 12 + (4 * r if trainable else 0)
    return _op(width, forward, backward, 6 + 2 * casts, 11 + 2 * casts + 2 * trainable)


def _eager_layer_norm(width: float, r: int, trainable: bool) -> Work:
    """``F.layer_norm``: one kernel forward [read, write]; backward one for the input [3 passes] and one
    for the weight and bias gradients when trained."""
    return _op(width, 2 * r, 3 * r + (2 * r if trainable else 0), 1, 1 + trainable)


def _rotary_eager(width: float, a: int) -> Work:
    """``apply_rotary_pos_emb``: x * cos [2], rotate_half's neg of one half [1] and cat [2], * sin [2], add
    [3] per element: 5 kernels. Backward: grad * cos and * sin [2 + 2], neg [1], each half's slice
    backward (zeros, then copy in) [2 + 2] and the three gradients summed [3 + 3]: 9 kernels."""
    return _op(width, 10 * a, 15 * a, 5, 9)


def _norm(arch: Architecture, framework: str, width: float, r: int, a: int, trainable: bool) -> Work:
    """One norm of ``width`` per token (the residual add before it counted apart, except compiled)."""
    if framework == "eager":
        if arch.norm == "rms":
            return _eager_rms_norm(width, r, trainable)
        return _eager_layer_norm(width, r, trainable)
    if framework == "compiled":
        # residual add + norm in one kernel: read the stream and the branch output, write the new stream
        # and the normed output; backward reads both gradients and the stream, writes the stream's.
        return _op(width, 2 * r + 2 * a, 3 * r + a, 1, 1 + trainable)
    if framework == "fused":  # LigerRMSNorm / LigerLayerNorm: one kernel each way
        return _op(width, 2 * r, 3 * r, 1, 1 + trainable)
    # Transformer Engine's layernorm in front of the linear: read the stream, write the normed input.
    return _op(width, r + a, 2 * r + a, 1, 1 + trainable)


def _residual(framework: str, width: float, r: int) -> Work:
    """A residual add and, backward, the sum of the stream's two gradients (fused into the norm when compiled)."""
    if framework == "compiled":
        return NONE
    return _op(width, 3 * r, 3 * r, 1, 1)


def _rotary(framework: str, width: float, a: int) -> Work:
    if framework == "eager":
        return _rotary_eager(width, a)
    if framework == "fused":  # liger_rotary_pos_emb: q and k in one kernel (counted on q's side)
        return _op(width, 2 * a, 2 * a, 0.5, 0.5)
    return _op(width, 2 * a, 2 * a, 1, 1)


def _mlp_activation(arch: Architecture, framework: str, width: float, a: int) -> Work:
    gated = arch.mlp == "gated"
    if framework == "eager":
        # act_fn(gate) [2] * up [3]; backward: the mul's two gradients [3 + 3], silu_backward [3].
        return _op(width, 5 * a, 9 * a, 2, 3) if gated else _op(width, 2 * a, 3 * a, 1, 1)
    if gated:  # one fused kernel: read gate and up, write the product; backward writes both gradients
        return _op(width, 3 * a, 5 * a, 1, 1)
    return _op(width, 2 * a, 3 * a, 1, 1)


# -- per layer --------------------------------------------------------------------------------------------


@record
class LayerPath:
    """What a layer's elementwise work depends on: the model, the framework, dtypes and the layout."""

    architecture: Architecture
    framework: str
    activation_bytes: int  # the activations' dtype (2; 4 under fp32)
    stream_bytes: int  # the residual stream's (4 under autocast over fp32 weights)
    trainable: bool  # the layer's weights are trained (full fine-tuning): weight gradients
    autocast_fp32: bool  # autocast over fp32 weights: each linear casts its input and weight every forward
    tensor_parallel: int
    sequence_shards: int  # ranks the norms and residual adds are split over (sequence parallelism)


def layer_path(setup: TrainingSetup, framework: str) -> LayerPath:
    fp32_base = not setup.is_adapter or setup.model_dtype_bytes == 4
    return LayerPath(
        setup.architecture,
        framework,
        setup.activation_bytes,
        setup.residual_bytes,
        not setup.is_adapter,
        framework != "megatron" and setup.uses_autocast and fp32_base,
        setup.tensor_parallel,
        setup.sequence_shards,
    )


@record
class LayerShape:
    """Widths per token of one layer on one tensor-parallel rank."""

    stream: float  # hidden width the norms and residual adds run over (split by sequence parallelism)
    q: float  # query width (heads x head_dim)
    kv: float  # key (and value) width
    mlp: float  # the MLP width a token runs through (routed experts' widths summed)
    rotary_q: float  # widths the rotary embedding rotates (0 with learned absolute positions)
    rotary_k: float


def layer_shape(path: LayerPath) -> LayerShape:
    arch, tp = path.architecture, path.tensor_parallel
    kv = max(1, arch.n_kv // tp) * arch.d_head
    mlp = arch.intermediate
    if arch.is_moe:
        mlp = arch.experts_per_token * arch.expert_width + arch.shared_experts * arch.shared_width
    rotary = not arch.position_embeddings
    if arch.is_mla:
        rotary_q, rotary_k = arch.heads * arch.qk_rope_head_dim / tp, float(arch.qk_rope_head_dim)
    else:
        rotary_q, rotary_k = arch.q_width / tp, float(kv)
    return LayerShape(
        arch.hidden / path.sequence_shards,
        arch.q_width / tp,
        float(kv),
        mlp / tp,
        rotary_q if rotary else 0.0,
        rotary_k if rotary else 0.0,
    )


def linear_count(arch: Architecture, framework: str, mixer: str, mlp: bool) -> int:
    """GEMMs a layer of a kind runs forward: Q, K and V (one when fused), the output projection, the MLP's
    (Megatron fuses QKV and gate/up into one each); a state mixer its projections."""
    count = 0
    if mixer in "AS":
        count += 2 if (framework == "megatron" or arch.fused_qkv) else 4
    elif mixer in "LM":
        count += len(arch.state_mixer_modules) or 2
    if mlp:
        count += 2 if (framework == "megatron" or arch.mlp != "gated") else 3
    return count


def layer_work(path: LayerPath, mixer: str = "A", mlp: bool = True) -> Work:
    """Elementwise bytes of one token and elementwise kernel launches of one layer of a kind, forward and
    backward, on one GPU (the GEMM and attention launches are ``layer_launches``)."""
    arch, framework = path.architecture, path.framework
    shape = layer_shape(path)
    a, r, trainable = path.activation_bytes, path.stream_bytes, path.trainable
    has_mixer = mixer != "-"
    norms = arch.norms_per_layer if (has_mixer and mlp) else 1
    work = _norm(arch, framework, shape.stream, r, a, trainable).times(norms)
    work = work.plus(_residual(framework, shape.stream, r).times(int(has_mixer) + int(mlp)))
    readers = 0  # extra readers of a norm output, whose input gradients autograd sums
    if mixer in "AS":
        work = work.plus(_rotary(framework, shape.rotary_q, a)).plus(_rotary(framework, shape.rotary_k, a))
        if arch.qk_norm and framework == "eager":
            work = work.plus(_eager_rms_norm(shape.q + shape.kv, a, trainable))
        if framework in ("eager", "fused") and shape.kv < shape.q and not arch.is_mla:
            # repeat_kv: K and V expanded to every query head and copied; backward sums them back.
            work = work.plus(Work(2 * (shape.kv + shape.q) * a, 2 * (shape.q + shape.kv) * a, 2, 2))
        readers += 0 if (framework == "megatron" or arch.fused_qkv) else 2
    if mlp:
        work = work.plus(_mlp_activation(arch, framework, shape.mlp, a))
        readers += 1 if (framework != "megatron" and arch.mlp == "gated") else 0
    if framework == "compiled":
        work = work.plus(Work(0.0, readers * shape.stream * a, 0, 0))  # read by the fused norm backward
    elif readers:
        work = work.plus(_op(shape.stream, 0.0, 3 * a * readers, 0, readers))
    if path.autocast_fp32 and framework != "compiled":
        # the fp32 norm output cast to bf16 by each linear reading it, and its gradient cast back
        inputs = (1 if arch.fused_qkv else 3) * (mixer in "AS") + (2 if arch.mlp == "gated" else 1) * mlp
        work = work.plus(_op(shape.stream, 6.0 * inputs, 6.0 * inputs, inputs, inputs))
    return work


def layer_launches(path: LayerPath, mixer: str = "A", mlp: bool = True) -> Work:
    """The GEMM and attention launches of one layer of a kind (no bytes: their work is priced by FLOPs),
    with autocast's weight casts (once per forward; a trained weight's gradient cast back)."""
    gemms = linear_count(path.architecture, path.framework, mixer, mlp)
    attention = mixer in "AS"
    casts = gemms if path.autocast_fp32 else 0
    backward = gemms * (2 if path.trainable else 1) + casts * path.trainable  # input (+ weight) gradients
    return Work(0.0, 0.0, gemms + casts + attention, backward + FLASH_BACKWARD_KERNELS * attention)


def model_linears(arch: Architecture, framework: str) -> int:
    """The linear GEMMs of every layer of the model, forward (``linear_count`` over the layer kinds)."""
    if not arch.hybrid:
        return linear_count(arch, framework, "A", True) * arch.layers
    return sum(linear_count(arch, framework, mixer, mlp) * count for mixer, mlp, count in layer_kinds(arch))


@functools.lru_cache(maxsize=4096)
def model_layers_work(path: LayerPath) -> tuple[Work, Work]:
    """(``layer_work``, ``layer_launches``) summed over every layer of the model (each kind x its layers)."""
    arch = path.architecture
    if not arch.hybrid:
        return layer_work(path).times(arch.layers), layer_launches(path).times(arch.layers)
    work = launches = NONE
    for mixer, mlp, count in layer_kinds(arch):
        work = work.plus(layer_work(path, mixer, mlp).times(count))
        launches = launches.plus(layer_launches(path, mixer, mlp).times(count))
    return work, launches


def decoder_work(setup: TrainingSetup, framework: str, tokens: float, share: float) -> tuple[Work, Work]:
    """(elementwise bytes and launches, GEMM and attention launches) of the decoder layers in a micro-batch
    of ``tokens`` on this GPU, which holds ``share`` of the layers (its pipeline stage's)."""
    per_token, launches = model_layers_work(layer_path(setup, framework))
    work = Work(
        per_token.forward_bytes * tokens * share,
        per_token.backward_bytes * tokens * share,
        per_token.forward_kernels * share,
        per_token.backward_kernels * share,
    )
    return work, launches.times(share)


# -- the loss ---------------------------------------------------------------------------------------------

# Bytes per logit and kernels of the loss. Unfused, by framework: eager (and fused, whose kernels leave the
# loss to transformers) runs ``ForCausalLMLoss``: logits.float() [a+4], cross_entropy's log_softmax [8] and
# nll (gather); backward nll's zero-filled gradient [4] and scatter, log_softmax_backward [12], the cast
# back [4+a]. compiled: Inductor fuses the upcast, log_softmax and nll into one reduction kernel reading the
# 16-bit logits twice (max, then the sum of exponentials) [2a], and the backward into one pointwise kernel
# [2a]. megatron: the vocabulary-parallel cross entropy over fp32 logits, written and read, its gradient
# written and read [16]. A fused loss (``fused_loss``: Liger's and flash-attn's cross-entropy kernels,
# torchtune's chunked loss) reads the 16-bit logits twice and writes their gradient over them in the
# forward's one kernel [3a]; Cut Cross-Entropy, which never writes the logits, moves less.


def loss_work(framework: str, a: int, logits: float, fused: bool = False) -> Work:
    """The loss over ``logits`` (tokens x vocabulary entries on this GPU)."""
    if fused:
        return Work(logits * 3 * a, 0.0, 1, 0)
    if framework in ("eager", "fused"):
        casts = a != 4
        forward = (a + 4 if casts else 0) + 8
        backward = 4 + 12 + (4 + a if casts else 0)
        return Work(logits * forward, logits * backward, 2 + casts, 3 + casts)
    if framework == "compiled":
        return Work(logits * 2 * a, logits * 2 * a, 1, 1)
    return Work(logits * 8, logits * 8, 2, 2)


# -- LoRA adapters ----------------------------------------------------------------------------------------


@record
class AdapterWork:
    """What a micro-batch's LoRA adapters add on this GPU: their GEMMs (FLOPs, bytes, launches; a third of
    each forward, the rest backward) and the elementwise work around them."""

    gemm_flops: float
    gemm_bytes: float
    gemm_kernels: float
    elementwise: Work
    weight_flops: float = 0.0  # DoRA's weight norm every forward (B @ A over an identity): FLOPs
    weight_bytes: float = 0.0  # and its weight-sized bytes


NO_ADAPTERS = AdapterWork(0.0, 0.0, 0.0, NONE)


def _adapter_elementwise(
    framework: str, d_in: float, d_out: float, x: int, w: int, out: int, g: int, autocast: bool, dropout: bool
) -> Work:
    """Per token elementwise bytes and launches around one adapted linear (see ``adapter_work``)."""
    if framework == "fused" and not dropout:
        return NONE  # Unsloth's fast LoRA: x @ A, then addmm_ into the base output with the scaling
    if framework == "compiled":
        forward = (x + g) * d_in * dropout + (2 * out + g) * d_out
        backward = 2 * g * d_out + 3 * x * d_in
        casts = 2 if (autocast and w != 2) else 0
        return Work(forward, backward, int(dropout) + 1 + casts, 2 + casts)
    if framework == "megatron":  # NeMo ParallelLinearAdapter on a bf16 model: dropout, scale, add
        forward = (2 * x + 1) * d_in * dropout + 2 * x * d_out + 3 * x * d_out
        backward = 2 * x * d_out + (2 * x + 1) * d_in * dropout + 3 * x * d_in
        return Work(forward, backward, int(dropout) + 2, int(dropout) + 2)
    # eager (and fused with dropout, which leaves Unsloth's fast path): peft lora.Linear.forward.
    cast_in = x != w  # x = self._cast_input_dtype(x, lora_A.weight.dtype)
    upcast = autocast and w != 2  # autocast casts the fp32 input (and the weights, once) to bf16 for lora_A
    result = max(out, g)
    cast_out = result != out  # result.to(torch_result_dtype) after a 16-bit + fp32 add
    forward = (
        (x + w) * d_in * cast_in
        + (2 * w + 1) * d_in * dropout  # native_dropout: the dropped copy and its 1-byte mask
        + (w + 2) * d_in * upcast
        + 2 * g * d_out  # * scaling
        + (out + g + result) * d_out  # result + ...
        + (result + out) * d_out * cast_out
    )
    backward = (
        (out + result) * d_out * cast_out
        + 2 * g * d_out
        + (2 + w) * d_in * upcast
        + (2 * w + 1) * d_in * dropout
        + (w + x) * d_in * cast_in
        + 3 * x * d_in  # the adapter's input gradient summed into the base layer's
    )
    kernels_forward = cast_in + dropout + upcast * 3 + 2 + cast_out
    kernels_backward = cast_out + 1 + upcast * 3 + dropout + cast_in + 1
    return Work(forward, backward, kernels_forward, kernels_backward)


_READS_STREAM = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")  # inputs are norm outputs


def adapter_work(setup: TrainingSetup, framework: str, tokens: float, share: float) -> AdapterWork:
    """The LoRA (or DoRA) adapters of a micro-batch of ``tokens`` on this GPU (``share`` of the layers).

    Per adapted linear (d_in -> d_out, rank r) and token: GEMMs x @ A (2 r d_in FLOPs) and @ B (2 r d_out)
    forward; backward the input gradients of B and of A and the weight gradients of both: 6 r (d_in +
    d_out) FLOPs in all, 6 x the adapter's parameters (Hu et al. 2021). Each GEMM reads its d-wide operand
    or writes its d-wide output once (the r-wide ones are negligible beside them): 3 (d_in + d_out) elements
    in all. Every one of them thus does 2r FLOPs per element moved, so their roofline summed is the roofline
    of the sums: ``training_speed`` takes the larger of FLOPs / GEMM rate and bytes / bandwidth (at ranks of
    tens they are memory-bound). They run in bf16 under autocast or with 16-bit adapters, else (fp32
    adapters without autocast) in fp32. peft's forward casts the input to the adapter dtype, drops it out,
    scales the adapter's output and adds it to the base output; backward mirrors each and sums the input
    gradient into the base layer's. DoRA (peft ``DoraLinearLayer.forward``) also builds the adapted
    weight's norm every forward: B @ A over an identity (2 r d_in (d_in + d_out) FLOPs), the weight cast,
    scaled, added and normed (38 B per weight element, and the identity's 4 B d_in^2), detached (no
    backward); and rescales the output (4 kernels each way over d_out).
    """
    arch, job = setup.architecture, setup.job
    if not setup.is_adapter:
        return NO_ADAPTERS
    tp = setup.tensor_parallel
    rank = job.lora_rank
    a, stream, w = setup.activation_bytes, setup.residual_bytes, setup.lora_bytes
    autocast = setup.uses_autocast
    g = 2 if (autocast or w == 2) else 4
    dropout = job.lora_dropout > 0
    dora = job.lora_variant == "dora"
    flops = moved = launches = weight_flops = weight_bytes = 0.0
    elementwise = NONE
    for mixer, mlp, moe, count in adapter_layer_kinds(arch):
        layers = count * share
        for name in layer_targets(job.lora_targets, mixer, mlp):
            for width_in, width_out, copies in adapted_matrices(arch, name, moe, job.lora_experts):
                # A token passes through the experts it is routed to, each expert's GEMMs launched apart (as
                # transformers loops over the experts).
                routed = copies_per_token(arch, copies)
                d_in, d_out = width_in / tp, width_out / tp
                flops += 6 * rank * (d_in + d_out) * tokens * routed * layers
                moved += 3 * g * (d_in + d_out) * tokens * routed * layers
                launches += ADAPTER_GEMMS * copies * layers
                x = stream if name in _READS_STREAM else a
                per_token = _adapter_elementwise(framework, d_in, d_out, x, w, a, g, autocast, dropout)
                work = Work(
                    per_token.forward_bytes * tokens * routed,
                    per_token.backward_bytes * tokens * routed,
                    per_token.forward_kernels * copies,
                    per_token.backward_kernels * copies,
                )
                if dora:
                    weight_flops += 2 * rank * d_in * (d_in + d_out) * copies * layers
                    weight_bytes += (38 * d_in * d_out + 4 * d_in * d_in) * copies * layers
                    rescale = 4 * 3 * a * d_out * tokens * routed  # the output rescaled: 4 kernels each way
                    work = work.plus(Work(rescale, rescale, (4 + 4) * copies, 4 * copies))
                elementwise = elementwise.plus(work.times(layers))
    return AdapterWork(flops, moved, launches, elementwise, weight_flops, weight_bytes)
