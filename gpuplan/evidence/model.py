"""What a reader makes of one piece of run evidence: the run's settings, measured terms per rank, a failure.

Every reader returns an :class:`Evidence`; nothing here knows a log format. Measured memory is in bytes,
token capacities in tokens, concurrency in sequences. ``resolution`` is how far a printed value may be
from the true one (half the last printed digit, or a whole unit where the format truncates), so a
comparison never calls rounding a difference.
"""

from __future__ import annotations

from dataclasses import field

from gpuplan.evidence import KINDS as KINDS  # defined in the package, which the command line imports alone
from gpuplan.records import record

BYTES, TOKENS, SEQUENCES = "bytes", "tokens", "sequences"

# Evidence terms a serving engine reports (per rank unless noted).
WEIGHTS = "weights"
TORCH_PEAK = "torch_peak_increase"  # activation peak of the profile run (torch allocator)
NON_TORCH = "non_torch_increase"  # NCCL, cuBLAS and other allocations outside torch during the profile run
CUDA_GRAPHS = "cuda_graphs"  # the CUDA graph pool after capture
KV_POOL = "kv_pool"  # bytes given to the KV cache on this rank
REQUESTED = "requested_memory"  # gpu_memory_utilization x total memory: the engine's budget
KV_TOKENS = "kv_tokens"  # engine-wide: tokens the KV cache holds
MAX_CONCURRENCY = "max_concurrency"  # engine-wide: sequences of max_model_len tokens the cache holds
FREE_AT_START = "free_at_start"  # SGLang: memory free once the communicators are up, before the weights
KV_ROOM = "kv_room"  # TensorRT-LLM: memory free for the KV cache, of which free_gpu_memory_fraction is taken
# Evidence terms a training run reports.
PEAK_ALLOCATED = "peak_allocated"  # torch.cuda.max_memory_allocated: live tensors at the peak
PEAK_RESERVED = "peak_reserved"  # torch.cuda.max_memory_reserved: the caching allocator's segments
# Either kind of run.
GPU_TOTAL = "gpu_total_memory"  # memory of the device as the framework saw it
# SGLang: free at start plus what the communicators took before it, the memory the engine found on the device
# once the CUDA context was up; the device had no less (less: other processes held the rest).
GPU_AT_LEAST = "gpu_memory_at_least"

SERVE, FINETUNE = "serve", "finetune"
# Terms each GPU reports for itself; the others are engine-wide or describe the device.
PER_RANK = frozenset(
    {
        WEIGHTS,
        TORCH_PEAK,
        NON_TORCH,
        CUDA_GRAPHS,
        KV_POOL,
        REQUESTED,
        PEAK_ALLOCATED,
        PEAK_RESERVED,
        FREE_AT_START,
        KV_ROOM,
    }
)


@record
class Measurement:
    """One measured quantity, with a value per rank (in the order the ranks sort)."""

    term: str
    unit: str
    values: tuple[tuple[str, float], ...]  # (rank label, value)
    resolution: float  # per value, in ``unit``
    line: int  # first line it was read from
    phrase: str  # what the evidence calls it, for messages

    def by_rank(self) -> dict[str, float]:
        return dict(self.values)


@record
class Setting:
    """A setting the run used, as the evidence states it (normalised to gpuplan's vocabulary where known)."""

    name: str
    value: str | int | float
    line: int
    raw: str = ""  # the evidence's own spelling when it differs (torch.bfloat16, compressed-tensors)


@record
class Failure:
    """The run did not get where it should: its cause, already cleaned for display."""

    cause: str
    line: int
    out_of_memory: bool
    during: str  # "startup" or "run"


@record
class Evidence:
    path: str  # as given, cleaned for display
    kind: str  # reader name: vllm, sglang, trtllm, torch-memory, hf-trainer, torchtune, accelerate
    job: str  # serve | finetune
    engine: str  # what produced it, for people: "vLLM", "PyTorch memory statistics"
    version: str | None = None
    model: str | None = None
    settings: dict[str, Setting] = field(default_factory=dict)
    measurements: dict[str, Measurement] = field(default_factory=dict)
    failure: Failure | None = None
    missing: tuple[str, ...] = ()  # what a complete piece of this kind states and this one does not
    incomplete: str = ""  # why the evidence stops short of what verify needs (a truncated log), if it does
    notes: tuple[str, ...] = ()
    lines: int = 0
    # Its peaks are the training stage's: what came before (loading the model, a QLoRA preparation) is not in
    # them (the Trainer's per-stage memory tracker, Accelerate's per-epoch TorchTracemalloc).
    peaks_from_training: bool = False

    @property
    def ranks(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for measurement in self.measurements.values():
            if measurement.term not in PER_RANK:
                continue
            for label, _ in measurement.values:
                seen.setdefault(label, None)
        return tuple(seen)
