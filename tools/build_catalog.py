"""Regenerate the GPU catalog (gpus.yaml and gpu_sources.yaml) from a sourced reference file.

A development script, not part of the installed package; it writes only into the folder it is told:

    python tools/build_catalog.py REFERENCE.yaml --out-dir gpuplan/catalog

REFERENCE.yaml is the team's sourced GPU reference (one entry per GPU with its figures, sources and
dated on-demand price quotes). The catalog keeps every figure's sources; the indicative price is the
median of the quotes, and the price record says which quotes, from which providers, over which dates.
"""

from __future__ import annotations

import argparse
import re
import statistics
from pathlib import Path
from typing import Any

import yaml

GIB = 2**30
# A quote's date: the first YYYY-MM-DD in its text, else YYYY-MM (taken as its first day), else none.
ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})(?:-(\d{2}))?\b")
# Driver/ECC reservation between nvidia-smi's total and what torch can allocate: 79.65 -> 79.18 GiB on
# H100 80GB as measured by llm-d (llm-d/llm-d-benchmark, config_explorer/empirical-vllm-memory-results.md).
DRIVER_RESERVED_BYTES = GIB // 2
FORM_FACTORS = {
    "h200-sxm": "sxm",
    "h200-nvl": "nvl",
    "h100-sxm": "sxm",
    "h100-pcie": "pcie",
    "h100-nvl": "nvl",
    "a100-sxm-80gb": "sxm",
    "a100-pcie-80gb": "pcie",
    "a100-sxm-40gb": "sxm",
    "a100-pcie-40gb": "pcie",
    "l4": "pcie",
    "l40s": "pcie",
    "a10": "pcie",
    "a10g": "pcie",
    "rtx-4090": "pcie",
    "rtx-6000-ada": "pcie",
    "b200-hgx": "sxm",
    "gb200": "sxm",
    "mi300x": "oam",
    "mi325x": "oam",
    "gaudi3-oam": "oam",
}
# Dense FP4 tensor TFLOPS of the GPUs that have FP4 units. The reference records them only in each entry's
# notes (gpus.md, "NVIDIA B200 (HGX) and GB200": sparse FP4 18 PF on HGX B200 and 20 PF per GB200 GPU,
# dense = half); Hopper, Ampere, Ada and CDNA3 have no FP4 tensor cores (gpus.md [S15] for MI300).
FP4_DENSE_TFLOPS = {"b200-hgx": 9000, "gb200": 10000}


def quote_date(text: Any) -> str | None:
    """The date a quote was taken, as YYYY-MM-DD, or None when its text gives no month."""
    found = ISO_DATE.search(str(text))
    if not found:
        return None
    year, month, day = found.groups()
    return f"{year}-{month}-{day or '01'}"


def price_fields(quotes: list[dict[str, Any]]) -> dict[str, Any]:
    """The price record of gpus.yaml: the median of the quotes, with their count, dates, providers and range."""
    if not quotes:
        return {"price_usd_per_hour": None}
    dates = sorted(date for date in (quote_date(q["date"]) for q in quotes) if date)
    providers = list(dict.fromkeys(str(q["provider"]) for q in quotes))
    return {
        "price_usd_per_hour": round(statistics.median(q["usd"] for q in quotes), 3),
        "price_quotes": len(quotes),
        "price_quoted_from": dates[0] if dates else None,
        "price_quoted_to": dates[-1] if dates else None,
        "price_undated_quotes": len(quotes) - len(dates),
        "price_providers": providers,
        "price_low": min(q["usd"] for q in quotes),
        "price_high": max(q["usd"] for q in quotes),
    }


