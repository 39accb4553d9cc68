"""Generate gpuplan's memory error bands from fine-tuning runs the model was never tuned on.

    python benchmarks/bands.py            # print the bands
    python benchmarks/bands.py --write    # regenerate gpuplan/estimate/memory_bands.json
    python benchmarks/bands.py --check    # exit 1 when the package data and the records disagree

The records are ``benchmarks/data/published_finetune_peaks.yaml`` (see finetune_peaks.py): published peaks
from sources no constant of gpuplan was set from. Leave-one-source-out validation refits whatever was tuned
on the other sources and scores the source left out; the memory model fits no parameter to any of these
records, so each record's out-of-sample error is its error as it stands, and the rotation changes nothing.
(The in-sample sources, PyTorch's own accounting and the vLLM logs the constants were read from, are not
used: an error on a record a constant was set from says nothing about the next job.)

For each fine-tuning kind (full, LoRA, QLoRA) and figure (``device``: the per-GPU figure the fit verdict
uses, scored against counters that include the allocator's cache or the CUDA context: reserved, device,
unknown; ``allocated``: the tensor peak, scored against max_memory_allocated) the band keeps every record's
ratio measured / estimate, sorted. gpuplan reads the pessimistic edge at a confidence c as the estimate
times the ratio that at least c of the records stay at or below (gpuplan/estimate/memory_bands.py). A kind
with fewer than MIN_RECORDS records of a figure takes the ratios of every fine-tuning kind for it, and says
so ("pooled").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from finetune_peaks import KINDS, TENSOR_PEAK_COUNTERS, load, score

from gpuplan.estimate.memory_bands import MemoryBand

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "gpuplan" / "estimate" / "memory_bands.json"
# Below this many records the order statistics of one kind say little (the 0.9 edge of four records is
# the worst of them); the kind then borrows every fine-tuning record of the figure.
MIN_RECORDS = 5
FIGURES = ("device", "allocated")


def figure_of(counter: str) -> str:
    return "allocated" if counter in TENSOR_PEAK_COUNTERS else "device"


def bands(data: dict[str, Any] | None = None) -> dict[str, Any]:
    scored, _ = score(data if data is not None else load())
    ratios: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for row in scored:
        ratio = row.comparison.measured / row.comparison.estimate
        ratios.setdefault((row.kind, figure_of(row.counter)), []).append((ratio, row.comparison.group))
    memory: dict[str, Any] = {}
    for figure in FIGURES:
        pooled = sorted(item for kind in KINDS for item in ratios.get((kind, figure), []))
        for kind in KINDS:
            own = sorted(ratios.get((kind, figure), []))
            used = own if len(own) >= MIN_RECORDS else pooled
            memory.setdefault(kind, {})[figure] = {
                "records": len(used),
                "own_records": len(own),
                "pooled": used is pooled,
                "sources": sorted({group for _, group in used}),
                "ratios": [round(ratio, 4) for ratio, _ in used],
            }
    return {
        "generated_by": "python benchmarks/bands.py --write",
        "records_file": "benchmarks/data/published_finetune_peaks.yaml",
        "method": (
            "ratio measured / estimate of every published fine-tuning peak no constant of gpuplan was set from; "
            "leave-one-source-out equals the plain error, as the memory model fits nothing to these records"
        ),
        "min_records": MIN_RECORDS,
        "memory": memory,
    }


def render(document: dict[str, Any]) -> str:
    lines = [f"{'kind':<7}{'figure':<11}{'records':>8}  {'median':>7}{'0.8':>7}{'0.9':>7}{'worst':>7}  sources"]
    for kind, figures in document["memory"].items():
        for figure, data in figures.items():
            band = MemoryBand(kind, figure, tuple(data["ratios"]), data["pooled"])
            edges = "".join(f"{band.ratio(c):>7.2f}" for c in (0.5, 0.8, 0.9, 1.0))
            pooled = f" (pooled; {data['own_records']} of its own)" if band.pooled else ""
            lines.append(f"{kind:<7}{figure:<11}{band.records:>8}  {edges}  {', '.join(data['sources'])}{pooled}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="regenerate the package data")
    parser.add_argument("--check", action="store_true", help="exit 1 when the package data is out of date")
    args = parser.parse_args()
    document = bands()
    text = json.dumps(document, indent=1) + "\n"
    if args.write:
        TARGET.write_text(text, encoding="utf-8")
    print(render(document))
    if args.check and TARGET.read_text(encoding="utf-8") != text:
        print(f"{TARGET.relative_to(ROOT)} is out of date: run python benchmarks/bands.py --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
