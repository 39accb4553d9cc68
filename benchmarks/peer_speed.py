"""gpuplan beside NVIDIA's aiconfigurator, on the same inputs: published closed-loop serving runs.

    python benchmarks/peer_speed.py            # the side-by-side table, from the stored peer figures
    python benchmarks/peer_speed.py --run      # run aiconfigurator again (pip install aiconfigurator) and store
    python benchmarks/peer_speed.py --check    # the stored figures answer today's records and inputs

aiconfigurator (``aiconfigurator cli estimate --estimate-mode agg``) prices an engine's forward steps from
operations measured on the GPU (its "silicon" database, per engine release) and states a deployment's TTFT,
TPOT and throughput at a batch size: a closed loop of that many clients. So the records compared here are
the closed-loop runs of ``benchmarks/data/published_load_runs.yaml`` (bursts and steady streams have no
counterpart there), each stated to both tools alike: the model, the GPU, the engine, the tensor
parallelism, the clients and the run's mean prompt and output lengths (``load_accuracy.lengths``). A record
aiconfigurator cannot state (a model it does not bundle, a GPU or engine it has no measurements of) is
listed with the reason. gpuplan's figures are ``load_accuracy``'s own (its finite-run TTFT included), so
both tools' errors are out of sample on the same runs.

aiconfigurator's figures are stored in ``benchmarks/data/peer_aiconfigurator.yaml`` with its version, its
database's engine release and the command line that gave each, so that the table needs no peer installed;
``--check`` (run by the test suite) fails when a record or its inputs changed since they were stored.
"""

from __future__ import annotations

import argparse
import datetime
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import load_accuracy  # noqa: E402
from load_accuracy import Result, Scores  # noqa: E402

from gpuplan.catalog import model_catalog  # noqa: E402

PEER_DATA = ROOT / "benchmarks" / "data" / "peer_aiconfigurator.yaml"

# The GPUs aiconfigurator 0.12 has measured operations of (aiconfigurator_core/systems/data/<system>/): its
# h100_pcie system has no measurements, so a PCIe record is not stated to it.
SYSTEMS = {
    "h100-sxm": "h100_sxm",
    "h200-sxm": "h200_sxm",
    "a100-sxm-80gb": "a100_sxm",
    "b200-hgx": "b200_sxm",
    "l40s": "l40s",
}
BACKENDS = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm"}  # NIM does not say which engine it runs
# Model configs aiconfigurator bundles (aiconfigurator_core/model_configs/): the record's model, or the bundled
# model of the same architecture (Llama 3.3 70B is Llama 3.1 70B's architecture, retrained; DeepSeek-R1-0528 is
# DeepSeek-R1's; Qwen3-235B-A22B-Instruct-2507 is Qwen3-235B-A22B's, with the same FP8 block quantization).
MODELS = {
    "Qwen/Qwen3-8B": "Qwen/Qwen3-8B",
    "Qwen/Qwen3-32B": "Qwen/Qwen3-32B",
    "Qwen/Qwen3-0.6B": "Qwen/Qwen3-0.6B",
    "openai/gpt-oss-120b": "openai/gpt-oss-120b",
    "openai/gpt-oss-20b": "openai/gpt-oss-20b",
    "meta-llama/Llama-3.3-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
    "deepseek-ai/DeepSeek-R1-0528": "deepseek-ai/DeepSeek-R1",
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": "Qwen/Qwen3-235B-A22B-FP8",
}
FIGURES = {  # aiconfigurator's printed line -> the metric it states
    "TTFT": "ttft_ms",
    "TPOT": "tpot_ms",
    "tokens/s": "output_tokens_per_s",
    "seq/s": "requests_per_s",
}
# Which of the record's statistics each of aiconfigurator's figures is compared with: it states one TTFT and
# one TPOT of a steady batch, set beside the record's mean and median alike (as gpuplan's TPOT is).
STATISTICS = {
    "ttft_ms": ("mean", "median"),
    "tpot_ms": ("mean", "median"),
    "output_tokens_per_s": ("whole run",),
    "requests_per_s": ("whole run",),
}


