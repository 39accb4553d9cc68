"""NCCL's device buffers per communicator (gpuplan.estimate.nccl), and what a training job's figure adds for them.

Every figure below is counted by hand from NCCL's allocations (the module docstring has the source lines):
each channel set up at init holds 3 x 2 MiB of tables, each NVLS channel 2 MiB more, a communicator 4 MiB of
structures; a ring is one 12 MiB send-and-receive pair per collective channel, a tree one more (none over two
ranks); NVLS holds 2 x 1 MiB per NVLS channel and node rank; a point-to-point neighbour 12 MiB per channel.
On NVLink GPUs there are 24 collective and 32 point-to-point channels (so 32 channels set up), 16 NVLS
channels on Hopper behind NVSwitch; between PCIe GPUs 2 and 2.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpuplan.analysis import TRAINING_OVERHEAD, training_overhead, training_setup
from gpuplan.catalog import gpu_catalog
from gpuplan.estimate.nccl import Communicator, communicator_bytes, nccl_bytes, topology_key, training_communicators
from gpuplan.plan.space import Layout
from tests.conftest import make_spec
from tests.test_properties_plan import finetune_planner

MIB = 2**20
GPUS = gpu_catalog()


def world(ranks: int) -> Communicator:
    return Communicator("world", ranks, True)


def test_eight_h100_behind_nvswitch_hold_ring_tree_and_nvls():
    # 32 channels x 6 MiB + 16 NVLS channels x 2 MiB + 4 MiB = 228; ring 24 x 12 = 288; tree 288;
    # NVLS 16 x 2 x 1 MiB x 8 ranks = 256: 1,060 MiB.
    assert communicator_bytes(GPUS["h100-sxm"], world(8)) == 1060 * MIB


def test_a100_has_no_nvls():
    # 32 x 6 + 4 = 196; ring 288; tree 288: 772 MiB (NVLS is Hopper's and later).
    assert communicator_bytes(GPUS["a100-sxm-80gb"], world(8)) == 772 * MIB


def test_two_ranks_have_no_tree_of_their_own():
    # 228 + ring 288 + NVLS 16 x 2 x 1 MiB x 2 = 64: 580 MiB; the tree's neighbour is the ring's.
    assert communicator_bytes(GPUS["h100-sxm"], world(2)) == 580 * MIB


def test_pcie_gpus_build_two_channels():
    # 2 x 6 + 4 = 16; ring 2 x 12 = 24: 40 MiB over two L40S; over four, a tree adds 24: 64 MiB.
    assert communicator_bytes(GPUS["l40s"], world(2)) == 40 * MIB
    assert communicator_bytes(GPUS["l40s"], world(4)) == 64 * MIB


def test_nvls_heads_are_the_node_ranks():
    # 16 over H100 SXM's 8-GPU domain: the NVLS buffers count 8 heads, as 8 ranks do.
    assert communicator_bytes(GPUS["h100-sxm"], world(16)) == communicator_bytes(GPUS["h100-sxm"], world(8))


def test_one_gpu_opens_no_communicator():
    assert training_communicators(1, 1, 1, 1, True) == ()
    assert communicator_bytes(GPUS["h100-sxm"], world(1)) == 0


def test_deepspeed_clones_the_world_group():
    # ZeRO's data-parallel group is a communicator of its own over the same ranks: twice 1,060 MiB.
    opened = training_communicators(8, 8, 1, 1, zero_clone=True)
    assert [c.name for c in opened] == ["world", "ZeRO data-parallel"]
    assert nccl_bytes(GPUS["h100-sxm"], opened) == 2120 * MIB


def test_tensor_and_pipeline_groups():
    # 8 GPUs as 2 data-parallel x TP 2 x PP 2: world 1,060; data-parallel and tensor-parallel pairs 580 each;
    # the pipeline pair: 228 of tables and structures + one neighbour x 32 channels x 12 MiB = 612: 2,832 MiB.
    opened = training_communicators(8, 2, 2, 2, zero_clone=False)
    assert [c.name for c in opened] == ["world", "data-parallel", "tensor-parallel", "pipeline"]
    assert nccl_bytes(GPUS["h100-sxm"], opened) == 2832 * MIB
    # A middle stage of four sends to two neighbours: 228 + 2 x 384 = 996 MiB.
    (pipeline,) = [c for c in training_communicators(4, 1, 1, 4, False) if c.name == "pipeline"]
    assert communicator_bytes(GPUS["h100-sxm"], pipeline) == 996 * MIB


FSDP_SPEC = """
version: 1
name: nccl
model: {id: llama-3.1-8b}
finetune:
  method: full
  seq_len: 2048
  sharding: SHARDING
  hardware: {gpu: GPU, count: COUNT}
"""


def overhead(sharding: str, gpu: str, count: int) -> int:
    text = FSDP_SPEC.replace("SHARDING", sharding).replace("GPU", gpu).replace("COUNT", str(count))
    spec = make_spec(text)
    assert spec.finetune is not None
    return training_overhead(training_setup(spec, spec.finetune))


@pytest.mark.parametrize(
    ("sharding", "gpu", "count", "nccl_mib"),
    [
        ("fsdp", "h100-sxm", 8, 1060),
        ("zero3", "h100-sxm", 8, 2120),
        ("fsdp", "l40s", 2, 40),
        ("fsdp", "h100-sxm", 1, 0),
    ],
)
def test_a_jobs_overhead_is_the_cuda_context_and_its_communicators(sharding, gpu, count, nccl_mib):
    assert overhead(sharding, gpu, count) == TRAINING_OVERHEAD + nccl_mib * MIB


def test_the_planner_remembers_memory_per_nccl_topology():
    """A layout's memory is remembered across GPU kinds only where their NCCL buffers are alike: H100 and H200 SXM
    (both Hopper behind NVSwitch), not H100 and A100 SXM (no NVLS: 288 MiB less over 8 ranks)."""
    assert topology_key(GPUS["h100-sxm"]) == topology_key(GPUS["h200-sxm"])
    assert topology_key(GPUS["h100-sxm"]) != topology_key(GPUS["a100-sxm-80gb"])
    document = {
        "version": 1,
        "name": "p",
        "model": {"id": "llama-3.1-8b"},
        "finetune": {"method": "lora", "sharding": "fsdp", "hardware": {"gpu": "h100-sxm", "count": 8}},
    }
    _, job = finetune_planner(document)
    planner = job.evaluator
    settings = planner.declared_settings()
    h100 = Layout(GPUS["h100-sxm"], 1, 1, 8, settings=settings)
    a100 = dataclasses.replace(h100, gpu=GPUS["a100-sxm-80gb"])
    assert planner.memory(h100).per_gpu - planner.memory(a100).per_gpu == (1060 - 772) * MIB
