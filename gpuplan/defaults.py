"""Field defaults: the schemas' ``default`` keywords, applied to a validated document.

The schema is the one source of truth for every literal default (the README's field reference, editors
using the schema, and the resolved Spec all read the same keyword). A default whose value depends on
other fields (``kv_heads``: the head count; ``serve.quantization``: the checkpoint's own format) has no
keyword; its description says what it is and the resolver computes it.
"""

from __future__ import annotations

import copy
from typing import Any


def resolve_ref(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with a local ``$ref`` ("#/$defs/x") replaced by its target, sibling keywords kept."""
    ref = node.get("$ref")
    if not ref:
        return node
    target: Any = schema
    for part in ref.lstrip("#/").split("/"):
        target = target[part]
    return {**target, **{key: value for key, value in node.items() if key != "$ref"}}


def property_node(schema: dict[str, Any], *path: str) -> dict[str, Any]:
    """The schema node of the property at ``path`` (``"budget", "term_months"``), references resolved."""
    node = resolve_ref(schema, schema)
    for part in path:
        node = resolve_ref(schema, node["properties"][part])
    return node


def apply_defaults(data: Any, schema: dict[str, Any]) -> Any:
    """A copy of schema-valid ``data`` with every absent property that has a ``default`` filled in.

    Defaults apply inside present mappings (and inside a mapping created from its own ``default``,
    such as ``finetune.lora: {}``); absent optional sections stay absent.
    """
    return _apply(data, schema, schema)


def _apply(value: Any, node: dict[str, Any], schema: dict[str, Any]) -> Any:
    node = resolve_ref(schema, node)
    if isinstance(value, dict):
        result = dict(value)
        properties = node.get("properties", {})
        for name, raw_child in properties.items():
            child = resolve_ref(schema, raw_child)
            if name not in result and "default" in child:
                result[name] = copy.deepcopy(child["default"])
            if name in result:
                result[name] = _apply(result[name], child, schema)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            for name in result:
                if name not in properties:
                    result[name] = _apply(result[name], extra, schema)
        return result
    items = node.get("items")
    if isinstance(value, list) and isinstance(items, dict):
        return [_apply(item, items, schema) for item in value]
    return value
