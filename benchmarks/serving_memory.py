"""Serving memory against engine startup logs gpuplan has never seen: an out-of-sample check.

    python benchmarks/serving_memory.py [--format text|json] [--check]

``benchmarks/data/vllm_published_logs.yaml`` holds vLLM startup logs that users and maintainers posted in
public threads, each with the release that ran (``serve.engine_version``), and
``benchmarks/data/engine_startup_logs.yaml`` SGLang and TensorRT-LLM startup logs. gpuplan's serving memory
constants come from other logs (the v0.19 H100 logs of ``vllm_startup_logs.yaml``) and from the engines'
code, so every figure here is out of sample (keep it that way: a log a constant is read from belongs in
accuracy.py's data instead).

Each spec goes through the path ``gpuplan estimate`` takes (``accuracy.estimate``). The figure compared is
the KV cache the engine allocates on one GPU, the room its budget leaves after the weights, the activation
peak and the runtime: gpuplan's ``kv_pool_bytes`` against the log's available KV memory, or, where the log
prints only tokens, ``kv_cache_tokens`` against its token count. The error is (estimate - measured) /
measured: positive means gpuplan promises more KV cache than the engine gives, the dangerous side (fewer
sequences, or an engine that refuses to start). The logs of starts that failed are listed with gpuplan's
verdict: whether it says the engine loads (the KV cache holds one sequence of the full context), at the
estimate and at the pessimistic edge of the serving band (benchmarks/bands.py); ``--check`` exits 1 when
gpuplan says a failed start loads at the edge.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import GIB, job_estimate

DATA = Path(__file__).resolve().parent / "data"
VLLM_LOGS = DATA / "vllm_published_logs.yaml"
ENGINE_LOGS = DATA / "engine_startup_logs.yaml"


@dataclass(frozen=True)
class Scored:
    record: str
    engine: str  # "vLLM v0.6.4", "SGLang", ...
    figure: str  # "kv pool GiB" or "kv tokens"
    measured: float
    estimate: float
    source: str  # the thread or page the log was posted in

    @property
    def ratio(self) -> float:
        """measured / estimate: the serving band's unit (below 1: gpuplan promised too much)."""
        return self.measured / self.estimate

    @property
    def error(self) -> float:
        return (self.estimate - self.measured) / abs(self.measured) * 100


@dataclass(frozen=True)
class FailedStart:
    record: str
    error: str
    loads: bool  # gpuplan's estimate says the engine starts
    pool_gib: float  # gpuplan's KV pool on the tightest GPU
    needed_gib: float  # one sequence of the full context
    codes: tuple[str, ...]


