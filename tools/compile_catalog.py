"""Write gpuplan/catalog/catalog.json: the parse of the catalog's YAML files, which gpuplan loads.

The YAML files are the catalog's source (commented, sourced, reviewed); every gpuplan process reads the
catalog, and JSON loads in under a millisecond where the YAML takes about 15 ms, a tenth of a
pre-commit run. A test holds the JSON equal to the YAML's parse.

    python tools/compile_catalog.py [--out-dir gpuplan/catalog]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

CATALOG = Path(__file__).resolve().parent.parent / "gpuplan" / "catalog"
SOURCES = ("gpus.yaml", "gpu_sources.yaml", "models.yaml")


def compiled(folder: Path = CATALOG) -> dict[str, Any]:
    """{source file name: its parse} for the catalog's YAML files in ``folder``."""
    return {name: yaml.safe_load((folder / name).read_text(encoding="utf-8")) for name in SOURCES}


def render(catalog: dict[str, Any]) -> str:
    return json.dumps(catalog, ensure_ascii=False, indent=1) + "\n"  # the YAML's key order, one value a line


def main() -> None:
    parser = argparse.ArgumentParser(description="Write catalog.json from the catalog's YAML files.")
    parser.add_argument("--out-dir", type=Path, default=CATALOG, help="the catalog folder (default: the package's)")
    args = parser.parse_args()
    (args.out_dir / "catalog.json").write_text(render(compiled(args.out_dir)), encoding="utf-8")


if __name__ == "__main__":
    main()
