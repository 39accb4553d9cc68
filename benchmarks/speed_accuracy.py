"""Speed-model accuracy against published serving and training measurements.

    python benchmarks/speed_accuracy.py              # the shipped calibration, every record
    python benchmarks/speed_accuracy.py --held-out   # also: each half of the sources predicted by the other's fit
    python benchmarks/speed_accuracy.py --fit        # refit the calibrated figures over all records; prints them
    python benchmarks/speed_accuracy.py --loso       # also: each source (serving, training) predicted by the rest's fit

Every record of ``benchmarks/data/speed-calibration.yaml`` is turned into the spec it describes and run
through the path users run (load -> validate -> resolve -> analyse, as ``gpuplan estimate`` does); the
estimate's TTFT, TPOT, aggregate output tokens/s or training tokens/s per GPU is compared with the
published figure. Records a spec cannot state are listed with the reason. Error = estimate / measured - 1:
negative means gpuplan is below the measurement (an optimistic latency, a pessimistic throughput).
Targets (issue 10), per metric: median |error| <= 15%, >= 75% of records within +-25%, |signed median| <= 10%.

Fitting (--fit, --held-out; needs scipy: ``pip install -e '.[calibration]'``): scipy.optimize.least_squares
(trust-region reflective, within each figure's bounds) from the shipped figures, minimising the mean Huber
loss (0.25) of log(estimate / measured), each metric weighted equally, plus a ridge on each engine's
deviation from the generic figures. Every fit prints scipy's verdict (status, message, nfev, cost) and a
WARNING line for each figure it leaves at (or within 0.1% of the span of) a bound. ``--starts N`` adds
N - 1 starts drawn within the bounds (the solver is local) and keeps the lowest cost.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuplan.analysis import Analysis, analyse  # noqa: E402
from gpuplan.estimate.calibration import CALIBRATION, Calibration  # noqa: E402
from gpuplan.estimate.performance import Efficiency  # noqa: E402
from gpuplan.estimate.serving_lockstep import burst_ttft  # noqa: E402
from gpuplan.estimate.serving_speed import serving_speed  # noqa: E402
from gpuplan.estimate.serving_workload import ServingWorkload  # noqa: E402
from gpuplan.estimate.training_speed import training_speed  # noqa: E402
from gpuplan.loader import load_bytes  # noqa: E402
from gpuplan.spec import Spec, resolve  # noqa: E402
from gpuplan.validate import validate  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "speed-calibration.yaml"
METRICS = ("ttft_ms", "tpot_ms", "tokens_per_s", "training_tokens_per_s_per_gpu")
METRIC_NAMES = {
    "ttft_ms": "TTFT",
    "tpot_ms": "TPOT/ITL",
    "tokens_per_s": "output tokens/s",
    "training_tokens_per_s_per_gpu": "training tokens/s/GPU",
}
TARGET_MEDIAN, TARGET_WITHIN, TARGET_BIAS = 0.15, 0.75, 0.10


@dataclass
class Record:
    id: str
    kind: str  # serving | training
    source: str  # repository/path: the unit of the held-out split
    measured: dict[str, dict[str, Any]]
    spec: Spec | None
    notes: list[str]
    load: str | None = None
    reason: str | None = None  # why a spec cannot state it
    workload: Any = None  # the speed model's input, as the estimate built it (independent of the calibration)


# -- data -> specs ----------------------------------------------------------------------------------------


def source_key(record: dict[str, Any]) -> str:
    source = record["source"]
    key = f"{source['repo']}/{source['path']}"
    # LMDeploy's A100 page holds tables of two releases measured apart: two sources.
    if "lmdeploy" in source["repo"].lower():
        key += "@" + ("v0.2.0" if "v0.2.0" in record["id"] else "v0.1.0a1")
    return key


def spec_text(record: dict[str, Any], models: dict[str, Any], overrides: dict[str, Any] | None = None) -> bytes:
    spec = {"version": 1, "name": record["id"][:120]}
    fragment = yaml.safe_load(yaml.safe_dump(record["spec"]))  # a deep copy
    model = fragment["model"]
    if "ref" in model:
        model["architecture"] = dict(models[model.pop("ref")]["architecture"])
    spec.update(fragment)
    if "serve" in spec:
        # The calibration's serving harnesses run in process on token ids (trtllm-bench, gptSessionBenchmark,
        # LMDeploy's profile_generation and profile_throughput): no server front end. A record measured
        # through a server says so in its spec (`endpoint: completions`).
        spec["serve"].setdefault("endpoint", "offline")
    for key, value in (overrides or {}).items():
        spec["serve"][key] = value
    return yaml.safe_dump(spec, sort_keys=False).encode()


def resolve_spec(name: str, raw: bytes) -> Spec:
    document = load_bytes(name, raw)
    problems = list(document.findings) + list(validate(document))
    if problems:
        raise ValueError(f"{name}: the mapped spec is invalid: {problems[0].message}")
    spec, findings = resolve(document, ROOT)
    if spec is None:
        raise ValueError(f"{name}: the mapped spec does not resolve: {findings[0].message}")
    return spec


def trtllm_bench_settings(kv_requests: float, prompt: int, output: int, stages: int = 1) -> tuple[int, int]:
    """(max batch size, max num tokens) as trtllm-bench picks them for a throughput run.

    tensorrt_llm/bench/build/tuning.py finetune_setting: the batch is what the KV cache holds at prompt +
    output (capped at 4096), rounded up; the token budget is batch x (1 + prompt / output), capped at 32768.
    """
    raw_batch = min(kv_requests, 4096) / stages
    raw_tokens = min(raw_batch * (1 + prompt / output), 32768)
    if raw_batch < 256:
        batch = max(64, 32 * math.ceil(raw_batch / 32))
    elif raw_batch < 1024:
        batch = 128 * math.ceil(raw_batch / 128)
    else:
        batch = 256 * math.ceil(raw_batch / 256)
    if raw_tokens < 4096:
        tokens = max(2048, 256 * math.ceil(raw_tokens / 256))
    elif raw_tokens < 8192:
        tokens = 512 * math.ceil(raw_tokens / 512)
    else:
        tokens = 1024 * math.ceil(raw_tokens / 1024)
    return batch, tokens


PROFILE_GENERATION = "lmdeploy-profile-generation"
PROFILE_GENERATION_ROUNDS = 3  # lmdeploy benchmark/profile_generation.py: --test-round (3 requests per thread)


def harness_ttft(workload: ServingWorkload, calibration: Calibration) -> float:
    """Mean first-token latency as LMDeploy's profile_generation.py measures it.

    ``concurrency`` threads start together and each sends its requests one after another; every request
    is the same, so while the batch fits, all finish at the same step and the next round again reaches
    an idle engine together: each round is a burst (``burst_ttft``). When the KV cache holds fewer
    sequences than threads, only the first round is a burst; the later rounds queue for the cache as
    the closed-loop steady state does. The harness averages over all rounds.
    """
    burst = burst_ttft(workload, Efficiency(), calibration)
    steady = serving_speed(workload, Efficiency(), calibration)
    if steady.running >= workload.concurrency:
        return burst * 1000
    rounds = PROFILE_GENERATION_ROUNDS
    return (burst + (rounds - 1) * steady.ttft_s) / rounds * 1000


def load_records(path: Path = DATA) -> list[Record]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    models = data.get("models", {})
    records = []
    for kind in ("serving", "training"):
        for entry in data[kind]:
            base = Record(entry["id"], kind, source_key(entry), entry.get("measured", {}), None, entry.get("notes", []))
            if "unexpressible" in entry:
                base.reason = entry["unexpressible"]
                records.append(base)
                continue
            raw = spec_text(entry, models)
            spec = resolve_spec(entry["id"], raw)
            if entry.get("load") == "trtllm-bench":
                serve = entry["spec"]["serve"]
                estimate = analyse(spec).serve
                assert estimate is not None
                batch, tokens = trtllm_bench_settings(
                    estimate.max_concurrency, serve["context"] - serve["output_tokens"], serve["output_tokens"]
                )
                overrides = {"concurrency": batch, "max_sequences": batch, "max_batched_tokens": tokens}
                spec = resolve_spec(entry["id"], spec_text(entry, models, overrides))
                base.load = f"trtllm-bench: batch {batch}, {tokens:,} tokens per step"
            elif entry.get("load") == PROFILE_GENERATION:
                base.load = f"{PROFILE_GENERATION}: {PROFILE_GENERATION_ROUNDS} lock-step rounds"
            base.spec = spec
            analysis = analyse(spec)
            job = analysis.serve if kind == "serving" else analysis.finetune
            base.workload = job.workload if job else None
            records.append(base)
    return records


# -- estimates ----------------------------------------------------------------------------------------------


def estimated(analysis: Analysis, metric: str) -> float:
    if metric == "training_tokens_per_s_per_gpu":
        assert analysis.finetune is not None and analysis.finetune.speed is not None
        return analysis.finetune.speed.tokens_per_s_per_gpu
    serve = analysis.serve
    assert serve is not None
    if metric == "ttft_ms":
        return serve.speed.ttft_s * 1000
    if metric == "tpot_ms":
        return serve.speed.tpot_s * 1000
    return serve.speed.tokens_per_s


@dataclass(frozen=True)
class Result:
    record: Record
    metric: str
    measured: float
    estimate: float
    diagnosis: str

    @property
    def error(self) -> float:
        return self.estimate / self.measured - 1


def diagnose(analysis: Analysis, metric: str) -> str:
    if analysis.finetune is not None and analysis.finetune.speed is not None:
        f = analysis.finetune
        speed = f.speed
        assert speed is not None
        sync = speed.gradient_sync_s / speed.step_s if speed.step_s else 0.0
        return (
            f"MFU {speed.mfu:.0%}, exposed sync {sync:.0%} of the step, {f.job.micro_batch}x{f.job.seq_len}"
            f" x{f.job.gradient_accumulation}, TP{f.setup.tensor_parallel} PP{f.setup.pipeline_parallel}"
            f" DP{f.setup.data_parallel} {f.job.sharding}, {f.job.precision}"
        )
    s = analysis.serve
    assert s is not None
    speed = s.speed
    return (
        f"{speed.running:,.0f} running ({speed.limited_by}), decode {speed.decode_bound}-bound, step"
        f" {speed.tpot_s * 1000:,.1f} ms, alone TTFT {speed.ttft_single_s * 1000:,.0f} ms, {s.job.batching}"
    )


def evaluate(
    records: Iterable[Record],
    calibration: Calibration = CALIBRATION,
    calibration_for: Callable[[Record], Calibration] | None = None,
) -> list[Result]:
    results = []
    for record in records:
        if record.spec is None:
            continue
        used = calibration_for(record) if calibration_for else calibration
        analysis = analyse(record.spec, Efficiency(), used)
        for metric, figure in record.measured.items():
            estimate = estimated(analysis, metric)
            if metric == "ttft_ms" and record.load and record.load.startswith(PROFILE_GENERATION):
                assert analysis.serve is not None
                estimate = harness_ttft(analysis.serve.workload, used)
            results.append(Result(record, metric, float(figure["value"]), estimate, diagnose(analysis, metric)))
    return results


def evaluate_fast(records: Iterable[Record], calibration: Calibration) -> list[Result]:
    """The same speed functions on each record's stored workload: only the speed model is re-run (fitting)."""
    results = []
    for record in records:
        if record.workload is None:
            continue
        if record.kind == "training":
            tokens = training_speed(record.workload, Efficiency(), calibration).tokens_per_s_per_gpu
            figures = {"training_tokens_per_s_per_gpu": tokens}
        else:
            speed = serving_speed(record.workload, Efficiency(), calibration)
            profile_generation = record.load and record.load.startswith(PROFILE_GENERATION)
            figures = {
                "ttft_ms": harness_ttft(record.workload, calibration) if profile_generation else speed.ttft_s * 1000,
                "tpot_ms": speed.tpot_s * 1000,
                "tokens_per_s": speed.tokens_per_s,
            }
        for metric, figure in record.measured.items():
            results.append(Result(record, metric, float(figure["value"]), figures[metric], ""))
    return results


