"""What FSDP keeps unsharded, and shards, phase by phase, derived by hand.

TINY (tests/tiny_architectures.py): 2 layers of 592 parameters, an untied embedding and LM head of 32 x 8 =
256 each and a final RMSNorm of 8. FSDP's root unit is what no wrapped decoder layer holds: 256 + 256 + 8 =
520 parameters, 1,040 B in bf16; a decoder unit is 592 x 2 = 1,184 B. LoRA rank 1 on all seven linears in
bf16: q 8 + 8, k 8 + 4, v 8 + 4, o 8 + 8, gate, up and down 8 + 16 each: 128 adapter parameters a layer, 256
in all. The points of ``ModelStates``: forward, backward's start (the loss), the layers of backward, its end,
the optimizer step.
"""

from __future__ import annotations

from training_jobs import training_setup, vary

from gpuplan.catalog import get_model
from gpuplan.estimate.training_memory import _model_states, _step_read, estimate_training
from gpuplan.estimate.training_step import SimulatedStep
from tests.tiny_architectures import TINY

ROOT, UNIT = 1040, 1184


def points(setup):
    states = _model_states(setup)
    return (states.gathered_forward, states.gathered_loss, states.gathered, states.gathered_end, states.gathered_step)


def lora(**changes):
    settings = {"method": "lora", "precision": "bf16", "lora_rank": 1, "lora_bytes": 2, "seq_len": 4}
    return training_setup(architecture=TINY, **{**settings, "sharding": "fsdp", "gpus": 2, **changes})


def test_fsdp_keeps_its_root_unit_from_forward_to_the_end_of_backward():
    # Forward: the root and the layer in use, 1,040 + 1,184 = 2,224; the loss: the root and the last layer,
    # prefetched, 2,224; a layer's backward: the root, that layer and the one prefetched, 1,040 + 2 x 1,184 =
    # 3,408; the end of backward: the root alone, 1,040; the optimizer step: nothing.
    assert points(lora()) == (ROOT + UNIT, ROOT + UNIT, ROOT + 2 * UNIT, ROOT, 0)
    phases = estimate_training(lora(), 0).phases
    assert phases["forward"]["gathered_parameters"] == ROOT + UNIT
    assert phases["backward"]["gathered_parameters"] in (ROOT + UNIT, ROOT + 2 * UNIT, ROOT)
    assert "gathered_parameters" not in phases["optimizer_step"]
    # FSDP2 keeps the current layer's all-gather output beside its parameters until the next copy-out: two
    # units in forward, 1,040 + 2,368 = 3,408; the rest as FSDP1.
    assert points(lora(fsdp_version=2)) == (ROOT + 2 * UNIT, ROOT + UNIT, ROOT + 2 * UNIT, ROOT, 0)
    # ZeRO-3 has no root unit: the larger unit (a layer, 1,184 > 512) and the next, 2,368, at every point but the
    # optimizer step, which releases every gathered parameter first (stage3.py step: _partition_all_parameters).
    assert points(lora(sharding="zero3")) == (2 * UNIT,) * 4 + (0,)


def test_fsdp_shards_the_adapters_gradients_and_states():
    # 256 adapter parameters in bf16: AdamW's two states 2 x 2 x 256 = 1,024 B, the gradients 512, the foreach
    # temporary 512. FSDP wraps each LoRA linear as a unit and shards it: half of each over 2 ranks. DDP and
    # ZeRO-2 keep the adapters' whole (as gpuplan models ZeRO-1/2 for adapters); ZeRO-2's step flattens the
    # gradients, 512, and casts them to fp32, 1,024, beside them (zero_step), where DDP has AdamW's temporary.
    step = estimate_training(lora(), 0).phases["optimizer_step"]
    assert (step["optimizer"], step["gradients"], step["optimizer_step_temporaries"]) == (512, 256, 256)
    step = estimate_training(lora(sharding="none"), 0).phases["optimizer_step"]
    assert (step["optimizer"], step["gradients"], step["optimizer_step_temporaries"]) == (1024, 512, 512)
    step = estimate_training(lora(sharding="zero2"), 0).phases["optimizer_step"]
    assert (step["optimizer"], step["gradients"], step["optimizer_step_temporaries"]) == (1024, 512, 512 + 1024)


