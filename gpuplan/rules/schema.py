"""GP1xx: the spec does not match the JSON Schema (raised by gpuplan.validate, documented here)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpuplan.rules.registry import documentation_only, rule


@rule("GP100")
@documentation_only
def schema_violation(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports any JSON Schema error of `schemas/workload.schema.json` that GP101-GP107 do not name,
    with the field's path and the schema's own words. Every constraint today's schema states has a
    code of its own (a test holds each keyword it uses to one), so no spec draws GP100 now: it is the
    net for a constraint added to the schema before it gets a code.

    ## Why is this bad?
    The estimate and the rules only run on specs that match the contract.

    ## Example
    ```yaml
    # no spec draws GP100 with today's schema; a constraint broken is named by GP101-GP107, as here:
    version: 2   # GP105: a value outside a closed list
    ```

    ## Use instead
    ```yaml
    version: 1
    ```
    """
    yield from ()


@rule("GP101")
@documentation_only
def unknown_key(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports every unknown key, at its line, with the closest known key.

    ## Why is this bad?
    A misspelt key is silently ignored by lenient tools: `contxt: 32768` would leave the default
    context in place and the plan would be sized for the wrong workload.

    ## Example
    ```yaml
    serve:
      contxt: 32768
    ```

    ## Use instead
    ```yaml
    serve:
      context: 32768
    ```
    """
    yield from ()


@rule("GP102")
@documentation_only
def wrong_type(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports a value whose type differs from the schema's (a string where a number is expected,
    a list where a mapping is expected ...).

    ## Why is this bad?
    `concurrency: "64"` or `tokens: 2e8` are easy to write and change what is computed.

    ## Example
    ```yaml
    serve:
      concurrency: "sixty-four"
    ```

    ## Use instead
    ```yaml
    serve:
      concurrency: 64
    ```
    """
    yield from ()


@rule("GP103")
@documentation_only
def out_of_range(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports a number below the schema's minimum or above its maximum, quoting both.

    ## Why is this bad?
    Zero GPUs or a concurrency of a billion are mistakes, not plans.

    ## Example
    ```yaml
    serve:
      concurrency: 0
    ```

    ## Use instead
    ```yaml
    serve:
      concurrency: 1
    ```
    """
    yield from ()


@rule("GP104")
@documentation_only
def missing_key(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports each required key that a section lacks.

    ## Why is this bad?
    The estimate cannot guess the GPUs or the context a deployment needs.

    ## Example
    ```yaml
    serve:
      context: 8192
      concurrency: 8
    ```

    ## Use instead
    ```yaml
    serve:
      context: 8192
      concurrency: 8
      hardware: {gpu: l4}
    ```
    """
    yield from ()


@rule("GP105")
@documentation_only
def invalid_choice(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports a value that is not one of the allowed choices, lists them, and suggests the closest.

    ## Why is this bad?
    `method: qlroa` is not QLoRA; every choice changes the memory model.

    ## Example
    ```yaml
    finetune:
      method: qlroa
    ```

    ## Use instead
    ```yaml
    finetune:
      method: qlora
    ```
    """
    yield from ()


@rule("GP106")
@documentation_only
def invalid_value(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports empty names, dates not written as YYYY-MM-DD, lists with repeated items, and the like.

    ## Why is this bad?
    Such values cannot be compared (waiver expiry dates) or shown in a report.

    ## Example
    ```yaml
    waivers:
      - {rule: GP201, reason: accepted, expires: next week}
    ```

    ## Use instead
    ```yaml
    waivers:
      - {rule: GP201, reason: accepted, expires: 2027-01-31}
    ```
    """
    yield from ()


@rule("GP107")
@documentation_only
def ambiguous_choice(*_: Any) -> Iterator[Any]:
    """
    ## What it does
    Reports a model given by both `id` and `config` (or by neither), or a spec with neither
    `finetune` nor `serve`.

    ## Why is this bad?
    Two sources for one model leave it unclear which architecture is planned for.

    ## Example
    ```yaml
    model:
      id: llama-3.1-8b
      config: models/acme/config.json
    ```

    ## Use instead
    ```yaml
    model:
      config: models/acme/config.json
    ```
    """
    yield from ()
