"""Resolve a schema-valid document into a typed, frozen Spec: defaults applied, model and GPUs found.

Unknown model ids, unreadable config.json files and unknown GPUs are findings (GP020-GP024) at the
field that names them, with "did you mean" suggestions; nothing here raises for bad input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import Any

from gpuplan.architecture import Architecture, ArchitectureError, make_architecture
from gpuplan.budget import Budget, budget_from
from gpuplan.catalog import CatalogModel, Gpu, Price, UnknownNameError, custom_gpu, get_gpu, get_model
from gpuplan.conflicts import engine_refusal, finetune_conflicts, trains_checkpoint
from gpuplan.defaults import apply_defaults, property_node
from gpuplan.estimate.lora_serving import LoraSlots
from gpuplan.estimate.speculative import Speculation
from gpuplan.findings import Finding, Waiver, dotted, json_pointer
from gpuplan.layout import replicas
from gpuplan.loader import LoadedDocument, Pointer
from gpuplan.records import record
from gpuplan.serve_settings import engine_settings_valid, lora_section, speculative_section
from gpuplan.units import plural
from gpuplan.validate import load_schema

HOURS_PER_MONTH = 730  # 8,760 hours a year / 12, the convention of cloud monthly prices


def schema_default(*path: str) -> Any:
    """The schema's default of the property at ``path``: for records built without a spec's mapping (hardware's
    ``network_gbps``), and for a deployment without an SLO, which still names its ``ttft_statistic``."""
    return property_node(load_schema(), *path)["default"]


@record
class Hardware:
    gpu: Gpu
    count: int
    tensor_parallel: int
    pipeline_parallel: int
    expert_parallel: int = 1
    # Gb/s per GPU, inter-node
    network_gbps: float = field(default_factory=lambda: float(schema_default("finetune", "hardware", "network_gbps")))

    @property
    def network_gbs(self) -> float:
        """The inter-node bandwidth per GPU in GB/s one direction, as the speed models take it."""
        return self.network_gbps / 8

    @property
    def replicas(self) -> int:
        return replicas(self.count, self.tensor_parallel, self.pipeline_parallel)


@record
class ModelRef:
    label: str  # catalog id, config path or "explicit architecture"
    architecture: Architecture
    dtype: str
    source: str
    quantization: str = "none"  # of a pre-quantized checkpoint (config.json quantization_config)
    group_size: int = 128  # 0: one scale per output channel (GPTQ/AWQ group_size -1)
    quantized_params: int | None = None  # linear weights the checkpoint quantizes; None: every decoder linear
    notes: tuple[str, ...] = ()  # what was assumed reading a config.json (shown in the estimate's assumptions)
    context_source: str = ""  # where architecture.max_position, the longest context it takes, comes from
    classes: tuple[str, ...] = ()  # config.json architectures (vLLM picks its model runner by them); () explicit


def catalog_model(entry: CatalogModel, dtype: str) -> ModelRef:
    """The model a catalog entry names, served as its checkpoint stores it, in ``dtype``."""
    return ModelRef(
        entry.id,
        entry.architecture,
        dtype,
        entry.source,
        entry.quantization,
        entry.group_size,
        entry.quantized_params,
        context_source=entry.context_source,
        classes=entry.classes,
    )


@record
class Finetune:
    """A resolved fine-tuning job: the one record of its settings, every default the schema's (resolved
    here, never restated), read by the estimators, the planner and the rules. Every memory-saving setting
    is a plain field, so that the planner can vary it with ``evolve`` without touching the spec."""

    method: str
    precision: str
    optimizer: str
    lora_rank: int
    lora_targets: tuple[str, ...]
    lora_experts: str  # all | shared: which MLPs of a mixture-of-experts model the MLP targets adapt
    lora_dtype: str
    micro_batch: int
    gradient_accumulation: int
    seq_len: int
    checkpointing: str  # none | full | selective
    attention: str
    fused_loss: bool
    sharding: str
    fsdp_version: int  # 1 (FullyShardedDataParallel) | 2 (fully_shard), under sharding: fsdp
    fsdp_loading: str  # sharded | from-cpu | broadcast: how FSDP1 receives the model as it wraps it
    reduce_bucket_size: int | None  # DeepSpeed ZeRO's gradient bucket, elements; None: "auto" (hidden_size squared)
    overlap_comm: bool  # DeepSpeed ZeRO-1/2: two buckets through backward
    gradient_as_bucket_view: bool  # PyTorch DDP: the gradients are views into its buckets
    tokens: int | None
    checkpoint_every_hours: float | None
    checkpoint_keep: int | None
    checkpoint_storage_gb: float | None
    hardware: Hardware
    lora_variant: str  # lora | dora
    lora_dropout: float
    offload_optimizer: str  # none | cpu | nvme
    offload_parameters: str  # none | cpu | nvme
    optimizer_in_backward: bool
    activation_offloading: bool
    expandable_segments: bool  # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    sequence_parallel: bool
    autocast: bool  # under bf16-mixed / fp16-mixed only
    momentum: float  # sgd only; 0 keeps no momentum buffer
    loop: str  # manual (outputs held until the next forward returns) | after-step | trainer (released before backward)
    eval_micro_batch: int | None  # finetune.evaluation.micro_batch; None: no evaluation counted
    eval_seq_len: int | None  # finetune.evaluation.seq_len; None: the training seq_len
    eval_samples: int | None  # finetune.evaluation.samples: the evaluation set's sequences
    eval_predictions: str  # none | logits | argmax: what the Trainer keeps of each batch for compute_metrics
    eval_accumulation_steps: int | None  # eval_accumulation_steps; None: predictions kept to the evaluation's end
    use_cache: bool  # the model returns every layer's K and V with its output (Hugging Face config.use_cache)
    double_quant: bool  # qlora: NF4 scales double-quantized
    kbit_preparation: str  # qlora: none | peft | trl | axolotl (TrainingSetup.kbit_preparation: as a layout holds it)
    bitsandbytes_version: str | None  # qlora: the release; None: one from 0.43.2 on (TrainingSetup.nf4_saves_inputs)
    offload_host_gbs: float  # GB/s of host memory per node that offload streams at (offload.host_memory_gbs)
    offload_nvme_gbs: float  # GB/s of NVMe per node that offload swaps at (offload.nvme_gbs)
    framework: str  # eager | compiled | fused | megatron: the kernels a step runs between its GEMMs
    tf32: bool  # fp32 matmuls on TF32 tensor cores (else on the CUDA cores)


@record
class TenantSpec:
    name: str
    model: ModelRef
    context: int
    concurrency: int
    quantization: str


@record
class Evidence:
    category: str | None
    metric: str
    value: float
    source: str
    index: int


@record
class Serve:
    """A resolved serving deployment: the one record of its settings, every default the schema's (resolved
    here, never restated); None marks a setting the spec leaves to the engine or does not use."""

    context: int
    output_tokens: int
    concurrency: int
    quantization: str
    kv_cache_dtype: str
    memory_utilization: float | None  # the engine's memory fraction; None: the engine's default
    category: str | None
    ttft_ms: float | None
    tpot_ms: float | None
    tenants: tuple[TenantSpec, ...]
    evidence: tuple[Evidence, ...]
    hardware: Hardware
    engine: str
    batching: str
    prompt_mean: int | None  # None: every prompt is the full context - output_tokens
    prompt_p90: int | None
    output_p90: int | None  # None: every request generates output_tokens
    max_batched_tokens: int | None  # None: the engine's default for the GPU
    max_sequences: int | None
    arrival: str  # closed-loop | steady | burst (serve.arrival)
    rate_rps: float | None  # steady: requests per second over the deployment
    endpoint: str  # chat | completions | offline (serve.endpoint)
    ttft_statistic: str  # which TTFT serve.slo.ttft_ms bounds: p90 | median | mean
    max_gpu_total_bytes: int | None  # TensorRT-LLM KvCacheConfig.max_gpu_total_bytes
    lora: LoraSlots | None  # serve.lora: multi-LoRA serving; None without adapters
    speculation: Speculation | None  # serve.speculative; None without speculative decoding
    engine_version: str | None  # serve.engine_version: the vLLM release; None: the memory model's own

    @property
    def full_prompt(self) -> int:
        """The prompt of TTFT: the full context less the output."""
        return max(1, self.context - self.output_tokens)

    @property
    def mean_prompt(self) -> int:
        return self.prompt_mean or self.full_prompt

    @property
    def prompts_vary(self) -> bool:
        """Whether the stated prompts vary (serve.prompt_tokens with a p90 above its mean)."""
        return bool(self.prompt_mean and self.prompt_p90 and self.prompt_p90 > self.prompt_mean)

    @property
    def answer_room(self) -> int:
        """The longest answer the context holds beside the mean prompt: the cap of answers that vary."""
        return self.context - self.mean_prompt

    @property
    def has_latency_slo(self) -> bool:
        """Whether a TTFT or TPOT SLO bounds the deployment's latency (serve.slo)."""
        return self.ttft_ms is not None or self.tpot_ms is not None

    @property
    def quantizations(self) -> tuple[str, ...]:
        """The quantization of every model the engine loads: the model's, then each tenant's."""
        return (self.quantization, *(tenant.quantization for tenant in self.tenants))


