"""``gpuplan init``: a commented starter spec from a few choices.

Every comment is the schema's own description of the field, and every optional field the starter leaves
out is shown commented with the schema's default, so the starter never restates a default in code.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import field
from pathlib import Path
from typing import Any

from gpuplan.catalog import UnknownNameError, get_gpu, get_model
from gpuplan.conflicts import BF16_PRECISIONS
from gpuplan.defaults import property_node
from gpuplan.errors import GpuplanError
from gpuplan.records import record
from gpuplan.validate import load_schema
from gpuplan.visible import visible

METHODS = ("full", "lora", "qlora")
# Starting values for the prompts and flags (a starter, not a recommendation): a chat-sized context, a
# few sequences in flight, a mid-sized model on the most common data-centre GPU.
STARTER_MODEL = "llama-3.1-8b"
STARTER_GPU = "h100-sxm"
STARTER_CONTEXT = 8192
STARTER_CONCURRENCY = 8
_COMMENT_WIDTH = 100


# "8k" and "32K" as people write context lengths: 8 x 1,024 tokens (Llama's "8K context" is 8,192).
TOKEN_UNITS = {"": 1, "k": 1024, "m": 1024**2}


def catalog_model_id(text: str) -> str:
    """The catalog id of the model ``text`` names: a catalog id or a Hugging Face repo id, in any case
    (``get_model``'s reading, as a spec's model.id has it)."""
    return get_model(text.strip()).id


def token_count(text: str) -> int:
    """A token count as people write it: 8192, 8,192, 8k (8,192), 32K, 1M (1,048,576). ValueError for
    anything else, or for a count below one token."""
    found = re.fullmatch(r"\s*([0-9][0-9_,]*(?:\.[0-9]+)?)\s*([kKmM]?)\s*", text)
    if found is None:
        raise ValueError(f"{text!r} is not a token count (for example 8192 or 8k)")
    number, unit = float(found.group(1).replace(",", "").replace("_", "")), found.group(2).lower()
    tokens = number * TOKEN_UNITS[unit]
    if tokens < 1 or tokens != int(tokens):
        raise ValueError(f"{text!r} is not a whole number of tokens of at least 1")
    return int(tokens)


@record
class Starter:
    """What a starter spec is made from."""

    model: str
    gpu: str
    serve: bool = False
    finetune: str | None = None  # full | lora | qlora
    count: int = 1
    context: int | None = None  # serving context; the fine-tuning sequence length
    concurrency: int = STARTER_CONCURRENCY
    name: str | None = None

    def check(self) -> None:
        """Raise GpuplanError for choices no spec could hold (unknown names, no job, bad numbers)."""
        if not self.serve and not self.finetune:
            raise GpuplanError("choose a job: --serve, --finetune METHOD, or both")
        if self.finetune is not None and self.finetune not in METHODS:
            raise GpuplanError(f"unknown fine-tuning method {self.finetune!r}; choose {', '.join(METHODS)}")
        try:
            get_model(self.model)
            get_gpu(self.gpu)
        except UnknownNameError as error:
            raise GpuplanError(f"{error}; `gpuplan catalog {error.kind.lower()}s` lists them") from None
        if self.name is not None:
            try:
                self.name.encode("utf-8")
            except UnicodeEncodeError:  # bytes that were not UTF-8 on the command line
                raise GpuplanError("--name is not valid UTF-8 text") from None
        for label, value in (("--count", self.count), ("--context", self.context), ("--concurrency", self.concurrency)):
            if value is not None and value < 1:
                raise GpuplanError(f"{label} must be at least 1, got {value}")

    @property
    def spec_name(self) -> str:
        if self.name:
            return self.name
        jobs = [f"{self.finetune}-finetune"] if self.finetune else []
        jobs += ["serve"] if self.serve else []
        return re.sub(r"[^a-z0-9]+", "-", f"{self.model}-{'-'.join(jobs)}".lower()).strip("-")


@record
class Tuning:
    """What the planner made of a starter's fine-tuning job on the GPUs asked for, when its defaults do not
    hold it soundly (in memory, with the configured headroom margin)."""

    problem: str  # why the defaults do not do, in the planner's words
    values: dict[str, Any] = field(default_factory=dict)  # finetune field -> the value that holds the job
    fewest: str = ""  # no settings hold it on the GPUs asked for: the fewest GPUs that do ("" if none)
    headroom_pct: float = 0.0
    confidence: float = 0.0  # plan.confidence: the memory figure judged is the band's edge at it

    def note(self, starter: Starter) -> str:
        """The starter's comment (and, shortened, its message): what was set and why, or that nothing fits."""
        gpus = f"{starter.count:,} x {starter.gpu}"
        soundly = (
            f"with a {self.headroom_pct:g}% headroom margin at {self.confidence:.0%} confidence in the memory estimate"
        )
        if self.values:
            chosen = ", ".join(f"{name} to {_scalar(value)}" for name, value in self.values.items())
            return (
                f"set {chosen}: with the starter's defaults the job {self.problem}. These are the "
                f"fewest settings changes that hold it on {gpus} {soundly} "
                f"(the planner's search, as `gpuplan plan` runs it)."
            )
        fewest = (
            f"the fewest GPUs that do: {self.fewest} (`gpuplan plan` shows the settings)"
            if self.fewest
            else "nor does any layout of this GPU within the planner's limits (`gpuplan plan` searches other GPUs)"
        )
        return (
            f"no settings hold this job on {gpus} {soundly}: "
            f"with the starter's defaults the job {self.problem}; {fewest}."
        )


