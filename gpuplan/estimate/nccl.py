"""NCCL's device memory: the buffers each communicator a training job opens holds on every GPU.

NCCL allocates its buffers with cuMem outside PyTorch's caching allocator, so ``nvidia-smi`` shows them and
``max_memory_reserved`` does not. Per communicator, as NCCL 2.22 and later allocate them (PyTorch 2.7
and later ship 2.26 or later; NVIDIA/nccl, read at 2.30.7):

- **channels**: each of ``max(collective, p2p)`` channels set up at init holds three 2 MiB device tables
  (peers, shared peers, the ring's rank table: src/channel.cc, lines 44, 48 and 60; every cuMem allocation
  rounds up to the 2 MiB granularity, src/include/alloc.h), each NVLS channel 2 MiB more (channel.cc, line
  98), and the communicator about 4 MiB of device structures (src/init.cc, lines 587-589).
- **connections**: every connection carries a buffer for each protocol whatever protocol later runs (LL 512
  KiB, LL128 4.6875 MiB, Simple 4 MiB: src/init.cc, lines 810-816; src/transport/p2p.cc, lines 486-491),
  so a send and a receive hold 2 MiB + 10 MiB in write mode and 6 + 6 MiB in A100's read mode: 12 MiB in
  both (the buffers rounded to 2 MiB, p2p.cc lines 410 and 491). NCCL connects an algorithm the first time
  a collective picks it (``NCCL_RUNTIME_CONNECT``, on by default: init.cc line 61; enqueue.cc lines
  495-503): a ring is one send and one receive per channel at any scale (src/graph/connect.cc); a tree adds
  at most one more pair per channel, none over two ranks (the ring's connection to the same peer is reused:
  src/transport.cc, lines 51 and 58); point-to-point sends and receives use connections of their own,
  ``p2p`` channels to each peer they reach.
- **NVLS** (NVLink SHARP, on Hopper and Blackwell behind NVSwitch, on by default since 2.18): nvls channels
  x 2 x 1 MiB (128 KiB chunks x 8 steps) x the node's ranks (src/transport/nvls.cc, lines 424-430).

The channel counts are those NCCL's topology search picks and its INFO lines print: 24 collective and 32
point-to-point channels (32 per peer) over NVLink on 8 x H100 SXM and on A100 SXM, 16 NVLS channels on
Hopper (24 on Blackwell: nvls.cc lines 155-157); 2 and 2 between PCIe GPUs. A GPU pair on an NVLink bridge
is counted as NVLink-connected (NCCL may build fewer channels over fewer links: the figure is then high).
A communicator that runs all-reduce (loss logging, gradient norms, DDP's buckets) connects its ring and its
tree and NVLS; one that only sends and receives (pipeline stages), its point-to-point connections.
Not counted: buffers an earlier NCCL allocates at init (2.17-2.21 map their NVLS buffers then, 4 to 6
times the size above), network buffers without GPUDirect RDMA (host memory), environment overrides
(``NCCL_BUFFSIZE``, ``NCCL_MAX_NCHANNELS``, ``NCCL_NVLS_ENABLE``), and AMD's RCCL or Intel's HCCL, taken as
NCCL without NVLS.

Which communicators a job opens (PyTorch creates one per process group, lazily, at its first collective):
the default (world) group whenever there are several GPUs; DeepSpeed ZeRO's data-parallel group, a clone of
the world (deepspeed/utils/groups.py ``_clone_world_group``: ``dist.new_group(ranks=range(world_size))``);
with tensor or pipeline parallelism the data-parallel and tensor-parallel groups; and a pipeline group whose
stages send to and receive from their neighbours.
"""

from __future__ import annotations

from gpuplan.catalog import Gpu
from gpuplan.records import record
from gpuplan.units import MIB

CUMEM_GRANULE = 2 * MIB  # every buffer rounds up to this (cuMem's minimum granularity; CUDA_IPC_MIN)
CHANNEL_TABLES = 3 * CUMEM_GRANULE  # peers, shared peers, ring ranks per channel (channel.cc 44, 48, 60)
NVLS_CHANNEL_TABLE = CUMEM_GRANULE  # per NVLS channel (channel.cc 98)
COMMUNICATOR_STRUCTURES = 4 * MIB  # the communicator's own device structures (init.cc 587-589)
CONNECTION_PAIR = 12 * MIB  # one send and one receive, every protocol's buffer (p2p.cc 410, 486-491)
NVLS_BUFFER = 1 * MIB  # a 128 KiB chunk x 8 steps, two per NVLS channel and head (nvls.cc 424-430)

# (collective, point-to-point per peer) channels by how the GPUs connect: NCCL's ring search (src/graph/search.cc,
# duplicated in connect.cc 460) prints "24 coll channels ... 32 p2p channels, 32 p2p channels per peer" over NVLink
# on 8 x H100 and A100 SXM (and 32 per peer in the all-to-all of NVIDIA/nccl#1685), 2 and 2 between PCIe GPUs.
NVLINK_CHANNELS = (24, 32)
PCIE_CHANNELS = (2, 2)
# NVLS channels: 16 on Hopper (NCCL_NVLS_NCHANNELS), 24 on Blackwell (nvls.cc 155-157).
NVLS_CHANNELS = {"hopper": 16, "blackwell": 24}


