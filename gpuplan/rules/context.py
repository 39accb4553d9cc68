"""What every rule reads: the resolved spec, its estimate (computed once), settings and positions."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from gpuplan.analysis import Analysis
from gpuplan.config import Settings
from gpuplan.estimate.performance import Efficiency
from gpuplan.findings import Finding, json_pointer
from gpuplan.loader import LoadedDocument, Pointer
from gpuplan.spec import Spec


@dataclass(frozen=True)
class RuleContext:
    spec: Spec
    analysis: Analysis
    document: LoadedDocument
    settings: Settings
    today: datetime.date

    @property
    def efficiency(self) -> Efficiency:
        return efficiency_of(self.settings)

    def finding(self, code: str, pointer: Pointer, message: str, hint: str = "") -> Finding:
        return finding_at(self.document, code, pointer, message, hint)


def finding_at(document: LoadedDocument, code: str, pointer: Pointer, message: str, hint: str = "") -> Finding:
    """A finding at the field ``pointer`` names (its key's line when the value spans lines)."""
    position = document.position(pointer)
    same_line = position.value_line == position.line
    line, col = (position.value_line, position.value_col) if same_line and pointer else (position.line, position.col)
    return Finding.make(code, message, path=document.path, line=line, col=col, pointer=json_pointer(pointer), hint=hint)


def efficiency_of(settings: Settings) -> Efficiency:
    return Efficiency(
        prefill_mfu=settings.prefill_mfu, decode_bandwidth=settings.decode_bandwidth, training_mfu=settings.training_mfu
    )


def comfortable(per_gpu: float, capacity: float, settings: Settings) -> bool:
    """Fits with the configured headroom: an alternative is only offered when it would not warn GP202."""
    return per_gpu <= capacity * (1 - settings.headroom_pct / 100)
