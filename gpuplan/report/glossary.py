"""The report's glossary: every technical term its first page uses, in words a finance reader signs.

The first page is written for someone who is not an ML engineer; where it cannot avoid a technical term,
the term is here. ``used_terms`` picks the entries a text uses (a test holds the first page of every
example to it: each technical term on it has an entry), and the report's last appendix lists them.
"""

from __future__ import annotations

import re

from gpuplan.decision.prices import MARKET_MEDIAN

# (term, definition), in the order the glossary lists them. A term matches whole words, case-insensitively.
GLOSSARY: tuple[tuple[str, str], ...] = (
    ("GPU", "The accelerator card the model runs on; rented by the hour from a cloud provider, or bought."),
    ("GPU-hour", "One GPU rented for one hour: the unit most cloud prices are quoted in."),
    (
        "replica",
        "One complete copy of the model serving requests, on one or more GPUs. Two replicas serve twice the "
        "load and keep the service up when one fails.",
    ),
    (
        "on demand",
        "Rented by the hour with no commitment, at the provider's list price; stopped at any time.",
    ),
    (
        MARKET_MEDIAN,
        "The middle of several providers' published on-demand prices, from gpuplan's catalog: a guide to "
        "the market, not an offer anyone has made. A vendor's quote replaces it before an order.",
    ),
    ("ceiling", "The most that may be spent under this approval; the estimate is expected to come in at or below it."),
    ("term", "The months the serving amount covers, from its start date to its end date."),
    ("one-off", "Paid once: a fine-tuning run is a single job, not a monthly cost."),
    (
        "fine-tuning",
        "Training an existing model further on the team's own data: a job that runs once for a number of hours.",
    ),
    ("serving", "Running the model for users around the clock; paid per month."),
    (
        "sound layout",
        "A layout that fits in memory with the configured margin to spare, meets the latency targets even at "
        "the slow end of the speed estimate's measured error, and breaks none of the plan's limits. The budget "
        "is checked separately.",
    ),
    ("layout", "How many GPUs of which kind a job runs on, and how the work is split across them."),
    (
        "latency target",
        "The response times the service promises (its SLO): how long until the first word of an answer "
        "appears, and between words after that.",
    ),
    ("SLO", "Service-level objective: the response time the service commits to (see latency target)."),
    (
        "stress test",
        "The same layout estimated again with one assumption changed: twice the users, longer requests, "
        "prices 20% up or down, the speed and memory estimates at the ends of their measured error.",
    ),
    (
        "error band",
        "How far gpuplan's estimates have been from measured runs; the slow end is the estimate at its most "
        "pessimistic within that band.",
    ),
    (
        "headroom",
        "Memory left free on each GPU; too little and a longer request or a software update stops the job.",
    ),
    ("N+1", "One spare replica beyond what the load needs, so a failure does not stop the service."),
    (
        "KV cache",
        "The GPU memory each request in flight keeps of the text so far; it grows with the length of the "
        "requests and with how many run at once.",
    ),
    ("quote", "A price a named vendor has offered, with its date and reference."),
    (
        "instance-hour",
        "One hour of a whole server (an instance) with several GPUs: the unit some vendors quote and bill in, "
        "so a layout that uses part of an instance pays for all of it.",
    ),
    ("materiality", "The smallest saving worth a change of layout (a share of the cost and an amount)."),
    # The training settings a required change of a fine-tune may name (report.page_one.SETTING_WORDS).
    (
        "activation checkpointing",
        "A training setting that saves GPU memory by recomputing intermediate results instead of keeping "
        "them, for about a third more computing time; off, a run is faster where memory allows.",
    ),
    ("fused loss", "A training setting that scores the model's output in small pieces, to save GPU memory."),
    (
        "memory sharding",
        "Splitting the training state across the GPUs instead of keeping a full copy on each: less memory on "
        "each GPU, more traffic between them.",
    ),
    (
        "micro-batch",
        "How many training examples each GPU works on at once: smaller uses less memory, larger runs faster.",
    ),
    (
        "gradient accumulation",
        "Adding several micro-batches together before each update, so that a smaller micro-batch keeps the same "
        "training batch.",
    ),
)

_PATTERNS = tuple(
    (term, definition, re.compile(r"(?<![\w-])" + re.escape(term) + r"s?(?![\w-])", re.IGNORECASE))
    for term, definition in GLOSSARY
)

# Engineering words the first page must not use unless a glossary entry explains them (a test holds every
# example to this).
JARGON = (
    "TTFT",
    "TPOT",
    "tensor_parallel",
    "pipeline_parallel",
    "tensor parallel",
    "ZeRO",
    "FSDP",
    "KV",
    "MFU",
    "YAML",
    "GiB",
    "micro-batch",
    "activation checkpointing",
    "sharding",
)


def used_terms(text: str) -> list[tuple[str, str]]:
    """The glossary entries ``text`` uses, in the glossary's order."""
    return [(term, definition) for term, definition, pattern in _PATTERNS if pattern.search(text)]
