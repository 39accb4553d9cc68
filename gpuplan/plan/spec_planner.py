"""The planner of one spec: per job, the declared layout judged like any option, the recommendation (kept
unless a change saves a material amount), the options (a cost-latency front, the conventional serving
layout beside it), the rejected layouts and the cheaper alternatives that change the model's numerics.
The searches themselves are ``gpuplan.plan.search.JobPlanner``'s."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from gpuplan.analysis import Analysis
from gpuplan.config import default_settings
from gpuplan.estimate.performance import Efficiency
from gpuplan.plan.describe import Saving, saving_between
from gpuplan.plan.evaluate import Option, ServePlanner
from gpuplan.plan.finetune_planner import FinetunePlanner
from gpuplan.plan.materiality import Materiality
from gpuplan.plan.search import JobPlanner
from gpuplan.plan.space import Layout
from gpuplan.records import record
from gpuplan.spec import PlanLimits, Spec

# A serving plan lists the conventional layout beside the cheapest when it costs at most this share more: a
# few percent buys the layout operators know (no pipeline bubbles, no tensor parallelism over PCIe).
CONVENTIONAL_WITHIN = 0.05


def conventional(layout: Layout) -> bool:
    """Tensor parallelism within one NVLink domain (none on a card without NVLink), no pipeline stages."""
    return layout.pipeline_parallel == 1 and layout.tensor_parallel <= layout.gpu.domain


@record
class JobPlan:
    """The planner's answer for one job."""

    kind: str  # serve | finetune
    declared: Option
    recommended: Option | None
    options: tuple[Option, ...]  # sound options no other beats on both cost and latency, best first
    rejected: tuple[Option, ...]  # per GPU kind, the fewest-GPU layout tried that breaks a constraint
    alternatives: tuple[Alternative, ...]
    # The declared layout is kept although this one costs less: its saving is under the materiality threshold.
    kept_over: Option | None = None
    # Serving: the conventional layout (tensor parallelism within one NVLink domain, no pipeline, replicas
    # beyond), when the cheapest sound layout is not one and this costs at most CONVENTIONAL_WITHIN more.
    conventional: Option | None = None
    # The recommended layout, listed among the options where its cost puts it although the front passes over
    # it (a kept declared layout that a cheaper and a faster one both beat): a plan lists what it recommends.
    listed_off_front: bool = False

    @property
    def immaterial_saving(self) -> Saving | None:
        """What the cheaper layout the declared one was kept over would have saved."""
        return None if self.kept_over is None else saving_between(self.declared, self.kept_over)

    @property
    def saving(self) -> Saving | None:
        """How much cheaper the recommendation is than a sound declared layout (per month, per run or per 1M
        tokens); None when either is unpriced or the declared layout breaks a constraint (nothing to save
        against: it would not run as declared)."""
        declared, recommended = self.declared, self.recommended
        if recommended is None or not declared.sound:
            return None
        saving = saving_between(declared, recommended)
        # None, not a negative share: the declared layout kept without a sharding it does not need can run up to
        # a tie's share longer (finetune_planner.SHARDING_SPEED_TIE), which is no saving
        return None if saving is not None and saving.share < 0 else saving


@record
class Alternative:
    """A cheaper option that changes the model's numerics: listed, never recommended."""

    label: str
    changes: dict[str, Any]  # dotted spec field -> new value
    option: Option | None
    fragment: dict[str, Any]


def pareto(options: list[Option]) -> list[Option]:
    """Priced options no other option beats on both cost and latency, cheapest first; then the
    unpriced ones (fewest GPUs per GPU kind), which cannot be placed on the cost axis."""
    priced = sorted((o for o in options if o.rate is not None), key=Option.rank)
    front: list[Option] = []
    for option in priced:
        if not front or option.latency_s < min(o.latency_s for o in front):
            front.append(option)
    unpriced: dict[str, Option] = {}
    for option in sorted((o for o in options if o.rate is None), key=lambda o: (o.gpus, o.latency_s)):
        unpriced.setdefault(option.layout.gpu.id, option)
    return front + list(unpriced.values())