@record
class Approval:
    """One role's signature in the decision record; ``date`` is empty when it is to be dated by hand."""

    name: str
    date: str


@record
class PlanLimits:
    """What the planner may propose (the spec's ``plan`` section, or ``gpuplan plan``'s options)."""

    gpus: tuple[str, ...]  # only these GPU ids; empty: every data-centre GPU of the catalog and the spec
    vendors: tuple[str, ...]  # only GPUs of these vendors (lower case); empty: any
    max_gpus: int
    max_nodes: int
    confidence: float  # a sound layout fits at its pessimistic memory edge and meets its SLO at its slow edge

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> PlanLimits:
        """From a validated ``plan`` mapping; absent keys take the schema's defaults."""
        data = apply_defaults({"plan": data}, load_schema())["plan"]
        return cls(
            tuple(data.get("gpu", ())),
            tuple(data.get("vendor", ())),
            data["max_gpus"],
            data["max_nodes"],
            float(data["confidence"]),
        )


def default_plan_limits() -> PlanLimits:
    return PlanLimits.from_data({})


@record
class Spec:
    path: str
    name: str
    owner: str
    description: str
    model: ModelRef
    finetune: Finetune | None
    serve: Serve | None
    budget: Budget
    waivers: tuple[Waiver, ...]
    approvals: dict[str, Approval]  # role (prepared_by, reviewed_by, approved_by) -> signer
    custom_gpus: dict[str, Gpu] = field(default_factory=dict)
    plan: PlanLimits = field(default_factory=default_plan_limits)

    def price(self, gpu: Gpu) -> tuple[float | None, str]:
        """(price per GPU-hour, where it comes from) for ``gpu`` in the spec's currency."""
        price, source, _ = self.priced(gpu, 1)
        return price, source

    def priced(self, gpu: Gpu, gpus: int) -> tuple[float | None, str, int]:
        """(price per GPU-hour, where it comes from, the GPUs paid for: whole instances under an
        instance-hour quote) for ``gpus`` GPUs of ``gpu``."""
        record = self.price_record(gpu)
        return (
            (None, "no price", gpus)
            if record is None
            else (record.per_hour, record.describe(), record.billed_gpus(gpus))
        )

    def price_record(self, gpu: Gpu) -> Price | None:
        """The price of ``gpu`` in the spec's currency with its provenance: a vendor's quote, else the spec's
        own price, else the catalog's (USD)."""
        quote = self.budget.quotes.get(gpu.id)
        if quote is not None:
            return Price(
                quote.per_gpu_hour,
                "budget.quotes",
                quoted_from=quote.date,
                quoted_to=quote.date,
                providers=(quote.provider,),
                instance_gpus=quote.instance_gpus or 0,
                instance_price=quote.price if quote.instance_gpus else None,
                reference=quote.reference,
            )
        if gpu.id in self.budget.prices:
            date = self.budget.prices_date
            return Price(self.budget.prices[gpu.id], "budget.prices", quoted_from=date, quoted_to=date)
        if gpu.price is not None and (gpu.custom or self.budget.currency == "USD"):
            return gpu.price
        return None


