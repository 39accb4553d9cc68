"""DeepSpeed ZeRO's optimizer step on the GPU (gpuplan.estimate.zero_step), derived by hand.

Llama 3.1 8B, full fine-tuning under bf16 mixed precision (16-bit working weights, fp32 master weights), fused
AdamW (no step temporary), 8 data-parallel ranks: 8,030,261,248 parameters, a partition of 1,003,782,656 per
rank. The largest parameter is the embedding (equally the untied LM head), 128,256 x 4,096 = 525,336,576.
"""

from __future__ import annotations

from training_jobs import training_setup, vary

from gpuplan.catalog import get_model
from gpuplan.estimate.training_memory import _model_states, estimate_training
from gpuplan.estimate.zero_step import held_partition, layers_before_first_reduce, zero_step

PARTITION = 1_003_782_656
EMBEDDING = 525_336_576
# ZeRO-1/2 keep whole parameters' gradients (held_partition): the worst rank's partition (the sixth) runs from
# the first parameter of a layer to the last of the fifth after it, 5 x 218,112,000 elements (q and o 16,777,216,
# k and v 4,194,304, gate, up and down 58,720,256, two norms of 4,096).
HELD = 5 * 218_112_000


def _full(sharding: str, **changes: object):
    arch = get_model("llama-3.1-8b").architecture
    settings = {"precision": "bf16-mixed", "autocast": False, "optimizer": "adamw-fused", "seq_len": 2048}
    return training_setup(architecture=arch, method="full", sharding=sharding, **{"gpus": 8, **settings, **changes})


def test_zero2_flattens_the_partition_and_casts_it_to_fp32_beside_its_16_bit_gradients():
    # The 16-bit gradients the worst rank keeps, whole parameters, 2 x 1,090,560,000 = 2,181,120,000; the norm's
    # fp64 copy of the embedding's gradient 8 x 525,336,576 = 4,202,692,608; the flat 16-bit copy of the partition
    # 2,007,565,312 and its fp32 cast 4,015,130,624. Moments: the norm 2,181,120,000 + 4,202,692,608; the flatten
    # 2,181,120,000 + 6,022,695,936 = 8,203,815,936; the update, the 16-bit gradients released, 4,015,130,624.
    # The flatten is the step's peak.
    zero = _model_states(_full("zero2")).zero_step
    assert zero is not None
    assert (zero.partition_gradients, zero.norm_copy) == (2 * HELD, 8 * EMBEDDING)
    assert _model_states(_full("zero2")).gradients == 2 * HELD  # the same buffer through backward
    assert (zero.flat_copy, zero.fp32_gradients, zero.sub_group_share, zero.keeps_gradients) == (
        2 * PARTITION,
        4 * PARTITION,
        1,
        False,
    )
    step = estimate_training(_full("zero2"), 0).phases["optimizer_step"]
    assert (step["gradients"], step["optimizer_step_temporaries"]) == (2_181_120_000, 6_022_695_936)


def test_zero2s_first_bucket_reduce_comes_once_the_gradients_overflow_the_bucket():
    # Llama 3.1 8B: the untied LM head's 525,336,576 gradient elements alone overflow DeepSpeed's default bucket
    # of 500,000,000, so the reduce at the next parameter (the final norm) allocates the buffer before any layer.
    assert layers_before_first_reduce(EMBEDDING, 218_112_000, 32, 500_000_000) == 0
    # Llama 3.2 1B ties its head (no gradient until the embedding's backward): layers of 973,144,064 / 16 =
    # 60,821,504 elements, 8 of them 486,572,032 <= 500,000,000, the ninth's overflows: 8 layers run before.
    assert layers_before_first_reduce(0, 60_821_504, 16, 500_000_000) == 8
    # A bucket larger than every gradient is reduced at the epilogue alone: all 16 layers run first.
    assert layers_before_first_reduce(0, 60_821_504, 16, 10**10) == 16
    # The Hugging Face Trainer's "auto" bucket, hidden_size squared (16,777,216 for the 8B): at once.
    assert _model_states(_full("zero2")).zero_step.buffer_after_layers == 0


