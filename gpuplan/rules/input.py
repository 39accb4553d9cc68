"""GP0xx: problems reading the spec (raised by the loader and the resolver, documented here)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpuplan.rules.registry import documentation_only, rule


@rule("GP001")
@documentation_only
def yaml_syntax(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports a YAML syntax error (or a value that cannot be read, such as `.inf`) at the line and
    column where the parser stopped.

    ## Why is this bad?
    Nothing else can be checked until the file parses.

    ## Example
    ```yaml
    serve:
      context: 32768
     concurrency: 8
    ```

    ## Use instead
    ```yaml
    serve:
      context: 32768
      concurrency: 8
    ```
    """
    yield from ()


@rule("GP002")
@documentation_only
def duplicate_key(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports a key that appears twice in one mapping, naming both lines.

    ## Why is this bad?
    YAML loaders keep the last value silently, so a reviewer reading the first one is misled
    about what will be provisioned.

    ## Example
    ```yaml
    serve:
      concurrency: 8
      concurrency: 64
    ```

    ## Use instead
    ```yaml
    serve:
      concurrency: 64
    ```
    """
    yield from ()


@rule("GP003")
@documentation_only
def input_too_large(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Refuses files over 1 MiB, nested deeper than 64 levels, or whose aliases expand to more than
    1,000 nodes, before building them.

    ## Why is this bad?
    Such a file is not a workload spec; it is a mistake or an attack ("billion laughs") that would
    exhaust memory in a pre-commit hook.

    ## Example
    ```yaml
    a: &a [x, x, x, x, x, x, x, x, x, x]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
    ```

    ## Use instead
    Write the spec's values out plainly; a spec is a few dozen lines.
    """
    yield from ()


@rule("GP004")
@documentation_only
def unsupported_tag(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports tags such as `!!python/object` or custom `!tags`; only plain YAML values are accepted.

    ## Why is this bad?
    Language-specific tags can run code in unsafe loaders and mean nothing to a workload spec.

    ## Example
    ```yaml
    name: !!python/object:os.system echo
    ```

    ## Use instead
    ```yaml
    name: support-assistant
    ```
    """
    yield from ()


@rule("GP005")
@documentation_only
def invalid_encoding(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports the first byte that is not valid UTF-8, with its line and column.

    ## Why is this bad?
    YAML specs are UTF-8; other encodings garble names and numbers.

    ## Example
    A spec saved as Latin-1 with `owner: équipe`.

    ## Use instead
    Save the file as UTF-8.
    """
    yield from ()


@rule("GP006")
@documentation_only
def empty_document(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports an empty file or one with only comments.

    ## Why is this bad?
    An empty spec plans nothing; it is usually a file committed by mistake.

    ## Example
    ```yaml
    # TODO
    ```

    ## Use instead
    ```yaml
    version: 1
    name: my-workload
    ```
    """
    yield from ()


@rule("GP007")
@documentation_only
def multiple_documents(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports a second `---` document in a spec file.

    ## Why is this bad?
    One file is one workload; a second document would be ignored by other tools.

    ## Example
    ```yaml
    version: 1
    name: a
    ---
    version: 1
    name: b
    ```

    ## Use instead
    Put each workload in its own file.
    """
    yield from ()


@rule("GP008")
@documentation_only
def root_not_mapping(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports a spec whose top level is a list or a plain value.

    ## Why is this bad?
    A spec is a mapping of sections (`model`, `finetune`, `serve`, ...).

    ## Example
    ```yaml
    - version: 1
    ```

    ## Use instead
    ```yaml
    version: 1
    ```
    """
    yield from ()


@rule("GP009")
@documentation_only
def unreadable_file(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports a path that does not exist or cannot be opened.

    ## Why is this bad?
    A spec that cannot be read cannot be checked.

    ## Example
    `gpuplan lint spec.yml` where the file is `spec.yaml`.

    ## Use instead
    Pass the right path, or a directory to search.
    """
    yield from ()


@rule("GP010")
@documentation_only
def internal_error(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports that a step of gpuplan (resolving, estimating, or one rule) raised an unexpected error
    on this spec, or produced a figure that is not a finite, non-negative number. The step is
    named in the message; `--traceback` prints the trace. The run goes on with the other specs and
    the other rules, and exits 2.

    ## Why is this bad?
    It is a bug in gpuplan, not in the spec: the findings of this spec are incomplete.

    ## Example
    A spec that makes a rule divide by zero.

    ## Use instead
    Report the message and the trace (`gpuplan lint --traceback spec.yaml`) to gpuplan's maintainers.
    """
    yield from ()


@rule("GP011")
@documentation_only
def too_many_findings(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Lists the first 100 findings of a file one by one, then this one finding that counts the rest,
    with the highest severity among them.

    ## Why is this bad?
    A file with hundreds of problems is not a spec (a generated or pasted file, the wrong file);
    listing every problem would bury the output and cost time on every commit.

    ## Example
    A YAML file with 5,000 unknown keys.

    ## Use instead
    Fix the first problems listed, or lint the right file.
    """
    yield from ()


@rule("GP012")
@documentation_only
def invalid_configuration(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports, on each spec it governs, that the nearest `.gpuplan.yaml` or `pyproject.toml`
    `[tool.gpuplan]` table cannot be read or is invalid, with the file, line and problem. The specs
    are not checked (their thresholds and selection are unknown); specs elsewhere in the run are,
    and the run exits 2.

    ## Why is this bad?
    Linting with the defaults instead of the team's configuration would give different verdicts
    silently.

    ## Example
    ```toml
    [tool.gpuplan]
    fail-on = "warnings"
    ```

    ## Use instead
    ```toml
    [tool.gpuplan]
    fail-on = "warning"
    ```
    """
    yield from ()


@rule("GP020")
@documentation_only
def unknown_model(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports a `model.id` that the built-in catalog does not know, with the closest ids.

    ## Why is this bad?
    Without the architecture nothing can be estimated; a typo must not pass silently.

    ## Example
    ```yaml
    model: {id: llama-3.1-70-b}
    ```

    ## Use instead
    ```yaml
    model: {id: llama-3.1-70b}
    ```
    or `model: {config: path/to/config.json}` for a model outside the catalog.
    """
    yield from ()


@rule("GP021")
@documentation_only
def invalid_model_config(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports a `model.config` path that cannot be read as a Hugging Face config.json with the
    fields gpuplan needs (hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
    vocab_size), a value outside the bounds an explicit architecture has (0, negative, NaN,
    fractional, a list or a string where a dimension belongs, 1e30 layers), naming the key; a
    layer kind gpuplan cannot size (a `layer_types` entry or a `hybrid_override_pattern` letter it
    does not know, a Nemotron-H latent mixture of experts), naming it; a hybrid or state-space model
    type it does not size yet (Jamba, Falcon-H1, Bamba, Mamba, ...); a `quantization_config`
    format gpuplan cannot size (HQQ, AQLM, GGUF, 3-bit GPTQ, ...); or an explicit architecture that
    is inconsistent (a `layer_pattern` whose linear-attention or Mamba layers lack their
    dimensions: at the line of the field at fault).

    ## Why is this bad?
    Estimates are computed from the architecture; a guessed dimension, or a format silently read
    as unquantized, is a wrong number.

    ## Example
    ```yaml
    model: {config: models/acme-7b/config.jsn}
    ```

    ## Use instead
    ```yaml
    model: {config: models/acme-7b/config.json}
    ```
    """
    yield from ()


@rule("GP022")
@documentation_only
def unknown_gpu(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports a `hardware.gpu` that names no catalog GPU and no entry of the spec's `gpus` section,
    with the closest ids.

    ## Why is this bad?
    Memory, bandwidth and price all come from the GPU; an unknown one cannot be sized.

    ## Example
    ```yaml
    hardware: {gpu: h200sxm}
    ```

    ## Use instead
    ```yaml
    hardware: {gpu: h200-sxm}
    ```
    """
    yield from ()


@rule("GP023")
@documentation_only
def inconsistent_layout(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports `hardware.count` that `tensor_parallel x pipeline_parallel` does not divide, and an
    `expert_parallel` degree that cannot be laid out: one that does not divide the GPUs, exceeds the
    model's experts, is given for a dense model, or is given for fine-tuning (modelled for serving only).

    ## Why is this bad?
    Each model replica needs TP x PP GPUs; a remainder is GPUs paid for and never used, or a
    layout the frameworks refuse to launch.

    ## Example
    ```yaml
    hardware: {gpu: h100-sxm, count: 6, tensor_parallel: 4}
    ```

    ## Use instead
    ```yaml
    hardware: {gpu: h100-sxm, count: 8, tensor_parallel: 4}
    ```
    """
    yield from ()


@rule("GP024")
@documentation_only
def inconsistent_workload(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports a serving job whose `output_tokens` is larger than its `context`, a
    `serve.prompt_tokens.p90` below its `mean` or longer than the context leaves beside
    `output_tokens`, a mean prompt that leaves no room for `output_tokens` within `context`, an
    `output_tokens_p90` below `output_tokens` or longer than the context leaves after the mean prompt
    (without `prompt_tokens`, every prompt is `context - output_tokens` and leaves no room for a longer
    answer), and a load that contradicts itself or the model: `arrival: steady` without `rate_rps`, a
    `rate_rps` for another arrival shape, or `batching: static` under a steady stream or a burst (static
    batching is estimated for a closed loop of clients).

    ## Why is this bad?
    The context holds the prompt and the generated tokens together, and the speed estimate draws
    prompt lengths from the declared distribution: lengths that contradict each other or the context
    describe no real traffic, so the time per request, the KV cache and the cost built on them would
    be computed for a workload that cannot run. A rate given for a closed loop or a burst would be
    silently unused.

    ## Example
    ```yaml
    serve:
      context: 4096
      output_tokens: 512
      prompt_tokens: {mean: 2000, p90: 1500}
    ```

    ## Use instead
    ```yaml
    serve:
      context: 4096
      output_tokens: 512
      prompt_tokens: {mean: 1500, p90: 3000}
    ```
    """
    yield from ()


@rule("GP025")
@documentation_only
def conflicting_finetune_settings(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports fine-tuning settings that cannot run together: `optimizer_in_backward` with gradient
    accumulation or with an offloaded optimizer, parameter offload without ZeRO-3/FSDP sharding on
    several GPUs, ZeRO-2 or ZeRO-3 with pipeline parallelism (DeepSpeed's pipeline engine takes ZeRO-1
    alone; the planner never proposes it), `sequence_parallel` without tensor parallelism,
    `lora.variant: dora` on a full fine-tune, a bf16 precision (`bf16`, `bf16-mixed`, `fp8-mixed`) on a GPU
    without bf16 tensor cores (the T4), QLoRA under Megatron with FSDP/ZeRO-2/3 or tensor parallelism (NeMo's NF4
    wrappers), and QLoRA with tensor parallelism under any framework but `fused` (Unsloth alone shards 4-bit
    weights over tensor-parallel ranks; the others spread QLoRA with FSDP-QLoRA, and the planner proposes no
    tensor parallelism for it), and a full fine-tune of a checkpoint stored as AWQ or GPTQ 4-bit weights
    (config.json's quantization_config: the Hugging Face Trainer refuses to train a quantized model without
    adapters).

    ## Why is this bad?
    The frameworks refuse these combinations at launch, or run them wrongly (torchtune raises for
    optimizer-in-backward with accumulation, and for tensor parallelism in its LoRA recipe; a Transformers tp_plan
    keeps each rank's whole 4-bit weight; DeepSpeed streams parameters only under ZeRO-3; the Hugging Face Trainer
    refused bf16 below compute capability 8.0 until PyTorch began to count emulated bf16 as supported,
    and where it now starts, the bf16 math runs without tensor cores), so an estimate for them would
    describe a run that cannot happen, or not at the speed it would state.

    ## Example
    ```yaml
    finetune:
      optimizer_in_backward: true
      gradient_accumulation: 8
    ```

    ## Use instead
    ```yaml
    finetune:
      optimizer_in_backward: true
      gradient_accumulation: 1
      micro_batch: 8
    ```
    """
    yield from ()


@rule("GP026")
@documentation_only
def engine_setting_mismatch(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports `serve.max_gpu_total_bytes` with an engine other than `trtllm` (it is TensorRT-LLM's
    `KvCacheConfig.max_gpu_total_bytes`), `serve.memory_utilization: 1` with `engine: trtllm`
    (there it is `free_gpu_memory_fraction`, which TensorRT-LLM requires below 1), and a quantization
    vLLM does not serve on the GPU, the model's or a tenant's: fp8 and MXFP4 (gpt-oss) need compute capability 8.0
    (`get_min_capability` of vLLM's `Fp8Config` and `Mxfp4Config`), which a T4 (7.5) lacks. The planner
    never proposes such a GPU. With `engine: vllm`, a `serve.max_batched_tokens` below
    `serve.max_sequences` (vLLM's `SchedulerConfig` requires `max_num_batched_tokens >= max_num_seqs`:
    every running sequence takes a token of each step).

    ## Why is this bad?
    `serve.memory_utilization` is each engine's own memory fraction (vLLM `gpu_memory_utilization`,
    SGLang `mem_fraction_static`, TensorRT-LLM `free_gpu_memory_fraction`) and the estimate sizes the KV
    cache by that engine's mechanism. A setting the engine has no use for would be ignored, and a value
    the engine refuses (TensorRT-LLM checks `freeMemFraction < 1.0f` in `kvCacheManager.cpp`; vLLM
    checks the GPU's compute capability against the quantization's when it loads the model) describes
    a server that does not start; an estimate for either is not the run the spec will get.

    ## Example
    ```yaml
    serve:
      engine: vllm
      max_gpu_total_bytes: 40000000000
    ```

    ## Use instead
    ```yaml
    serve:
      engine: trtllm
      max_gpu_total_bytes: 40000000000
    ```
    """
    yield from ()


@rule("GP027")
@documentation_only
def inconsistent_serving_feature(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports `serve.lora.max_cpu_adapters` below `max_adapters`, `serve.speculative.method: draft`
    without a `draft_model`, a `draft_model` with method `eagle` or `mtp`, and a draft model whose
    vocabulary differs from the model's. An unknown `draft_model` id is GP020 at that line.

    ## Why is this bad?
    vLLM refuses `max_cpu_loras < max_loras` (the adapters in GPU slots are cached on the host too); a
    draft-model proposer needs its model, and EAGLE and MTP proposers draft with a head of the model's
    own, so a draft model there describes another deployment. The model verifies the draft's token ids,
    so a draft with another tokenizer would propose tokens that mean something else.

    ## Example
    ```yaml
    serve:
      speculative: {method: draft, num_tokens: 4, acceptance_rate: 0.7}
    ```

    ## Use instead
    ```yaml
    serve:
      speculative: {method: draft, draft_model: llama-3.2-1b, num_tokens: 4, acceptance_rate: 0.7}
    ```
    """
    yield from ()
