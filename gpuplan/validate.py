"""Schema step: every JSON Schema error of a loaded spec, as findings at the offending key or value."""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Iterator
from typing import Any

from gpuplan.defaults import resolve_ref
from gpuplan.findings import Finding, dotted, json_pointer
from gpuplan.loader import LoadedDocument, Pointer
from gpuplan.resources import schema_path
from gpuplan.schema_fastpath import certainly_valid
from gpuplan.units import listing

_TYPE_WORDS = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "empty",
}
_RANGE_WORDS = {
    "minimum": "at least",
    "maximum": "at most",
    "exclusiveMinimum": "greater than",
    "exclusiveMaximum": "less than",
}
_VALUE_CHECKS = (
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minItems",
    "maxItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "propertyNames",
)


@functools.cache
def load_schema(name: str = "workload") -> dict[str, Any]:
    """A bundled schema: "workload" (specs) or "config" (.gpuplan.yaml / [tool.gpuplan])."""
    with open(schema_path(name), encoding="utf-8") as handle:
        schema: dict[str, Any] = json.load(handle)
    return schema


@functools.cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator, FormatChecker

    return Draft202012Validator(load_schema(name), format_checker=FormatChecker(formats=("date",)))


MAX_SUGGESTIONS = 20  # "did you mean" for the first unknown keys of a file only: difflib is the costly part


def validate(document: LoadedDocument, schema: str = "workload") -> tuple[Finding, ...]:
    """Every schema error of ``document`` (which must have loaded), in file order."""
    root = load_schema(schema)
    if certainly_valid(root, document.data):
        return ()
    oversized = [_too_many(document, *found) for found in _oversized(root, root, document.data, ())]
    if oversized:  # the documented limits first: validating 17,000 GPUs one by one says nothing more
        return tuple(oversized)
    findings: dict[tuple[str, str, str], Finding] = {}  # a date breaks its pattern and its format: one finding
    budget = _Suggestions(MAX_SUGGESTIONS)
    for error in _validator(schema).iter_errors(document.data):
        for finding in _findings_for(error, document, budget):
            findings.setdefault((finding.pointer, finding.code, finding.message), finding)
    return tuple(sorted(findings.values(), key=lambda finding: (finding.line, finding.col, finding.code)))


def _oversized(root: dict[str, Any], node: dict[str, Any], value: Any, pointer: Pointer) -> Iterator[tuple[Any, ...]]:
    """(pointer, keyword, limit, size) of each list or mapping longer than its schema's maxItems/maxProperties."""
    node = resolve_ref(root, node)
    if isinstance(value, dict):
        if len(value) > node.get("maxProperties", len(value)):
            yield pointer, "maxProperties", node["maxProperties"], len(value)
            return
        properties = node.get("properties", {})
        extra = node.get("additionalProperties")
        for key, item in value.items():
            child = properties.get(key, extra if isinstance(extra, dict) else None)
            if child is not None:
                yield from _oversized(root, child, item, (*pointer, str(key)))
    elif isinstance(value, list):
        if len(value) > node.get("maxItems", len(value)):
            yield pointer, "maxItems", node["maxItems"], len(value)
            return
        items = node.get("items")
        if isinstance(items, dict):
            for index, item in enumerate(value):
                yield from _oversized(root, items, item, (*pointer, index))


def _too_many(document: LoadedDocument, pointer: Pointer, keyword: str, limit: int, size: int) -> Finding:
    noun = "entries" if keyword == "maxProperties" else "items"
    message = f"{dotted(pointer) or 'the spec'} has {size:,} {noun}; at most {limit:,} are allowed"
    return _at(document, "GP106", pointer, message, on_key=True)


def closest_name(word: str, known: list[str]) -> list[str]:
    """The known name a "did you mean" offers for ``word`` (none, or one)."""
    # A case apart is the likeliest slip (QLoRA for qlora), and difflib's ratio is case-sensitive.
    same_letters = [name for name in known if name.lower() == word.lower()]
    return same_letters[:1] or difflib.get_close_matches(word, known, n=1, cutoff=0.6)


class _Suggestions:
    """How many "did you mean" look-ups are left for this document."""

    def __init__(self, left: int) -> None:
        self.left = left

    def closest(self, word: str, known: list[str]) -> list[str]:
        if self.left <= 0:
            return []
        self.left -= 1
        return closest_name(word, known)


def _findings_for(error: Any, document: LoadedDocument, budget: _Suggestions) -> Iterator[Finding]:
    pointer: Pointer = tuple(error.absolute_path)
    keyword = error.validator
    where = dotted(pointer) or "the spec"
    if keyword == "additionalProperties" and isinstance(error.instance, dict):
        known = sorted(error.schema.get("properties", {}))
        for key in error.instance:
            if key not in known:
                yield _unknown_key(document, pointer, key, known, budget)
        return
    if keyword == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        yield _at(document, "GP104", pointer, f"{where} is missing the required key '{missing}'", on_key=True)
        return
    if keyword in ("oneOf", "anyOf"):
        yield from _choice(error, document, pointer, where, budget)
        return
    value = error.instance
    if keyword == "type":
        wanted = error.validator_value
        words = " or ".join(_TYPE_WORDS.get(item, item) for item in ([wanted] if isinstance(wanted, str) else wanted))
        # YAML reads an unquoted version as a number (0.10 is 0.1): a string wanted where a number stands
        quoted = wanted == "string" and isinstance(value, (int, float)) and not isinstance(value, bool)
        hint = "write it in quotes: YAML reads an unquoted 0.10 as the number 0.1" if quoted else ""
        yield _at(document, "GP102", pointer, f"{where} must be {words}, got {_describe(value)}", hint=hint)
    elif keyword in _RANGE_WORDS:
        yield _at(
            document,
            "GP103",
            pointer,
            f"{where} must be {_RANGE_WORDS[keyword]} {error.validator_value:,}, got {_number(value)}",
        )
    elif keyword in ("enum", "const"):
        yield _choice_value(document, pointer, where, value, error, budget)
    elif keyword in _VALUE_CHECKS:
        yield _at(document, "GP106", pointer, f"{where}: {_value_message(keyword, error)}")
    else:
        yield _at(document, "GP100", pointer, f"{where}: {error.message}")


