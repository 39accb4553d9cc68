"""A fast, conservative check that a document is valid against the workload schema.

Pre-commit runs lint on every commit and most specs are valid. Importing jsonschema costs more than
the rest of a lint run, so the schema step first asks this interpreter of the schema's keywords
whether the document is certainly valid; only when it is not (or when it meets a keyword or value it
does not handle) does jsonschema run and produce the findings. Soundness (certainly-valid implies
jsonschema finds no error) is a property test.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_HANDLED = frozenset(
    {
        "$schema",
        "$id",
        "$defs",
        "$ref",
        "title",
        "description",
        "default",  # an annotation: it asserts nothing
        "type",
        "properties",
        "additionalProperties",
        "required",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        "oneOf",
        "anyOf",
        "propertyNames",
        "maxProperties",
        "minProperties",
    }
)


class _Unsure(Exception):
    """The fast path cannot decide; fall back to jsonschema."""


def certainly_valid(schema: dict[str, Any], instance: Any) -> bool:
    try:
        return _valid(schema, schema, instance)
    except _Unsure:
        return False


def _resolve(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    if not ref.startswith("#/") or len(node) > 1:
        raise _Unsure
    target: Any = root
    for part in ref[2:].split("/"):
        target = target[part]
    return target


def _is_type(kind: str, value: Any) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "null":
        return value is None
    raise _Unsure


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        raise _Unsure
    return bool(a == b)


def _valid(root: dict[str, Any], node: dict[str, Any], value: Any) -> bool:
    node = _resolve(root, node)
    if not _HANDLED.issuperset(node):
        raise _Unsure
    kind = node.get("type")
    if kind is not None and not _is_type(kind, value):
        return False
    if "const" in node and not _same(node["const"], value):
        return False
    if "enum" in node and not any(_same(choice, value) for choice in node["enum"]):
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not _number_ok(node, value):
        return False
    if isinstance(value, str) and not _string_ok(node, value):
        return False
    if isinstance(value, list) and not _array_ok(root, node, value):
        return False
    if isinstance(value, dict) and not _object_ok(root, node, value):
        return False
    for keyword in ("oneOf", "anyOf"):
        if keyword in node:
            matches = sum(1 for branch in node[keyword] if _valid(root, branch, value))
            if matches == 0 or (keyword == "oneOf" and matches != 1):
                return False
    return True


def _number_ok(node: dict[str, Any], value: float) -> bool:
    return not (
        ("minimum" in node and value < node["minimum"])
        or ("maximum" in node and value > node["maximum"])
        or ("exclusiveMinimum" in node and value <= node["exclusiveMinimum"])
        or ("exclusiveMaximum" in node and value >= node["exclusiveMaximum"])
    )


def _string_ok(node: dict[str, Any], value: str) -> bool:
    if len(value) < node.get("minLength", 0) or len(value) > node.get("maxLength", len(value)):
        return False
    if "pattern" in node and not re.search(node["pattern"], value):
        return False
    if node.get("format") == "date":
        if not _DATE.fullmatch(value):
            return False
        try:
            datetime.date.fromisoformat(value)
        except ValueError:
            return False
    elif "format" in node:
        raise _Unsure
    return True


def _array_ok(root: dict[str, Any], node: dict[str, Any], value: list[Any]) -> bool:
    if len(value) < node.get("minItems", 0) or len(value) > node.get("maxItems", len(value)):
        return False
    if node.get("uniqueItems"):
        if not all(isinstance(item, str) for item in value):
            raise _Unsure
        if len(set(value)) != len(value):
            return False
    items = node.get("items")
    return items is None or all(_valid(root, items, item) for item in value)


def _object_ok(root: dict[str, Any], node: dict[str, Any], value: dict[Any, Any]) -> bool:
    if not all(isinstance(key, str) for key in value):
        raise _Unsure
    if any(key not in value for key in node.get("required", ())):
        return False
    if len(value) > node.get("maxProperties", len(value)) or len(value) < node.get("minProperties", 0):
        return False
    properties = node.get("properties", {})
    extra = node.get("additionalProperties", True)
    names = node.get("propertyNames")
    for key, item in value.items():
        if names is not None and not _valid(root, names, key):
            return False
        if key in properties:
            if not _valid(root, properties[key], item):
                return False
        elif extra is False or (isinstance(extra, dict) and not _valid(root, extra, item)):
            return False
    return True
