"""Wall time and peak memory of `gpuplan verify` on a large vLLM log, as a whole process.

    python benchmarks/verify_speed.py [--mb 100] [--runs 3]

Writes a vLLM 0.19-format start-up log of about ``--mb`` MB (the engine's lines written by
tests/evidence_samples.py, with a torch.compile DEBUG dump repeated in the middle, as a long DEBUG run
has) and a matching spec into a temporary folder, then times `gpuplan verify` on it and reads the
child's peak resident memory. The reader streams line by line, so the peak should not grow with --mb.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from common import installed_gpuplan  # noqa: E402
from evidence_samples import RankMemory, VllmRun, vllm_log  # noqa: E402

SPEC = """\
version: 1
name: big-log
model: {id: llama-3.1-8b}
serve:
  context: 8192
  concurrency: 32
  memory_utilization: 0.95
  hardware: {gpu: h100-sxm}
"""
NOISE = (
    "(EngineCore pid=242) DEBUG 04-22 00:04:07 [compilation/backends.py:1074]  "
    "'VLLM_ROCM_USE_AITER_TRITON_GEMM': True,\n"
    "(EngineCore pid=242) DEBUG 04-22 00:04:20 [v1/worker/gpu_model_runner.py:5342] "
    "ubatch_slices: None, ubatch_slices_padded: None\n"
    "(EngineCore pid=242) DEBUG 04-22 00:04:20 [compilation/cuda_graph.py:271] Capturing a cudagraph on "
    "(FULL,BatchDescriptor(num_tokens=104, num_reqs=104, uniform=True, has_lora=False, num_active_loras=0))\n"
)


def write_log(path: Path, megabytes: int) -> None:
    run = VllmRun(
        ranks={"": RankMemory(weights=14.99, torch_peak=1.89, non_torch=0.25, graphs=0.91, kv_pool=58.11)},
        kv_tokens=476_016,
        concurrency=58.11,
    )
    lines = vllm_log(run).splitlines(keepends=True)
    block = NOISE * 2000
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(lines[:6])
        while handle.tell() < megabytes * 10**6:
            handle.write(block)
        handle.writelines(lines[6:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    gpuplan = installed_gpuplan()
    with tempfile.TemporaryDirectory() as folder:
        spec, log = Path(folder) / "spec.yaml", Path(folder) / "vllm.log"
        spec.write_text(SPEC)
        write_log(log, args.mb)
        size = log.stat().st_size
        samples = []
        for _ in range(args.runs):
            start = time.perf_counter()
            done = subprocess.run([gpuplan, "verify", str(spec), "--run", str(log)], capture_output=True, text=True)
            samples.append(time.perf_counter() - start)
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"log {size / 1e6:,.0f} MB; exit {done.returncode}; {done.stdout.strip().splitlines()[-1]}")
    print(
        f"gpuplan verify: median {statistics.median(samples):.2f} s over {args.runs} runs; peak RSS "
        f"{peak_kib / 1024:.0f} MiB"
    )


if __name__ == "__main__":
    main()