def test_fsdp_parameter_offload_stages_shards_and_keeps_gradient_shards_until_backward_ends():
    # Offloaded, each shard is copied to the GPU before its all-gather and freed once gathered: a unit's copy,
    # 1,184 / 2 = 592, is live while the loss prefetches the last unit and while a layer's backward prefetches
    # the next: 2,224 + 592 = 2,816 at the loss, 3,408 + 592 = 4,000 in a layer's backward; forward (its last
    # layer's copy freed before the layer ran), the end of backward and the step hold none: 2,224, 1,040, 0.
    # The blocks the copies leave on their stream are the allocator's (test_allocator).
    offloaded = lora(offload_parameters="cpu", offload_optimizer="cpu")
    assert points(offloaded) == (2224, 2816, 4000, 1040, 0)
    # FSDP1 keeps each unit's reduced gradient shard on the GPU until backward ends: 256 / 2 x 2 B = 256; the
    # host holds the parameters, gradients and states. FSDP2 drops each shard once copied to the host.
    assert _model_states(offloaded).saved_grad_shards == 256
    assert _model_states(offloaded).gradients == 0
    assert _model_states(vary(offloaded, fsdp_version=2)).saved_grad_shards == 0
    phases = estimate_training(offloaded, 0).phases
    assert set(phases["optimizer_step"]) == {"model_outputs"}


def test_fsdp_mixed_precision_gathers_an_fp32_model_in_16_bit():
    # An fp32 model under bf16-mixed: FSDP's MixedPrecision casts each shard to a bf16 copy and gathers the unit
    # in bf16, so the units are the bf16 model's (ROOT 1,040, UNIT 1,184), with a unit's 16-bit shard copy, 1,184
    # / 2 = 592, live at the loss and in a layer's backward (as an offloaded shard's copy is): 1,040 + 1,184 +
    # 592 = 2,816 and 1,040 + 2 x 1,184 + 592 = 4,000. The shards stay fp32: the frozen base's 1,704 parameters x
    # 4 B and the adapters' 256 x 2 B, 7,328 over 2 ranks, 3,664. FSDP1 wraps the units as stored (wrap_model):
    # 520 x 4 = 2,080 and 592 x 4 = 2,368. Autocast has nothing to copy: the gathered weights are
    # bf16 already (DDP, over the same 2 GPUs, copies both layers' linears, 2 x 576, and the LM head, 256, in
    # bf16: 2 x 1,408 = 2,816).
    fp32 = lora(precision="bf16-mixed", model_dtype_bytes=4, autocast=False)
    assert points(fp32) == (ROOT + UNIT, 2816, 4000, ROOT, 0)
    states = _model_states(fp32)
    assert states.weights == 3664
    assert states.gathering is not None
    assert (states.gathering.stored_root, states.gathering.stored_unit) == (2080, 2368)
    assert (states.gathering.root, states.gathering.unit) == (ROOT, UNIT)
    assert (states.gathering.staged_root, states.gathering.staged_unit) == (ROOT / 2, UNIT / 2)
    # Offloaded, the shard's copy is still the 16-bit one the all-gather reads; the shard first reaches the GPU as
    # stored, fp32, for the cast to read: the root's 2,080 / 2 = 1,040, a unit's 2,368 / 2 = 1,184, gone before
    # the unit is gathered and no larger than it, so no point changes (the allocator caches its block:
    # test_allocator). The wrap moves each unit's tensors as stored, the fp32 ones (its broadcast bucket splits
    # them).
    offloaded_setup = vary(fp32, offload_parameters="cpu", offload_optimizer="cpu")
    offloaded = _model_states(offloaded_setup).gathering
    assert offloaded is not None and offloaded.staged_unit == UNIT / 2
    assert (offloaded.cast_root, offloaded.cast_unit) == (1040, 1184)
    assert points(offloaded_setup) == points(fp32)
    # Stored in bf16 there is nothing to cast, nor without the offload (the shard is on the GPU already).
    stored_bf16 = _model_states(vary(offloaded_setup, model_dtype_bytes=2)).gathering
    assert stored_bf16 is not None and (stored_bf16.cast_root, stored_bf16.cast_unit) == (0, 0)
    assert (states.gathering.cast_root, states.gathering.cast_unit) == (0, 0)
    broadcast = vary(fp32, fsdp_loading="broadcast")
    step = SimulatedStep(broadcast, *_step_read(broadcast)[:2])
    assert step.wrapping is not None
    units, root, _ = step.wrapping
    assert [round(sum(unit)) for unit in units] == [2368, 2368] and round(sum(root)) == 2080
    assert _model_states(vary(fp32, autocast=True)).autocast_copies == 0
    assert _model_states(vary(fp32, autocast=True, sharding="none")).autocast_copies == 2816
    # Pure bf16 has no MixedPrecision to cast with: an fp32 model is gathered as stored, with no shard copy.
    assert points(vary(fp32, precision="bf16")) == (2080 + 2368, 2080 + 2368, 2080 + 2 * 2368, 2080, 0)


