"""Mutation testing of the estimator and the rules with mutmut (not part of CI: it takes tens of minutes).

    pip install -e '.[test,mutation]'
    python benchmarks/mutation.py [--workers 2] [PATTERN ...]     # e.g. "gpuplan.estimate.serving.*"

mutmut copies the package into mutants/, changes one operator, constant or call at a time in
gpuplan/estimate/ and gpuplan/rules/ (settings: [tool.mutmut] in pyproject.toml) and runs the tests
that cover the changed function; a mutant the tests do not notice "survived". This prints the killed
share per module and overall, then the survivors (``mutmut show NAME`` prints one's diff).

mutmut 3 does not mutate decorated functions, so the rule checks themselves (``@rule``) are not
mutated; the estimator modules and the rules' helpers are.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_RESULT = re.compile(r"^\s*(\S+): (.+)$")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-run", action="store_true", help="only summarise the last run's results")
    parser.add_argument("patterns", nargs="*")
    args = parser.parse_args()
    mutmut = str(Path(sys.executable).parent / "mutmut")
    if not args.no_run:
        subprocess.run(
            [mutmut, "run", "--max-children", str(args.workers), *args.patterns],
            cwd=ROOT,
            check=False,
            stdout=subprocess.DEVNULL,
        )
    listed = subprocess.run([mutmut, "results", "--all", "true"], cwd=ROOT, capture_output=True, text=True, check=False)
    by_module: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    survivors = []
    for line in listed.stdout.splitlines():
        match = _RESULT.match(line)
        if not match:
            continue
        name, status = match.groups()
        module = name.split(".x")[0] if ".x" in name else name.rsplit(".", 1)[0]
        by_module[module][status] += 1
        if status == "survived":
            survivors.append(name)
    total: collections.Counter[str] = collections.Counter()
    print(f"{'module':<32}{'mutants':>8}{'killed':>8}{'survived':>10}{'other':>7}{'score':>8}")
    for module in sorted(by_module):
        counts = by_module[module]
        total.update(counts)
        print(_row(module, counts))
    print(_row("all", total))
    print(f"\n{len(survivors)} survivors (mutmut show NAME):")
    for name in survivors:
        print(f"  {name}")


def _row(name: str, counts: collections.Counter[str]) -> str:
    killed = counts["killed"] + counts["timeout"]
    survived = counts["survived"]
    other = sum(counts.values()) - killed - survived
    judged = killed + survived
    score = f"{killed / judged:.0%}" if judged else "-"
    return f"{name:<32}{sum(counts.values()):>8}{killed:>8}{survived:>10}{other:>7}{score:>8}"


if __name__ == "__main__":
    main()
