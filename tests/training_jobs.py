"""Fine-tuning setups for the memory and speed tests, built from the one job record.

A job starts from what the resolver makes of a minimal spec (every setting the schema's default: bf16-mixed,
AdamW, LoRA rank 16 on every linear in fp32, micro-batch 1 x 2,048 tokens, no checkpointing, flash
attention, one GPU) and takes the settings a test names. The names are the job's fields, plus a few that
read better in a test: ``gpus``, ``tensor_parallel`` and ``pipeline_parallel`` (the job's hardware),
``checkpointing=True/False`` (full/none), ``lora_bytes`` (the adapters' dtype: 4 fp32, 2 bf16),
``model_dtype_bytes`` (the model's dtype) and, for a speed workload, ``total_tokens``, ``network_gbs``
(GB/s one direction), ``gpu`` and ``trainable_params``.
"""

from __future__ import annotations

import functools
from typing import Any

from conftest import make_spec

from gpuplan.architecture import Architecture
from gpuplan.catalog import Gpu
from gpuplan.estimate.training import TrainingSetup
from gpuplan.estimate.training_speed import TrainingWorkload
from gpuplan.records import evolve
from gpuplan.spec import Finetune

MINIMAL = "version: 1\nname: t\nmodel: {id: llama-3.1-8b}\nfinetune: {method: full, hardware: {gpu: h100-sxm}}\n"
LAYOUT = {"gpus": "count", "tensor_parallel": "tensor_parallel", "pipeline_parallel": "pipeline_parallel"}
LORA_DTYPES = {4: "fp32", 2: "bf16"}


@functools.cache
def default_job() -> Finetune:
    """The job the resolver makes of MINIMAL: the schema's defaults, nothing restated here."""
    spec = make_spec(MINIMAL)
    assert spec.finetune is not None
    return spec.finetune


def vary(setup: TrainingSetup, **changes: Any) -> TrainingSetup:
    """``setup`` with the named settings changed (see the module's docstring for the names)."""
    own = {name: changes.pop(name) for name in ("architecture", "model_dtype_bytes") if name in changes}
    hardware = {LAYOUT[name]: changes.pop(name) for name in list(changes) if name in LAYOUT}
    if isinstance(changes.get("checkpointing"), bool):
        changes["checkpointing"] = "full" if changes["checkpointing"] else "none"
    if "lora_bytes" in changes:
        changes["lora_dtype"] = LORA_DTYPES[changes.pop("lora_bytes")]
    if "lora_targets" in changes:
        changes["lora_targets"] = tuple(changes["lora_targets"])
    job = setup.job
    if hardware:
        job = evolve(job, hardware=evolve(job.hardware, **hardware))
    return evolve(setup, job=evolve(job, **changes), **own)


def training_setup(architecture: Architecture, **changes: Any) -> TrainingSetup:
    """The default job on ``architecture`` (a 16-bit model) with ``changes``."""
    return vary(TrainingSetup(architecture, default_job(), 2), **changes)


def vary_workload(workload: TrainingWorkload, **changes: Any) -> TrainingWorkload:
    """``workload`` with the named settings changed: its own (gpu, trainable_params), the run's
    (total_tokens, network_gbs) and any of the setup's."""
    own = {name: changes.pop(name) for name in ("gpu", "trainable_params") if name in changes}
    setup = workload.setup
    run: dict[str, Any] = {}
    if "total_tokens" in changes:
        run["tokens"] = changes.pop("total_tokens")
    if "network_gbs" in changes:
        setup = evolve(
            setup,
            job=evolve(setup.job, hardware=evolve(setup.job.hardware, network_gbps=changes.pop("network_gbs") * 8)),
        )
    setup = vary(setup, **changes)
    if run:
        setup = evolve(setup, job=evolve(setup.job, **run))
    return evolve(workload, setup=setup, **own)


def training_workload(
    architecture: Architecture, gpu: Gpu, trainable_params: int, total_tokens: int, **changes: Any
) -> TrainingWorkload:
    """The default job on ``architecture`` run on ``gpu`` for ``total_tokens`` tokens, with ``changes``."""
    base = TrainingWorkload(training_setup(architecture), gpu, trainable_params)
    return vary_workload(base, total_tokens=total_tokens, **changes)
