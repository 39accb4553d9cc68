"""Did the run use the spec's settings? Each difference is GP802 at the spec's field, checked first.

A run with other settings still tests the estimator: the estimate is recomputed with the run's
settings (``as_run``) and the terms are compared with that, so a TP 2 log verifies a TP 2 estimate
even when the spec says TP 4. A setting the spec cannot express (a quantization scheme it has no
name for) leaves the terms uncompared.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuplan.analysis import memory_fraction
from gpuplan.catalog import UnknownNameError, get_model
from gpuplan.estimate.engines import fraction_name
from gpuplan.estimate.vllm_releases import DEFAULT_VERSION, sizing_line
from gpuplan.evidence.model import GPU_AT_LEAST, GPU_TOTAL, Evidence, Setting
from gpuplan.findings import dotted
from gpuplan.loader import Pointer
from gpuplan.records import record
from gpuplan.spec import Finetune, Serve, Spec, catalog_model
from gpuplan.units import DTYPE_BYTES, format_gib

GPU_MEMORY_TOLERANCE = 0.02  # the same GPU reports its memory within a fraction of a percent across drivers
UTILIZATION_TOLERANCE = 0.0005  # vLLM prints gpu_memory_utilization to 4 decimals, SGLang to 3
QUANTIZED_ANY = "compressed-tensors"  # the scheme lives in the checkpoint: int8, fp8 or int4 are all possible
SPEC_QUANTIZATION = ("none", "fp8", "int8", "int4-awq", "int4-gptq")


@record
class SettingCheck:
    name: str  # the run's name for it: max_model_len, tensor_parallel_size, ...
    pointer: Pointer  # the spec field it is compared with
    spec_value: str
    run_value: str
    run_line: int
    matches: bool

    @property
    def field(self) -> str:
        return dotted(self.pointer)


@record
class Comparison:
    checks: tuple[SettingCheck, ...]
    spec: Spec  # with the run's settings where they differ (the basis of the comparison)
    job: Any  # Serve or Finetune, likewise
    unexpressible: tuple[str, ...]  # run settings the spec cannot state: the terms are not compared


class _Builder:
    def __init__(self, spec: Spec, job: Any, evidence: Evidence) -> None:
        self.spec, self.job, self.evidence = spec, job, evidence
        self.checks: list[SettingCheck] = []
        self.unexpressible: list[str] = []

    def run(self, name: str) -> Setting | None:
        return self.evidence.settings.get(name)

    def check(self, name: str, pointer: Pointer, spec_value: Any, setting: Setting, matches: bool) -> bool:
        self.checks.append(
            SettingCheck(name, pointer, _show(spec_value), _show(setting.value, setting.raw), setting.line, matches)
        )
        return matches

    def done(self) -> Comparison:
        return Comparison(tuple(self.checks), self.spec, self.job, tuple(self.unexpressible))


def compare_serve(spec: Spec, job: Serve, evidence: Evidence) -> Comparison:
    """The vLLM run's settings against ``job`` (the spec's serve section)."""
    b = _Builder(spec, job, evidence)
    hardware = job.hardware
    _model(b, ("model", "id"))
    if (setting := b.run("max_model_len")) and not b.check(
        "max_model_len", ("serve", "context"), job.context, setting, setting.value == job.context
    ):
        context = int(setting.value)
        b.job = replace(b.job, context=context, output_tokens=min(b.job.output_tokens, context))
    for name, key in (("tensor_parallel", "tensor_parallel"), ("pipeline_parallel", "pipeline_parallel")):
        declared = getattr(hardware, key)
        if (setting := b.run(name)) and not b.check(
            f"{name}_size", ("serve", "hardware", key), declared, setting, setting.value == declared
        ):
            layout = replace(b.job.hardware, **{key: int(setting.value)})
            count = layout.tensor_parallel * layout.pipeline_parallel * hardware.replicas
            b.job = replace(b.job, hardware=replace(layout, count=count))
    if (setting := b.run("dtype")) and not b.check(
        "dtype", ("model", "dtype"), spec.model.dtype, setting, setting.value == spec.model.dtype
    ):
        if setting.value in DTYPE_BYTES:
            b.spec = replace(b.spec, model=replace(b.spec.model, dtype=str(setting.value)))
        else:
            b.unexpressible.append(f"dtype {setting.raw or setting.value}")
    _kv_cache_dtype(b, spec, job)
    _quantization(b, job)
    same_engine = _engine(b, job)
    _engine_version(b, job)
    if (setting := b.run("memory_utilization")) is not None and not same_engine:
        b.job = replace(b.job, memory_utilization=float(setting.value))  # the run's engine's own fraction
    elif setting is not None:
        declared = memory_fraction(job, hardware.gpu)
        if not b.check(
            fraction_name(str(b.job.engine)),
            ("serve", "memory_utilization"),
            declared,
            setting,
            abs(float(setting.value) - declared) <= UTILIZATION_TOLERANCE,
        ):
            b.job = replace(b.job, memory_utilization=float(setting.value))
    _gpu_memory(b, ("serve", "hardware", "gpu"))
    return b.done()


def _engine(b: _Builder, job: Serve) -> bool:
    """Whether the engine that wrote the log is the spec's; if not, the run is estimated with its own
    engine's memory model (LMDeploy and generic are sized as vLLM, but a vLLM log is still a vLLM run)."""
    setting = b.run("engine")
    if setting is None or b.check("engine", ("serve", "engine"), job.engine, setting, setting.value == job.engine):
        return True
    run_engine = str(setting.value)
    # The run's own memory fraction comes with its log (or the engine's default): the spec's is another
    # engine's quantity.
    b.job = replace(b.job, engine=run_engine, memory_utilization=None, max_gpu_total_bytes=None)
    return False


