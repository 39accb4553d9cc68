"""Speed-model accuracy against published serving and training measurements.

    python benchmarks/speed_accuracy.py              # the shipped calibration, every record
    python benchmarks/speed_accuracy.py --held-out   # also: each half of the sources predicted by the other's fit
    python benchmarks/speed_accuracy.py --fit        # refit the calibrated figures over all records; prints them

Every record of ``benchmarks/data/speed-calibration.yaml`` is turned into the spec it describes and run
through the path users run (load -> validate -> resolve -> analyse, as ``gpuplan estimate`` does); the
estimate's TTFT, TPOT, aggregate output tokens/s or training tokens/s per GPU is compared with the
published figure. Records a spec cannot state are listed with the reason. Error = estimate / measured - 1:
negative means gpuplan is below the measurement (an optimistic latency, a pessimistic throughput).
Targets (issue 10), per metric: median |error| <= 15%, >= 75% of records within +-25%, |signed median| <= 10%.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
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
from gpuplan.estimate.calibration import (  # noqa: E402
    CALIBRATION,
    Calibration,
    ErrorBand,
)
from gpuplan.estimate.performance import Efficiency  # noqa: E402
from gpuplan.estimate.serving_speed import ServingWorkload, burst_ttft, serving_speed  # noqa: E402
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
BAND_KEYS = {"ttft_ms": "ttft", "tpot_ms": "tpot", "tokens_per_s": "tokens_per_s"}
BAND_KEYS["training_tokens_per_s_per_gpu"] = "training_tokens_per_s"
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
            f"MFU {speed.mfu:.0%}, exposed sync {sync:.0%} of the step, {f.setup.micro_batch}x{f.setup.seq_len}"
            f" x{f.setup.gradient_accumulation}, TP{f.setup.tensor_parallel} PP{f.setup.pipeline_parallel}"
            f" DP{f.setup.data_parallel} {f.setup.sharding}, {f.setup.precision}"
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


def band(metric: str, errors: list[float], share: float = 0.9) -> ErrorBand:
    """The +-bound that ``share`` of the records' errors fall within (nearest-rank quantile of |error|)."""
    absolute = sorted(abs(e) for e in errors)
    index = min(len(absolute) - 1, math.ceil(share * len(absolute)) - 1)
    return ErrorBand(
        BAND_KEYS[metric], len(errors), share, round(absolute[index], 2), round(statistics.median(errors), 3)
    )


def by_metric(results: list[Result]) -> dict[str, list[Result]]:
    grouped: dict[str, list[Result]] = {}
    for result in results:
        grouped.setdefault(result.metric, []).append(result)
    return {metric: grouped[metric] for metric in METRICS if metric in grouped}


# -- fitting ------------------------------------------------------------------------------------------------

# Each fitted figure: (where it lives, lower bound, upper bound). Efficiencies stay within (0, 1].
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
    "elementwise_bytes": (0.0, 600.0),
    "link_efficiency": (0.2, 1.0),
    "overlap": (0.0, 1.0),
}
ENGINE_PENALTY = 0.002  # ridge on each engine's deviation from the generic figure: few records, little move


def _clip(value: float, bounds: tuple[float, float]) -> float:
    return min(max(value, bounds[0]), bounds[1])


def huber(x: float, delta: float = 0.25) -> float:
    return x * x / 2 if abs(x) <= delta else delta * (abs(x) - delta / 2)


def loss(results: list[Result]) -> float:
    """Mean Huber loss of log(estimate / measured), each metric weighted equally."""
    grouped = by_metric(results)
    total = 0.0
    for group in grouped.values():
        total += sum(huber(math.log(max(r.estimate, 1e-12) / r.measured)) for r in group) / len(group)
    return total / max(1, len(grouped))


def nelder_mead(function: Callable[[list[float]], float], start: list[float], step: float, rounds: int) -> list[float]:
    """Minimise ``function`` from ``start`` (plain Nelder-Mead; no dependencies beyond the standard library)."""
    n = len(start)
    simplex = [list(start)] + [[x + (step if i == j else 0.0) for j, x in enumerate(start)] for i in range(n)]
    values = [function(point) for point in simplex]
    for _ in range(rounds):
        order = sorted(range(n + 1), key=lambda i: values[i])
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centroid = [sum(point[j] for point in simplex[:-1]) / n for j in range(n)]
        worst = simplex[-1]
        reflected = [c + (c - w) for c, w in zip(centroid, worst, strict=True)]
        value = function(reflected)
        if value < values[0]:
            expanded = [c + 2 * (c - w) for c, w in zip(centroid, worst, strict=True)]
            expanded_value = function(expanded)
            simplex[-1], values[-1] = (expanded, expanded_value) if expanded_value < value else (reflected, value)
        elif value < values[-2]:
            simplex[-1], values[-1] = reflected, value
        else:
            contracted = [c + 0.5 * (w - c) for c, w in zip(centroid, worst, strict=True)]
            contracted_value = function(contracted)
            if contracted_value < values[-1]:
                simplex[-1], values[-1] = contracted, contracted_value
            else:
                best = simplex[0]
                simplex = [best] + [
                    [b + 0.5 * (x - b) for b, x in zip(best, point, strict=True)] for point in simplex[1:]
                ]
                values = [values[0]] + [function(point) for point in simplex[1:]]
    return simplex[min(range(n + 1), key=lambda i: values[i])]


