"""Mutation testing of the estimator and the rules with mutmut (not part of CI: it takes tens of minutes).

    pip install -e '.[test,mutation]'
    python benchmarks/mutation.py [--workers 2] [PATTERN ...]     # e.g. "gpuplan.estimate.serving.*"

mutmut copies the package into mutants/, changes one operator, constant or call at a time in
gpuplan/estimate/ and gpuplan/rules/ (settings: [tool.mutmut] in pyproject.toml) and runs the tests
that cover the changed function; a mutant the tests do not notice "survived". This prints the killed
share per module and overall, then the survivors (``mutmut show NAME`` prints one's diff).

mutmut 3 skips decorated functions: it copies each function once per mutant, and a copy that kept
``@rule("GP201")`` would register the code twice. That would leave the rule checks (most of
gpuplan/rules/) and the estimates' ``@property`` totals unmeasured, so this script runs mutmut with one
change (:func:`_mutate_wrapped_functions`): a function whose decorators only wrap it (``@rule(...)``,
``@property``, ``@functools.cached_property``, ``@functools.lru_cache(...)``) is mutated too; its copies
go undecorated and the trampoline that replaces it keeps the decorators, except ``lru_cache``, which is
dropped (it only memoises; kept, a result cached before a mutant is switched on would hide the mutant).
``@documentation_only`` entries (no check to mutate) stay skipped. The change reaches into mutmut's
internals, hence the pin in the ``mutation`` extra; it stops with a message on another layout rather than
quietly measuring less. ``python benchmarks/mutation.py --mutmut show NAME`` passes any mutmut command
through with the change.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import random
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
    parser.add_argument(
        "--sample",
        type=int,
        default=0,
        help="run N mutants per module drawn at random (seeded) among those the patterns match, not all",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("patterns", nargs="*")
    args = parser.parse_args()
    mutmut = [sys.executable, str(Path(__file__).resolve()), "--mutmut"]
    names = list(args.patterns)
    if args.sample:
        names = _sample(_statuses(mutmut), args.patterns or ["*"], args.sample, args.seed)
        if not names:  # mutmut run with no names runs every mutant: hours, not a sample
            raise SystemExit(
                "the patterns match no generated mutant (a new or renamed function has none until a run "
                "generates them): run once with the pattern itself, without --sample"
            )
    if not args.no_run:
        # mutmut 3.8 updates its map of which tests reach which function only for tests it has not seen:
        # a renamed or new function would be tried against a few tests and "survive". Mapping afresh
        # costs one run of the suite.
        (ROOT / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
        subprocess.run(
            [*mutmut, "run", "--max-children", str(args.workers), *names],
            cwd=ROOT,
            check=False,
            stdout=subprocess.DEVNULL,
        )
    by_module: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    survivors = []
    for name, status in _statuses(mutmut).items():
        by_module[_module(name)][status] += 1
        if status == "survived":
            survivors.append(name)
    total: collections.Counter[str] = collections.Counter()
    print(f"{'module':<32}{'mutants':>8}{'killed':>8}{'survived':>10}{'other':>7}{'score':>8}")
    for module in sorted(by_module):
        counts = by_module[module]
        total.update(counts)
        print(_row(module, counts))
    print(_row("all", total))
    print(f"\n{len(survivors)} survivors (python benchmarks/mutation.py --mutmut show NAME):")
    for name in survivors:
        print(f"  {name}")


def _statuses(mutmut: list[str]) -> dict[str, str]:
    """Every generated mutant and its status ("not checked" until a run judges it)."""
    listed = subprocess.run(
        [*mutmut, "results", "--all", "true"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    matches = (_RESULT.match(line) for line in listed.stdout.splitlines())
    return {match[1]: match[2] for match in matches if match}


def _module(mutant: str) -> str:
    return mutant.split(".x")[0] if ".x" in mutant else mutant.rsplit(".", 1)[0]


def _sample(statuses: dict[str, str], patterns: list[str], per_module: int, seed: int) -> list[str]:
    """``per_module`` mutants of each module, drawn with ``seed`` among the names ``patterns`` match."""
    if not statuses:
        raise SystemExit("no mutants yet: run once without --sample (or with a pattern) to generate them")
    by_module: dict[str, list[str]] = collections.defaultdict(list)
    for name in sorted(statuses):
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            by_module[_module(name)].append(name)
    chosen = []
    for module in sorted(by_module):
        names = by_module[module]
        chosen += random.Random(f"{seed}:{module}").sample(names, min(per_module, len(names)))
    return chosen


def _row(name: str, counts: collections.Counter[str]) -> str:
    killed = counts["killed"] + counts["timeout"]
    survived = counts["survived"]
    other = sum(counts.values()) - killed - survived
    judged = killed + survived
    score = f"{killed / judged:.0%}" if judged else "-"
    return f"{name:<32}{sum(counts.values()):>8}{killed:>8}{survived:>10}{other:>7}{score:>8}"


# Decorators that wrap a function without running it at definition time or registering it twice once
# the copies are undecorated; name as written in gpuplan/estimate/ and gpuplan/rules/.
_WRAPPERS = {"rule", "property", "functools.cached_property", "functools.lru_cache"}
_MEMOISERS = {"functools.lru_cache"}  # dropped from the mutated module: a cached result hides a mutant


def _mutate_wrapped_functions() -> None:
    """Let mutmut mutate functions whose decorators are all in ``_WRAPPERS`` (see the module docstring)."""
    import libcst as cst
    from mutmut.mutation import file_mutation

    visitor = getattr(file_mutation, "MutationVisitor", None)
    skip = getattr(visitor, "_skip_node_and_children", None)
    arrange = getattr(file_mutation, "function_trampoline_arrangement", None)
    if visitor is None or skip is None or arrange is None:
        raise SystemExit("mutmut's internals moved: update _mutate_wrapped_functions for this mutmut version")

    def name(decorator: cst.Decorator) -> str:
        target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
        return cst.Module([]).code_for_node(target)

    def is_wrapped(node: object) -> bool:
        if not isinstance(node, cst.FunctionDef) or not node.decorators:
            return False
        return all(name(decorator) in _WRAPPERS for decorator in node.decorators)

    def skip_node_and_children(self: object, node: object) -> bool:
        if is_wrapped(node):
            return False
        return bool(skip(self, node))

    def function_trampoline_arrangement(function: object, mutants: object, class_name: object) -> object:
        if not is_wrapped(function):
            return arrange(function, mutants, class_name)
        assert isinstance(function, cst.FunctionDef)
        # The copies (original and mutants) go undecorated; the trampoline, which takes the function's
        # place, keeps the decorators outside mutmut's own.
        declarations, methods, assignments, names = arrange(function.with_changes(decorators=[]), mutants, class_name)
        trampoline = methods[0]
        kept = [decorator for decorator in function.decorators if name(decorator) not in _MEMOISERS]
        methods = [trampoline.with_changes(decorators=[*kept, *trampoline.decorators]), *methods[1:]]
        return declarations, methods, assignments, names

    visitor._skip_node_and_children = skip_node_and_children  # type: ignore[method-assign]
    file_mutation.function_trampoline_arrangement = function_trampoline_arrangement  # type: ignore[assignment]


def _run_mutmut(argv: list[str]) -> None:
    _mutate_wrapped_functions()
    from mutmut.__main__ import cli

    sys.argv = ["mutmut", *argv]
    cli()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--mutmut"]:
        _run_mutmut(sys.argv[2:])
    else:
        main()