@dataclass(frozen=True)
class PeerInput:
    """What aiconfigurator is told of one record: everything its command line carries."""

    record: str
    model: str
    system: str
    backend: str
    isl: int
    osl: int
    batch_size: int
    tp: int
    moe: bool
    pp: int = 1
    ep: int = 1
    kv_cache: str = "bfloat16"  # gpuplan's: the record's stated dtype, else the model's 16-bit one ("auto")

    def command(self) -> list[str]:
        """The arguments after ``aiconfigurator``. The KV cache dtype is always said (left out, aiconfigurator
        takes its own default for the model, fp8 for DeepSeek's). Mixture-of-experts layers are split over
        the TP ranks as the engines split them: by expert over the expert-parallel ranks, by width over the
        rest."""
        args = ["cli", "estimate", "--model-path", self.model, "--system", self.system, "--backend", self.backend]
        args += ["--estimate-mode", "agg", "--isl", str(self.isl), "--osl", str(self.osl)]
        args += ["--batch-size", str(self.batch_size), "--tp-size", str(self.tp)]
        if self.pp > 1:
            args += ["--pp-size", str(self.pp)]
        if self.moe:
            args += ["--moe-tp-size", str(self.tp // self.ep), "--moe-ep-size", str(self.ep)]
        return [*args, "--kvcache-quant-mode", self.kv_cache]


def peer_input(record: dict[str, Any]) -> tuple[PeerInput | None, str]:
    """(what aiconfigurator is told of ``record``, or None; why not). Lengths, clients and parallelism are
    read from the spec ``load_accuracy`` states for gpuplan, so both tools get the same figures."""
    if record["load"]["arrival"] != "closed-loop":
        return None, "not a closed loop (aiconfigurator states a steady batch, no arrival shape)"
    spec, why = load_accuracy.spec_for(record)
    if spec is None:
        return None, why
    serve = spec["serve"]
    model = MODELS.get(record["model"].split(" ")[0])
    if model is None:
        return None, f"aiconfigurator does not bundle {record['model']}"
    system = SYSTEMS.get(serve["hardware"]["gpu"])
    if system is None:
        return None, f"aiconfigurator has no measurements of {serve['hardware']['gpu']}"
    backend = BACKENDS.get(record["engine"])
    if backend is None:
        return None, f"the record does not say which engine {record['engine']} runs"
    hardware = serve["hardware"]
    tp, pp, ep = hardware["tensor_parallel"], hardware.get("pipeline_parallel", 1), hardware.get("expert_parallel", 1)
    if hardware["count"] != tp * pp:
        return None, "more than one replica"
    prompt, output = serve["context"] - serve["output_tokens"], serve["output_tokens"]
    kv_cache = "fp8" if serve.get("kv_cache_dtype") == "fp8" else "bfloat16"
    moe = _moe(spec)
    shape = (prompt, output, serve["concurrency"], tp, moe, pp, ep if moe else 1, kv_cache)
    return PeerInput(record["id"], model, system, backend, *shape), ""


def _architecture(spec: dict[str, Any]) -> Any:
    model = spec["model"]
    return model_catalog()[model["id"]].architecture if "id" in model else None


def _moe(spec: dict[str, Any]) -> bool:
    """Whether the spec's model has mixture-of-experts layers (a catalog model's architecture, or its own)."""
    architecture = _architecture(spec)
    if architecture is not None:
        return bool(architecture.is_moe)
    return bool(spec["model"]["architecture"].get("experts"))


def weights(spec: dict[str, Any]) -> str:
    """The weights' format gpuplan estimates: the spec's quantization, else the checkpoint's as the catalog
    stores it, else 16-bit ("none")."""
    if spec["serve"].get("quantization"):
        return str(spec["serve"]["quantization"])
    model = spec["model"]
    return model_catalog()[model["id"]].quantization if "id" in model else "none"


def agrees(weight_format: str, quant: str) -> bool:
    """Whether aiconfigurator's resolved quantization (``parse``'s "gemm X, moe Y, kvcache Z") runs the
    weights gpuplan estimates: 16-bit GEMMs for none, fp8 ones for fp8, MXFP4 experts for mxfp4."""
    modes = dict(part.split(" ", 1) for part in quant.split(", "))
    if weight_format == "none":
        return modes.get("gemm") == "bfloat16" and modes.get("moe", "bfloat16") == "bfloat16"
    if weight_format == "fp8":
        return "fp8" in modes.get("gemm", "")
    return weight_format in modes.get("moe", "") or weight_format in modes.get("gemm", "")


def parse(printed: str) -> dict[str, Any]:
    """aiconfigurator's figures, versions and resolved quantization from what ``cli estimate`` printed."""
    out: dict[str, Any] = {}
    for label, metric in FIGURES.items():
        found = re.search(rf"^\s*{re.escape(label)}:\s+([0-9.,]+)", printed, re.MULTILINE)
        if found:  # printed with thousands separators: 1,128.30
            out[metric] = float(found.group(1).replace(",", ""))
    version = re.search(r"AIConfigurator version: (\S+)", printed)
    database = re.search(r"Loading database for system='(\w+)', backend='(\w+)', version='([^']+)'", printed)
    quant = re.search(r"Resolved quant modes for \w+: gemm=\w+\.(\w+) moe=\w+\.(\w+) kvcache=\w+\.(\w+)", printed)
    if version:
        out["aiconfigurator"] = version.group(1)
    if database:
        out["database"] = f"{database.group(2)} {database.group(3)} on {database.group(1)}"
    if quant:
        out["quant"] = f"gemm {quant.group(1)}, moe {quant.group(2)}, kvcache {quant.group(3)}"
    return out


def run_peer(inputs: list[PeerInput], executable: str) -> list[dict[str, Any]]:
    """aiconfigurator's estimate of each input, as stored (``PEER_DATA``); a run that fails keeps its error."""
    stored = []
    for peer in inputs:
        done = subprocess.run([executable, *peer.command()], capture_output=True, text=True, timeout=600)
        figures = parse(done.stdout + done.stderr)
        entry: dict[str, Any] = {"id": peer.record, "command": " ".join(["aiconfigurator", *peer.command()])}
        if done.returncode != 0 or "ttft_ms" not in figures:
            last = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
            entry["error"] = last[0][:300]
        else:
            entry.update(figures)
        stored.append(entry)
        print(f"  {peer.record}: {entry.get('error') or 'ok'}", file=sys.stderr)
    return stored


def store(entries: list[dict[str, Any]]) -> None:
    """Write ``run_peer``'s entries to ``PEER_DATA`` with the tool's version and the day they were run."""
    versions = {entry["aiconfigurator"] for entry in entries if "aiconfigurator" in entry}
    document = {
        "tool": "aiconfigurator",
        "version": ", ".join(sorted(versions)) or "unknown",
        "run": datetime.date.today().isoformat(),
        "records": [{k: v for k, v in entry.items() if k != "aiconfigurator"} for entry in entries],
    }
    text = (
        "# aiconfigurator's estimates of the closed-loop records of published_load_runs.yaml, written by\n"
        "# `python benchmarks/peer_speed.py --run` (do not edit: run it again). `command` is what it was told;\n"
        "# `database` the engine release and GPU of its measured operations; `quant` the GEMM, MoE and KV cache\n"
        "# formats it resolved; figures as it printed them.\n"
    )
    PEER_DATA.write_text(text + yaml.safe_dump(document, sort_keys=False, width=200), encoding="utf-8")


def compared(
    records: list[dict[str, Any]], stored: dict[str, dict[str, Any]]
) -> tuple[list[Result], list[Result], list[tuple[str, str]]]:
    """(gpuplan's results, aiconfigurator's, what was left out and why) on the records both state, figure by
    figure: a figure gpuplan does not score (the engine does not start, a saturated stream) is left out for
    both and listed."""
    ours: list[Result] = []
    theirs: list[Result] = []
    left: list[tuple[str, str]] = []
    for record in records:
        entry = stored.get(record["id"])
        if entry is None or "error" in entry:
            continue
        results, skipped = load_accuracy.evaluate([record])
        left += [(name, f"gpuplan: {why}") for name, why in skipped]
        for result in results:
            if result.statistic not in STATISTICS.get(result.metric, ()) or result.metric not in entry:
                continue
            ours.append(result)
            theirs.append(Result(**{**vars(result), "estimated": float(entry[result.metric])}))
    return ours, theirs, left


def summary(name: str, results: list[Result]) -> list[str]:
    """Per metric: figures, median absolute error, bias, share on the dangerous side, worst."""
    lines = []
    for metric in STATISTICS:
        group = [r for r in results if r.metric == metric]
        if group:
            lines.append(f"| {name} | {metric} | {len(group)} | {Scores.of(group).cells()} |")
    return lines


def check(records: list[dict[str, Any]], stored: dict[str, dict[str, Any]]) -> list[str]:
    """What no longer agrees: a record aiconfigurator can be told of with no stored figures, a stored entry
    whose command differs from the one the record gives today, or whose weights are not the ones gpuplan
    estimates, and a stored entry for a record that is gone or can no longer be stated."""
    problems = []
    wanted: dict[str, tuple[str, str]] = {}
    for record in records:
        peer, _ = peer_input(record)
        spec, _ = load_accuracy.spec_for(record)
        if peer is not None and spec is not None:
            wanted[peer.record] = (" ".join(["aiconfigurator", *peer.command()]), weights(spec))
    for name, (command, weight_format) in wanted.items():
        entry = stored.get(name)
        if entry is None:
            problems.append(f"{name}: no stored aiconfigurator figures (python benchmarks/peer_speed.py --run)")
        elif entry["command"] != command:
            problems.append(f"{name}: stored for `{entry['command']}`, the record now gives `{command}`")
        elif "quant" in entry and not agrees(weight_format, entry["quant"]):
            problems.append(f"{name}: aiconfigurator ran {entry['quant']}, gpuplan estimates {weight_format} weights")
    known = {record["id"] for record in records}
    for name in stored:
        if name not in wanted:
            problems.append(f"{name}: stored, but " + ("no longer stated" if name in known else "no such record"))
    return problems


def not_compared(records: list[dict[str, Any]], stored: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """The closed-loop records left out, and why: neither tool, or only gpuplan, can state them, or
    aiconfigurator failed on them."""
    left = []
    for record in records:
        peer, why = peer_input(record)
        if peer is None and record["load"]["arrival"] == "closed-loop":
            left.append((record["id"], why))
    return left + [(name, f"aiconfigurator failed: {e['error']}") for name, e in stored.items() if "error" in e]


def load_stored() -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    data = yaml.safe_load(PEER_DATA.read_text(encoding="utf-8")) if PEER_DATA.exists() else {}
    data = data or {}
    return data, {entry["id"]: entry for entry in data.get("records", [])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help="run aiconfigurator on every record and store its figures")
    parser.add_argument("--check", action="store_true", help="fail when the stored figures do not answer the records")
    parser.add_argument("--aiconfigurator", default="aiconfigurator", help="the aiconfigurator executable")
    args = parser.parse_args(argv)
    records = yaml.safe_load(load_accuracy.DATA.read_text(encoding="utf-8"))
    if args.run:
        executable = shutil.which(args.aiconfigurator)
        if executable is None:
            print(f"{args.aiconfigurator} not found: pip install aiconfigurator", file=sys.stderr)
            return 2
        store(run_peer([peer for peer, _ in map(peer_input, records) if peer is not None], executable))
    header, stored = load_stored()
    if args.check:
        problems = check(records, stored)
        for problem in problems:
            print(problem)
        return 1 if problems else 0
    ours, theirs, left = compared(records, stored)
    print(f"aiconfigurator {header.get('version', '?')} (run {header.get('run', '?')}) and gpuplan on the same")
    print(f"{len({r.record for r in ours})} published closed-loop runs (estimate / measured - 1):\n")
    print("| tool | metric | figures | median abs error | bias | share dangerous | worst |")
    print("|---|---|---:|---:|---:|---:|---:|")
    print("\n".join(summary("gpuplan", ours) + summary("aiconfigurator", theirs)))
    print(f"\n{'record':52} {'metric':20} {'stat':9} {'measured':>10} {'gpuplan':>10} {'aiconfig.':>10}  errors")
    for mine, peer in zip(ours, theirs, strict=True):
        print(
            f"{mine.record:52} {mine.metric:20} {mine.statistic:9} {mine.measured:10,.2f}"
            f" {mine.estimated:10,.2f} {peer.estimated:10,.2f}  {mine.error:+.0%} {peer.error:+.0%}"
        )
    left = not_compared(records, stored) + left
    print("\n".join(load_accuracy.listed(f"Closed-loop records or figures not compared: {len(left)}", left)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