class _Resolver:
    def __init__(self, document: LoadedDocument, base_dir: Path | Callable[[], Path]) -> None:
        self.document = document
        self.base_dir = base_dir
        self.findings: list[Finding] = []
        self.architecture: Architecture | None = None  # of the spec's model, once resolved

    def problem(self, code: str, pointer: Pointer, message: str, hint: str = "") -> None:
        position = self.document.position(pointer)
        line, col = (
            (position.value_line, position.value_col)
            if position.value_line == position.line
            else (position.line, position.col)
        )
        self.findings.append(
            Finding.make(
                code, message, path=self.document.path, line=line, col=col, pointer=json_pointer(pointer), hint=hint
            )
        )

    def model(self, data: dict[str, Any], pointer: Pointer) -> ModelRef | None:
        dtype = data["dtype"]
        if "id" in data:
            try:
                entry = get_model(data["id"])
            except UnknownNameError as error:
                self.problem("GP020", pointer + ("id",), str(error), "`gpuplan catalog models` lists the ids")
                return None
            return catalog_model(entry, dtype)
        if "config" in data:
            from gpuplan.hf_config import read_hf_config, read_hf_model  # only for a model given by its config.json

            base = self.base_dir() if callable(self.base_dir) else self.base_dir
            path = base / data["config"]  # not resolved here: a symlink loop is the read's finding
            try:
                hf = read_hf_model(read_hf_config(path))
            except ArchitectureError as error:
                self.problem("GP021", pointer + ("config",), f"{data['config']}: {error}")
                return None
            checkpoint = hf.checkpoint
            return ModelRef(
                data["config"],
                hf.architecture,
                dtype,
                f"local config.json {data['config']} (model_type {hf.model_type or 'unknown'})",
                checkpoint.quantization,
                checkpoint.group_size,
                checkpoint.quantized_params,
                hf.notes,
                hf.context_source,
                hf.classes,
            )
        values = dict(data["architecture"])
        try:
            architecture = make_architecture(values)
        except ArchitectureError as error:
            field = (error.field,) if error.field in values else ()  # the field at fault, at its line
            self.problem("GP021", pointer + ("architecture", *field), f"model.architecture: {error}")
            return None
        return ModelRef(
            "explicit architecture",
            architecture,
            dtype,
            "dimensions given in the spec",
            context_source=dotted((*pointer, "architecture", "max_position")),
        )

    def hardware(self, data: dict[str, Any], pointer: Pointer, custom: dict[str, Gpu]) -> Hardware | None:
        try:
            gpu = get_gpu(data["gpu"], custom)
        except UnknownNameError as error:
            self.problem(
                "GP022",
                pointer + ("gpu",),
                str(error),
                "`gpuplan catalog gpus` lists the ids, or define it under gpus:",
            )
            return None
        count, tp, pp = data["count"], data["tensor_parallel"], data["pipeline_parallel"]
        if count % (tp * pp):
            self.problem(
                "GP023",
                pointer + ("count",),
                f"{plural(count, 'GPU')} is not a multiple of tensor_parallel x pipeline_parallel = {tp * pp}",
                f"use count: {replicas(count, tp, pp) * tp * pp}",
            )
            return None
        ep = data["expert_parallel"]
        if ep > 1 and (problem := self._expert_parallel_problem(ep, count, pointer)):
            self.problem("GP023", pointer + ("expert_parallel",), problem)
            return None
        return Hardware(gpu, count, tp, pp, ep, float(data["network_gbps"]))

    def _expert_parallel_problem(self, ep: int, count: int, pointer: Pointer) -> str:
        """Why ``expert_parallel`` cannot be laid out ('' when it can)."""
        if pointer[0] != "serve":
            return "expert_parallel is modelled for serving only (fine-tuning memory does not shard experts)"
        if count % ep:
            return f"expert_parallel {ep} does not divide the {count} GPUs"
        architecture = self.architecture
        if architecture is not None and not architecture.is_moe:
            return "expert_parallel needs a mixture-of-experts model"
        if architecture is not None and ep > architecture.experts:
            return f"expert_parallel {ep} exceeds the model's {architecture.experts} experts"
        return ""


