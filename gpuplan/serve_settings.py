"""The serving job's optional sections and engine-specific settings, checked as the spec is resolved
(``gpuplan.spec``): ``serve.lora``, ``serve.speculative`` with its draft model, and the memory settings
only one engine takes. Each problem is a finding at its setting, through the resolver's ``problem``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from gpuplan.catalog import UnknownNameError, get_model
from gpuplan.estimate.lora_serving import LoraSlots
from gpuplan.estimate.speculative import Speculation

if TYPE_CHECKING:
    from gpuplan.loader import Pointer
    from gpuplan.spec import ModelRef


class Problems(Protocol):
    """Where a resolver records a finding at a setting."""

    def problem(self, code: str, pointer: Pointer, message: str, hint: str = "") -> None: ...


def lora_section(resolver: Problems, data: dict[str, Any] | None) -> tuple[bool, LoraSlots | None]:
    """(no finding, ``serve.lora`` resolved or None when absent); a finding is GP027 at the setting."""
    if data is None:
        return True, None
    adapters = data["max_adapters"]
    cached = data.get("max_cpu_adapters", adapters)
    if cached < adapters:
        resolver.problem(
            "GP027",
            ("serve", "lora", "max_cpu_adapters"),
            f"serve.lora.max_cpu_adapters {cached:,} is below max_adapters {adapters:,}: the adapters on the GPU"
            " are cached on the host too (vLLM refuses max_cpu_loras < max_loras)",
            f"set max_cpu_adapters to at least {adapters:,}, or leave it out (it defaults to max_adapters)",
        )
        return False, None
    return True, LoraSlots(adapters, data["max_rank"], cached)


def speculative_section(
    resolver: Problems, data: dict[str, Any] | None, model: ModelRef | None
) -> tuple[bool, Speculation | None]:
    """(no finding, ``serve.speculative`` resolved with its draft model from the catalog, or None when
    absent); a finding is GP027 or GP020 at the setting."""
    if data is None:
        return True, None
    method, name = data["method"], data.get("draft_model")
    pointer = ("serve", "speculative")
    if method == "draft" and name is None:
        resolver.problem(
            "GP027",
            pointer + ("method",),
            "speculative method draft needs the draft model: serve.speculative.draft_model is missing",
            "add draft_model: <catalog id> (e.g. llama-3.2-1b for a Llama 3.1 model), or use method eagle or mtp",
        )
        return False, None
    if method != "draft" and name is not None:
        resolver.problem(
            "GP027",
            pointer + ("draft_model",),
            f"serve.speculative.draft_model is for method draft; method {method} drafts with "
            + ("an EAGLE head" if method == "eagle" else "the model's own MTP layer"),
            "remove draft_model, or set method: draft",
        )
        return False, None
    draft, label = None, ""
    if name is not None:
        try:
            entry = get_model(name)
        except UnknownNameError as error:
            resolver.problem("GP020", pointer + ("draft_model",), str(error), "`gpuplan catalog models` lists the ids")
            return False, None
        draft, label = entry.architecture, entry.id
        if model is not None and draft.vocab != model.architecture.vocab:
            resolver.problem(
                "GP027",
                pointer + ("draft_model",),
                f"draft model {entry.id} has a vocabulary of {draft.vocab:,} tokens and {model.label} one of"
                f" {model.architecture.vocab:,}: the model verifies the draft's token ids, so both need the same"
                " tokenizer",
                "choose a draft model of the same family (`gpuplan catalog models`)",
            )
            return False, None
    return True, Speculation(method, data["num_tokens"], data["acceptance_rate"], draft, label)


def engine_settings_valid(resolver: Problems, data: dict[str, Any]) -> bool:
    """Whether the memory settings are ones ``serve.engine`` takes (GP026 at the setting otherwise)."""
    engine = data["engine"]
    if "engine_version" in data and engine != "vllm":
        resolver.problem(
            "GP026",
            ("serve", "engine_version"),
            f"serve.engine_version names a vLLM release; serve.engine is {engine}, whose memory gpuplan models "
            "at one release",
            "set engine: vllm, or remove engine_version",
        )
        return False
    if "max_gpu_total_bytes" in data and engine != "trtllm":
        resolver.problem(
            "GP026",
            ("serve", "max_gpu_total_bytes"),
            f"serve.max_gpu_total_bytes is TensorRT-LLM's KV cache cap; serve.engine is {engine}",
            "set engine: trtllm, or remove max_gpu_total_bytes (memory_utilization is this engine's fraction)",
        )
        return False
    tokens, sequences = data.get("max_batched_tokens"), data.get("max_sequences")
    if engine == "vllm" and tokens is not None and sequences is not None and tokens < sequences:
        resolver.problem(
            "GP026",
            ("serve", "max_batched_tokens"),
            f"serve.max_batched_tokens ({tokens:,}) is below serve.max_sequences ({sequences:,}), which vLLM refuses"
            " at startup (vllm/config/scheduler.py SchedulerConfig: max_num_batched_tokens must be greater than or"
            " equal to max_num_seqs): every running sequence takes a token of each step",
            f"raise max_batched_tokens to {sequences:,} or more, or lower max_sequences to {tokens:,} or less",
        )
        return False
    if engine == "trtllm" and data.get("memory_utilization") == 1:
        resolver.problem(
            "GP026",
            ("serve", "memory_utilization"),
            "with engine: trtllm, serve.memory_utilization is free_gpu_memory_fraction, which TensorRT-LLM "
            "requires below 1 (kvCacheManager.cpp: freeMemFraction must be smaller than 1.0f)",
            "set memory_utilization below 1, e.g. 0.95",
        )
        return False
    return True
