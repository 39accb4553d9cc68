"""``record`` and ``evolve``: ``@dataclass(frozen=True)`` and ``dataclasses.replace`` at a fraction of the
cost, with the same result, refused where unsafe."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import pickle
import pkgutil
import typing
from pathlib import Path

import pytest
from conftest import make_spec
from hypothesis import given
from hypothesis import strategies as st

import gpuplan
from gpuplan.codes import Code
from gpuplan.records import FACTORY, evolve, is_record, record

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
    part = example_spec()
    for name in path.split("."):
        part = getattr(part, name)
    before = dataclasses.astuple(part)
    evolved = evolve(part, **changes)
    assert evolved == dataclasses.replace(part, **changes)
    assert type(evolved) is type(part)
    assert dataclasses.astuple(part) == before  # the original is untouched
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


@pytest.mark.parametrize("instance", [Derived(1), Cached(1), Slotted(1), Mutable(1)], ids=lambda r: type(r).__name__)
def test_records_whose_instances_hold_more_than_their_fields_are_refused(instance):
    # Derived: a copied dict would keep b = 2 for a = 5; Cached: a computed `double` would be copied
    # stale; slots and mutable classes are not what evolve copies.
    if isinstance(instance, Cached):
        assert instance.double == 2
    with pytest.raises(TypeError):
        evolve(instance, a=5)


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


# One shape of field per draw: its default (none, a value or a factory) and the dataclasses flags that
# change what the generated methods read (compare, hash, repr).
FIELD = st.fixed_dictionaries(
    {
        "default": st.sampled_from(["none", "value", "factory"]),
        "compare": st.booleans(),
        "hash": st.sampled_from([None, True, False]),
        "repr": st.booleans(),
    }
)
# Values where equality and hashing differ from the obvious: NaN (equal only to itself by identity in a
# tuple), -0.0 and 0 (equal, same hash), 1 and True, unhashable lists, nested tuples.
VALUE = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([float("nan"), -0.0, 0.0, True, "a", None]),
    st.lists(st.integers(0, 2), max_size=2),
    st.tuples(st.integers(0, 2), st.text(max_size=2)),
)


def _twins(shapes: list[dict]) -> tuple[type, type]:
    """The same class body declared with ``@record`` and with ``@dataclass(frozen=True)``: a field
    with no default never follows one with a default, as dataclasses requires."""
    shapes = sorted(shapes, key=lambda shape: shape["default"] != "none")
    annotations, body = {}, {}
    for index, shape in enumerate(shapes):
        name = f"f{index}"
        annotations[name] = "Any"
        flags = {key: shape[key] for key in ("compare", "hash", "repr")}
        if shape["default"] == "value":
            body[name] = dataclasses.field(default=index, **flags)
        elif shape["default"] == "factory":
            body[name] = dataclasses.field(default_factory=list, **flags)
        else:
            body[name] = dataclasses.field(**flags)

    def declare(decorate) -> type:
        namespace = {"__annotations__": dict(annotations), "__module__": __name__, **dict(body)}
        return decorate(type("Twin", (), namespace))

    # Field objects are bound to the class that processes them: each twin gets its own copies.
    body_for_dataclass = {name: _copy_field(field) for name, field in body.items()}
    ours = declare(record)
    body.clear()
    body.update(body_for_dataclass)
    return ours, declare(dataclasses.dataclass(frozen=True))


def _copy_field(field: dataclasses.Field) -> dataclasses.Field:
    return dataclasses.field(
        default=field.default,
        default_factory=field.default_factory,
        compare=field.compare,
        hash=field.hash,
        repr=field.repr,
    )


def _outcome(action):
    try:
        return ("value", action())
    except Exception as error:  # the twins must fail the same way, with the same message
        return (type(error).__name__, str(error))


@given(shapes=st.lists(FIELD, max_size=5), values=st.lists(st.tuples(VALUE, VALUE), min_size=5, max_size=5))
def test_a_record_behaves_as_the_frozen_dataclass_it_declares(shapes: list[dict], values: list[tuple]):
    ours, theirs = _twins(shapes)
    names = [f.name for f in dataclasses.fields(theirs)]
    assert [f.name for f in dataclasses.fields(ours)] == names
    assert ours.__match_args__ == theirs.__match_args__
    required = [f.name for f in dataclasses.fields(theirs) if f.default is f.default_factory is dataclasses.MISSING]
    # Two instances of each twin from the same arguments (the required fields; the rest by default, or
    # given for every other draw) compare, hash and print alike.
    left_args = {name: values[index][0] for index, name in enumerate(names)}
    right_args = {name: values[index][1] for index, name in enumerate(names)}
    for keep in (required, names):
        left = {name: left_args[name] for name in keep}
        right = {name: right_args[name] for name in keep}
        a, b = ours(**left), ours(**right)
        c, d = theirs(**left), theirs(**right)
        assert vars(a) == vars(c) and vars(b) == vars(d)  # the instance holds its fields and nothing else
        assert repr(a) == repr(c)
        assert (a == b) == (c == d) and (a != b) == (c != d)
        assert (a == a) == (c == c)  # a NaN field: the tuple comparison's identity shortcut, as generated
        assert _outcome(lambda a=a: hash(a)) == _outcome(lambda c=c: hash(c))
        assert dataclasses.astuple(dataclasses.replace(a, **right)) == dataclasses.astuple(d)
    assert (ours(**left) == c) is False  # another class: NotImplemented both ways, as generated
    for name in [*names, "other"]:
        assert _outcome(lambda name=name: setattr(a, name, 1)) == _outcome(lambda name=name: setattr(c, name, 1))
        assert _outcome(lambda name=name: delattr(a, name)) == _outcome(lambda name=name: delattr(c, name))
    assert _outcome(lambda: ours(**left, other=1)) == ("TypeError", _outcome(lambda: theirs(**left, other=1))[1])
    assert is_record(ours) and is_record(theirs)
    assert repr(ours.__dataclass_params__) == repr(theirs.__dataclass_params__)


def test_a_record_compiles_only_its_init():
    # What makes a record cheap to declare: its comparison, hash, repr and frozen guard are the same
    # code for every record, where dataclasses compiles each per class.
    first, second = (record(type(name, (), {"__annotations__": {"a": "int"}})) for name in ("First", "Second"))
    for method in ("__eq__", "__hash__", "__repr__", "__setattr__", "__delattr__"):
        assert getattr(first, method).__code__ is getattr(second, method).__code__, method
    assert first.__init__.__code__ is not second.__init__.__code__


@record
class WithPostInit:
    a: int
    b: list = dataclasses.field(default_factory=list)
    d: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "d", self.a * 2)


@record
class Own:
    a: int

    def __repr__(self) -> str:
        return "own"

    def __eq__(self, other: object) -> bool:
        return True


@record
class OwnHash:
    a: int

    def __hash__(self) -> int:
        return 7


def test_a_record_runs_post_init_and_gives_each_instance_its_own_default_factory_value():
    first, second = WithPostInit(1), WithPostInit(1)
    assert first.d == 2 and first.b == [] and first.b is not second.b
    assert (
        WithPostInit.__doc__ == "WithPostInit(a: 'int', b: 'list' = <factory>, d: 'int' = 0)"
    )  # as dataclasses writes it


def test_methods_a_record_defines_itself_are_kept_as_dataclasses_keeps_them():
    assert repr(Own(1)) == "own" and Own(1) == Own(2)
    # A class defining __eq__ alone gets a field hash, as a frozen dataclass does; an explicit one stays.
    assert hash(Own(1)) == hash((1,)) and hash(OwnHash(1)) == 7 and OwnHash(1) == OwnHash(1) != OwnHash(2)


@record
class Unhashable:
    a: int
    __hash__ = None  # type: ignore[assignment]  # kept, as dataclasses keeps it


@record
class Annotated:
    a: Path
    b: list[int] = dataclasses.field(default_factory=list)


def test_a_record_set_unhashable_stays_unhashable_and_its_init_resolves_its_annotations():
    with pytest.raises(TypeError, match="unhashable"):
        hash(Unhashable(1))
    # The compiled __init__ lives in the class's module, as the generated one does: its string
    # annotations resolve there, and its methods pickle by their qualified names.
    assert typing.get_type_hints(Annotated.__init__) == {"a": Path, "b": list[int], "return": type(None)}
    assert pickle.loads(pickle.dumps(Annotated.__eq__)) is Annotated.__eq__
    assert pickle.loads(pickle.dumps(Annotated(Path("x")))) == Annotated(Path("x"))


def test_dataclasses_read_a_record_as_frozen():
    # A plain dataclass cannot subclass a frozen one; a record refuses to inherit fields at all.
    with pytest.raises(TypeError, match="frozen"):
        dataclasses.dataclass(type("Mutable", (WithPostInit,), {"__annotations__": {"z": int}}))
    with pytest.raises(TypeError, match="inherits"):
        record(type("Sub", (Code,), {"__annotations__": {"z": int}}))


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"__annotations__": {"a": int}, "__slots__": ("a",)}, "slots"),
        ({"__annotations__": {"a": int}, "a": dataclasses.field(kw_only=True)}, "keyword-only"),
        ({"__annotations__": {"a": int}, "a": dataclasses.field(init=False, default=0)}, "init-only"),
        ({"__annotations__": {"self": int}}, "reserves"),
        ({"__annotations__": {"_hidden": int}}, "reserves"),
        ({"__annotations__": {"a": int}, "__setattr__": lambda self, name, value: None}, "frozen"),
        ({"__annotations__": {"a": dataclasses.InitVar[int]}}, "InitVar"),
        ({"__annotations__": {"a": int, "b": int}, "a": 0}, "non-default argument 'b' follows default argument"),
    ],
    ids=["slots", "keyword-only", "outside-init", "self", "underscore", "own-setattr", "initvar", "field-order"],
)
def test_record_refuses_classes_its_compiled_init_would_not_handle(body: dict, reason: str):
    with pytest.raises(TypeError, match=reason):
        record(type("Record", (), body))


def _records() -> list[type]:
    found = []
    for module in pkgutil.walk_packages(gpuplan.__path__, "gpuplan."):
        if module.name.endswith("__main__"):
            continue
        for value in vars(importlib.import_module(module.name)).values():
            if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == module.name:
                found.append(value)
    return found


def test_every_frozen_dataclass_in_gpuplan_is_a_record_with_the_dataclass_signature():
    # A plain @dataclass(frozen=True) would compile its six methods at import (the start-up this
    # avoids); the signature is rebuilt from the fields by dataclasses itself: the same names in the
    # same order, the same defaults (a default factory shows as a sentinel in both).
    classes = [cls for cls in _records() if is_record(cls)]
    assert len(classes) >= 100  # the spec, the estimator's, the planner's and the reports' records
    for cls in classes:
        # The code table's one class stays a stdlib dataclass: that module imports nothing from gpuplan.
        if cls is not Code:
            declared = cls.__setattr__.__code__ is WithPostInit.__setattr__.__code__
            assert declared, f"{cls.__qualname__}: declare it with @record"
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
            assert (parameter.default is FACTORY) if factory else (parameter.default == expected), (cls.__name__, name)
