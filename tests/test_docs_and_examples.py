from __future__ import annotations

import json
import re

from conftest import EXAMPLES, ROOT, run_cli

from gpuplan.codes import CODES
from gpuplan.rules.registry import DOC_SECTIONS, all_rules
from gpuplan.schema_doc import reference_table
from gpuplan.validate import load_schema


def test_readme_field_reference_matches_the_schema():
    readme = (ROOT / "README.md").read_text()
    assert reference_table(load_schema()) in readme, "regenerate with `gpuplan schema --markdown`"


def test_every_rule_documents_its_sections_in_order_and_codes_are_unique():
    rules = all_rules()
    assert [rule.code for rule in rules] == sorted(CODES), "every code of the table has its documentation"
    assert len({entry.name for entry in CODES.values()}) == len(CODES)
    for rule in rules:
        assert rule.body.startswith("## What it does"), f"{rule.code}: the summary is the code table's, not the doc's"
        positions = [rule.doc.find(section) for section in DOC_SECTIONS]
        assert all(position > 0 for position in positions), f"{rule.code} lacks a section"
        assert positions == sorted(positions), f"{rule.code} sections out of order"
        assert re.fullmatch(r"GP\d{3}", rule.code) and re.fullmatch(r"[a-z][a-z0-9-]+", rule.name)


def test_explain_prints_one_rule():
    code, out, _ = run_cli("explain", "duplicate-key")
    assert code == 0 and out.startswith("GP002 duplicate-key (input, default severity error)")
    code, _, err = run_cli("explain", "GP999")
    assert code == 2 and "unknown rule 'GP999'" in err


def test_examples_lint_as_their_comments_say():
    """Each example states its exit code and the exact set of codes it yields (waived ones included)."""
    examples = sorted(EXAMPLES.rglob("*.yaml"))
    assert len(examples) >= 20
    for path in examples:
        expected = re.search(r"# Expected: exit (\d); findings: (.*)", path.read_text())
        assert expected, f"{path.name} does not say what lint yields"
        code, out, _ = run_cli("lint", "--format", "json", str(path))
        found = sorted({finding["code"] for finding in json.loads(out)["findings"]})
        wanted = [] if expected.group(2).strip() == "none" else [c.strip() for c in expected.group(2).split(",")]
        assert (code, found) == (int(expected.group(1)), wanted), path.name


def test_every_rule_family_is_exercised_by_an_example():
    seen = set()
    for path in EXAMPLES.rglob("*.yaml"):
        seen |= set(re.findall(r"GP\d{3}", re.search(r"# Expected: .*", path.read_text()).group(0)))
    checks = {rule.code for rule in all_rules() if rule.check is not None} | {"GP701", "GP702"}
    assert checks <= seen, sorted(checks - seen)


def test_readme_accuracy_section_is_the_benchmark_output():
    import subprocess
    import sys

    completed = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "accuracy.py"), "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr  # every target of issue 9 holds
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- BEGIN ACCURACY")[1].split("<!-- END ACCURACY -->")[0]
    assert completed.stdout.rstrip("\n") in block, "regenerate with `python benchmarks/accuracy.py --quiet`"


def test_readme_lists_every_model_type_read():
    from gpuplan.hf_config import MODEL_TYPES, MULTIMODAL_TYPES

    readme = (ROOT / "README.md").read_text()
    for model_type in (*MODEL_TYPES, *MULTIMODAL_TYPES):
        assert f"| `{model_type}` |" in readme, model_type