# -- statistics ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    n: int
    median_abs: float
    signed_median: float
    within_20: float
    within_25: float
    worst: float

    @property
    def meets(self) -> bool:
        return (
            self.median_abs <= TARGET_MEDIAN
            and self.within_25 >= TARGET_WITHIN
            and abs(self.signed_median) <= TARGET_BIAS
        )


def summarise(errors: list[float]) -> Summary:
    absolute = [abs(e) for e in errors]
    return Summary(
        len(errors),
        statistics.median(absolute),
        statistics.median(errors),
        sum(a <= 0.20 for a in absolute) / len(errors),
        sum(a <= 0.25 for a in absolute) / len(errors),
        max(errors, key=abs),
    )


def by_metric(results: list[Result]) -> dict[str, list[Result]]:
    grouped: dict[str, list[Result]] = {}
    for result in results:
        grouped.setdefault(result.metric, []).append(result)
    return {metric: grouped[metric] for metric in METRICS if metric in grouped}


# -- fitting ------------------------------------------------------------------------------------------------

# Each fitted figure: (lower bound, upper bound), in the figure's own unit. Efficiencies stay within (0, 1].
SERVING_GLOBALS = {
    "attention_efficiency": (0.1, 0.9),
    "layer_overhead_s": (0.0, 80e-6),
    "allreduce_latency_nvlink_s": (2e-6, 60e-6),
    "link_efficiency": (0.3, 1.0),
    "roofline_sharpness": (1.0, 12.0),
}
ENGINE_FIGURES = {
    "gemm_efficiency": (0.2, 1.0),
    # No kernel streams the datasheet bandwidth: copy benchmarks reach about 90-95% of it on HBM GPUs.
    "bandwidth_efficiency": (0.4, 0.95),
    "step_overhead_s": (0.0, 4e-3),
    "sequence_overhead_s": (0.0, 200e-6),
    "request_overhead_s": (0.0, 40e-3),
}
TRAINING_FIGURES = {
    "gemm_efficiency": (0.3, 0.95),
    "attention_efficiency": (0.1, 0.9),
    "low_precision_gemm_factor": (0.3, 1.0),
    # Host time per kernel launch: "usually, the launch time on the CPU side is between 5-20 microseconds"
    # (Meta's Holistic Trace Analysis, docs/source/features/cuda_kernel_launch_stats.rst).
    "kernel_launch_s": (5e-6, 20e-6),
    # As the engines': copy benchmarks reach about 90-95% of the datasheet bandwidth.
    "bandwidth_efficiency": (0.4, 0.95),
    "link_efficiency": (0.2, 1.0),
    "overlap": (0.0, 1.0),
}
ENGINE_PENALTY = 0.002  # ridge on each engine's deviation from the generic figure: few records, little move
HUBER_DELTA = 0.25  # |log(estimate / measured)| past which a record's loss grows linearly (about -22%/+28%)
# A fitted figure this close to a bound, as a share of the span between its bounds in the fitted coordinate
# (log for efficiencies, linear for fixed costs), is reported as at that bound.
BOUND_TOLERANCE = 1e-3
# Finite-difference step, relative to each fitted coordinate: large enough that a step does not resolve
# the model's few discrete choices (whole sequences admitted, whole prefill chunks), small enough to be local.
DIFF_STEP = 1e-4


