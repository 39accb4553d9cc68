"""gpuplan: lint LLM fine-tuning and serving specs, estimate GPU memory, speed and cost, render reports."""

from __future__ import annotations

__version__ = "0.1.0"
