"""Fine-tuning memory against published peaks gpuplan has never seen: an out-of-sample check.

    python benchmarks/finetune_peaks.py [--format text|json] [--check]

``benchmarks/data/published_finetune_peaks.yaml`` holds fine-tuning memory peaks that projects published with
their settings (torchtune's docs and README, PEFT's method comparison and docs, llama-recipes, Answer.AI's
FSDP-QLoRA benchmarks), each re-expressed as a gpuplan spec fragment and tagged with the counter the source
printed. None of these records was used to tune or calibrate anything in gpuplan, and none of their sources
is among the records ``benchmarks/accuracy.py`` scores, so the figures below are out of sample by
construction; keep it that way (a record used to fit a constant belongs in accuracy.py's data instead).

Each spec goes through the path ``gpuplan estimate`` takes (``accuracy.estimate``: load, validate, resolve,
analyse); there is no estimator code here. The measured peak is compared with gpuplan's figure for the same
counter: the tensor peak (``allocated_bytes``, as accuracy.py's finetune_tensor_peak) for
torch.cuda.max_memory_allocated and the allocator's "active" peak; the allocator's segments
(``reserved_bytes``: the tensor peak and the caching allocator's cache) for max_memory_reserved; the device
figure (``per_gpu_bytes``: those and the memory outside the allocator) for device-level readings
(nvidia-smi, W&B charts) and for unknown counters. The error
is (estimate - measured) / measured: negative means gpuplan is under, and an underestimate is an
out-of-memory crash waiting to happen. The table is by job kind (full, LoRA, QLoRA) and by counter, first
over every record, then over the records whose settings the spec expresses fully and whose source documents
no cause outside a training step. Runs that ran out of memory are listed with gpuplan's verdict on the GPUs
they ran on, judged as the fit rules and the planner judge them: at the pessimistic edge of the measured
error at the spec's plan.confidence (default 0.9; fits, at risk, or does not fit); ``--check`` exits 1
when gpuplan calls one of them a fit.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import GIB, Comparison, _tensor_peak, job_estimate, summarise

DATA = Path(__file__).resolve().parent / "data" / "published_finetune_peaks.yaml"
KINDS = ("full", "lora", "qlora")
COUNTERS = ("allocated", "reserved", "device", "unknown")
TENSOR_PEAK_COUNTERS = frozenset({"allocated"})  # the others include the allocator's cache or the CUDA context


@dataclass(frozen=True)
class Scored:
    comparison: Comparison
    kind: str
    counter: str
    clean: bool  # the spec expresses every setting and no documented cause lies outside a training step


@dataclass(frozen=True)
class OomVerdict:
    record: str
    kind: str
    what: str
    gpu: str
    gpus: int
    estimate_gib: float
    usable_gib: float
    fits: bool  # at the pessimistic edge: what a decision rests on
    fits_estimate: bool  # the estimate itself ("at risk" when this holds and ``fits`` does not)
    codes: tuple[str, ...]


def load(path: Path = DATA) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def estimate_gib(record: dict[str, Any], finetune: dict[str, Any]) -> float:
    """gpuplan's figure for the counter the record's source printed."""
    if record["counter"] in TENSOR_PEAK_COUNTERS:
        return _tensor_peak(finetune)
    if record["counter"] == "reserved":
        return finetune["reserved_bytes"] / GIB
    return finetune["per_gpu_bytes"] / GIB


def finetune_estimate(record: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return job_estimate(record, "finetune")


def score(data: dict[str, Any]) -> tuple[list[Scored], list[OomVerdict]]:
    scored, ooms = [], []
    for record in data["records"]:
        finetune, codes = finetune_estimate(record)
        value = estimate_gib(record, finetune)
        if record["outcome"] == "oom":
            ooms.append(
                OomVerdict(
                    record["id"],
                    record["kind"],
                    record["what"],
                    finetune["gpu"],
                    finetune["gpus"],
                    value,
                    finetune["usable_bytes"] / GIB,
                    finetune["per_gpu_bytes_band"]["high"] <= finetune["usable_bytes"],
                    bool(finetune["fits"]),
                    tuple(codes),
                )
            )
            continue
        comparison = Comparison(
            record["id"],
            record["group"],
            record["what"],
            float(record["measured_gib"]),
            value,
            record.get("cause", ""),
        )
        clean = not record.get("gaps") and not record.get("cause")
        scored.append(Scored(comparison, record["kind"], record["counter"], clean))
    return scored, ooms


def summary(rows: list[Scored]) -> dict[str, Any] | None:
    if not rows:
        return None
    base = summarise([row.comparison for row in rows])
    worst = min(rows, key=lambda row: row.comparison.error)
    return {
        "n": base["n"],
        "median_abs_pct": round(base["median_abs"], 1),
        "signed_median_pct": round(base["signed_median"], 1),
        "under_share": round(base["under_share"], 3),
        "worst_under": (
            {"record": worst.comparison.record, "error_pct": round(worst.comparison.error, 1)}
            if worst.comparison.error < 0
            else None
        ),
    }


def table(rows: list[Scored]) -> list[tuple[str, dict[str, Any]]]:
    """(label, summary) by kind, by kind and counter, by counter, and over everything."""
    lines: list[tuple[str, dict[str, Any]]] = []
    for kind in KINDS:
        of_kind = [row for row in rows if row.kind == kind]
        if (total := summary(of_kind)) is None:
            continue
        lines.append((f"{kind}", total))
        for counter in COUNTERS:
            if (part := summary([row for row in of_kind if row.counter == counter])) is not None:
                lines.append((f"  {kind} / {counter}", part))
    for counter in COUNTERS:
        if (part := summary([row for row in rows if row.counter == counter])) is not None:
            lines.append((f"counter {counter}", part))
    if (everything := summary(rows)) is not None:
        lines.append(("all records", everything))
    return lines


def render_table(title: str, lines: list[tuple[str, dict[str, Any]]]) -> str:
    out = [title, f"{'':<26}{'n':>4}{'median |err|':>14}{'signed median':>15}{'under':>7}  worst under"]
    for label, part in lines:
        worst = part["worst_under"]
        worst_text = f"{worst['record']} {worst['error_pct']:+.1f}%" if worst else "-"
        out.append(
            f"{label:<26}{part['n']:>4}{part['median_abs_pct']:>13.1f}%{part['signed_median_pct']:>+14.1f}%"
            f"{part['under_share']:>7.0%}  {worst_text}"
        )
    return "\n".join(out)


def report(data: dict[str, Any], scored: list[Scored], ooms: list[OomVerdict]) -> dict[str, Any]:
    records = [
        {
            "id": row.comparison.record,
            "source_group": row.comparison.group,
            "kind": row.kind,
            "counter": row.counter,
            "measured_gib": row.comparison.measured,
            "estimate_gib": round(row.comparison.estimate, 3),
            "error_pct": round(row.comparison.error, 1),
            "clean": row.clean,
        }
        for row in scored
    ]
    return {
        "out_of_sample": True,
        "records": records,
        "table_all": [{"group": label.strip(), **part} for label, part in table(scored)],
        "table_clean": [{"group": label.strip(), **part} for label, part in table([r for r in scored if r.clean])],
        "oom": [
            {
                "id": verdict.record,
                "kind": verdict.kind,
                "what": verdict.what,
                "gpu": verdict.gpu,
                "gpus": verdict.gpus,
                "estimate_gib": round(verdict.estimate_gib, 2),
                "usable_gib": round(verdict.usable_gib, 2),
                "fits": verdict.fits,
                "fits_estimate": verdict.fits_estimate,
                "codes": list(verdict.codes),
            }
            for verdict in ooms
        ],
        "not_expressible": [{"id": item["id"], "reason": item["reason"]} for item in data.get("not_expressible", [])],
    }


def render_text(data: dict[str, Any], scored: list[Scored], ooms: list[OomVerdict], quiet: bool = False) -> str:
    out = [f"{'record':<8}{'kind':<7}{'counter':<11}{'measured':>10}{'estimate':>10}{'error':>9}  what"]
    for row in [] if quiet else scored:
        c = row.comparison
        flag = "" if row.clean else "  [gap or documented cause]"
        out.append(
            f"{c.record:<8}{row.kind:<7}{row.counter:<11}{c.measured:>10.2f}{c.estimate:>10.2f}{c.error:>+8.1f}%"
            f"  {c.what[:64]}{flag}"
        )
    out = out[1:] if quiet else out
    out += [
        "",
        render_table(f"Out of sample, every record ({len(scored)}; GiB, negative = gpuplan under):", table(scored)),
    ]
    clean = [row for row in scored if row.clean]
    out += ["", render_table(f"Records the spec expresses fully, no documented cause ({len(clean)}):", table(clean))]
    out += ["", "Runs that ran out of memory, and gpuplan's verdict on the GPUs they ran on:"]
    for verdict in ooms:
        said = (
            "FITS (gpuplan misses this OOM)"
            if verdict.fits
            else ("at risk" if verdict.fits_estimate else "does not fit")
        )
        findings = ", ".join(c for c in verdict.codes if c in ("GP201", "GP202", "GP208", "GP301")) or "none"
        out.append(
            f"  {verdict.record:<7}{verdict.gpus} x {verdict.gpu}: {verdict.estimate_gib:.2f} GiB per GPU of "
            f"{verdict.usable_gib:.2f} usable -> {said} (fit findings: {findings}); {verdict.what[:80]}"
        )
    out += ["", "Published figures a spec cannot express (not compared):"]
    out += [f"  {item['id']}: {item['reason']}" for item in data.get("not_expressible", [])]
    return "\n".join(out).lstrip("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--check", action="store_true", help="exit 1 when gpuplan calls an OOM run a fit")
    parser.add_argument("--quiet", action="store_true", help="text: the tables and verdicts, not every record")
    args = parser.parse_args(argv)
    data = load()
    scored, ooms = score(data)
    if args.format == "json":
        print(json.dumps(report(data, scored, ooms), indent=2))
    else:
        print(render_text(data, scored, ooms, quiet=args.quiet))
    return 1 if args.check and any(verdict.fits for verdict in ooms) else 0


if __name__ == "__main__":
    raise SystemExit(main())