@record
class Communicator:
    """One NCCL communicator as a training job uses it."""

    name: str  # what opens it: "world", "ZeRO data-parallel", "data-parallel", "tensor-parallel", "pipeline"
    ranks: int
    all_reduce: bool  # runs collectives (ring, tree, NVLS); else only sends to and receives from neighbours
    peers: int = 0  # the neighbours a point-to-point communicator sends to and receives from


def nvls_channels(gpu: Gpu, ranks: int) -> int:
    """NVLS channels on ``gpu`` (0 where NVLink SHARP is not there: before Hopper, without an NVSwitch, on one
    GPU): NVLS needs the NVSwitch of an 8-GPU or larger NVLink domain."""
    if ranks < 2 or gpu.vendor != "NVIDIA" or gpu.domain < 8:
        return 0
    capability = gpu.compute_capability or 0
    if capability >= 100:
        return NVLS_CHANNELS["blackwell"]
    return NVLS_CHANNELS["hopper"] if capability >= 90 else 0


def channels(gpu: Gpu) -> tuple[int, int]:
    """(collective, point-to-point per peer) channels between GPUs of this kind."""
    return NVLINK_CHANNELS if gpu.domain > 1 else PCIE_CHANNELS


def _holdings(gpu: Gpu, communicator: Communicator) -> dict[str, int]:
    """What ``communicator`` holds on each of its GPUs once a step has run, by part (module docstring): its
    tables and structures, and what it connected (ring, tree, NVLS, sends to its neighbours)."""
    if communicator.ranks < 2:
        return {}
    collective, p2p = channels(gpu)
    nvls = nvls_channels(gpu, communicator.ranks)
    held = {"tables": max(collective, p2p) * CHANNEL_TABLES + nvls * NVLS_CHANNEL_TABLE + COMMUNICATOR_STRUCTURES}
    if communicator.all_reduce:
        held["ring"] = collective * CONNECTION_PAIR
        if communicator.ranks > 2:  # over two ranks the ring's connection to the same peer serves the tree
            held["tree"] = collective * CONNECTION_PAIR
        if nvls:
            held["NVLS"] = nvls * 2 * NVLS_BUFFER * min(communicator.ranks, gpu.domain)
    if communicator.peers:
        held["sends"] = communicator.peers * p2p * CONNECTION_PAIR
    return held


def communicator_bytes(gpu: Gpu, communicator: Communicator) -> int:
    """Device bytes ``communicator`` holds on each of its GPUs once a step has run (module docstring)."""
    return sum(_holdings(gpu, communicator).values())


def training_communicators(
    gpus: int, data_parallel: int, tensor_parallel: int, pipeline_parallel: int, zero_clone: bool
) -> tuple[Communicator, ...]:
    """The communicators a training job opens on each GPU (module docstring); ``zero_clone``: DeepSpeed ZeRO
    runs it and clones the world group for its data-parallel one."""
    if gpus < 2:
        return ()
    opened = [Communicator("world", gpus, True)]
    if zero_clone or 1 < data_parallel < gpus:  # a group of its own, even over every rank
        opened.append(Communicator("ZeRO data-parallel" if zero_clone else "data-parallel", data_parallel, True))
    if tensor_parallel > 1:
        opened.append(Communicator("tensor-parallel", tensor_parallel, True))
    if pipeline_parallel > 1:  # a middle stage sends to the next and receives from the previous one
        opened.append(Communicator("pipeline", pipeline_parallel, False, min(2, pipeline_parallel - 1)))
    return tuple(opened)


def topology_key(gpu: Gpu) -> tuple[object, ...]:
    """What ``communicator_bytes`` reads of a GPU kind: kinds alike here hold the same NCCL buffers (a
    planner's memo of a layout's memory across GPU kinds keys on it)."""
    return channels(gpu), nvls_channels(gpu, 2), gpu.domain


def nccl_bytes(gpu: Gpu, communicators: tuple[Communicator, ...]) -> int:
    """Device bytes of every communicator in ``communicators`` on one GPU."""
    return sum(communicator_bytes(gpu, communicator) for communicator in communicators)


def describe(gpu: Gpu, communicators: tuple[Communicator, ...]) -> str:
    """The communicators and what each holds, for the assumption line: "world over 8 GPUs (ring, tree, NVLS)"."""
    collective, p2p = channels(gpu)
    parts = []
    for communicator in communicators:
        held = [part for part in _holdings(gpu, communicator) if part != "tables"]
        if "sends" in held:
            plural = "s" if communicator.peers > 1 else ""
            held[held.index("sends")] = f"sends to {communicator.peers} neighbour{plural}, {p2p} channels each"
        parts.append(f"{communicator.name} over {communicator.ranks:,} GPUs ({', '.join(held)})")
    return f"{'; '.join(parts)}; {collective} collective channels, NCCL 2.22 or later"
