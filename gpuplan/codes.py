"""The code table: every finding gpuplan can report, with its name, family, default severity and summary.

The bottom layer of the package (it imports nothing from gpuplan), as ruff's code table or yamllint's
rule IDs: loading, validating and configuration look codes up here without importing the rules, the
estimator or the catalogs. A code's documentation (*What it does / Why is this bad? / Example / Use
instead*) and its check live in its family module under ``gpuplan/rules/``; a test holds the two in step.
Codes are stable: a code is never reused for another meaning.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(str, enum.Enum):
    """How serious a finding is; ``rank`` orders them for ``--fail-on``."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return _RANKS[self.value]


_RANKS = {"error": 3, "warning": 2, "info": 1}
ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO


class Approval(str, enum.Enum):
    """What a finding of a code does to a decision report's verdict (``gpuplan.decision``)."""

    REJECTS = "rejects"  # the declared plan cannot be approved as it stands (REJECT at the fail level)
    NEEDS_INFORMATION = "needs-information"  # something the decision needs is unknown (CANNOT APPROVE)
    NEEDS_CHANGE = "needs-change"  # the plan runs but is not sound: the approver is told what to change
    NONE = "none"  # says nothing about approval unless it is at the fail level


# A plain frozen dataclass, not a gpuplan record: the bottom layer imports nothing from gpuplan.
@dataclass(frozen=True)
class Code:
    code: str  # GP201
    name: str  # does-not-fit (kebab-case; configuration and waivers may use it instead of the code)
    family: str
    severity: Severity  # the default; configuration may re-level it
    summary: str  # one sentence, shown by `gpuplan rules` and as the first line of `gpuplan explain`
    approval: Approval = Approval.NONE
    rejects_because: str = ""  # REJECTS: the words a verdict uses ("The declared deployment <...>: ...")
    # An at-risk code (the estimate holds, its band's edge does not): the edge it names, as page one says it
    edge_missed: str = ""
    # The planner's judgement of the declared layout (a cheaper sound layout, a split it does not need): a verdict
    # on it states the plan's own first reason against the declared layout
    planner_judged: bool = False