def resolve(document: LoadedDocument, base_dir: Path | Callable[[], Path]) -> tuple[Spec | None, tuple[Finding, ...]]:
    """A Spec from a schema-valid document, or None with the findings that stopped it. ``base_dir``:
    where a relative `model.config` is read from, or a function giving it (called only for such a spec:
    finding the real folder of a spec costs a file-system walk)."""
    data = apply_defaults(document.data, load_schema())
    resolver = _Resolver(document, base_dir)
    custom = {gpu_id: custom_gpu(gpu_id, entry) for gpu_id, entry in data.get("gpus", {}).items()}
    model = resolver.model(data["model"], ("model",))
    resolver.architecture = model.architecture if model else None
    budget_data = data["budget"]
    priced: list[tuple[str, ...]] = [("prices",), ("quotes",), ("reserved", "prices"), ("purchase",)]
    for section in priced:
        entries: Any = budget_data
        for key in section:
            entries = entries.get(key, {})
        for gpu_id in entries:
            try:
                get_gpu(gpu_id, custom)
            except UnknownNameError as error:
                resolver.problem("GP022", ("budget", *section, gpu_id), f"budget.{'.'.join(section)}: {error}")
    plan_data = data["plan"]
    for index, gpu_id in enumerate(plan_data.get("gpu", [])):
        try:
            get_gpu(gpu_id, custom)
        except UnknownNameError as error:
            resolver.problem("GP022", ("plan", "gpu", index), f"plan.gpu: {error}")
    finetune = _finetune(resolver, data.get("finetune"), custom)
    if finetune is not None and model is not None and not trains_checkpoint(finetune.method, model.quantization):
        resolver.problem(
            "GP025",
            ("finetune", "method"),
            f"a full fine-tune trains the model's own weights, and this checkpoint stores them {model.quantization} "
            "(config.json's quantization_config): the Hugging Face Trainer refuses to train a quantized model "
            "without adapters",
            "method: lora on the quantized base (peft trains adapters over AWQ and GPTQ linears), or fine-tune the "
            "unquantized checkpoint",
        )
    serve = _serve(resolver, data.get("serve"), custom, model)
    if resolver.findings or model is None:
        return None, tuple(resolver.findings)
    budget = budget_from(budget_data)
    waivers = tuple(
        Waiver(w["rule"], w["reason"], w.get("approved_by", ""), w.get("expires", "")) for w in data.get("waivers", [])
    )
    spec = Spec(
        path=document.path,
        name=data["name"],
        owner=data.get("owner", ""),
        description=data.get("description", ""),
        model=model,
        finetune=finetune,
        serve=serve,
        budget=budget,
        waivers=waivers,
        approvals={
            role: Approval(entry["name"], entry.get("date", "")) for role, entry in data.get("approvals", {}).items()
        },
        custom_gpus=custom,
        plan=PlanLimits.from_data(plan_data),
    )
    return spec, ()


