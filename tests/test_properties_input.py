"""Hypothesis properties of loading, validation and the lint command."""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

import yaml
from conftest import EXAMPLES, run_cli, spec_yaml
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.linter import lint_bytes
from gpuplan.loader import load_bytes
from gpuplan.resources import schema_path
from gpuplan.schema_fastpath import certainly_valid
from gpuplan.validate import validate

SCHEMA = json.loads(schema_path().read_text())
_PATTERN_STRATEGIES = {
    "^20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$": st.dates(
        datetime.date(2000, 1, 1), datetime.date(2099, 12, 31)
    ).map(lambda d: d.isoformat()),
    "^(GP[0-9]{3}|[a-z][a-z0-9-]*)$": st.from_regex(r"\AGP[0-9]{3}\Z"),
    "^[A-Z]{3}$": st.from_regex(r"\A[A-Z]{3}\Z"),
    "^[a-z0-9][a-z0-9._-]*$": st.from_regex(r"\A[a-z0-9][a-z0-9._-]{0,20}\Z"),
    "^[ASLM-]+$": st.from_regex(r"\A[ASLM-]{1,60}\Z"),  # architecture.layer_pattern
    "^(sm[0-9]{2,3}|gfx[0-9a-f]{3,4})$": st.from_regex(r"\A(sm[0-9]{2,3}|gfx[0-9a-f]{3,4})\Z"),  # a custom GPU's arch
    # serve.engine_version: releases as pip and vLLM print them, in and out of the modelled range
    "^v?[0-9]+\\.[0-9]+(\\.[0-9]+)?([.+-][0-9A-Za-z.+-]*)?$": st.from_regex(
        r"\Av?0\.[0-9]{1,2}(\.[0-9]{1,2})?(\.post[0-9]|\.dev[0-9]{1,3}\+g[0-9a-f]{7})?\Z"
    ),
}


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        target: Any = SCHEMA
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return target
    return node