def _unknown_key(
    document: LoadedDocument, parent: Pointer, key: object, known: list[str], budget: _Suggestions
) -> Finding:
    where = dotted(parent) or "the top level"
    text = str(key)  # the loader's name for it, which positions are kept by
    close = budget.closest(text, known) if isinstance(key, str) else []
    # as YAML wrote it: a `~` key is null and `yes` true, not Python's None and True
    shown = "null" if key is None else str(key).lower() if isinstance(key, bool) else text
    message = f"unknown key '{shown}' in {where}"
    if close:
        message += f" — did you mean '{close[0]}'?"
    hint = "known keys: " + ", ".join(known)
    return _at(document, "GP101", parent + (text,), message, on_key=True, hint=hint)


def _choice(
    error: Any, document: LoadedDocument, pointer: Pointer, where: str, budget: _Suggestions
) -> Iterator[Finding]:
    branches = error.validator_value
    if all(set(branch) == {"required"} for branch in branches):
        options = [name for branch in branches for name in branch["required"]]
        present = [name for name in options if isinstance(error.instance, dict) and name in error.instance]
        if error.validator == "anyOf":
            message = f"{where} needs at least one of {_listing(options, 'or')}"
        elif present:
            message = f"{where} must have exactly one of {_listing(options, 'or')}, not {_listing(present, 'and')}"
        else:
            message = f"{where} needs one of {_listing(options, 'or')}"
        yield _at(document, "GP107", pointer, message, on_key=True)
        return
    from jsonschema.exceptions import best_match

    best = best_match(error.context)
    if best is None:
        yield _at(document, "GP100", pointer, f"{where}: {error.message}")
    else:
        yield from _findings_for(best, document, budget)


def _choice_value(
    document: LoadedDocument, pointer: Pointer, where: str, value: Any, error: Any, budget: _Suggestions
) -> Finding:
    choices = [error.validator_value] if error.validator == "const" else list(error.validator_value)
    message = f"{where} must be {_listing([str(choice) for choice in choices], 'or')}, got {_describe(value)}"
    unquoted = [c for c in choices if not isinstance(c, str) and isinstance(value, str) and str(c) == value]
    close = budget.closest(value, [str(choice) for choice in choices]) if isinstance(value, str) else []
    if unquoted:  # '1' for 1: the text is right, its quotes make it a string
        message += f" — write it without quotes: {unquoted[0]}"
    elif close:
        message += f" — did you mean '{close[0]}'?"
    return _at(document, "GP105", pointer, message)


def _value_message(keyword: str, error: Any) -> str:
    value, limit = error.instance, error.validator_value
    texts: dict[str, Any] = {
        "minLength": lambda: f"must not be shorter than {limit} characters",
        "maxLength": lambda: f"must not be longer than {limit:,} characters",
        "pattern": lambda: (
            _DATE_WORDS.format(_describe(value))
            if _is_date_field(error)
            else f"{_describe(value)} does not match the expected form {limit}"
        ),
        "format": lambda: (
            _DATE_WORDS.format(_describe(value)) if limit == "date" else f"{_describe(value)} is not a {limit}"
        ),
        "minItems": lambda: f"needs at least {limit} item(s)",
        "maxItems": lambda: f"allows at most {limit} items",
        "uniqueItems": lambda: "lists the same item more than once",
        "maxProperties": lambda: f"allows at most {limit} entries",
        "minProperties": lambda: f"needs at least {limit} entries",
        "propertyNames": lambda: error.message,
    }
    return str(texts[keyword]())


_DATE_WORDS = "{} is not a date from 2000-01-01 to 2099-12-31 (YYYY-MM-DD)"


def _is_date_field(error: Any) -> bool:
    return bool(error.schema.get("format") == "date")


def _at(
    document: LoadedDocument, code: str, pointer: Pointer, message: str, *, on_key: bool = False, hint: str = ""
) -> Finding:
    position = document.position(pointer)
    # A value on its own line (a block mapping or list) is reported at its key, so the finding
    # always lands on the line that names the field.
    on_key = on_key or position.value_line != position.line
    line, col = (position.line, position.col) if on_key else (position.value_line, position.value_col)
    return Finding.make(code, message, path=document.path, line=line, col=col, pointer=json_pointer(pointer), hint=hint)


def _listing(items: list[str], word: str) -> str:
    quoted = [f"'{item}'" if not item.isdigit() else item for item in items]
    return listing(quoted, word)


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _describe(value)
    if isinstance(value, int) and abs(value) >= 10**21:
        return f"a number of {len(str(abs(value))):,} digits"
    return f"{value:,}"


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "nothing (an empty value)"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string '{shown}'"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return str(value)
