"""benchmarks/gpu_memory.py without a GPU: its cases resolve as specs and its config.json matches the catalog."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_memory


def test_every_case_lists_with_gpuplans_figures():
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_memory.py"), "--list"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == [case["id"] for case in gpu_memory.CASES]
    assert all("'allocated_gib'" in line and "'device_high_gib'" in line for line in result.stdout.splitlines())


def test_the_config_json_of_a_catalog_model():
    # Llama 3.2 1B as meta-llama/Llama-3.2-1B's config.json states it: 16 layers of 2048, 32 heads of 64 with
    # 8 KV heads, an 8192 MLP, a 128,256-token vocabulary and tied embeddings.
    config = gpu_memory.hf_config("llama-3.2-1b")
    assert (config["model_type"], config["num_hidden_layers"], config["hidden_size"]) == ("llama", 16, 2048)
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (32, 8, 64)
    assert (config["intermediate_size"], config["vocab_size"], config["tie_word_embeddings"]) == (8192, 128256, True)
    # Qwen2.5 7B carries q/k/v biases: Qwen2's modelling code, not Llama's.
    assert gpu_memory.hf_config("qwen2.5-7b")["model_type"] == "qwen2"


def test_an_unknown_case_is_a_usage_error():
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_memory.py"), "--run", "--case", "nope"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "unknown case nope" in result.stderr
