"""gpuplan's serving speed under stated load shapes, against published runs it was never fitted on.

    python benchmarks/load_accuracy.py [--records]

Each record of ``benchmarks/data/published_load_runs.yaml`` (closed-loop clients, steady Poisson streams,
bursts; vLLM, SGLang, TensorRT-LLM and NIM servers; sources listed in the file) is stated as a gpuplan spec
here (``spec_for``: the model, GPU, parallelism, engine, lengths, arrival and endpoint the source gives)
and estimated through the path users run (resolve -> analyse). None of gpuplan's figures was fitted on
these sources (the speed calibration uses others; the front-end figures come from two vLLM pull
requests), so every error is out of sample: leaving a source out changes nothing.

Per metric and arrival shape it prints the records, the median absolute error, the bias (signed median,
estimate / measured - 1), the share on the dangerous side (a latency below the measurement, a throughput
above it) and the worst error, beside the targets of the speed model: steady TPOT median <= 10%, |bias|
<= 8%; TTFT median <= 25%, |bias| <= 15%; burst throughput median <= 25%, |bias| <= 15%.
Records whose setup a spec cannot state are listed with the reason, never dropped silently.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuplan.analysis import analyse  # noqa: E402
from gpuplan.loader import load_bytes  # noqa: E402
from gpuplan.spec import resolve  # noqa: E402
from gpuplan.validate import validate  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "published_load_runs.yaml"

# Models the catalog lacks, from their Hugging Face config.json (hidden_size, intermediate_size,
# num_attention_heads, num_key_value_heads, head_dim, num_hidden_layers, vocab_size, tie_word_embeddings;
# MoE: num_experts, num_experts_per_tok, moe_intermediate_size).
ARCHITECTURES: dict[str, dict[str, Any]] = {
    # Qwen/QwQ-32B-Preview config.json (Qwen2.5-32B: q/k/v biases)
    "Qwen/QwQ-32B-Preview": {
        "layers": 64, "hidden": 5120, "heads": 40, "kv_heads": 8, "intermediate": 27648, "vocab": 152064,
        "attention_bias": True, "max_position": 32768,
    },
    # Qwen/Qwen3-0.6B config.json (tied embeddings)
    "Qwen/Qwen3-0.6B": {
        "layers": 28, "hidden": 1024, "heads": 16, "kv_heads": 8, "head_dim": 128, "intermediate": 3072,
        "vocab": 151936, "qk_norm": True, "tie_embeddings": True, "max_position": 40960,
    },
    # Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 config.json (128 experts, 8 per token, width 1536)
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": {
        "layers": 94, "hidden": 4096, "heads": 64, "kv_heads": 4, "head_dim": 128, "intermediate": 12288,
        "vocab": 151936, "qk_norm": True, "experts": 128, "experts_per_token": 8, "expert_intermediate": 1536,
        "max_position": 262144,
    },
}  # fmt: skip
CATALOG_MODELS = {
    "Qwen/Qwen3-8B": "qwen3-8b",
    "Qwen/Qwen3-14B": "qwen3-14b",
    "Qwen/Qwen3-14B-FP8": "qwen3-14b",  # the Qwen3-14B architecture, fp8 weights (the record's quantization)
    "Qwen/Qwen3-32B": "qwen3-32b",
    "Qwen/Qwen3-32B-FP8": "qwen3-32b",  # the Qwen3-32B architecture, fp8 weights (the record's quantization)
    "Qwen/Qwen2.5-32B": "qwen2.5-32b",
    "openai/gpt-oss-20b": "gpt-oss-20b",
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "meta-llama/Meta-Llama-3-8B-Instruct": "llama-3-8b",
    "meta-llama/Meta-Llama-3-70B-Instruct": "llama-3-70b",
    "meta-llama/Llama-3.3-70B-Instruct": "llama-3.3-70b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "deepseek-ai/DeepSeek-R1-0528": "deepseek-v3",  # the DeepSeek-V3 architecture
    # NVIDIA's NVFP4 checkpoint of DeepSeek-R1-0528 (ModelOpt): the same model, its linears in FP4 (the record's
    # quantization, nvfp4)
    "nvidia/DeepSeek-R1-0528-FP4-v2": "deepseek-v3",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3",
    # the Nemotron 3 Nano architecture, its checkpoint in FP8 (the record's quantization)
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8": "nemotron-3-nano-30b-a3b",
}
# The sources' GPU names; a form factor the source does not state is the SXM board cloud providers rent.
GPUS = {
    "h100": "h100-sxm",
    "h100-sxm": "h100-sxm",
    "h100-pcie": "h100-pcie",
    "h100-nvl": "h100-nvl",
    "h200": "h200-sxm",
    "b200": "b200-hgx",
    "a100": "a100-sxm-80gb",
    "a100-80gb-pcie": "a100-pcie-80gb",
    "l40s": "l40s",
    "a40": "a40",
}
ENGINES = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm", "nim": "generic"}
DANGEROUS_LOW = {"ttft_ms", "tpot_ms"}  # a latency estimated below the measurement is the dangerous side
TARGETS = {  # (metric, arrival) -> (median |error|, |bias|), issue 29
    ("tpot_ms", "steady"): (0.10, 0.08),
    ("ttft_ms", "closed-loop"): (0.25, 0.15),
    ("ttft_ms", "steady"): (0.25, 0.15),
    ("ttft_ms", "burst"): (0.25, 0.15),
    ("output_tokens_per_s", "burst"): (0.25, 0.15),
}


@dataclass(frozen=True)
class Result:
    record: str
    source: str
    arrival: str
    metric: str  # ttft_ms | tpot_ms | output_tokens_per_s | requests_per_s
    statistic: str  # mean | median | p90 | whole run
    measured: float
    estimated: float

    @property
    def error(self) -> float:
        return self.estimated / self.measured - 1

    @property
    def dangerous(self) -> bool:
        return self.error < 0 if self.metric in DANGEROUS_LOW else self.error > 0


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def lengths(record: dict[str, Any]) -> tuple[float, float] | None:
    """(mean prompt, mean output) tokens: stated, or the run's totals over its prompts, or nominal."""
    prompts = _number(record["load"].get("num_prompts"))
    out: list[float] = []
    for key in ("input_tokens", "output_tokens"):
        given = record[key]
        mean = _number(given.get("mean"))
        if mean is None and _number(given.get("total")) and prompts:
            mean = float(given["total"]) / prompts
        if mean is None:
            mean = _number(given.get("nominal"))
        if mean is None:
            return None
        out.append(mean)
    return out[0], out[1]


