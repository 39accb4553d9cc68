"""Generate gpuplan's error bands from runs the model was never tuned on: memory and speed.

    python benchmarks/bands.py            # print the bands
    python benchmarks/bands.py --write    # regenerate gpuplan/estimate/memory_bands.json and speed_bands.json
    python benchmarks/bands.py --check    # exit 1 when the package data and the records disagree

Memory.
The records are ``benchmarks/data/published_finetune_peaks.yaml`` (see finetune_peaks.py): published peaks
from sources no constant of gpuplan was set from. Leave-one-source-out validation refits whatever was tuned
on the other sources and scores the source left out; the memory model fits no parameter to any of these
records, so each record's out-of-sample error is its error as it stands, and the rotation changes nothing.
(The in-sample sources, PyTorch's own accounting and the vLLM logs the constants were read from, are not
used: an error on a record a constant was set from says nothing about the next job.)

For each fine-tuning kind (full, LoRA, QLoRA) and figure (``device``: the per-GPU figure the fit verdict
uses, scored against the counters that include the allocator's cache: reserved, against gpuplan's reserved
figure, and device and unknown, against the device figure; ``allocated``: the tensor peak, scored against
max_memory_allocated) the band keeps every record's
ratio measured / estimate, sorted. gpuplan reads the pessimistic edge at a confidence c as the estimate
times the ratio that at least c of the records stay at or below (gpuplan/estimate/bands.py). A kind
with fewer than MIN_RECORDS records of a figure takes the ratios of every fine-tuning kind for it, and says
so ("pooled").

Speed. The speed model's figures are fitted (benchmarks/speed_accuracy.py), so its bands come from
leave-one-source-out validation: for each source of ``benchmarks/data/speed-calibration.yaml`` the serving
or training figures are refitted on every other source and the source left out is estimated with them
(``--write`` refits, about a minute; the fitted figures of every fold are kept in the file so that
``--check`` re-scores them without refitting). The published load runs of
``benchmarks/data/published_load_runs.yaml`` (closed-loop clients, steady streams, bursts) were never
fitted on and are scored as they stand. For each figure (TTFT, TPOT, output tokens/s; training tokens/s)
and serving load shape the band keeps every ratio measured / estimate, sorted; TPOT's are grouped by answer
length too (short answers apart, where a load shape has MIN_RECORDS runs of them: gpuplan/estimate/bands.py,
``tpot_group``); a load shape with fewer than MIN_RECORDS records of a figure takes every shape's.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml
from finetune_peaks import KINDS, TENSOR_PEAK_COUNTERS, load, score

from gpuplan.estimate.bands import SHORT_ANSWERS, MemoryBand, SpeedBand, tpot_group
from gpuplan.estimate.calibration import CALIBRATION

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "gpuplan" / "estimate" / "memory_bands.json"
SPEED_TARGET = ROOT / "gpuplan" / "estimate" / "speed_bands.json"
# Below this many records the order statistics of one kind say little (the 0.9 edge of four records is
# the worst of them); the kind then borrows every fine-tuning record of the figure.
MIN_RECORDS = 5
FIGURES = ("device", "allocated")


def figure_of(counter: str) -> str:
    return "allocated" if counter in TENSOR_PEAK_COUNTERS else "device"


def pooled_bands(groups: dict[str, list[tuple[float, str]]]) -> dict[str, dict[str, Any]]:
    """Each group's band from its (ratio, source) pairs, sorted; a group with fewer than MIN_RECORDS of its
    own takes every group's (``pooled``)."""
    pooled = sorted(item for items in groups.values() for item in items)
    out = {}
    for group, items in groups.items():
        own = sorted(items)
        used = own if len(own) >= MIN_RECORDS else pooled
        out[group] = {
            "records": len(used),
            "own_records": len(own),
            "pooled": used is pooled,
            "sources": sorted({source for _, source in used}),
            "ratios": [round(ratio, 4) for ratio, _ in used],
        }
    return out


def serving_band() -> dict[str, Any]:
    """The serving KV pool's band: measured / estimate of every out-of-sample engine startup log that started
    (benchmarks/serving_memory.py), one group, all engines together."""
    import serving_memory

    started, _ = serving_memory.score()
    rows = [(row.ratio, row.source) for row in started if row.estimate > 0]
    return pooled_bands({"kv_pool": rows})


