"""Field defaults: the schemas' ``default`` keywords, applied to a validated document.

The schema is the one source of truth for every literal default (the field reference in docs/spec.md, editors
using the schema, and the resolved Spec all read the same keyword). A default whose value depends on
other fields (``kv_heads``: the head count; ``serve.quantization``: the checkpoint's own format) has no
keyword; its description says what it is and the resolver computes it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from gpuplan.units import whole_number


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
    """A copy of schema-valid ``data`` with every absent property that has a ``default`` filled in, and
    every integer written as an integral float (``4.0``, which JSON Schema's ``integer`` accepts) made an
    ``int``, so that no later count reaches ``range`` or a date as a float.

    Defaults apply inside present mappings (and inside a mapping created from its own ``default``,
    such as ``finetune.lora: {}``); absent optional sections stay absent.
    """
    return _filler(schema)(data)


Filler = Callable[[Any], Any]
# Each schema's compiled filler (kept with the schema, whose id is the key): every spec is filled from
# the same schema, whose references are resolved once rather than on every spec.
_FILLERS: dict[int, tuple[dict[str, Any], Filler]] = {}


def _filler(schema: dict[str, Any]) -> Filler:
    known = _FILLERS.get(id(schema))
    if known is None or known[0] is not schema:
        known = _FILLERS[id(schema)] = (schema, _compile(schema, schema, {}) or _unchanged)
    return known[1]


def _unchanged(value: Any) -> Any:
    return value


def _integer_only(node: dict[str, Any]) -> bool:
    """Whether the node's type (or its alternatives') takes integers and no other number."""
    types: set[str] = set()
    for candidate in (node, *node.get("oneOf", ()), *node.get("anyOf", ())):
        kind = candidate.get("type") if isinstance(candidate, dict) else None
        types.update([kind] if isinstance(kind, str) else kind or ())
    return "integer" in types and "number" not in types


def _compile(node: dict[str, Any], schema: dict[str, Any], done: dict[int, Filler | None]) -> Filler | None:
    """The function that fills the defaults of a value of ``node``; None when nothing below it has a
    default (the value is kept as it is). ``done`` shares nodes reached by several references (the
    bundled schemas have no reference cycle)."""
    if id(node) in done:
        return done[id(node)]
    resolved = resolve_ref(schema, node)
    properties: list[tuple[str, Filler | None, bool, Any]] = []
    for name, raw_child in resolved.get("properties", {}).items():
        child = resolve_ref(schema, raw_child)
        properties.append((name, _compile(raw_child, schema, done), "default" in child, child.get("default")))
    extra_node, items_node = resolved.get("additionalProperties"), resolved.get("items")
    extra = _compile(extra_node, schema, done) if isinstance(extra_node, dict) else None
    items = _compile(items_node, schema, done) if isinstance(items_node, dict) else None
    names = frozenset(name for name, *_ in properties)
    fills = [entry for entry in properties if entry[1] is not None or entry[2]]

    def fill(value: Any) -> Any:
        if isinstance(value, dict):
            result = dict(value)
            for name, child_fill, has_default, default in fills:
                if name not in result:
                    if not has_default:
                        continue
                    # a mapping or list default is copied: the schema's own must never be changed
                    result[name] = copy.deepcopy(default) if isinstance(default, (dict, list)) else default
                if child_fill is not None:
                    result[name] = child_fill(result[name])
            if extra is not None:
                for name in result:
                    if name not in names:
                        result[name] = extra(result[name])
            return result
        if isinstance(value, list) and items is not None:
            return [items(item) for item in value]
        return value

    compiled = fill if fills or extra is not None or items is not None else None
    if compiled is None and _integer_only(resolved):
        compiled = whole_number
    done[id(node)] = compiled
    return compiled