def fitted_starter(starter: Starter) -> tuple[str, str]:
    """The starter spec with its fine-tuning settings chosen to hold the job on the GPUs asked for, where
    some do, and a note of what was set or that nothing fits ("" when the defaults do)."""
    text = starter_spec(starter)
    if not starter.finetune:
        return text, ""
    tuning = _tuning(text)
    if tuning is None:
        return text, ""
    return starter_spec(starter, tuning), tuning.note(starter)


def _tuning(text: str) -> Tuning | None:
    """The planner's answer for the starter's fine-tuning job (None when its defaults are sound): the
    fewest settings changes at the requested GPU kind and count (JobPlanner.settings_for_declared_shape),
    else the fewest GPUs of that kind that hold it (JobPlanner.fewest_gpus_on)."""
    from gpuplan.config import default_settings
    from gpuplan.loader import load_bytes
    from gpuplan.plan.configured import planner_for
    from gpuplan.spec import resolve

    spec, _ = resolve(load_bytes("starter.yaml", text.encode()), Path("."))
    if spec is None:  # refused as it resolves (a serving engine that cannot load the model on the GPU: GP026):
        return None  # written untuned, and the lint after it says why
    settings = default_settings()
    planner = planner_for(spec, settings).finetune
    assert planner is not None
    declared = planner.declared()
    if declared.sound:
        return None
    problem = _problem_words(declared.reasons)
    option = planner.settings_for_declared_shape()
    if option is not None:
        before, after = declared.layout.settings, option.layout.settings
        assert before is not None and after is not None
        values = {
            name: getattr(after, name)
            for name in (f.name for f in dataclasses.fields(after))
            if getattr(after, name) != getattr(before, name)
        }
        return Tuning(problem, values, headroom_pct=settings.headroom_pct, confidence=spec.plan.confidence)
    fewest = planner.fewest_gpus_on(declared.layout.gpu)
    return Tuning(
        problem,
        fewest=fewest.layout.describe() if fewest is not None else "",
        headroom_pct=settings.headroom_pct,
        confidence=spec.plan.confidence,
    )


def _problem_words(reasons: tuple[str, ...]) -> str:
    """The planner's reasons against the starter's layout as words that follow "the job": its memory first (they
    read "needs 149.3 GiB per GPU; h100-pcie has 79.2 GiB usable"), then any other ("100 GPUs exceed max_gpus 64")."""
    needs = [reason for reason in reasons if reason.startswith("needs")]
    others = "; ".join(reason for reason in reasons if not reason.startswith("needs"))
    if not needs:
        return f"is not sound: {others}"
    return "; ".join(needs) + (f"; and {others}" if others else "")