class SpecPlanner:
    """The planner for one spec: one JobPlanner per job, built on first use."""

    def __init__(
        self,
        spec: Spec,
        efficiency: Efficiency,
        *,
        headroom_pct: float,
        sync_share: float,
        limits: PlanLimits | None = None,
        analysis: Analysis | None = None,
        materiality: Materiality | None = None,
    ) -> None:
        """``analysis``: the spec's estimate with the same ``efficiency``, whose declared layouts the
        planners then take as evaluated rather than estimating them again. ``materiality``: when a cheaper
        layout replaces a sound declared one (default: the documented thresholds)."""
        self.spec = spec
        self.materiality = materiality or Materiality.of(default_settings())
        self.analysis = analysis
        self.efficiency = efficiency
        self.headroom_pct = headroom_pct
        self.sync_share = sync_share
        self.limits = limits or spec.plan
        self._jobs: dict[str, JobPlanner | None] = {}
        self._plans: dict[str, JobPlan | None] = {}  # plan() per job: a report and its verdict ask for the same

    def job(self, kind: str) -> JobPlanner | None:
        if kind not in self._jobs:
            self._jobs[kind] = self._planner(self.spec, kind)
        return self._jobs[kind]

    @property
    def serve(self) -> JobPlanner | None:
        return self.job("serve")

    @property
    def finetune(self) -> JobPlanner | None:
        return self.job("finetune")

    def _planner(self, spec: Spec, kind: str) -> JobPlanner | None:
        if kind == "serve":
            if spec.serve is None:
                return None
            known = self.analysis.serve if self.analysis is not None else None
            return JobPlanner(
                ServePlanner(spec, self.efficiency, self.headroom_pct, self.limits, known=known), self.limits
            )
        if spec.finetune is None:
            return None
        tuned = self.analysis.finetune if self.analysis is not None else None
        evaluator = FinetunePlanner(spec, self.efficiency, self.headroom_pct, self.sync_share, self.limits, known=tuned)
        return JobPlanner(evaluator, self.limits)

    def recommend(self, planner: JobPlanner, declared: Option) -> Option | None:
        """A sound, priced ``declared`` layout (as the plan judges it) unless a change saves enough to be
        worth it (materiality); else the cheapest sound priced option; without any, a sound declared layout
        on no more GPUs than any other needs (nothing priced shows a change to be worth it), else the sound
        option with the fewest GPUs."""
        if declared.sound and declared.rate is not None:
            return planner.material_change(self.materiality) or self._kept(planner, declared)
        best = planner.cheapest()
        if best is not None:
            return best
        unpriced = [o for gpu in planner.gpus if (o := planner.fewest_gpus_on(gpu)) is not None]
        fewest = min(unpriced, key=lambda o: (o.gpus, o.latency_s, len(o.changes))) if unpriced else None
        if declared.sound and (fewest is None or declared.gpus <= fewest.gpus):
            return self._kept(planner, declared)
        return fewest

    @staticmethod
    def _kept(planner: JobPlanner, declared: Option) -> Option:
        """The declared layout, kept: a fine-tune's without a sharding plain data parallelism does not need (its
        run no slower within a tie's share), a deployment's as single-GPU replicas where one GPU holds a replica
        (GP302) at no more cost."""
        evaluator = planner.evaluator
        if isinstance(evaluator, FinetunePlanner):
            return evaluator.without_needless_sharding(declared)
        assert isinstance(evaluator, ServePlanner)
        spread = evaluator.unsplit(declared) if declared.sound else None
        costs_more = spread is not None and (spread.rate or 0.0) > (declared.rate or 0.0)
        return spread if spread is not None and spread.sound and not costs_more else declared

    def plan(self, kind: str) -> JobPlan | None:
        """The full plan of one job: declared verdict, recommendation, Pareto options, rejected, alternatives."""
        if kind not in self._plans:
            self._plans[kind] = self._plan(kind)
        return self._plans[kind]

    def _plan(self, kind: str) -> JobPlan | None:
        planner = self.job(kind)
        if planner is None:
            return None
        sound, rejected = planner.table()
        declared = planner.declared()
        if kind == "finetune":
            level = declared.layout.tensor_parallel * declared.layout.pipeline_parallel
            least_level = planner.least_split(declared.layout.gpu) if level > 1 else 0
            if least_level and level > least_level:
                declared = declared.with_problem(
                    "model_parallelism",
                    f"tensor x pipeline parallelism {level} where {least_level} holds the job on "
                    f"{declared.layout.gpu.id}",
                )
        recommended = self.recommend(planner, declared)
        cheapest = planner.cheapest() if recommended is declared else None
        options = pareto(sound)
        # A change of numerics is worth listing only below every layout that keeps them: the recommendation,
        # and the cheapest sound one (which a materiality threshold may have kept from being recommended).
        cheapest_kept = planner.cheapest()
        baseline = min((o for o in (recommended, cheapest_kept) if o is not None), key=Option.rank, default=None)
        alternatives = tuple(self._alternatives(kind, baseline))
        rejected.sort(key=lambda o: (o.rate is None, o.rate or 0.0, o.gpus))
        # A tie (or an unpriced declared layout) keeps nothing "over" anything: only a strictly cheaper option.
        cheaper = cheapest is not None and declared.rate is not None and (cheapest.rate or 0.0) < declared.rate
        kept_over = cheapest if cheaper else None
        usual = _conventional_beside(sound) if kind == "serve" else None
        if usual is not None:  # second, after the cheapest it is compared with
            options = [options[0], usual, *(o for o in options[1:] if o.layout.key != usual.layout.key)]
        off_front = recommended is not None and all(o.layout.key != recommended.layout.key for o in options)
        if off_front and recommended is not None:  # after the priced options that rank before it
            rank = Option.rank(recommended)
            at = next((i for i, o in enumerate(options) if o.rate is None or Option.rank(o) > rank), len(options))
            options.insert(at, recommended)
        return JobPlan(
            kind, declared, recommended, tuple(options), tuple(rejected), alternatives, kept_over, usual, off_front
        )

    @staticmethod
    def _worth_listing(option: Option, baseline: Option | None) -> bool:
        """Whether a change of numerics is cheaper than ``baseline`` as the costs are shown (the same figure,
        or one a fraction of a cent lower, is no saving to list); anything without two prices is listed."""
        if baseline is None or baseline.rate is None or option.rate is None:
            return True
        saving = saving_between(baseline, option)
        return saving is not None and saving.positive

    def _alternatives(self, kind: str, baseline: Option | None) -> Iterator[Alternative]:
        """The cheapest sound option under each change of numerics the job did not ask for, when it is
        cheaper, as shown, than ``baseline`` (the least of the recommendation and the cheapest sound layout
        that keeps the numerics: ``_worth_listing``) and is not the same layout at the same cost as one listed
        above (QLoRA where LoRA already gets there)."""
        listed: set[tuple[object, ...]] = set()
        for label, changes in numerics_changes(self.spec, kind):
            changed = _apply_changes(self.spec, kind, changes)
            planner = SpecPlanner(
                changed,
                self.efficiency,
                headroom_pct=self.headroom_pct,
                sync_share=self.sync_share,
                limits=self.limits,
                materiality=self.materiality,
            ).job(kind)
            assert planner is not None
            option = planner.cheapest()
            if option is None:
                continue
            if not self._worth_listing(option, baseline) or (option.layout.key, option.rate) in listed:
                continue
            listed.add((option.layout.key, option.rate))
            fragment = {kind: dict(option.fragment[kind])}
            for dotted, value in changes.items():
                fragment[kind][dotted.split(".", 1)[1]] = value
            yield Alternative(label, changes, option, fragment)


