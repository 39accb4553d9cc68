"""`catalog-hints`: lint's fit hints search only the declared GPU kind unless asked to search them all.

The catalog-wide "cheapest of any GPU" search is the planner's whole search for each spec that does not
fit; off by default, the hints name the fewest GPUs of the declared kind and point to `gpuplan plan`.
"""

from __future__ import annotations

import datetime
import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuplan.cli import cli
from gpuplan.config import Config, ConfigError, load_config
from gpuplan.linter import LintOptions, lint_bytes
from gpuplan.plan.search import JobPlanner
from gpuplan.rules.fit import PLAN_POINTER

TODAY = datetime.date(2026, 12, 2)
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# 70B bf16 at 8 x 8K tokens on 2 x H100 TP 2: the weights fit, the KV cache does not (GP203). With
# budget.prices in EUR, 4 x H100 (TP 4) cost 4 x 3.5 x 730 h = 10,220 EUR a month; 2 x H200 (TP 2),
# 2 x 4.0 x 730 = 5,840 EUR, the cheapest of any GPU.
KV_SHORT = """
    version: 1
    name: t
    model: {id: llama-3.1-70b}
    serve: {context: 8192, concurrency: 8, hardware: {gpu: h100-sxm, count: 2, tensor_parallel: 2}}
    budget: {currency: EUR, prices: {h100-sxm: 3.5, h200-sxm: 4.0}, prices_date: 2026-11-30}
"""
ON_DECLARED = "on h100-sxm: 4 x h100-sxm, tensor_parallel 4 (10,220 EUR/month)"
CHEAPEST = "cheapest: 2 x h200-sxm, tensor_parallel 2 (5,840 EUR/month)"


def hint(text: str, code: str, catalog_hints: bool) -> str:
    options = LintOptions(today=TODAY, select=(code,), catalog_hints=catalog_hints)
    (finding,) = lint_bytes("spec.yaml", textwrap.dedent(text).encode(), options).findings
    return finding.hint


def test_by_default_the_hint_names_the_declared_gpu_and_points_to_plan():
    assert hint(KV_SHORT, "GP203", catalog_hints=False) == f"{ON_DECLARED}; {PLAN_POINTER}"


def test_with_catalog_hints_the_hint_adds_the_cheapest_of_any_gpu():
    assert hint(KV_SHORT, "GP203", catalog_hints=True) == f"{ON_DECLARED}; {CHEAPEST}"


def test_the_hint_costs_its_layouts_in_the_spec_currency():
    # The costs come from budget.prices, in the currency they are quoted in, not the catalog's USD:
    # 4 x 3.5 x 730 = 10,220 a month on the declared GPU and 2 x 4.0 x 730 = 5,840 for the cheapest, in
    # EUR for KV_SHORT and, the same figures quoted in GBP, in GBP.
    assert hint(KV_SHORT, "GP203", catalog_hints=True) == (
        "on h100-sxm: 4 x h100-sxm, tensor_parallel 4 (10,220 EUR/month); "
        "cheapest: 2 x h200-sxm, tensor_parallel 2 (5,840 EUR/month)"
    )
    in_pounds = KV_SHORT.replace("currency: EUR", "currency: GBP")
    assert hint(in_pounds, "GP203", catalog_hints=True) == (
        "on h100-sxm: 4 x h100-sxm, tensor_parallel 4 (10,220 GBP/month); "
        "cheapest: 2 x h200-sxm, tensor_parallel 2 (5,840 GBP/month)"
    )


def test_no_layout_on_the_declared_gpu_is_said_with_its_limits():
    # 405B in bf16 is 811.6 GB (756 GiB) of weights; 8 L4s give the engine 8 x 19.8 GiB: no layout of L4
    # within plan.max_gpus = 8 holds it, and the hint says so rather than "no layout" of any GPU, which
    # only the catalog-wide search could claim.
    spec = """
        version: 1
        name: t
        model: {id: llama-3.1-405b}
        serve: {context: 8192, concurrency: 4, hardware: {gpu: l4}}
        plan: {max_gpus: 8}
    """
    assert hint(spec, "GP201", catalog_hints=False) == (
        f"no layout of l4 within 8 GPUs and 8 nodes holds it soundly; {PLAN_POINTER}"
    )


def test_without_catalog_hints_lint_never_searches_the_whole_catalog(monkeypatch: pytest.MonkeyPatch):
    # The speed guarantee: an uncapped, unfiltered `cheapest` query is the catalog-wide search. Linting
    # every example with the default options makes none; with catalog hints, the examples that do not
    # fit make some (so the probe is not vacuous).
    calls: list[str] = []
    original = JobPlanner.cheapest

    def counting(self, *, ceiling=None, where=None, tag=""):
        if ceiling is None and where is None:
            calls.append(tag)
        return original(self, ceiling=ceiling, where=where, tag=tag)

    monkeypatch.setattr(JobPlanner, "cheapest", counting)
    examples = sorted(EXAMPLES.rglob("*.yaml"))
    for catalog_hints in (False, True):
        calls.clear()
        options = LintOptions(today=TODAY, catalog_hints=catalog_hints)
        for example in examples:
            lint_bytes(str(example), example.read_bytes(), options)
        assert bool(calls) == catalog_hints, catalog_hints


