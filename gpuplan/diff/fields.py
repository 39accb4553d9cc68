"""Which spec fields a change touched, by JSON pointer, with the old and the new value.

Mappings are compared key by key and lists of mappings item by item (``/serve/tenants/0/context``); a
list of plain values (``lora.targets``) is one field. A key present on one side only is added or removed.
"""

from __future__ import annotations

from typing import Any

from gpuplan.findings import json_pointer
from gpuplan.loader import Pointer
from gpuplan.records import record

ADDED, REMOVED, MODIFIED = "added", "removed", "modified"


@record
class FieldChange:
    pointer: Pointer
    kind: str  # added | removed | modified
    before: Any = None
    after: Any = None

    @property
    def json_pointer(self) -> str:
        return json_pointer(self.pointer)


def changed_fields(before: Any, after: Any) -> tuple[FieldChange, ...]:
    """Every leaf that differs between two loaded documents, in document order of ``after`` then ``before``."""
    found: list[FieldChange] = []
    _compare(before, after, (), found)
    return tuple(found)


def _is_branch(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value))


def _children(value: Any) -> dict[str | int, Any]:
    return dict(value) if isinstance(value, dict) else dict(enumerate(value))


def _compare(before: Any, after: Any, pointer: Pointer, found: list[FieldChange]) -> None:
    if _is_branch(before) and _is_branch(after) and type(before) is type(after):
        old, new = _children(before), _children(after)
        for key in [*new, *(k for k in old if k not in new)]:
            path = (*pointer, key)
            if key not in old:
                found.append(FieldChange(path, ADDED, after=new[key]))
            elif key not in new:
                found.append(FieldChange(path, REMOVED, before=old[key]))
            else:
                _compare(old[key], new[key], path, found)
        return
    if not _same(before, after):
        found.append(FieldChange(pointer, MODIFIED, before, after))


def _same(before: Any, after: Any) -> bool:
    """Equal as JSON values: 1 and 1.0 are one number, but True is not 1."""
    if isinstance(before, bool) or isinstance(after, bool):
        return type(before) is type(after) and before == after
    return bool(before == after)