def test_zero2_holds_its_whole_gradient_buffer_from_the_first_reduce_and_two_under_accumulation():
    # Full checkpointing and 256 tokens keep the activations small, so backward peaks at its last layer, where the
    # buffer the first reduce allocated holds the worst rank's whole partition, 2 x 1,090,560,000 = 2,181,120,000
    # bytes (not the head's and one layer's share made so far). Under accumulation the first micro-batch's buffer
    # stays while the second's is allocated at its own first reduce: 2 x 2,181,120,000 = 4,362,240,000.
    small = {"seq_len": 256, "checkpointing": True}
    for accumulation, gradients in ((1, 2 * HELD), (2, 4 * HELD)):
        backward = estimate_training(_full("zero2", gradient_accumulation=accumulation, **small), 0).phases["backward"]
        assert backward["gradients"] == gradients, accumulation
        assert backward["temporaries"] < 10**8  # a layer's backward, not the loss's
    # The step still holds one buffer: the second is added to the first and freed at its epilogue.
    step = estimate_training(_full("zero2", gradient_accumulation=2, **small), 0).phases["optimizer_step"]
    assert step["gradients"] == 2 * HELD


def test_zero3_copies_a_buckets_gradients_as_it_reduce_scatters_them():
    # reduce_scatter_coalesced's torch.cat of a bucket's gradients, 2 bytes an element under bf16-mixed. DeepSpeed's
    # default bucket of 500,000,000 elements: 1,000,000,000 bytes, while a layer's backward runs (the 8B's
    # 8,030,261,248 gradient elements outgrow the bucket, so reduces come then) and at the epilogue. The Trainer's
    # auto bucket, 4,096^2 = 16,777,216 elements: 33,554,432 bytes. A bucket larger than every gradient: one
    # reduce, at the epilogue, of all of them, 2 x 8,030,261,248 = 16,060,522,496 bytes.
    assert _model_states(_full("zero3", reduce_bucket_size=500_000_000)).reduce_copies == (10**9, 10**9)
    assert _model_states(_full("zero3", reduce_bucket_size=None)).reduce_copies == (33_554_432, 33_554_432)
    assert _model_states(_full("zero3", reduce_bucket_size=10**10)).reduce_copies == (0, 16_060_522_496)
    assert _model_states(_full("zero2")).reduce_copies == (0, 0)  # not ZeRO-3's path
    # With 256 tokens and full checkpointing the backward peaks at its last layer: its transients (the gradients of
    # down_proj's input, of act and up, and of gate: 3 x 256 x 14,336 x 2 = 22,020,096 bytes) beside the copy.
    small = {"seq_len": 256, "checkpointing": True, "reduce_bucket_size": 500_000_000}
    backward = estimate_training(_full("zero3", **small), 0).phases["backward"]
    assert backward["temporaries"] == 22_020_096 + 10**9


def test_zero2_with_its_optimizer_on_the_host_keeps_no_gradient_on_the_gpu():
    # ZeRO-Offload, stage 2: each partition gradient goes to the host as its bucket is reduced (param.grad = None),
    # so none is kept. The GPU keeps a buffer of the largest parameter (the 128,256 x 4,096 embedding and head):
    # 2 x 525,336,576 = 1,050,673,152 bytes, all run; and at each gradient the whole of it checked for overflow,
    # 11 bytes an element live at once: 11 x 525,336,576 = 5,778,702,336 (more than the norm's fp64 copy, 8 bytes
    # an element, made and freed before it), in backward and at its end. The same on one GPU, where the partition
    # is the whole model: its 16,060,522,496 bytes of 16-bit gradients are on the host, not the GPU.
    for gpus in (8, 1):
        states = _model_states(_full("zero2", offload_optimizer="cpu", gpus=gpus))
        assert (states.gradients, states.optimizer) == (0, 1_050_673_152), gpus
        assert states.reduce_copies == (5_778_702_336, 5_778_702_336), gpus
    small = {"seq_len": 256, "checkpointing": True, "offload_optimizer": "cpu"}
    backward = estimate_training(_full("zero2", **small), 0).phases["backward"]
    assert backward["temporaries"] == 22_020_096 + 5_778_702_336  # the last layer's, as the ZeRO-3 case derives


