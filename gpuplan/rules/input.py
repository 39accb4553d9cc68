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
    vocab_size), or an explicit architecture that is inconsistent.

    ## Why is this bad?
    Estimates are computed from the architecture; a guessed dimension is a wrong number.

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
    Reports a `serve.prompt_tokens.p90` below its `mean`, and a mean prompt that leaves no room for
    `output_tokens` within `context`.

    ## Why is this bad?
    The speed estimate draws prompt lengths from that distribution; a 90th percentile below the mean
    or prompts longer than the context describe no real traffic, and any figure built on them is noise.

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