def huber(x: float, delta: float = HUBER_DELTA) -> float:
    return x * x / 2 if abs(x) <= delta else delta * (abs(x) - delta / 2)


def log_ratio(result: Result) -> float:
    return math.log(max(result.estimate, 1e-12) / result.measured)


def loss(results: list[Result]) -> float:
    """Mean Huber loss of log(estimate / measured), each metric weighted equally (the fit's objective)."""
    grouped = by_metric(results)
    total = 0.0
    for group in grouped.values():
        total += sum(huber(log_ratio(r)) for r in group) / len(group)
    return total / max(1, len(grouped))


def metric_weights(results: list[Result]) -> list[float]:
    """Each result's weight in ``loss``: 1 / (records of its metric x metrics present)."""
    counts: dict[str, int] = {}
    for result in results:
        counts[result.metric] = counts.get(result.metric, 0) + 1
    return [1 / (counts[r.metric] * len(counts)) for r in results]


@dataclass(frozen=True)
class Parameter:
    """One fitted figure in its own unit: where it lives, its bounds, and the coordinate the fit moves.

    A figure with a positive lower bound (an efficiency, a latency, the roofline's exponent) moves on a log
    scale, so a step is a factor; one whose lower bound is 0 (a fixed cost, bytes, an overlap) moves
    linearly, in quarters of its upper bound. An engine's deviation from the generic figure is the
    difference of the two coordinates: a log-factor or a quarter-range, as the ridge penalty weighs it.
    """

    block: str  # "serving" (shared mechanisms), "training", "generic" or an engine id
    key: str
    bounds: tuple[float, float]

    @property
    def name(self) -> str:
        return f"{self.block}.{self.key}"

    @property
    def logarithmic(self) -> bool:
        return self.bounds[0] > 0

    def coordinate(self, value: float) -> float:
        value = min(max(value, self.bounds[0]), self.bounds[1])
        return math.log(value) if self.logarithmic else value / (self.bounds[1] / 4)

    def value(self, coordinate: float) -> float:
        # The solver keeps the coordinate within the bounds; the clip only absorbs exp/log rounding.
        value = math.exp(coordinate) if self.logarithmic else coordinate * self.bounds[1] / 4
        return min(max(value, self.bounds[0]), self.bounds[1])

    @property
    def coordinate_bounds(self) -> tuple[float, float]:
        return self.coordinate(self.bounds[0]), self.coordinate(self.bounds[1])