def _finetune(resolver: _Resolver, data: dict[str, Any] | None, custom: dict[str, Gpu]) -> Finetune | None:
    if data is None or (hardware := resolver.hardware(data["hardware"], ("finetune", "hardware"), custom)) is None:
        return None
    lora, offload, deepspeed, ddp = data["lora"], data["offload"], data["deepspeed"], data["ddp"]
    # An absent evaluation is none counted: its fields None (the schema's defaults apply where one is written).
    checkpoints, evaluation = data.get("checkpoints", {}), data.get("evaluation", {})
    job = Finetune(
        method=data["method"],
        precision=data["precision"],
        optimizer=data["optimizer"],
        lora_rank=lora["rank"],
        lora_targets=tuple(lora["targets"]),
        lora_experts=lora["experts"],
        lora_dtype=lora["dtype"],
        micro_batch=data["micro_batch"],
        gradient_accumulation=data["gradient_accumulation"],
        seq_len=data["seq_len"],
        checkpointing=CHECKPOINTING_ALIASES.get(data["activation_checkpointing"], data["activation_checkpointing"]),
        attention=data["attention"],
        fused_loss=data["fused_loss"],
        sharding=data["sharding"],
        fsdp_version=data["fsdp_version"],
        fsdp_loading=data["fsdp_loading"],
        reduce_bucket_size=None if deepspeed["reduce_bucket_size"] == "auto" else deepspeed["reduce_bucket_size"],
        overlap_comm=deepspeed["overlap_comm"],
        gradient_as_bucket_view=ddp["gradient_as_bucket_view"],
        tokens=data.get("tokens"),
        checkpoint_every_hours=checkpoints.get("every_hours"),
        checkpoint_keep=checkpoints.get("keep"),
        checkpoint_storage_gb=checkpoints.get("storage_gb"),
        hardware=hardware,
        lora_variant=lora["variant"],
        lora_dropout=float(lora["dropout"]),
        offload_optimizer=offload["optimizer"],
        offload_parameters=offload["parameters"],
        optimizer_in_backward=data["optimizer_in_backward"],
        activation_offloading=data["activation_offloading"],
        expandable_segments=data["expandable_segments"],
        sequence_parallel=data["sequence_parallel"],
        autocast=data["autocast"],
        momentum=float(data["momentum"]),
        loop=data["loop"],
        eval_micro_batch=evaluation.get("micro_batch"),
        eval_seq_len=evaluation.get("seq_len"),
        eval_samples=evaluation.get("samples"),
        eval_predictions=evaluation.get("predictions", "none"),
        eval_accumulation_steps=evaluation.get("accumulation_steps"),
        use_cache=data["use_cache"],
        double_quant=data["double_quant"],
        kbit_preparation=data["kbit_preparation"],
        bitsandbytes_version=data.get("bitsandbytes_version"),
        offload_host_gbs=float(offload["host_memory_gbs"]),
        offload_nvme_gbs=float(offload["nvme_gbs"]),
        framework=data["framework"],
        tf32=data["tf32"],
    )
    for pointer, message, hint in finetune_conflicts(job):
        resolver.problem("GP025", ("finetune", *pointer), message, hint)
    return job


