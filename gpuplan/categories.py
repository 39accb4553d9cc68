"""The seed's benchmark category of a serving workload, derived from its shape (one source for the rules that judge
``serve.category`` and ``serve.evidence`` and for the report that sets the evidence beside the estimate)."""

from __future__ import annotations

from gpuplan.config import Settings
from gpuplan.spec import Serve


def derive_category(job: Serve, settings: Settings) -> tuple[str, str]:
    """(category, reason) from the workload's shape; thresholds in ``thresholds`` of the config."""
    prompt = max(1, job.context - job.output_tokens)
    if prompt >= settings.long_context_min_prompt:
        return "long-context", f"{prompt:,}-token prompts; long-context from {settings.long_context_min_prompt:,}"
    if job.concurrency >= settings.high_throughput_min_concurrency:
        return "high-throughput", (
            f"{job.concurrency} sequences in flight; high-throughput from {settings.high_throughput_min_concurrency}"
        )
    return "short-fast", (
        f"{prompt:,}-token prompts and {job.concurrency} sequences in flight; "
        f"below {settings.long_context_min_prompt:,} tokens and {settings.high_throughput_min_concurrency} sequences"
    )
