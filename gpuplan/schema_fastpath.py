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
from collections.abc import Callable
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


Check = Callable[[Any], bool]  # True: the value is certainly valid at a node; raises _Unsure when it cannot say


def certainly_valid(schema: dict[str, Any], instance: Any) -> bool:
    try:
        return _checker(schema)(instance)
    except _Unsure:
        return False


# The schema, compiled once per process into one check per node (its keywords read once, not per value).
_CHECKERS: dict[int, tuple[dict[str, Any], Check]] = {}


def _checker(schema: dict[str, Any]) -> Check:
    found = _CHECKERS.get(id(schema))
    if found is None or found[0] is not schema:
        found = _CHECKERS[id(schema)] = (schema, _Compiler(schema).node(schema))
    return found[1]


def _unsure(value: Any) -> bool:
    raise _Unsure


class _Compiler:
    """Compiles each node of a schema into a Check; a node reached again (a recursive $ref) shares it."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.compiled: dict[int, Check] = {}

    def node(self, node: dict[str, Any]) -> Check:
        key = id(node)
        if key not in self.compiled:
            cell: list[Check] = []
            self.compiled[key] = lambda value: cell[0](value)  # while the node itself is being compiled
            cell.append(self._resolved(node))
            self.compiled[key] = cell[0]
        return self.compiled[key]

    def _resolved(self, node: dict[str, Any]) -> Check:
        """A "$ref" node is its target (one reference followed, no further), as jsonschema reads it."""
        ref = node.get("$ref")
        if ref is None:
            return self._plain(node)
        if not ref.startswith("#/") or len(node) > 1:
            return _unsure
        target: Any = self.root
        for part in ref[2:].split("/"):
            target = target[part]
        return self._plain(target)

    def _plain(self, node: dict[str, Any]) -> Check:
        """The checks of ``_valid``'s interpretation of a node, in its order, each only where the node has
        its keywords (a mapping's keys must be strings wherever a mapping may stand)."""
        if not _HANDLED.issuperset(node):
            return _unsure
        checks: list[Check] = []
        kind = node.get("type")
        if kind is not None:
            checks.append(_TYPE_CHECKS.get(kind, _unsure))
        if "const" in node:
            constant = node["const"]
            checks.append(lambda value: _same(constant, value))
        if "enum" in node:
            choices = node["enum"]
            checks.append(lambda value: any(_same(choice, value) for choice in choices))
        if node.keys() & _NUMBER_KEYWORDS:
            checks.append(_number_check(node))
        if node.keys() & _STRING_KEYWORDS:
            checks.append(_string_check(node))
        if node.keys() & _ARRAY_KEYWORDS:
            checks.append(self._array_check(node))
        if node.keys() & _OBJECT_KEYWORDS:
            checks.append(self._object_check(node))
        elif kind not in _SCALAR_TYPES:
            checks.append(_string_keys)
        for keyword in ("oneOf", "anyOf"):
            if keyword in node:
                checks.append(self._branches_check([self.node(branch) for branch in node[keyword]], keyword == "oneOf"))
        return _all_of(tuple(checks))

    @staticmethod
    def _branches_check(branches: list[Check], exactly_one: bool) -> Check:
        def check(value: Any) -> bool:
            matches = sum(1 for branch in branches if branch(value))
            return not (matches == 0 or (exactly_one and matches != 1))

        return check

    def _array_check(self, node: dict[str, Any]) -> Check:
        low, high = node.get("minItems", 0), node.get("maxItems")
        unique = node.get("uniqueItems")
        items = None if node.get("items") is None else self.node(node["items"])

        def check(value: Any) -> bool:
            if not isinstance(value, list):
                return True
            if len(value) < low or (high is not None and len(value) > high):
                return False
            if unique:
                if not all(isinstance(item, str) for item in value):
                    raise _Unsure
                if len(set(value)) != len(value):
                    return False
            return items is None or all(items(item) for item in value)

        return check

    def _object_check(self, node: dict[str, Any]) -> Check:
        required = tuple(node.get("required", ()))
        most, least = node.get("maxProperties"), node.get("minProperties", 0)
        properties = {key: self.node(child) for key, child in node.get("properties", {}).items()}
        extra = node.get("additionalProperties", True)
        extra_check = self.node(extra) if isinstance(extra, dict) else None
        names = None if node.get("propertyNames") is None else self.node(node["propertyNames"])

        def check(value: Any) -> bool:
            if not isinstance(value, dict):
                return True
            if not all(isinstance(key, str) for key in value):
                raise _Unsure
            if any(key not in value for key in required):
                return False
            if (most is not None and len(value) > most) or len(value) < least:
                return False
            for key, item in value.items():
                if names is not None and not names(key):
                    return False
                child = properties.get(key)
                if child is not None:
                    if not child(item):
                        return False
                elif extra is False or (extra_check is not None and not extra_check(item)):
                    return False
            return True

        return check


def _all_of(checks: tuple[Check, ...]) -> Check:
    if not checks:
        return _anything
    if len(checks) == 1:
        return checks[0]

    def check(value: Any) -> bool:
        for each in checks:  # noqa: SIM110 (a loop: all() over a generator costs a frame per check)
            if not each(value):
                return False
        return True

    return check


def _anything(value: Any) -> bool:
    return True


def _string_keys(value: Any) -> bool:
    """A mapping with a key that is not a string: the fast path does not judge it."""
    if isinstance(value, dict) and not all(isinstance(key, str) for key in value):
        raise _Unsure
    return True


_NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern", "format"})
_ARRAY_KEYWORDS = frozenset({"minItems", "maxItems", "uniqueItems", "items"})
_OBJECT_KEYWORDS = frozenset(
    {"required", "maxProperties", "minProperties", "properties", "additionalProperties", "propertyNames"}
)
_SCALAR_TYPES = frozenset({"string", "number", "integer", "boolean", "null"})


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_TYPE_CHECKS: dict[str, Check] = {
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "integer": lambda value: (
        (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())
    ),
    "number": _is_number,
    "null": lambda value: value is None,
}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        raise _Unsure
    return bool(a == b)


def _number_check(node: dict[str, Any]) -> Check:
    bounds = [
        (name, node[name]) for name in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if name in node
    ]

    def check(value: Any) -> bool:
        if not _is_number(value):
            return True
        for name, bound in bounds:
            if (
                (name == "minimum" and value < bound)
                or (name == "maximum" and value > bound)
                or (name == "exclusiveMinimum" and value <= bound)
                or (name == "exclusiveMaximum" and value >= bound)
            ):
                return False
        return True

    return check


def _string_check(node: dict[str, Any]) -> Check:
    low, high = node.get("minLength", 0), node.get("maxLength")
    pattern = re.compile(node["pattern"]).search if "pattern" in node else None
    form, formatted = node.get("format"), "format" in node

    def check(value: Any) -> bool:
        if not isinstance(value, str):
            return True
        if len(value) < low or (high is not None and len(value) > high):
            return False
        if pattern is not None and not pattern(value):
            return False
        if form == "date":
            if not _DATE.fullmatch(value):
                return False
            try:
                datetime.date.fromisoformat(value)
            except ValueError:
                return False
        elif formatted:
            raise _Unsure
        return True

    return check
