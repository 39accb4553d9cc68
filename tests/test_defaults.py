"""Field defaults come from one place: the schemas' ``default`` keywords."""

from __future__ import annotations

import dataclasses

from gpuplan.architecture import Architecture
from gpuplan.config import Settings, default_settings
from gpuplan.defaults import apply_defaults, resolve_ref
from gpuplan.validate import load_schema

SCHEMA = {
    "$defs": {"hw": {"type": "object", "properties": {"count": {"type": "integer", "default": 1}}}},
    "type": "object",
    "properties": {
        "section": {"type": "object", "default": {}, "properties": {"x": {"type": "integer", "default": 3}}},
        "optional": {"type": "object", "properties": {"y": {"type": "integer", "default": 4}}},
        "hardware": {"$ref": "#/$defs/hw"},
        "items": {"type": "array", "items": {"$ref": "#/$defs/hw"}},
        "by_id": {"type": "object", "additionalProperties": {"$ref": "#/$defs/hw"}},
    },
}


def test_defaults_fill_present_mappings_follow_refs_and_leave_absent_sections_absent():
    data = {"hardware": {}, "items": [{}, {"count": 8}], "by_id": {"a": {}}}
    filled = apply_defaults(data, SCHEMA)
    assert filled == {
        "section": {"x": 3},  # created from its own default {}, then filled
        "hardware": {"count": 1},
        "items": [{"count": 1}, {"count": 8}],
        "by_id": {"a": {"count": 1}},
    }
    assert "optional" not in filled
    assert data == {"hardware": {}, "items": [{}, {"count": 8}], "by_id": {"a": {}}}, "the input is not changed"
    # A default that is a list or mapping is copied: changing one result leaves the schema's default,
    # and so the next result, as written.
    listed = {"type": "object", "properties": {"tags": {"type": "array", "default": ["a"]}}}
    apply_defaults({}, listed)["tags"].append("b")
    assert apply_defaults({}, listed) == {"tags": ["a"]}
    filled["section"]["x"] = 99
    assert apply_defaults({}, SCHEMA)["section"] == {"x": 3}


def _properties_with_defaults(schema, node, path=""):
    node = resolve_ref(schema, node)
    for name, child in node.get("properties", {}).items():
        child = resolve_ref(schema, child)
        yield f"{path}{name}", child
        yield from _properties_with_defaults(schema, child, f"{path}{name}.")
        if isinstance(child.get("items"), dict):
            yield from _properties_with_defaults(schema, child["items"], f"{path}{name}[].")
        if isinstance(child.get("additionalProperties"), dict):
            yield from _properties_with_defaults(schema, child["additionalProperties"], f"{path}{name}.<id>.")


def test_a_default_is_stated_once_as_a_keyword_not_again_in_words():
    for name in ("workload", "config"):
        schema = load_schema(name)
        for path, node in _properties_with_defaults(schema, schema):
            if "default" in node:
                assert "Default" not in node.get("description", ""), f"{name}: {path} states its default twice"


def test_architecture_defaults_match_the_schema():
    """Explicit architectures and config.json files share the Architecture dataclass: its defaults for the
    fields the spec can set must be the schema's (a mismatch would make the two entry points disagree)."""
    schema = load_schema()
    properties = schema["$defs"]["architecture"]["properties"]
    fields = {field.name: field.default for field in dataclasses.fields(Architecture)}
    with_default = {name: node["default"] for name, node in properties.items() if "default" in node}
    assert with_default, "the architecture section documents defaults"
    for name, value in with_default.items():
        assert fields[name] == value, name


def test_settings_take_every_threshold_default_from_the_config_schema():
    thresholds = load_schema("config")["properties"]["thresholds"]["properties"]
    defaults = default_settings()
    assert {field.name for field in dataclasses.fields(Settings)} == set(thresholds)
    for name, node in thresholds.items():
        # The speed overrides (training_mfu, prefill_mfu, decode_bandwidth) have no default: unset, the
        # calibrated speed model applies, and the setting is None.
        assert getattr(defaults, name) == node.get("default"), name
    assert {name for name, node in thresholds.items() if "default" not in node} == {
        "training_mfu",
        "prefill_mfu",
        "decode_bandwidth",
    }
    assert Settings.from_thresholds({"headroom_pct": 20}).headroom_pct == 20