def _engine_version(b: _Builder, job: Serve) -> None:
    """The vLLM release that wrote the log against ``serve.engine_version`` (default the memory model's):
    alike when both size memory alike (``sizing_line``: patch releases between two changes do); a run of
    another line is estimated at its own release."""
    setting = b.run("engine_version")
    if setting is None or b.job.engine != "vllm":
        return
    try:
        run_line = sizing_line(str(setting.value))
    except ValueError:
        return  # a development build's name gpuplan cannot read: the default stands
    declared = job.engine_version or DEFAULT_VERSION
    if not b.check("engine_version", ("serve", "engine_version"), declared, setting, sizing_line(declared) == run_line):
        b.job = replace(b.job, engine_version=str(setting.value))


def compare_finetune(spec: Spec, job: Finetune, evidence: Evidence) -> Comparison:
    """A training run's settings (where its evidence states them) against the spec's finetune section."""
    b = _Builder(spec, job, evidence)
    for name, key in (
        ("micro_batch", "micro_batch"),
        ("seq_len", "seq_len"),
        ("gradient_accumulation", "gradient_accumulation"),
    ):
        declared = getattr(job, key)
        if (setting := b.run(name)) and not b.check(
            name, ("finetune", key), declared, setting, setting.value == declared
        ):
            b.job = replace(b.job, **{key: int(setting.value)})
    hardware = job.hardware
    setting = b.run("world_size") or _world_from_records(b.run("rank_records"), hardware.count)
    if setting and not b.check(
        "world_size", ("finetune", "hardware", "count"), hardware.count, setting, setting.value == hardware.count
    ):
        world = int(setting.value)
        if world % (hardware.tensor_parallel * hardware.pipeline_parallel):
            b.unexpressible.append(f"world_size {world} with the spec's TP x PP")
        else:
            b.job = replace(b.job, hardware=replace(b.job.hardware, count=world))
    _gpu_memory(b, ("finetune", "hardware", "gpu"))
    return b.done()


def _world_from_records(records: Setting | None, count: int) -> Setting | None:
    """The world size a list of per-rank records states when the run names none: each record is a rank, so the
    run had at least as many GPUs. More than the spec's count differs from it; fewer is a subset of the ranks
    (one rank's file, an excerpt), and says nothing against it."""
    if records is None or int(records.value) < count:
        return None
    return Setting("world_size", records.value, records.line, records.raw)