def instances(node: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Valid instances of a schema node, built from the schema's own shapes."""
    node = _resolve(node)
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    if "oneOf" in node and "type" not in node:
        return st.one_of([instances(branch, depth) for branch in node["oneOf"]])
    kind = node.get("type")
    if kind == "integer":
        return st.integers(node.get("minimum", -(10**6)), node.get("maximum", 10**6))
    if kind == "number":
        low = node.get("minimum", node.get("exclusiveMinimum", 0))
        high = node.get("maximum", 1e6)
        return st.floats(low, high, exclude_min="exclusiveMinimum" in node, allow_nan=False).filter(
            lambda value: value > low or "exclusiveMinimum" not in node
        )
    if kind == "boolean":
        return st.booleans()
    if kind == "string":
        if "pattern" in node:
            return _PATTERN_STRATEGIES[node["pattern"]]
        return st.text(min_size=node.get("minLength", 0), max_size=min(node.get("maxLength", 30), 30))
    if kind == "array":
        unique = node.get("uniqueItems", False)
        items = instances(node["items"], depth + 1)
        low = node.get("minItems", 0)
        return st.lists(items, min_size=low, max_size=max(low, 2 if depth < 2 else 0), unique=unique)
    if kind == "object":
        return _objects(node, depth)
    raise AssertionError(f"no strategy for {node}")


def _objects(node: dict[str, Any], depth: int) -> st.SearchStrategy[dict[str, Any]]:
    properties = node.get("properties", {})
    required = list(node.get("required", []))
    choices = node.get("oneOf") or node.get("anyOf")

    @st.composite
    def build(draw: Any) -> dict[str, Any]:
        must = list(required)
        excluded: set[str] = set()
        if choices:
            names = [name for branch in choices for name in branch["required"]]
            chosen = draw(st.sampled_from(names))
            must.append(chosen)
            if "oneOf" in node:
                excluded = set(names) - {chosen}
        result: dict[str, Any] = {}
        for name, child in properties.items():
            if name in excluded:
                continue
            if name in must or (depth < 3 and draw(st.booleans())):
                result[name] = draw(instances(child, depth + 1))
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and depth < 3:
            keys = draw(st.lists(_PATTERN_STRATEGIES["^[a-z0-9][a-z0-9._-]*$"], max_size=2, unique=True))
            for key in keys:
                result.setdefault(key, draw(instances(extra, depth + 1)))
        return result

    return build()


@given(st.binary(max_size=400))
def test_lint_never_raises_on_bytes(raw: bytes):
    result = lint_bytes("fuzz.yaml", raw)
    assert all(f.line >= 1 and f.col >= 1 for f in result.findings)
    assert "GP010" not in {f.code for f in result.findings}  # a step that raised is caught as GP010


@given(st.text(max_size=300))
def test_cli_exit_code_follows_the_findings(text: str):
    """Not "any of 0, 1, 2" (the CLI's catch-all guarantees that): the exact code the findings call for.

    An exception anywhere would exit 2 with nothing on stdout and a line on stderr, failing each assert.
    """
    code, out, err = run_cli("lint", "--format", "json", "-", input=text)
    document = json.loads(out)
    found = document["findings"]
    assert err == "" and not [f for f in found if f["code"] == "GP010"]
    expected = 1 if any(f["severity"] == "error" for f in found) else 0
    assert code == document["summary"]["exit_code"] == expected


@given(instances(SCHEMA))
def test_documents_built_from_the_schema_validate(document: dict[str, Any]):
    raw = spec_yaml(document, sort_keys=False, allow_unicode=True).encode()
    loaded = load_bytes("gen.yaml", raw)
    assert loaded.findings == ()
    assert validate(loaded) == ()
    assert certainly_valid(SCHEMA, loaded.data)


EXAMPLE_DOCS = [(path.name, path.read_bytes()) for path in sorted(EXAMPLES.glob("*.yaml"))]


def _leaves(data: Any, pointer: tuple = ()) -> list[tuple]:
    if isinstance(data, dict):
        return [leaf for key, value in data.items() for leaf in _leaves(value, pointer + (key,))]
    if isinstance(data, list):
        return [leaf for index, value in enumerate(data) for leaf in _leaves(value, pointer + (index,))]
    return [pointer]


def _mappings(data: Any, pointer: tuple = ()) -> list[tuple]:
    found = [pointer] if isinstance(data, dict) else []
    children = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    for key, value in children:
        found += _mappings(value, pointer + (key,))
    return found


def _get(data: Any, pointer: tuple) -> Any:
    for part in pointer:
        data = data[part]
    return data


@given(st.sampled_from(EXAMPLE_DOCS), st.data())
def test_single_mutation_is_found_at_the_mutated_key(example: tuple[str, bytes], data: Any):
    _, raw = example
    document = yaml.safe_load(raw)
    kind = data.draw(st.sampled_from(["wrong-type", "out-of-range", "unknown-key"]))
    if kind == "unknown-key":
        # budget.prices and gpus are maps keyed by GPU id: any key is allowed there by the schema.
        closed = [m for m in _mappings(document) if m[-1:] != ("prices",) and m[:1] != ("gpus",)]
        parent = data.draw(st.sampled_from(closed))
        _get(document, parent)["zz_not_a_field"] = 1
        mutated = parent + ("zz_not_a_field",)
    else:
        candidates = [p for p in _leaves(document) if isinstance(p[-1], str)]
        if kind == "out-of-range":
            candidates = [p for p in candidates if type(_get(document, p)) in (int, float)]
        mutated = data.draw(st.sampled_from(candidates))
        container = _get(document, mutated[:-1])
        container[mutated[-1]] = -(10**15) if kind == "out-of-range" else [["not", "a", "scalar"]]
    text = spec_yaml(document, sort_keys=False)
    loaded = load_bytes("m.yaml", text.encode())
    expected_line = loaded.positions[mutated].line
    assert re.search(rf"\b{re.escape(str(mutated[-1]))}\b", text.splitlines()[expected_line - 1])
    lines = {f.line for f in validate(loaded)}
    assert expected_line in lines, (kind, mutated, text)
    assert not certainly_valid(SCHEMA, loaded.data)


@given(st.sampled_from(EXAMPLE_DOCS), st.data())
def test_fast_path_is_sound(example: tuple[str, bytes], data: Any):
    """Whenever the fast path says valid, jsonschema agrees (any leaf replaced by any JSON value)."""
    from jsonschema import Draft202012Validator, FormatChecker

    document = yaml.safe_load(example[1])
    pointer = data.draw(st.sampled_from(_leaves(document)))
    replacement = data.draw(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-5, 10**13),
            st.floats(allow_nan=False),
            st.text(max_size=5),
            st.lists(st.integers(), max_size=2),
        )
    )
    container = _get(document, pointer[:-1])
    container[pointer[-1]] = replacement
    errors = list(Draft202012Validator(SCHEMA, format_checker=FormatChecker()).iter_errors(document))
    if certainly_valid(SCHEMA, document):
        assert errors == []


CATALOG_MODELS = ["llama-3.2-1b", "llama-3.1-8b", "mixtral-8x7b", "gemma-2-9b", "deepseek-v3", "falcon-7b"]
CATALOG_GPUS = ["l4", "l40s", "h100-sxm", "h200-nvl", "b200-hgx", "mi300x", "rtx-4090"]


@given(instances(SCHEMA), st.sampled_from(CATALOG_MODELS), st.sampled_from(CATALOG_GPUS), st.sampled_from(CATALOG_GPUS))
def test_any_valid_spec_lints_without_crashing(document: dict[str, Any], model: str, train_gpu: str, serve_gpu: str):
    """Schema-valid specs with catalog names go through resolve, estimate and every rule without raising."""
    document["model"] = {"id": model}
    document.pop("gpus", None)
    document.get("budget", {}).pop("prices", None)
    if "finetune" in document:
        document["finetune"]["hardware"]["gpu"] = train_gpu
    if "serve" in document:
        document["serve"]["hardware"]["gpu"] = serve_gpu
        for tenant in document["serve"].get("tenants", []):
            tenant["model"] = {"id": "llama-3.2-1b"}
    raw = spec_yaml(document, sort_keys=False, allow_unicode=True).encode()
    result = lint_bytes("fuzz.yaml", raw)
    codes = {f.code for f in result.findings}
    assert not codes & {"GP001", "GP101", "GP102", "GP103", "GP104", "GP105", "GP106", "GP107"}
    if result.analysis is not None:
        for job in (result.analysis.finetune, result.analysis.serve):
            if job is not None:
                assert job.memory.per_gpu > 0