def test_the_root_unit_of_llama_2_7b():
    # Llama-2-7B, LoRA over 2 GPUs with FSDP: the root unit is the embedding and the untied LM head, 32,000 x
    # 4,096 = 131,072,000 each, and the final norm, 4,096: 262,148,096 x 2 B = 524,296,192 B. A decoder layer
    # is 4 x 4,096^2 + 3 x 4,096 x 11,008 + 2 x 4,096 = 202,383,360 x 2 B = 404,766,720 B. Forward holds
    # both: 929,062,912 B (2 x 404,766,720 = 809,533,440 before the root unit was modelled).
    arch = get_model("llama-2-7b").architecture
    setup = training_setup(architecture=arch, method="lora", precision="bf16", sharding="fsdp", gpus=2)
    phases = estimate_training(setup, 0).phases
    assert phases["forward"]["gathered_parameters"] == 524_296_192 + 404_766_720
    assert "gathered_parameters" not in phases["optimizer_step"]


def test_a_full_fine_tune_holds_the_root_units_gradients_until_backward_ends():
    # Full fine-tuning in pure bf16 over 2 ranks: each decoder unit's unsharded gradient, 592 x 2 = 1,184, lives
    # until its post-backward reduces it; the root unit's are reduced only as backward ends (its parameters are
    # views of one flat parameter: the LM head's weight gradient, made at the loss, 32 x 8 x 2 = 512, waits for the
    # embedding's, 512, and the flat gradient, 520 x 2 = 1,040, is built beside both). Forward: the root and a
    # unit, 1,040 + 1,184 = 2,224; the loss: + the head's gradient, 2,736; a layer's backward: the root, two units,
    # the layer's gradient and the head's, 1,040 + 2,368 + 1,184 + 512 = 5,104; backward's end: the root, the
    # head's and the embedding's gradients and the flat one, 1,040 + 512 + 512 + 1,040 = 3,104; the step: none.
    # (Before: one embedding-sized unit gradient stood for all of these, 4,592 in a layer and 2,224 at the end.)
    full = training_setup(architecture=TINY, method="full", precision="bf16", sharding="fsdp", gpus=2, seq_len=4)
    assert points(full) == (ROOT + UNIT, 2736, 5104, 3104, 0)
    gathering = _model_states(full).gathering
    assert gathering is not None
    assert (gathering.unit_gradient, gathering.head_gradient, gathering.embedding_gradient) == (UNIT, 512, 512)
    assert gathering.root_gradient == ROOT
    # FSDP2 keeps two units in forward (as for LoRA), and a layer's reduce-scatter input, its gradient copied flat,
    # until the next layer's post-backward: 5,104 + 1,184 = 6,288 in a layer's backward; the rest alike. Adapters
    # (LoRA) reduce no full gradient.
    assert points(vary(full, fsdp_version=2)) == (ROOT + 2 * UNIT, 2736, 6288, 3104, 0)
    assert _model_states(lora()).gathering.root_gradient == 0  # type: ignore[union-attr]