def starter_seq_len() -> int:
    """The fine-tuning sequence length a starter uses: the schema's default."""
    return int(_Schema().default("finetune", "seq_len"))


class _Schema:
    """Descriptions and defaults of spec fields, by path, from schemas/workload.schema.json."""

    def __init__(self) -> None:
        self.schema = load_schema()

    def node(self, *path: str) -> dict[str, Any]:
        return property_node(self.schema, *path)

    def description(self, *path: str) -> str:
        return str(self.node(*path).get("description", ""))

    def default(self, *path: str) -> Any:
        return self.node(*path)["default"]


def _comment(text: str, indent: str) -> Iterator[str]:
    """``text`` as YAML comment lines under ``_COMMENT_WIDTH`` characters."""
    line = ""
    for word in text.split():
        if line and len(indent) + 2 + len(line) + 1 + len(word) > _COMMENT_WIDTH:
            yield f"{indent}# {line}"
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        yield f"{indent}# {line}"


# A string written plain only when YAML reads it back as that same string: no indicator or comment character,
# not a number, and none of the words YAML 1.1 resolves to a boolean or null.
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-/]*")
_RESOLVED_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "y", "n", "null", "nan", "inf"})


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str) and (not _PLAIN.fullmatch(value) or value.lower() in _RESOLVED_WORDS):
        # A JSON string is a YAML double-quoted scalar: json escapes C0 controls, quotes and backslashes, and
        # visible() the rest (DEL, C1, line separators, bidi overrides) with escapes YAML reads back.
        return visible(json.dumps(value, ensure_ascii=False))
    return str(value)


class _Writer:
    def __init__(self, schema: _Schema) -> None:
        self.schema = schema
        self.lines: list[str] = []

    def field(self, path: tuple[str, ...], value: Any = None, *, default: bool = False, section: bool = False) -> None:
        """One field with its description above it: a value, a section header, or its default commented out."""
        indent = "  " * (len(path) - 1)
        self.lines.extend(_comment(self.schema.description(*path), indent))
        key = path[-1]
        if section:
            self.lines.append(f"{indent}{key}:")
        elif default:
            self.lines.append(f"{indent}# {key}: {_scalar(self.schema.default(*path))}   (the default)")
        else:
            self.lines.append(f"{indent}{key}: {_scalar(value)}")

    def placeholder(self, path: tuple[str, ...], example: str, why: str) -> None:
        """An optional field without a default, commented out: what to write and what it brings."""
        indent = "  " * (len(path) - 1)
        self.lines.extend(_comment(self.schema.description(*path), indent))
        self.lines.append(f"{indent}# {path[-1]}: {example}   ({why})")

    def note(self, text: str, depth: int) -> None:
        self.lines.extend(_comment(text, "  " * depth))

    def blank(self) -> None:
        self.lines.append("")


def starter_spec(starter: Starter, tuning: Tuning | None = None) -> str:
    """The YAML text of a commented starter spec (valid against the schema); ``tuning``: the fine-tuning
    settings the planner chose (``fitted_starter``), written with a note of why."""
    starter.check()
    writer = _Writer(_Schema())
    jobs = " then ".join(
        part
        for part in (
            f"{starter.finetune} fine-tuning" if starter.finetune else "",
            "serving" if starter.serve else "",
        )
        if part
    )
    writer.note(f"gpuplan workload spec: {jobs} of {starter.model} on {starter.count:,} x {starter.gpu}.", 0)
    writer.note(
        "Check it with `gpuplan lint`, see the estimate with `gpuplan estimate`; `gpuplan explain CODE` explains "
        "a finding and `gpuplan schema --markdown` lists every field.",
        0,
    )
    writer.blank()
    writer.field(("version",), 1)
    writer.field(("name",), starter.spec_name)
    writer.blank()
    writer.field(("model",), section=True)
    writer.field(("model", "id"), starter.model)
    writer.field(("model", "dtype"), default=True)
    if starter.finetune:
        writer.blank()
        _finetune(writer, starter, tuning)
    if starter.serve:
        writer.blank()
        _serve(writer, starter)
    writer.blank()
    writer.field(("budget",), section=True)
    writer.field(("budget", "currency"), writer.schema.default("budget", "currency"))
    if starter.finetune:
        writer.placeholder(("budget", "finetune_total"), "...", "the lint then checks the run's cost against it")
    if starter.serve:
        writer.placeholder(("budget", "serve_monthly"), "...", "the lint then checks the monthly cost against it")
    return "\n".join(writer.lines) + "\n"


