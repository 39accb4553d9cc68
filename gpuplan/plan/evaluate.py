"""Options: a layout of one job, estimated by gpuplan's estimator and judged against every constraint.

The planner never estimates on its own: each option's memory, speed and price come from
``estimate_serve`` / ``estimate_finetune`` (gpuplan.analysis), as ``lint`` and ``estimate`` get them for
the declared layout. What this module adds is the judging, per constraint, and memoisation of what
does not depend on the GPU (per-GPU memory of a layout shape) or on the layout (the model's weight and
KV bytes, used as memory lower bounds to skip layouts before estimating them).
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from typing import Any

from gpuplan.analysis import (
    FinetuneEstimate,
    ServeEstimate,
    deployment_workload,
    estimate_serve,
    planned_serving_bytes,
    serve_shape,
    serving_setup,
    workload_at_load,
)
from gpuplan.context_limits import context_problem
from gpuplan.estimate.bands import SpeedBand, capacity_band, serving_speed_bands
from gpuplan.estimate.engines import budget_bound
from gpuplan.estimate.performance import Efficiency
from gpuplan.estimate.serving import ServingMemory, ServingShape
from gpuplan.estimate.serving_bounds import floor_bounds, latency_bounds, latency_floors, outruns_front_end
from gpuplan.estimate.serving_speed import prepare, serving_speed
from gpuplan.estimate.serving_workload import ServingSpeed, ServingWorkload
from gpuplan.estimate.training import TrainingSetup
from gpuplan.estimate.training_speed import TrainingSpeed
from gpuplan.estimate.vllm_releases import vllm_release
from gpuplan.layout import whole_replicas
from gpuplan.plan.space import (
    Layout,
    declared_shape,
    domain_problem,
    nodes_needed,
    pipeline_problem,
    size_problem,
    tensor_parallel_problem,
)
from gpuplan.records import evolve, record
from gpuplan.spec import Finetune, Hardware, PlanLimits, Serve, Spec, schema_default
from gpuplan.units import format_gib, format_latency_ms, format_share_under

NOMINAL_TOKENS = 1_000_000  # fine-tuning without finetune.tokens is ranked by its cost per 1M tokens
# Costs compared to this many significant digits, not to the cent: a fine-tune's cost per 1M tokens is
# often under 0.10, where cents tied 0.0736 with 0.0707 and let a dearer layout with fewer GPUs win.
COST_DIGITS = 9

# Constraints in the order they are checked (a rejected option names the first it breaks).
LAYOUT_CONSTRAINTS = (
    "context",
    "limits",
    "tensor_parallel",
    "nvlink_domain",
    "pipeline_parallel",
    "memory",
    "headroom",
)
SERVE_CONSTRAINTS = (*LAYOUT_CONSTRAINTS, "arrival_rate", "ttft_slo", "tpot_slo")
FINETUNE_CONSTRAINTS = (*LAYOUT_CONSTRAINTS, "gradient_sync", "model_parallelism")


def within_headroom(per_gpu: float, capacity: float, headroom_pct: float) -> bool:
    """Fits with the configured margin free (GP202's threshold): what the planner calls sound memory."""
    return per_gpu <= capacity * (1 - headroom_pct / 100)


def slo_miss(estimate: ServeEstimate, metric: str, confidence: float | None = None) -> tuple[float, float] | None:
    """(ms, SLO ms) when the estimate's ``metric`` (ttft or tpot) misses the job's SLO: the estimate itself,
    or with ``confidence`` its slow edge (``slow_factor``)."""
    factor = 1.0 if confidence is None else slow_factor(estimate.bands[metric], confidence)
    return speed_slo_miss(estimate.job, estimate.speed, metric, factor)


def stream_outrun(job: Serve, ceiling: float | None, factor: float = 1.0) -> tuple[float, float] | None:
    """(``ceiling`` times ``factor``, the stream's rate) when a steady stream arrives at least that fast, where
    ``ceiling`` is the most requests/s the deployment completes (``ServingSpeed.stream_capacity_rps``): on the
    estimate (``factor`` 1, the speed model's ``saturated``) or at an edge of its band (``capacity_factor``).
    None under other load shapes, and without a ceiling (the engine batches statically)."""
    if job.arrival != "steady" or job.rate_rps is None or ceiling is None:
        return None
    return (ceiling * factor, job.rate_rps) if job.rate_rps >= ceiling * factor else None


def capacity_factor(confidence: float) -> float:
    """What the most requests/s a deployment completes is multiplied by at the slow edge of its band at
    ``confidence`` (``capacity_band``)."""
    return slow_factor(capacity_band(), confidence)


def slow_factor(band: SpeedBand, confidence: float) -> float:
    """What a speed figure is multiplied by at the slow edge of its measured band at ``confidence``: a decision at
    that confidence plans for it, and never for a figure faster than the estimate itself (a latency's factor is at
    least 1, a throughput's at most 1)."""
    return float(band.slow(1.0, confidence))


def speed_slo_miss(job: Serve, speed: ServingSpeed, metric: str, factor: float = 1.0) -> tuple[float, float] | None:
    """(ms, SLO ms) when ``speed``'s ``metric`` (ttft or tpot), times ``factor``, misses ``job``'s SLO."""
    slo = getattr(job, f"{metric}_ms")
    if slo is None:
        return None
    value = float(slo_figure(job, speed, metric)) * 1000 * factor
    return (value, float(slo)) if value > slo else None


TTFT_FIGURES = {"mean": "ttft_s", "median": "ttft_median_s", "p90": "ttft_p90_s"}


def slo_figure(job: Serve, speed: ServingSpeed, metric: str) -> float:
    """The figure of ``speed`` (seconds) that ``job``'s SLO on ``metric`` bounds: TTFT at the SLO's
    statistic (serve.slo.ttft_statistic), TPOT as the mean inter-token latency."""
    return float(getattr(speed, TTFT_FIGURES[job.ttft_statistic] if metric == "ttft" else "tpot_s"))


def gradient_sync_share(estimate: FinetuneEstimate) -> float | None:
    """Exposed data-parallel traffic per step over the step's compute, where GP310 judges it: data
    parallelism on cards without NVLink or across more GPUs than the NVLink domain. None elsewhere."""
    return sync_share(estimate.setup, estimate.gpu, estimate.speed)


def sync_share(setup: TrainingSetup, gpu: Any, speed: TrainingSpeed | None) -> float | None:
    """``gradient_sync_share`` of a setup running on ``gpu`` at ``speed``."""
    if speed is None or setup.data_parallel < 2:
        return None
    if gpu.has_nvlink and setup.data_parallel * setup.tensor_parallel <= gpu.domain:
        return None
    return speed.gradient_sync_s / max(speed.step_compute_s, 1e-9)


@record
class Option:
    """A layout with its estimate and its verdict per constraint (``meets``, in the order checked)."""

    kind: str  # serve | finetune
    layout: Layout
    nodes: int
    estimate: Any  # ServeEstimate | FinetuneEstimate
    meets: tuple[tuple[str, bool], ...]
    reasons: tuple[str, ...]  # one sentence per broken constraint, in the same order
    declared: Layout  # the spec's own layout, which ``changes`` and ``fragment`` are relative to
    tokens_known: bool = True  # fine-tuning: whether finetune.tokens gives a run cost
    planned_bytes: int = 0  # the per-GPU figure at the plan's confidence (0: the estimate itself)
    # serving with a latency SLO: the least share of an SLO its latency's slow edge leaves (negative: over it);
    # None without an SLO or a speed to judge
    slo_margin: float | None = None
    # Declared fields the paste restates beside the layout's (``Evaluator.restated``), as (key, value) in the job
    restated: tuple[tuple[str, Any], ...] = ()

    @functools.cached_property
    def changes(self) -> tuple[str, ...]:
        """Spec fields (dotted) that differ from the declared layout."""
        return layout_changes(self.kind, self.declared, self.layout)

    @functools.cached_property
    def fragment(self) -> dict[str, Any]:
        """The spec fields to paste for this layout: the whole hardware mapping plus any other change."""
        return layout_fragment(self.kind, self.layout, self.changes, self.restated)

    @property
    def sound(self) -> bool:
        return all(ok for _, ok in self.meets)

    @property
    def broken(self) -> tuple[str, ...]:
        return tuple(name for name, ok in self.meets if not ok)

    @property
    def gpus(self) -> int:
        return self.layout.gpus

    @property
    def price_per_hour(self) -> float | None:
        price: float | None = self.estimate.price_per_hour
        return price

    @property
    def priced(self) -> bool:
        return self.price_per_hour is not None

    @property
    def per_gpu_bytes(self) -> int:
        # serving: the fullest pipeline stage's GPUs (ServingMemory.peak_per_gpu), as the estimate states it
        return int(self.estimate.memory.peak_per_gpu if self.kind == "serve" else self.estimate.memory.per_gpu)

    @property
    def capacity_bytes(self) -> int:
        """What the per-GPU figure is judged against: the engine budget (serving) or usable memory."""
        if self.kind == "serve":
            return int(self.estimate.memory.budget)
        return int(self.estimate.gpu.usable_bytes)

    @property
    def judged_bytes(self) -> int:
        """The per-GPU figure the headroom is judged on at the plan's confidence: the estimate, or its band's
        pessimistic edge where that is higher."""
        return max(self.per_gpu_bytes, self.planned_bytes)

    @property
    def headroom(self) -> float:
        """Share of the capacity left free at the plan's confidence (negative when it does not fit)."""
        return (self.capacity_bytes - self.judged_bytes) / max(self.capacity_bytes, 1)

    @property
    def rate(self) -> float | None:
        """What the planner minimises: cost per month (serving) or per 1M training tokens (fine-tuning)."""
        if self.kind == "serve":
            monthly: float | None = self.estimate.monthly_cost
            return monthly
        cost = self.estimate.cost
        return None if cost is None else cost / self.estimate.job.tokens * 1e6

    @property
    def cost(self) -> float | None:
        """Cost per month (serving) or of the whole run (fine-tuning; None without finetune.tokens)."""
        if self.kind == "serve":
            monthly: float | None = self.estimate.monthly_cost
            return monthly
        run: float | None = self.estimate.cost
        return run if self.tokens_known else None

    @property
    def latency_s(self) -> float:
        """Serving: one request end to end (TTFT + output tokens x TPOT); fine-tuning: the run's seconds."""
        if self.kind == "serve":
            speed = self.estimate.speed
            return float(speed.ttft_s + self.estimate.job.output_tokens * speed.tpot_s)
        hours = self.estimate.hours
        assert hours is not None  # the planner's jobs carry a run length (finetune.tokens or NOMINAL_TOKENS)
        return float(hours * 3600)

    def rank(self) -> tuple[float, int, int, int, float, int]:
        """The objective: cost (to COST_DIGITS significant digits: equal costs reached by different float
        paths tie), then fewer GPUs paid for (whole instances under an instance-hour quote), then more of them
        in use (a paid GPU left idle helps nothing), then fewer GPUs a model copy is split over (parallelism is
        needed the moment one GPU cannot hold the job, not a moment before: GP302 and GP306 say so of a split
        a tie did not need), then lower latency, then fewer changes."""
        rate = self.rate
        paid = int(self.estimate.paid_gpus)
        cost = math.inf if rate is None else float(f"{rate:.{COST_DIGITS}g}")
        split = self.layout.tensor_parallel * self.layout.pipeline_parallel
        return (cost, paid, -self.gpus, split, self.latency_s, len(self.changes))

    def reason(self, constraint: str) -> str | None:
        """Why the option breaks ``constraint`` (a key of SERVE_CONSTRAINTS or FINETUNE_CONSTRAINTS); None where it
        meets it."""
        return dict(zip(self.broken, self.reasons, strict=True)).get(constraint)

    def breaks(self, constraint: str) -> bool:
        """Whether the option was judged on ``constraint`` and breaks it."""
        return dict(self.meets).get(constraint) is False

    def with_problem(self, name: str, reason: str) -> Option:
        """The option with one more constraint broken (constraints that depend on other options)."""
        order = SERVE_CONSTRAINTS if self.kind == "serve" else FINETUNE_CONSTRAINTS
        meets = dict(self.meets)
        meets[name] = False
        reasons = dict(zip(self.broken, self.reasons, strict=True))
        reasons[name] = reason
        return replace(
            self,
            meets=tuple((key, meets[key]) for key in order),
            reasons=tuple(reasons[key] for key in order if key in reasons),
        )


def judged(kind: str, checks: dict[str, str | None]) -> tuple[tuple[tuple[str, bool], ...], tuple[str, ...]]:
    order = SERVE_CONSTRAINTS if kind == "serve" else FINETUNE_CONSTRAINTS
    meets = []
    reasons = []
    for name in order:
        reason = checks.get(name)
        meets.append((name, reason is None))
        if reason is not None:
            reasons.append(reason)
    return tuple(meets), tuple(reasons)


def layout_changes(kind: str, declared: Layout, layout: Layout) -> tuple[str, ...]:
    """Dotted spec fields whose values differ between the declared layout and ``layout``."""
    pairs: list[tuple[str, object, object]] = [
        (f"{kind}.hardware.gpu", declared.gpu.id, layout.gpu.id),
        (f"{kind}.hardware.count", declared.gpus, layout.gpus),
        (f"{kind}.hardware.tensor_parallel", declared.tensor_parallel, layout.tensor_parallel),
        (f"{kind}.hardware.pipeline_parallel", declared.pipeline_parallel, layout.pipeline_parallel),
        (f"{kind}.hardware.expert_parallel", declared.expert_parallel, layout.expert_parallel),
    ]
    if kind == "serve":
        pairs.append(("serve.concurrency", declared.concurrency, layout.concurrency))
    else:
        old, new = declared.settings, layout.settings
        assert old is not None and new is not None
        pairs += [
            ("finetune.activation_checkpointing", old.activation_checkpointing, new.activation_checkpointing),
            ("finetune.fused_loss", old.fused_loss, new.fused_loss),
            ("finetune.sharding", _sharding_kind(old.sharding), _sharding_kind(new.sharding)),
            ("finetune.micro_batch", old.micro_batch, new.micro_batch),
            ("finetune.gradient_accumulation", old.gradient_accumulation, new.gradient_accumulation),
        ]
    return tuple(name for name, before, after in pairs if before != after)


def layout_fragment(
    kind: str, layout: Layout, changes: tuple[str, ...], restated: tuple[tuple[str, Any], ...] = ()
) -> dict[str, Any]:
    """The spec fields to paste for a layout: its whole hardware mapping (with the declared keys it restates,
    ``Evaluator.restated``), and every other changed or restated field."""
    hardware: dict[str, Any] = {"gpu": layout.gpu.id, "count": layout.gpus}
    if layout.tensor_parallel > 1:
        hardware["tensor_parallel"] = layout.tensor_parallel
    if layout.pipeline_parallel > 1:
        hardware["pipeline_parallel"] = layout.pipeline_parallel
    if layout.expert_parallel > 1:
        hardware["expert_parallel"] = layout.expert_parallel
    hardware.update((key.removeprefix("hardware."), value) for key, value in restated if key.startswith("hardware."))
    body: dict[str, Any] = {key: value for key, value in restated if not key.startswith("hardware.")}
    if kind == "serve" and "serve.concurrency" in changes:
        body["concurrency"] = layout.concurrency
    if layout.settings is not None:
        for field in ("activation_checkpointing", "fused_loss", "sharding", "micro_batch", "gradient_accumulation"):
            if f"finetune.{field}" in changes:
                body[field] = getattr(layout.settings, field)
    body["hardware"] = hardware
    return {kind: body}


class Evaluator:
    """What both jobs' evaluators share: the layout checks that need no estimate, and the memo."""

    kind = ""
    serving = False

    def __init__(self, spec: Spec, efficiency: Efficiency, headroom_pct: float, limits: PlanLimits) -> None:
        self.spec = spec
        self.efficiency, self.headroom_pct, self.limits = efficiency, headroom_pct, limits
        self.arch = spec.model.architecture
        # A context longer than the model takes breaks every layout alike (GP206): the search proposes none.
        self.context_problem = context_problem(spec, self.kind)
        self._estimates: dict[tuple[object, ...], Option] = {}
        self.declared: Layout
        self.known: Any = None  # the analysis's estimate of the declared layout, when it is the planner's own

    def _job(self, layout: Layout) -> Any:
        raise NotImplementedError

    def _same_job(self, job: Any, gpu: Any) -> bool:
        """Whether an estimate of ``job`` on ``gpu`` is the one ``evaluate`` makes of the declared layout:
        the same job as the planner derives from it (its GPUs, splits, settings, load) on the same GPU."""
        return gpu == self.declared.gpu and job == self._job(self.declared)

    def _known_estimate(self, layout: Layout) -> Any:
        """The analysis's estimate when ``layout`` is the declared one it matches, else None."""
        return self.known if self.known is not None and layout.key == self.declared.key else None

    @staticmethod
    def _hardware(declared: Hardware, layout: Layout) -> Hardware:
        """The layout's GPUs on the declared network (expert parallelism only where the layout is the declared
        one: the planner proposes none)."""
        return evolve(
            declared,
            gpu=layout.gpu,
            count=layout.gpus,
            tensor_parallel=layout.tensor_parallel,
            pipeline_parallel=layout.pipeline_parallel,
            expert_parallel=layout.expert_parallel,
        )

    def restated(self, layout: Layout) -> tuple[tuple[str, Any], ...]:
        """Declared fields the paste of ``layout`` must restate, since its hardware mapping replaces the declared
        one whole and every layout is judged with them: a stated inter-node network (``hardware.network_gbps``),
        and ``sequence_parallel: false`` where a fine-tune's layout drops tensor parallelism (on by itself it is
        GP025 there)."""
        job = self.spec.finetune if self.kind == "finetune" else self.spec.serve
        assert job is not None
        restated: list[tuple[str, Any]] = []
        if job.hardware.network_gbps != schema_default(self.kind, "hardware", "network_gbps"):
            restated.append(("hardware.network_gbps", job.hardware.network_gbps))
        if isinstance(job, Finetune) and job.sequence_parallel and layout.tensor_parallel == 1:
            restated.append(("sequence_parallel", False))
        return tuple(restated)

    def evaluate(self, layout: Layout) -> Option:
        key = layout.key
        if key not in self._estimates:
            self._estimates[key] = self._evaluate(layout)
        return self._estimates[key]

    def _evaluate(self, layout: Layout) -> Option:
        raise NotImplementedError

    def _layout_checks(self, layout: Layout) -> tuple[int, dict[str, str | None]]:
        """(nodes, problems of the layout itself: the model's context, size limits, TP split, TP link, PP split)."""
        tp, pp = layout.tensor_parallel, layout.pipeline_parallel
        nodes = nodes_needed(layout.gpu, tp, pp, layout.replicas)
        return nodes, {
            "context": self.context_problem,
            "limits": size_problem(layout, nodes, self.limits),
            "tensor_parallel": tensor_parallel_problem(self.arch, tp, serving=self.serving),
            "nvlink_domain": domain_problem(layout.gpu, tp),
            "pipeline_parallel": pipeline_problem(self.arch, pp, serving=self.serving),
        }


class ServePlanner(Evaluator):
    """Evaluates serving layouts of one spec's deployment; memoises estimates and memory by layout.

    Demand is held fixed: the declared replicas x per-replica concurrency sequences in flight, split as
    evenly as whole sequences allow over a layout's replicas (tenants likewise).
    """

    kind = "serve"
    serving = True

    def __init__(
        self,
        spec: Spec,
        efficiency: Efficiency,
        headroom_pct: float,
        limits: PlanLimits,
        known: ServeEstimate | None = None,
    ) -> None:
        super().__init__(spec, efficiency, headroom_pct, limits)
        assert spec.serve is not None
        self.job = spec.serve
        self.declared_replicas = self.job.hardware.replicas
        self.demand = self.job.concurrency * self.declared_replicas
        self._memory: dict[tuple[object, ...], ServingMemory] = {}  # load key (see _load)
        self._latency_met: dict[tuple[object, ...], bool] = {}  # load key -> TTFT and TPOT within the SLO
        self._ceilings: dict[tuple[object, ...], float] = {}  # load key -> a steady stream's ceiling per replica
        self._shapes: dict[tuple[object, ...], ServingShape] = {}  # GPU, TP, PP, tenants' sequences
        self._speeds: dict[tuple[object, ...], ServingSpeed] = {}  # layout key -> speed
        self._floors: dict[tuple[str, int, int, int], tuple[float, float]] = {}  # GPU, TP, PP, EP -> TTFT, TPOT ms
        # GPU, TP, PP -> (deployment_workload, its serving_speed.prepare)
        self._deployments: dict[tuple[str, int, int, int], tuple[ServingWorkload, Any]] = {}
        self._splits: dict[tuple[int, int, int], ServingWorkload] = {}  # TP, PP, EP -> deployment_workload (any GPU)
        # GPU, TP, PP, EP -> that on the GPU
        self._deployments_on: dict[tuple[str, int, int, int], ServingWorkload] = {}
        self._weights, self._kv = self._lower_bound_bytes()
        # A layout meets an SLO at the plan's confidence when its latency's slow edge does: the estimate
        # times the factor measured runs of the job's load shape came in at (gpuplan/estimate/bands.py).
        bands = serving_speed_bands(self.job.arrival, self.job.output_tokens)
        self.slow = {metric: slow_factor(bands[metric], limits.confidence) for metric in ("ttft", "tpot")}
        # ... and keeps up with a steady stream when the slow edge of the most it completes does
        self.capacity = capacity_factor(limits.confidence)
        self.declared = self.declared_layout()
        self.known = known if known is not None and self._same_job(known.job, known.gpu) else None
        if self.known is not None:  # the speed and memory of the declared layout, as evaluate computes them
            self._memory[self._load(self.declared)] = self.known.memory
            self._speeds[self.declared.key] = self.known.speed

    # -- layouts ---------------------------------------------------------------------------------
    def declared_layout(self) -> Layout:
        return declared_shape(self.job.hardware, self.declared_replicas, concurrency=self.job.concurrency)

    def layout(self, gpu: Any, tensor_parallel: int, pipeline_parallel: int, replicas: int) -> Layout:
        return Layout(gpu, tensor_parallel, pipeline_parallel, replicas, self.concurrency_at(replicas))

    def concurrency_at(self, replicas: int) -> int:
        """Each replica's sequences in flight over ``replicas``. A closed loop's clients and a burst's requests are
        the load: the declared demand, spread evenly. A steady stream's load is its rate (split over the replicas,
        ``ServingWorkload.replica_rate``), and ``concurrency`` caps each replica's running requests (docs/spec.md):
        every replica keeps the declared cap. Spreading it instead made the cap a load the rounding grew: 16
        over 13 replicas ran 26, a paste of that planned again raised it further, and the planner bought replicas
        for the sequences they could run rather than the rate they could serve."""
        if self.job.arrival == "steady":
            return self.job.concurrency
        return math.ceil(self.demand / replicas)

    def max_replicas(self, tensor_parallel: int, pipeline_parallel: int) -> int:
        """More replicas than sequences in flight would idle (a steady stream's count is bounded by its GPUs
        alone: each replica runs the declared cap); more GPUs than max_gpus are not allowed."""
        most = whole_replicas(self.limits.max_gpus, tensor_parallel, pipeline_parallel)
        return most if self.job.arrival == "steady" else min(self.demand, most)

    def _job(self, layout: Layout) -> Serve:
        replicas = layout.replicas
        tenants = tuple(
            evolve(t, concurrency=self._tenant_concurrency(t.concurrency, replicas)) for t in self.job.tenants
        )
        return evolve(
            self.job,
            concurrency=layout.concurrency,
            tenants=tenants,
            hardware=self._hardware(self.job.hardware, layout),
        )

    # -- memory ----------------------------------------------------------------------------------
    def _lower_bound_bytes(self) -> tuple[float, float]:
        """(the weights of the model and its tenants, KV bytes of one sequence) of one whole
        model copy, from the estimator's memory of a one-GPU replica holding one sequence: no GPU of a
        TP x PP group holds less than its 1/(TP x PP) share of any (every byte sits on some GPU of the
        group; layers per stage round up; KV heads are split or replicated, never dropped).
        Sliding-window layers keep fewer tokens and uneven stages can shift full layers between GPUs, so
        for them no KV bound is taken; nor for linear-attention and Mamba layers, whose state pages follow
        a block size that changes with TP. A property test holds these bounds below the estimate of every
        layout."""
        gpu = self.job.hardware.gpu
        memory = self.memory(Layout(gpu, 1, 1, self.demand, 1))
        weights = float(memory.weights) + float(memory.tenant_weights)
        if self.arch.sliding_layer_count or self.arch.state_layers:
            return weights, 0.0
        return weights, float(memory.kv_bytes_per_sequence)

    def _usable_budget(self, gpu: Any) -> float:
        """The memory a sound layout may fill per GPU: engine budget less the headroom margin (an upper
        bound of the estimator's own budget, which rounds down)."""
        job = self.job
        bound = budget_bound(
            job.engine, job.memory_utilization, gpu.usable_bytes, gpu.memory_bytes, vllm_release(job.engine_version)
        )
        return bound * (1 - self.headroom_pct / 100)

    def fewest_replicas(self, gpu: Any, tensor_parallel: int, pipeline_parallel: int) -> int | None:
        """A lower bound on the replicas a sound layout needs, from the weight and KV bounds alone (no
        estimate); None when no replica count can be sound."""
        group = tensor_parallel * pipeline_parallel
        free = self._usable_budget(gpu) * group - self._weights
        if free <= 0:
            return None
        if self._kv <= 0:
            return 1
        per_replica = math.floor(free / self._kv)
        if per_replica < 1:
            return None
        if self.job.arrival == "burst":
            return 1  # a burst's KV cache is sized for one sequence, whatever its size (ServingShape.at)
        if self.job.arrival == "steady":  # every replica holds the declared cap (concurrency_at)
            return 1 if per_replica >= self.job.concurrency else None
        replicas = math.ceil(self.demand / per_replica)
        return replicas if replicas <= self.max_replicas(tensor_parallel, pipeline_parallel) else None

    def _load(self, layout: Layout) -> tuple[object, ...]:
        """What one replica of the layout carries: GPU, TP, PP, EP, the tenants' sequences and its own.
        Per-GPU memory, TTFT and TPOT depend on nothing else (the replica count only scales tokens/s), so
        replica counts that round to the same sequences per replica share one memory and one SLO check."""
        tenants = tuple(self._tenant_concurrency(t.concurrency, layout.replicas) for t in self.job.tenants)
        split = (layout.gpu.id, layout.tensor_parallel, layout.pipeline_parallel, layout.expert_parallel)
        return (*split, tenants, layout.concurrency)

    def memory(self, layout: Layout) -> ServingMemory:
        key = self._load(layout)
        if key not in self._memory:
            self._memory[key] = self._shape(layout, key[:-1]).at(layout.concurrency)
        return self._memory[key]

    def _shape(self, layout: Layout, key: tuple[object, ...]) -> ServingShape:
        """The layout's memory at any concurrency of its own model (the tenants' sequences, which change
        with the replicas, are part of the shape); ``key``: the load key less the concurrency."""
        if key not in self._shapes:
            self._shapes[key] = serve_shape(self.spec, self._job(layout), layout.gpu)
        return self._shapes[key]

    def _tenant_concurrency(self, declared: int, replicas: int) -> int:
        """A tenant's sequences per replica: its declared demand spread over ``replicas``."""
        return math.ceil(declared * self.declared_replicas / replicas)

    def planned_bytes(self, memory: ServingMemory) -> int:
        """The per-GPU figure a sound layout must fit the budget with the headroom (``planned_serving_bytes``)."""
        return planned_serving_bytes(memory, self.limits.confidence)

    def memory_sound(self, layout: Layout) -> bool:
        memory = self.memory(layout)
        return memory.fits and within_headroom(self.planned_bytes(memory), memory.budget, self.headroom_pct)

    def unsplit(self, option: Option) -> Option | None:
        """The same GPUs as single-GPU replicas where the split is needless (GP302): one GPU holds a replica
        (memory sound), and the replicas break no constraint the split meets (a TTFT SLO only a split prefill of
        long prompts meets); else None."""
        layout = option.layout
        if layout.tensor_parallel * layout.pipeline_parallel == 1:
            return None
        if not self.memory_sound(self.layout(layout.gpu, 1, 1, layout.replicas)):
            return None
        spread = self.evaluate(self.layout(layout.gpu, 1, 1, layout.gpus))
        return spread if set(spread.broken) <= set(option.broken) else None

    def sound(self, layout: Layout) -> bool:
        """Whether ``evaluate(layout).sound``, without the speed model when the layout itself or its
        memory (the same figures the estimate would carry) already breaks a constraint."""
        known = self._estimates.get(layout.key)
        if known is not None:
            return known.sound
        _, checks = self._layout_checks(layout)
        if any(problem is not None for problem in checks.values()) or not self.memory_sound(layout):
            return False
        if self.slo_out_of_reach(layout.gpu, layout.tensor_parallel, layout.pipeline_parallel, layout.expert_parallel):
            return False
        job = self.job
        if not job.has_latency_slo and job.arrival != "steady":
            return True  # no latency constraint: the speed is estimated only for an option's figures
        load = self._load(layout)
        if job.arrival == "steady":  # the stream's rate is split over the replicas: each count a load of its own
            load = (*load, layout.replicas)
        if load not in self._latency_met:
            if layout.key not in self._speeds and (self._bounds_miss(layout) or self._outruns_known_ceiling(layout)):
                self._latency_met[load] = False  # as the speed model would say, without its steady state
            else:
                speed = self._speed(layout)  # the estimate's own speed, without the rest of the estimate
                self._latency_met[load] = not stream_outrun(job, speed.stream_capacity_rps, self.capacity) and not any(
                    speed_slo_miss(job, speed, metric, self.slow[metric]) for metric in ("ttft", "tpot")
                )
        return self._latency_met[load]

    def _bounds_miss(self, layout: Layout) -> bool:
        """Whether the speed model's lower bounds at the layout's load (``latency_bounds``) already miss
        the SLO: then its TTFT or TPOT, at least those bounds, misses it too."""
        job = self.job
        workload, prepared = self._workload(layout, self.memory(layout).kv_available)
        if job.arrival == "steady":  # the bounds hold for a closed loop or a burst, not a stream: but its rate can
            return outruns_front_end(workload, self.capacity)  # outrun the server process (at the edge)
        ttft, tpot = latency_bounds(workload, self.efficiency, prepared=prepared, statistic=job.ttft_statistic)
        return self._misses(ttft * 1000, tpot * 1000)

    def _outruns_known_ceiling(self, layout: Layout) -> bool:
        """Whether a steady stream's share per replica reaches the slow edge of the most one replica of this load
        completes, where a count of the same load was solved: that ceiling is each replica's own (its caps and
        server process), whatever the count, so a scan of replica counts solves the steady state once below it."""
        per_replica = self._ceilings.get(self._load(layout))
        ceiling = None if per_replica is None else per_replica * layout.replicas
        return stream_outrun(self.job, ceiling, self.capacity) is not None

    def _speed(self, layout: Layout) -> ServingSpeed:
        """The serving speed ``evaluate`` gives the layout (computed once for both)."""
        key = layout.key
        if key not in self._speeds:
            memory = self.memory(layout)
            workload, prepared = self._workload(layout, memory.kv_available)
            speed = self._speeds[key] = serving_speed(workload, self.efficiency, prepared=prepared)
            if speed.stream_capacity_rps is not None:
                self._ceilings[self._load(layout)] = speed.stream_capacity_rps / layout.replicas
        return self._speeds[key]

    def _workload(self, layout: Layout, kv_available: float) -> tuple[ServingWorkload, Any]:
        """What the speed model reads of ``layout``, with the given KV space per GPU: the
        ``serving_workload`` of its job, from its split's deployment (the same at every load), and that
        deployment prepared for the speed model (``serving_speed.prepare``, also the same at every load)."""
        split = (layout.gpu.id, layout.tensor_parallel, layout.pipeline_parallel, layout.expert_parallel)
        found = self._deployments.get(split)
        if found is None:
            deployment = self._deployment_on(layout)
            found = self._deployments[split] = (deployment, prepare(deployment, self.efficiency))
        deployment, prepared = found
        return workload_at_load(deployment, kv_available, layout.concurrency, layout.gpus), prepared

    def _deployment_on(self, layout: Layout) -> ServingWorkload:
        """``deployment_workload`` of the layout's split on its GPU kind (see ``_deployment_of_split``)."""
        split = (layout.gpu.id, layout.tensor_parallel, layout.pipeline_parallel, layout.expert_parallel)
        found = self._deployments_on.get(split)
        if found is None:
            found = self._deployments_on[split] = evolve(self._deployment_of_split(layout), gpu=layout.gpu)
        return found

    def _deployment_of_split(self, layout: Layout) -> ServingWorkload:
        """``deployment_workload`` of the layout's TP x PP split, on the layout's GPU kind: it reads the
        GPU kind nowhere but its ``gpu`` field (the split's weights read, the job's prompt, engine and
        batch settings), so the split's on any other kind is this with that kind (computed once)."""
        split = (layout.tensor_parallel, layout.pipeline_parallel, layout.expert_parallel)
        found = self._splits.get(split)
        if found is None:
            job = self._job(layout)
            setup = serving_setup(self.spec, job, gpu=layout.gpu)
            found = self._splits[split] = deployment_workload(self.spec, job, setup, layout.gpu)
        return found

    def slo_out_of_reach(
        self, gpu: Any, tensor_parallel: int, pipeline_parallel: int, expert_parallel: int = 1
    ) -> bool:
        """Whether no number of replicas meets the latency SLO on this family: the speed model's floors
        (``latency_floors``: one sequence decoding alone; the full prompt's chunks on an idle replica,
        without its pipeline fill) already miss it, by more than a relative 1e-9 that keeps rounding on
        the safe side. ``floor_bounds``, below those floors and cheaper (no deployment is prepared for
        them), are tried first: a family they already rule out is never prepared."""
        job = self.job
        if not job.has_latency_slo:
            return False
        key = (gpu.id, tensor_parallel, pipeline_parallel, expert_parallel)
        if key not in self._floors:
            # The floors read no load and no KV capacity: one replica's floors are every replica count's.
            layout = evolve(self.layout(gpu, tensor_parallel, pipeline_parallel, 1), expert_parallel=expert_parallel)
            ttft, tpot = floor_bounds(self._deployment_on(layout), self.efficiency, statistic=job.ttft_statistic)
            self._floors[key] = (ttft * 1000 * (1 - 1e-9), tpot * 1000 * (1 - 1e-9))
            if not self._misses(*self._floors[key]):
                workload, prepared = self._workload(layout, 0.0)
                ttft, tpot = latency_floors(workload, self.efficiency, prepared=prepared, statistic=job.ttft_statistic)
                self._floors[key] = (ttft * 1000 * (1 - 1e-9), tpot * 1000 * (1 - 1e-9))
        return self._misses(*self._floors[key])

    def _misses(self, ttft_ms: float, tpot_ms: float) -> bool:
        """Whether a TTFT or TPOT (ms) at or below the estimate's misses the job's SLO at the plan's
        confidence: its slow edge (the figure times ``slow``, monotone in the figure) does."""
        job = self.job
        return (job.ttft_ms is not None and ttft_ms * self.slow["ttft"] > job.ttft_ms) or (
            job.tpot_ms is not None and tpot_ms * self.slow["tpot"] > job.tpot_ms
        )

    # -- options ---------------------------------------------------------------------------------
    def _evaluate(self, layout: Layout) -> Option:
        estimate = self._known_estimate(layout) or estimate_serve(
            self.spec,
            self._job(layout),
            self.efficiency,
            gpu=layout.gpu,
            memory=self.memory(layout),
            speed=self._speed(layout),
            workload=self._workload(layout, self.memory(layout).kv_available)[0],
        )
        memory = estimate.memory
        nodes, checks = self._layout_checks(layout)
        confidence = self.limits.confidence
        planned = self.planned_bytes(memory)
        if not memory.fits:
            checks["memory"] = (
                f"needs {format_gib(memory.per_gpu)} per GPU; the engine budget is {format_gib(memory.budget)}"
            )
        elif not estimate.fits_at(confidence):  # fits on the estimate, not at the edge: as fine-tuning's "headroom"
            checks["headroom"] = (
                f"{estimate.kv_need_words}; at {confidence:.0%}"
                f" confidence the engine allocates {format_gib(estimate.planned_kv_pool(confidence))}"
            )
        elif not within_headroom(planned, memory.budget, self.headroom_pct):
            checks["headroom"] = (
                f"leaves {format_share_under((memory.budget - planned) / memory.budget, self.headroom_pct / 100)}"
                " of the engine budget free at"
                f" {confidence:.0%} confidence (margin {self.headroom_pct:g}%)"
            )
        speed = estimate.speed
        outrun = stream_outrun(self.job, speed.stream_capacity_rps, self.capacity) if estimate.loads else None
        if speed.saturated and estimate.loads:
            checks["arrival_rate"] = (
                f"requests arrive at {self.job.rate_rps:,g}/s, faster than it completes them"
                f" (at most {speed.requests_per_s:,.2f}/s)"
            )
        elif outrun is not None:
            checks["arrival_rate"] = (
                f"completes at most {speed.stream_capacity_rps:,.2f} requests/s, {outrun[0]:,.2f} at the slow edge"
                f" (x {self.capacity:.2f}, {self.limits.confidence:.0%} confidence), under the {outrun[1]:,g}/s"
                " that arrive"
            )
        for metric in ("ttft", "tpot"):
            missed = slo_miss(estimate, metric, self.limits.confidence)
            if missed and not (metric == "ttft" and speed.saturated):
                statistic = f"{self.job.ttft_statistic} " if metric == "ttft" else ""
                factor = self.slow[metric]
                edge = (
                    f" at the slow edge (x {factor:.2f}, {self.limits.confidence:.0%} confidence)" if factor > 1 else ""
                )
                latency = format_latency_ms(metric, missed[0] / 1000)
                checks[f"{metric}_slo"] = (
                    f"{statistic}{metric.upper()} {latency} ms{edge} exceeds the SLO of {missed[1]:,.0f} ms"
                )
        meets, reasons = judged("serve", checks)
        return Option(
            "serve",
            layout,
            nodes,
            estimate,
            meets,
            reasons,
            self.declared,
            planned_bytes=planned,
            slo_margin=self._slo_margin(estimate),
            restated=self.restated(layout),
        )

    def _slo_margin(self, estimate: ServeEstimate) -> float | None:
        """The least share of a declared SLO (TTFT, TPOT) left below its latency's slow edge at the plan's
        confidence: 0.25 when the tighter one is met with a quarter to spare."""
        job, speed = self.job, estimate.speed
        if not estimate.loads or speed.saturated:
            return None
        margins = [
            1 - slo_figure(job, speed, metric) * 1000 * self.slow[metric] / slo
            for metric in ("ttft", "tpot")
            if (slo := getattr(job, f"{metric}_ms")) is not None
        ]
        least = min(margins, default=None)
        return least if least is None or math.isfinite(least) else None  # an SLO too small to hold a number


def _sharding_kind(sharding: str) -> str:
    """FSDP full sharding and ZeRO-3 shard the same states: not a change of the model's memory."""
    return "zero3" if sharding == "fsdp" else sharding