def serve_estimate(record: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return job_estimate(record, "serve")


def source_label(source: str) -> str:
    """A record's source in a few characters: 'vllm#10517' for a GitHub thread, the repository for a file in
    one, else the web host."""
    url = source.split(" ")[0]
    parts = url.split("/")
    if "github.com" in url and len(parts) > 6 and parts[5] in ("issues", "pull"):
        return f"{parts[4]}#{parts[6]}"
    if "github.com" in url and len(parts) > 4:
        return parts[4]
    return parts[2] if len(parts) > 2 else url


def engine_name(record: dict[str, Any], serve: dict[str, Any]) -> str:
    if record.get("engine", "vllm") != "vllm":
        return {"sglang": "SGLang", "trtllm": "TensorRT-LLM"}[record["engine"]]
    return serve["memory_engine"].split(" (")[0]


def compare(record: dict[str, Any], serve: dict[str, Any]) -> Scored | None:
    """The record's KV pool (GiB) or, failing that, its KV tokens, beside gpuplan's."""
    measured, name = record["measured"], engine_name(record, serve)
    source = source_label(record["source"])
    if "kv_pool_gib" in measured:
        pool = serve["kv_pool_bytes"] / GIB
        return Scored(record["id"], name, "kv pool GiB", measured["kv_pool_gib"], pool, source)
    if "kv_tokens" in measured:
        return Scored(record["id"], name, "kv tokens", measured["kv_tokens"], serve["kv_cache_tokens"], source)
    return None


def not_expressible() -> list[dict[str, Any]]:
    return yaml.safe_load(VLLM_LOGS.read_text(encoding="utf-8")).get("not_expressible", [])


def score() -> tuple[list[Scored], list[FailedStart]]:
    scored: list[Scored] = []
    failed: list[FailedStart] = []
    for path in (VLLM_LOGS, ENGINE_LOGS):
        for record in yaml.safe_load(path.read_text(encoding="utf-8"))["records"]:
            if "spec" not in record:  # an engine log that tests the reader only (no settings to estimate)
                continue
            serve, codes = serve_estimate(record)
            outcome = record.get("outcome", "started")
            if outcome.startswith("failed"):
                failed.append(
                    FailedStart(
                        record["id"],
                        outcome,
                        bool(serve["loads"]),
                        serve["kv_pool_bytes"] / GIB,
                        serve["kv_bytes_per_sequence"] / GIB if "kv_bytes_per_sequence" in serve else 0.0,
                        tuple(codes),
                    )
                )
            if (row := compare(record, serve)) is not None and row.measured > 0:
                scored.append(row)
    return scored, failed


def summary(rows: list[Scored]) -> dict[str, Any]:
    errors = [row.error for row in rows]
    worst = max(rows, key=lambda row: row.error)
    return {
        "n": len(rows),
        "median_abs_pct": round(statistics.median(abs(e) for e in errors), 1),
        "signed_median_pct": round(statistics.median(errors), 1),
        "over_share": round(sum(1 for e in errors if e > 0) / len(errors), 3),
        "worst_over": {"record": worst.record, "error_pct": round(worst.error, 1)} if worst.error > 0 else None,
    }


def render_text(scored: list[Scored], failed: list[FailedStart]) -> str:
    out = [f"{'record':<46}{'engine':<16}{'figure':<13}{'measured':>12}{'estimate':>12}{'error':>9}"]
    for row in scored:
        out.append(
            f"{row.record:<46}{row.engine:<16}{row.figure:<13}{row.measured:>12,.2f}{row.estimate:>12,.2f}"
            f"{row.error:>+8.1f}%"
        )
    part = summary(scored)
    worst = part["worst_over"]
    out += [
        "",
        f"Out of sample ({part['n']} startup logs; positive = gpuplan promises more KV cache than the engine gave):",
        f"  median |error| {part['median_abs_pct']:.1f}%, signed median {part['signed_median_pct']:+.1f}%,"
        f" over {part['over_share']:.0%}, worst over "
        + (f"{worst['record']} {worst['error_pct']:+.1f}%" if worst else "-"),
        "",
        "Starts that failed, and gpuplan's verdict:",
    ]
    for start in failed:
        said = "LOADS (gpuplan misses this failure)" if start.loads else "does not load"
        findings = ", ".join(c for c in start.codes if c in ("GP201", "GP203", "GP209", "GP301")) or "none"
        out.append(f"  {start.record}: {said}, KV pool {start.pool_gib:,.2f} GiB (findings: {findings}); {start.error}")
    out += ["", "Logs whose settings cannot be known (not compared):"]
    out += [f"  {item['id']}: {' '.join(item['reason'].split())}" for item in not_expressible()]
    return "\n".join(out)


def report(scored: list[Scored], failed: list[FailedStart]) -> dict[str, Any]:
    return {
        "out_of_sample": True,
        "records": [
            {
                "id": row.record,
                "engine": row.engine,
                "figure": row.figure,
                "measured": row.measured,
                "estimate": round(row.estimate, 3),
                "error_pct": round(row.error, 1),
            }
            for row in scored
        ],
        "summary": summary(scored),
        "failed_starts": [
            {"id": start.record, "error": start.error, "loads": start.loads, "codes": list(start.codes)}
            for start in failed
        ],
        "not_expressible": [{"id": item["id"], "reason": item["reason"]} for item in not_expressible()],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--check", action="store_true", help="exit 1 when gpuplan says a failed start loads")
    args = parser.parse_args(argv)
    scored, failed = score()
    print(json.dumps(report(scored, failed), indent=2) if args.format == "json" else render_text(scored, failed))
    return 1 if args.check and any(start.loads for start in failed) else 0


if __name__ == "__main__":
    sys.exit(main())
