"""catalog.json, what gpuplan reads, is the parse of the catalog's YAML sources, key order included."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from compile_catalog import CATALOG, compiled, render  # noqa: E402


def test_catalog_json_is_the_parse_of_the_yaml_sources():
    written = (CATALOG / "catalog.json").read_text(encoding="utf-8")
    assert written == render(compiled()), "regenerate it: python tools/compile_catalog.py"


def test_the_catalog_reads_the_compiled_file(tmp_path: Path, monkeypatch):
    # Not the YAML: a catalog.json with one GPU fewer is the catalog gpuplan sees.
    import json

    import gpuplan.catalog as catalog

    data = compiled()
    dropped = data["gpus.yaml"]["gpus"].pop()["id"]
    (tmp_path / "catalog.json").write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(catalog, "_HERE", tmp_path)
    for cached in (catalog._compiled, catalog.gpu_catalog):
        cached.cache_clear()
    try:
        assert dropped not in catalog.gpu_catalog()
    finally:
        for cached in (catalog._compiled, catalog.gpu_catalog):
            cached.cache_clear()


def test_derived_gpu_fields_are_in_step_with_their_sources():
    # usable_bytes (memory_bytes less the driver reservation) and the price record (the median of the
    # quotes in gpu_sources.yaml) are derived, never edited: python tools/build_catalog.py rewrites them.
    from build_catalog import stale_fields

    assert stale_fields() == [], "run python tools/build_catalog.py"


def test_the_derived_field_check_sees_an_edited_figure_or_quote(tmp_path: Path):
    import yaml
    from build_catalog import dump, read, stale_fields

    figures, sources = read(CATALOG)
    figures["gpus"][0]["usable_bytes"] += 1  # an edited derived field
    quoted = next(entry for entry in sources["gpus"] if entry["price_quotes"])
    quoted["price_quotes"][0]["usd"] += 1.0  # a new quote whose median was not recomputed
    (tmp_path / "gpus.yaml").write_text(dump(figures), encoding="utf-8")
    (tmp_path / "gpu_sources.yaml").write_text(yaml.safe_dump(sources, sort_keys=False), encoding="utf-8")
    stale = stale_fields(tmp_path)
    assert f"{figures['gpus'][0]['id']}.usable_bytes" in stale
    assert any(field.startswith(f"{quoted['id']}.price_") for field in stale)


def test_a_median_price_is_dated_by_the_quotes_it_is():
    # Eight quotes: the median is the mean of the 4th and 5th by price, 3.95 (dated 2026-05-07) and 4.29
    # (2026-09-25), so 4.12 rests on those two and is as old as the older, 2026-05-07. The oldest quote of
    # all (2.10, 2026-01-02) is far from the median and dates nothing; the newest (2026-11-09) neither.
    from build_catalog import price_fields

    quotes = [
        {"provider": "A", "usd": 2.10, "date": "2026-01-02"},
        {"provider": "B", "usd": 3.49, "date": "2026-09-25"},
        {"provider": "C", "usd": 3.85, "date": "2026-09-25"},
        {"provider": "D", "usd": 3.95, "date": "2026-05-07"},
        {"provider": "E", "usd": 4.29, "date": "2026-09-25"},
        {"provider": "F", "usd": 6.155, "date": "2026-10-24"},
        {"provider": "G", "usd": 6.88, "date": "2026-11-09"},
        {"provider": "H", "usd": 12.29, "date": "2026-11-09"},
    ]
    fields = price_fields(quotes)
    assert fields["price_usd_per_hour"] == 4.12
    assert (fields["price_quoted_from"], fields["price_median_quoted"]) == ("2026-01-02", "2026-05-07")
    assert fields["price_median_set_by"] == ["D on 2026-05-07", "E on 2026-09-25"]
    # An odd count: the middle quote alone. Among equal prices the newest dates the median (any of them
    # supports it): 3.85 twice, 2026-03-01 and 2026-10-01 -> 2026-10-01. An undated quote alone at the
    # median leaves it undated.
    three = [
        {"provider": "A", "usd": 3.85, "date": "2026-03-01"},
        {"provider": "B", "usd": 3.85, "date": "2026-10-01"},
        {"provider": "C", "usd": 5.0, "date": "2026-11-01"},
    ]
    assert price_fields(three)["price_median_quoted"] == "2026-10-01"
    three[1].update(usd=4.0, date="on request")
    assert price_fields(three)["price_median_quoted"] is None
    assert price_fields(three)["price_median_set_by"] == ["B, undated"]


def test_every_gpu_names_its_architecture_as_the_schema_spells_it():
    # The kernels a GPU runs (vLLM's MXFP4 expert padding, gpuplan.estimate.serving) are chosen by its
    # architecture: every catalog GPU states it, spelt as a custom GPU's `arch` must be, and cites its source.
    import json
    import re

    from gpuplan.catalog import gpu_catalog, gpu_sources

    schema = json.loads((ROOT / "schemas" / "workload.schema.json").read_text())
    pattern = re.compile(schema["$defs"]["custom_gpu"]["properties"]["arch"]["pattern"])
    for gpu in gpu_catalog().values():
        assert pattern.match(gpu.arch) or gpu.arch == "gaudi3", gpu.id
        assert any(
            "compute capability" in s or "LLVM target" in s or "Gaudi" in s for s in gpu_sources()[gpu.id]["sources"]
        ), gpu.id
    assert {gpu.id: gpu.arch for gpu in gpu_catalog().values()}["h100-sxm"] == "sm90"


def test_new_gpus_carry_their_datasheet_figures():
    # Hand-checked against the sources in gpu_sources.yaml (issue 31): memory_bytes is the nvidia-smi total
    # (MiB / 1024 to two decimals, x 2^30), usable_bytes 0.5 GiB less; tensor rates are dense.
    from gpuplan.catalog import get_gpu

    a6000 = get_gpu("rtx-a6000")  # 49140 MiB; 768 GB/s; 154.8 dense BF16 (309.7 is the sparse headline)
    assert (a6000.memory_bytes, a6000.usable_bytes) == (round(47.99 * 2**30), round(47.99 * 2**30) - 2**29)
    assert (a6000.bandwidth_tbs, a6000.tflops["bf16"], a6000.tflops["fp8"]) == (0.768, 154.8, None)
    assert (a6000.domain, a6000.interconnect_gbs, a6000.consumer) == (2, 112.5, False)  # 2-way NVLink bridge
    l40 = get_gpu("l40")  # 46068 MiB with ECC; half the L40S's tensor rates
    assert (l40.memory_bytes, l40.bandwidth_tbs, l40.tflops["bf16"], l40.tflops["fp8"]) == (
        48307644662,
        0.864,
        181.05,
        362,
    )
    t4 = get_gpu("t4")  # 15360 MiB; Turing: FP16 tensor cores only
    assert (t4.memory_bytes, t4.bandwidth_tbs, t4.pcie_gbs) == (15 * 2**30, 0.3, 32)
    assert (t4.tflops["bf16"], t4.tflops["fp16"], t4.tflops["fp8"], t4.has_bf16) == (None, 65, None, False)
    mi355x = get_gpu("mi355x")  # no rocm-smi capture found: memory_gb x 10^9
    assert (mi355x.memory_bytes, mi355x.domain, mi355x.interconnect_gbs) == (288 * 10**9, 8, 7 * 153.6)
    b300 = get_gpu("b300-hgx")  # 275040 MiB; HGX page: 36 PF BF16 and 108 PF FP4 dense over 8 GPUs
    assert (b300.memory_bytes, b300.tflops["bf16"], b300.tflops["fp4"]) == (round(268.59 * 2**30), 2250, 13500)


def test_every_gpu_names_its_sources_and_its_quotes_are_dated_or_say_so():
    figures, sources = compiled()["gpus.yaml"]["gpus"], compiled()["gpu_sources.yaml"]["gpus"]
    assert [entry["id"] for entry in figures] == [entry["id"] for entry in sources]
    for entry in sources:
        assert entry["sources"] and all(isinstance(source, str) and source for source in entry["sources"])
        for quote in entry["price_quotes"]:
            assert quote["usd"] > 0 and quote["provider"] and quote["source"] and quote["date"], entry["id"]


def test_a_catalog_prices_range_is_in_cents():
    # The A100 SXM 80GB's quotes run from RunPod's 1.39 to AWS's 3.4309 per GPU-hour (a p4de instance over 8
    # GPUs): the price's description gives the range as prices are shown everywhere, 1.39-3.43.
    from gpuplan.catalog import get_gpu

    price = get_gpu("a100-sxm-80gb").price
    assert price is not None and ", 1.39-3.43 from " in price.describe()
