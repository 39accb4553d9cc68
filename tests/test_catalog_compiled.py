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