@dataclass(frozen=True)
class AtBound:
    parameter: Parameter
    value: float
    side: str  # "lower" | "upper"

    @property
    def bound(self) -> float:
        return self.parameter.bounds[0 if self.side == "lower" else 1]

    def warning(self, label: str) -> str:
        low, high = self.parameter.bounds
        near = "" if self.value == self.bound else f"within {BOUND_TOLERANCE:.1%} of the span, "
        return (
            f"WARNING: {label}: {self.parameter.name} = {self.value:.4g} is at its {self.side} bound"
            f" {self.bound:.4g} ({near}bounds [{low:.4g}, {high:.4g}])"
        )


@dataclass(frozen=True)
class FitReport:
    """How one least-squares fit ended: scipy's verdict, the cost before and after, figures at bounds."""

    label: str
    parameters: tuple[Parameter, ...]
    start: tuple[float, ...]  # the figures the fit started from, in their units
    values: tuple[float, ...]  # the fitted figures
    status: int  # scipy.optimize.least_squares: > 0 converged (1 gtol, 2 ftol, 3 xtol, 4 ftol and xtol)
    message: str
    nfev: int  # residual evaluations by the solver (its finite-difference Jacobians not counted)
    njev: int  # Jacobian evaluations (each len(parameters) model runs)
    evaluations: int  # every model run, Jacobians included
    start_cost: float  # the objective (``loss`` + ridge penalty) at the start
    cost: float  # and at the fitted figures
    optimality: float  # first-order optimality (gradient's infinity norm, bounds projected)
    at_bounds: tuple[AtBound, ...]
    undetermined: tuple[Parameter, ...]  # figures no residual depends on (at the fitted point)
    seconds: float
    best_start: int = 0  # 0: the given figures; k: the k-th drawn start
    other_costs: tuple[float, ...] = ()  # where the other starts ended

    @property
    def converged(self) -> bool:
        return self.status > 0

    def lines(self) -> list[str]:
        verdict = "converged" if self.converged else "DID NOT CONVERGE"
        out = [
            f"{self.label}: {verdict} (status {self.status}: {self.message}); nfev {self.nfev}, njev {self.njev},"
            f" {self.evaluations} model runs, {self.seconds:.1f} s; cost {self.start_cost:.6g} -> {self.cost:.6g},"
            f" first-order optimality {self.optimality:.2g}; {len(self.parameters)} figures,"
            f" {len(self.at_bounds)} at a bound"
        ]
        if self.other_costs:
            origin = "the given figures" if self.best_start == 0 else f"drawn start {self.best_start}"
            ended = ", ".join(f"{cost:.6g}" for cost in sorted(self.other_costs))
            out.append(
                f"  {len(self.other_costs) + 1} starts: the lowest cost came from {origin}; the others ended at {ended}"
            )
        out += ["  " + hit.warning(self.label) for hit in self.at_bounds]
        out += [
            f"  note: {self.label}: at the fitted figures no estimate depends on {p.name} (a step of 1% of its"
            " span moves none): the records do not determine it"
            for p in self.undetermined
        ]
        return out