def test_zero3_with_its_optimizer_on_the_host_keeps_its_gradient_partition_there():
    # ZeRO-3 under optimizer offload allocates its flat 16-bit gradient partition on the host (grad_partitions_flat_
    # buffer on self.device, the CPU): over 8 ranks, 1,003,782,656 elements x 2 B beside the 16 B of fp32 master,
    # moments and fp32 gradient, 18 x 1,003,782,656 = 18,068,087,808 bytes of host memory, none of it on the GPU.
    # On the GPU each reduced piece is copied back and cast to fp32 as it is stored, the largest (the embedding's
    # partition, 525,336,576 / 8 = 65,667,072 elements) 2 + 4 bytes an element, 394,002,432 bytes beside the bucket's
    # reduce-scatter copy (DeepSpeed's default bucket: 10^9).
    states = _model_states(_full("zero3", offload_optimizer="cpu", reduce_bucket_size=500_000_000))
    assert (states.gradients, states.host) == (0, 18_068_087_808)
    assert states.reduce_copies == (10**9 + 394_002_432, 10**9 + 394_002_432)


def test_a_rank_keeps_the_whole_gradient_of_every_parameter_its_partition_touches():
    # Parameters of 6, 1, 1, 1, 1 elements over 2 ranks (partitions of 5): the first rank touches the first
    # parameter alone, 6; the second the first's last element and the four others, 6 + 4 = 10. An embedding
    # spanning several partitions counts whole on each: 525,336,576 + ten 58,720,256 matrices over 64 ranks.
    assert held_partition([6, 1, 1, 1, 1], 2) == 10
    assert held_partition([4, 4, 4], 3) == 4
    assert held_partition([EMBEDDING] + [58_720_256] * 10, 64) == EMBEDDING + 58_720_256
    assert held_partition([5, 5], 1) == 10


def test_zero1_steps_from_the_partition_once_backward_has_dropped_the_other_gradients():
    # ZeRO-1 holds every 16-bit gradient through backward (8,030,261,248 x 2 at its end), but the epilogue keeps
    # only the partition's pieces (zero_grad(set_to_none=True)), whole parameters: the step's moments are ZeRO-2's.
    assert _model_states(_full("zero1")).gradients == 2 * 8_030_261_248
    step = estimate_training(_full("zero1"), 0).phases["optimizer_step"]
    assert (step["gradients"], step["optimizer_step_temporaries"]) == (2 * HELD, 6_022_695_936)


def test_zero3_steps_in_sub_groups_beside_its_gradient_buffer():
    # ZeRO-3 partitions each parameter: the norm copies the embedding's partition, 525,336,576 / 8 x 8 =
    # 525,336,576. Its sub-groups close once they reach sub_group_size (1e9) elements, so the largest is under
    # 1e9 + 65,667,072 (the embedding's partition): here the whole partition, 1,003,782,656. The flatten: the
    # gradient buffer 2,007,565,312 + the 16-bit copy 2,007,565,312 + its fp32 cast 4,015,130,624 =
    # 8,030,261,248; the update: the buffer + the fp32 gradient, 6,022,695,936. The buffer is there from the
    # optimizer's initialisation: in forward too.
    zero = _model_states(_full("zero3")).zero_step
    assert zero is not None and zero.keeps_gradients and zero.sub_group_share == 1
    assert (zero.norm_copy, zero.flat_copy, zero.fp32_gradients) == (EMBEDDING, 2 * PARTITION, 4 * PARTITION)
    phases = estimate_training(_full("zero3"), 0).phases
    step = phases["optimizer_step"]
    assert (step["gradients"], step["optimizer_step_temporaries"]) == (2_007_565_312, 6_022_695_936)
    assert phases["forward"]["gradients"] == 2_007_565_312
    # Over 2 ranks (4,015,130,624 a partition) the largest sub-group is 1e9 + 262,668,288 elements: its copies,
    # and the optimizer's temporaries a sub-group's share at a time.
    wide = zero_step("zero3", 4_015_130_624, 2, EMBEDDING / 2)
    assert wide.flat_copy == 2 * 1_262_668_288 and wide.sub_group_share == 1_262_668_288 / 4_015_130_624
    assert wide.moments(8e9)[3] == (2 * 4_015_130_624, 4 * 1_262_668_288 + 8e9 * wide.sub_group_share)


