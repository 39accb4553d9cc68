"""How gpuplan refuses hostile inputs: each case's wall time, peak memory, exit code and first finding.

    python benchmarks/resources.py

Each case is a whole `gpuplan lint` process (peak RSS from wait4) with a 20 s guard, so a hang shows as
"HANG" instead of stopping the benchmark. Goal: every rejection under 1 s and 100 MB.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import installed_gpuplan  # noqa: E402

GUARD_S = 20
SERVE = {"context": 8192, "concurrency": 8, "hardware": {"gpu": "l40s"}}


def _spec(**extra: object) -> str:
    document = {"version": 1, "name": "hostile", "model": {"id": "llama-3.1-8b"}, "serve": SERVE, **extra}
    return yaml.safe_dump(document, sort_keys=False)


def big_file(folder: Path) -> list[str]:
    path = folder / "big.yaml"
    with open(path, "wb") as handle:
        handle.write(_spec().encode())
        handle.write(b"#" * (100 * 2**20))  # a 100 MB comment
    return [str(path)]


def dev_zero(folder: Path) -> list[str]:
    return ["/dev/zero"]


def fifo_in_directory(folder: Path) -> list[str]:
    (folder / "specs").mkdir()
    (folder / "specs" / "good.yaml").write_text(_spec())
    os.mkfifo(folder / "specs" / "pipe.yaml")
    return [str(folder / "specs")]


def fifo_named(folder: Path) -> list[str]:
    os.mkfifo(folder / "pipe.yaml")
    return [str(folder / "pipe.yaml")]


def config_dev_zero(folder: Path) -> list[str]:
    path = folder / "spec.yaml"
    path.write_text(_spec().replace("id: llama-3.1-8b", "config: /dev/zero"))
    return [str(path)]


def config_fifo(folder: Path) -> list[str]:
    os.mkfifo(folder / "config.json")
    path = folder / "spec.yaml"
    path.write_text(_spec().replace("id: llama-3.1-8b", "config: config.json"))
    return [str(path)]


def unknown_keys(folder: Path) -> list[str]:
    path = folder / "keys.yaml"
    path.write_text(_spec() + "".join(f"k{index}: 1\n" for index in range(100_000)))
    return [str(path)]


def many_prices(folder: Path) -> list[str]:
    path = folder / "prices.yaml"
    prices = ",".join(f"g{index}: 1" for index in range(100_000))  # flow style: 1.0 MB, under the size limit
    path.write_text(_spec() + "budget: {prices: {" + prices + "}}\n")
    return [str(path)]


def many_gpus(folder: Path) -> list[str]:
    path = folder / "gpus.yaml"
    gpus = "".join(f"  g{index}: {{memory_gib: 8, bandwidth_tbs: 2, bf16_tflops: 3}}\n" for index in range(17_000))
    path.write_text(_spec() + "gpus:\n" + gpus)
    return [str(path)]


def symlink_loop(folder: Path) -> list[str]:
    os.symlink(folder / "b.yaml", folder / "a.yaml")
    os.symlink(folder / "a.yaml", folder / "b.yaml")
    return [str(folder / "a.yaml")]


def config_symlink_loop(folder: Path) -> list[str]:
    os.symlink(folder / "c2.json", folder / "c1.json")
    os.symlink(folder / "c1.json", folder / "c2.json")
    path = folder / "spec.yaml"
    path.write_text(_spec().replace("id: llama-3.1-8b", "config: c1.json"))
    return [str(path)]


def billion_laughs(folder: Path) -> list[str]:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    path = folder / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n")
    return [str(path)]


def deep_nesting(folder: Path) -> list[str]:
    path = folder / "deep.yaml"
    path.write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    return [str(path)]


CASES: list[tuple[str, Callable[[Path], list[str]]]] = [
    ("100 MB file", big_file),
    ("/dev/zero as a spec", dev_zero),
    ("FIFO *.yaml in a linted folder", fifo_in_directory),
    ("FIFO named as a spec", fifo_named),
    ("model.config: /dev/zero", config_dev_zero),
    ("model.config: a FIFO", config_fifo),
    ("100,000 unknown keys", unknown_keys),
    ("100,000 budget.prices", many_prices),
    ("17,000 custom GPUs", many_gpus),
    ("symlink loop (spec)", symlink_loop),
    ("symlink loop (model.config)", config_symlink_loop),
    ("billion laughs (10^10 aliases)", billion_laughs),
    ("100,000 nested lists", deep_nesting),
]


def run(gpuplan: str, paths: list[str], cwd: Path) -> tuple[float, float, int | str, str]:
    start = time.perf_counter()
    process = subprocess.Popen(
        [gpuplan, "lint", *paths], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        out, _ = process.communicate(timeout=GUARD_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return GUARD_S, 0.0, "HANG", ""
    elapsed = time.perf_counter() - start
    usage = process_usage(process.pid)
    first = next((line for line in out.splitlines() if ": GP" in line), out.strip()[:100])
    return elapsed, usage, process.returncode, first


def process_usage(pid: int) -> float:
    """Peak RSS (MiB) of the finished child: the largest since start among reaped children."""
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main() -> None:
    gpuplan = installed_gpuplan()
    print(f"{'case':<34}{'time':>8}{'peak RSS':>11}{'exit':>6}  first finding")
    worst_time, worst_rss = 0.0, 0.0
    for name, build in CASES:
        folder = Path(tempfile.mkdtemp(prefix="gpuplan-res-"))
        try:
            (folder / ".git").mkdir()
            paths = build(folder)
            # Peak RSS per case: measured in a fresh child interpreter so earlier cases do not count.
            elapsed, rss, code, first = _isolated(gpuplan, paths, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        worst_time, worst_rss = max(worst_time, elapsed), max(worst_rss, rss)
        shown = first.split(": ", 1)[-1] if ": GP" in first else first
        print(f"{name:<34}{elapsed:>7.2f}s{rss:>7.0f} MiB{code!s:>6}  {shown[:110]}")
    print(f"worst: {worst_time:.2f} s, {worst_rss:.0f} MiB (goal: each under 1 s and 100 MB)")


def _isolated(gpuplan: str, paths: list[str], folder: Path) -> tuple[float, float, int | str, str]:
    """Run one case from a fresh Python process, so RUSAGE_CHILDREN holds this case's child alone."""
    code = (
        "import sys, json; sys.path.insert(0, sys.argv[1]); import resources; "
        "print(json.dumps(resources.run(sys.argv[2], json.loads(sys.argv[3]), "
        "__import__('pathlib').Path(sys.argv[4]))))"
    )
    import json

    completed = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "benchmarks"), gpuplan, json.dumps(paths), str(folder)],
        capture_output=True,
        text=True,
        timeout=GUARD_S * 2,
    )
    elapsed, rss, exit_code, first = json.loads(completed.stdout)
    return elapsed, rss, exit_code, first


if __name__ == "__main__":
    main()
