"""A toy GPU with round rates, on which the speed model's terms are derived by hand.

1,000 FLOP/s in bf16 and fp16, 2,000 in fp8; 1,000 B/s of HBM; NVLink and PCIe 1,000 B/s one way; a
MAMF ceiling of 1/2 (fp8 1/4), set by the ``unit_ceiling`` fixture, which the modules that use the GPU
(test_serving_speed.py, test_training_speed.py) import so that it applies to each of their tests.
"""

from __future__ import annotations

import dataclasses

import pytest

from gpuplan.catalog import get_gpu
from gpuplan.estimate import performance

GPU = dataclasses.replace(
    get_gpu("h100-sxm"),
    id="unit-gpu",
    tflops={"bf16": 1e-9, "fp16": 1e-9, "fp8": 2e-9},
    bandwidth_tbs=1e-9,
    interconnect_gbs=2e-6,  # 1,000 B/s one way; x 1/2 link efficiency: 500 B/s
    pcie_gbs=2e-6,
)


@pytest.fixture(autouse=True)
def unit_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(performance.MATMUL_CEILING, "unit-gpu", {"bf16": 0.5, "fp8": 0.25})
