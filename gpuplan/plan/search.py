"""The layout searches: lazy queries for the rules, and the full table for ``gpuplan plan`` and reports.

Objective: cost per month (serving) or per run (fine-tuning) at the spec's prices, then fewer GPUs, then
lower latency, then fewer changes to the spec. A fine-tuning layout's settings (recompute, fused loss,
sharding, micro-batch split) are the declared ones changed only as far as memory needs, fewest changes
first: the objective ranks layouts, not settings changed for speed alone. Unpriced GPUs are never
recommended while a priced option exists.

The lazy queries visit candidates in ascending cost and stop at the first sound one. For serving, a
layout's cost is exact before any estimate (GPUs x price), and memory lower bounds (each GPU holds at
least its share of the weights and the KV cache) give the fewest replicas a layout could need; each
candidate is then checked with the estimator's memory alone, and only memory-sound ones are estimated in
full for the SLO. For fine-tuning, each GPU kind's cost floor is its one-GPU cost with no recompute;
kinds are visited cheapest floor first. The memory search is an exponential search from the bound: more
replicas (fewer sequences each) never need more memory per GPU, which the property tests check. The SLO
search is a scan in ascending replicas: latency is not monotone in the replicas (a batch's prefill and
decode steps round to whole steps; a 1B model on L4 meets a 200 ms TTFT with 3 replicas, misses it with 4
and 5, meets it with 6), so every count is tried in cost order. More GPUs, recompute or smaller
micro-batches never lower a run's cost, with one exception the search does not look for: a layout on more
GPUs that fits a larger micro-batch spreads what a micro-batch pays once (autocast's weight casts, QLoRA's
dequantization, kernel launches) over more tokens, and can cost a little less per token than the fewest GPUs
of that kind at a smaller micro-batch.

Fine-tuning adds model parallelism only when needed: on a GPU kind, tensor and pipeline parallelism
beyond the least that holds the job (with data parallelism, sharding, checkpointing, a fused loss or
smaller micro-batches) are rejected, as GP302 rejects them in a declared layout.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import Literal

from gpuplan.catalog import Gpu, Price
from gpuplan.conflicts import engine_refusal, offload_rests_on_sharding, runs_sharding, runs_tensor_parallel
from gpuplan.plan.evaluate import Option, ServePlanner
from gpuplan.plan.finetune_planner import FinetunePlanner
from gpuplan.plan.materiality import Materiality
from gpuplan.plan.probes import Galloping, Scan
from gpuplan.plan.space import (
    Layout,
    TrainingSettings,
    allowed_gpus,
    computes_in_bf16,
    gpu_outside_limits,
    nodes_needed,
    pipeline_degrees,
    proposed_serving_tensor_parallel,
    tensor_parallel_degrees,
)
from gpuplan.spec import HOURS_PER_MONTH, PlanLimits

Family = tuple[Gpu, int, int]  # GPU kind, tensor parallel, pipeline parallel
Widths = Literal["every", "per recompute", "fewest"]  # which data-parallel widths finetune_on answers with
Where = Callable[[Gpu, int, int], bool]
SHARDING_ORDER = ("none", "zero1", "zero2", "zero3")  # less to more memory saved


def checkpointing_mode(declared: str, full: bool) -> str:
    """The activation_checkpointing value for the search's toggle: "full" when on; when off, the declared
    mode unless that is "full" (then "none"), so a declared selective mode is kept as it is."""
    if full:
        return "full"
    return declared if declared != "full" else "none"


# Entries of the serving search's line: a GPU kind's next size of replica; a family's memory search in
# progress; a family at its memory-sound replicas; its search for sound replicas in progress; a family at
# its sound replicas.
_SIZE, _MEMORY, _EVALUATE, _SOUND, _FOUND = range(5)


class JobPlanner:
    """Searches for one job of a spec (serving or fine-tuning) within the planner's limits."""

    def __init__(self, evaluator: ServePlanner | FinetunePlanner, limits: PlanLimits) -> None:
        self.evaluator = evaluator
        self.kind = evaluator.kind
        self.spec = evaluator.spec
        self.limits = limits
        self.gpus = allowed_gpus(self.spec, limits)
        if computes_in_bf16(self.spec, self.kind):
            self.gpus = [gpu for gpu in self.gpus if gpu.has_bf16]
        serve = self.spec.serve
        if self.kind == "serve" and serve is not None:  # never a GPU the engine refuses a model on (GP026)
            self.gpus = [
                gpu
                for gpu in self.gpus
                if all(engine_refusal(serve.engine, q, gpu) is None for q in serve.quantizations)
            ]
        self._cheapest: dict[tuple[object, ...], Option | None] = {}
        self._floor: dict[str, float] = {}
        self._prices: dict[str, Price | None] = {}  # GPU id -> its price record (None: unpriced), for the line
        self._fewest: dict[str, Option | None] = {}
        self._priced: list[Gpu] | None = None  # the allowed GPUs with a price, every cost query's pool
        self._split_cache: dict[tuple[int, bool], list[tuple[int, list[tuple[int, int]]]]] = {}
        self._memory_searches: dict[tuple[object, ...], Galloping] = {}
        self._sound_searches: dict[tuple[object, ...], Scan] = {}
        self._choices: dict[tuple[int, bool], tuple[TrainingSettings, ...]] = {}  # (width, checkpointing)

    # -- the declared layout ---------------------------------------------------------------------
    def declared(self) -> Option:
        """The declared layout, judged as any option, and also against the GPU and vendor limits."""
        option = self.evaluator.evaluate(self.evaluator.declared_layout())
        problem = gpu_outside_limits(option.layout.gpu, self.limits)
        return option if problem is None else option.with_problem("limits", problem)

    # -- lazy queries ----------------------------------------------------------------------------
    def cheapest(self, *, ceiling: float | None = None, where: Where | None = None, tag: str = "") -> Option | None:
        """The cheapest sound, priced option (among families ``where`` accepts), or None. With a
        ``ceiling`` (a cost per month or per 1M tokens), options at or above it are never estimated and
        None means none is cheaper. ``tag`` names ``where`` for memoisation."""
        key = (tag,)
        if key in self._cheapest:
            found = self._cheapest[key]
            return found if found is None or ceiling is None or found.rate is None or found.rate < ceiling else None
        found = self._search(ceiling=ceiling, where=where, by_gpus=False)
        if found is not None or ceiling is None:
            self._cheapest[key] = found
        return found

    def material_change(self, materiality: Materiality) -> Option | None:
        """The cheapest sound option whose saving against the declared layout is worth a change (on the
        declared GPU kind at its share, on any at the switch share, and at least the amount), or None."""
        declared = self.declared()
        if declared.rate is None:
            return None
        anywhere = self.cheapest(ceiling=materiality.ceiling(declared, materiality.switch_share))
        if anywhere is not None:
            # The cheapest of every kind under the switch ceiling: one on the declared kind costs no less,
            # so it saves no more (and an amount too small here is too small there).
            return anywhere if materiality.material(declared, anywhere) else None
        gpu = declared.layout.gpu.id
        same = self.cheapest(
            ceiling=materiality.ceiling(declared, materiality.same_gpu_share),
            where=lambda kind, tp, pp: kind.id == gpu,
            tag=f"on {gpu}",
        )
        return same if same is not None and materiality.material(declared, same) else None

    def fewest_gpus_on(self, gpu: Gpu) -> Option | None:
        """The sound option on one GPU kind with the fewest GPUs (then the cheapest): "parallelism is
        needed the moment one GPU cannot hold the job, not a moment before". Priced or not; max_gpus and
        max_nodes apply, the GPU and vendor limits do not (the GPU is named)."""
        if gpu.id not in self._fewest:
            self._fewest[gpu.id] = self._search(ceiling=None, where=None, by_gpus=True, gpus=[gpu])
        return self._fewest[gpu.id]

    def least_split(self, gpu: Gpu) -> int:
        """Fine-tuning: the fewest GPUs a model copy is split over (TP x PP) among the sound layouts of one GPU
        kind (the level ``finetune_on`` stops at: its fewest-GPU option's), or 0 when none is sound. A declared
        split beyond it breaks ``model_parallelism`` (the plan) and draws GP306 (lint)."""
        fewest = self.fewest_gpus_on(gpu)
        return 0 if fewest is None else fewest.layout.tensor_parallel * fewest.layout.pipeline_parallel

    def settings_for_declared_shape(self) -> Option | None:
        """Fine-tuning: the sound option on the declared GPUs (kind, TP x PP x data-parallel ranks) with the
        fewest settings changes from the declared ones, keeping the declared recompute choice if any
        settings allow it; None when no settings the planner changes hold the job there."""
        if self.evaluator.context_problem is not None:
            return None
        layout = self.evaluator.declared_layout()
        assert layout.settings is not None, "fine-tuning layouts carry settings"
        shape = (layout.gpu, layout.tensor_parallel, layout.pipeline_parallel, layout.replicas)
        declared_full = layout.settings.activation_checkpointing == "full"
        for checkpointing in (declared_full, not declared_full):
            option = self._sound_settings(*shape, checkpointing)
            if option is not None:
                return option
        return None

    def _search(
        self, *, ceiling: float | None, where: Where | None, by_gpus: bool, gpus: list[Gpu] | None = None
    ) -> Option | None:
        if self.evaluator.context_problem is not None:
            return None  # no layout runs a context longer than the model takes (GP206)
        if gpus is None and self._priced is None:
            self._priced = [gpu for gpu in self.gpus if self.evaluator.spec.price_record(gpu) is not None]
        pool = gpus if gpus is not None else self._priced
        assert pool is not None
        if self.kind == "serve":
            return self._serve_search(pool, ceiling, where, by_gpus)
        return self._finetune_search(pool, ceiling, where, by_gpus)

    # -- serving -----------------------------------------------------------------------------------
    def _serve_families(self, gpus: list[Gpu], where: Where | None) -> Iterator[Family]:
        arch = self.evaluator.arch
        pipelines = pipeline_degrees(arch, serving=True)
        for gpu in gpus:
            for tp in proposed_serving_tensor_parallel(arch, gpu):
                for pp in pipelines:
                    if where is None or where(gpu, tp, pp):
                        yield gpu, tp, pp

    def _splits(self, gpu: Gpu) -> list[tuple[int, list[tuple[int, int]]]]:
        """GPUs per replica (TP x PP) in ascending order, each with its (TP, PP) splits, for one GPU kind."""
        key = (gpu.domain, gpu.has_nvlink)
        if key not in self._split_cache:
            arch = self.evaluator.arch
            by_size: dict[int, list[tuple[int, int]]] = {}
            for tp in proposed_serving_tensor_parallel(arch, gpu):
                for pp in pipeline_degrees(arch, serving=True):
                    by_size.setdefault(tp * pp, []).append((tp, pp))
            self._split_cache[key] = sorted(by_size.items())
        return self._split_cache[key]

    def _order(self, family: Family, replicas: int, by_gpus: bool) -> tuple[float, float]:
        gpu, tp, pp = family
        count = tp * pp * replicas
        if gpu.id not in self._prices:
            self._prices[gpu.id] = self.spec.price_record(gpu)
        record = self._prices[gpu.id]
        # The exact cost before any estimate: the GPUs paid for (whole instances under an instance-hour
        # quote, never fewer for more replicas, so the line's keys stay in order) at the price per GPU-hour.
        hourly = 0.0 if record is None else record.per_hour * record.billed_gpus(count)
        return (count, hourly) if by_gpus else (hourly, count)

    def _serve_search(
        self, gpus: list[Gpu], ceiling: float | None, where: Where | None, by_gpus: bool
    ) -> Option | None:
        """Candidates in ascending cost (or GPU count), generated lazily: GPU kinds by GPUs per replica
        (each replica costs at least its GPUs), then each family's fewest replicas by the memory bounds,
        then the fewest the estimator's memory allows, then the fewest that meet every constraint. An
        entry whose replicas grow goes back in line at its new cost; the first sound one popped is the
        answer (with any others at the same cost, ranked by the objective).

        The two replica searches (memory: an exponential search; every constraint: an ascending scan) are
        taken one probe per turn: between probes a family waits in line at the cost of the fewest replicas
        its search has not ruled out, so a family that cannot beat the answer (or the ceiling) is never
        probed to the end; one that is ends where the whole search ends."""
        evaluator = self.evaluator
        assert isinstance(evaluator, ServePlanner)
        hourly_ceiling = None if ceiling is None or by_gpus else ceiling / HOURS_PER_MONTH
        counter = itertools.count()
        line: list[tuple[tuple[float, float], int, int, int, int, Family | None, Galloping | Scan | None]] = []

        def enter(
            stage: int, number: int, family: Family, replicas: int, search: Galloping | Scan | None = None
        ) -> None:
            order = self._order(family, replicas, by_gpus)
            heapq.heappush(line, (order, next(counter), stage, number, replicas, family, search))

        splits = [self._splits(gpu) for gpu in gpus]
        for number, gpu in enumerate(gpus):
            if splits[number]:
                size = splits[number][0][0]
                heapq.heappush(
                    line, (self._order((gpu, size, 1), 1, by_gpus), next(counter), _SIZE, number, 0, None, None)
                )
        found: list[Option] = []
        found_key = 0.0
        while line:
            key, _, stage, number, value, family, search = heapq.heappop(line)
            if hourly_ceiling is not None and key[0] >= hourly_ceiling:
                break
            if found and key[0] > found_key:
                break
            gpu = gpus[number]
            if stage == _SIZE:
                size, pairs = splits[number][value]
                if value + 1 < len(splits[number]):
                    following = splits[number][value + 1][0]
                    heapq.heappush(
                        line,
                        (
                            self._order((gpu, following, 1), 1, by_gpus),
                            next(counter),
                            _SIZE,
                            number,
                            value + 1,
                            None,
                            None,
                        ),
                    )
                for tp, pp in pairs:
                    if where is not None and not where(gpu, tp, pp):
                        continue
                    fewest = evaluator.fewest_replicas(gpu, tp, pp)
                    if fewest is not None and self._within_nodes(gpu, tp, pp, fewest):
                        candidate = (gpu, tp, pp)
                        enter(_MEMORY, number, candidate, fewest, self._memory_search(candidate, fewest))
                continue
            assert family is not None
            if stage in (_MEMORY, _SOUND):
                assert search is not None
                if stage == _MEMORY and evaluator.slo_out_of_reach(*family):
                    continue  # no number of replicas makes this family sound
                search.step()
                if not search.done:
                    enter(stage, number, family, search.low, search)
                elif search.result is not None and stage == _MEMORY:
                    enter(_EVALUATE, number, family, search.result)
                elif search.result is not None and self._within_nodes(*family, search.result):
                    enter(_FOUND, number, family, search.result)
                continue
            layout = evaluator.layout(*family, value)
            if evaluator.sound(layout):
                found_key = key[0]
                found.append(evaluator.evaluate(layout))
            elif stage == _EVALUATE:
                enter(_SOUND, number, family, value + 1, self._sound_search(family, value + 1))
        return min(found, key=Option.rank) if found else None

    def _memory_search(self, family: Family, low: int) -> Galloping:
        """The search for the fewest replicas from ``low`` whose per-GPU memory is sound (the estimator's
        memory alone); shared by every query of this planner."""
        key = (family[0].id, family[1], family[2], low)
        if key not in self._memory_searches:
            evaluator = self.evaluator
            assert isinstance(evaluator, ServePlanner)
            gpu, tp, pp = family
            self._memory_searches[key] = Galloping(
                low, evaluator.max_replicas(tp, pp), lambda r: evaluator.memory_sound(evaluator.layout(gpu, tp, pp, r))
            )
        return self._memory_searches[key]

    def _sound_search(self, family: Family, low: int) -> Scan:
        """The search for the fewest replicas from ``low`` that meet every constraint: a scan, because
        the SLO checks are not monotone in the replicas (see the module's docstring)."""
        key = (family[0].id, family[1], family[2], low)
        if key not in self._sound_searches:
            evaluator = self.evaluator
            assert isinstance(evaluator, ServePlanner)
            gpu, tp, pp = family
            self._sound_searches[key] = Scan(
                low, evaluator.max_replicas(tp, pp), lambda r: evaluator.sound(evaluator.layout(gpu, tp, pp, r))
            )
        return self._sound_searches[key]

    def _replicas_with_memory(self, family: Family, low: int) -> int | None:
        """The fewest replicas from ``low`` whose per-GPU memory is sound (the estimator's memory alone)."""
        return self._memory_search(family, low).run()

    def _replicas_sound(self, family: Family, low: int) -> int | None:
        """The fewest replicas from ``low`` that meet every constraint."""
        return self._sound_search(family, low).run()

    def _within_nodes(self, gpu: Gpu, tp: int, pp: int, copies: int) -> bool:
        return nodes_needed(gpu, tp, pp, copies) <= self.limits.max_nodes and tp * pp * copies <= self.limits.max_gpus

    # -- fine-tuning -------------------------------------------------------------------------------
    def _levels(self, gpu: Gpu) -> list[tuple[int, int]]:
        arch = self.evaluator.arch
        degrees = tensor_parallel_degrees(arch, gpu, serving=False)
        if not runs_tensor_parallel(*self._stack()):
            degrees = [1]  # the training stack runs the method without tensor parallelism (conflicts)
        pairs = [(tp, pp) for tp in degrees for pp in pipeline_degrees(arch, serving=False)]
        return sorted(pairs, key=lambda pair: (pair[0] * pair[1], pair[1]))

    def _stack(self) -> tuple[str, str]:
        """(method, framework) of the fine-tuning job: what decides the shardings and TP its stack runs."""
        job = self.evaluator.spec.finetune
        assert job is not None, "a fine-tuning search has a fine-tuning job"
        return job.method, job.framework

    def _runs(self, sharding: str) -> bool:
        return runs_sharding(*self._stack(), sharding)

    # (the search toggles full activation checkpointing on and off; checkpointing_mode maps the toggle)
    def _settings_choices(self, data_parallel: int, checkpointing: bool) -> tuple[TrainingSettings, ...]:
        """Settings for one data-parallel width, fewest changes from the declared ones first (the same for
        every GPU kind and split: listed once per width)."""
        key = (data_parallel, checkpointing)
        if key not in self._choices:
            self._choices[key] = self._list_settings(data_parallel, checkpointing)
        return self._choices[key]

    def _list_settings(self, data_parallel: int, checkpointing: bool) -> tuple[TrainingSettings, ...]:
        evaluator = self.evaluator
        assert isinstance(evaluator, FinetunePlanner)
        declared = evaluator.declared_settings()
        fused_choices = sorted({declared.fused_loss, True}, key=lambda value: value != declared.fused_loss)
        tune = evaluator.spec.finetune
        offloaded = tune is not None and offload_rests_on_sharding(tune)
        if data_parallel == 1 and declared.sharding != "none" and not offloaded:
            # Nothing to shard over: the paste drops the sharding (GP302 would call it needless), unless an
            # offload rests on it.
            sharding_choices = ["none"]
        elif data_parallel == 1:
            sharding_choices = [declared.sharding]
        else:
            kind = "zero3" if declared.sharding == "fsdp" else declared.sharding
            sharding_choices = [declared.sharding] + [s for s in SHARDING_ORDER if s != kind and self._runs(s)]
        # the declared sharding too only where the stack runs it (a QLoRA alternative of a LoRA job keeps the
        # job's sharding, which Megatron's QLoRA may not run: conflicts.runs_sharding)
        sharding_choices = [s for s in sharding_choices if self._runs(s)] or [
            [s for s in SHARDING_ORDER if self._runs(s)][-1 if data_parallel > 1 else 0]
        ]
        choices = [
            TrainingSettings(
                checkpointing_mode(declared.activation_checkpointing, checkpointing),
                fused,
                sharding,
                micro,
                evaluator.global_batch // (micro * data_parallel),
            )
            for fused in fused_choices
            for sharding in sharding_choices
            for micro in evaluator.micro_batches(data_parallel)
        ]

        def changes(settings: TrainingSettings) -> int:
            return (
                (settings.fused_loss != declared.fused_loss)
                + (settings.sharding != declared.sharding)
                + (settings.micro_batch != declared.micro_batch)
            )

        return tuple(sorted(choices, key=changes))

    def _sound_settings(self, gpu: Gpu, tp: int, pp: int, dp: int, checkpointing: bool) -> Option | None:
        """The sound option with the fewest settings changes at one shape, or None. A shape whose
        least-memory settings do not fit is skipped at once; otherwise each memory-sound choice is judged
        in turn, fewest changes first, since memory is not the only constraint settings move: a larger
        micro-batch or other sharding changes the share of a step that gradient sync takes."""
        evaluator = self.evaluator
        assert isinstance(evaluator, FinetunePlanner)
        if not self._fits_at_all(gpu, tp, pp, dp, checkpointing):
            return None
        for settings in self._settings_choices(dp, checkpointing):
            layout = Layout(gpu, tp, pp, dp, settings=settings)
            # The cheap refusals first: the tensors alone, then gradient sync (the speed model), before the
            # allocator's simulation that memory_sound runs; a quarter of the choices a lint's searches
            # simulated fitted and then broke gradient sync.
            if not evaluator.tensors_sound(layout) or evaluator.sync_too_slow(layout):
                continue
            if not evaluator.memory_sound(layout):
                continue
            option = evaluator.evaluate(layout)
            if option.sound:
                return evaluator.without_needless_sharding(option)
        return None

    def _relaxed(self, gpu: Gpu, tp: int, pp: int, dp: int, checkpointing: bool) -> tuple[Layout, ...]:
        """The layouts of a shape, at one recompute choice, of which one needs the least memory: a fused
        loss, and each pairing of the sharding and micro-batch choices that no other choice undercuts.

        Micro-batch: the smallest (one sequence), and the one that takes a rank's whole share of the
        batch at once when that is a choice. Accumulating gradients keeps a gradient buffer live through
        the forward pass and the start of backward (``estimate_training``), which the smaller
        micro-batch's activations may not repay; within either regime memory only grows with the
        micro-batch (activations, temporaries and logits scale with it; the buffer does not).
        Sharding: every sharding the choices try, but ZeRO-1 beside ZeRO-2, which shards what ZeRO-1 does and
        the gradients too, with the same DeepSpeed buckets. No other ordering holds: ZeRO-3 also shards the
        weights but holds gathered units, which on a few ranks can outweigh what it saves, and DeepSpeed's
        gradient buckets (``training.reduce_bucket_bytes``, 0.93 GiB by default) can outweigh what any ZeRO
        stage saves of a small model or of adapters, where FSDP carries none and plain DDP's are the trainable
        gradients' bytes (``training.holds_ddp_buckets``). A property test holds every choice at or above the
        least of these."""
        evaluator = self.evaluator
        assert isinstance(evaluator, FinetunePlanner)
        tried = {settings.sharding for settings in self._settings_choices(dp, checkpointing)}
        shardings = tuple(sorted(tried - ({"zero1"} if "zero2" in tried else set())))
        mode = checkpointing_mode(evaluator.declared_settings().activation_checkpointing, checkpointing)
        per_rank = evaluator.global_batch // dp
        micros = evaluator.micro_batches(dp)
        return tuple(
            Layout(gpu, tp, pp, dp, settings=TrainingSettings(mode, True, sharding, micro, per_rank // micro))
            for sharding in shardings
            for micro in sorted({min(micros), per_rank} & set(micros))
        )

    def _fits_at_all(self, gpu: Gpu, tp: int, pp: int, dp: int, checkpointing: bool) -> bool:
        """Whether any settings of a shape may be memory-sound at one recompute choice: whether the tensors
        of one of its least-memory layouts are (``tensors_sound``: the device figure adds the allocator's
        cache, which does not order the settings as the tensors do, so each choice is judged on it after)."""
        evaluator = self.evaluator
        assert isinstance(evaluator, FinetunePlanner)
        return any(evaluator.tensors_sound(layout) for layout in self._relaxed(gpu, tp, pp, dp, checkpointing))

    def _most_relaxed(self, gpu: Gpu, tp: int, pp: int, dp: int) -> Layout:
        """The layout of a shape that needs the least memory, with or without recompute (see ``_relaxed``)."""
        relaxed = (*self._relaxed(gpu, tp, pp, dp, True), *self._relaxed(gpu, tp, pp, dp, False))
        return min(relaxed, key=lambda layout: self.evaluator.memory(layout).per_gpu)

    def finetune_on(self, gpu: Gpu, *, widths: Widths, ceiling: float | None = None) -> list[Option]:
        """Sound options on one GPU kind at the least model parallelism that holds the job.

        ``widths``: "every", one option per data-parallel width and checkpointing choice (the full table);
        "per recompute", only the fewest-GPU one per checkpointing choice that runs the declared
        micro-batch (more GPUs never cost less at the same micro-batch, but one recompute choice on more GPUs
        can cost less than the other on fewer, and where memory cuts the micro-batch on fewer GPUs, more GPUs
        holding a larger one spread its per-micro-batch costs over more tokens and can cost less: each such
        width is weighed until one runs the declared micro-batch); "fewest", only those at the narrowest
        width with a sound option, one per checkpointing choice (a fewest-GPUs query needs nothing wider).
        """
        assert isinstance(self.evaluator, FinetunePlanner)
        declared_micro = self.evaluator.declared_settings().micro_batch
        for tp, pp in self._levels(gpu):
            sound: list[Option] = []
            done: set[bool] = set()
            for dp in self._fitting_widths(gpu, tp, pp):
                for checkpointing in (False, True):
                    if checkpointing in done:
                        continue
                    option = self._sound_settings(gpu, tp, pp, dp, checkpointing)
                    if option is not None:
                        sound.append(option)
                        settings = option.layout.settings
                        # the micro-batch memory cut (a rank's share of the global batch caps it too)
                        largest = min(declared_micro, self.evaluator.global_batch // dp)
                        cut = settings is not None and settings.micro_batch < largest
                        if widths == "fewest" or (widths == "per recompute" and not cut):
                            done.add(checkpointing)
                if len(done) == 2 or (sound and widths == "fewest"):
                    break
            if sound:  # this level holds the job: more model parallelism is not needed on this GPU
                return [o for o in sound if ceiling is None or (o.rate is not None and o.rate < ceiling)]
        return []

    def _fitting_widths(self, gpu: Gpu, tp: int, pp: int) -> Iterator[int]:
        """The data-parallel widths of a TP x PP split at which some settings are memory-sound, with or
        without full recompute (recompute usually needs less, but not always: it keeps each layer's
        checkpointed input through backward, which can outweigh what it saves when activations are
        offloaded), narrowest first. Over two ranks or more, sharding over more ranks only lowers the
        least memory (a property test holds it): the widest decides whether any fits, and the widths from
        the first that fits on all do; one rank keeps the declared sharding and is checked alone.
        Generated lazily: a caller that finds its answer at one rank never estimates the sharded widths."""
        evaluator = self.evaluator
        assert isinstance(evaluator, FinetunePlanner)
        widths = [dp for dp in evaluator.data_parallel_degrees(tp, pp) if self._within_nodes(gpu, tp, pp, dp)]
        if 1 in widths and self._fits_either_way(gpu, tp, pp, 1):
            yield 1
        sharded = [dp for dp in widths if dp > 1]
        if sharded and self._fits_either_way(gpu, tp, pp, sharded[-1]):
            first = next(index for index, dp in enumerate(sharded) if self._fits_either_way(gpu, tp, pp, dp))
            yield from sharded[first:]

    def _fits_either_way(self, gpu: Gpu, tp: int, pp: int, dp: int) -> bool:
        """Whether any settings of a shape fit with full recompute or without it (recompute first: it is
        the likelier to fit)."""
        return self._fits_at_all(gpu, tp, pp, dp, True) or self._fits_at_all(gpu, tp, pp, dp, False)

    def _floor_rate(self, gpu: Gpu) -> float:
        """A cost floor for every layout on ``gpu``: one GPU, no recompute, a fused loss (never slower),
        the declared micro-batch (smaller ones are never cheaper)."""
        if gpu.id not in self._floor:
            evaluator = self.evaluator
            assert isinstance(evaluator, FinetunePlanner)
            rate = evaluator.floor_rate(gpu)
            self._floor[gpu.id] = float("inf") if rate is None else rate
        return self._floor[gpu.id]

    def _finetune_search(
        self, gpus: list[Gpu], ceiling: float | None, where: Where | None, by_gpus: bool
    ) -> Option | None:
        if by_gpus:
            options = [option for gpu in gpus for option in self.finetune_on(gpu, widths="fewest")]
            return min(options, key=lambda o: (o.gpus, *o.rank())) if options else None
        evaluator = self.evaluator
        assert isinstance(evaluator, FinetunePlanner)
        # GPU kinds in ascending cost floor (ties in the given order), the floors solved lazily: each kind
        # waits in line at a lower bound of its floor until it comes first, then at its floor. A kind that
        # comes first at its floor is the next in floor order (every other waits at or below its own), and
        # once the line's first bound is at or above the limit so is every floor left.
        line = [(evaluator.floor_rate_bound(gpu), number, False) for number, gpu in enumerate(gpus)]
        heapq.heapify(line)
        best: Option | None = None
        while line:
            floor, number, solved = heapq.heappop(line)
            limit = best.rate if best is not None and best.rate is not None else ceiling
            if limit is not None and floor >= limit:
                break
            gpu = gpus[number]
            if not solved:
                heapq.heappush(line, (self._floor_rate(gpu), number, True))
                continue
            # Under whole-instance billing more GPUs can cost less (one GPU of an 8-GPU instance pays for 8 and
            # runs slowest): every width is weighed there, not only the fewest-GPU one.
            record = self.spec.price_record(gpu)
            widths: Widths = "every" if record is not None and record.instance_gpus > 1 else "per recompute"
            for option in self.finetune_on(gpu, widths=widths, ceiling=ceiling):
                if where is not None and not where(gpu, option.layout.tensor_parallel, option.layout.pipeline_parallel):
                    continue
                if best is None or option.rank() < best.rank():
                    best = option
        return best

    # -- the full table ----------------------------------------------------------------------------
    def table(self) -> tuple[list[Option], list[Option]]:
        """(sound options, rejected options). Nothing when the job's context is longer than its model takes:
        every layout breaks it alike."""
        if self.evaluator.context_problem is not None:
            return [], []
        if self.kind == "serve":
            return self._serve_table()
        return self._finetune_table()

    def _serve_table(self) -> tuple[list[Option], list[Option]]:
        """Each GPU kind's sound families at their fewest sound replicas, and the kind's fewest-GPU unsound
        layout when it uses fewer GPUs than the kind's best sound one (``_why_not``). Soundness is judged by
        ``ServePlanner.sound`` (the speed model only where its bounds do not already decide), so a layout is
        estimated in full only if the table shows it."""
        evaluator = self.evaluator
        assert isinstance(evaluator, ServePlanner)
        sound: list[Option] = []
        rejected: list[Option] = []
        arch = evaluator.arch
        for gpu in self.gpus:
            tried: list[Layout] = []
            for tp in proposed_serving_tensor_parallel(arch, gpu):
                for pp in pipeline_degrees(arch, serving=True):
                    fewest = evaluator.fewest_replicas(gpu, tp, pp)
                    if fewest is None or not self._within_nodes(gpu, tp, pp, fewest):
                        continue
                    memory_ok = self._replicas_with_memory((gpu, tp, pp), fewest)
                    layout = evaluator.layout(gpu, tp, pp, memory_ok or fewest)
                    is_sound = evaluator.sound(layout)
                    if memory_ok is not None and not is_sound:
                        more = self._replicas_sound((gpu, tp, pp), memory_ok + 1)
                        if more is not None:
                            layout = evaluator.layout(gpu, tp, pp, more)
                            is_sound = evaluator.sound(layout)
                    if is_sound and self._within_nodes(gpu, tp, pp, layout.replicas):
                        sound.append(evaluator.evaluate(layout))
                        if layout.replicas == 1:
                            break  # more stages: more GPUs, and no token gets faster through more hops
                    else:
                        tried.append(layout)
            if not tried and not any(o.layout.gpu.id == gpu.id for o in sound):
                rejected.append(self._serve_most_relaxed(gpu))
            else:
                rejected.extend(self._why_not(gpu, tried, sound))
        return sound, rejected

    def _serve_most_relaxed(self, gpu: Gpu) -> Option:
        """When no layout of a GPU passes the memory bounds: its largest single replica, to say why."""
        evaluator = self.evaluator
        assert isinstance(evaluator, ServePlanner)
        arch = evaluator.arch
        tp = max(proposed_serving_tensor_parallel(arch, gpu))
        pp = max(p for p in pipeline_degrees(arch, serving=True) if tp * p <= self.limits.max_gpus or p == 1)
        return evaluator.evaluate(evaluator.layout(gpu, tp, pp, 1))

    def _why_not(self, gpu: Gpu, tried: list[Layout], sound: list[Option]) -> list[Option]:
        """The fewest-GPU unsound layout of a GPU kind (the best ranked of those that tie on GPUs), when it
        uses fewer GPUs than its best sound one; only those tied layouts are estimated."""
        if not tried:
            return []
        least = min(layout.gpus for layout in tried)
        on_gpu = [o.gpus for o in sound if o.layout.gpu.id == gpu.id]
        if on_gpu and least >= min(on_gpu):
            return []
        tied = [self.evaluator.evaluate(layout) for layout in tried if layout.gpus == least]
        return [min(tied, key=lambda o: o.rank())]

    def _finetune_table(self) -> tuple[list[Option], list[Option]]:
        evaluator = self.evaluator
        assert isinstance(evaluator, FinetunePlanner)
        sound: list[Option] = []
        rejected: list[Option] = []
        for gpu in self.gpus:
            found = self.finetune_on(gpu, widths="every")
            sound.extend(found)
            least = min((o.gpus for o in found), default=None)
            if least is None or least > 1:
                attempt = evaluator.evaluate(self._most_relaxed(gpu, 1, 1, 1))
                if not attempt.sound:
                    rejected.append(attempt)
        return sound, rejected
