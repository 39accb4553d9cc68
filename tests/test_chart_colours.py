"""Every part a memory bar can show has a colour of its own: two parts of one bar in the fallback grey (as
the k-bit preparation's copies and the allocator's cache were) cannot be told apart in the legend."""

from __future__ import annotations

from training_jobs import training_setup, vary

from gpuplan.architecture import Architecture
from gpuplan.estimate.serving import ServingSetup, estimate_serving
from gpuplan.estimate.training_memory import estimate_training
from gpuplan.records import evolve
from gpuplan.report.charts import OTHER_COLOUR, SEGMENT_COLOURS
from tests.tiny_architectures import TINY


def _training_parts() -> set[str]:
    """Every part of every phase, over setups that reach each kind of part: a prepared QLoRA model (its
    loading copies), paged 8-bit states, FSDP's gathered units, autocast's weight copies."""
    qlora = training_setup(architecture=TINY, method="qlora", kbit_preparation="trl", precision="bf16-mixed")
    setups = [
        qlora,
        vary(qlora, optimizer="adamw-8bit-paged"),
        training_setup(architecture=TINY, method="full", precision="bf16-mixed", gpus=2, sharding="fsdp"),
        training_setup(architecture=TINY, method="full", precision="bf16-mixed"),
    ]
    parts = {"allocator_cache", "framework_overhead"}  # beside the peak phase's parts in every breakdown
    for setup in setups:
        for phase in estimate_training(setup, overhead=0).phases.values():
            parts |= set(phase)
    return parts


def test_every_part_of_a_memory_bar_has_a_colour_of_its_own():
    training = _training_parts()
    assert {"kbit_preparation_copies", "paged_optimizer_states", "gathered_parameters"} <= training
    memory = estimate_serving(
        ServingSetup(Architecture(layers=2, hidden=8, heads=2, intermediate=16, vocab=32), 64, 1), 2**30
    )
    serving = set(evolve(memory, tenant_weights=1, tenant_kv_cache=1, lora_slots=1, draft_weights=1).breakdown)
    for parts in (training, serving):
        assert parts <= SEGMENT_COLOURS.keys(), parts - SEGMENT_COLOURS.keys()
        colours = [SEGMENT_COLOURS[name] for name in parts]
        assert OTHER_COLOUR not in colours and len(set(colours)) == len(colours), parts