def test_the_flat_copy_is_cast_to_fp32_whatever_the_precision_unless_it_is_fp32_already():
    # DeepSpeed keeps fp32 partitions of the parameters under any precision (.clone().float()): pure bf16 still
    # casts the flat 2-byte copy to fp32. fp32 gradients are flattened in fp32 and .to() returns that copy,
    # which the update reads beside torch's foreach AdamW temporary (one 4-byte state, 4 x 1,003,782,656).
    bf16 = _model_states(_full("zero2", precision="bf16")).zero_step
    assert bf16 is not None and (bf16.flat_copy, bf16.fp32_gradients) == (2 * PARTITION, 4 * PARTITION)
    fp32 = _model_states(_full("zero2", precision="fp32", optimizer="adamw")).zero_step
    assert fp32 is not None and fp32.fp32_gradients == 0 and fp32.step_gradient == fp32.flat_copy == 4 * PARTITION
    assert fp32.moments(4 * PARTITION)[3] == (0.0, 8 * PARTITION)


def test_zero1_copies_the_partition_beside_every_gradient_as_backward_ends():
    # ZeRO-1 reduces once backward is done and copies the partition's 16-bit gradients, whole parameters, into a
    # buffer of their own (copy_grads_in_partition) while every whole gradient is still there: backward's end
    # holds the 8,030,261,248 x 2 B gradients and the 2 x 1,090,560,000 B buffer.
    # (Full recompute, one 2,048-token sequence: the end is backward's largest moment, beside DeepSpeed's
    # default bucket of 500,000,000 elements x 2 B.)
    backward = estimate_training(_full("zero1", checkpointing="full"), 0).phases["backward"]
    assert backward["gradients"] == 16_060_522_496 + 2 * HELD
    assert backward["gradient_buckets"] == 1_000_000_000


def test_no_gpu_step_where_deepspeed_does_not_step_on_the_gpu():
    # Optimizer offload steps on the host; Megatron's zero1 is its distributed optimizer; a step fused into backward
    # has no step. (One rank steps as DeepSpeed does: the tests below.)
    for changes in (
        {"offload_optimizer": "cpu"},
        {"framework": "megatron"},
        {"optimizer_in_backward": True},
    ):
        assert _model_states(vary(_full("zero2"), **changes)).zero_step is None, changes


def test_fp16_checks_the_gradients_for_overflow_before_the_norm():
    # Loss-scaled fp16: ZeRO-1/2 test each gradient of the partition in turn (_has_inf_or_nan): an fp32 copy, three
    # bool tensors and the union's fp32 copy, 4 + 1 + 1 + 1 + 4 bytes an element of the largest piece. Over 8 ranks
    # that is the embedding, 525,336,576 elements: 11 x = 5,778,702,336 B beside the 2 x 1,090,560,000 of 16-bit
    # gradients, under the flatten's. ZeRO-3 tests its buffer a byte an element (isinf, then isnan):
    # 1,003,782,656. bf16 has no loss scale and no check.
    zero2 = _model_states(_full("zero2", precision="fp16-mixed")).zero_step
    assert zero2 is not None and sum(zero2.overflow_check) == 11 * EMBEDDING
    assert zero2.moments(0)[0] == (2 * HELD, 11 * EMBEDDING)
    zero3 = _model_states(_full("zero3", precision="fp16-mixed")).zero_step
    assert zero3 is not None and zero3.overflow_check == (PARTITION,)
    bf16 = _model_states(_full("zero2")).zero_step
    assert bf16 is not None and bf16.overflow_check == ()
    # Over 64 ranks a partition of 125,000,000 elements is all embedding: the check, 250,000,000 + 11 x
    # 125,000,000 = 1,625,000,000 B, outweighs the flatten, 250,000,000 + 750,000,000: it is the step's peak.
    wide = zero_step("zero2", 125_000_000, 2, EMBEDDING, fp16=True)
    assert max(wide.moments(0), key=sum) == (250_000_000, 1_375_000_000)