# activation_checkpointing accepts the booleans of format version 1 as aliases.
CHECKPOINTING_ALIASES: dict[Any, str] = {True: "full", False: "none"}


def _output_spread_valid(resolver: _Resolver, data: dict[str, Any], prompts: dict[str, Any]) -> bool:
    """Whether ``serve.output_tokens_p90`` describes answers the context can hold: at least the mean, and
    room for the longer answers beside the mean prompt (without ``prompt_tokens`` every prompt is
    context - output_tokens, which leaves none); a GP024 at the field where not."""
    p90, output = data.get("output_tokens_p90"), data["output_tokens"]
    if p90 is None:
        return True
    where = ("serve", "output_tokens_p90")
    if p90 < output:
        resolver.problem(
            "GP024", where, f"serve.output_tokens_p90 must be at least output_tokens ({output:,}), got {p90:,}"
        )
        return False
    if p90 >= data["context"]:
        resolver.problem(
            "GP024",
            where,
            f"serve.output_tokens_p90 {p90:,} leaves no room in the context of {data['context']:,} tokens for a prompt",
            f"raise context above {p90:,}, or lower output_tokens_p90",
        )
        return False
    if p90 > output and not prompts:
        resolver.problem(
            "GP024",
            where,
            "serve.output_tokens_p90 needs serve.prompt_tokens: without it every prompt is context - output_tokens,"
            " which leaves no room for an answer longer than output_tokens",
            f"prompt_tokens: {{mean: {max(1, (data['context'] - p90) // 2)}}}",
        )
        return False
    room = data["context"] - prompts.get("mean", 0)
    if p90 > room:
        resolver.problem(
            "GP024",
            where,
            f"serve.output_tokens_p90 {p90:,} is more than the context leaves after the mean prompt"
            f" ({data['context']:,} - {prompts['mean']:,} = {room:,} tokens): one answer in ten would not fit",
            f"raise context to at least {prompts['mean'] + p90:,}, or lower output_tokens_p90",
        )
        return False
    return True