def _hardware(writer: _Writer, job: str, starter: Starter, tensor_parallel: int) -> None:
    writer.field((job, "hardware"), section=True)
    writer.field((job, "hardware", "gpu"), starter.gpu)
    writer.field((job, "hardware", "count"), starter.count)
    writer.field((job, "hardware", "tensor_parallel"), tensor_parallel)


def _finetune(writer: _Writer, starter: Starter, tuning: Tuning | None) -> None:
    assert starter.finetune is not None
    chosen = tuning.values if tuning is not None else {}

    def setting(name: str, value: Any = None, *, default: bool = True) -> None:
        """A setting the planner may have chosen: its value then, else as the starter writes it."""
        if name in chosen:
            writer.field(("finetune", name), chosen[name])
        elif default:
            writer.field(("finetune", name), default=True)
        else:
            writer.field(("finetune", name), value)

    writer.field(("finetune",), section=True)
    if tuning is not None:
        writer.note(f"gpuplan init: {tuning.note(starter)}", 1)
    writer.field(("finetune", "method"), starter.finetune)
    precision = writer.schema.default("finetune", "precision")
    if precision in BF16_PRECISIONS and not get_gpu(starter.gpu).has_bf16:  # the default would be GP025 there
        writer.note(f"gpuplan init: {starter.gpu} has no bf16 tensor cores: 16-bit training runs in fp16 there", 1)
        writer.field(("finetune", "precision"), "fp16-mixed")
    else:
        writer.field(("finetune", "precision"), default=True)
    writer.field(("finetune", "optimizer"), default=True)
    if starter.finetune != "full":
        rank = writer.schema.default("finetune", "lora", "rank")
        writer.placeholder(("finetune", "lora"), f"{{rank: {rank}}}", "the default rank")
    setting("micro_batch")
    if "gradient_accumulation" in chosen:  # the planner keeps the global batch when it moves the micro-batch
        setting("gradient_accumulation")
    if starter.context in (None, writer.schema.default("finetune", "seq_len")):
        writer.field(("finetune", "seq_len"), default=True)
    else:
        writer.field(("finetune", "seq_len"), starter.context)
    setting("activation_checkpointing")
    if "fused_loss" in chosen:
        setting("fused_loss")
    # Full fine-tuning over several GPUs shards weights, gradients and optimizer states (ZeRO-3);
    # adapters are small enough for plain data parallelism.
    setting("sharding", "zero3", default=not (starter.count > 1 and starter.finetune == "full"))
    writer.placeholder(("finetune", "tokens"), "...", "set it to get the training time and the cost of the run")
    _hardware(writer, "finetune", starter, 1)


def _serve(writer: _Writer, starter: Starter) -> None:
    writer.field(("serve",), section=True)
    writer.field(("serve", "context"), starter.context or STARTER_CONTEXT)
    writer.field(("serve", "output_tokens"), default=True)
    writer.field(("serve", "concurrency"), starter.concurrency)
    writer.field(("serve", "kv_cache_dtype"), default=True)
    writer.placeholder(("serve", "slo"), "{ttft_ms: ..., tpot_ms: ...}", "the lint then checks the estimated latency")
    # One replica spanning every GPU: tensor parallelism over all of them.
    _hardware(writer, "serve", starter, starter.count)
