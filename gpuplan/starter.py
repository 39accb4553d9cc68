"""``gpuplan init``: a commented starter spec from a few choices.

Every comment is the schema's own description of the field, and every optional field the starter leaves
out is shown commented with the schema's default, so the starter never restates a default in code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpuplan.catalog import UnknownNameError, get_gpu, get_model
from gpuplan.defaults import property_node
from gpuplan.errors import GpuplanError
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


@dataclass(frozen=True)
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


def starter_spec(starter: Starter) -> str:
    """The YAML text of a commented starter spec (valid against the schema)."""
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
    writer.note(f"gpuplan workload spec: {jobs} of {starter.model} on {starter.count} x {starter.gpu}.", 0)
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
        _finetune(writer, starter)
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


def _finetune(writer: _Writer, starter: Starter) -> None:
    assert starter.finetune is not None
    writer.field(("finetune",), section=True)
    writer.field(("finetune", "method"), starter.finetune)
    writer.field(("finetune", "precision"), default=True)
    writer.field(("finetune", "optimizer"), default=True)
    if starter.finetune != "full":
        rank = writer.schema.default("finetune", "lora", "rank")
        writer.placeholder(("finetune", "lora"), f"{{rank: {rank}}}", "the default rank")
    writer.field(("finetune", "micro_batch"), default=True)
    if starter.context in (None, writer.schema.default("finetune", "seq_len")):
        writer.field(("finetune", "seq_len"), default=True)
    else:
        writer.field(("finetune", "seq_len"), starter.context)
    writer.field(("finetune", "activation_checkpointing"), default=True)
    if starter.count > 1 and starter.finetune == "full":
        # Full fine-tuning over several GPUs shards weights, gradients and optimizer states (ZeRO-3);
        # adapters are small enough for plain data parallelism.
        writer.field(("finetune", "sharding"), "zero3")
    else:
        writer.field(("finetune", "sharding"), default=True)
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