def _serve(
    resolver: _Resolver, data: dict[str, Any] | None, custom: dict[str, Gpu], model: ModelRef | None
) -> Serve | None:
    if data is None:
        return None
    hardware = resolver.hardware(data["hardware"], ("serve", "hardware"), custom)
    tenants = []
    # Each quantization the engine loads, and where the spec sets it (or names the model whose it is).
    served: list[tuple[str, Pointer]] = []
    for index, entry in enumerate(data.get("tenants", [])):
        tenant_model = resolver.model(entry["model"], ("serve", "tenants", index, "model"))
        if tenant_model is not None:
            setting = "quantization" if "quantization" in entry else "model"
            served.append((entry.get("quantization", tenant_model.quantization), ("serve", "tenants", index, setting)))
            tenants.append(
                TenantSpec(
                    entry["name"],
                    tenant_model,
                    entry.get("context", data["context"]),
                    entry["concurrency"],
                    entry.get("quantization", tenant_model.quantization),
                )
            )
    if data["output_tokens"] > data["context"]:
        resolver.problem(
            "GP024",
            ("serve", "output_tokens"),
            f"serve.output_tokens {data['output_tokens']:,} is larger than serve.context {data['context']:,}: "
            "the context holds the prompt and the output together",
            f"raise context to at least {data['output_tokens'] + 1:,}, or lower output_tokens",
        )
        return None
    if hardware is None:
        return None
    slo = data.get("slo", {})
    evidence = tuple(
        Evidence(item.get("category"), item["metric"], float(item["value"]), item.get("source", ""), index)
        for index, item in enumerate(data.get("evidence", []))
    )
    prompts = data.get("prompt_tokens", {})
    output_tokens = data["output_tokens"]
    if prompts and prompts.get("p90", prompts["mean"]) < prompts["mean"]:
        resolver.problem(
            "GP024",
            ("serve", "prompt_tokens", "p90"),
            f"serve.prompt_tokens.p90 must be at least the mean ({prompts['mean']:,}), got {prompts['p90']:,}",
        )
        return None
    if (data["arrival"] == "steady") != ("rate_rps" in data):
        if data["arrival"] == "steady":
            where, message, fix = (
                ("serve", "arrival"),
                "serve.arrival steady needs serve.rate_rps: the requests per second the stream brings",
                "rate_rps: 10",
            )
        else:
            where, message, fix = (
                ("serve", "rate_rps"),
                f"serve.rate_rps applies to a steady stream, but serve.arrival is {data['arrival']}",
                "arrival: steady",
            )
        resolver.problem("GP024", where, message, fix)
        return None
    if data["batching"] == "static" and data["arrival"] != "closed-loop":
        # Static batches form from the clients waiting at the declared concurrency; a Poisson stream's or a
        # burst's static batches are not modelled, and their figures must not pass for the closed loop's.
        resolver.problem(
            "GP024",
            ("serve", "batching"),
            f"serve.batching static is estimated for a closed loop of clients; serve.arrival {data['arrival']}"
            " under static batching is not modelled",
            "batching: continuous (what the serving engines run), or arrival: closed-loop",
        )
        return None
    if prompts and "p90" in prompts and prompts["p90"] > data["context"] - output_tokens:
        resolver.problem(
            "GP024",
            ("serve", "prompt_tokens", "p90"),
            f"serve.prompt_tokens.p90 {prompts['p90']:,} is more than the context leaves for a prompt"
            f" ({data['context']:,} - output_tokens {output_tokens:,} = {data['context'] - output_tokens:,}):"
            " one prompt in ten would not fit",
            f"raise context to at least {prompts['p90'] + output_tokens:,}, or lower prompt_tokens.p90",
        )
        return None
    if prompts and prompts["mean"] + output_tokens > data["context"]:
        resolver.problem(
            "GP024",
            ("serve", "prompt_tokens", "mean"),
            f"serve.prompt_tokens.mean {prompts['mean']:,} + output_tokens {output_tokens:,} exceeds the context"
            f" of {data['context']:,} tokens",
        )
        return None
    if not _output_spread_valid(resolver, data, prompts):
        return None
    if not engine_settings_valid(resolver, data):
        return None
    # A pre-quantized checkpoint is served as it is stored unless the spec says otherwise.
    quantization = data.get("quantization", model.quantization if model else "none")
    # The model's quantization and each tenant's: the engine loads them all on the same GPU.
    served.insert(
        0, (quantization, ("serve", "quantization") if "quantization" in data else ("serve", "hardware", "gpu"))
    )
    for served_quantization, pointer in served:
        refusal = engine_refusal(data["engine"], served_quantization, hardware.gpu)
        if refusal is not None:
            resolver.problem(
                "GP026",
                pointer,
                refusal,
                "choose a GPU of compute capability 8.0 or above (A10, L4, A100, H100 and later)",
            )
            return None
    lora_ok, lora = lora_section(resolver, data.get("lora"))
    speculation_ok, speculation = speculative_section(resolver, data.get("speculative"), model)
    if not (lora_ok and speculation_ok):
        return None
    return Serve(
        context=data["context"],
        output_tokens=data["output_tokens"],
        concurrency=data["concurrency"],
        quantization=quantization,
        kv_cache_dtype=data["kv_cache_dtype"],
        memory_utilization=data.get("memory_utilization"),
        category=data.get("category"),
        ttft_ms=slo.get("ttft_ms"),
        tpot_ms=slo.get("tpot_ms"),
        tenants=tuple(tenants),
        evidence=evidence,
        hardware=hardware,
        engine=data["engine"],
        batching=data["batching"],
        prompt_mean=prompts.get("mean"),
        prompt_p90=prompts.get("p90"),
        output_p90=data.get("output_tokens_p90"),
        max_batched_tokens=data.get("max_batched_tokens"),
        max_sequences=data.get("max_sequences"),
        arrival=data["arrival"],
        rate_rps=data.get("rate_rps"),
        endpoint=data["endpoint"],
        # the schema's default when there is no SLO for it to qualify (apply_defaults fills present sections)
        ttft_statistic=slo.get("ttft_statistic", schema_default("serve", "slo", "ttft_statistic")),
        max_gpu_total_bytes=data.get("max_gpu_total_bytes"),
        lora=lora,
        speculation=speculation,
        engine_version=data.get("engine_version"),
    )