def test_the_configuration_key_and_the_flag_choose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir(exist_ok=True)  # the configuration search stops here
    (tmp_path / "spec.yaml").write_text(textwrap.dedent(KV_SHORT))

    def lint_hint(*arguments: str) -> str:
        result = CliRunner().invoke(cli, ["lint", "--format", "json", *arguments, "spec.yaml"])
        assert result.exit_code == 1, result.output
        (gp203,) = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "GP203"]
        return gp203["hint"]

    assert lint_hint().endswith(PLAN_POINTER)
    assert lint_hint("--catalog-hints").endswith(CHEAPEST)
    (tmp_path / ".gpuplan.yaml").write_text("catalog-hints: true\n")
    assert lint_hint().endswith(CHEAPEST)
    assert lint_hint("--no-catalog-hints").endswith(PLAN_POINTER)


def test_the_schema_default_is_the_dataclass_default(tmp_path: Path):
    # One fact, two places: a configuration without the key gets the schema's default.
    schema = json.loads((Path(__file__).resolve().parent.parent / "schemas" / "config.schema.json").read_text())
    assert schema["properties"]["catalog-hints"]["default"] is Config.catalog_hints is False
    (tmp_path / ".gpuplan.yaml").write_text("fail-on: error\n")
    assert load_config(tmp_path / ".gpuplan.yaml").catalog_hints is False
    (tmp_path / ".gpuplan.yaml").write_text("catalog-hints: yes-please\n")
    with pytest.raises(ConfigError, match="catalog-hints"):
        load_config(tmp_path / ".gpuplan.yaml")


@pytest.mark.parametrize(
    ("spec", "code", "expected"),
    [
        # Only the declared GPU allowed: the cheapest of any GPU is the declared kind's answer, not
        # repeated.
        (KV_SHORT + "    plan: {gpu: [h100-sxm]}\n", "GP203", ON_DECLARED),
        # 405B in bf16 is 811.6 GB of weights; no catalog GPU holds 406 GB, so no layout of two GPUs of
        # any kind does: the catalog-wide search may say so.
        (
            """
            version: 1
            name: t
            model: {id: llama-3.1-405b}
            serve: {context: 8192, concurrency: 4, hardware: {gpu: l4}}
            plan: {max_gpus: 2}
            """,
            "GP201",
            "no layout within 2 GPUs and 8 nodes holds it soundly",
        ),
        # Nothing of L4 within 8 GPUs (8 x 19.8 GiB engine budget), so the hint is the cheapest of any
        # allowed GPU alone: 8 H200 at 4.0 EUR an hour, 8 x 4.0 x 730 = 23,360 EUR a month.
        (
            """
            version: 1
            name: t
            model: {id: llama-3.1-405b}
            serve: {context: 8192, concurrency: 4, hardware: {gpu: l4}}
            plan: {max_gpus: 8, gpu: [l4, h200-sxm]}
            budget: {currency: EUR, prices: {l4: 0.7, h200-sxm: 4.0}, prices_date: 2026-11-30}
            """,
            "GP201",
            "cheapest: 8 x h200-sxm, tensor_parallel 8 (23,360 EUR/month)",
        ),
    ],
    ids=["only-the-declared-gpu", "nothing-anywhere", "nothing-on-the-declared-gpu"],
)
def test_catalog_hints_when_the_two_answers_coincide_or_one_is_missing(spec: str, code: str, expected: str):
    assert hint(spec, code, catalog_hints=True) == expected


def test_gp301_names_the_cheapest_of_any_gpu_with_catalog_hints_and_nothing_else_without():
    # 70B bf16 at 8 x 8K on one H100: 4 x H100 (TP 4) at 3.5 EUR an hour, 4 x 3.5 x 730 = 10,220 EUR a
    # month; with catalog hints, 2 x H200 (TP 2) at 4.0, 2 x 4.0 x 730 = 5,840 EUR, is the cheapest.
    spec = textwrap.dedent(
        """
        version: 1
        name: t
        model: {id: llama-3.1-70b}
        serve: {context: 8192, concurrency: 8, hardware: {gpu: h100-sxm}}
        budget: {currency: EUR, prices: {h100-sxm: 3.5, h200-sxm: 4.0}, prices_date: 2026-11-30}
        plan: {gpu: [h100-sxm, h200-sxm]}
        """
    ).encode()
    declared = "tensor parallelism is needed: 4 x h100-sxm, tensor_parallel 4 fits (10,220 EUR/month)"
    for catalog_hints, tail in (
        (False, ""),
        (True, "; cheapest of any GPU: 2 x h200-sxm, tensor_parallel 2 (5,840 EUR/month)"),
    ):
        options = LintOptions(today=TODAY, select=("GP301",), catalog_hints=catalog_hints)
        (finding,) = lint_bytes("spec.yaml", spec, options).findings
        assert finding.pointer == "/serve/hardware"
        assert finding.message.startswith("serving needs ") and finding.message.endswith(declared + tail)


def test_a_report_points_to_its_own_options_instead_of_gpuplan_plan():
    # The report shows the planner's options for each job (`gpuplan plan`'s search): its findings and
    # first-page changes name that section where lint's hint names the command.
    from gpuplan.report.build import report_model
    from gpuplan.report.model import REPORT_POINTER
    from gpuplan.report.render import render_markdown

    options = LintOptions(today=TODAY)
    result = lint_bytes("spec.yaml", textwrap.dedent(KV_SHORT).encode(), options)
    assert any(f.code == "GP203" and f.hint.endswith(PLAN_POINTER) for f in result.findings)
    markdown = render_markdown(report_model(result, TODAY))
    (row,) = [line for line in markdown.splitlines() if line.startswith("| GP203 |")]
    assert row.endswith(f"(10,220 EUR/month); {REPORT_POINTER} |")  # Markdown escapes the hint's underscores
    assert PLAN_POINTER not in markdown
