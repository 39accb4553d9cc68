"""The tensor populations the fine-tuning memory model counts per GPU: the model states a step keeps (``ModelStates``)
and one micro-batch's activations (``MicroBatchActivations``). ``training_memory`` sizes them and adds them up phase
by phase; ``training_step`` runs them through the caching allocator's model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuplan.records import record

if TYPE_CHECKING:  # training_step reads these records (and defines Gathering): the fields' types are only named here
    from gpuplan.estimate.training_step import Gathering
    from gpuplan.estimate.zero_step import ZeroStep


@record
class ModelStates:
    """Per-GPU model states: what lives for the whole step, what the step adds, what lives off the GPU."""

    weights: float
    gradients: float  # all of them, once backward has finished
    optimizer: float
    paged_optimizer: float  # bitsandbytes paged states: on the GPU for the step, evictable otherwise
    step_temporaries: float
    autocast_copies: float
    gathered: float  # unsharded while backward runs a layer: the most at once (the allocator model's, all step)
    largest_gradient: float  # the one gradient alive under optimizer_in_backward
    host: float
    nvme: float
    # Unsharded in forward, at backward's start (the loss), at its end and through the optimizer step: all
    # ``gathered`` but under FSDP, whose root unit and decoder units come and go (_model_states).
    gathered_forward: float
    gathered_loss: float
    gathered_end: float
    gathered_step: float
    saved_grad_shards: float  # FSDP parameter offload: gradient shards on the GPU until backward ends
    # A QLoRA model's preparation for k-bit training on this GPU (kbit_preparation): the elements of each
    # 16-bit tensor it casts to fp32 and, with ``cast_back``, back (the embedding, an untied LM head).
    upcast: tuple[float, ...] = ()
    cast_back: bool = False
    # FSDP's units as the allocator's model gathers them, layer by layer on their streams (None: ``gathered``
    # is one block held all step, as for ZeRO-3: training_step.GATHER's comment says why).
    gathering: Gathering | None = None
    # The data-parallel gradient buckets, PyTorch DDP's or DeepSpeed ZeRO's (training.reduce_bucket_bytes,
    # holds_ddp_buckets), and when they live.
    reduce_buckets: float = 0.0
    bucket_lifetime: str = ""  # training.bucket_lifetime
    bucket_tensors: int = 1  # DeepSpeed's buckets are separate tensors (two under overlap_comm)
    zero_step: ZeroStep | None = None  # DeepSpeed ZeRO's optimizer step on the GPU (zero_step)
    # Copies made as a bucket is reduced, in a layer's backward and at its end: ZeRO-3's of the bucket
    # (zero_step.scatter_copy), ZeRO-2's norm and overflow copies of a gradient under optimizer offload.
    reduce_copies: tuple[float, float] = (0.0, 0.0)


@record
class MicroBatchActivations:
    """Per-GPU activation memory of one micro-batch."""

    saved: float  # live at the end of forward, logits included
    returned_logits: float  # held by the caller until it drops the output
    returned_cache: float  # the key and value states the model returns with them (use_cache), all layers
    per_layer: float  # one decoder layer's saved tensors (recomputed ones with checkpointing)
    # What a layer's backward recomputes beside what it kept: all its tensors under full checkpointing (it
    # kept its input alone), those selective checkpointing did not keep, none without checkpointing.
    recomputed: float
    checkpoint_input: float  # one layer's input, kept beside its recomputed tensors under full checkpointing
    final_norm: float  # the final norm's saved input, part of ``saved`` until its backward
    forward_temporaries: float
    loss_gradients: float  # the loss backward's two fp32 logit-sized gradients
    layer_backward_temporaries: float
    host: float  # activation offloading
    # What the allocator's model reads beside the phase totals: how the saved bytes fall into tensors.
    kept_per_layer: float  # what one layer keeps through the step (its input alone under full checkpointing)
    layers_kept: int  # layers whose kept tensors are on the GPU at once (2 with activation offloading)
    log_softmax: float  # the loss's fp32 log-softmax, saved until the loss backward
    upcast: float  # the loss's fp32 logits, freed once the loss is computed
    layer_forward_temporaries: float  # a layer's largest transient in forward (eager scores, NF4 dequant, DoRA)


@record
class Evaluation:
    """An evaluation (finetune.evaluation) as the memory model runs it: its micro-batch's activations, the key and
    value states its forward builds where the model's config keeps ``use_cache`` (``cache``: every attention
    layer's, which eval mode does not turn off), and what the Hugging Face Trainer keeps of each batch for
    compute_metrics (evaluation.predictions) at its worst batch, the last of a window of ``window`` batches
    (eval_accumulation_steps, else every batch of the evaluation) whose predictions stay on the GPU: ``gathered``
    bytes a batch adds on every GPU (all ``ranks``' after gather_for_metrics); 0 where nothing is kept."""

    activations: MicroBatchActivations
    cache: float = 0.0
    window: int = 0
    gathered: float = 0.0
    ranks: int = 1

    @property
    def kept(self) -> float:
        """The predictions kept before the window's last batch: its earlier batches', concatenated."""
        return max(0, self.window - 1) * self.gathered

    @property
    def after_forward(self) -> tuple[float, ...]:
        """The tensors the window's last batch adds once its forward returned, beside ``kept``. EvalLoopContainer.add
        keeps a window's first batch as it is and concatenates each later one to the kept tensor (nested_concat ->
        torch.cat: the gathered batch and the longer copy at once); gather_for_metrics copies a rank's batch into
        the all-ranks one (several ranks; on one it hands the batch back)."""
        if self.window == 0:
            return ()
        if self.window == 1:
            return (self.gathered / self.ranks, self.gathered) if self.ranks > 1 else (self.gathered,)
        return (self.gathered, self.window * self.gathered)
