"""What every rule reads: the resolved spec, its estimate (computed once), settings and positions."""

from __future__ import annotations

import datetime
import functools

from gpuplan.analysis import Analysis
from gpuplan.config import Settings
from gpuplan.estimate.performance import Efficiency
from gpuplan.findings import Finding, json_pointer
from gpuplan.loader import LoadedDocument, Pointer
from gpuplan.plan.configured import efficiency_of, planner_for
from gpuplan.plan.spec_planner import SpecPlanner
from gpuplan.records import record
from gpuplan.spec import Spec


@record
class RuleContext:
    spec: Spec
    analysis: Analysis
    document: LoadedDocument
    settings: Settings
    today: datetime.date
    catalog_hints: bool = False  # fit hints also name the cheapest layout of any allowed GPU (a full search)

    @property
    def efficiency(self) -> Efficiency:
        return efficiency_of(self.settings)

    @functools.cached_property
    def plans(self) -> SpecPlanner:
        """The planner for this spec, shared by every rule that proposes a layout (built on first use);
        it takes the declared layouts' estimates from the analysis rather than estimating them again."""
        return planner_for(self.spec, self.settings, analysis=self.analysis)

    def finding(self, code: str, pointer: Pointer, message: str, hint: str = "") -> Finding:
        return finding_at(self.document, code, pointer, message, hint)


def finding_at(document: LoadedDocument, code: str, pointer: Pointer, message: str, hint: str = "") -> Finding:
    """A finding at the field ``pointer`` names (its key's line when the value spans lines)."""
    position = document.position(pointer)
    same_line = position.value_line == position.line
    line, col = (position.value_line, position.value_col) if same_line and pointer else (position.line, position.col)
    return Finding.make(code, message, path=document.path, line=line, col=col, pointer=json_pointer(pointer), hint=hint)
