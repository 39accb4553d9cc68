"""How a layout's GPUs divide: tensor x pipeline parallelism make one replica (one copy of the model);
the other GPUs hold more replicas (data parallelism for a fine-tune, independent engines for serving).

The one definition of a replica count, which the spec, the estimators, the planner and the report read.
"""

from __future__ import annotations


def whole_replicas(gpus: int, tensor_parallel: int, pipeline_parallel: int) -> int:
    """Replicas of ``tensor_parallel`` x ``pipeline_parallel`` GPUs that ``gpus`` GPUs hold (0: not one)."""
    return gpus // (tensor_parallel * pipeline_parallel)


def replicas(gpus: int, tensor_parallel: int, pipeline_parallel: int) -> int:
    """The replicas of a layout: at least one (a layout with fewer GPUs than a replica is GP023's)."""
    return max(1, whole_replicas(gpus, tensor_parallel, pipeline_parallel))
