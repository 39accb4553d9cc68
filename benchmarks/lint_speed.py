"""Wall time of `gpuplan lint` as whole processes, beside check-jsonschema on the same files.

    python benchmarks/lint_speed.py [--runs 5]

Times one spec and 1,000 specs (copies of the examples in a temporary folder); prints the medians
and the ratio gpuplan / check-jsonschema. Targets: one spec <= 0.5x; 1,000 specs <= 2 s. Also times
`gpuplan plan` over the whole catalog (the full table, not lint's lazy queries) for the examples with
the largest search (a 70B deployment; a fine-tune and a deployment in one spec): target <= 0.3 s.
gpuplan's bytecode is compiled first, as any installation does (benchmarks/common.py).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import installed_gpuplan  # noqa: E402

BIN = Path(sys.executable).parent


def timed(command: list[str], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    gpuplan = installed_gpuplan()
    checker = shutil.which("check-jsonschema", path=str(BIN)) or "check-jsonschema"
    schema = str(ROOT / "schemas" / "workload.schema.json")
    examples = sorted((ROOT / "examples").glob("*.yaml"))
    with tempfile.TemporaryDirectory() as folder:
        files = []
        for index in range(1000):
            target = Path(folder) / f"spec{index:04d}.yaml"
            shutil.copy(examples[index % len(examples)], target)
            files.append(str(target))
        one = [files[0]]
        rows = [
            (
                "1 spec",
                timed([gpuplan, "lint", *one], args.runs),
                timed([checker, "--schemafile", schema, *one], args.runs),
            ),
            (
                "1,000 specs",
                timed([gpuplan, "lint", *files], args.runs),
                timed([checker, "--schemafile", schema, *files], args.runs),
            ),
        ]
    plans = [
        (f"plan {name}", timed([gpuplan, "plan", "--format", "json", str(ROOT / "examples" / name)], args.runs))
        for name in ("serve-llama-70b.yaml", "finetune-then-serve.yaml")
    ]
    print(f"{'case':<12}{'gpuplan lint':>14}{'check-jsonschema':>18}{'ratio':>8}")
    for case, ours, theirs in rows:
        print(f"{case:<12}{ours:>13.3f}s{theirs:>17.3f}s{ours / theirs:>8.2f}")
    print("targets: 1 spec ratio <= 0.5; 1,000 specs <= 2 s (gpuplan also estimates and resolves each spec)")
    for case, seconds in plans:
        print(f"{case:<36}{seconds:>7.3f}s")
    print("target: gpuplan plan over the full catalog <= 0.3 s per spec (whole process)")


if __name__ == "__main__":
    main()