def bands(data: dict[str, Any] | None = None) -> dict[str, Any]:
    scored, _ = score(data if data is not None else load())
    ratios: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for row in scored:
        ratio = row.comparison.measured / row.comparison.estimate
        ratios.setdefault((row.kind, figure_of(row.counter)), []).append((ratio, row.comparison.group))
    memory: dict[str, Any] = {}
    for figure in FIGURES:
        for kind, band in pooled_bands({kind: ratios.get((kind, figure), []) for kind in KINDS}).items():
            memory.setdefault(kind, {})[figure] = band
    memory["serving"] = serving_band()
    return {
        "generated_by": "python benchmarks/bands.py --write",
        "records_files": [
            "benchmarks/data/published_finetune_peaks.yaml",
            "benchmarks/data/vllm_published_logs.yaml",
            "benchmarks/data/engine_startup_logs.yaml",
        ],
        "method": (
            "ratio measured / estimate of every published fine-tuning peak, and of the KV cache pool of every engine"
            " startup log, no constant of gpuplan was set from; leave-one-source-out equals the plain error, as the"
            " memory models fit nothing to these records"
        ),
        "min_records": MIN_RECORDS,
        "memory": memory,
    }


# The benchmarks' metric names -> the band's; requests/s has no band (no output states it with one).
SPEED_METRICS = {
    "ttft_ms": "ttft",
    "tpot_ms": "tpot",
    "tokens_per_s": "tokens_per_s",
    "output_tokens_per_s": "tokens_per_s",
    "training_tokens_per_s_per_gpu": "training_tokens_per_s",
}
ARRIVALS = ("closed-loop", "steady", "burst")


def refit_folds() -> list[dict[str, Any]]:
    """Leave-one-source-out over the speed calibration: per source, the figures fitted on the others."""
    import speed_accuracy

    records = speed_accuracy.load_records()
    _, reports = speed_accuracy.leave_one_source_out(records, CALIBRATION, kinds=("serving", "training"))
    return [
        {
            "held_out": report.label.split("all but ", 1)[1],  # the fit labels itself "<kind>, all but <source>"
            "figures": {p.name: value for p, value in zip(report.parameters, report.values, strict=True)},
        }
        for report in reports
    ]


def _group(metric: str, arrival: str, output_tokens: float) -> str:
    """The band a ratio joins: its load shape, and for TPOT its answer length's group."""
    return tpot_group(arrival, output_tokens) if metric == "tpot" else arrival


def speed_ratios(folds: list[dict[str, Any]]) -> list[tuple[str, str, float, str]]:
    """(band metric, group, measured / estimate, source) of every speed record, out of sample."""
    import load_accuracy
    import speed_accuracy

    records = speed_accuracy.load_records()
    rows: list[tuple[str, str, float, str]] = []
    for fold in folds:
        fitted = speed_accuracy.with_figures(CALIBRATION, fold["figures"])
        held_out = [r for r in records if r.source == fold["held_out"]]
        for result in speed_accuracy.evaluate_fast(held_out, fitted):
            spec, metric = result.record.spec, SPEED_METRICS[result.metric]
            if spec is None or spec.serve is None:
                group = "training"
            else:
                group = _group(metric, spec.serve.arrival, spec.serve.output_tokens)
            rows.append((metric, group, result.measured / result.estimate, fold["held_out"]))
    load_runs = yaml.safe_load(load_accuracy.DATA.read_text(encoding="utf-8"))
    answers = {run["id"]: (load_accuracy.lengths(run) or (0.0, math.inf))[1] for run in load_runs}
    for run in load_accuracy.evaluate(load_runs)[0]:
        if run.metric in SPEED_METRICS:
            metric = SPEED_METRICS[run.metric]
            group = _group(metric, run.arrival, answers[run.record])
            rows.append((metric, group, run.measured / run.estimated, f"load runs: {run.source}"))
    return rows


