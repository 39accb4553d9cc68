"""The speed model's calibration: the engines' default limits at their boundaries, and its records.

The engine limits are the engines' own defaults, read from their source (see gpuplan/estimate/calibration.py);
each boundary is probed on a copy of a catalog GPU with its memory set to the edge.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpuplan.catalog import get_gpu
from gpuplan.estimate.calibration import CALIBRATION, _engine
from gpuplan.units import GIB


def with_memory(gpu_id: str, gib: float):
    return dataclasses.replace(get_gpu(gpu_id), memory_bytes=int(gib * GIB))


@pytest.mark.parametrize(
    "engine, gpu_id, gib, limits",
    [
        # vLLM get_batch_defaults: >= 70 GiB and not an A100 -> 8192 tokens, 1024 sequences; else 2048, 256.
        ("vllm", "h100-sxm", 70, (8192, 1024)),
        ("vllm", "h100-sxm", 69.99, (2048, 256)),
        ("vllm", "a100-sxm-80gb", 80, (2048, 256)),
        # SGLang v0.5.3 chunked_prefill_size: 2048 below 35 GiB, 4096 below 60, 8192 below 160, 16384 from
        # there (server_args.py _handle_gpu_memory_settings); 4096 requests.
        ("sglang", "h100-sxm", 34.99, (2048, 4096)),
        ("sglang", "h100-sxm", 35, (4096, 4096)),
        ("sglang", "h100-sxm", 59.99, (4096, 4096)),
        ("sglang", "h100-sxm", 60, (8192, 4096)),
        ("sglang", "h100-sxm", 159.99, (8192, 4096)),
        ("sglang", "h100-sxm", 160, (16384, 4096)),
        ("trtllm", "l4", 24, (8192, 2048)),
        ("lmdeploy", "l4", 24, (8192, 128)),
        ("generic", "l4", 24, (8192, 256)),
    ],
)
def test_engine_limits_at_their_boundaries(engine, gpu_id, gib, limits):
    assert CALIBRATION.engine(engine).limits(with_memory(gpu_id, gib)) == limits


def test_engine_record_keeps_each_figure_in_its_field():
    # A swapped pair of positional arguments would pass every aggregate check; name each field.
    profile = _engine("lmdeploy", 0.1, 0.2, 0.3, 0.4, 0.5, True)
    assert profile == CALIBRATION.engine("lmdeploy").__class__(
        id="lmdeploy",
        name="LMDeploy TurboMind",
        gemm_efficiency=0.1,
        bandwidth_efficiency=0.2,
        step_overhead_s=0.3,
        sequence_overhead_s=0.4,
        request_overhead_s=0.5,
        reserves_full_context=True,
        limits_note="engine defaults",
        first_token_from_decode_step=True,  # TurboMind's context decoder stops one prompt token short
    )
    # Every other engine's prompt pass samples the first token itself.
    for engine_id in ("vllm", "sglang", "trtllm", "generic"):
        assert not _engine(engine_id, 0.1, 0.2, 0.3, 0.4, 0.5, True).first_token_from_decode_step
