"""The long fuzz run: 10,000 specs and config.json files through lint and estimate, all outputs checked.

    python benchmarks/fuzz.py [--inputs 10000] [--valid-share 0.5] [--config-share 0.3] [--workers 2] [--seed 0]

The same inputs and checks as the suite's tests/test_fuzz.py, many more of them, spread over worker
processes. ``--valid-share`` of the inputs are schema-valid specs from tests/valid_specs.py (generated
from the schema, examples with one or two fields changed, examples on a generated config.json), which
reach the estimators, rules and planner; the rest are mutated specs (tests/mutations.py), of which
``--config-share`` have a mutated config.json. Every input runs `lint` (text, json, github) and
`estimate` (text, json). The run prints the share of inputs that are schema-valid (lint finds no input
or schema error: no GP0xx but GP010, no GP1xx) and the share estimated, how many inputs broke each
check and one example of each, and exits 1 if any did. Problems inside config.json contents are
counted apart, so that they are visible without hiding any other problem.
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

KINDS = ("valid", "mutated", "config")  # schema-valid; a mutated spec; a mutated spec and config.json


def _batch(arguments: tuple[int, int, str]) -> tuple[list[tuple[str, str]], collections.Counter[str]]:
    """Run ``count`` inputs of ``kind`` with Hypothesis from ``seed``: (check, example) for each problem
    found, and the counts of inputs run, broken, valid (no input or schema error) and estimated."""
    count, seed, kind = arguments
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from mutations import fuzzed_inputs, input_errors, problems, valid_inputs
    from test_fuzz import run_all

    found: list[tuple[str, str]] = []
    tally: collections.Counter[str] = collections.Counter()
    strategy = valid_inputs() if kind == "valid" else fuzzed_inputs(with_config=kind == "config")

    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def check(case: tuple[str, bytes, bytes | dict[str, bytes] | None]) -> None:
        name, spec, config = case
        origin = "[config.json] " if kind == "config" else "[valid] " if kind == "valid" else ""
        results = run_all(spec, config)
        failed = problems(results)
        for problem in failed:
            check_name = origin + ": ".join(problem.split(": ")[:2])[:60]
            found.append((check_name, f"{name}: {problem[:300]}"))
        valid = not input_errors(results)
        tally.update({"inputs": 1, f"inputs {kind}": 1, "broken": bool(failed), "valid": valid})
        tally.update({f"valid {kind}": valid, "estimated": '"model":' in results["estimate json"][1]})

    check()
    return found, tally


def _share(part: int, whole: int) -> str:
    return f"{part:,} of {whole:,} ({part / whole:.0%})" if whole else "0 of 0"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inputs", type=int, default=10_000)
    parser.add_argument("--valid-share", type=float, default=0.5)
    parser.add_argument("--config-share", type=float, default=0.3, help="share of the mutated inputs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    valid = round(args.inputs * args.valid_share)
    with_config = round((args.inputs - valid) * args.config_share)
    totals = {"valid": valid, "mutated": args.inputs - valid - with_config, "config": with_config}
    batches = []
    per_batch = 250
    for kind in KINDS:
        for start in range(0, totals[kind], per_batch):
            batches.append((min(per_batch, totals[kind] - start), args.seed * 100_003 + len(batches), kind))
    start_time = time.perf_counter()
    counts: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    tally: collections.Counter[str] = collections.Counter()
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.workers) as pool:
        for found, batch_tally in pool.map(_batch, batches):
            tally += batch_tally
            for check, example in found:
                counts[check] += 1
                examples.setdefault(check, example)
    elapsed = time.perf_counter() - start_time
    inputs = tally["inputs"]
    print(
        f"{inputs:,} inputs in {elapsed:.0f} s: {tally['inputs valid']:,} valid-generated, "
        f"{tally['inputs mutated']:,} mutated, {tally['inputs config']:,} with a mutated config.json"
    )
    print(
        f"schema-valid (no input or schema error): {_share(tally['valid'], inputs)}; "
        f"of the valid-generated {_share(tally['valid valid'], tally['inputs valid'])}, "
        f"of the mutated {_share(tally['valid mutated'] + tally['valid config'], inputs - tally['inputs valid'])}; "
        f"estimated: {_share(tally['estimated'], inputs)}"
    )
    internal = sum(n for check, n in counts.items() if "internal error" in check and "[config.json]" not in check)
    in_config = sum(n for check, n in counts.items() if "internal error" in check and "[config.json]" in check)
    print(
        f"inputs with a problem: {tally['broken']:,}; problems (input x command): {sum(counts.values())}; "
        f"internal errors from specs: {internal}; "
        f"from config.json contents: {in_config}; tracebacks printed: "
        f"{sum(n for check, n in counts.items() if 'Traceback' in examples[check])}"
    )
    for check, number in counts.most_common():
        print(f"  {number:>6}  {check}\n          e.g. {examples[check]}")
    sys.exit(1 if counts else 0)


if __name__ == "__main__":
    main()
