"""What vLLM's startup memory sizing does in each release line from 0.6.0 on (``serve.engine_version``).

vLLM profiles one dummy batch, then gives the KV cache what is left of ``gpu_memory_utilization`` x total.
Which bytes count against that budget, how big the profiled batch is and what the sampler warm-up holds
changed from release to release; each field below says what, and where in that release's own code (the
release's source distribution, ``vllm/``):

- **engine**: V0 (``vllm/worker/worker.py``) until 0.7.x; V1 (``vllm/v1/worker/gpu_worker.py``) the default
  from 0.8.0 (``VLLM_USE_V1`` defaults to 1), V0 deleted in 0.11.0.
- **batch defaults** for ``vllm serve`` (``EngineArgs``, vllm/engine/arg_utils.py): V0 schedules 256
  sequences and, without chunked prefill, ``max(max_model_len, 2048)`` tokens a step; it turns chunked prefill
  on by itself only above 32,768 tokens of context (not for sliding-window models, LoRA or speculative
  decoding), with 512 tokens a step until 0.6.4 and 2,048 from 0.6.5 (``_DEFAULT_MAX_NUM_BATCHED_TOKENS``).
  V1 always chunks: 8,192 tokens on a GPU whose name says H100 or H200, else 2,048, with 1,024 sequences on
  every GPU in 0.8.0-0.8.3 and on those two only in 0.8.4 (256 elsewhere); 0.8.5 by memory (at least 70 GiB:
  8,192 and 1,024, else 2,048 and 256); from 0.9.0 the A100 takes the small pair too; from 0.28.0 a GPU of
  at least 160 GiB gets 16,384 tokens.
- **sampler warm-up** (the profile run's dummy sampling with top-k and top-p): V0 and V1 until 0.16 sort
  the fp32 logits (``apply_top_k_top_p``: ``logits.sort``); from 0.17.0 a Triton kernel masks them in place
  when at least 8 requests are sampled (``apply_top_k_top_p_triton``, vllm/v1/sample/ops/topk_topp_sampler.py).
- **the CUDA context in the budget**: 0.6.4 (V0) and V1 0.8.0-0.9.0 subtract everything the device has in
  use (``peak_memory += total - free - torch allocated``), the process's own CUDA context included; the
  other releases measure increases from a snapshot taken after the context exists.
- **CUDA graphs in the budget**: captured after the KV cache is allocated in every release; from 0.20.0 an
  estimate of their pool is subtracted from the budget first (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``,
  default 1; 0.18-0.19 compute it but subtract it only when set), on AMD GPUs from 0.26.0 (``is_cuda_alike``;
  0.20-0.25 gate it on CUDA).
- **capture sizes** (the decode batch sizes given a graph): V0 1, 2, 4, then steps of 8 up to
  ``max_num_seqs`` (one graph each); V1 up to 512 in steps of 8 (0.8.0), capped at twice ``max_num_seqs``
  from 0.10.0, steps of 16 above 256 from 0.11.2, up to 1,024 on data-centre Blackwell (compute capability
  10.x) from 0.28.0; one PIECEWISE graph each until 0.10.x, from 0.11.0 also a FULL graph for each size up to
  ``max_num_seqs`` (``CUDAGraphMode.FULL_AND_PIECEWISE``).
- **model runner V2** (vllm/v1/worker/gpu/): which model runs on it is ``VllmConfig.use_v2_model_runner``
  (vllm/config/vllm.py), decided by the model's config.json ``architectures`` and kind
  (``for_deployment``): none until 0.21; 0.22 Qwen3ForCausalLM and 0.23 also LlamaForCausalLM and
  MistralForCausalLM, dense and from an unquantized checkpoint (``is_quantized``: a ``quantization_config``);
  0.24 those three and DeepseekV2ForCausalLM, Qwen2MoeForCausalLM and GraniteMoeForCausalLM whatever their
  checkpoint; 0.25-0.28 every dense model and the MoE classes listed (``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES``,
  which 0.26-0.28 extend), never a hybrid (linear-attention or Mamba layers) or attention-free one, though a
  listed hybrid from 0.27; 0.29 on every model, but on AMD GPUs DeepseekV32ForCausalLM and
  DeepseekV4ForCausalLM (``ROCM_DEFAULT_MRV1_ARCHITECTURES``; 0.27 and 0.28 left KimiK3 and DeepseekV4 off
  their list there). A speculative method it lacks (a separate draft model) keeps the V1 runner in every
  release (``_get_v2_model_runner_unsupported_features``). Its profile copies the bf16 logits to fp32
  before sampling until 0.25 (``apply_sampling_params``: 2 + 4 B per logit), samples the bf16 logits in
  place in 0.26 and, as the profile's greedy dummy requests need no processing
  (``_requires_logits_processing``), from 0.27 until 0.32 (2 B; with tensor parallelism the all-gather of
  ``compute_logits`` holds 4 + 2/TP B), and from 0.33.0 adds a second pass with top-k, top-p, penalties and
  logprobs through FlashInfer (bf16 logits, fp32 copy, masked fp32 copy, fp32 probabilities: 14 B). It keeps
  per-sequence sampler state on the GPU, made with the sampler once the weights are loaded (``load_model``):
  ``output_bin_counts`` int32 [max_num_seqs, vocab], the ``prompt_bin_mask`` and the grammar bitmask, int32
  [max_num_seqs, vocab / 32] each (``PenaltiesState``, ``StructuredOutputsWorker``). Until 0.26 the budget
  counts the weights, the profile's rise and non-torch memory (``memory_profiling``), so that state sits
  beside the budget; from 0.27.0 it counts all the device memory consumed since start-up
  (``total_consumed``), that state included.
- **default utilization**: 0.90; 0.92 from 0.20.0 (``CacheConfig``); 1.0 from 0.34.0, whose extensible KV
  cache is sized after warm-up and graph capture from the memory then free, less a margin of the larger of
  1 GiB (3 GiB on AMD GPUs) and three quarters of the activation peak, and less that peak (``measure_kv_cache_bytes``,
  vllm/v1/worker/extensible_kv_cache.py); its KV blocks hold 64 tokens (``DEFAULT_BLOCK_SIZE``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from gpuplan.records import evolve, record
from gpuplan.releases import parse_version, version_text
from gpuplan.units import GIB

if TYPE_CHECKING:  # only named in a signature
    from gpuplan.architecture import Architecture

# The releases gpuplan models, oldest and newest; ``serve.engine_version`` outside them is estimated as
# the nearest (GP210 says so).
OLDEST = (0, 6, 0)
NEWEST = (0, 34, 0)
# The release the memory model's constants were read from (ten v0.19 startup logs): the default.
DEFAULT_VERSION = "0.19"
# This process's CUDA context and what torch allocates as it starts, in use before any model tensor: "Free
# memory on device (78.57/79.18 GiB) on startup" in vLLM's startup logs on one H100 (llm-d/llm-d-benchmark,
# config_explorer/empirical-vllm-memory-results.md).
CUDA_CONTEXT_BYTES = round(0.61 * GIB)
# V0 chunked prefill: turned on by itself above this context (arg_utils.py ``use_long_context``).
V0_LONG_CONTEXT = 32 * 1024
V0_MAX_NUM_SEQS = 256
# The sampler warm-up per logit on the Triton path (0.17.0 on): bf16 logits (2), their fp32 copy (4), fp32
# probabilities (4) and the fp32 exponential noise of the Gumbel-max draw (4); the v0.19 logs' torch peak
# grows by 14.1-14.5 B per (request x vocabulary entry) between Llama-3.1-8B, Qwen2.5-7B and phi-4.
TRITON_SAMPLER_BYTES_PER_LOGIT = 14


@record
class VllmRelease:
    """The memory-sizing behaviour of one vLLM release (module docstring: each field's source)."""

    version: tuple[int, int, int]  # as the spec names it, clamped to OLDEST..NEWEST
    engine: str  # "V0" or "V1"
    context_in_budget: bool  # the budget also pays for the process's CUDA context
    graphs_in_budget: bool  # the CUDA-graph pool is estimated and subtracted before the KV cache
    sorted_sampler: bool  # the sampler warm-up sorts the logits (else the Triton kernel masks them)
    default_utilization: float
    extensible_kv: bool  # 0.34: the KV cache is sized after warm-up from the free memory
    block_tokens: int  # CacheConfig.DEFAULT_BLOCK_SIZE on CUDA: 16, 64 from 0.34.0
    v2_runner: bool  # the deployment runs on model runner V2 (every model from 0.29.0; ``for_deployment``)
    # 0.22-0.24 choose model runner V2 by the config.json class, and this model names none (dimensions given
    # in the spec): it is sized as the V1 runner, and the assumptions say so.
    class_unknown: bool = False

    def graphs_counted(self, gpu_arch: str) -> bool:
        """Whether the CUDA-graph estimate is taken from the budget on a GPU of ``gpu_arch``."""
        return self.graphs_in_budget and (not gpu_arch.startswith("gfx") or self.version >= (0, 26, 0))

    def sampler_state_bytes(self, max_num_seqs: int, vocab: int) -> int:
        """Model runner V2's per-sequence sampler state on the GPU (module docstring): int32 output bin counts
        [seqs, vocab], and the prompt bin mask and grammar bitmask of [seqs, vocab/32]."""
        if not self.v2_runner:
            return 0
        return 4 * max_num_seqs * vocab + 2 * 4 * max_num_seqs * -(-vocab // 32)

    @property
    def state_in_budget(self) -> bool:
        """Whether the budget pays for what persists from start-up beside the weights, model runner V2's
        sampler state among it (``total_consumed``, 0.27.0 on); before, that state sits beside the budget."""
        return self.version >= (0, 27, 0)

    def for_deployment(
        self,
        classes: tuple[str, ...],
        architecture: Architecture,
        quantized_checkpoint: bool,
        speculative_method: str,
        gpu_arch: str,
    ) -> VllmRelease:
        """This release as it runs one model: on model runner V2 where ``use_v2_model_runner`` picks it
        (module docstring) for the config.json ``classes``, the model's kind, its checkpoint, its speculative
        ``method`` (gpuplan's: draft, eagle, mtp; "" for none) and the GPU (AMD's ``gfx`` architectures)."""
        version = self.version
        if version < (0, 22, 0) or speculative_method == "draft":  # vLLM's draft_model method: V1 only
            return evolve(self, v2_runner=False)
        amd = gpu_arch.startswith("gfx")
        if version >= (0, 29, 0):
            return evolve(self, v2_runner=not (amd and ROCM_V1_CLASSES.intersection(classes)))
        listed = bool(_v2_classes(version, amd).intersection(classes))
        if not classes and version < (0, 25, 0):
            return evolve(self, v2_runner=False, class_unknown=True)
        if version < (0, 24, 0):
            runs = listed and not architecture.is_moe and not quantized_checkpoint
        elif version < (0, 25, 0):
            runs = listed
        else:  # never an attention-free model; a hybrid one only when listed, from 0.27
            attention_free = architecture.state_layers == architecture.layers
            hybrid_refused = architecture.state_layers > 0 and (version < (0, 27, 0) or not listed)
            runs = not attention_free and not hybrid_refused and (listed or not architecture.is_moe)
        return evolve(self, v2_runner=runs)

    def kv_margin_floor(self, gpu_arch: str) -> int:
        """0.34's extensible KV cache: the least margin it keeps free (``margin_floor_bytes``)."""
        return 3 * GIB if gpu_arch.startswith("gfx") else GIB

    @property
    def label(self) -> str:
        """'vLLM v0.19 (V1 engine, OpenAI API server defaults)', the patch level shown when it is not 0, and
        the model runner when it is V2."""
        major, minor, patch = self.version
        name = f"{major}.{minor}" + (f".{patch}" if patch else "")
        runner = ", model runner V2" if self.v2_runner else ""
        return f"vLLM v{name} ({self.engine} engine{runner}, OpenAI API server defaults)"

    def batch_defaults(self, total_bytes: int, gpu_name: str, context: int, chunks_by_itself: bool) -> tuple[int, int]:
        """(max_num_batched_tokens, max_num_seqs) ``vllm serve`` picks: ``total_bytes`` the device's total
        memory as CUDA reports it; ``chunks_by_itself`` whether V0 may turn chunked prefill on by itself
        (no sliding window, LoRA or speculative decoding)."""
        if self.engine == "V0":
            if chunks_by_itself and context > V0_LONG_CONTEXT:
                return (512 if self.version < (0, 6, 5) else 2048), V0_MAX_NUM_SEQS
            return max(context, 2048), V0_MAX_NUM_SEQS
        name = gpu_name.lower()
        named = "h100" in name or "h200" in name
        if self.version < (0, 8, 4):  # tokens by the device's name, 1,024 sequences everywhere
            return (8192 if named else 2048), 1024
        if self.version < (0, 8, 5):  # both by the device's name (PR #16158)
            return (8192, 1024) if named else (2048, 256)
        large = total_bytes >= 70 * GIB and (self.version < (0, 9, 0) or "a100" not in name)
        if self.version >= (0, 28, 0) and total_bytes >= 160 * GIB:
            return 16384, 1024
        return (8192, 1024) if large else (2048, 256)

    def sampler_bytes_per_logit(self, requests: int, tensor_parallel: int = 1) -> float:
        """Bytes the sampler warm-up holds per (request x vocabulary entry) at its peak.

        The sort path (PyTorch's ``logits.sort`` of the fp32 logits, aten/src/ATen/native/cuda/SortStable.cu):
        the bf16 logits (2) and their fp32 copy (4), the sort's outputs (fp32 values 4, int64 indices 8) and
        its workspace, which depends on how many rows it sorts: from 128 rows ``segmented_sort_pairs`` (an
        int64 index per element, 8, and CUB's alternate key and value buffers, 4 + 8), below 128
        ``segmented_sort_pairs_by_full_sort`` (two int2 index-and-segment arrays, 16, and CUB's alternates,
        4 + 8), one row ``segmented_sort_large_segments`` (CUB's alternates alone). 38 B from 128 requests:
        the measured 38.4-38.9 B of vLLM 0.10.2's logs on an H100 (llm-d-benchmark, the same file) are this
        figure with the batch's hidden states. The Triton path (0.17.0 on, 8 or more requests) sorts nothing.
        Model runner V2 (module docstring): 6 B until 0.25 (the logits and their fp32 copy); 2 B, or the
        logits' all-gather over TP ranks (4 + 2/TP), from 0.26 until 0.32; 14 B from 0.33.0.
        """
        if self.v2_runner:
            if self.version >= (0, 33, 0):
                return 2 + 4 + 4 + 4
            if self.version < (0, 26, 0):  # the fp32 copy: above the all-gather's 4 + 2/TP at any TP
                return 2 + 4
            return max(2.0, 4 + 2 / tensor_parallel) if tensor_parallel > 1 else 2
        if not self.sorted_sampler and requests >= 8:
            return TRITON_SAMPLER_BYTES_PER_LOGIT
        if requests >= 128:
            workspace = 8 + 12
        elif requests > 1:
            workspace = 16 + 12
        else:
            workspace = 12
        return 2 + 4 + 12 + workspace

    def capture_sizes(self, max_num_seqs: int, max_batched: int, gpu_arch: str = "") -> tuple[int, ...]:
        """The decode batch sizes captured, per graph mode (module docstring): from 0.11.0 PIECEWISE graphs for
        every size and FULL ones for the sizes up to ``max_num_seqs`` (uniform decode batches;
        ``CudagraphDispatcher.initialize_cudagraph_keys``: 51 and 35 at 256 sequences, as 0.21's log counts);
        ``gpu_arch`` the catalog's (sm100, sm103: data-centre Blackwell)."""
        if self.engine == "V0":
            largest = -(-max_num_seqs // 8) * 8
            return (len([s for s in (1, 2, 4) if s <= largest]) + len(range(8, largest + 1, 8)),)
        blackwell = self.version >= (0, 28, 0) and gpu_arch in ("sm100", "sm103")  # is_device_capability_family(100)
        cap = 512 if self.version < (0, 10, 0) else min(2 * max_num_seqs, 1024 if blackwell else 512)
        largest = min(cap, max_batched)
        sizes = [s for s in (1, 2, 4) if s <= largest]
        if self.version < (0, 11, 2):
            sizes += range(8, largest + 1, 8)
        else:
            sizes += [*range(8, min(largest, 255) + 1, 8), *range(256, largest + 1, 16)]
        if self.version < (0, 11, 0):
            return (len(sizes),)
        return len(sizes), len([size for size in sizes if size <= max_num_seqs])


def _release(version: tuple[int, int, int]) -> VllmRelease:
    version = max(OLDEST, min(NEWEST, version))
    return VllmRelease(
        version=version,
        engine="V0" if version < (0, 8, 0) else "V1",
        context_in_budget=(0, 6, 4) <= version < (0, 6, 5) or (0, 8, 0) <= version < (0, 9, 1),
        graphs_in_budget=version >= (0, 20, 0),
        sorted_sampler=version < (0, 17, 0),
        default_utilization=1.0 if version >= (0, 34, 0) else (0.92 if version >= (0, 20, 0) else 0.9),
        extensible_kv=version >= (0, 34, 0),
        block_tokens=64 if version >= (0, 34, 0) else 16,
        v2_runner=version >= (0, 29, 0),
    )


# DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (vllm/config/vllm.py), by the release that set it: the classes that run
# on model runner V2 by default (0.22-0.24: only they; 0.25-0.28: they and every dense model).
_FIRST_DENSE = frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"})
_FIRST_MOE = frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})
_ADDED_0_26 = frozenset({"InklingForCausalLM", "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM"})
V2_CLASSES: tuple[tuple[tuple[int, int, int], frozenset[str]], ...] = (
    ((0, 22, 0), frozenset({"Qwen3ForCausalLM"})),
    ((0, 23, 0), _FIRST_DENSE),
    ((0, 24, 0), _FIRST_DENSE | _FIRST_MOE),
    ((0, 25, 0), _FIRST_MOE),
    ((0, 26, 0), _FIRST_MOE | _ADDED_0_26),
    ((0, 27, 0), _FIRST_MOE | _ADDED_0_26 | {"KimiK3ForConditionalGeneration"}),
    ((0, 28, 0), _FIRST_MOE | _ADDED_0_26 | {"KimiK3ForConditionalGeneration", "DeepseekV4ForCausalLM"}),
)
# Left off that list on AMD GPUs: 0.27 ROCM_EXCLUDED_V2_MODEL_RUNNER_ARCHITECTURES, 0.28
# default_v2_model_runner_architectures().
ROCM_OFF_LIST = {
    (0, 27, 0): frozenset({"KimiK3ForConditionalGeneration"}),
    (0, 28, 0): frozenset({"DeepseekV4ForCausalLM"}),
}
# 0.29 on: ROCM_DEFAULT_MRV1_ARCHITECTURES, the classes that keep the V1 runner on AMD GPUs.
ROCM_V1_CLASSES = frozenset({"DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM"})


def _v2_classes(version: tuple[int, int, int], amd: bool) -> frozenset[str]:
    """The classes release ``version`` (0.22-0.28) lists for model runner V2, on an AMD GPU or not."""
    line, classes = max((entry for entry in V2_CLASSES if entry[0] <= version), key=lambda entry: entry[0])
    return classes - ROCM_OFF_LIST.get(line, frozenset()) if amd else classes


@functools.lru_cache(maxsize=64)
def vllm_release(version: str | None) -> VllmRelease:
    """The release ``serve.engine_version`` names (the default, ``DEFAULT_VERSION``, when it names none)."""
    return _release(parse_version(version or DEFAULT_VERSION))


# The releases at which something above changes (the first release of each line of identical sizing):
# two releases between the same neighbours size memory alike, whatever their patch level.
SIZING_CHANGES = (
    (0, 6, 0),
    (0, 6, 4),  # the CUDA context in the budget (PR #9352)
    (0, 6, 5),  # memory_profiling (PR #10511); V0 chunks 2,048 tokens
    (0, 8, 0),  # V1 by default: its batch defaults, sampler warm-up, graphs; the context counted again
    (0, 8, 4),  # 256 sequences off H100/H200 (PR #16158)
    (0, 8, 5),  # batch defaults by 70 GiB
    (0, 9, 0),  # the A100 takes the small defaults
    (0, 9, 1),  # V1 memory_profiling: the context no longer counted (PR #19312)
    (0, 10, 0),  # capture sizes capped at 2 x max_num_seqs
    (0, 11, 0),  # FULL and PIECEWISE graphs
    (0, 11, 2),  # capture sizes in steps of 16 above 256
    (0, 17, 0),  # the Triton top-k/top-p kernel
    (0, 20, 0),  # the CUDA-graph estimate in the budget; utilization 0.92
    (0, 22, 0),  # model runner V2 for Qwen3ForCausalLM
    (0, 23, 0),  # ... and LlamaForCausalLM, MistralForCausalLM
    (0, 24, 0),  # ... from quantized checkpoints too, and three MoE classes
    (0, 25, 0),  # ... for every dense model
    (0, 26, 0),  # the graph estimate on AMD GPUs too; V2 samples the logits in place
    (0, 27, 0),  # the budget counts all memory consumed (V2's sampler state in it)
    (0, 28, 0),  # 16,384 tokens on 160 GiB GPUs; graphs up to 1,024 on data-centre Blackwell
    (0, 29, 0),  # model runner V2 for every model
    (0, 33, 0),  # ... and its second, full sampler pass
    (0, 34, 0),  # the extensible KV cache, 64-token blocks
)


def sizing_line(version: str) -> tuple[int, int, int]:
    """The first release of the line of identical memory sizing ``version`` belongs to (SIZING_CHANGES),
    clamped to the modelled range: two versions size memory alike exactly when their lines are equal."""
    parsed = max(OLDEST, min(NEWEST, parse_version(version)))
    return max(change for change in SIZING_CHANGES if change <= parsed)


def outside_modelled(version: str) -> str | None:
    """Why a named release is estimated as another one ("older than"/"newer than" the modelled range), or None."""
    parsed = parse_version(version)
    if parsed < OLDEST:
        return f"older than the oldest release gpuplan models ({version_text(OLDEST)})"
    if parsed[:2] > NEWEST[:2]:  # a patch of the newest line is that line
        return f"newer than the newest release gpuplan models ({version_text(NEWEST)})"
    return None
