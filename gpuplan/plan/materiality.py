"""When a cheaper layout is worth changing to: the one test GP507 and the plan's recommendation share.

A change costs a review, a migration and, for another GPU kind, another supplier; a saving of a few dollars
or a few per cent is not worth that. A cheaper sound layout is a required change only when it saves more
than a share of the declared cost (``thresholds.cheaper_layout_share`` for another GPU kind,
``thresholds.settings_change_share`` on the declared kind) and at least ``thresholds.min_saving`` in money
(per month for serving, per run for fine-tuning; a cost per 1M tokens, without ``finetune.tokens``, has no
amount to hold against it, so only the share applies). Below that, the declared layout stays recommended
and ``gpuplan plan`` names the cheaper one as a note.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuplan.plan.describe import saving_between
from gpuplan.records import record
from gpuplan.units import format_number

if TYPE_CHECKING:
    from gpuplan.config import Settings
    from gpuplan.plan.evaluate import Option


@record
class Materiality:
    switch_share: float  # another GPU kind (and so, often, another supplier)
    same_gpu_share: float  # the declared GPU kind: count, parallelism or settings
    amount: float  # in the spec's currency, per month or per run

    @classmethod
    def of(cls, settings: Settings) -> Materiality:
        return cls(settings.cheaper_layout_share, settings.settings_change_share, settings.min_saving)

    def share_for(self, declared: Option, option: Option) -> float:
        return self.same_gpu_share if option.layout.gpu.id == declared.layout.gpu.id else self.switch_share

    def ceiling(self, declared: Option, share: float) -> float | None:
        """The cost (the planner's rate) a change at ``share`` must come under; None when unpriced."""
        return None if declared.rate is None else declared.rate * (1 - share)

    def material(self, declared: Option, option: Option) -> bool:
        """Whether ``option`` saves enough against ``declared`` to be a required change."""
        saving = saving_between(declared, option)
        if saving is None or saving.share <= self.share_for(declared, option):
            return False
        # A cost per 1M tokens is no amount of money (a run's tokens are not declared): the share decides.
        return saving.per == "1M tokens" or saving.amount.value >= self.amount

    def describe(self, currency: str) -> str:
        """``more than 10% on the same GPU kind or 20% on another, and at least 100 USD``."""
        # rounded half up, as every figure gpuplan prints (format's .0f rounds a half to even: 5,394.5 read 5,394)
        return (
            f"more than {format_number(self.same_gpu_share * 100, 0)}% on the same GPU kind or "
            f"{format_number(self.switch_share * 100, 0)}% on another, and at least {format_number(self.amount, 0)} "
            f"{currency}"
        )
