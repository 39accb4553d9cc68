"""Every setting reaches the estimate, or says why not (issue 31).

For every example (examples/*.yaml and examples/findings/*.yaml) and every field of the workload schema
reachable in that example's jobs, the field is set to another valid value, one field at a time, and the
spec is linted again. The field reaches when something a user reads changes: the estimate's figures
(``gpuplan estimate --format json`` without the words), the lint findings (code, severity, message,
pointer, waived), or for the ``plan`` section the planner's document (``gpuplan plan --format json``).
Otherwise the field must be in ``CHANGES_NOTHING`` with the reason, and when the reason holds only for
some jobs, with the condition under which it holds (outside it the field must reach).

Reachable: the sections the example has (a fine-tuning example's ``finetune``, not a ``serve`` it does not
have), every field under them present or not (an absent field takes another value than its default; an
absent object that needs siblings, such as ``budget.reserved``, is made with the fewest it needs, and its
fields are compared against the example with that object), the model as the example gives it (its
``id``, ``config`` or ``architecture``, and ``dtype``), every element of its arrays of objects (tenants,
evidence, waivers), and ``plan``, ``budget`` and ``approvals`` whether written or not. Values: enums take
each other value, booleans flip, numbers double, halve, step by one and go to their bounds (within the
schema's bounds), arrays of enums drop an element or take another list, catalog ids take other catalog
ids, dates another date, free text a longer text. A value is valid when the spec still resolves and no new
input or schema finding (GP0xx, GP1xx) appears; the first valid value that changes an output decides.
The ``version`` constant has no other value.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from conftest import EXAMPLES

from gpuplan.estimate import training_speed as training_speed_module
from gpuplan.estimate.calibration import CALIBRATION
from gpuplan.estimate.kernels import adapter_work
from gpuplan.estimate.performance import scale_up_size
from gpuplan.estimate.training import MIXED, holds_ddp_buckets
from gpuplan.linter import LintResult, lint_bytes
from gpuplan.loader import load_bytes
from gpuplan.output.estimate_json import estimate_document
from gpuplan.plan.document import plan_document
from gpuplan.rules.context import planner_for
from gpuplan.validate import load_schema

SPECS = sorted(EXAMPLES.glob("*.yaml")) + sorted((EXAMPLES / "findings").glob("*.yaml"))
MISSING = object()


class Why(NamedTuple):
    """Why a field changes nothing; ``when`` (the example's data and its analysis) limits it to some jobs."""

    reason: str
    when: Callable[[dict[str, Any], Any], bool] | None = None


def _finetune(analysis: Any) -> Any:
    return analysis.finetune.job if analysis.finetune is not None else None


def _offloaded(analysis: Any, *where: str) -> bool:
    job = _finetune(analysis)
    return job is not None and bool({job.offload_optimizer, job.offload_parameters} & set(where))


def _in_one_node(job: Any) -> bool:
    hardware = job.hardware
    return max(hardware.count, hardware.tensor_parallel * hardware.pipeline_parallel) <= scale_up_size(hardware.gpu)


def _holds_no_outputs(analysis: Any) -> bool:
    """The model hands the loop nothing it could hold: a fused loss materializes no logits, and no key and
    value states come back beyond those attention saves itself (use_cache: see ``_returns_no_extra_cache``)."""
    job = _finetune(analysis)
    return job.fused_loss and (not job.use_cache or _returns_no_extra_cache(analysis))


def _returns_no_extra_cache(analysis: Any) -> bool:
    """Without recompute a multi-head layer, or a GQA one under FlashAttention-3 or cuDNN (which take K and V
    unrepeated), saves the very key and value states a model returns under use_cache: they cost nothing more."""
    job, arch = _finetune(analysis), analysis.finetune.setup.architecture
    return job.checkpointing == "none" and (arch.n_kv == arch.heads or job.attention in ("flash3", "cudnn"))


def _no_fp32_gemm_time(analysis: Any) -> bool:
    """No fp32 matmul's time depends on its rate: the job is not fp32, and its adapters' GEMMs run in 16 bits
    or, in fp32, take longer to move their bytes than to compute at the CUDA-core rate."""
    f = analysis.finetune
    job, setup = f.job, f.setup
    if job.precision == "fp32":
        return False
    if job.method == "full" or setup.uses_autocast or setup.lora_bytes == 2:
        return True
    tokens = job.micro_batch * job.seq_len
    work = adapter_work(setup, job.framework, tokens, 1.0)
    rate = training_speed_module._adapter_rate(f.workload, CALIBRATION)
    return work.gemm_flops / rate <= work.gemm_bytes / (f.gpu.bandwidth * CALIBRATION.training.bandwidth_efficiency)


def _unpriced_run(analysis: Any) -> bool:
    return analysis.finetune is None or analysis.finetune.cost is None


def _own_prices_date_nothing(data: dict[str, Any], analysis: Any) -> bool:
    own = data.get("budget", {}).get("prices", {})
    return not any(estimate.gpu.id in own for estimate in (analysis.finetune, analysis.serve) if estimate)


def _speculative(data: dict[str, Any]) -> dict[str, Any]:
    """The example's serve.speculative as written (empty when it has none: the test seeds method eagle)."""
    return data.get("serve", {}).get("speculative", {})


REPORT_ONLY = "read by the report and the decision record only: no figure, finding or plan depends on it"
CHANGES_NOTHING: dict[str, Why] = {
    # Words and signatures for people.
    "owner": Why(REPORT_ONLY),
    "description": Why(REPORT_ONLY),
    "approvals": Why("the decision record's signatures (name, date), " + REPORT_ONLY),
    "waivers[].reason": Why("a waiver's justification: the report shows it; lint needs it present, not its words"),
    "waivers[].approved_by": Why("who approved a waiver: the report shows it; the waiver applies whoever signed"),
    "serve.evidence[].metric": Why(
        "measured figures offered as evidence: the report sets them beside the "
        "estimate; GP401 reads only each figure's category"
    ),
    "serve.evidence[].value": Why("as serve.evidence[].metric"),
    "serve.evidence[].source": Why("as serve.evidence[].metric"),
    # Money the report totals or compares, not the estimate or the rules.
    "budget.term_months": Why(
        "the report's and diff's totals over the term; estimates and rules are per month and per run"
    ),
    "budget.term_start": Why("the first day of the report's term (its dates); estimates and rules have no dates"),
    "budget.reserved": Why(
        "committed-use prices for the report's rent / reserve / buy table; estimates, rules "
        "and the planner price on-demand hours"
    ),
    "budget.purchase": Why("buying the GPUs, for the report's rent / reserve / buy table (as budget.reserved)"),
    "budget.finetune_total": Why(
        "checked against the run's cost (GP501): this spec has none (no fine-tuning "
        "job, no finetune.tokens or no price)",
        lambda d, a: _unpriced_run(a),
    ),
    "budget.serve_monthly": Why(
        "checked against the monthly cost (GP502): no serving job or no price",
        lambda d, a: a.serve is None or a.serve.monthly_cost is None,
    ),
    "budget.prices_date": Why(
        "dates the spec's own prices (GP504): no job's GPU is priced in budget.prices, "
        "the catalog's quotes carry their own dates",
        _own_prices_date_nothing,
    ),
    # The model as the job uses it.
    "model.dtype": Why(
        "the checkpoint's dtype: QLoRA stores the base in NF4 and its other modules in 16 bits whatever the "
        "checkpoint's dtype, and a quantized deployment with an explicit KV dtype stores neither in it",
        lambda d, a: (
            (a.finetune is None or a.finetune.job.method == "qlora")
            and (a.serve is None or (a.serve.job.quantization != "none" and a.serve.job.kv_cache_dtype != "auto"))
        ),
    ),
    # Fine-tuning settings that apply to some jobs only.
    "finetune.lora.alpha": Why(
        "scales the adapters' update (alpha / rank): no tensor's size, FLOPs or bytes depend on it"
    ),
    "finetune.lora.rank": Why("adapters only: a full fine-tune has none", lambda d, a: _finetune(a).method == "full"),
    "finetune.lora.targets": Why("as finetune.lora.rank", lambda d, a: _finetune(a).method == "full"),
    "finetune.lora.dtype": Why("as finetune.lora.rank", lambda d, a: _finetune(a).method == "full"),
    "finetune.lora.variant": Why(
        "dora applies to LoRA and QLoRA: GP025 rejects it on a full fine-tune",
        lambda d, a: _finetune(a).method == "full",
    ),
    "finetune.lora.experts": Why(
        "which experts' MLPs the adapters reach: a dense model has none, and a full fine-tune has no adapters",
        lambda d, a: _finetune(a).method == "full" or not a.spec.model.architecture.is_moe,
    ),
    "finetune.lora.dropout": Why(
        "the adapters' dropout masks are saved per layer: a full fine-tune has no adapters, and under full "
        "checkpointing only the layer being recomputed holds them, which is not these jobs' peak",
        lambda d, a: _finetune(a).method == "full" or _finetune(a).checkpointing == "full",
    ),
    "finetune.double_quant": Why("QLoRA's NF4 scales only", lambda d, a: _finetune(a).method != "qlora"),
    "finetune.bitsandbytes_version": Why(
        "QLoRA's 4-bit linears only; under full checkpointing only the layer being recomputed holds the inputs "
        "an older release saves, which is not these jobs' peak",
        lambda d, a: _finetune(a).method != "qlora" or _finetune(a).checkpointing == "full",
    ),
    "finetune.kbit_preparation": Why(
        "QLoRA's unquantized weights only; under FSDP or ZeRO-3 over several GPUs TRL and Axolotl skip their "
        "preparation (trl and axolotl are none there)",
        lambda d, a: _finetune(a).method != "qlora" or a.finetune.setup.kbit_preparation == "none",
    ),
    "finetune.tf32": Why(
        "TF32 moves fp32 matmuls onto the tensor cores: this job's precision is not fp32, and its adapters run "
        "under autocast, in 16 bits, or in fp32 GEMMs bound by their bytes even on the CUDA cores",
        lambda d, a: _no_fp32_gemm_time(a),
    ),
    "finetune.momentum": Why("SGD's only (momentum 0 keeps no buffer)", lambda d, a: _finetune(a).optimizer != "sgd"),
    "finetune.autocast": Why(
        "autocast casts fp32 weights to 16 bits: bf16 and fp32 precisions do not autocast, and a LoRA or "
        "QLoRA base already in 16 bits has nothing to cast",
        lambda d, a: (
            _finetune(a).precision not in MIXED
            or (_finetune(a).method != "full" and a.finetune.setup.model_dtype_bytes == 2)
        ),
    ),
    "finetune.optimizer_in_backward": Why(
        "GP025: no framework steps an offloaded optimizer in backward",
        lambda d, a: _finetune(a).offload_optimizer != "none",
    ),
    "finetune.sequence_parallel": Why(
        "splits activations over tensor-parallel ranks: GP025 rejects it at tensor_parallel 1",
        lambda d, a: _finetune(a).hardware.tensor_parallel == 1,
    ),
    "finetune.loop": Why(
        "when the loop releases the model's outputs: a fused loss returns no logits and these jobs return no "
        "key and value states beyond those attention saves",
        lambda d, a: _holds_no_outputs(a),
    ),
    "finetune.use_cache": Why(
        "the returned key and value states are the ones attention saves for backward: no recompute, and a "
        "multi-head layer or one whose kernel takes GQA unrepeated",
        lambda d, a: _returns_no_extra_cache(a),
    ),
    "finetune.sharding": Why(
        "FSDP shards over data-parallel ranks: over one rank gpuplan models it unsharded (DeepSpeed's ZeRO runs its "
        "optimizer there all the same, and changes the estimate)",
        lambda d, a: a.finetune.setup.data_parallel == 1,
    ),
    "finetune.fsdp_version": Why(
        "which FSDP shards the parameters: the job does not shard them with FSDP over several data-parallel ranks "
        "(or pipelines over them, which keeps a stage gathered either way)",
        lambda d, a: (
            _finetune(a).sharding != "fsdp"
            or a.finetune.setup.data_parallel == 1
            or _finetune(a).hardware.pipeline_parallel > 1
        ),
    ),
    "finetune.fsdp_loading": Why(
        "what FullyShardedDataParallel's wrap leaves in the allocator's cache: the job is not wrapped by FSDP1 over"
        " several data-parallel ranks (or pipelines over them)",
        lambda d, a: (
            _finetune(a).sharding != "fsdp"
            or _finetune(a).fsdp_version != 1
            or a.finetune.setup.data_parallel == 1
            or _finetune(a).hardware.pipeline_parallel > 1
        ),
    ),
    "finetune.deepspeed.reduce_bucket_size": Why(
        "the size of DeepSpeed ZeRO's gradient buckets: the job does not run DeepSpeed ZeRO (sharding zero1, zero2 "
        "or zero3 outside Megatron)",
        lambda d, a: _finetune(a).sharding not in ("zero1", "zero2", "zero3") or _finetune(a).framework == "megatron",
    ),
    "finetune.deepspeed.overlap_comm": Why(
        "the second bucket ZeRO-1 and ZeRO-2 keep through backward: the job runs neither (ZeRO-3 keeps one either way)",
        lambda d, a: _finetune(a).sharding not in ("zero1", "zero2") or _finetune(a).framework == "megatron",
    ),
    "finetune.ddp.gradient_as_bucket_view": Why(
        "where PyTorch DDP's gradients live: the job does not run DDP (sharding none over several GPUs, not Megatron)",
        lambda d, a: not holds_ddp_buckets(a.finetune.setup),
    ),
    "finetune.offload.host_memory_gbs": Why(
        "the host's bandwidth for what is offloaded: nothing is", lambda d, a: not _offloaded(a, "cpu", "nvme")
    ),
    "finetune.offload.nvme_gbs": Why(
        "NVMe's bandwidth for what is offloaded there: nothing is", lambda d, a: not _offloaded(a, "nvme")
    ),
    "finetune.checkpoints.every_hours": Why(
        "not modelled yet: the time each save takes (checkpoint_bytes over the storage's write bandwidth, "
        "every every_hours) is not added to the run; lint reads it only to silence GP602 on long runs",
        lambda d, a: True,
    ),
    "finetune.checkpoints.keep": Why(
        "checked against checkpoints.storage_gb (GP601): none is declared",
        lambda d, a: _finetune(a).checkpoint_storage_gb is None,
    ),
    "finetune.hardware.tensor_parallel": Why(
        "tensor x pipeline parallelism divides the GPU count: where the pipeline takes every GPU (one GPU, or count"
        " stages) no other degree is valid",
        lambda d, a: _finetune(a).hardware.count == _finetune(a).hardware.pipeline_parallel,
    ),
    "finetune.hardware.pipeline_parallel": Why(
        "as finetune.hardware.tensor_parallel; DeepSpeed's ZeRO-2 and ZeRO-3 do not pipeline (GP025)",
        lambda d, a: _finetune(a).hardware.count == 1 or _finetune(a).sharding in ("zero2", "zero3"),
    ),
    "finetune.hardware.expert_parallel": Why("serving only: a fine-tuning job rejects it (GP1xx)"),
    "finetune.hardware.network_gbps": Why(
        "bandwidth between nodes: the layout stays in one node", lambda d, a: _in_one_node(_finetune(a))
    ),
    # Serving settings that apply to some deployments only.
    "serve.hardware.tensor_parallel": Why(
        "degrees divide the GPU count: on one GPU no other is valid", lambda d, a: a.serve.job.hardware.count == 1
    ),
    "serve.hardware.pipeline_parallel": Why(
        "a replica needs tensor_parallel x pipeline_parallel GPUs: count leaves no room for a second stage",
        lambda d, a: a.serve.job.hardware.count < 2 * a.serve.job.hardware.tensor_parallel,
    ),
    "serve.hardware.expert_parallel": Why(
        "spreads routed experts: a dense model has none (rejected)", lambda d, a: not a.serve.setup.architecture.is_moe
    ),
    "serve.hardware.network_gbps": Why(
        "bandwidth between nodes: the deployment stays in one node", lambda d, a: _in_one_node(a.serve.job)
    ),
    "serve.prompt_tokens.mean": Why(
        "prompts shape the speed of a running engine: this one cannot start (it does not fit), so it has none",
        lambda d, a: not a.serve.loads,
    ),
    "serve.prompt_tokens.p90": Why(
        "as serve.prompt_tokens.mean; or a steady stream outruns the replica's server process: TTFT has no"
        " bound, and what the process serves follows the mean prompt, not its spread",
        lambda d, a: not a.serve.loads or (a.serve.speed.saturated and a.serve.speed.limited_by == "front-end"),
    ),
    "serve.output_tokens_p90": Why("as serve.prompt_tokens.mean", lambda d, a: not a.serve.loads),
    "serve.batching": Why(
        "as serve.prompt_tokens.mean; or serve.arrival is a steady stream or a burst, which static batching"
        " does not take (GP024: no other value)",
        lambda d, a: not a.serve.loads or d["serve"].get("arrival", "closed-loop") != "closed-loop",
    ),
    "serve.arrival": Why(
        "as serve.prompt_tokens.mean; or serve.rate_rps is set, which only a steady stream takes (no other value)",
        lambda d, a: not a.serve.loads or "rate_rps" in d["serve"],
    ),
    "serve.endpoint": Why("as serve.prompt_tokens.mean", lambda d, a: not a.serve.loads),
    "serve.slo.ttft_statistic": Why(
        "which TTFT the SLO bounds: the deployment meets it (or misses it) at every statistic, so no verdict moves",
        lambda d, a: _ttft_verdict_same_at_every_statistic(a),
    ),
    "serve.speculative.method": Why(
        "an EAGLE head and an MTP layer are both one decoder layer of a dense model's own dimensions (they differ"
        " where its layers are mixture-of-experts), and method draft needs serve.speculative.draft_model (GP027)",
        lambda d, a: not a.serve.setup.architecture.is_moe and "draft_model" not in _speculative(d),
    ),
    "serve.speculative.draft_model": Why(
        "the draft model of method draft only: GP027 rejects it with eagle or mtp",
        lambda d, a: _speculative(d).get("method", "eagle") != "draft",
    ),
    "serve.max_gpu_total_bytes": Why(
        "TensorRT-LLM's cap on its KV cache (KvCacheConfig.max_gpu_total_bytes): GP026 rejects it with another engine",
        lambda d, a: a.serve.job.engine != "trtllm",
    ),
    "serve.engine": Why(
        "with serve.engine_version set, vllm is the only engine the spec takes (GP026 rejects the others)",
        lambda d, a: "engine_version" in d["serve"],
    ),
    "serve.slo.ttft_ms": Why(
        "an engine that does not start has no latency for an SLO to bound (only the fit hint's search reads it)",
        lambda d, a: not a.serve.loads,
    ),
    "serve.slo.tpot_ms": Why(
        "an engine that does not start has no latency for an SLO to bound (only the fit hint's search reads it)",
        lambda d, a: not a.serve.loads,
    ),
    "serve.engine_version": Why(
        "a vLLM release: GP026 rejects it with another engine, whose memory gpuplan models at one release",
        lambda d, a: a.serve.job.engine != "vllm",
    ),
}


def _ttft_verdict_same_at_every_statistic(analysis: Any) -> bool:
    s = analysis.serve
    if s is None or s.job.ttft_ms is None or not s.loads:
        return True
    figures = (s.speed.ttft_s, s.speed.ttft_median_s, s.speed.ttft_p90_s)
    return len({figure * 1000 > s.job.ttft_ms for figure in figures}) == 1


# A field meaningful only beside a sibling's value: judged on the example with the sibling set and the
# field at a first value, against which its other values are compared.
COMPANIONS: dict[str, tuple[dict[str, Any], Any]] = {
    "serve.rate_rps": ({"arrival": "steady"}, 0.5),
    # answers that vary need room beside the mean prompt (GP024): a short mean prompt, the p90 at the mean first
    "serve.output_tokens_p90": ({"prompt_tokens": {"mean": 64}, "output_tokens": 100}, 100),
    # kept predictions are counted over the evaluation set: each of the three reads the other two
    "finetune.evaluation.samples": ({"predictions": "logits"}, 1),
    "finetune.evaluation.predictions": ({"samples": 1000}, "none"),
    "finetune.evaluation.accumulation_steps": ({"predictions": "logits", "samples": 1000}, 1),
}


# -- the fields of an example, and other values for them ----------------------------------------------------

SCHEMA = load_schema()
DEFINITIONS = SCHEMA["$defs"]
TEXT = ("name", "owner", "description", "reason", "approved_by", "source")
DATES = ("2026-03-02", "2025-07-15")
MODELS = ("llama-3.1-8b", "qwen2.5-7b", "llama-3.1-70b")
GPUS = ("h200-sxm", "a100-sxm-80gb", "l40s", "h100-sxm")
ALWAYS = ("plan", "budget", "approvals")  # sections reachable in every spec, written or not


def _node(node: dict[str, Any]) -> dict[str, Any]:
    return DEFINITIONS[node["$ref"].split("/")[-1]] if "$ref" in node else node


class Field(NamedTuple):
    path: tuple[Any, ...]  # keys and indexes into the spec's data
    key: str  # the schema's name: finetune.lora.rank, serve.tenants[].name, budget.prices.<key>
    node: dict[str, Any]
    value: Any  # MISSING when the example does not write it


def _seed(key: str, data: dict[str, Any]) -> Any:
    """The fewest fields an absent object needs, made up for this example (None: it needs none)."""
    gpu = next(data[job]["hardware"]["gpu"] for job in ("finetune", "serve") if job in data)
    seeds = {
        "serve.prompt_tokens": lambda: {"mean": max(1, data["serve"]["context"] // 4)},
        "serve.speculative": lambda: {"method": "eagle", "num_tokens": 3, "acceptance_rate": 0.7},
        "budget.prices": lambda: {gpu: 3.0},
        "budget.reserved": lambda: {"prices": {gpu: 2.0}},
        "budget.purchase": lambda: {gpu: {"price_per_gpu": 30000, "hosting_per_gpu_month": 500}},
    }
    if key.startswith("approvals."):
        return {"name": "A. Signer"}
    return seeds[key]() if key in seeds else None


def fields(
    node: dict[str, Any], data: Any, path: tuple[Any, ...], key: str, top: dict[str, Any], seeds: dict
) -> Iterator[Field]:
    """Every leaf reachable in ``data`` under ``node``; ``seeds`` collects the absent objects made."""
    node = _node(node)
    if "properties" in node:
        for name, sub in node["properties"].items():
            child = f"{key}.{name}" if key else name
            if not key and name not in data and name not in ALWAYS:
                continue  # a job or section the example does not have
            if key == "model" and name in ("id", "config", "architecture") and name not in data:
                continue  # the model is given one way
            sub = _node(sub)
            value = data.get(name, MISSING)
            if "properties" in sub or isinstance(sub.get("additionalProperties"), dict):
                if value is MISSING:
                    seed = _seed(child, top)
                    if seed is None and sub.get("required"):
                        continue
                    seeds[path + (name,)] = seed if seed is not None else {}
                    value = seeds[path + (name,)]
                yield from fields(sub, value, path + (name,), child, top, seeds)
            elif sub.get("type") == "array" and "properties" in _node(sub.get("items", {})):
                for index, item in enumerate(value if value is not MISSING else []):
                    yield from fields(sub["items"], item, path + (name, index), child + "[]", top, seeds)
            elif "const" not in sub:
                yield Field(path + (name,), child, sub, value)
    elif isinstance(node.get("additionalProperties"), dict):
        sub = _node(node["additionalProperties"])
        for name, value in data.items():
            if "properties" in sub:
                yield from fields(sub, value, path + (name,), f"{key}.<key>", top, seeds)
            else:
                yield Field(path + (name,), f"{key}.<key>", sub, value)


def _numbers(node: dict[str, Any], base: float | None) -> list[float]:
    exclusive = "exclusiveMinimum" in node
    low = node.get("minimum", node.get("exclusiveMinimum", 0))
    high = node.get("maximum", math.inf)
    integer = node.get("type") == "integer"
    ends = [low + (1 if integer else 1e-3) if exclusive else low] + ([high] if high != math.inf else [])
    if base is None:
        raw = [1000, 100, 10, *ends, 10000, 2, 0.5]
    else:
        raw = [base * 2, base / 2, base + 1, base - 1, *ends, (base + low) / 2]
        raw += [(base + high) / 2] if high != math.inf else []
    out: list[float] = []
    for x in raw:
        x = int(x) if integer else float(x)
        if (x > low if exclusive else x >= low) and x <= high and x != base and x not in out:
            out.append(x)
    return out


def values(field: Field, data: dict[str, Any]) -> list[Any]:
    """Other valid values for ``field``, the likeliest to matter first."""
    node, key = field.node, field.key
    current = field.value if field.value is not MISSING else node.get("default")
    if "enum" in node:
        return [e for e in node["enum"] if e != current and not isinstance(e, bool)]
    kind = node.get("type")
    if kind == "boolean":
        return [not current]
    if key == "serve.prompt_tokens.p90":
        mean = data["serve"].get("prompt_tokens", {}).get("mean") or max(1, data["serve"]["context"] // 4)
        return [min(2 * mean, data["serve"]["context"]), mean + 1]
    if kind in ("integer", "number"):
        return _numbers(node, current)
    if kind == "array":
        items = _node(node["items"])
        if "enum" in items:
            every = list(items["enum"])
            have = list(current or [])
            return [other for other in (have[:-1], every[:2], every[-1:]) if other and other != have]
        return [["h100-sxm"], ["b200-hgx"]]  # plan.gpu
    last = key.split(".")[-1]
    if node.get("format") == "date":
        return [d for d in DATES if d != current]
    if last in TEXT:
        return [f"{current or ''} (changed)"]
    if key.endswith("model.id"):
        return [m for m in MODELS if m != current]
    if key.endswith("hardware.gpu"):
        return [g for g in GPUS if g != current]
    if key == "budget.currency":
        return ["EUR"]
    if key == "serve.speculative.draft_model":
        return [m for m in ("llama-3.2-1b", "llama-3.2-3b") if m != current]
    if key == "serve.engine_version":  # a V0 release profiles other batches and sorts its sampler's logits
        return [v for v in ("0.6.4", "0.10.2") if v != current]
    if key == "finetune.bitsandbytes_version":  # before 0.43.2 each 4-bit linear saves its input
        return [v for v in ("0.41.1", "0.48.2") if v != current]
    if key == "waivers[].rule":
        return [r for r in ("GP507", "GP504") if r != current]
    if key == "finetune.deepspeed.reduce_bucket_size":  # elements, or the Hugging Face Trainer's "auto"
        return [v for v in ("auto", 0, 1_000_000_000) if v != current]
    if "oneOf" in node:
        return [v for v in ("all", "alternate", 2) if v != current]
    return []  # model.config: a path, another file; model.id varies the model


def _put(data: dict[str, Any], path: tuple[Any, ...], value: Any, seeds: dict) -> None:
    target = data
    for depth, step in enumerate(path[:-1]):
        if isinstance(target, dict) and step not in target:
            target[step] = copy.deepcopy(seeds.get(path[: depth + 1], {}))
        target = target[step]
    target[path[-1]] = value


# -- what a user reads ----------------------------------------------------------------------------------------


class Outcome(NamedTuple):
    result: LintResult
    figures: str | None
    findings: tuple[tuple[Any, ...], ...]

    def valid_beside(self, base: Outcome) -> bool:
        old = set(base.findings)
        return self.figures is not None and not any(
            f[0].startswith(("GP0", "GP1")) and f not in old for f in self.findings
        )

    def same(self, other: Outcome) -> bool:
        return (self.figures, self.findings) == (other.figures, other.findings)


def outcome(path: Path, data: dict[str, Any]) -> Outcome:
    result = lint_bytes(str(path), json.dumps(data).encode())
    findings = tuple(
        sorted((f.code, f.severity.value, f.message, f.pointer, f.waiver is not None) for f in result.findings)
    )
    figures = None if result.analysis is None else json.dumps(estimate_document(result.analysis, figures_only=True))
    return Outcome(result, figures, findings)


def plan_of(result: LintResult) -> str:
    spec = result.analysis.spec
    planner = planner_for(spec, result.settings, spec.plan)
    document = plan_document(planner, path="-", top=10, cheaper_share=result.settings.cheaper_layout_share)
    return json.dumps(document, sort_keys=True, default=str)


def why(key: str) -> Why | None:
    """The entry of ``key`` (an entry for a section names every field under it)."""
    for name, entry in CHANGES_NOTHING.items():
        if key == name or key.startswith(name + "."):
            return entry
    return None


@cache
def verdicts(path: Path) -> dict[tuple[Any, ...], tuple[str, str, Any]]:
    """(field path) -> (schema key, reaches | changes nothing | no valid value, the value that decided)."""
    top = load_bytes(str(path), path.read_bytes()).data
    base = outcome(path, top)
    assert base.figures is not None, f"{path.name} does not resolve"
    seeds: dict[tuple[Any, ...], Any] = {}
    found = list(fields({"properties": SCHEMA["properties"]}, top, (), "", top, seeds))
    made: dict[tuple[Any, ...], tuple[dict[str, Any], Outcome]] = {}  # the example with absent objects made
    out = {}
    for field in found:
        parents = tuple(p for p in seeds if field.path[: len(p)] == p)
        reference, reference_data = base, top
        if parents:
            if parents not in made:
                data = copy.deepcopy(top)
                for parent in sorted(parents, key=len):
                    _put(data, parent, copy.deepcopy(seeds[parent]), seeds)
                made[parents] = (data, outcome(path, data))
            reference_data, reference = made[parents]
        if field.key in COMPANIONS:
            siblings, first = COMPANIONS[field.key]
            reference_data = copy.deepcopy(reference_data)
            parent = reference_data
            for step in field.path[:-1]:
                parent = parent[step]
            parent.update(siblings)
            parent[field.path[-1]] = first
            reference = outcome(path, reference_data)
            field = field._replace(value=first)
        verdict, decided = "no valid value", None
        for value in values(field, top)[:8]:
            data = copy.deepcopy(reference_data)
            _put(data, field.path, value, seeds)
            new = outcome(path, data)
            if not new.valid_beside(reference):
                continue
            verdict, decided = "changes nothing", value
            changed = not new.same(reference)
            if not changed and field.key.startswith("plan."):
                changed = plan_of(new.result) != plan_of(reference.result)
            if changed:
                verdict = "reaches"
                break
        out[field.path] = (field.key, verdict, decided)
    return out


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_every_field_reaches_an_output_or_says_why_not(path: Path):
    top = load_bytes(str(path), path.read_bytes()).data
    analysis = outcome(path, top).result.analysis
    problems = []
    for field_path, (key, verdict, value) in verdicts(path).items():
        entry = why(key)
        where = ".".join(str(p) for p in field_path)
        if entry is None:
            if verdict != "reaches":
                problems.append(f"{where}: {verdict} (last value tried {value!r}); not in CHANGES_NOTHING")
        elif entry.when is None:
            if verdict == "reaches":
                problems.append(f"{where} reaches (with {value!r}): drop it from CHANGES_NOTHING")
        elif not entry.when(top, analysis) and verdict != "reaches":
            problems.append(f"{where}: {verdict}, yet CHANGES_NOTHING's condition does not hold here: {entry.reason}")
    assert not problems, "\n".join(problems)


def test_every_entry_names_a_field_some_example_has():
    seen = {key for path in SPECS for key, _, _ in verdicts(path).values()}
    stale = [name for name in CHANGES_NOTHING if not any(k == name or k.startswith(name + ".") for k in seen)]
    assert not stale, stale
    assert all(entry.reason for entry in CHANGES_NOTHING.values())
