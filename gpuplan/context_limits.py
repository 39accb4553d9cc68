"""The longest context a model takes, and the jobs of a spec that ask for more (GP206, GP207).

A model's limit is its architecture's ``max_position``: the catalog's (copied from the model's released
config.json), a config.json's as vLLM derives it (``gpuplan.hf_context.context_limit``: the length keys,
then RoPE scaling), or an explicit architecture's. 0 is no known limit, and then nothing is reported.

Serving beyond the limit cannot start: vLLM refuses a ``--max-model-len`` above the length it derives
(``_get_and_verify_max_len`` raises unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``, and then "positions
exceeding derived_max_model_len lead to nan" with RoPE, "a CUDA array out-of-bounds error" with absolute
positions). Fine-tuning beyond it runs with RoPE (Transformers computes rotary angles for any position; it
only trains on positions the model never saw, which is also how contexts are extended on purpose), but not
with a learned position table (GPT-2, GPT-BigCode: the embedding lookup of a position past the table is
an index error). The first two cannot run (GP206), the last one runs outside the trained range (GP207).
"""

from __future__ import annotations

from gpuplan.architecture import Architecture
from gpuplan.loader import Pointer
from gpuplan.records import record
from gpuplan.spec import ModelRef, Spec


@record
class Overrun:
    """A job that asks one model for a longer context than the model takes."""

    kind: str  # serve | finetune
    field: str  # the spec field that asks: serve.context, serve.tenants[0].context, finetune.seq_len
    pointer: Pointer
    tokens: int
    model: ModelRef
    tenant: str = ""  # the tenant's name when the model is a tenant's

    @property
    def limit(self) -> int:
        return self.model.architecture.max_position

    @property
    def fatal(self) -> bool:
        """Whether the job cannot run at all (GP206): any serving, or fine-tuning over learned positions."""
        return self.kind == "serve" or self.model.architecture.position_embeddings > 0

    @property
    def whose(self) -> str:
        """The model as the messages name it: ``llama-2-7b``, ``the model of models/acme/config.json``,
        ``the explicit architecture``, ``tenant 'ops''s model qwen2.5-7b``."""
        label = self.model.label
        if label == "explicit architecture":
            noun, plain = "explicit architecture", "the explicit architecture"
        elif self.model.context_source.startswith("config.json"):
            noun, plain = f"model of {label}", f"the model of {label}"
        else:
            noun, plain = f"model {label}", label
        return f"tenant {self.tenant!r}'s {noun}" if self.tenant else plain

    @property
    def source(self) -> str:
        """Where the model's maximum comes from (the catalog's config.json, a config.json's keys, the spec)."""
        return self.model.context_source or self.model.source

    def sentence(self) -> str:
        """``serve.context 16,384 is more than llama-2-7b takes: at most 4,096 tokens (where from)``."""
        return (
            f"{self.field} {self.tokens:,} is more than {self.whose} takes: "
            f"at most {self.limit:,} tokens ({self.source})"
        )


def beyond_model(architecture: Architecture, tokens: int) -> bool:
    """Whether ``tokens`` is a longer context than ``architecture`` takes (0: no known limit)."""
    limit = architecture.max_position
    return limit > 0 and tokens > limit


def _over(model: ModelRef, tokens: int) -> bool:
    return beyond_model(model.architecture, tokens)


def overruns(spec: Spec) -> tuple[Overrun, ...]:
    """Every context of the spec longer than its model takes: serving (the deployment's and each tenant's,
    at the tenant's own field; a tenant that declares none takes the deployment's) and fine-tuning."""
    found: list[Overrun] = []
    if spec.serve is not None:
        job = spec.serve
        if _over(spec.model, job.context):
            found.append(Overrun("serve", "serve.context", ("serve", "context"), job.context, spec.model))
        for index, tenant in enumerate(job.tenants):
            if _over(tenant.model, tenant.context):
                pointer: Pointer = ("serve", "tenants", index, "context")
                field = f"serve.tenants[{index}].context"
                found.append(Overrun("serve", field, pointer, tenant.context, tenant.model, tenant.name))
    if spec.finetune is not None and _over(spec.model, spec.finetune.seq_len):
        seq_len = spec.finetune.seq_len
        found.append(Overrun("finetune", "finetune.seq_len", ("finetune", "seq_len"), seq_len, spec.model))
    return tuple(found)


def context_problem(spec: Spec, kind: str) -> str | None:
    """Why no layout of the job ``kind`` can run, when a context it asks for is more than its model takes
    (the planner's reason for proposing no layout); None when every context fits its model."""
    fatal = [overrun for overrun in overruns(spec) if overrun.kind == kind and overrun.fatal]
    return "; ".join(overrun.sentence() for overrun in fatal) or None
