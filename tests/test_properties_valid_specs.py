"""Properties over schema-valid specs: lint, estimate and plan never fail inside, and every figure is finite.

tests/valid_specs.py builds the specs from the schema: whole documents, the bundled examples with one or
two fields changed, and models given by generated config.json files. On every one, ``lint`` (the library
call) reports no GP010 (an estimator or rule that raised) and no input or schema error (the generator
only builds valid documents), and where the spec resolves, ``estimate`` and ``plan`` (the CLI, text and
JSON) print no internal error or traceback, and their JSON holds only finite, non-negative numbers
(tests/mutations.py ``problems``). The exhaustive test sets every enum value of every enum field on every
example, one field at a time; the regression tests are the specs that once failed.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import valid_specs as vs
from conftest import run_cli
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from mutations import problems

import gpuplan
from gpuplan.linter import LintResult, lint_bytes, lint_path
from gpuplan.units import rounded

# Codes a schema-valid document never gets: the loader's and the schema's (GP010 is checked apart).
_NOT_FOR_VALID_INPUT = {f"GP00{n}" for n in range(1, 10)} | {"GP011"} | {f"GP1{n:02}" for n in range(100)}


def _lint(case: vs.GeneratedSpec, folder: Path) -> tuple[Path, LintResult]:
    (folder / ".git").mkdir(exist_ok=True)  # no configuration above the spec is picked up
    path = case.write(folder)
    return path, lint_path(str(path))


def lint_problems(result: LintResult) -> list[str]:
    """GP010s, their traces, and any finding that says a generated document is not valid."""
    found = [f"lint: {f.code} {f.message}" for f in result.findings if f.code == "GP010"]
    found += [f"lint traceback: {trace[-1500:]}" for trace in result.tracebacks]
    found += [f"lint: {f.code} on a valid spec: {f.message}" for f in result.findings if f.code in _NOT_FOR_VALID_INPUT]
    return found


def check(case: vs.GeneratedSpec, commands: bool = True) -> tuple[list[str], LintResult]:
    """Lint ``case`` and, where it resolves and ``commands``, run estimate and plan: every problem found."""
    with tempfile.TemporaryDirectory() as name:
        path, result = _lint(case, Path(name))
        found = lint_problems(result)
        if commands and result.analysis is not None:
            outputs = {
                "estimate json": run_cli("estimate", "--format", "json", str(path)),
                "estimate text": run_cli("estimate", str(path)),
                "plan json": run_cli("plan", "--format", "json", str(path)),
                "plan text": run_cli("plan", str(path)),
            }
            # below 0: a layout that does not fit, or whose latency is over its SLO
            found += problems(outputs, signed=frozenset({"headroom_pct", "slo_margin_pct"}))
    return found, result


def assert_sound(case: vs.GeneratedSpec, commands: bool = True) -> LintResult:
    found, result = check(case, commands)
    assert not found, (case.origin, case.yaml(), case.files, found)
    return result


# -- properties ------------------------------------------------------------------------------------------


@given(vs.valid_specs())
def test_generated_specs_never_fail_inside(case: vs.GeneratedSpec):
    assert_sound(case)


@given(vs.example_variants())
def test_examples_with_one_or_two_fields_changed_never_fail_inside(case: vs.GeneratedSpec):
    assert_sound(case)


@given(vs.config_variants())
def test_examples_on_a_generated_config_json_never_fail_inside(case: vs.GeneratedSpec):
    assert_sound(case)


@pytest.mark.parametrize("name", [name for name, _ in vs.EXAMPLES])
def test_every_enum_value_on_every_example(name: str):
    """Exhaustive, not random: each enum field of the schema set to each of its values on each example,
    one field at a time (1,400-odd specs); lint alone, whose estimate refuses a non-finite figure."""
    failed, estimated, seen = [], 0, set()
    for case in vs.one_field_variants(example=name):
        text = case.yaml()
        if text in seen:
            continue
        seen.add(text)
        result = lint_bytes(str(vs.ROOT / "examples" / name), text.encode())
        failed += [(case.origin, problem) for problem in lint_problems(result)]
        estimated += result.analysis is not None
    assert not failed, failed
    assert estimated >= 0.9 * len(seen)  # an enum value almost never stops the estimate (GP023-GP025)


def test_pools_hold_every_enum_value_and_bound():
    for path, node in vs.leaf_fields():
        pool = vs.leaf_pool(path)
        assert all(value in pool for value in vs.enum_values(node)), path
        if node.get("type") in ("integer", "number"):
            low = node.get("minimum", math.nextafter(node.get("exclusiveMinimum", -math.inf), math.inf))
            assert low in pool and node["maximum"] in pool, path
        if node.get("type") == "integer":
            assert low + 1 in pool and node["maximum"] - 1 in pool, path  # just inside each bound
        if node.get("type") == "boolean":
            assert set(pool) == {False, True}, path


def _sample(strategy: st.SearchStrategy[Any], count: int) -> list[Any]:
    """``count`` draws of ``strategy``, the same on every run."""
    drawn: list[Any] = []

    @settings(max_examples=count, derandomize=True, database=None, phases=[Phase.generate], deadline=None)
    @given(strategy)
    def collect(case: Any) -> None:
        drawn.append(case)

    collect()
    return drawn


def test_generated_specs_are_valid_and_mostly_reach_the_estimate():
    """The generator's own contract: every spec is schema-valid; the repaired ones (nine in ten) pass
    GP021-GP027 and are estimated, so that the properties above reach the estimators and rules."""
    reached, repaired, stopped, results = 0, 0, [], []
    cases = _sample(vs.valid_specs(), 100)
    for case in cases:
        with tempfile.TemporaryDirectory() as name:
            _, result = _lint(case, Path(name))
        results.append(result)
        codes = {finding.code for finding in result.findings}
        assert not codes & _NOT_FOR_VALID_INPUT, (case.yaml(), codes)
        reached += result.analysis is not None
        repaired += case.repaired
        if case.repaired and result.analysis is None:
            stopped.append(sorted(code for code in codes if code < "GP100"))
    # Three in four at least. The 100 draws are derandomized, yet which specs they are varies with what the
    # process ran before (79 to 100 estimated across runs of the whole suite, after hybrid config.json files
    # joined the generator; its own run gives 100): the order of that dependence is not pinned down yet.
    assert reached >= 0.75 * len(cases), [
        [f.message for f in r.findings if f.code < "GP100"] for r in results if r.analysis is None
    ][:3]
    assert len(stopped) <= 0.1 * repaired, stopped


# -- regressions: specs that once failed inside ---------------------------------------------------------


def test_rounding_takes_every_finite_figure():
    # A published figure of 1e27 or more (a TTFT over a network of 1e-100 Gb/s) was an InvalidOperation:
    # Decimal's default 28 digits cannot quantize it; the largest floats overflowed the half test.
    assert rounded(1.5e30, 1) == 1.5e30
    assert rounded(1.7976931348623157e308, 2) == 1.7976931348623157e308
    assert rounded(-1.7976931348623157e308, 1) == -1.7976931348623157e308
    assert rounded(2.675, 2) == 2.68 and rounded(1126.5, 0) == 1127.0  # the printed halves still round up


REGRESSIONS: list[tuple[str, list[tuple[vs.Path_, Any]]]] = [
    # The slowest network the schema allows (1 Gb/s; it once allowed any positive rate, and 5e-324 Gb/s
    # was 0 bytes/s once divided by 8, a GP010 ZeroDivisionError, 1e-320 a NaN TTFT and 1e-100 a TTFT of
    # ~1e100 ms that could not be rounded): TP 16 across nodes still gives finite figures.
    (
        "serve-llama-70b.yaml",
        [
            (("serve", "hardware", "network_gbps"), 1),
            (("serve", "hardware", "tensor_parallel"), 16),
            (("serve", "hardware", "count"), 16),
        ],
    ),
    # Likewise for rule GP201, whose planner tries layouts across nodes.
    ("findings/fit-full-70b.yaml", [(("finetune", "hardware", "network_gbps"), 1)]),
    # GP010 KeyError: the training speed's optimizer table lacked adamw-8bit-paged (issue 32).
    ("qlora-llama-70b.yaml", [(("finetune", "optimizer"), "adamw-8bit-paged")]),
    # The slowest FP4 rate the schema allows (0.1 TFLOPS, as for bf16 and fp8; it once allowed any positive
    # rate, and 5e-324 serving NVFP4 weights made every step infinite and the request rate 0, a GP010).
    (
        "serve-llama-70b.yaml",
        [
            (("gpus", vs.ENTRY, "fp4_tflops"), 0.1),
            (("serve", "quantization"), "nvfp4"),
            (("serve", "concurrency"), 1),
        ],
    ),
    # GP010 ValueError (max of nothing): DoRA whose only target is gate_proj, on a plain MLP (no gate).
    (
        "finetune-llama-8b-lora.yaml",
        [
            (("model", "id"), "phi-2"),
            (("finetune", "lora", "targets"), ["gate_proj"]),
            (("finetune", "lora", "variant"), "dora"),
        ],
    ),
]


def test_a_budget_that_reads_zero_has_no_share():
    # A serving budget of 5e-324 reads "0.00 USD": the report printed its share as "(inf%)".
    case = vs.variant("serve-llama-70b.yaml", dict(vs.EXAMPLES)["serve-llama-70b.yaml"], [])
    case.document["budget"]["serve_monthly"] = 5e-324
    with tempfile.TemporaryDirectory() as name:
        path, _ = _lint(case, Path(name))
        found = problems({"report md": run_cli("report", "--md", "-o", "-", str(path))})
    assert not found, found


@pytest.mark.parametrize("name, changes", REGRESSIONS, ids=[f"{n}:{c[0][0][-1]}={c[0][1]}" for n, c in REGRESSIONS])
def test_specs_that_once_failed_inside(name: str, changes: list[tuple[vs.Path_, Any]]):
    example = dict(vs.EXAMPLES)[name]
    result = assert_sound(vs.variant(name, example, changes))
    assert result.analysis is not None


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("serve", "hardware", "network_gbps"), 5e-324, "serve.hardware.network_gbps must be at least 1, got 5e-324"),
        (("gpus", vs.ENTRY, "fp4_tflops"), 1e-300, "fp4_tflops must be at least 0.1, got 1e-300"),
    ],
)
def test_rates_below_the_schemas_floor_are_schema_errors_at_their_field(path, value, message):
    # A rate no hardware has is the spec's error (GP103 at the field), not a figure to model.
    case = vs.variant("serve-llama-70b.yaml", dict(vs.EXAMPLES)["serve-llama-70b.yaml"], [(path, value)])
    with tempfile.TemporaryDirectory() as name:
        _, result = _lint(case, Path(name))
    assert [f.code for f in result.findings if f.code.startswith("GP1")] == ["GP103"]
    assert message in next(f.message for f in result.findings if f.code == "GP103")


# -- tables keyed by an enum field's values -----------------------------------------------------------

# Each covers every value the schema allows for its field (module, table, field, values it may lack and why).
ENUM_TABLES: list[tuple[str, str, vs.Path_, frozenset[str]]] = [
    ("gpuplan.estimate.training_speed", "OPTIMIZER_STATES", ("finetune", "optimizer"), frozenset()),
    ("gpuplan.estimate.serving_load", "TTFT_SHARES", ("serve", "slo", "ttft_statistic"), frozenset()),
    ("gpuplan.assumptions", "OPTIMIZER_NOTES", ("finetune", "optimizer"), frozenset()),
    ("gpuplan.estimate.training", "REGIMES", ("finetune", "precision"), frozenset()),
    ("gpuplan.estimate.training", "SHARDED_WEIGHT_BYTES", ("finetune", "precision"), frozenset()),
    ("gpuplan.estimate.training_activations", "_INPUT_GROUP", ("finetune", "lora", "targets", vs.ITEM), frozenset()),
    ("gpuplan.estimate.calibration", "ENGINE_NAMES", ("serve", "engine"), frozenset()),
    ("gpuplan.estimate.engines", "MEMORY_ENGINES", ("serve", "engine"), frozenset()),
    ("gpuplan.estimate.kernels", "FRAMEWORKS", ("finetune", "framework"), frozenset()),
    ("gpuplan.assumptions", "LOSS_NOTES", ("finetune", "framework"), frozenset()),
    ("gpuplan.estimate.training_memory", "OUTPUTS_HELD", ("finetune", "loop"), frozenset()),
    ("gpuplan.architecture", "_SLIDING_WORDS", ("model", "architecture", "sliding_layers"), frozenset()),
    ("gpuplan.units", "DTYPE_BYTES", ("model", "dtype"), frozenset()),
    ("gpuplan.units", "DTYPE_BYTES", ("finetune", "lora", "dtype"), frozenset()),
    ("gpuplan.units", "DTYPE_BYTES", ("serve", "kv_cache_dtype"), frozenset({"auto"})),  # auto: the model dtype
    ("gpuplan.estimate.frontend", "HTTP_SECONDS", ("serve", "endpoint"), frozenset()),
    ("gpuplan.plan.evaluate", "TTFT_FIGURES", ("serve", "slo", "ttft_statistic"), frozenset()),
    ("gpuplan.assumptions", "KBIT_PREPARATION", ("finetune", "kbit_preparation"), frozenset()),
    ("gpuplan.decision.offered", "METRICS", ("serve", "evidence", vs.ITEM, "metric"), frozenset()),
    ("gpuplan.output.estimate_json", "EVIDENCE_DIGITS", ("serve", "evidence", vs.ITEM, "metric"), frozenset()),
]
# Tables keyed by some of an enum's values on purpose: the values they lack take another path.
PARTIAL_TABLES = {
    "gpuplan.estimate.performance.QUANT_COMPUTE_DTYPE",  # formats with their own GEMM dtype; others compute in 16-bit
    "gpuplan.estimate.performance.UNMEASURED_CEILING",  # KV dtypes whose attention ceiling is not measured
    "gpuplan.estimate.performance.ATTENTION_CEILING",  # kernels with a measured ceiling; eager has its own model
    "gpuplan.units.FP4_BLOCK",  # the two 4-bit float formats' block sizes
    # Quantizations vLLM refuses below a compute capability some catalog GPU has; the others load on every
    # catalog GPU (AWQ from 7.5, GPTQ from 6.0) or gpuplan does not know their minimum.
    "gpuplan.estimate.weights.VLLM_MIN_CAPABILITY",
    "gpuplan.decision.offered.BANDS",  # evidence metrics with a measured band; requests/s has none
}


@pytest.mark.parametrize("module, table, path, lacking", ENUM_TABLES, ids=[f"{t[1]}:{t[2][-1]}" for t in ENUM_TABLES])
def test_every_table_keyed_by_an_enum_has_every_value(module: str, table: str, path: vs.Path_, lacking: frozenset[str]):
    keys = set(getattr(importlib.import_module(module), table))
    values = {value for value in vs.enum_values(vs.node_at(path)) if isinstance(value, str)}
    assert values - lacking <= keys, f"{module}.{table} lacks {sorted(values - lacking - keys)} of {'.'.join(path)}"


def test_every_table_keyed_by_an_enum_is_listed():
    """A module-level dict whose keys are all values of one enum field (two or more of them) is in
    ENUM_TABLES, which the test above holds to every value, or PARTIAL_TABLES: a new table keyed by
    optimizers or precisions cannot miss a value silently, as the training speed's missed
    adamw-8bit-paged."""
    enums = {frozenset(v for v in values if isinstance(v, str)) for _, values in vs.ENUM_FIELDS}
    listed = [entry.rsplit(".", 1) for entry in PARTIAL_TABLES] + [(m, t) for m, t, _, _ in ENUM_TABLES]
    known = {id(getattr(importlib.import_module(module), table)) for module, table in listed}
    unlisted = []
    for info in pkgutil.walk_packages(gpuplan.__path__, "gpuplan."):
        if info.name.endswith("__main__"):  # runs the CLI
            continue
        for name, value in vars(importlib.import_module(info.name)).items():
            keyed = isinstance(value, dict) and len(value) >= 2 and all(isinstance(key, str) for key in value)
            if keyed and id(value) not in known and any(set(value) <= choices for choices in enums):
                unlisted.append(f"{info.name}.{name}")
    assert not unlisted, f"tables keyed by an enum's values, in neither ENUM_TABLES nor PARTIAL_TABLES: {unlisted}"


@settings(max_examples=30)
@given(vs.example_variants())
def test_a_layout_the_plan_calls_unsound_is_never_approved_as_declared(case: vs.GeneratedSpec):
    """The verdict and the plan judge the declared layout alike: an APPROVE (on no waiver) funds a layout every job's
    plan calls sound. A hunt found 13 of 95 fine-tunes APPROVEd beside a plan saying "breaks gradient_sync" or
    "breaks limits", constraints no finding carried to the verdict (GP310 then asked for nothing; GP508 was none)."""
    from gpuplan.config import default_settings
    from gpuplan.decision import Verdict, decide
    from gpuplan.findings import Severity
    from gpuplan.plan.configured import planner_for

    with tempfile.TemporaryDirectory() as name:
        _, result = _lint(case, Path(name))
        if result.analysis is None:
            return
        decision = decide(result, Severity.ERROR)
        if decision.verdict is not Verdict.APPROVE or decision.waived:
            return
        planner = planner_for(result.analysis.spec, result.settings or default_settings())
        for kind in ("finetune", "serve"):
            plan = planner.plan(kind) if getattr(result.analysis, kind) is not None else None
            assert plan is None or plan.declared.sound, (case.origin, case.yaml(), kind, plan.declared.reasons)
