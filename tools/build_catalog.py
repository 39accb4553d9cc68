"""Keep the GPU catalog's derived fields in step with its sources, and import entries from a reference.

A development script, not part of the installed package.

The catalog's source of truth is the package's two files, written and reviewed in this repository:

- ``gpuplan/catalog/gpus.yaml``: the figures the estimator reads (one fact each: memory, bandwidth, dense
  TFLOPS, form factor, scale-up link, PCIe, TDP);
- ``gpuplan/catalog/gpu_sources.yaml``: where each figure comes from (sources, notes) and every dated
  on-demand price quote.

Two fields of gpus.yaml are derived, never edited: ``usable_bytes`` (``memory_bytes`` less the 0.5 GiB
driver reservation) and the price record (``price_usd_per_hour``, the median of the GPU's quotes in
gpu_sources.yaml, with their count, dates, providers and range). After editing either file:

    python tools/build_catalog.py            # rewrites the derived fields, then catalog.json
    python tools/build_catalog.py --check    # writes nothing; exit 1 naming the fields out of step

A test runs the check. ``memory_bytes`` is the total the driver reports: nvidia-smi / rocm-smi MiB / 1024,
rounded to two decimals (as the captures cited in gpu_sources.yaml read), times 2^30; where no capture
was found, the marketed memory_gb x 10^9 (the smaller reading of "GB").

The first twenty GPUs were converted from the team's sourced reference (a YAML list, one entry per GPU
with its figures, sources and quotes; kept outside the repository). ``--import REFERENCE.yaml`` converts
such entries again and replaces the catalog entries with the same ids, keeping every other entry (the GPUs
added here since, issue 31) where it is: the reference is an import source, the catalog files are the record.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

CATALOG = Path(__file__).resolve().parent.parent / "gpuplan" / "catalog"
GIB = 2**30
# A quote's date: the first YYYY-MM-DD in its text, else YYYY-MM (taken as its first day), else none.
ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})(?:-(\d{2}))?\b")
# Driver/ECC reservation between nvidia-smi's total and what torch can allocate: 79.65 -> 79.18 GiB on
# H100 80GB as measured by llm-d (llm-d/llm-d-benchmark, config_explorer/empirical-vllm-memory-results.md).
DRIVER_RESERVED_BYTES = GIB // 2
PRICE_FIELDS = (
    "price_usd_per_hour",
    "price_quotes",
    "price_quoted_from",
    "price_quoted_to",
    "price_median_quoted",
    "price_median_set_by",
    "price_undated_quotes",
    "price_providers",
    "price_low",
    "price_high",
)
HEADER = (
    "# GPU catalog of gpuplan: the figures gpuplan reads. Sources, notes and every dated price quote are in\n"
    "# gpu_sources.yaml (kept apart so that lint reads only the figures). Edit both by hand, then run\n"
    "# python tools/build_catalog.py: it rewrites the derived fields (usable_bytes, the price record) and\n"
    "# catalog.json; a test fails while they are out of step.\n"
    "# memory_bytes: total the driver reports (smi MiB / 1024 to two decimals, x 2^30; memory_gb x 10^9 where\n"
    "# no capture was found); usable_bytes: minus a 0.5 GiB driver reservation.\n"
    "# tflops_dense: dense (no sparsity) tensor TFLOPS, null where the GPU has no such units (or none is\n"
    "# published); fp32 is the non-tensor (CUDA-core) fp32 rate (AMD: fp32 matrix), tf32 the TF32 tensor rate;\n"
    "# arch: the instruction set kernels are built for: NVIDIA sm<compute capability> (sm90 = 9.0), AMD gfx target;\n"
    "# bandwidth_tbs: peak memory bandwidth (TB/s);\n"
    "# interconnect.bandwidth_gbs: scale-up GB/s per GPU, bidirectional; domain: GPUs in that scale-up domain.\n"
    "# price_usd_per_hour: median of the on-demand quotes (indicative, not a contract); price_quoted_from/to:\n"
    "# the dates of the oldest and newest quote; price_median_quoted: the date of the quote the median is (of\n"
    "# an even count, the older of the middle two), what ages the price; price_median_set_by: those quotes;\n"
    "# price_low/high: the range.\n"
)
SOURCES_HEADER = (
    "# Where each figure in gpus.yaml comes from, and every on-demand price quote its price record rests on.\n"
    "# Edited by hand with gpus.yaml; python tools/build_catalog.py derives the price record from the quotes.\n"
)

# -- converting entries of the team's reference (--import) ------------------------------------------
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
# Dense FP4 tensor TFLOPS of the reference's GPUs that have FP4 units. The reference records them only in
# each entry's notes (gpus.md, "NVIDIA B200 (HGX) and GB200": sparse FP4 18 PF on HGX B200 and 20 PF per
# GB200 GPU, dense = half); Hopper, Ampere, Ada and CDNA3 have no FP4 tensor cores (gpus.md [S15] for MI300).
FP4_DENSE_TFLOPS = {"b200-hgx": 9000, "gb200": 10000}


def quote_date(text: Any) -> str | None:
    """The date a quote was taken, as YYYY-MM-DD, or None when its text gives no month."""
    found = ISO_DATE.search(str(text))
    if not found:
        return None
    year, month, day = found.groups()
    return f"{year}-{month}-{day or '01'}"


def _quoted_by(quote: dict[str, Any]) -> str:
    date = quote_date(quote["date"])
    return f"{quote['provider']} on {date}" if date else f"{quote['provider']}, undated"


def _median_quotes(quotes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The quote the median is, or of an even count the two it is the mean of; a price several quotes
    share is dated by the newest of them (any of them supports it)."""
    ordered = sorted(quotes, key=lambda q: q["usd"])
    half = len(ordered) // 2
    middle = ordered[half : half + 1] if len(ordered) % 2 else ordered[half - 1 : half + 1]
    newest = [
        max((q for q in quotes if q["usd"] == m["usd"]), key=lambda q: quote_date(q["date"]) or "") for m in middle
    ]
    return list({id(q): q for q in newest}.values())