def speed_bands(folds: list[dict[str, Any]]) -> dict[str, Any]:
    ratios: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for metric, group, ratio, source in speed_ratios(folds):
        ratios.setdefault((metric, group), []).append((ratio, source))
    speed: dict[str, Any] = {}
    for metric in dict.fromkeys(SPEED_METRICS.values()):
        shapes = ("training",) if metric == "training_tokens_per_s" else ARRIVALS
        speed[metric] = pooled_bands({shape: ratios.get((metric, shape), []) for shape in shapes})
    # Short answers have a TPOT band of their own under a load shape with enough runs of them; under the
    # others they keep the shape's (gpuplan/estimate/bands.py reads it so), the nearer evidence than every
    # shape's together.
    for arrival in ARRIVALS:
        short = ratios.get(("tpot", f"{arrival}, {SHORT_ANSWERS}"), [])
        if len(short) >= MIN_RECORDS:
            speed["tpot"].update(pooled_bands({f"{arrival}, {SHORT_ANSWERS}": short}))
    return {
        "generated_by": "python benchmarks/bands.py --write",
        "records_files": ["benchmarks/data/speed-calibration.yaml", "benchmarks/data/published_load_runs.yaml"],
        "method": (
            "ratio measured / estimate; calibration records estimated with the figures fitted on every other source "
            "(leave-one-source-out, the folds below), published load runs as they stand (nothing was fitted on them)"
        ),
        "min_records": MIN_RECORDS,
        "speed": speed,
        "folds": folds,
    }


def render_speed(document: dict[str, Any]) -> str:
    lines = [f"{'figure':<23}{'shape':<27}{'records':>8}  {'0.1':>7}{'median':>7}{'0.9':>7}{'worst':>7}  sources"]
    for metric, shapes in document["speed"].items():
        for shape, data in shapes.items():
            band = SpeedBand(metric, shape, tuple(data["ratios"]), data["pooled"])
            worst = band.ratios[0] if metric in ("tokens_per_s", "training_tokens_per_s") else band.ratios[-1]
            edges = "".join(f"{band.ratio(c):>7.2f}" for c in (0.1, 0.5, 0.9)) + f"{worst:>7.2f}"
            pooled = f" (pooled; {data['own_records']} of its own)" if band.pooled else ""
            lines.append(f"{metric:<23}{shape:<27}{band.records:>8}  {edges}  {len(data['sources'])} sources{pooled}")
    return "\n".join(lines)


def render(document: dict[str, Any]) -> str:
    lines = [f"{'kind':<8}{'figure':<10}{'records':>8}  {'median':>7}{'0.8':>7}{'0.9':>7}{'worst':>7}  sources"]
    for kind, figures in document["memory"].items():
        for figure, data in figures.items():
            band = MemoryBand(kind, figure, tuple(data["ratios"]), data["pooled"])
            # the KV pool's danger is the low side: its edges are read there (0.5, 0.2, 0.1, the lowest)
            levels = (0.5, 0.2, 0.1, 0.0) if kind == "serving" else (0.5, 0.8, 0.9, 1.0)
            edges = "".join(f"{band.ratio(c):>7.2f}" for c in levels)
            pooled = f" (pooled; {data['own_records']} of its own)" if band.pooled else ""
            lines.append(f"{kind:<8}{figure:<10}{band.records:>8}  {edges}  {', '.join(data['sources'])}{pooled}")
    return "\n".join(lines) + "\n(serving kv_pool: the low side, 0.5 / 0.2 / 0.1 / lowest: less KV cache is the danger)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="regenerate the package data (refits the speed folds)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the package data is out of date")
    args = parser.parse_args()
    document = bands()
    text = json.dumps(document, indent=1) + "\n"
    stored = json.loads(SPEED_TARGET.read_text(encoding="utf-8")) if SPEED_TARGET.exists() else None
    folds = refit_folds() if args.write or stored is None else stored["folds"]
    speed = speed_bands(folds)
    speed_text = json.dumps(speed, indent=1) + "\n"
    if args.write:
        TARGET.write_text(text, encoding="utf-8")
        SPEED_TARGET.write_text(speed_text, encoding="utf-8")
    print(render(document))
    print()
    print(render_speed(speed))
    stale = [
        target
        for target, expected in ((TARGET, text), (SPEED_TARGET, speed_text))
        if not target.exists() or target.read_text(encoding="utf-8") != expected
    ]
    if args.check and stale:
        for target in stale:
            print(f"{target.relative_to(ROOT)} is out of date: run python benchmarks/bands.py --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