def weighted_huber(weights: Any, deltas: Any) -> Callable[[Any], Any]:
    """least_squares' loss rho(z = f**2) for a sum of weight x Huber(f, delta) per residual.

    scipy's cost is 0.5 x sum(rho): rho = 2 x weight x Huber, i.e. weight x z inside delta and
    weight x (2 delta sqrt(z) - delta^2) beyond it; an infinite delta is a plain square (the ridge terms).
    """
    import numpy as np

    weights, deltas = np.asarray(weights, dtype=float), np.asarray(deltas, dtype=float)

    def rho(z: Any) -> Any:
        out = np.empty((3, z.size))
        out[0], out[1], out[2] = z, 1.0, 0.0
        outer = z > deltas * deltas
        root, delta = np.sqrt(z[outer]), deltas[outer]
        out[0, outer] = 2 * delta * root - delta * delta
        out[1, outer] = delta / root
        out[2, outer] = -delta / (2 * z[outer] * root)
        return out * weights

    return rho


def least_squares_fit(
    label: str,
    parameters: list[Parameter],
    start: list[float],
    residuals: Callable[[list[float]], list[float]],
    weights: list[float],
    deltas: list[float],
    max_nfev: int | None,
    starts: int = 1,
) -> tuple[list[float], FitReport]:
    """Minimise sum(weight x Huber(residual, delta)) over the figures, within their bounds (scipy, 'trf').

    ``residuals`` takes the figures in their units; the solver moves their coordinates (``Parameter``).
    The solver is local: with ``starts`` > 1 it also starts from points drawn within the bounds and keeps
    the lowest cost, and the report lists where the other starts ended.
    """
    import time

    import numpy as np
    from scipy.optimize import least_squares

    runs = 0

    def function(coordinates: Any) -> Any:
        nonlocal runs
        runs += 1
        return np.asarray(residuals([p.value(float(c)) for p, c in zip(parameters, coordinates, strict=True)]))

    rho = weighted_huber(weights, deltas)
    x0 = np.array([p.coordinate(v) for p, v in zip(parameters, start, strict=True)])
    lower, upper = np.array([p.coordinate_bounds for p in parameters]).T
    started = time.perf_counter()
    start_cost = 0.5 * float(np.sum(rho(function(np.clip(x0, lower, upper)) ** 2)[0]))
    # The first start is ``start``; any others are drawn (seeded) within the middle 90% of each span.
    draws = random.Random(0)
    points = [x0] + [
        lower + (upper - lower) * np.array([draws.uniform(0.05, 0.95) for _ in x0]) for _ in range(starts - 1)
    ]
    fits = [
        least_squares(
            function,
            point,
            bounds=(lower, upper),
            method="trf",
            x_scale=1.0,
            loss=rho,
            diff_step=DIFF_STEP,
            max_nfev=max_nfev,
        )
        for point in points
    ]
    best = min(range(len(fits)), key=lambda i: fits[i].cost)
    result = fits[best]
    others = tuple(float(f.cost) for i, f in enumerate(fits) if i != best)
    seconds, solver_runs = time.perf_counter() - started, runs
    # A figure on an active bound (scipy's active_mask) is the bound: trf keeps its iterates strictly inside.
    bounded = [p.bounds[0] if a < 0 else p.bounds[1] for p, a in zip(parameters, result.active_mask, strict=True)]
    values = [
        b if a else p.value(float(c))
        for p, c, a, b in zip(parameters, result.x, result.active_mask, bounded, strict=True)
    ]
    at_bounds = []
    for parameter, coordinate, value, active in zip(parameters, result.x, values, result.active_mask, strict=True):
        low, high = parameter.coordinate_bounds
        tolerance = BOUND_TOLERANCE * (high - low)
        if active < 0 or coordinate - low <= tolerance:
            at_bounds.append(AtBound(parameter, value, "lower"))
        elif active > 0 or high - coordinate <= tolerance:
            at_bounds.append(AtBound(parameter, value, "upper"))
    # Probe each figure: a step of 1% of its span, towards the inside; if no residual moves, no record holds it.
    undetermined = []
    for i, (parameter, coordinate) in enumerate(zip(parameters, result.x, strict=True)):
        low, high = parameter.coordinate_bounds
        probe = result.x.copy()
        probe[i] = coordinate + (0.01 if high - coordinate > coordinate - low else -0.01) * (high - low)
        if np.array_equal(function(probe), result.fun):
            undetermined.append(parameter)
    report = FitReport(
        label,
        tuple(parameters),
        tuple(start),
        tuple(values),
        int(result.status),
        str(result.message),
        int(result.nfev),
        int(result.njev or 0),
        solver_runs,
        start_cost,
        float(result.cost),
        float(result.optimality),
        tuple(at_bounds),
        tuple(undetermined),
        seconds,
        best,
        others,
    )
    return values, report