def spec_for(record: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """(the gpuplan spec stating the record's run, or None; why not)."""
    model_id = record["model"].split(" ")[0]
    if record.get("quality") == "suspect":
        return None, "suspect record (see its notes)"
    if not isinstance(record.get("tensor_parallel"), int):
        return None, "tensor parallelism not stated"
    if record["gpu"] not in GPUS:
        return None, f"GPU {record['gpu']} not mapped"
    shape = lengths(record)
    if shape is None:
        return None, "prompt or output length not stated"
    if model_id in ARCHITECTURES:
        model: dict[str, Any] = {"architecture": ARCHITECTURES[model_id], "dtype": "bf16"}
    elif CATALOG_MODELS.get(model_id):
        model = {"id": CATALOG_MODELS[model_id]}
    else:
        return None, f"model {model_id} is not in the catalog nor described here (hybrid or unknown dimensions)"
    prompt, output = shape
    load = record["load"]
    arrival = load["arrival"]
    concurrency = load.get("max_concurrency") if arrival == "closed-loop" else None
    if arrival == "burst":
        concurrency = int(load["num_prompts"])
    if arrival == "steady":
        concurrency = load.get("max_concurrency") or int(load["num_prompts"])
    if not concurrency:
        return None, "concurrency not stated"
    quantization = str(record.get("quantization", "none")).split(" ")[0]
    client = str(load.get("client", ""))
    endpoint = "chat" if ("chat" in client or "AIPerf" in client) else "completions"
    output_tokens = max(1, round(output))
    serve: dict[str, Any] = {
        "context": math.ceil(prompt) + output_tokens,
        "output_tokens": output_tokens,
        "concurrency": int(concurrency),
        "engine": ENGINES[record["engine"]],
        "arrival": arrival,
        "endpoint": endpoint,
        "hardware": {
            "gpu": GPUS[record["gpu"]],
            "count": int(record["gpus"]),
            "tensor_parallel": int(record["tensor_parallel"]),
        },
    }
    if isinstance(record.get("pipeline_parallel"), int) and record["pipeline_parallel"] > 1:
        serve["hardware"]["pipeline_parallel"] = record["pipeline_parallel"]
    if record.get("expert_parallel"):
        serve["hardware"]["expert_parallel"] = int(record["expert_parallel"])
    if quantization in ("fp8", "nvfp4"):
        serve["quantization"] = quantization
    kv_dtype = str(record.get("kv_dtype", "unknown")).split(" ")[0]
    if kv_dtype in ("bf16", "fp16", "fp8"):  # stated by the source (unknown: the engine's default, auto)
        serve["kv_cache_dtype"] = kv_dtype
    if arrival == "steady":
        serve["rate_rps"] = float(load["rate_rps"])
    # Estimated at the release that ran, where the record states it plainly (not a client's version or a guess):
    # the release decides the engine's startup memory, so its KV cache and the sequences a burst runs at once.
    version = re.fullmatch(r"v?(\d+\.\d+\.\d+)(\.post\d+)?", str(record.get("engine_version", "")).strip())
    if record["engine"] == "vllm" and version:
        serve["engine_version"] = version.group(1)
    server = record.get("server") or {}  # limits the serve command set, as the spec states them
    if "max_num_seqs" in server:
        serve["max_sequences"] = int(server["max_num_seqs"])
    if "max_num_batched_tokens" in server:
        serve["max_batched_tokens"] = int(server["max_num_batched_tokens"])
    return {"version": 1, "name": record["id"][:120], "model": model, "serve": serve}, ""


def measured_figures(record: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(metric, statistic, value) the record measured and the speed model states, less those the record
    does not score (``not_scored``: read to identify a setting the source leaves unstated)."""
    measured, gpus = record["measured"], int(record["gpus"])
    unscored = record.get("not_scored") or {}
    out: list[tuple[str, str, float]] = []
    for metric in ("ttft_ms", "tpot_ms"):
        if metric in unscored:
            continue
        figures = measured.get(metric) or (measured.get("itl_ms") if metric == "tpot_ms" else None) or {}
        for statistic in ("mean", "median", "p90", "unspecified"):
            value = _number(figures.get(statistic)) if isinstance(figures, dict) else None
            if value:
                out.append((metric, "mean" if statistic == "unspecified" else statistic, value))
    for metric in ("output_tokens_per_s", "requests_per_s"):
        if metric in unscored:
            continue
        value = _number(measured.get(metric))
        per_gpu = _number(measured.get(f"{metric}_per_gpu"))
        if value is None and per_gpu is not None:
            value = per_gpu * gpus
        if value:
            out.append((metric, "whole run", value))
    return out


def finite_run(speed: Any, record: dict[str, Any], figure: float, metric: str) -> float:
    """A steady run's throughput as its benchmark measures it: ``num_prompts`` requests sent at the rate and
    divided by the run's duration, which also holds the last request's own latency (TTFT + the rest of its
    output at TPOT) - below the steady state's rate for a short run (vLLM's benchmark_serving: completed /
    duration)."""
    prompts = _number(record["load"].get("num_prompts"))
    rate = _number(record["load"].get("rate_rps"))
    if record["load"]["arrival"] != "steady" or not prompts or not rate or speed.saturated:
        return figure
    output = max(1.0, speed.tokens_per_s / speed.requests_per_s) if speed.requests_per_s else 1.0
    duration = prompts / rate + speed.ttft_s + (output - 1) * speed.tpot_s
    requests = prompts / duration
    return requests if metric == "requests_per_s" else requests * output


# Clients that start a closed loop all at once: `vllm bench serve` (and benchmark_serving.py before it) creates
# every request's task at a rate of inf and lets ``max_concurrency`` of them through a semaphore, so the first
# ``max_concurrency`` requests reach the server together (vllm/benchmarks/serve.py, ``limited_request_func``).
ALL_AT_ONCE_CLIENTS = ("vllm bench serve", "benchmark_serving")


def closed_loop_start(record: dict[str, Any]) -> tuple[int, int] | None:
    """(clients, prompts) of a finite closed-loop run whose client starts its clients together, when it
    states both and runs more prompts than clients; None otherwise (the steady state alone is compared)."""
    load = record["load"]
    clients, prompts = _number(load.get("max_concurrency")), _number(load.get("num_prompts"))
    if load["arrival"] != "closed-loop" or not clients or not prompts or prompts <= clients:
        return None
    if not any(name in str(load.get("client", "")) for name in ALL_AT_ONCE_CLIENTS):
        return None
    return int(clients), int(prompts)


def run_mean_ttft(steady_mean: float, burst_mean: float, clients: int, prompts: int) -> float:
    """A finite closed loop's mean TTFT over its prompts: its first ``clients`` requests arrive together
    (a burst of that many on an idle replica), the rest as earlier ones finish (the steady state)."""
    return (clients * burst_mean + (prompts - clients) * steady_mean) / prompts


ESTIMATES = {
    ("ttft_ms", "mean"): lambda s: s.ttft_s * 1000,
    ("ttft_ms", "median"): lambda s: s.ttft_median_s * 1000,
    ("ttft_ms", "p90"): lambda s: s.ttft_p90_s * 1000,
    ("tpot_ms", "mean"): lambda s: s.tpot_s * 1000,
    ("tpot_ms", "median"): lambda s: s.tpot_s * 1000,
    ("output_tokens_per_s", "whole run"): lambda s: s.tokens_per_s,
    ("requests_per_s", "whole run"): lambda s: s.requests_per_s,
}


def evaluate(records: list[dict[str, Any]], baseline: bool = False) -> tuple[list[Result], list[tuple[str, str]]]:
    """Each record's errors; ``baseline``: as gpuplan estimated before load shapes (every run a closed loop
    at its concurrency, no front end), for comparison."""
    results: list[Result] = []
    skipped: list[tuple[str, str]] = []
    for record in records:
        spec_data, why = spec_for(record)
        if spec_data is None:
            skipped.append((record["id"], why))
            continue
        arrival = spec_data["serve"]["arrival"]
        if baseline:
            spec_data["serve"].update(arrival="closed-loop", endpoint="offline")
            spec_data["serve"].pop("rate_rps", None)
        document = load_bytes(record["id"], yaml.safe_dump(spec_data, sort_keys=False).encode())
        problems = list(document.findings) + list(validate(document))
        spec, findings = resolve(document, ROOT) if not problems else (None, problems)
        if spec is None:
            skipped.append((record["id"], f"the stated spec does not resolve: {findings[0].message}"))
            continue
        serve = analyse(spec).serve
        assert serve is not None
        if not serve.loads:
            skipped.append((record["id"], f"gpuplan says the engine cannot start: {serve.not_loaded_reason}"))
            continue
        start = None if baseline else closed_loop_start(record)
        burst_mean = _burst_mean_ttft(spec_data, start[0], record["id"]) if start else None
        source = record["id"].split("-")[0]
        for metric, why in (record.get("not_scored") or {}).items():
            skipped.append((record["id"], f"{metric}: not scored, {why}"))
        for metric, statistic, value in measured_figures(record):
            if (metric, statistic) not in ESTIMATES:
                continue  # a statistic the speed model does not state (TPOT's p90)
            estimate = ESTIMATES[(metric, statistic)](serve.speed)
            if metric in ("output_tokens_per_s", "requests_per_s"):
                estimate = finite_run(serve.speed, record, estimate, metric)
            if (metric, statistic) == ("ttft_ms", "mean") and start and burst_mean is not None:
                estimate = run_mean_ttft(estimate, burst_mean, *start)
            if math.isfinite(estimate):
                results.append(Result(record["id"], source, arrival, metric, statistic, value, estimate))
            else:
                skipped.append((record["id"], f"{metric}: gpuplan says the stream saturates the deployment"))
    return results, skipped


def _burst_mean_ttft(spec_data: dict[str, Any], clients: int, name: str) -> float | None:
    """The mean TTFT (ms) of ``clients`` of the record's requests arriving together on an idle replica."""
    burst = {**spec_data, "serve": {**spec_data["serve"], "arrival": "burst", "concurrency": clients}}
    document = load_bytes(name, yaml.safe_dump(burst, sort_keys=False).encode())
    spec, _ = resolve(document, ROOT)
    serve = analyse(spec).serve if spec is not None else None
    return serve.speed.ttft_s * 1000 if serve is not None and serve.loads else None


