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
