"""Wall time of `gpuplan report --pdf` on each example, as whole processes.

    python benchmarks/report_speed.py [--runs 3]

Target: at most 1.5 s per report on the project's 2-core machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pypdf import PdfReader

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import installed_gpuplan  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    gpuplan = installed_gpuplan()
    medians = []
    with tempfile.TemporaryDirectory() as folder:
        print(f"{'example':<32}{'median':>9}{'pages':>7}")
        for spec in sorted((ROOT / "examples").glob("*.yaml")):
            samples = []
            target = Path(folder) / f"{spec.stem}.pdf"
            for _ in range(args.runs):
                start = time.perf_counter()
                subprocess.run(
                    [gpuplan, "report", "--pdf", "-o", str(target), str(spec)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    check=False,
                )
                samples.append(time.perf_counter() - start)
            pages = len(PdfReader(str(target)).pages)
            medians.append(statistics.median(samples))
            print(f"{spec.name:<32}{medians[-1]:>8.2f}s{pages:>7}")
    print(f"slowest {max(medians):.2f} s per report (target: at most 1.5 s)")


if __name__ == "__main__":
    main()