def convert(entry: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the figures the estimator reads, the provenance behind them)."""
    total = round(entry["memory_gib"] * GIB) if entry.get("memory_gib") else entry["memory_gb"] * 10**9
    quotes = entry.get("cloud_prices_usd_per_gpu_hour") or []
    link = entry["interconnect"]
    figures = {
        "id": entry["id"],
        "name": entry["name"],
        "vendor": entry["vendor"],
        "form_factor": FORM_FACTORS[entry["id"]],
        "consumer": "consumer" in entry["form_factor"],
        "memory_gb": entry["memory_gb"],
        "memory_bytes": int(total),
        "usable_bytes": int(total - DRIVER_RESERVED_BYTES),
        "bandwidth_tbs": entry["bandwidth_tbs"],
        "tflops_dense": {
            **entry["tflops_dense"],
            **({"fp4": FP4_DENSE_TFLOPS[entry["id"]]} if entry["id"] in FP4_DENSE_TFLOPS else {}),
        },
        "interconnect": {"bandwidth_gbs": link["bandwidth_gbs"], "domain": link["max_peers"]},
        "pcie_gbs": entry["pcie"]["bandwidth_gbs"],
        "tdp_w": entry.get("tdp_w"),
        "mig": bool((entry.get("mig") or {}).get("supported")),
        **price_fields(quotes),
    }
    provenance = {
        "id": entry["id"],
        "form_factor_text": entry["form_factor"],
        "memory_type": entry.get("memory_type"),
        "interconnect_kind": link["kind"],
        "pcie_gen": entry["pcie"].get("gen"),
        "mig": entry.get("mig"),
        "price_quotes": [{**q, "date": str(q["date"])} for q in quotes],
        "sources": entry["sources"],
        "notes": entry.get("notes", ""),
    }
    return figures, provenance


def main() -> None:
    parser = argparse.ArgumentParser(description="Regenerate gpus.yaml and gpu_sources.yaml from a sourced reference.")
    parser.add_argument("reference", type=Path, help="the sourced GPU reference (YAML list of GPUs)")
    parser.add_argument("--out-dir", type=Path, required=True, help="folder to write gpus.yaml and gpu_sources.yaml")
    args = parser.parse_args()
    with open(args.reference, encoding="utf-8") as handle:
        entries = yaml.safe_load(handle)
    converted = [convert(entry) for entry in entries]
    header = (
        "# GPU catalog of gpuplan. Generated by tools/build_catalog.py from the team's sourced reference;\n"
        "# edit the reference, then regenerate. Sources, notes and every dated price quote are in\n"
        "# gpu_sources.yaml (kept apart so that lint reads only the figures).\n"
        "# memory_bytes: total the driver reports; usable_bytes: minus a 0.5 GiB driver reservation.\n"
        "# tflops_dense: dense (no sparsity) tensor TFLOPS; bandwidth_tbs: peak memory bandwidth (TB/s);\n"
        "# interconnect.bandwidth_gbs: scale-up GB/s per GPU, bidirectional; domain: GPUs in that scale-up domain.\n"
        "# price_usd_per_hour: median of the on-demand quotes (indicative, not a contract); price_quoted_from/to:\n"
        "# the dates of the oldest and newest quote it rests on; price_low/high: their range.\n"
        "catalog_version: '2026.11'\n"
    )
    figures = yaml.safe_dump({"gpus": [f for f, _ in converted]}, sort_keys=False, allow_unicode=True, width=120)
    provenance = yaml.safe_dump({"gpus": [p for _, p in converted]}, sort_keys=False, allow_unicode=True, width=120)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "gpus.yaml").write_text(header + figures, encoding="utf-8")
    (args.out_dir / "gpu_sources.yaml").write_text(
        "# Where each figure in gpus.yaml comes from. Generated by tools/build_catalog.py.\n" + provenance,
        encoding="utf-8",
    )
    if (args.out_dir / "models.yaml").exists():  # the package's folder: its catalog.json follows
        from compile_catalog import compiled, render

        (args.out_dir / "catalog.json").write_text(render(compiled(args.out_dir)), encoding="utf-8")


if __name__ == "__main__":
    main()