@dataclass(frozen=True)
class Scores:
    """How a group of figures came out: the error's median size and sign, the share on the dangerous side
    and the worst."""

    median_abs: float
    bias: float  # the signed median
    dangerous: float
    worst: float

    @classmethod
    def of(cls, group: list[Result]) -> Scores:
        errors = [r.error for r in group]
        return cls(
            statistics.median(abs(e) for e in errors),
            statistics.median(errors),
            sum(r.dangerous for r in group) / len(group),
            max(errors, key=abs),
        )

    def cells(self) -> str:
        """The four figures as a Markdown table's cells."""
        return f"{self.median_abs:.0%} | {self.bias:+.0%} | {self.dangerous:.0%} | {self.worst:+.0%}"


def table(results: list[Result]) -> list[str]:
    lines = [
        "| metric | arrival | records | sources | median abs error | bias | share dangerous | worst | target |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    groups: dict[tuple[str, str], list[Result]] = {}
    for result in results:
        groups.setdefault((result.metric, result.arrival), []).append(result)
    for (metric, arrival), group in sorted(groups.items()):
        scores = Scores.of(group)
        target = TARGETS.get((metric, arrival))
        verdict = ""
        if target:
            met = scores.median_abs <= target[0] and abs(scores.bias) <= target[1]
            verdict = f"{target[0]:.0%} / ±{target[1]:.0%}: {'met' if met else 'NOT met'}"
        sources = len({r.source for r in group})
        lines.append(f"| {metric} | {arrival} | {len(group)} | {sources} | {scores.cells()} | {verdict} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", action="store_true", help="print every record's errors too")
    parser.add_argument(
        "--baseline", action="store_true", help="every run as a closed loop without a front end (before load shapes)"
    )
    args = parser.parse_args(argv)
    records = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    results, skipped = evaluate(records, args.baseline)
    print("\n".join(table(results)))
    if args.records:
        print()
        for r in results:
            print(
                f"{r.record:60} {r.metric:20} {r.statistic:9} {r.measured:12,.2f} {r.estimated:12,.2f} {r.error:+.0%}"
            )
    print("\n".join(listed(f"{len(skipped)} records or figures not compared:", skipped)))
    return 0


def listed(heading: str, items: list[tuple[str, str]]) -> list[str]:
    """A heading, then each (record, why) left out on a line of its own."""
    return ["", heading, *(f"  {name}: {why}" for name, why in items)]


if __name__ == "__main__":
    sys.exit(main())
