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
