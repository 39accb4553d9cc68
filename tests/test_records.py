"""``evolve`` and ``lean_init``: dataclasses.replace and the dataclass ``__init__`` for the planner's hot loops,
the same result, refused where unsafe."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
from conftest import make_spec

import gpuplan
from gpuplan.records import evolve, lean_init

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "finetune-then-serve.yaml"


def example_spec():
    return make_spec(EXAMPLE.read_text(), EXAMPLE.parent)


@pytest.mark.parametrize(
    ("path", "changes"),
    [
        ("serve", {"concurrency": 3}),
        ("serve.hardware", {"count": 8, "tensor_parallel": 8, "expert_parallel": 1}),
        ("finetune", {"micro_batch": 1, "sharding": "zero3", "tokens": 10**9}),
        ("finetune.hardware", {"count": 2}),
    ],
)
def test_evolve_is_replace_for_the_planners_records(path: str, changes: dict):
    record = example_spec()
    for name in path.split("."):
        record = getattr(record, name)
    before = dataclasses.astuple(record)
    evolved = evolve(record, **changes)
    assert evolved == dataclasses.replace(record, **changes)
    assert type(evolved) is type(record)
    assert dataclasses.astuple(record) == before  # the original is untouched
    with pytest.raises(dataclasses.FrozenInstanceError):
        evolved.count = 1  # type: ignore[misc]


def test_an_unknown_field_is_an_error_as_with_replace():
    hardware = example_spec().serve.hardware
    with pytest.raises(TypeError, match="no field gpus"):
        evolve(hardware, gpus=2)


@dataclasses.dataclass(frozen=True)
class Derived:
    a: int
    b: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "b", self.a * 2)


@dataclasses.dataclass(frozen=True)
class Cached:
    a: int

    @functools.cached_property
    def double(self) -> int:
        return self.a * 2


@dataclasses.dataclass(frozen=True, slots=True)
class Slotted:
    a: int


@dataclasses.dataclass
class Mutable:
    a: int


@pytest.mark.parametrize("record", [Derived(1), Cached(1), Slotted(1), Mutable(1)], ids=lambda r: type(r).__name__)
def test_records_whose_instances_hold_more_than_their_fields_are_refused(record):
    # Derived: a copied dict would keep b = 2 for a = 5; Cached: a computed `double` would be copied
    # stale; slots and mutable classes are not what evolve copies.
    if isinstance(record, Cached):
        assert record.double == 2
    with pytest.raises(TypeError):
        evolve(record, a=5)


def test_an_architectures_remembered_hash_and_stage_split_follow_its_fields():
    # Architecture hashes once and splits stages once per degree; a copy with another field (made by
    # dataclasses.replace, as evolve refuses a class that caches) has its own hash and split.
    from tests.tiny_architectures import TINY

    wider = dataclasses.replace(TINY, layers=TINY.layers + 1)
    same = dataclasses.replace(TINY)
    assert hash(same) == hash(TINY) and same == TINY
    assert hash(wider) != hash(TINY)  # a 64-bit hash of different fields: equal only by accident
    assert TINY.stage_layers(2) == TINY.stage_layers(2)
    assert sum(len(stage) for stage in wider.stage_layers(2)) == TINY.layers + 1
    with pytest.raises(TypeError):
        evolve(TINY, layers=3)


def _record_class() -> type:
    """A fresh frozen dataclass with a default, a default factory and a value derived in __post_init__."""

    @dataclasses.dataclass(frozen=True)
    class Record:
        a: int
        b: str = "b"
        c: list = dataclasses.field(default_factory=list)
        d: int = 0

        def __post_init__(self) -> None:
            object.__setattr__(self, "d", self.a * 2)

    return Record


Plain = _record_class()
Lean = lean_init(_record_class())


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((1,), {}), ((1, "x"), {}), ((1,), {"c": [3]}), ((), {"a": 4, "b": "y", "c": [], "d": 9}), ((2, "z", [1], 5), {})],
)
def test_lean_init_builds_what_the_dataclass_init_builds(args: tuple, kwargs: dict):
    plain, lean = Plain(*args, **kwargs), Lean(*args, **kwargs)
    assert dataclasses.astuple(lean) == dataclasses.astuple(plain)
    assert lean.d == lean.a * 2  # __post_init__ ran
    assert vars(lean) == vars(plain)  # the instance holds its fields and nothing else
    with pytest.raises(dataclasses.FrozenInstanceError):
        lean.a = 3  # type: ignore[misc]


def test_lean_init_refuses_arguments_as_the_dataclass_init_does():
    for args, kwargs in [((), {}), ((1,), {"e": 2}), ((1,), {"a": 1}), ((1, "b", [], 0, 5), {})]:
        with pytest.raises(TypeError):
            Plain(*args, **kwargs)
        with pytest.raises(TypeError):
            Lean(*args, **kwargs)


def test_each_lean_record_gets_its_own_default_factory_value():
    first, second = Lean(1), Lean(1)
    assert first.c == [] and first.c is not second.c


@pytest.mark.parametrize(
    "decorate",
    [
        dataclasses.dataclass,  # not frozen
        dataclasses.dataclass(frozen=True, slots=True),
        dataclasses.dataclass(frozen=True, kw_only=True),
    ],
    ids=["mutable", "slots", "keyword-only"],
)
def test_lean_init_refuses_classes_it_would_not_check(decorate):
    with pytest.raises(TypeError):
        lean_init(decorate(type("Record", (), {"__annotations__": {"a": int}})))


@pytest.mark.parametrize("name", ["self", "_hidden"])
def test_lean_init_refuses_field_names_its_code_would_shadow(name: str):
    with pytest.raises(TypeError, match="reserves"):
        lean_init(dataclasses.dataclass(frozen=True)(type("Record", (), {"__annotations__": {name: int}})))


def _lean_classes() -> list[type]:
    found = []
    for module in pkgutil.walk_packages(gpuplan.__path__, "gpuplan."):
        if module.name.endswith("__main__"):
            continue
        for value in vars(importlib.import_module(module.name)).values():
            if (
                isinstance(value, type)
                and getattr(value.__init__, "lean_init", False)
                and value.__module__ == module.name
            ):
                found.append(value)
    return found


def test_every_lean_record_takes_the_arguments_its_dataclass_init_would():
    # The generated signature, rebuilt from the fields by dataclasses itself: the same names in the
    # same order, the same defaults (a default factory shows as a sentinel in both).
    classes = _lean_classes()
    assert len(classes) >= 10  # the estimator's and the planner's records
    for cls in classes:
        twin = dataclasses.make_dataclass(
            cls.__name__,
            [
                (f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory))
                for f in dataclasses.fields(cls)
            ],
            frozen=True,
        )
        ours, theirs = inspect.signature(cls.__init__).parameters, inspect.signature(twin.__init__).parameters
        assert list(ours) == list(theirs), cls.__name__
        for name, parameter in ours.items():
            expected = theirs[name].default
            factory = (
                expected is not inspect.Parameter.empty and type(expected).__name__ == "_HAS_DEFAULT_FACTORY_CLASS"
            )
            assert factory or parameter.default == expected, (cls.__name__, name)
