"""The long fuzz run: 10,000 mutated specs and config.json files through lint and estimate, all outputs checked.

    python benchmarks/fuzz.py [--inputs 10000] [--config-share 0.3] [--workers 2] [--seed 0]

The same mutations and checks as the suite's tests/test_fuzz.py (tests/mutations.py), many more inputs,
spread over worker processes. Every input runs `lint` (text, json, github) and `estimate` (text, json);
the run prints how many inputs broke each check and one example of each, and exits 1 if any did.
Problems inside config.json contents (a GP010 where issue 9's validation is not yet in) are counted
apart, so that they are visible without hiding any other problem.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def _batch(arguments: tuple[int, int, bool, int]) -> list[tuple[str, str]]:
    """Run ``count`` inputs with Hypothesis from ``seed``; return (check, example) for each problem found."""
    count, seed, with_config, _ = arguments
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from mutations import fuzzed_inputs, problems
    from test_fuzz import run_all

    found: list[tuple[str, str]] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(fuzzed_inputs(with_config=with_config))
    def check(case: tuple[str, bytes, bytes | None]) -> None:
        name, spec, config = case
        origin = "[config.json] " if with_config else ""
        failed = problems(run_all(spec, config))
        for problem in failed:
            check_name = origin + ": ".join(problem.split(": ")[:2])[:60]
            found.append((check_name, f"{name}: {problem[:300]}"))
        found.append(("", "broken" if failed else ""))  # one per input: counts the inputs run and broken

    check()
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", type=int, default=10_000)
    parser.add_argument("--config-share", type=float, default=0.3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with_config = round(args.inputs * args.config_share)
    batches = []
    per_batch = 250
    for kind, total in ((False, args.inputs - with_config), (True, with_config)):
        for start in range(0, total, per_batch):
            batches.append((min(per_batch, total - start), args.seed * 100_003 + len(batches), kind, start))
    start_time = time.perf_counter()
    counts: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    inputs = broken = 0
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.workers) as pool:
        for found in pool.map(_batch, batches):
            for check, example in found:
                if not check:
                    inputs += 1
                    broken += example == "broken"
                    continue
                counts[check] += 1
                examples.setdefault(check, example)
    elapsed = time.perf_counter() - start_time
    print(f"{inputs:,} inputs ({with_config:,} with a mutated config.json) in {elapsed:.0f} s")
    internal = sum(n for check, n in counts.items() if "internal error" in check and "[config.json]" not in check)
    in_config = sum(n for check, n in counts.items() if "internal error" in check and "[config.json]" in check)
    print(
        f"inputs with a problem: {broken:,}; problems (input x command): {sum(counts.values())}; "
        f"internal errors from specs: {internal}; "
        f"from config.json contents (issue 9): {in_config}; tracebacks printed: "
        f"{sum(n for check, n in counts.items() if 'Traceback' in examples[check])}"
    )
    for check, number in counts.most_common():
        print(f"  {number:>6}  {check}\n          e.g. {examples[check]}")
    sys.exit(1 if counts else 0)


if __name__ == "__main__":
    main()
