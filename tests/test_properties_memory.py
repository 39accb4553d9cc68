"""Hypothesis properties of the memory model."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from gpuplan.architecture import Architecture
from gpuplan.estimate.serving import ServingSetup, estimate_serving, kv_bytes_per_sequence
from gpuplan.estimate.training import TrainingSetup, estimate_training

architectures = st.builds(
    lambda layers, heads, group, head_dim, mult, vocab, gated: Architecture(
        layers=layers,
        hidden=heads * head_dim,
        heads=heads,
        kv_heads=heads // group,
        intermediate=heads * head_dim * mult,
        vocab=vocab,
        mlp="gated" if gated else "plain",
    ),
    st.integers(1, 48),
    st.sampled_from([8, 16, 32]),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([64, 128]),
    st.integers(2, 4),
    st.integers(1000, 200_000),
    st.booleans(),
)
setups = st.builds(
    lambda arch, method, precision, optimizer, batch, seq, ckpt, attention: TrainingSetup(
        architecture=arch,
        method=method,
        precision=precision,
        optimizer=optimizer,
        micro_batch=batch,
        seq_len=seq,
        checkpointing=ckpt,
        attention=attention,
    ),
    architectures,
    st.sampled_from(["full", "lora", "qlora"]),
    st.sampled_from(["bf16", "bf16-mixed", "fp32"]),
    st.sampled_from(["adamw", "adamw-fused", "adamw-8bit", "sgd", "adafactor"]),
    st.integers(1, 8),
    st.integers(16, 8192),
    st.booleans(),
    st.sampled_from(["flash", "eager"]),
)


def peak(setup: TrainingSetup) -> int:
    return estimate_training(setup, 0).tensor_peak


@given(setups, st.sampled_from(["micro_batch", "seq_len", "lora_rank"]))
def test_training_memory_grows_with_batch_sequence_and_rank(setup, field):
    bigger = replace(setup, **{field: getattr(setup, field) * 2})
    assert peak(bigger) >= peak(setup)


@given(setups)
def test_training_memory_grows_with_layers_and_vocabulary(setup):
    arch = setup.architecture
    assert peak(replace(setup, architecture=replace(arch, layers=arch.layers + 1))) >= peak(setup)
    assert peak(replace(setup, architecture=replace(arch, vocab=arch.vocab * 2))) >= peak(setup)


@given(setups)
def test_qlora_le_lora_le_full(setup):
    # Like for like: adapters in the activation dtype. peft's fp32 adapters save fp32 copies of their
    # inputs, so a LoRA run can exceed full fine-tuning on small models at long sequences (PEFT #1514).
    same = replace(setup, lora_bytes=2 if setup.precision != "fp32" else 4)
    full, lora, qlora = (peak(replace(same, method=m)) for m in ("full", "lora", "qlora"))
    assert lora <= full
    # bitsandbytes' 4-bit matmul saves the input of every quantized linear (both norm outputs, the
    # attention output, the down_proj input), so QLoRA may exceed LoRA by at most those bytes.
    arch, act = setup.architecture, 4 if setup.precision == "fp32" else 2
    saved_inputs = arch.layers * setup.tokens * act * (2 * arch.hidden + arch.q_width + arch.intermediate)
    assert qlora <= lora + saved_inputs


def _units(arch: Architecture) -> float:
    return arch.params / max(arch.largest_layer_params, arch.embedding_params())


# ZeRO-3 gathers whole units (a layer, or the embedding wrapped apart: the current and the prefetched one,
# and the current one's gradient), which only pays off once a model is many units big; real models are
# (Llama-3-8B: 15 embedding-sized units, Llama-3-70B: 67).
@given(setups.filter(lambda s: s.method == "full" and _units(s.architecture) >= 12), st.sampled_from([2, 4, 8]))
def test_sharding_and_tensor_parallel_reduce_per_gpu_memory(setup, gpus):
    spread = replace(setup, gpus=gpus)
    none, z1, z2, z3 = (peak(replace(spread, sharding=s)) for s in ("none", "zero1", "zero2", "zero3"))
    assert z3 <= z2 <= z1 <= none
    heads = setup.architecture.heads
    tp_values = [t for t in (1, 2, 4, 8) if heads % t == 0]
    totals = [peak(replace(setup, tensor_parallel=t, gpus=t)) for t in tp_values]
    assert totals == sorted(totals, reverse=True)


@given(setups)
def test_phases_are_consistent_with_the_peak(setup):
    memory = estimate_training(setup, 123)
    assert memory.tensor_peak == max(sum(parts.values()) for parts in memory.phases.values())
    assert sum(memory.breakdown.values()) == memory.per_gpu == memory.tensor_peak + 123
    assert all(value >= 0 for parts in memory.phases.values() for value in parts.values())


@given(architectures, st.integers(1, 100_000), st.integers(1, 512), st.sampled_from([1, 2]))
def test_kv_bytes_are_linear_in_tokens(arch, blocks, concurrency, kv_bytes):
    tokens = blocks * 16  # whole blocks: no rounding
    one = kv_bytes_per_sequence(arch, tokens, kv_bytes, 1, 1)
    assert kv_bytes_per_sequence(arch, 2 * tokens, kv_bytes, 1, 1) == 2 * one
    assert one == arch.kv_bytes_per_token(kv_bytes) * tokens


@given(architectures, st.integers(1, 65536), st.integers(1, 256))
def test_serving_memory_grows_with_context_and_concurrency(arch, context, concurrency):
    setup = ServingSetup(architecture=arch, context=context, concurrency=concurrency)
    base = estimate_serving(setup, 80 * 2**30).per_gpu
    assert estimate_serving(replace(setup, context=context * 2), 80 * 2**30).per_gpu >= base
    assert estimate_serving(replace(setup, concurrency=concurrency * 2), 80 * 2**30).per_gpu >= base


@given(architectures, st.integers(1, 32768), st.integers(1, 64), st.integers(10, 200), st.integers(1, 100))
def test_fits_on_a_gpu_implies_fits_on_any_larger_one(arch, context, concurrency, gib, extra):
    setup = ServingSetup(architecture=arch, context=context, concurrency=concurrency)
    if estimate_serving(setup, gib * 2**30).fits:
        assert estimate_serving(setup, (gib + extra) * 2**30).fits