def price_fields(quotes: list[dict[str, Any]]) -> dict[str, Any]:
    """The price record of gpus.yaml: the median of the quotes, with their count, dates, providers and range."""
    if not quotes:
        return {"price_usd_per_hour": None}
    dates = sorted(date for date in (quote_date(q["date"]) for q in quotes) if date)
    providers = list(dict.fromkeys(str(q["provider"]) for q in quotes))
    middle = _median_quotes(quotes)
    middle_dates = [quote_date(q["date"]) for q in middle]
    return {
        "price_usd_per_hour": round(statistics.median(q["usd"] for q in quotes), 3),
        "price_quotes": len(quotes),
        "price_quoted_from": dates[0] if dates else None,
        "price_quoted_to": dates[-1] if dates else None,
        # An undated quote at the median leaves the median undated (its age cannot be told).
        "price_median_quoted": None if None in middle_dates else min(str(date) for date in middle_dates),
        "price_median_set_by": [_quoted_by(q) for q in middle],
        "price_undated_quotes": len(quotes) - len(dates),
        "price_providers": providers,
        "price_low": min(q["usd"] for q in quotes),
        "price_high": max(q["usd"] for q in quotes),
    }


def convert(entry: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A reference entry as (the figures the estimator reads, the provenance behind them)."""
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


# -- the catalog files ------------------------------------------------------------------------------
def read(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(gpus.yaml, gpu_sources.yaml) of ``folder``, parsed."""
    figures = yaml.safe_load((folder / "gpus.yaml").read_text(encoding="utf-8"))
    sources = yaml.safe_load((folder / "gpu_sources.yaml").read_text(encoding="utf-8"))
    return figures, sources


def derived(figures: dict[str, Any], sources: dict[str, Any]) -> dict[str, Any]:
    """gpus.yaml's data with its derived fields recomputed from their sources, key order kept."""
    quotes = {entry["id"]: entry.get("price_quotes") or [] for entry in sources["gpus"]}
    missing = [entry["id"] for entry in figures["gpus"] if entry["id"] not in quotes]
    extra = sorted(set(quotes) - {entry["id"] for entry in figures["gpus"]})
    if missing or extra:
        raise ValueError(f"gpus.yaml and gpu_sources.yaml list different GPUs: {missing or ''} {extra or ''}".strip())
    gpus = []
    for entry in figures["gpus"]:
        head = {key: value for key, value in entry.items() if key not in PRICE_FIELDS}
        head["usable_bytes"] = int(entry["memory_bytes"] - DRIVER_RESERVED_BYTES)
        gpus.append({**head, **price_fields(quotes[entry["id"]])})
    return {**figures, "gpus": gpus}


def stale_fields(folder: Path = CATALOG) -> list[str]:
    """``id.field`` for every derived field of gpus.yaml that its sources no longer give (empty: in step)."""
    figures, sources = read(folder)
    fresh = {entry["id"]: entry for entry in derived(figures, sources)["gpus"]}
    stale = []
    for entry in figures["gpus"]:
        want = fresh[entry["id"]]
        stale += [f"{entry['id']}.{key}" for key in ("usable_bytes", *PRICE_FIELDS) if entry.get(key) != want.get(key)]
    return stale


def dump(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)


def write(folder: Path, figures: dict[str, Any], sources: dict[str, Any]) -> None:
    """Both files (figures with their derived fields recomputed) and, in the package's folder, catalog.json."""
    data = derived(figures, sources)
    version = yaml.safe_dump({"catalog_version": data["catalog_version"]}, sort_keys=False)
    body = dump({"gpus": data["gpus"]})
    (folder / "gpus.yaml").write_text(HEADER + version + body, encoding="utf-8")
    (folder / "gpu_sources.yaml").write_text(SOURCES_HEADER + dump({"gpus": sources["gpus"]}), encoding="utf-8")
    if (folder / "models.yaml").exists():  # the package's folder: its catalog.json follows
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from compile_catalog import compiled, render

        (folder / "catalog.json").write_text(render(compiled(folder)), encoding="utf-8")


def imported(
    reference: Path, figures: dict[str, Any], sources: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The catalog with the reference's entries converted in: same ids replaced in place, new ones appended."""
    entries = yaml.safe_load(reference.read_text(encoding="utf-8"))
    converted = {entry["id"]: convert(entry) for entry in entries}

    def merged(current: list[dict[str, Any]], part: int) -> list[dict[str, Any]]:
        ids = {entry["id"] for entry in current}
        kept = [converted[entry["id"]][part] if entry["id"] in converted else entry for entry in current]
        return kept + [pair[part] for gpu_id, pair in converted.items() if gpu_id not in ids]

    return {**figures, "gpus": merged(figures["gpus"], 0)}, {**sources, "gpus": merged(sources["gpus"], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Rewrite the GPU catalog's derived fields (and import reference entries)."
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a derived field is out of step")
    parser.add_argument("--import", dest="reference", type=Path, help="convert a sourced reference's entries in")
    parser.add_argument("--out-dir", type=Path, default=CATALOG, help="the catalog folder (default: the package's)")
    args = parser.parse_args()
    if args.check:
        stale = stale_fields(args.out_dir)
        if stale:
            sys.exit("out of step with their sources (run python tools/build_catalog.py): " + ", ".join(stale))
        return
    figures, sources = read(args.out_dir)
    if args.reference is not None:
        figures, sources = imported(args.reference, figures, sources)
    write(args.out_dir, figures, sources)


if __name__ == "__main__":
    main()