def _conventional_beside(sound: list[Option]) -> Option | None:
    """The cheapest sound conventional layout, when the cheapest sound layout is not conventional and this
    costs at most CONVENTIONAL_WITHIN more; else None."""
    priced = sorted((o for o in sound if o.rate is not None), key=Option.rank)
    if not priced or conventional(priced[0].layout):
        return None
    best = priced[0]
    usual = next((o for o in priced if conventional(o.layout)), None)
    if usual is None or usual.rate is None or best.rate is None:
        return None
    return usual if usual.rate <= best.rate * (1 + CONVENTIONAL_WITHIN) else None


def numerics_changes(spec: Spec, kind: str) -> list[tuple[str, dict[str, Any]]]:
    """Changes that alter the model's numerics, each the spec did not ask for."""
    found: list[tuple[str, dict[str, Any]]] = []
    if kind == "serve" and spec.serve is not None:
        job = spec.serve
        if job.quantization == "none":
            found.append(("fp8 weights", {"serve.quantization": "fp8"}))
            found.append(("4-bit AWQ weights", {"serve.quantization": "int4-awq"}))
        if job.kv_cache_dtype != "fp8":
            found.append(("fp8 KV cache", {"serve.kv_cache_dtype": "fp8"}))
    if kind == "finetune" and spec.finetune is not None:
        tune = spec.finetune
        if tune.method == "full":
            found.append((f"LoRA (rank {tune.lora_rank}) instead of full fine-tuning", {"finetune.method": "lora"}))
        if tune.method != "qlora":
            found.append(("QLoRA: adapters on an NF4-quantized base", {"finetune.method": "qlora"}))
        if tune.optimizer in ("adamw", "adamw-fused"):
            found.append(("8-bit AdamW states", {"finetune.optimizer": "adamw-8bit"}))
    return found


def _apply_changes(spec: Spec, kind: str, changes: dict[str, Any]) -> Spec:
    job = getattr(spec, kind)
    fields = {dotted.split(".", 1)[1]: value for dotted, value in changes.items()}
    return replace(spec, **{kind: replace(job, **fields)})