def _model(b: _Builder, pointer: Pointer) -> None:
    """The served model, when the log's name is one the catalog knows (else the weights row tells)."""
    name = b.evidence.model
    if not name:
        return
    try:
        entry = get_model(name)
    except UnknownNameError:
        return
    spec_model = b.spec.model
    if entry.architecture == spec_model.architecture:
        return
    b.check("model", pointer, spec_model.label, Setting("model", entry.id, 0, name), False)
    b.spec = replace(b.spec, model=catalog_model(entry, spec_model.dtype))


def _kv_cache_dtype(b: _Builder, spec: Spec, job: Serve) -> None:
    setting = b.run("kv_cache_dtype")
    if setting is None:
        return
    run_dtype = b.run("dtype")
    run_model_dtype = str(run_dtype.value) if run_dtype else spec.model.dtype
    run_effective = run_model_dtype if setting.value == "auto" else str(setting.value)
    spec_effective = spec.model.dtype if job.kv_cache_dtype == "auto" else job.kv_cache_dtype
    # "auto" is the model's dtype on each side: said with what it resolves to, so that a difference reads as one
    # ("auto (fp8)" against "auto (bf16)", not "auto" against "auto").
    shown = replace(setting, raw=f"{run_effective}, the run's model dtype") if setting.value == "auto" else setting
    declared = f"auto ({spec_effective}, the model's dtype)" if job.kv_cache_dtype == "auto" else job.kv_cache_dtype
    if b.check("kv_cache_dtype", ("serve", "kv_cache_dtype"), declared, shown, run_effective == spec_effective):
        return
    if run_effective in ("bf16", "fp16", "fp8"):
        b.job = replace(b.job, kv_cache_dtype="auto" if setting.value == "auto" else run_effective)
    else:
        b.unexpressible.append(f"kv_cache_dtype {setting.raw or setting.value}")


def _quantization(b: _Builder, job: Serve) -> None:
    setting = b.run("quantization")
    if setting is None:
        return
    value = str(setting.value)
    if value == QUANTIZED_ANY:
        matches = job.quantization != "none"
    elif value in SPEC_QUANTIZATION:
        matches = value == job.quantization
    else:  # a scheme gpuplan has no name for: it can only say whether the spec expects quantized weights
        matches = job.quantization != "none"
    if b.check("quantization", ("serve", "quantization"), job.quantization, setting, matches):
        return
    if value in SPEC_QUANTIZATION:
        b.job = replace(b.job, quantization=value)
    else:
        b.unexpressible.append(f"quantization {setting.raw or value} (the scheme is in the checkpoint)")


def _gpu_memory(b: _Builder, pointer: Pointer) -> None:
    """The device's memory: as the run states it (GPU_TOTAL), or at least what the engine found free
    (GPU_AT_LEAST, SGLang), which differs from the spec's GPU only when the declared one has less."""
    gpu = b.job.hardware.gpu
    tolerance = GPU_MEMORY_TOLERANCE * gpu.usable_bytes
    stated = b.evidence.measurements.get(GPU_TOTAL)
    at_least = stated is None or not stated.values
    measured = b.evidence.measurements.get(GPU_AT_LEAST) if at_least else stated
    if measured is None or not measured.values:
        return
    total = max(value for _, value in measured.values)
    excess = total - gpu.usable_bytes  # a lower bound (at least) differs only where it is above the GPU's
    shown = f"at least {format_gib(total)}" if at_least else format_gib(total)
    same = (excess if at_least else abs(excess)) <= tolerance
    setting = Setting("gpu_total_memory", shown, measured.line, "")
    if not b.check("GPU memory", pointer, f"{gpu.id}, {format_gib(gpu.usable_bytes)}", setting, same):
        # The device as run: the catalog's CUDA context allowance on top (SGLang's default fraction reads it).
        context = gpu.memory_bytes - gpu.usable_bytes
        as_run = replace(
            gpu, id=f"{gpu.id} (as run)", usable_bytes=int(total), memory_bytes=int(total) + context, custom=True
        )
        b.job = replace(b.job, hardware=replace(b.job.hardware, gpu=as_run))


def _show(value: Any, raw: str = "") -> str:
    if isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    return f"{text} ({raw})" if raw and raw != text else text
