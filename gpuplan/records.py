"""Copies of frozen dataclass records with some fields changed, cheap enough for the planner's inner loops.

``dataclasses.replace`` reads every field and calls ``__init__`` (one ``object.__setattr__`` per field
of a frozen class): about 10 µs for a 29-field fine-tuning job. The planner derives a job from the
spec's for every layout it tries, tens of thousands per lint run, and that copying was about 6% of
lint's time. A record whose instance dictionary holds exactly its fields can be copied as that
dictionary instead, with the same result.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar

Record = TypeVar("Record")


def evolve(record: Record, **changes: Any) -> Record:
    """``dataclasses.replace(record, **changes)`` without calling ``__init__``, for a frozen dataclass
    with no ``__post_init__``, no ``functools.cached_property`` and no ``__slots__`` (checked once per
    class: a derived or cached value would otherwise be copied stale). Field values are not converted or
    validated, as ``replace`` does not either."""
    cls: type = type(record)
    names = _field_names(cls)
    if not changes.keys() <= names:
        unknown = ", ".join(sorted(changes.keys() - names))
        raise TypeError(f"{cls.__name__} has no field {unknown}")
    copy: Record = object.__new__(cls)
    state = copy.__dict__
    state.update(record.__dict__)
    state.update(changes)
    return copy


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    """The init fields of an evolvable class; TypeError for a class whose instance dictionary is not
    exactly its fields."""
    if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__} is not a frozen dataclass")
    if hasattr(cls, "__post_init__") or "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__} derives fields in __post_init__ or has slots: use dataclasses.replace")
    for klass in cls.__mro__:
        if any(isinstance(value, functools.cached_property) for value in vars(klass).values()):
            raise TypeError(f"{cls.__name__} caches properties in its instances: use dataclasses.replace")
    fields = dataclasses.fields(cls)
    if any(not field.init for field in fields):
        raise TypeError(f"{cls.__name__} has fields outside __init__: use dataclasses.replace")
    return frozenset(field.name for field in fields)
