"""Transformer architectures: exact parameter counts, module inventories and KV-cache layout.

Sources: parameter layout as in Hugging Face ``transformers`` modelling code (Llama, Mistral, Qwen2/3 and
their MoE variants, Gemma 1-3, Phi, Phi-3, GPT-NeoX, Falcon, GPT-BigCode, Mixtral, DeepSeek-V2/V3,
Llama 4, gpt-oss, Qwen3-Next, Nemotron-H) and Megatron-LM's ``theoretical_memory_usage.py`` for MLA/MoE;
KV-cache layout as in vLLM's ``kv_cache_interface.py``; the per-sequence state of linear-attention and
Mamba-2 layers as in vLLM's ``model_executor/layers/mamba/mamba_utils.py``. Reading a config.json is
``gpuplan.hf_config``'s job.

Hybrid models name each layer's token mixer in ``layer_pattern`` (repeated over the layers): ``A``
attention (full, or windowed as ``sliding_layers`` says when there is no pattern), ``S`` sliding-window or
chunked attention, ``L`` linear attention (Gated DeltaNet, transformers ``Qwen3NextGatedDeltaNet``), ``M``
Mamba-2 (transformers ``NemotronHMamba2Mixer``) and ``-`` no mixer (an MLP-only layer). Attention layers
cache K and V per token; ``L`` and ``M`` layers keep one fixed state per sequence, whatever its length.

Everything that depends only on the architecture is computed once per instance (cached properties):
the estimators ask for the same counts thousands of times when rules and the planner scan layouts.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import fields
from functools import cached_property
from typing import Any

from gpuplan.records import record
from gpuplan.resources import schema_path
from gpuplan.units import whole_number


@record
class Architecture:
    """A decoder-only transformer (plus an optional vision tower), as its config.json describes it."""

    layers: int
    hidden: int
    heads: int
    intermediate: int  # MLP width of dense layers
    vocab: int
    kv_heads: int = 0  # 0: same as heads (multi-head attention)
    head_dim: int = 0  # 0: hidden // heads
    mlp: str = "gated"  # gated (SwiGLU/GeGLU: 3 matrices) | plain (2 matrices)
    norm: str = "rms"  # rms (weight only) | layer (weight + bias)
    norms_per_layer: int = 2
    tie_embeddings: bool = False
    attention_bias: bool = False  # q/k/v bias
    output_bias: bool = False  # o_proj bias
    mlp_bias: bool = False  # MLP (and expert) biases
    lm_head_bias: bool = False
    qk_norm: bool = False  # per-head RMSNorm of q and k (Qwen3, Gemma 3): 2 x head_dim weights per layer
    parallel_attention: bool = False
    fused_qkv: bool = False  # one QKV projection whose output stays alive while a view of V is saved
    position_embeddings: int = 0  # learned absolute positions (GPT-2 style); 0 for RoPE
    experts: int = 0
    experts_per_token: int = 0
    expert_intermediate: int = 0  # 0: intermediate
    shared_experts: int = 0
    shared_expert_intermediate: int = 0  # width of each shared expert; 0: the routed experts' width
    shared_expert_gate: bool = False  # sigmoid gate of the shared expert (Qwen2-MoE): hidden weights
    moe_every: int = 1  # layer i is MoE when (i + 1) % moe_every == 0 (Qwen2-MoE sparse step, Llama 4)
    router_bias: bool = False  # per-expert router bias (DeepSeek-V3 score correction, gpt-oss)
    dense_layers: int = 0  # leading layers with a dense MLP in an MoE model (DeepSeek first_k_dense_replace)
    q_lora_rank: int = 0  # MLA (DeepSeek-V2/V3) when kv_lora_rank > 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int = 0
    sliding_layers: int = 0  # 0: every layer uses the window; N >= 2: layer i is full attention when (i+1) % N == 0
    attention_chunk: int = 0  # chunked local attention (Llama 4), on the same layers as sliding_layers says
    attention_sinks: bool = False  # one learned sink logit per head and layer (gpt-oss)
    attention_gate: bool = False  # q_proj also yields a sigmoid gate per output channel (Qwen3-Next): 2x its width
    layer_pattern: str = ""  # token mixer per layer, repeated over the layers: A S L M - (see the module doc)
    separate_mlp: bool = False  # a layer holds its mixer or an MLP, not both: only '-' layers have one (Nemotron-H)
    linear_key_heads: int = 0  # Gated DeltaNet (L layers): linear_num_key_heads
    linear_value_heads: int = 0  # linear_num_value_heads
    linear_key_head_dim: int = 0  # linear_key_head_dim
    linear_value_head_dim: int = 0  # linear_value_head_dim
    mamba_heads: int = 0  # Mamba-2 (M layers): mamba_num_heads
    mamba_head_dim: int = 0  # mamba_head_dim
    ssm_state: int = 0  # ssm_state_size (d_state)
    ssm_groups: int = 1  # n_groups of B and C
    conv_kernel: int = 4  # the short causal convolution of L and M layers (linear_conv_kernel_dim, conv_kernel)
    conv_bias: bool = False  # that convolution carries a bias (Mamba-2 use_conv_bias; never in Gated DeltaNet)
    state_fp32: bool = False  # vLLM keeps the recurrent state in fp32 (mamba_ssm_cache_dtype float32: Nemotron-H)
    vision_params: int = 0  # vision tower + multimodal projector, kept 16-bit
    max_position: int = 0

    # -- derived dimensions -------------------------------------------------------------------
    @property
    def n_kv(self) -> int:
        return self.kv_heads or self.heads

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_width(self) -> int:
        """Width of the attention output (heads x head_dim), which differs from hidden in Gemma."""
        if self.is_mla:
            return self.heads * self.v_head_dim
        return self.heads * self.d_head

    @property
    def kv_width(self) -> int:
        return self.n_kv * self.d_head

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def expert_width(self) -> int:
        return self.expert_intermediate or self.intermediate

    @property
    def shared_width(self) -> int:
        return self.shared_expert_intermediate or self.expert_width

    def is_moe_layer(self, index: int) -> bool:
        return self.is_moe and self.has_mlp(index) and index >= self.dense_layers and (index + 1) % self.moe_every == 0

    # -- layer kinds (hybrid models) -------------------------------------------------------------
    @property
    def hybrid(self) -> bool:
        """Whether ``layer_pattern`` names each layer's mixer (linear-attention, Mamba or MLP-only layers)."""
        return bool(self.layer_pattern)

    def mixer(self, index: int) -> str:
        """The token mixer of layer ``index``: A, S, L, M or - (A for every layer without a pattern)."""
        pattern = self.layer_pattern
        return pattern[index % len(pattern)] if pattern else "A"

    def has_attention(self, index: int) -> bool:
        return self.mixer(index) in "AS"

    def has_state(self, index: int) -> bool:
        """Whether layer ``index`` keeps a per-sequence recurrent state (linear attention or Mamba-2)."""
        return self.mixer(index) in "LM"

    def has_mlp(self, index: int) -> bool:
        return not self.separate_mlp or self.mixer(index) == "-"

    @cached_property
    def state_kind(self) -> str:
        """L or M: the kind of the model's state layers ("" when it has none)."""
        return next((kind for kind in "LM" if kind in self.layer_pattern), "")

    @cached_property
    def _kind_prefix(self) -> tuple[tuple[int, int], ...]:
        """(attention layers, state layers) among the first i layers, for i = 0..layers."""
        counts = [(0, 0)]
        for index in range(self.layers):
            attention, state = counts[-1]
            counts.append((attention + self.has_attention(index), state + self.has_state(index)))
        return tuple(counts)

    def attention_count(self, layers: range) -> int:
        return self._kind_prefix[layers.stop][0] - self._kind_prefix[layers.start][0]

    def state_count(self, layers: range) -> int:
        return self._kind_prefix[layers.stop][1] - self._kind_prefix[layers.start][1]

    @property
    def attention_layers(self) -> int:
        """Layers with attention (full, sliding or chunked): the ones that cache K and V per token."""
        return self._kind_prefix[-1][0]

    @property
    def state_layers(self) -> int:
        """Linear-attention and Mamba-2 layers: the ones that keep a fixed state per sequence."""
        return self._kind_prefix[-1][1]

    @cached_property
    def mlp_layers(self) -> int:
        return sum(1 for index in range(self.layers) if self.has_mlp(index))

    @cached_property
    def _block_prefix(self) -> tuple[int, ...]:
        """Token-mixer and MLP blocks among the first i layers, for i = 0..layers."""
        counts = [0]
        for index in range(self.layers):
            counts.append(counts[-1] + (self.mixer(index) != "-") + self.has_mlp(index))
        return tuple(counts)

    def block_count(self, layers: range) -> int:
        """Token-mixer and MLP blocks in ``layers``: two a decoder layer, one a Nemotron-H layer (its mixer or its
        MLP). Each block ends in one row-parallel projection (o_proj, out_proj, down_proj): one all-reduce under
        tensor parallelism (Megatron-LM's layout, which vLLM's and SGLang's layers follow)."""
        return self._block_prefix[layers.stop] - self._block_prefix[layers.start]

    @cached_property
    def moe_layers(self) -> int:
        return sum(1 for index in range(self.layers) if self.is_moe_layer(index))

    @property
    def windowed(self) -> bool:
        return bool(self.sliding_window or self.attention_chunk)

    def is_windowed_layer(self, index: int) -> bool:
        """Whether layer ``index`` attends to a window (sliding) or a chunk (chunked local) only."""
        if not self.windowed:
            return False
        if self.layer_pattern:
            return self.mixer(index) == "S"
        return self.sliding_layers == 0 or (index + 1) % self.sliding_layers != 0

    @cached_property
    def _windowed_prefix(self) -> tuple[int, ...]:
        """Windowed layers among the first i layers, for i = 0..layers (cumulative counts)."""
        counts = [0]
        for index in range(self.layers):
            counts.append(counts[-1] + (1 if self.is_windowed_layer(index) else 0))
        return tuple(counts)

    def windowed_count(self, layers: range) -> int:
        """Windowed (sliding or chunked) layers in a contiguous range of layers."""
        return self._windowed_prefix[layers.stop] - self._windowed_prefix[layers.start]

    @property
    def sliding_layer_count(self) -> int:
        return self._windowed_prefix[-1]

    # -- parameters ---------------------------------------------------------------------------
    def norm_params(self) -> int:
        return self.hidden * (2 if self.norm == "layer" else 1)

    @cached_property
    def _attention_modules(self) -> tuple[tuple[str, int], ...]:
        """(name, weights) of each attention linear; names are gpuplan's canonical ones."""
        h = self.hidden
        if self.is_mla:
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            q: tuple[tuple[str, int], ...] = (
                (("q_a", h * self.q_lora_rank), ("q_b", self.q_lora_rank * self.heads * qk_head))
                if self.q_lora_rank
                else (("q", h * self.heads * qk_head),)
            )
            kv = (
                ("kv_a", h * (self.kv_lora_rank + self.qk_rope_head_dim)),
                ("kv_b", self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim)),
            )
            return (*q, *kv, ("o", self.heads * self.v_head_dim * h))
        gate = 2 if self.attention_gate else 1  # Qwen3NextAttention: q_proj out = heads x head_dim x 2
        return (
            ("q", h * self.q_width * gate),
            ("k", h * self.kv_width),
            ("v", h * self.kv_width),
            ("o", self.q_width * h),
        )

    @cached_property
    def _attention_small(self) -> int:
        """Attention parameters outside the linears: biases, q/k norms, MLA latent norms, sinks."""
        small = 0
        if self.is_mla:
            small += self.q_lora_rank + self.kv_lora_rank  # q_a_layernorm, kv_a_layernorm
        else:
            if self.attention_bias:
                small += self.q_width + 2 * self.kv_width
            if self.qk_norm:
                small += 2 * self.d_head
        if self.output_bias:
            small += self.hidden
        if self.attention_sinks:
            small += self.heads
        return small

    # Gated DeltaNet (transformers Qwen3NextGatedDeltaNet): in_proj_qkvz (hidden -> 2 key_dim + 2 value_dim),
    # in_proj_ba (hidden -> 2 value heads), out_proj (value_dim -> hidden); a depthwise conv1d over
    # conv_dim = 2 key_dim + value_dim (no bias), dt_bias and A_log per value head, and a gated RMSNorm
    # of one value head's width. Mamba-2 (transformers NemotronHMamba2Mixer): in_proj (hidden ->
    # 2 d_inner + 2 groups x d_state + heads), out_proj (d_inner -> hidden); conv1d over d_inner +
    # 2 groups x d_state (bias: use_conv_bias), dt_bias, A_log and D per head, a gated RMSNorm of d_inner.
    @property
    def linear_key_dim(self) -> int:
        return self.linear_key_heads * self.linear_key_head_dim

    @property
    def linear_value_dim(self) -> int:
        return self.linear_value_heads * self.linear_value_head_dim

    @property
    def mamba_inner(self) -> int:
        """Mamba-2 d_inner: mamba_num_heads x mamba_head_dim (NemotronHMamba2Mixer.intermediate_size)."""
        return self.mamba_heads * self.mamba_head_dim

    @property
    def conv_channels(self) -> int:
        """Channels of the short convolution of the model's state layers (conv_dim)."""
        if self.state_kind == "L":
            return 2 * self.linear_key_dim + self.linear_value_dim
        if self.state_kind == "M":
            return self.mamba_inner + 2 * self.ssm_groups * self.ssm_state
        return 0

    @cached_property
    def state_mixer_modules(self) -> tuple[tuple[str, int], ...]:
        """(name, weights) of each linear of a linear-attention or Mamba-2 layer."""
        h = self.hidden
        if self.state_kind == "L":
            return (
                ("linear_qkvz", h * (2 * self.linear_key_dim + 2 * self.linear_value_dim)),
                ("linear_ba", h * 2 * self.linear_value_heads),
                ("linear_out", self.linear_value_dim * h),
            )
        if self.state_kind == "M":
            inner = self.mamba_inner
            return (
                ("mamba_in", h * (2 * inner + 2 * self.ssm_groups * self.ssm_state + self.mamba_heads)),
                ("mamba_out", inner * h),
            )
        return ()

    @cached_property
    def _state_mixer_small(self) -> int:
        """A state layer's parameters outside its linears: the conv1d, per-head dt_bias/A_log (and D), the norm."""
        conv = self.conv_channels * self.conv_kernel + (self.conv_channels if self.conv_bias else 0)
        if self.state_kind == "L":
            return conv + 2 * self.linear_value_heads + self.linear_value_head_dim
        if self.state_kind == "M":
            return conv + 3 * self.mamba_heads + self.mamba_inner
        return 0

    def _mixer_modules(self, index: int) -> tuple[tuple[str, int], ...]:
        kind = self.mixer(index)
        if kind in "AS":
            return self._attention_modules
        return self.state_mixer_modules if kind in "LM" else ()

    def _mixer_small(self, index: int) -> int:
        kind = self.mixer(index)
        if kind in "AS":
            return self._attention_small
        return self._state_mixer_small if kind in "LM" else 0

    def _mlp_matrices(self) -> int:
        return 3 if self.mlp == "gated" else 2

    def _mlp_weights(self, width: int) -> int:
        return self._mlp_matrices() * self.hidden * width

    def _mlp_bias(self, width: int) -> int:
        return width * (self._mlp_matrices() - 1) + self.hidden if self.mlp_bias else 0

    def dense_mlp_params(self, width: int | None = None) -> int:
        width = width or self.intermediate
        return self._mlp_weights(width) + self._mlp_bias(width)

    def _mlp_modules(self, index: int) -> tuple[tuple[str, int], ...]:
        if not self.is_moe_layer(index):
            width = self.intermediate
            names = ("gate", "up", "down") if self.mlp == "gated" else ("up", "down")
            return tuple((name, self.hidden * width) for name in names)
        modules = [("experts", self.experts * self._mlp_weights(self.expert_width))]
        if self.shared_experts:
            modules.append(("shared", self.shared_experts * self._mlp_weights(self.shared_width)))
        return tuple(modules)

    def _mlp_small(self, index: int) -> int:
        if not self.is_moe_layer(index):
            return self._mlp_bias(self.intermediate)
        small = self.experts * self._mlp_bias(self.expert_width)
        small += self.shared_experts * self._mlp_bias(self.shared_width)
        small += (self.hidden + (1 if self.router_bias else 0)) * self.experts  # router (never quantized)
        if self.shared_expert_gate:
            small += self.hidden
        return small

    def layer_modules(self, index: int) -> tuple[tuple[str, int], ...]:
        """(canonical name, weights) of every quantizable linear in layer ``index``."""
        mlp = self._mlp_modules(index) if self.has_mlp(index) else ()
        return self._mixer_modules(index) + mlp

    @cached_property
    def _layer_params(self) -> tuple[int, ...]:
        norms = self.norms_per_layer * self.norm_params()
        return tuple(
            sum(weights for _, weights in self.layer_modules(index))
            + self._mixer_small(index)
            + (self._mlp_small(index) if self.has_mlp(index) else 0)
            + norms
            for index in range(self.layers)
        )

    def layer_params(self, index: int) -> int:
        return self._layer_params[index]

    @cached_property
    def total_layer_params(self) -> int:
        return sum(self._layer_params)

    @cached_property
    def largest_layer_params(self) -> int:
        return max(self._layer_params)

    def embedding_params(self) -> int:
        return self.vocab * self.hidden + self.position_embeddings * self.hidden

    def lm_head_params(self) -> int:
        bias = self.vocab if self.lm_head_bias else 0
        return bias if self.tie_embeddings else self.vocab * self.hidden + bias

    @cached_property
    def text_params(self) -> int:
        """Parameters of the language model (all of them for a text-only checkpoint)."""
        return self.total_layer_params + self.embedding_params() + self.lm_head_params() + self.norm_params()

    @cached_property
    def params(self) -> int:
        """Total parameters, counted once (tied embeddings count once), vision tower included."""
        return self.text_params + self.vision_params

    @cached_property
    def active_params(self) -> int:
        """Parameters a token passes through (MoE: routed experts per token + shared experts)."""
        if not self.is_moe:
            return self.params
        unused = self.experts - self.experts_per_token
        return self.params - self.moe_layers * unused * self.dense_mlp_params(self.expert_width)

    @cached_property
    def _layer_linear(self) -> tuple[int, ...]:
        return tuple(sum(weights for _, weights in self.layer_modules(index)) for index in range(self.layers))

    @cached_property
    def _linear_params(self) -> int:
        return sum(self._layer_linear)

    def stage_params(self, layers: range) -> tuple[int, int]:
        """(quantizable linear, other) parameters of ``layers``, a pipeline stage's: layers differ (a
        DeepSeek-V3 MoE layer holds 20 times a dense one), so a stage is not its share of the layers."""
        linear = sum(self._layer_linear[layers.start : layers.stop])
        return linear, sum(self._layer_params[layers.start : layers.stop]) - linear

    def linear_params(self) -> int:
        """Parameters in the decoder's matmul weights (quantizable linears): no embeddings, LM head, vision."""
        return self._linear_params

    def small_params(self) -> int:
        """Norms, biases, routers, sinks: kept in 16-bit by every quantization format."""
        return self.text_params - self._linear_params - self.embedding_params() - self.lm_head_params()

    def largest_linear_params(self) -> int:
        width = self.expert_width if self.is_moe and self.dense_layers == 0 else self.intermediate
        state = max((weights for _, weights in self.state_mixer_modules), default=0)
        return max(self.hidden * width, self.hidden * self.q_width, self.vocab * self.hidden, state)

    def stage_layers(self, pipeline_parallel: int) -> tuple[range, ...]:
        """The layers of each pipeline stage, split as vLLM's ``get_pp_indices`` does (remainder to the
        stages before the last); computed once per degree (every memory and speed estimate asks)."""
        split = self._stage_splits.get(pipeline_parallel)
        if split is None:
            split = self._stage_splits[pipeline_parallel] = self._split_stages(pipeline_parallel)
        return split

    @cached_property
    def _stage_splits(self) -> dict[int, tuple[range, ...]]:
        return {}

    def __hash__(self) -> int:
        # The architecture is part of the key of every memoised estimate (serving shapes, attention
        # FLOPs): its 40-odd fields are hashed once, not on every lookup. Equal architectures hash
        # equally, as the generated hash would.
        return self._hash

    @cached_property
    def _hash(self) -> int:
        return hash(tuple(getattr(self, field.name) for field in fields(self)))

    def _split_stages(self, pipeline_parallel: int) -> tuple[range, ...]:
        stages = max(1, min(pipeline_parallel, self.layers))
        sizes = [self.layers // stages] * stages
        for extra in range(self.layers % stages):
            sizes[-2 - extra if stages > 1 else 0] += 1
        ranges, start = [], 0
        for size in sizes:
            ranges.append(range(start, start + size))
            start += size
        return tuple(ranges)

    # -- KV cache -----------------------------------------------------------------------------
    def kv_elements_per_token_per_layer(self, tensor_parallel: int = 1) -> int:
        """K and V elements one token stores in one layer on one GPU.

        GQA/MHA/MQA: 2 x kv_heads x head_dim, with kv heads split over TP ranks and replicated when
        TP exceeds them (vLLM ``get_num_kv_heads``); MLA: the latent plus the RoPE key, replicated
        on every TP rank (vLLM ``MLAAttentionSpec``).
        """
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        heads_per_rank = max(1, self.n_kv // tensor_parallel)
        return 2 * heads_per_rank * self.d_head

    def kv_bytes_per_token(self, dtype_bytes: float, tensor_parallel: int = 1) -> float:
        """Bytes of KV cache per token of context on one GPU, all attention layers (sliding ones counted as
        full); linear-attention and Mamba layers cache nothing per token (``state_bytes_per_layer``)."""
        return self.attention_layers * self.kv_elements_per_token_per_layer(tensor_parallel) * dtype_bytes

    # -- recurrent state ----------------------------------------------------------------------------
    def state_elements(self, tensor_parallel: int = 1) -> tuple[int, int]:
        """(conv, recurrent) state elements one sequence keeps in one state layer on one GPU.

        vLLM ``MambaStateShapeCalculator`` (vllm/model_executor/layers/mamba/mamba_utils.py, v0.19):
        Gated DeltaNet (``gated_delta_net_state_shape``): conv (kernel - 1) x (2 key_dim + value_dim) / TP,
        recurrent (value heads / TP) x value head dim x key head dim; Mamba-2 (``mamba2_state_shape``):
        conv (kernel - 1) x (d_inner + 2 groups x d_state) / TP, with the groups padded to the TP degree
        when TP does not divide them (``extra_groups_for_head_shards``), recurrent (heads / TP) x head dim
        x d_state. Without speculative decoding (its tokens add conv rows).
        """
        tp, window = tensor_parallel, self.conv_kernel - 1
        if self.state_kind == "L":
            conv = window * math.ceil(self.conv_channels / tp)
            recurrent = math.ceil(self.linear_value_heads / tp) * self.linear_value_head_dim * self.linear_key_head_dim
            return conv, recurrent
        if self.state_kind == "M":
            groups = self.ssm_groups + (0 if self.ssm_groups % tp == 0 else tp - self.ssm_groups)
            conv = window * math.ceil((self.mamba_inner + 2 * groups * self.ssm_state) / tp)
            return conv, math.ceil(self.mamba_heads / tp) * self.mamba_head_dim * self.ssm_state
        return 0, 0

    def state_bytes_per_layer(self, dtype_bytes: int, tensor_parallel: int = 1) -> int:
        """Bytes of one sequence's state in one state layer on one GPU (vLLM ``MambaSpec.page_size_bytes``
        before padding): the conv state in the model dtype (``mamba_cache_dtype`` auto), the recurrent
        state in fp32 when ``state_fp32`` (``mamba_ssm_cache_dtype`` float32), else in the model dtype
        (``MambaStateDtypeCalculator``). The KV cache dtype does not apply to it."""
        conv, recurrent = self.state_elements(tensor_parallel)
        return conv * dtype_bytes + recurrent * (4 if self.state_fp32 else dtype_bytes)


ARCHITECTURE_FIELDS = frozenset(field.name for field in fields(Architecture))
_INTEGER_FIELDS = frozenset(field.name for field in fields(Architecture) if field.type == "int")
_BOOLEAN_FIELDS = frozenset(field.name for field in fields(Architecture) if field.type == "bool")
_SLIDING_WORDS = {"all": 0, "alternate": 2}
MIXERS = "ASLM-"  # the letters of layer_pattern (see the module docstring)
_LINEAR_FIELDS = ("linear_key_heads", "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim")
_MAMBA_FIELDS = ("mamba_heads", "mamba_head_dim", "ssm_state")


class ArchitectureError(ValueError):
    """A config.json or explicit architecture that cannot describe a decoder; ``field``, when set, is the
    architecture field at fault (a spec's finding points at its line)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


@functools.lru_cache(maxsize=1)
def field_bounds() -> dict[str, dict[str, Any]]:
    """The schema's definition of each explicit-architecture field: the one source of its bounds."""
    with open(schema_path(), encoding="utf-8") as handle:
        schema = json.load(handle)
    properties: dict[str, dict[str, Any]] = schema["$defs"]["architecture"]["properties"]
    return properties


def check_value(name: str, value: Any, where: str) -> Any:
    """``value`` for architecture field ``name`` if the schema allows it, else ArchitectureError naming ``where``.

    Runs before any arithmetic: a NaN, a float, a list or 1e30 layers from a config.json never reaches
    the estimator (the same bounds as an explicit architecture in a spec).
    """
    rule = field_bounds().get(name)
    shown = show_value(value)
    if name in _BOOLEAN_FIELDS:
        if not isinstance(value, bool):
            raise ArchitectureError(f"{where} must be true or false, not {shown}")
        return value
    if name == "layer_pattern":
        if not isinstance(value, str) or not value or len(value) > 1000:
            raise ArchitectureError(f"{where} must be a string of 1 to 1,000 layer letters, not {shown}")
        unknown = sorted(set(value) - set(MIXERS))
        if unknown:
            letters = ", ".join(repr(letter) for letter in unknown)
            raise ArchitectureError(
                f"{where} names {letters}: a layer kind gpuplan cannot size (A attention, S sliding-window "
                "attention, L linear attention, M Mamba-2, - MLP only)"
            )
        return value
    if name == "sliding_layers" and isinstance(value, str):
        if value not in _SLIDING_WORDS:
            raise ArchitectureError(f"{where} must be all, alternate or a layer period, not {shown}")
        return _SLIDING_WORDS[value]
    if name in _INTEGER_FIELDS:
        value = whole_number(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ArchitectureError(f"{where} must be a whole number, not {shown}")
        if rule is not None:
            low, high = rule.get("minimum"), rule.get("maximum")
            if low is not None and value < low:
                raise ArchitectureError(f"{where} must be at least {low}, not {shown}")
            if high is not None and value > high:
                raise ArchitectureError(f"{where} must be at most {high:,}, not {shown}")
        return value
    if rule is not None and "enum" in rule and value not in rule["enum"]:
        choices = ", ".join(str(choice) for choice in rule["enum"])
        raise ArchitectureError(f"{where} must be one of {choices}, not {shown}")
    return value


def show_value(value: Any) -> str:
    """A short JSON rendering of a config value for messages (never the whole of a long value)."""
    text = json.dumps(value) if isinstance(value, (int, float, str, bool)) or value is None else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def make_architecture(
    values: dict[str, Any], where: str = "model.architecture", spelled: Mapping[str, str] | None = None
) -> Architecture:
    """An Architecture from field values, each checked against the schema's bounds, then for consistency.
    ``spelled``: how the source names a field (a config.json key), for the consistency messages; else the
    field's own name (a spec's finding already begins with ``where``)."""

    def named(name: str) -> str:
        return spelled[name] if spelled and name in spelled else name

    unknown = set(values) - ARCHITECTURE_FIELDS
    if unknown:
        raise ArchitectureError("unknown architecture fields: " + ", ".join(sorted(unknown)))
    checked = {key: check_value(key, value, f"{where}.{key}") for key, value in values.items() if value is not None}
    for required in ("layers", "hidden", "heads", "intermediate", "vocab"):
        if required not in checked:
            raise ArchitectureError(f"{where} lacks {required}")
    architecture = Architecture(**checked)
    if architecture.heads % architecture.n_kv:
        raise ArchitectureError(
            f"{architecture.heads} attention heads are not a multiple of {architecture.n_kv} KV heads"
        )
    if not architecture.head_dim and architecture.hidden % architecture.heads:
        raise ArchitectureError(
            f"hidden size {architecture.hidden} is not a multiple of {architecture.heads} heads; give head_dim"
        )
    if architecture.is_moe and not architecture.experts_per_token:
        raise ArchitectureError(
            f"{named('experts')} {architecture.experts} makes a mixture of experts, which needs "
            f"{named('experts_per_token')}",
            "experts",
        )
    if architecture.experts_per_token > max(architecture.experts, 0) and architecture.is_moe:
        raise ArchitectureError(
            f"{named('experts_per_token')} {architecture.experts_per_token} exceeds {named('experts')} "
            f"{architecture.experts}",
            "experts_per_token",
        )
    if architecture.sliding_layers == 1:
        raise ArchitectureError("sliding_layers: 1 would make every layer full attention; leave sliding_window out")
    if architecture.is_mla and not (architecture.qk_rope_head_dim and architecture.v_head_dim):
        raise ArchitectureError("multi-head latent attention needs qk_rope_head_dim and v_head_dim")
    if architecture.is_moe and architecture.dense_layers >= architecture.layers:
        raise ArchitectureError(
            f"{named('dense_layers')} {architecture.dense_layers} leaves no mixture-of-experts layer of "
            f"{architecture.layers}",
            "dense_layers",
        )
    _check_hybrid(architecture, checked)
    return _interned(architecture)


# Architectures built in this process, each its own key: the specs of a repository share a few models (one
# config.json, the same explicit dimensions), and an equal architecture already built has its derived
# figures (parameters per layer, stage splits: cached properties) worked out. Bounded, for flat memory.
_INTERNED: dict[Architecture, Architecture] = {}
_INTERNED_MAX = 256


def _interned(architecture: Architecture) -> Architecture:
    """The equal architecture built before, if any (records are frozen: an equal one is the same model)."""
    found = _INTERNED.get(architecture)
    if found is not None:
        return found
    if len(_INTERNED) >= _INTERNED_MAX:
        _INTERNED.clear()
    _INTERNED[architecture] = architecture
    return architecture


def _check_hybrid(arch: Architecture, given: dict[str, Any]) -> None:
    """The layer pattern and the dimensions of its state layers agree (nothing given is silently unused)."""
    pattern = arch.layer_pattern
    if len(pattern) > arch.layers:
        raise ArchitectureError(f"layer_pattern has {len(pattern)} letters for {arch.layers} layers", "layer_pattern")
    if "L" in pattern and "M" in pattern:
        raise ArchitectureError("layer_pattern mixes linear-attention (L) and Mamba (M) layers", "layer_pattern")
    for letter, names, kind in (("L", _LINEAR_FIELDS, "linear-attention"), ("M", _MAMBA_FIELDS, "Mamba-2")):
        if letter in pattern:
            missing = [name for name in names if not getattr(arch, name)]
            if missing:
                raise ArchitectureError(f"{kind} layers ({letter}) need {', '.join(missing)}", "layer_pattern")
        else:
            stray = [name for name in names if name in given]
            if stray:
                raise ArchitectureError(
                    f"{stray[0]} describes {kind} layers, but there is no {letter} layer in the layer_pattern", stray[0]
                )
    if "L" in pattern and arch.linear_value_heads % arch.linear_key_heads:
        raise ArchitectureError(
            f"{arch.linear_value_heads} linear-attention value heads are not a multiple of {arch.linear_key_heads} "
            "key heads",
            "linear_value_heads",
        )
    if "M" in pattern and arch.mamba_heads % arch.ssm_groups:
        raise ArchitectureError(
            f"{arch.mamba_heads} Mamba heads are not a multiple of {arch.ssm_groups} groups", "ssm_groups"
        )
    if not pattern and given.get("separate_mlp"):
        raise ArchitectureError("separate_mlp needs a layer_pattern with its MLP (-) layers", "separate_mlp")
    if pattern and arch.windowed and "S" not in pattern:
        raise ArchitectureError("with a layer_pattern, mark the sliding-window or chunked layers S", "layer_pattern")
    if "S" in pattern and not arch.windowed:
        raise ArchitectureError("layer_pattern has S layers but no sliding_window or attention_chunk", "layer_pattern")
    if pattern and "sliding_layers" in given:
        raise ArchitectureError(
            "give the windowed layers as S in the layer_pattern, not as sliding_layers", "sliding_layers"
        )