CODES: dict[str, Code] = {
    entry.code: entry
    for entry in (
        Code("GP001", "yaml-syntax", "input", ERROR, "The file is not valid YAML."),
        Code("GP002", "duplicate-key", "input", ERROR, "A mapping defines the same key twice."),
        Code(
            "GP003", "input-too-large", "input", ERROR, "The file is larger, deeper or more aliased than a spec can be."
        ),
        Code("GP004", "unsupported-tag", "input", ERROR, "A value carries a YAML tag outside the safe core set."),
        Code("GP005", "invalid-encoding", "input", ERROR, "The file is not UTF-8."),
        Code("GP006", "empty-document", "input", ERROR, "The file holds no YAML document."),
        Code("GP007", "multiple-documents", "input", ERROR, "The file holds more than one YAML document."),
        Code("GP008", "root-not-mapping", "input", ERROR, "The top level of the file is not a mapping."),
        Code("GP009", "unreadable-file", "input", ERROR, "The file could not be read."),
        Code(
            "GP010",
            "internal-error",
            "input",
            ERROR,
            "gpuplan failed on this spec (a bug); the other specs of the run are still checked.",
        ),
        Code("GP011", "too-many-findings", "input", ERROR, "The file has more findings than are listed one by one."),
        Code(
            "GP012",
            "invalid-configuration",
            "input",
            ERROR,
            "The configuration file that governs the spec cannot be read or is invalid.",
        ),
        Code("GP020", "unknown-model", "input", ERROR, "The model id is not in the catalog."),
        Code(
            "GP021",
            "invalid-model-config",
            "input",
            ERROR,
            "The model's config.json is missing, unreadable, or has a dimension or format gpuplan cannot size.",
        ),
        Code("GP022", "unknown-gpu", "input", ERROR, "The GPU id is neither in the catalog nor defined in the spec."),
        Code(
            "GP023",
            "inconsistent-layout",
            "input",
            ERROR,
            "The declared GPU count is not a multiple of tensor x pipeline parallelism.",
        ),
        Code(
            "GP024",
            "inconsistent-workload",
            "input",
            ERROR,
            "The serving workload's lengths or load contradict each other or the context.",
        ),
        Code(
            "GP025",
            "conflicting-finetune-settings",
            "input",
            ERROR,
            "Fine-tuning settings that no framework runs together.",
        ),
        Code(
            "GP026",
            "engine-setting-mismatch",
            "input",
            ERROR,
            "A serving memory setting the chosen engine does not take, or takes only in a narrower range.",
        ),
        Code(
            "GP027",
            "inconsistent-serving-feature",
            "input",
            ERROR,
            "Multi-LoRA or speculative-decoding settings that contradict each other or the model.",
        ),
        Code(
            "GP100",
            "schema-violation",
            "schema",
            ERROR,
            "The spec breaks a schema constraint not covered by a more specific code.",
        ),
        Code("GP101", "unknown-key", "schema", ERROR, "A key that the spec format does not define."),
        Code("GP102", "wrong-type", "schema", ERROR, "A value of the wrong type."),
        Code("GP103", "out-of-range", "schema", ERROR, "A number outside its allowed range."),
        Code("GP104", "missing-key", "schema", ERROR, "A required key is missing."),
        Code("GP105", "invalid-choice", "schema", ERROR, "A value outside a closed list of choices."),
        Code(
            "GP106",
            "invalid-value",
            "schema",
            ERROR,
            "A string or list that breaks a length, pattern or format constraint.",
        ),
        Code(
            "GP107",
            "ambiguous-choice",
            "schema",
            ERROR,
            "A section must have exactly one (or at least one) of several keys.",
        ),
        Code(
            "GP201",
            "does-not-fit",
            "fit",
            ERROR,
            "The job needs more memory per GPU than the declared GPUs have.",
            Approval.REJECTS,
            "does not fit in GPU memory",
        ),
        Code(
            "GP202",
            "low-headroom",
            "fit",
            WARNING,
            "The job fits, but with less headroom than the configured margin.",
            Approval.NEEDS_CHANGE,
        ),
        Code(
            "GP203",
            "kv-capacity-exceeded",
            "fit",
            ERROR,
            "The declared concurrency x context needs more KV cache than the GPUs can hold.",
            Approval.REJECTS,
            "does not fit its KV cache",
        ),
        Code(
            "GP204",
            "full-finetune-fits-as-adapter",
            "fit",
            INFO,
            "A full fine-tune that needs several GPUs, while LoRA or QLoRA of the same model fits on one.",
        ),
        Code(
            "GP205",
            "activations-dominate",
            "fit",
            INFO,
            "Saved activations and loss temporaries make up most of the fine-tuning peak.",
        ),
        Code(
            "GP206",
            "context-exceeds-model",
            "fit",
            ERROR,
            "The job asks for a longer context than the model takes: the engine refuses to start.",
            Approval.REJECTS,
            "asks for a longer context than its model takes",
        ),
        Code(
            "GP207",
            "seq-len-beyond-trained-positions",
            "fit",
            WARNING,
            "Fine-tuning sequences are longer than the model's maximum position: it trains past what it learned.",
        ),
        Code(
            "GP208",
            "memory-at-risk",
            "fit",
            WARNING,
            "The fine-tuning estimate fits, but its pessimistic edge at plan.confidence does not.",
            Approval.NEEDS_CHANGE,
            edge_missed="its memory at the pessimistic edge does not fit",
        ),
        Code(
            "GP209",
            "kv-capacity-at-risk",
            "fit",
            WARNING,
            "The serving estimate holds the declared sequences, but the KV cache at its low edge at plan.confidence"
            " does not.",
            Approval.NEEDS_CHANGE,
            edge_missed="its KV cache at the low edge does not hold the sequences",
        ),
        Code(
            "GP210",
            "engine-version-not-modelled",
            "fit",
            WARNING,
            "serve.engine_version names a vLLM release outside those gpuplan models; it is estimated as the nearest.",
        ),
        Code(
            "GP211",
            "training-returns-kv-cache",
            "fit",
            WARNING,
            "The fine-tuned model returns its KV cache, which outlives each layer: memory training never reads.",
        ),
        Code(
            "GP301",
            "parallelism-needed",
            "parallelism",
            ERROR,
            "One GPU cannot hold the job, and no parallelism is declared.",
            Approval.REJECTS,
            "does not fit on one GPU and declares no parallelism",
        ),
        Code(
            "GP302",
            "parallelism-not-needed",
            "parallelism",
            WARNING,
            "Serving splits a replica one GPU holds, or fine-tuning shards model states each rank holds whole.",
        ),
        Code(
            "GP303",
            "tp-does-not-divide-heads",
            "parallelism",
            ERROR,
            "The tensor-parallel degree does not divide the attention (or KV) heads, or the padded vocabulary.",
            Approval.REJECTS,
            "cannot run as declared",
        ),
        Code(
            "GP304",
            "tp-exceeds-nvlink-domain",
            "parallelism",
            ERROR,
            "The tensor-parallel degree is larger than the NVLink domain (or one PCIe server of cards).",
            Approval.REJECTS,
            "cannot run as declared",
        ),
        Code(
            "GP305",
            "larger-gpu-instead-of-tp",
            "parallelism",
            INFO,
            "Tensor parallelism over smaller GPUs where one larger GPU per replica holds the job for less.",
        ),
        Code(
            "GP306",
            "model-parallelism-not-needed",
            "parallelism",
            WARNING,
            "Fine-tuning splits the model over more GPUs per replica than its GPU kind needs to hold the job.",
            Approval.NEEDS_CHANGE,
            planner_judged=True,
        ),
        Code(
            "GP310",
            "gradient-sync-bound",
            "form-factor",
            WARNING,
            "Multi-GPU fine-tuning on GPUs without NVLink (or beyond its domain) spends its steps syncing.",
            Approval.NEEDS_CHANGE,  # the planner's gradient_sync constraint: the declared layout is not sound
            planner_judged=True,
        ),
        Code(
            "GP311",
            "single-gpu-serving-on-sxm",
            "form-factor",
            INFO,
            "Single-GPU serving on an SXM module where the cheaper NVL or PCIe card of the same chip would do.",
        ),
        Code(
            "GP312",
            "multi-gpu-serving-without-nvlink",
            "form-factor",
            WARNING,
            "Tensor-parallel serving on GPUs that have no NVLink.",
        ),
        Code(
            "GP401",
            "category-mismatch",
            "benchmark",
            WARNING,
            "The declared benchmark category differs from the one the workload's shape implies.",
        ),
        Code(
            "GP402",
            "evidence-out-of-category",
            "benchmark",
            WARNING,
            "The benchmark evidence offered has no figure in the workload's category.",
        ),
        Code(
            "GP403",
            "ttft-slo-missed",
            "benchmark",
            ERROR,
            "The estimated time to first token exceeds the SLO.",
            Approval.REJECTS,
            "misses its time-to-first-token SLO",
        ),
        Code(
            "GP404",
            "tpot-slo-missed",
            "benchmark",
            ERROR,
            "The estimated time per output token exceeds the SLO.",
            Approval.REJECTS,
            "misses its time-per-output-token SLO",
        ),
        Code(
            "GP405",
            "slo-at-risk",
            "benchmark",
            WARNING,
            "The latency estimate meets the SLO, but its slow edge at plan.confidence does not.",
            Approval.NEEDS_CHANGE,
            edge_missed="the slow edge of its speed band misses it",
        ),
        Code(
            "GP406",
            "stream-outruns-deployment",
            "benchmark",
            ERROR,
            "A steady stream arrives faster than the deployment completes requests.",
            Approval.REJECTS,
            "cannot keep up with its request rate",
        ),
        Code(
            "GP407",
            "stream-at-risk",
            "benchmark",
            WARNING,
            "The deployment keeps up with a steady stream on the estimate, but not at the slow edge of its throughput"
            " band at plan.confidence.",
            Approval.NEEDS_CHANGE,
            edge_missed="the slow edge of its throughput band falls short of the request rate",
        ),
        Code(
            "GP501",
            "finetune-over-budget",
            "budget",
            ERROR,
            "The estimated fine-tuning cost exceeds `budget.finetune_total`.",
            Approval.REJECTS,
            "is over budget",
        ),
        Code(
            "GP502",
            "serve-over-budget",
            "budget",
            ERROR,
            "The monthly serving cost exceeds `budget.serve_monthly`.",
            Approval.REJECTS,
            "is over budget",
        ),
        Code(
            "GP503",
            "missing-price",
            "budget",
            WARNING,
            "No price is known for a GPU the spec uses.",
            Approval.NEEDS_INFORMATION,
        ),
        Code(
            "GP504",
            "stale-price",
            "budget",
            INFO,
            "A price the cost relies on is older than `thresholds.price_max_age_days` (default 90).",
            Approval.NEEDS_INFORMATION,
        ),
        Code(
            "GP505",
            "oversized-serving-gpu",
            "right-sizing",
            INFO,
            "A serving job uses a small part of its GPU while a cheaper layout meets memory and SLO.",
        ),
        Code(
            "GP506",
            "train-and-serve-same-gpu",
            "right-sizing",
            INFO,
            "Serving uses a small part of the fine-tuning GPU while a cheaper serving layout meets memory and SLO.",
        ),
        Code(
            "GP507",
            "cheaper-layout-available",
            "right-sizing",
            WARNING,
            "A sound layout costs materially less than the declared one (thresholds: the shares and `min_saving`).",
            Approval.NEEDS_CHANGE,
            planner_judged=True,
        ),
        Code(
            "GP508",
            "declared-outside-plan-limits",
            "right-sizing",
            WARNING,
            "The declared layout is outside the spec's own `plan` limits (its GPUs, vendors, GPU or node count).",
            Approval.NEEDS_CHANGE,
            planner_judged=True,
        ),
        Code(
            "GP601",
            "checkpoint-storage-exceeded",
            "storage",
            ERROR,
            "Kept checkpoints need more storage than declared.",
            Approval.REJECTS,
            "cannot keep its checkpoints in the declared storage",
        ),
        Code(
            "GP602",
            "long-run-without-checkpoints",
            "storage",
            WARNING,
            "A long fine-tuning run declares no checkpoints.",
        ),
        Code("GP701", "expired-waiver", "waivers", WARNING, "A waiver's expiry date has passed."),
        Code("GP702", "unused-waiver", "waivers", WARNING, "A waiver matches no finding."),
        Code(
            "GP801",
            "measured-exceeds-estimate",
            "verify",
            WARNING,
            "A real run used more memory than the estimate, beyond the tolerance (an error when it leaves no "
            "headroom).",
            Approval.NEEDS_CHANGE,
        ),
        Code(
            "GP802",
            "run-settings-differ",
            "verify",
            ERROR,
            "The run used other settings than the spec declares.",
            Approval.NEEDS_INFORMATION,  # the run does not test the declared plan
        ),
        Code(
            "GP803",
            "measured-capacity-below-declared",
            "verify",
            ERROR,
            "The serving engine holds fewer sequences of the declared context than the declared concurrency"
            " (a burst: than one, or than the estimate planned).",
            Approval.REJECTS,
            "holds fewer sequences in a real run than it declares",
        ),
        Code(
            "GP804",
            "run-failed",
            "verify",
            ERROR,
            "The run failed to start, or ran out of memory.",
            Approval.REJECTS,
            "failed in a real run",
        ),
        Code(
            "GP805",
            "incomplete-evidence",
            "verify",
            WARNING,
            "The run's evidence stops before it states what verify needs (a truncated log).",
        ),
        Code(
            "GP806",
            "measured-kv-pool-below-band",
            "verify",
            WARNING,
            "The serving engine's KV cache pool is below the low edge of the estimate's measured band at the plan's"
            " confidence.",
        ),
    )
}
_BY_NAME = {entry.name: entry for entry in CODES.values()}