def serving_parameters(records: list[Record]) -> list[Parameter]:
    """The shared mechanisms, the generic engine, and each engine that has records (its own figures)."""
    engines_seen = sorted({r.workload.engine for r in records if r.workload is not None} - {"generic"})
    parameters = [Parameter("serving", key, bounds) for key, bounds in SERVING_GLOBALS.items()]
    parameters += [Parameter("generic", key, bounds) for key, bounds in ENGINE_FIGURES.items()]
    parameters += [Parameter(e, key, bounds) for e in engines_seen for key, bounds in ENGINE_FIGURES.items()]
    return parameters


def current(calibration: Calibration, parameter: Parameter) -> float:
    if parameter.block in ("serving", "training"):
        return getattr(getattr(calibration, parameter.block), parameter.key)
    return getattr(calibration.engines[parameter.block], parameter.key)


def build_serving(base: Calibration, parameters: list[Parameter], values: list[float]) -> Calibration:
    """``base`` with the serving figures set: every engine takes the generic figures, then its own if fitted."""
    figures: dict[str, dict[str, float]] = {}
    for parameter, value in zip(parameters, values, strict=True):
        figures.setdefault(parameter.block, {})[parameter.key] = value
    generic = replace(base.engines["generic"], **figures.get("generic", {}))
    engines = {
        engine_id: replace(
            generic,
            id=engine_id,
            name=profile.name,
            reserves_full_context=profile.reserves_full_context,
            first_token_from_decode_step=profile.first_token_from_decode_step,
            admits_by_prompt_chunk=profile.admits_by_prompt_chunk,
            mixes_prefill=profile.mixes_prefill,
            **figures.get(engine_id, {}),
        )
        for engine_id, profile in base.engines.items()
    }
    return replace(base, serving=replace(base.serving, **figures.get("serving", {})), engines=engines)


def fit_serving(
    records: list[Record], base: Calibration, max_nfev: int | None = None, label: str = "all records", starts: int = 1
) -> tuple[Calibration, FitReport]:
    """Refit the shared mechanisms, the generic engine, and each engine's penalised deviation from it.

    An engine with few records stays near the generic figures (ridge penalty on its deviations); an
    engine with none in the data (SGLang today) keeps them exactly.
    """
    serving = [r for r in records if r.kind == "serving" and r.workload is not None]
    parameters = serving_parameters(serving)
    index = {p.name: i for i, p in enumerate(parameters)}
    engine_figures = [i for i, p in enumerate(parameters) if p.block not in ("serving", "generic")]
    deviations = [(i, index[f"generic.{parameters[i].key}"]) for i in engine_figures]
    ridge = math.sqrt(2 * ENGINE_PENALTY)  # 0.5 x (ridge x d)^2 = ENGINE_PENALTY x d^2

    def residuals(values: list[float]) -> list[float]:
        results = evaluate_fast(serving, build_serving(base, parameters, values))
        coordinates = [p.coordinate(v) for p, v in zip(parameters, values, strict=True)]
        return [log_ratio(r) for r in results] + [ridge * (coordinates[e] - coordinates[g]) for e, g in deviations]

    first = evaluate_fast(serving, base)
    weights = metric_weights(first) + [1.0] * len(deviations)
    deltas = [HUBER_DELTA] * len(first) + [math.inf] * len(deviations)
    start = [current(base, p) for p in parameters]
    values, report = least_squares_fit(
        f"serving, {label}", parameters, start, residuals, weights, deltas, max_nfev, starts
    )
    return build_serving(base, parameters, values), report


def fit_training(
    records: list[Record], base: Calibration, max_nfev: int | None = None, label: str = "all records", starts: int = 1
) -> tuple[Calibration, FitReport]:
    training = [r for r in records if r.kind == "training" and r.workload is not None]
    parameters = [Parameter("training", key, bounds) for key, bounds in TRAINING_FIGURES.items()]

    def build(values: list[float]) -> Calibration:
        figures = {p.key: v for p, v in zip(parameters, values, strict=True)}
        return replace(base, training=replace(base.training, **figures))

    def residuals(values: list[float]) -> list[float]:
        return [log_ratio(r) for r in evaluate_fast(training, build(values))]

    first = evaluate_fast(training, base)
    start = [current(base, p) for p in parameters]
    values, report = least_squares_fit(
        f"training, {label}",
        parameters,
        start,
        residuals,
        metric_weights(first),
        [HUBER_DELTA] * len(first),
        max_nfev,
        starts,
    )
    return build(values), report


def fit(
    records: list[Record], base: Calibration, max_nfev: int | None = None, label: str = "all records", starts: int = 1
) -> tuple[Calibration, list[FitReport]]:
    """Serving figures, then training figures, each from ``base``'s; the two reports of convergence."""
    serving, serving_report = fit_serving(records, base, max_nfev, label, starts)
    calibration, training_report = fit_training(records, serving, max_nfev, label, starts)
    return calibration, [serving_report, training_report]


def leave_one_source_out(
    records: list[Record],
    base: Calibration,
    max_nfev: int | None = None,
    starts: int = 1,
    kinds: tuple[str, ...] = ("training",),
) -> tuple[list[Result], list[FitReport]]:
    """Each source of ``kinds`` estimated with the figures of its kind (``fit_serving``, ``fit_training``:
    the shared mechanism figures, never one per record) fitted on every other source: out of sample. One
    fit report per source, in the order of the sources, labelled "all but <source>"."""
    fits = {"serving": fit_serving, "training": fit_training}
    results: list[Result] = []
    reports: list[FitReport] = []
    for kind in kinds:
        of_kind = [r for r in records if r.kind == kind and r.workload is not None]
        for source in sorted({r.source for r in of_kind}):
            others = [r for r in of_kind if r.source != source]
            fitted, report = fits[kind](others, base, max_nfev, f"all but {source}", starts)
            results += evaluate_fast([r for r in of_kind if r.source == source], fitted)
            reports.append(report)
    return results, reports


