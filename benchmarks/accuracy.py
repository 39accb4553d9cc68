"""Estimator accuracy against PyTorch's own accounting and published measurements.

    python benchmarks/accuracy.py [--reference ../shared/reference]

Part 1: every row of groundtruth.md (MemTracker peaks: live tensor bytes, no CUDA context) against the
estimator's tensor peak (``TrainingMemory.tensor_peak`` / ``hf_prefill_peak``), plus KV bytes.
Part 2: measured-calibration.yaml (torch.cuda.max_memory_allocated as each source printed it) against
the same tensor peak for the setup each record describes; the mapping of each record is in RECORDS.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuplan.catalog import get_model  # noqa: E402
from gpuplan.estimate.serving import hf_prefill_peak, weight_bytes  # noqa: E402
from gpuplan.estimate.training import NF4_BYTES_NO_DQ, NF4_BYTES_PER_PARAM, TrainingSetup, estimate_training  # noqa: E402

GIB = 2**30
GROUNDTRUTH_MODELS = {
    "llama3.2-1b": "llama-3.2-1b",
    "llama3-8b": "llama-3-8b",
    "llama3-70b": "llama-3-70b",
    "mistral-7b": "mistral-7b-v0.3",
    "qwen2.5-7b": "qwen2.5-7b",
    "mixtral-8x7b": "mixtral-8x7b",
}
QKVO = ("q_proj", "k_proj", "v_proj", "o_proj")
QV = ("q_proj", "v_proj")


def groundtruth_rows(reference: Path) -> list[dict]:
    rows = []
    for line in (reference / "groundtruth.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 10 or cells[0] not in GROUNDTRUTH_MODELS or cells[1] not in ("train", "infer"):
            continue
        batch, seq = (int(part) for part in cells[2].split("×"))
        peak = float(re.search(r"\*\*([\d.]+)\*\*", cells[4]).group(1))
        kv = re.match(r"([\d.]+)", cells[8])
        rows.append(
            {
                "model": cells[0],
                "mode": cells[1],
                "batch": batch,
                "seq": seq,
                "options": cells[3],
                "peak": peak,
                "kv": float(kv.group(1)) if kv else None,
            }
        )
    return rows


def estimate_groundtruth(row: dict) -> tuple[float, float | None]:
    arch = get_model(GROUNDTRUTH_MODELS[row["model"]]).architecture
    options = row["options"]
    if row["mode"] == "infer":
        peak = hf_prefill_peak(
            arch,
            row["batch"],
            row["seq"],
            weights=arch.params * 2,
            attention="eager" if "eager" in options else "flash",
            all_logits="all logits" in options,
        )
        return peak / GIB, arch.kv_bytes_per_token(2) * row["batch"] * row["seq"] / GIB
    setup = TrainingSetup(
        architecture=arch,
        method="lora" if "LoRA" in options else "full",
        precision="bf16-mixed" if "fp32 master" in options else "bf16",
        optimizer="adamw-fused" if "fused" in options else "adamw",
        lora_targets=QKVO,
        lora_rank=16,
        micro_batch=row["batch"],
        seq_len=row["seq"],
        checkpointing="ckpt" in options,
        attention="eager" if "eager" in options else "flash",
    )
    return estimate_training(setup, 0).tensor_peak / GIB, None


# measured-calibration.yaml records -> (model id, kind, settings). Settings follow each record's notes:
# litgpt bf16-true keeps LoRA adapters in bf16 (lora_bytes 2); QLoRA rows use bnb PagedAdamW (8-bit
# states are paged out of the allocation when idle: counted as 8-bit states here).
RECORDS: dict[str, tuple[str, str, dict]] = {
    "lg-01": (
        "phi-1.5",
        "train",
        dict(method="lora", lora_rank=8, lora_targets=QV, lora_bytes=2, micro_batch=1, seq_len=1044),
    ),
    "lg-02": (
        "phi-1.5",
        "train",
        dict(
            method="qlora",
            lora_rank=8,
            lora_targets=QV,
            lora_bytes=2,
            optimizer="adamw-8bit",
            micro_batch=1,
            seq_len=1044,
            double_quant=False,
        ),
    ),
    "lg-03": (
        "stablelm-base-alpha-3b",
        "train",
        dict(method="lora", lora_rank=8, lora_targets=QV, lora_bytes=2, micro_batch=1, seq_len=1034),
    ),
    "lg-04": (
        "stablelm-base-alpha-3b",
        "train",
        dict(method="lora", lora_rank=8, lora_targets=QV, lora_bytes=2, micro_batch=4, seq_len=1034),
    ),
    "lg-05": (
        "stablelm-base-alpha-3b",
        "train",
        dict(
            method="lora",
            lora_rank=8,
            lora_targets=QV,
            lora_bytes=4,
            precision="bf16-mixed",
            model_dtype_bytes=4,
            micro_batch=1,
            seq_len=1034,
        ),
    ),
    "lg-06": (
        "llama-2-7b",
        "train",
        dict(method="lora", lora_rank=8, lora_targets=QV, lora_bytes=2, micro_batch=1, seq_len=1304),
    ),
    "lg-07": (
        "llama-2-7b",
        "train",
        dict(method="lora", lora_rank=8, lora_targets=QV, lora_bytes=2, micro_batch=2, seq_len=1304),
    ),
    "lg-08": (
        "llama-2-7b",
        "train",
        dict(
            method="qlora",
            lora_rank=8,
            lora_targets=QV,
            lora_bytes=2,
            optimizer="adamw-8bit",
            micro_batch=1,
            seq_len=1304,
            double_quant=False,
        ),
    ),
    "lg-09": (
        "llama-2-7b",
        "train",
        dict(
            method="qlora",
            lora_rank=8,
            lora_targets=QV,
            lora_bytes=2,
            optimizer="adamw-8bit",
            micro_batch=1,
            seq_len=1304,
        ),
    ),
    "lg-10": (
        "llama-2-13b",
        "train",
        dict(method="lora", lora_rank=8, lora_targets=QV, lora_bytes=2, micro_batch=1, seq_len=1304),
    ),
    "lg-11": (
        "llama-2-13b",
        "train",
        dict(
            method="qlora",
            lora_rank=8,
            lora_targets=QV,
            lora_bytes=2,
            optimizer="adamw-8bit",
            micro_batch=1,
            seq_len=1304,
            double_quant=False,
        ),
    ),
    "lg-12": (
        "llama-2-7b",
        "train",
        dict(
            method="lora",
            lora_rank=8,
            lora_targets=QV,
            lora_bytes=2,
            micro_batch=1,
            seq_len=1304,
            checkpointing=True,
            sharding="fsdp",
            gpus=2,
        ),
    ),
    "lg-13": (
        "llama-2-13b",
        "train",
        dict(
            method="lora",
            lora_rank=8,
            lora_targets=QV,
            lora_bytes=2,
            micro_batch=1,
            seq_len=1304,
            checkpointing=True,
            sharding="fsdp",
            gpus=4,
        ),
    ),
    "lg-14": ("phi-1.5", "infer", dict(batch=1, prompt=60, quant="none")),
    "lg-15": ("llama-2-7b", "infer", dict(batch=1, prompt=60, quant="none")),
    "lg-16": ("llama-2-7b", "infer", dict(batch=1, prompt=60, quant="nf4")),
    "lg-17": ("llama-2-13b", "infer", dict(batch=1, prompt=60, quant="none")),
    "lg-18": ("codellama-34b", "infer", dict(batch=1, prompt=60, quant="nf4")),
    "lg-19": ("falcon-40b", "infer", dict(batch=1, prompt=60, quant="nf4")),
    "lg-20": ("llama-2-70b", "infer", dict(batch=1, prompt=60, quant="nf4-dq")),
    "lg-21": ("falcon-7b", "infer", dict(batch=1, prompt=270, quant="none", dtype=4)),
    "lg-22": ("falcon-7b", "infer", dict(batch=1, prompt=270, quant="none")),
    "lg-23": ("llama-2-70b", "infer", dict(batch=2, prompt=270, quant="none", tp=4)),
    "lg-24": ("llama-2-70b", "infer", dict(batch=2, prompt=270, quant="none", tp=8)),
    "lg-25": ("llama-2-70b", "infer", dict(batch=2, prompt=270, quant="nf4-dq", tp=2)),
    "hf-01": ("starcoder-15b", "infer", dict(batch=1, prompt=80, quant="none")),
    "hf-02": ("starcoder-15b", "infer", dict(batch=1, prompt=80, quant="int8")),
    "hf-03": ("starcoder-15b", "infer", dict(batch=1, prompt=80, quant="nf4")),
    "hf-04": ("starcoder-15b", "infer", dict(batch=1, prompt=2500, quant="none", attention="eager")),
    "hf-05": ("starcoder-15b", "infer", dict(batch=1, prompt=2500, quant="none")),
}
NF4 = {"nf4": NF4_BYTES_NO_DQ, "nf4-dq": NF4_BYTES_PER_PARAM}


def estimate_record(record_id: str) -> float:
    model_id, kind, settings = RECORDS[record_id]
    arch = get_model(model_id).architecture
    if kind == "train":
        settings = {"precision": "bf16", **settings}
        return estimate_training(TrainingSetup(architecture=arch, **settings), 0).tensor_peak / GIB
    tp = settings.get("tp", 1)
    quant = settings["quant"]
    dtype = settings.get("dtype", 2)
    if quant in NF4:
        weights = arch.linear_params() * NF4[quant] + (arch.params - arch.linear_params()) * 2
    elif quant == "int8":
        weights = weight_bytes(arch, "int8", 2)
    else:
        weights = arch.params * dtype
    peak = hf_prefill_peak(
        arch,
        settings["batch"],
        settings["prompt"],
        weights=weights / tp,
        kv_bytes=dtype,
        attention=settings.get("attention", "flash"),
        tp=tp,
    )
    return peak / GIB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=ROOT.parent / "shared" / "reference")
    args = parser.parse_args()
    print("Part 1: ground truth (PyTorch MemTracker peaks, GiB)")
    print(f"{'config':<14}{'mode':<6}{'b x s':<10}{'options':<26}{'truth':>9}{'estimate':>10}{'error':>9}{'KV':>16}")
    worst = 0.0
    for row in groundtruth_rows(args.reference):
        estimate, kv = estimate_groundtruth(row)
        error = (estimate - row["peak"]) / row["peak"] * 100
        worst = max(worst, abs(error))
        kv_text = "" if kv is None else f"{kv:.2f} vs {row['kv']:.2f}"
        print(
            f"{row['model']:<14}{row['mode']:<6}{row['batch']}x{row['seq']:<8}{row['options'][:25]:<26}"
            f"{row['peak']:>9.2f}{estimate:>10.2f}{error:>+8.2f}%{kv_text:>16}"
        )
    print(f"worst ground-truth error: {worst:.2f}% (target: within 3%)\n")
    records = yaml.safe_load((args.reference / "measured-calibration.yaml").read_text())
    print("Part 2: published measurements (GiB; counter: torch.cuda.max_memory_allocated unless noted)")
    print(f"{'id':<7}{'model':<24}{'setup':<34}{'measured':>9}{'estimate':>10}{'error':>9}  counter")
    errors = []
    for record in records:
        if record["id"] not in RECORDS:
            continue
        estimate = estimate_record(record["id"])
        error = (estimate - record["value_gib"]) / record["value_gib"] * 100
        errors.append(abs(error))
        model_id, kind, _ = RECORDS[record["id"]]
        setup = f"{kind} {str(record['method'])[:12]} b{record['batch']}"
        print(
            f"{record['id']:<7}{model_id:<24}{setup:<34}{record['value_gib']:>9.2f}{estimate:>10.2f}{error:>+8.1f}%  {str(record['metric'])[:40]}"
        )
    print(
        f"median absolute error on {len(errors)} published measurements: {statistics.median(errors):.1f}% (target: at most 10%)"
    )
    return 0 if worst <= 3 and statistics.median(errors) <= 10 else 1


if __name__ == "__main__":
    raise SystemExit(main())
