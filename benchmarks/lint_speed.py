"""Wall time and peak memory of `gpuplan lint` as whole processes, beside check-jsonschema on the same files.

    python benchmarks/lint_speed.py [--runs 5] [--cases 1,1000,10000,plan]

The specs are a realistic corpus of distinct specs (benchmarks/corpus.py: varied models, GPUs, methods,
contexts; about half of them fail), not copies of one file. Each case is timed `--runs` times for both
tools in the same run, alternating (gpuplan, check-jsonschema, gpuplan, ...) so that both see the same
state of a shared host: the median and the best run of each, and the ratio as the median of the
back-to-back pairs' ratios; the peak RSS is the largest process's (a worker's, when lint uses a pool).
Targets: one spec <= 0.5x check-jsonschema; 1,000 specs <= 2 s; 10,000 specs with about the memory of
1,000. check-jsonschema only validates the schema; gpuplan also resolves, estimates and runs
every rule on each spec. gpuplan's bytecode is compiled first, as any installation does.

The `plan` cases run `gpuplan plan --format json` over the whole catalog (every allowed GPU, TP, PP and
replica count; fine-tuning settings too) for two examples, a serving job and a fine-tune-then-serve spec,
and for the serving job as a burst of 1,000 requests, each as a whole process: target <= 0.3 s per spec. Wall time on
a shared machine includes waiting for a core, so the CPU time of the process tree (user + sys) is printed beside it
for every case.

A new case is one more `Case` in `cases()`: a name, the gpuplan arguments and (optionally) the
check-jsonschema command to compare with.
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
    cpu_seconds: float  # user + sys of the process and every child it waited for (a pool's workers)
    best_seconds: float = 0.0  # the fastest run (of several): the host's noise only ever adds time


def measure(command: list[str], cwd: Path) -> Sample:
    """One whole process: wall time, the peak RSS of it or of its largest child, and its CPU time."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = 0  # reaped by wait4
    # wait4's usage covers the process and its reaped children (the pool workers) together.
    return Sample(elapsed, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime)


def summarised(samples: list[Sample]) -> Sample:
    return Sample(
        statistics.median(s.seconds for s in samples),
        max(s.peak_rss_mib for s in samples),
        statistics.median(s.cpu_seconds for s in samples),
        min(s.seconds for s in samples),
    )


def timed(
    ours: list[str], theirs: list[str] | None, runs: int, cwd: Path
) -> tuple[Sample, Sample | None, float | None]:
    """(gpuplan, check-jsonschema, median ratio of back-to-back pairs), the two run alternately."""
    pairs = [(measure(ours, cwd), measure(theirs, cwd) if theirs else None) for _ in range(runs)]
    mine = summarised([a for a, _ in pairs])
    if theirs is None:
        return mine, None, None
    other = summarised([b for _, b in pairs if b is not None])
    return mine, other, statistics.median(a.seconds / b.seconds for a, b in pairs if b is not None)


PLAN_EXAMPLES = ("serve-llama-70b.yaml", "finetune-then-serve.yaml")


# Plans that once took tens of seconds (found by timing generated specs), kept as cases so that a change that
# brings the search back to stepping every replica count shows here: 256 prompts of 131,072 tokens at once on an
# 8B model under a loose TTFT SLO (every pipelined family's replica counts ran a whole wave: 28 s), and 100 clients
# of two-token answers under a TPOT SLO (each replica count's front-end-bound loop solved its steady states anew: 5 s).
HARD_PLANS = {
    "burst-256x131k": {
        "model": {"id": "llama-3.1-8b"},
        "serve": {"context": 131072, "output_tokens": 128, "concurrency": 256, "arrival": "burst",
                  "slo": {"ttft_ms": 600000}, "hardware": {"gpu": "h100-sxm", "count": 1}},
    },
    "2-tokens-100-loop": {
        "model": {"id": "llama-3.2-3b"},
        "serve": {"context": 17, "output_tokens": 2, "concurrency": 100, "slo": {"tpot_ms": 50},
                  "hardware": {"gpu": "h100-pcie", "count": 8, "tensor_parallel": 8}},
    },
}  # fmt: skip


def plan_cases(folder: Path) -> list[Case]:
    """`gpuplan plan` over the full catalog for each example (no check-jsonschema counterpart), for the serving
    example as a burst of 1,000 requests at once (its SLO judged on each layout's wave), and ``HARD_PLANS``."""
    import yaml

    burst = yaml.safe_load((ROOT / "examples" / PLAN_EXAMPLES[0]).read_text())
    burst["serve"].update(concurrency=1000, arrival="burst")
    written = {"burst-1000": burst} | {name: {"version": 1, "name": name, **spec} for name, spec in HARD_PLANS.items()}
    for name, spec in written.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    examples = [(name.removesuffix(".yaml"), ROOT / "examples" / name) for name in PLAN_EXAMPLES]
    return [
        Case(f"plan {name}", ["plan", "--format", "json", str(path)], None)
        for name, path in [*examples, *((name, folder / f"{name}.yaml") for name in written)]
    ]


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
    parser.add_argument("--cases", default="1,1000,10000,plan", help="corpus sizes and/or plan, comma-separated")
    args = parser.parse_args()
    chosen = args.cases.split(",")
    sizes = [int(size) for size in chosen if size != "plan"]
    load_before = os.getloadavg()[0]
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
        for case in cases(folder, sizes, checker, schema) + (plan_cases(folder) if "plan" in chosen else []):
            runs = args.runs if "10,000" not in case.name else max(1, args.runs // 2)
            rows.append((case.name, *timed([gpuplan, *case.gpuplan], case.checker, runs, folder)))
    print(
        f"{'case':<24}{'gpuplan':>9}{'best':>8}{'CPU':>8}{'peak RSS':>10}"
        f"{'check-jsonschema':>18}{'best':>8}{'CPU':>8}{'peak RSS':>10}{'ratio':>7}"
    )
    for case_name, ours, theirs, ratio in rows:
        other = (
            f"{theirs.seconds:>17.3f}s{theirs.best_seconds:>7.3f}s{theirs.cpu_seconds:>7.2f}s"
            f"{theirs.peak_rss_mib:>6.0f} MiB{ratio:>7.2f}"
            if theirs and ratio is not None
            else f"{'-':>18}{'-':>8}{'-':>8}{'-':>10}{'-':>7}"
        )
        print(
            f"{case_name:<24}{ours.seconds:>8.3f}s{ours.best_seconds:>7.3f}s{ours.cpu_seconds:>7.2f}s"
            f"{ours.peak_rss_mib:>6.0f} MiB{other}"
        )
    load = os.getloadavg()[0]
    print(
        f"{os.cpu_count()} cores, load average {load_before:.1f} before, {load:.1f} after; targets: 1 spec ratio <= "
        "0.5; 1,000 specs "
        "<= 2 s; 10,000 specs with flat memory; plan <= 0.3 s per spec (gpuplan also resolves, estimates and "
        "runs every rule)"
    )


if __name__ == "__main__":
    main()