def parameter_named(name: str) -> Parameter:
    """The fitted figure ``block.key`` (``serving.link_efficiency``, ``vllm.gemm_efficiency``) with its bounds."""
    block, key = name.split(".", 1)
    if block == "serving":
        return Parameter(block, key, SERVING_GLOBALS[key])
    if block == "training":
        return Parameter(block, key, TRAINING_FIGURES[key])
    return Parameter(block, key, ENGINE_FIGURES[key])


def with_figures(base: Calibration, figures: dict[str, float]) -> Calibration:
    """``base`` with the fitted figures ``{block.key: value}`` of one fit set, as the fit built them."""
    parameters = [parameter_named(name) for name in figures]
    training = {p.key: figures[p.name] for p in parameters if p.block == "training"}
    serving = [p for p in parameters if p.block != "training"]
    calibration = build_serving(base, serving, [figures[p.name] for p in serving]) if serving else base
    return replace(calibration, training=replace(calibration.training, **training))


@dataclass(frozen=True)
class OutOfSample:
    """One group of out-of-sample errors: how many, the median |error|, the signed median (bias), the share
    of records gpuplan puts under the measurement (a pessimistic throughput) and the worst error."""

    n: int
    median_abs: float
    bias: float
    share_under: float
    worst: float


def out_of_sample(errors: list[float]) -> OutOfSample:
    return OutOfSample(
        len(errors),
        statistics.median(abs(e) for e in errors),
        statistics.median(errors),
        sum(e < 0 for e in errors) / len(errors),
        max(errors, key=abs),
    )


def print_leave_one_source_out(results: list[Result]) -> None:
    print("Leave one source out: each source estimated with the figures fitted on every other source")
    print(f"{'metric':<24}{'held-out source':<62}{'n':>4}{'median |err|':>14}{'bias':>9}{'under':>8}{'worst':>9}")
    for metric, group in by_metric(results).items():
        grouped: dict[str, list[float]] = {}
        for result in group:
            grouped.setdefault(result.record.source, []).append(result.error)
        rows = [*sorted(grouped.items()), ("all records", [r.error for r in group])]
        for source, errors in rows:
            s = out_of_sample(errors)
            print(
                f"{METRIC_NAMES[metric]:<24}{source[:61]:<62}{s.n:>4}{s.median_abs:>14.1%}{s.bias:>+9.1%}"
                f"{s.share_under:>8.0%}{s.worst:>+9.0%}"
            )
    print()


def halves(records: list[Record]) -> tuple[set[str], set[str]]:
    """Sources split in two: alternate sources of each kind, largest first, so both halves hold both kinds."""
    first: set[str] = set()
    second: set[str] = set()
    for kind in ("serving", "training"):
        counts: dict[str, int] = {}
        for record in records:
            if record.kind == kind and record.spec is not None:
                counts[record.source] = counts.get(record.source, 0) + 1
        totals = [0, 0]
        for source in sorted(counts, key=lambda s: -counts[s]):
            side = 0 if totals[0] <= totals[1] else 1
            (first if side == 0 else second).add(source)
            totals[side] += counts[source]
    return first, second


# -- printing -----------------------------------------------------------------------------------------------


def print_summary(title: str, results: list[Result]) -> None:
    print(title)
    print(
        f"{'metric':<24}{'n':>5}{'median |err|':>14}{'signed median':>15}"
        f"{'within 20%':>12}{'within 25%':>12}{'worst':>9}  targets"
    )
    for metric, group in by_metric(results).items():
        s = summarise([r.error for r in group])
        verdict = "met" if s.meets else "MISSED"
        print(
            f"{METRIC_NAMES[metric]:<24}{s.n:>5}{s.median_abs:>14.1%}{s.signed_median:>+15.1%}{s.within_20:>12.0%}"
            f"{s.within_25:>12.0%}{s.worst:>+9.0%}  {verdict}"
        )
    print()


def print_sources(results: list[Result]) -> None:
    print("Per source and metric")
    print(f"{'source':<62}{'metric':<24}{'n':>4}{'median |err|':>14}{'signed':>9}{'within 20%':>12}")
    grouped: dict[tuple[str, str], list[Result]] = {}
    for result in results:
        grouped.setdefault((result.record.source, result.metric), []).append(result)
    for (source, metric), group in sorted(grouped.items()):
        s = summarise([r.error for r in group])
        print(
            f"{source[:61]:<62}{METRIC_NAMES[metric]:<24}{s.n:>4}{s.median_abs:>14.1%}{s.signed_median:>+9.1%}{s.within_20:>12.0%}"
        )
    print()


