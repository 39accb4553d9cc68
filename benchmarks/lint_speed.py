"""Wall time and peak memory of `gpuplan lint` as whole processes, beside check-jsonschema on the same files.

    python benchmarks/lint_speed.py [--runs 5] [--large 10000] [--cases 1,1000,10000]

The specs are a realistic corpus of distinct specs (benchmarks/corpus.py: varied models, GPUs, methods,
contexts; about half of them fail), not copies of one file. Each case is timed `--runs` times (median)
for both tools in the same run; the peak RSS is the largest process's (a worker's, when lint uses a
pool). Targets: one spec <= 0.5x check-jsonschema; 1,000 specs <= 2 s; 10,000 specs with about the
memory of 1,000. check-jsonschema only validates the schema; gpuplan also resolves, estimates and runs
every rule on each spec. gpuplan's bytecode is compiled first, as any installation does.

A new case is one more `Case` in `cases()`: a name, the gpuplan arguments and (optionally) the
check-jsonschema command to compare with, e.g. a `plan` case that runs `gpuplan plan` on the corpus.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import installed_gpuplan  # noqa: E402
from corpus import write_corpus  # noqa: E402

BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Case:
    name: str
    gpuplan: list[str]  # arguments after the gpuplan executable
    checker: list[str] | None  # the check-jsonschema command line for the same files, or None


@dataclass(frozen=True)
class Sample:
    seconds: float
    peak_rss_mib: float


def measure(command: list[str], cwd: Path) -> Sample:
    """One whole process: wall time and the peak RSS of it or of its largest child."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = 0  # reaped by wait4
    return Sample(elapsed, usage.ru_maxrss / 1024)


def timed(command: list[str], runs: int, cwd: Path) -> Sample:
    samples = [measure(command, cwd) for _ in range(runs)]
    return Sample(statistics.median(s.seconds for s in samples), max(s.peak_rss_mib for s in samples))


def cases(folder: Path, sizes: list[int], checker: str, schema: str) -> list[Case]:
    found = []
    for size in sizes:
        files = [f"spec{index:05d}.yaml" for index in range(size)]
        name = "1 spec" if size == 1 else f"{size:,} specs"
        # Directories are what CI passes; for one spec, the file itself (what pre-commit passes).
        target = files if size == 1 else [f"set{size}"]
        found.append(
            Case(name, ["lint", "--quiet", *target], [checker, "--schemafile", schema, *_checker_files(folder, size)])
        )
    return found


def _checker_files(folder: Path, size: int) -> list[str]:
    if size == 1:
        return ["spec00000.yaml"]
    return sorted(str(path.relative_to(folder)) for path in (folder / f"set{size}").glob("*.yaml"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cases", default="1,1000,10000", help="corpus sizes, comma-separated")
    args = parser.parse_args()
    sizes = [int(size) for size in args.cases.split(",")]
    gpuplan = installed_gpuplan()
    checker = shutil.which("check-jsonschema", path=str(BIN)) or "check-jsonschema"
    schema = str(ROOT / "schemas" / "workload.schema.json")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / ".git").mkdir()  # no configuration above the corpus is picked up
        write_corpus(folder, 1)
        for size in sizes:
            if size > 1:
                write_corpus(folder / f"set{size}", size)
        rows = []
        for case in cases(folder, sizes, checker, schema):
            runs = args.runs if "10,000" not in case.name else max(1, args.runs // 2)
            ours = timed([gpuplan, *case.gpuplan], runs, folder)
            theirs = timed(case.checker, runs, folder) if case.checker else None
            rows.append((case.name, ours, theirs))
    print(f"{'case':<14}{'gpuplan lint':>14}{'peak RSS':>10}{'check-jsonschema':>18}{'peak RSS':>10}{'ratio':>8}")
    for case_name, ours, theirs in rows:
        other = f"{theirs.seconds:>17.3f}s{theirs.peak_rss_mib:>7.0f} MiB" if theirs else f"{'-':>18}{'-':>10}"
        ratio = f"{ours.seconds / theirs.seconds:>8.2f}" if theirs else f"{'-':>8}"
        print(f"{case_name:<14}{ours.seconds:>13.3f}s{ours.peak_rss_mib:>6.0f} MiB{other}{ratio}")
    print(
        f"{os.cpu_count()} cores; targets: 1 spec ratio <= 0.5; 1,000 specs <= 2 s; "
        "10,000 specs with flat memory (gpuplan also resolves, estimates and runs every rule)"
    )


if __name__ == "__main__":
    main()