def test_zero2_on_one_gpu_runs_deepspeeds_optimizer_whatever_it_shards():
    # DeepSpeed builds its ZeRO-1/2 optimizer whatever the world size (a partition_count of 1 here): the partition
    # is the whole model, 8,030,261,248 elements, and one rank keeps every gradient whole. The 16-bit gradients
    # 2 x 8,030,261,248 = 16,060,522,496 live in ZeRO-2's buffer from backward on; the step flattens them, a
    # 16-bit copy 16,060,522,496, and casts that to fp32, 32,121,044,992: 48,181,567,488 of copies beside the
    # gradients at the flatten. Weights: the 16-bit working copy, 16,060,522,496; the optimizer: fp32 master
    # weights and AdamW's two moments, 12 x 8,030,261,248 = 96,363,134,976. The gradient bucket, DeepSpeed's
    # default reduce_bucket_size (one bucket without overlap_comm): 500,000,000 elements x 2 B. Modelled
    # unsharded, as it was, none of the buckets or the step's copies were counted.
    one = _full("zero2", gpus=1)
    states = _model_states(one)
    zero = states.zero_step
    assert zero is not None and zero.partition_gradients == 2 * 8_030_261_248
    assert (states.weights, states.optimizer, states.gradients) == (
        16_060_522_496,
        96_363_134_976,
        16_060_522_496,
    )
    step = estimate_training(one, 0).phases["optimizer_step"]
    assert (step["gradients"], step["optimizer_step_temporaries"]) == (16_060_522_496, 48_181_567_488)
    assert estimate_training(one, 0).phases["backward"]["gradient_buckets"] == 1_000_000_000


def test_zero3_on_one_gpu_steps_in_sub_groups_and_gathers_nothing():
    # ZeRO-3 over one rank: a partition of one is the whole parameter, and DeepSpeed's fetch hands the parameter its
    # partition without a gather (all_gather_coalesced: num_partitions == 1), so no unit is gathered. Its gradient
    # buffer holds the whole model in 16 bits, 16,060,522,496, from the optimizer's initialisation (in forward
    # too), and the step goes by sub-groups: each closes once it reaches sub_group_size (1e9) elements, the largest
    # under 1e9 + 525,336,576 (the embedding, whole here) = 1,525,336,576, flattened in 16 bits (3,050,673,152) and
    # cast to fp32 (6,101,346,304): 9,152,019,456 of copies at the step, where ZeRO-2 on one GPU flattens the
    # whole model at once (48,181,567,488, the test above).
    one = _full("zero3", gpus=1)
    states = _model_states(one)
    zero = states.zero_step
    assert zero is not None and zero.keeps_gradients and states.gathered == 0
    assert (zero.flat_copy, zero.fp32_gradients) == (3_050_673_152, 6_101_346_304)
    phases = estimate_training(one, 0).phases
    assert phases["forward"]["gradients"] == 16_060_522_496
    step = phases["optimizer_step"]
    assert (step["gradients"], step["optimizer_step_temporaries"]) == (16_060_522_496, 9_152_019_456)


def test_zero_keeps_fp32_master_weights_and_states_under_pure_bf16():
    # DeepSpeed clones every trainable parameter into its fp32 partition whatever the precision (.clone().float())
    # and its optimizer steps that partition: pure bf16 under ZeRO-2 holds 4 B of master weights and AdamW's two fp32
    # moments, 8 B, beside the 2 B working weight: optimizer 12 x 8,030,261,248 = 96,363,134,976 (fused AdamW, no
    # step temporary), as under bf16-mixed. Unsharded pure bf16 keeps 2 B moments and no master: 4 x 8,030,261,248.
    zero = _model_states(_full("zero2", gpus=1, precision="bf16"))
    assert (zero.weights, zero.optimizer) == (16_060_522_496, 96_363_134_976)
    assert _model_states(_full("none", gpus=1, precision="bf16")).optimizer == 4 * 8_030_261_248