def print_worst(results: list[Result], count: int = 10) -> None:
    print(f"Worst {count} records")
    for result in sorted(results, key=lambda r: -abs(math.log(max(r.estimate, 1e-12) / r.measured)))[:count]:
        print(
            f"{result.error:+7.0%}  {result.record.id} [{METRIC_NAMES[result.metric]}]: measured"
            f" {result.measured:,.4g}, estimate {result.estimate:,.4g}"
        )
        print(f"         {result.diagnosis}")
        for note in result.record.notes:
            print(f"         note: {note}")
    print()


def print_unexpressible(records: list[Record]) -> None:
    missing = [r for r in records if r.spec is None]
    print(f"Records a spec cannot state ({len(missing)} of {len(records)})")
    for record in missing:
        print(f"  {record.id}: {record.reason}")
    print()


def print_calibration(calibration: Calibration) -> None:
    """The fitted figures as the literal to paste into gpuplan/estimate/calibration.py."""
    print("Fitted figures (paste into gpuplan/estimate/calibration.py)")
    print("CALIBRATION = Calibration(\n    engines={")
    for engine_id, e in calibration.engines.items():
        print(
            f'        "{engine_id}": _engine("{engine_id}", {e.gemm_efficiency:.3g}, {e.bandwidth_efficiency:.3g},'
            f" {e.step_overhead_s:.3g}, {e.sequence_overhead_s:.3g}, {e.request_overhead_s:.3g},"
            f" {e.reserves_full_context}),"
        )
    print("    },")
    for name, block in (
        ("serving=ServingMechanisms", calibration.serving),
        ("training=TrainingMechanisms", calibration.training),
    ):
        print(f"    {name}(")
        for key, value in dataclasses.asdict(block).items():
            print(f"        {key}={value:.3g},")
        print("    ),")
    print(")")
    print()


def print_fits(reports: list[FitReport]) -> None:
    """Each fit's convergence, with a warning for every figure it left at a bound."""
    print(
        "Fit convergence (scipy.optimize.least_squares, trust-region reflective within the bounds; loss: Huber"
        f" at {HUBER_DELTA} on log(estimate / measured), each metric weighted equally, + ridge on engine deviations)"
    )
    for report in reports:
        for line in report.lines():
            print(line)
    print()


def print_figures(report: FitReport) -> None:
    """Every figure of one fit in its unit: where it started, where the fit left it, and its bounds."""
    print(f"Figures, {report.label}")
    print(f"{'figure':<40}{'start':>11}{'fitted':>11}{'change':>9}{'lower':>11}{'upper':>11}")
    marks = {hit.parameter.name: f"  at {hit.side} bound" for hit in report.at_bounds}
    for parameter, start, value in zip(report.parameters, report.start, report.values, strict=True):
        change = f"{value / start - 1:+.1%}" if start else ""
        print(
            f"{parameter.name:<40}{start:>11.4g}{value:>11.4g}{change:>9}{parameter.bounds[0]:>11.4g}"
            f"{parameter.bounds[1]:>11.4g}{marks.get(parameter.name, '')}"
        )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", action="store_true", help="refit every figure over all records and print them")
    parser.add_argument("--held-out", action="store_true", help="fit on one half of the sources, measure the other")
    parser.add_argument(
        "--loso",
        action="store_true",
        help="fit on every source but one, measure that one, for each source (serving and training)",
    )
    parser.add_argument(
        "--max-nfev",
        type=int,
        default=None,
        help="least_squares' cap on residual evaluations per fit (scipy: 100 x figures)",
    )
    parser.add_argument(
        "--starts",
        type=int,
        default=1,
        help="starts per fit: the shipped figures, then points drawn within the bounds (the solver is local)",
    )
    args = parser.parse_args()
    records = load_records()
    calibration = CALIBRATION
    reports: list[FitReport] = []
    if args.fit:
        calibration, reports = fit(records, CALIBRATION, args.max_nfev, "all records", args.starts)
    results = evaluate(records, calibration)
    expressed = sum(r.spec is not None for r in records)
    print(f"{len(records)} records ({expressed} expressed as specs), {len(results)} measured figures\n")
    print_summary("All records, calibration " + ("refitted over all of them" if args.fit else "as shipped"), results)
    if args.held_out or args.fit:
        first, second = halves(records)
        fitted_on_first, first_reports = fit(
            [r for r in records if r.source in first], CALIBRATION, args.max_nfev, "half A", args.starts
        )
        fitted_on_second, second_reports = fit(
            [r for r in records if r.source in second], CALIBRATION, args.max_nfev, "half B", args.starts
        )
        reports += first_reports + second_reports
        held = evaluate(records, calibration_for=lambda r: fitted_on_second if r.source in first else fitted_on_first)
        print("Held-out split: half A =", ", ".join(sorted(first)))
        print("                half B =", ", ".join(sorted(second)))
        print_summary("Held out (each record estimated with the figures fitted on the other half)", held)
    if args.loso:
        loso, loso_reports = leave_one_source_out(
            records, CALIBRATION, args.max_nfev, args.starts, ("serving", "training")
        )
        print_leave_one_source_out(loso)
        reports += loso_reports
    if reports:
        print_fits(reports)
    if args.fit:
        for report in reports[:2]:  # the fits over all records: the figures printed below
            print_figures(report)
    print_sources(results)
    print_worst(results)
    print_unexpressible(records)
    if args.fit:
        print_calibration(calibration)


if __name__ == "__main__":
    main()
