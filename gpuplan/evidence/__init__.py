"""Readers of run evidence: what a real run allocated, to hold an estimate against.

One small module per format (``vllm``, ``sglang``, ``trtllm``, ``torch_memory``, ``hf_trainer``, ``torchtune``,
``accelerate``), each turning a file into an :class:`~gpuplan.evidence.model.Evidence`. The format is told by the
content (:func:`gpuplan.evidence.read.detect`) unless ``kind`` names it. Every reader streams with bounded memory,
ignores lines it does not know, and raises :class:`~gpuplan.errors.GpuplanError` with a message naming what it looked
for when a file holds nothing it can use. The package itself imports nothing, so the command line can list the kinds
(``KINDS``, here) without loading a reader or the evidence model.
"""

# The readers by name (gpuplan.evidence.read.READERS holds one module per kind; a test keeps them in step).
KINDS = ("vllm", "sglang", "trtllm", "torch-memory", "hf-trainer", "torchtune", "accelerate")
