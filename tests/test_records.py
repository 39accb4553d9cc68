"""``evolve``: dataclasses.replace for the planner's hot loops, the same result, refused where unsafe."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import pytest
from conftest import make_spec

from gpuplan.records import evolve

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
