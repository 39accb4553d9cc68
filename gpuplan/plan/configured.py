"""The planner as a configuration sets it up: one place that turns settings into a SpecPlanner.

Rules, the report, the decision, ``gpuplan plan`` and ``gpuplan init`` all plan with the same thresholds
(headroom, gradient sync share) and speed efficiencies, so they agree on what is sound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuplan.estimate.performance import Efficiency
from gpuplan.plan.materiality import Materiality
from gpuplan.plan.spec_planner import SpecPlanner

if TYPE_CHECKING:
    from gpuplan.analysis import Analysis
    from gpuplan.config import Settings
    from gpuplan.spec import PlanLimits, Spec


def efficiency_of(settings: Settings) -> Efficiency:
    """The speed model's efficiencies as the configuration sets them."""
    return Efficiency(
        prefill_mfu=settings.prefill_mfu, decode_bandwidth=settings.decode_bandwidth, training_mfu=settings.training_mfu
    )


def planner_for(
    spec: Spec, settings: Settings, limits: PlanLimits | None = None, analysis: Analysis | None = None
) -> SpecPlanner:
    """The planner with the configured thresholds: headroom, gradient sync share and speed efficiencies
    (``analysis``: the spec's estimate with the same settings' efficiencies)."""
    return SpecPlanner(
        spec,
        efficiency_of(settings),
        headroom_pct=settings.headroom_pct,
        sync_share=settings.gradient_sync_share,
        limits=limits,
        analysis=analysis,
        materiality=Materiality.of(settings),
    )
