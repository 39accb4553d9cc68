"""Toy decoders whose memory and speed tests derive by hand, to the byte and to the FLOP.

Small enough that every byte can be counted on paper: 8-wide, two heads of 4 over one KV head, a
vocabulary of 32 and 64 positions.
"""

from __future__ import annotations

from gpuplan.architecture import Architecture

TINY = Architecture(layers=2, hidden=8, heads=2, kv_heads=1, intermediate=16, vocab=32, max_position=64)
# Seven layers, every third one full attention (layers 2 and 5), the rest a sliding window of 8.
HYBRID = Architecture(
    layers=7,
    hidden=8,
    heads=2,
    kv_heads=1,
    intermediate=16,
    vocab=32,
    sliding_window=8,
    sliding_layers=3,
    max_position=64,
)
# TINY's attention with 4 routed experts (2 per token) of width 8 in each layer.
MOE = Architecture(
    layers=2,
    hidden=8,
    heads=2,
    kv_heads=1,
    intermediate=16,
    vocab=32,
    experts=4,
    experts_per_token=2,
    expert_intermediate=8,
    max_position=64,
)