def approval_of(code: str) -> Approval:
    """What a finding of ``code`` does to a verdict: input and schema problems (GP0xx, GP1xx) leave the
    decision without the information it needs, whatever the table says of the code."""
    if code.startswith(("GP0", "GP1")):
        return Approval.NEEDS_INFORMATION
    entry = CODES.get(code)
    return entry.approval if entry else Approval.NONE


def lookup(code_or_name: str) -> Code | None:
    """The table entry for a code (GP201, any case) or a name (does-not-fit), or None."""
    wanted = code_or_name.strip()
    return CODES.get(wanted.upper()) or _BY_NAME.get(wanted.lower())


# Characters typed for the digit they look like.
_LOOKALIKES = frozenset({("O", "0"), ("I", "1"), ("L", "1"), ("S", "5"), ("B", "8"), ("Z", "2")})


def suggestions(code_or_name: str) -> list[str]:
    """Up to three codes or names close to an unknown one, for "did you mean" messages: difflib's closest,
    and among equally close ones those that differ in the fewest places (a mistyped character, GP2O1 ->
    GP201, before a transposition, GP210)."""
    import difflib  # only on the error path

    wanted = code_or_name.strip()
    close = difflib.get_close_matches(wanted, list(CODES) + list(_BY_NAME), n=12, cutoff=0.6)

    def distance(choice: str) -> tuple[float, int, int]:
        ratio = difflib.SequenceMatcher(None, wanted, choice).ratio()
        pairs = list(zip(wanted.upper(), choice.upper(), strict=False))
        places = sum(a != b for a, b in pairs) + abs(len(wanted) - len(choice))
        # A letter typed for the digit it looks like (GP2O1 for GP201) is closer than another digit (GP211).
        unlike = sum(a != b and (a, b) not in _LOOKALIKES for a, b in pairs)
        return -ratio, places, unlike

    return sorted(close, key=distance)[:3]
