"""LoRA on a mixture-of-experts model adapts every expert its MLP targets reach (finetune.lora.experts: all), or
the shared experts and dense layers alone (shared). gpuplan counted one expert's adapters per layer: Qwen3-30B-A3B
with gate/up/down_proj at rank 16 read 6,488,064 trainable parameters where peft adapts 830,472,192, and its
fine-tune was 13 GB short."""

import json

import pytest
from conftest import run_cli

MLP = "[gate_proj, up_proj, down_proj]"


def spec(tmp_path, model: str, rank: int, experts: str = "all") -> str:
    """A LoRA fine-tune of ``model`` on its MLP targets: fp32 adapters under bf16 autocast (fp32 gradients and
    AdamW states), one B200."""
    path = tmp_path / f"{model}-{experts}.yaml"
    path.write_text(
        f"version: 1\nname: t\nmodel: {{id: {model}}}\nfinetune:\n  method: lora\n  precision: bf16-mixed\n"
        f"  lora: {{rank: {rank}, targets: {MLP}, experts: {experts}, dtype: fp32}}\n  micro_batch: 1\n"
        "  seq_len: 1024\n  activation_checkpointing: true\n  hardware: {gpu: b200-hgx, count: 1}\n"
    )
    return str(path)


def estimate(path: str) -> dict:
    _, out, _ = run_cli("estimate", "--format", "json", path)
    return json.loads(out)["finetune"]


@pytest.mark.parametrize(
    ("model", "rank", "experts", "params"),
    [
        # Qwen3-30B-A3B: 48 MoE layers of 128 experts, hidden 2048, expert width 768, no shared expert:
        # 48 x 128 x 3 matrices x 16 x (2048 + 768) = 830,472,192; shared: no MLP is left to adapt.
        ("qwen3-30b-a3b", 16, "all", 830_472_192),
        ("qwen3-30b-a3b", 16, "shared", 0),
        # DeepSeek-V3: 3 dense layers (width 18,432): 3 x 3 x 8 x (7168 + 18432) = 1,843,200; 58 MoE layers of
        # 256 routed experts and one shared (width 2048 each): 58 x (256 + 1) x 3 x 8 x (7168 + 2048) =
        # 3,296,968,704; together 3,298,811,904. Shared alone: 1,843,200 + 58 x 3 x 8 x 9216 = 14,671,872.
        ("deepseek-v3", 8, "all", 3_298_811_904),
        ("deepseek-v3", 8, "shared", 14_671_872),
    ],
)
def test_the_mlp_targets_adapt_every_expert_they_reach(tmp_path, model, rank, experts, params):
    assert estimate(spec(tmp_path, model, rank, experts))["trainable_params"] == params


def test_the_expert_adapters_states_are_on_the_gpu(tmp_path):
    # Qwen3-30B-A3B on one GPU: the 830,472,192 expert adapter parameters hold fp32 weights, gradients and two
    # AdamW states (16 B each: 13,287,555,072 B), which the shared-only run (no MLP adapted) does not hold.
    everything = estimate(spec(tmp_path, "qwen3-30b-a3b", 16, "all"))
    shared = estimate(spec(tmp_path, "qwen3-30b-a3b", 16, "shared"))
    parts = ("weights", "gradients", "optimizer")
    # (the peaks differ in phase: at the optimizer step with the experts, in backward without; the model states
    # are the same at every phase)
    assert sum(everything["breakdown"].get(p, 0) - shared["breakdown"].get(p, 0) for p in parts) == 830_472_192 * 16