def _scaled(start: float, bounds: tuple[float, float], x: float) -> float:
    """A figure moved from ``start`` by x: a log-factor for efficiencies, x quarter-ranges for overheads."""
    if start <= 0 or bounds[0] == 0.0:
        return _clip(start + x * bounds[1] / 4, bounds)
    return _clip(start * math.exp(x), bounds)


def fit_serving(records: list[Record], base: Calibration, rounds: int) -> Calibration:
    """Refit the shared mechanisms, the generic engine, and each engine's penalised deviation from it.

    An engine with few records stays near the generic figures (ridge penalty on its deviations); an
    engine with none in the data (SGLang today) keeps them exactly.
    """
    serving = [r for r in records if r.kind == "serving" and r.workload is not None]
    engines_seen = sorted({r.workload.engine for r in serving} - {"generic"})
    names: list[tuple[str, str, str]] = [("serving", key, "") for key in SERVING_GLOBALS]
    names += [("generic", key, "") for key in ENGINE_FIGURES]
    names += [("engine", key, engine) for engine in engines_seen for key in ENGINE_FIGURES]

    def build(x: list[float]) -> tuple[Calibration, float]:
        mechanisms, generic = base.serving, base.engines["generic"]
        for value, (where, key, _) in zip(x, names, strict=True):
            if where == "serving":
                moved = _scaled(getattr(base.serving, key), SERVING_GLOBALS[key], value)
                mechanisms = replace(mechanisms, **{key: moved})
            elif where == "generic":
                moved = _scaled(getattr(base.engines["generic"], key), ENGINE_FIGURES[key], value)
                generic = replace(generic, **{key: moved})
        engines = {
            engine_id: replace(
                generic,
                id=engine_id,
                name=profile.name,
                reserves_full_context=profile.reserves_full_context,
                first_token_from_decode_step=profile.first_token_from_decode_step,
            )
            for engine_id, profile in base.engines.items()
        }
        penalty = 0.0
        for value, (where, key, engine) in zip(x, names, strict=True):
            if where == "engine":
                moved = _scaled(getattr(generic, key), ENGINE_FIGURES[key], value)
                engines[engine] = replace(engines[engine], **{key: moved})
                penalty += ENGINE_PENALTY * value * value
        return replace(base, serving=mechanisms, engines=engines), penalty

    def objective(x: list[float]) -> float:
        calibration, penalty = build(x)
        return loss(evaluate_fast(serving, calibration)) + penalty

    best = [0.0] * len(names)
    for step in (0.3, 0.1):  # a restart from the first optimum escapes a collapsed simplex
        best = nelder_mead(objective, best, step, rounds // 2)
    return build(best)[0]


def fit_training(records: list[Record], base: Calibration, rounds: int) -> Calibration:
    training = [r for r in records if r.kind == "training" and r.workload is not None]
    keys = list(TRAINING_FIGURES)

    def build(x: list[float]) -> Calibration:
        figures = {k: _scaled(getattr(base.training, k), TRAINING_FIGURES[k], v) for k, v in zip(keys, x, strict=True)}
        return replace(base, training=replace(base.training, **figures))

    best = [0.0] * len(keys)
    for step in (0.3, 0.1):
        best = nelder_mead(lambda x: loss(evaluate_fast(training, build(x))), best, step, rounds // 2)
    return build(best)


def fit(records: list[Record], base: Calibration, rounds: int) -> Calibration:
    return fit_training(records, fit_serving(records, base, rounds), rounds)


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
        f"{'metric':<24}{'n':>5}{'median |err|':>14}{'signed median':>15}{'within 20%':>12}{'within 25%':>12}{'worst':>9}  targets"
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
    if calibration.bands:
        print("    bands={")
        for key, b in calibration.bands.items():
            print(f'        "{key}": ErrorBand("{key}", {b.records}, {b.share}, {b.within}, {b.signed_median}),')
        print("    },")
    print(")")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", action="store_true", help="refit every figure over all records and print them")
    parser.add_argument("--held-out", action="store_true", help="fit on one half of the sources, measure the other")
    parser.add_argument("--rounds", type=int, default=1500, help="Nelder-Mead iterations per fit")
    args = parser.parse_args()
    records = load_records()
    calibration = CALIBRATION
    if args.fit:
        calibration = fit(records, CALIBRATION, args.rounds)
    results = evaluate(records, calibration)
    expressed = sum(r.spec is not None for r in records)
    print(f"{len(records)} records ({expressed} expressed as specs), {len(results)} measured figures\n")
    print_summary("All records, calibration " + ("refitted over all of them" if args.fit else "as shipped"), results)
    if args.held_out or args.fit:
        first, second = halves(records)
        fitted_on_first = fit([r for r in records if r.source in first], CALIBRATION, args.rounds)
        fitted_on_second = fit([r for r in records if r.source in second], CALIBRATION, args.rounds)
        held = evaluate(records, calibration_for=lambda r: fitted_on_second if r.source in first else fitted_on_first)
        print("Held-out split: half A =", ", ".join(sorted(first)))
        print("                half B =", ", ".join(sorted(second)))
        print_summary("Held out (each record estimated with the figures fitted on the other half)", held)
        if args.fit:
            bands = {BAND_KEYS[m]: band(m, [r.error for r in group]) for m, group in by_metric(held).items()}
            calibration = replace(calibration, bands=bands)
    print_sources(results)
    print_worst(results)
    print_unexpressible(records)
    if args.fit:
        print_calibration(calibration)


if __name__ == "__main__":
    main()
