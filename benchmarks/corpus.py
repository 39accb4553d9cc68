"""A realistic corpus of distinct specs, as an infrastructure repository holds them.

    python benchmarks/corpus.py OUT_DIR [--count 1000] [--seed 0]

Each spec is different: catalog models from 1B to 671B (dense, GQA, MQA, MoE, MLA, sliding window),
some given as a local config.json or as explicit dimensions; catalog and custom GPUs; fine-tuning
(full, LoRA, QLoRA; precisions, optimizers, sharding, checkpointing) and/or serving (contexts from
2K to 128K, concurrency, quantization, TP, SLOs, evidence); budgets, price overrides, waivers. About
half of them fail (do not fit, miss an SLO, exceed a budget, break a parallelism rule), as plans under
review do. Deterministic for a seed; the benchmarks and the fuzz run build on it.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import yaml

MODELS = [
    "llama-3.2-1b",
    "llama-3.2-3b",
    "llama-3.1-8b",
    "llama-3-8b",
    "llama-3.1-70b",
    "llama-3.3-70b",
    "llama-3.1-405b",
    "llama-2-7b",
    "llama-2-13b",
    "codellama-34b",
    "mistral-7b-v0.1",
    "mistral-7b-v0.3",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "qwen2.5-7b",
    "qwen2.5-14b",
    "qwen2.5-32b",
    "qwen2.5-72b",
    "gemma-2-9b",
    "gemma-2-27b",
    "phi-3-mini",
    "phi-4",
    "falcon-7b",
    "starcoder-15b",
    "deepseek-v3",
]
TRAIN_GPUS = ["h100-sxm", "h200-sxm", "a100-sxm-80gb", "a100-sxm-40gb", "b200-hgx", "mi300x", "l40s", "h100-pcie"]
SERVE_GPUS = ["l4", "l40s", "a10g", "a100-pcie-80gb", "h100-sxm", "h200-nvl", "h100-nvl", "mi300x", "rtx-4090"]
# Local config.json files the corpus ships beside its specs (dimensions of real released configs).
MISTRAL_7B = {  # mistralai/Mistral-7B-v0.1 config.json, sliding window included
    "model_type": "mistral",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 32000,
    "sliding_window": 4096,
    "max_position_embeddings": 32768,
}
CONFIGS = {
    "acme-7b": MISTRAL_7B,
    # mistralai/Mixtral-8x7B-v0.1: Mistral 7B's attention with 8 experts, 2 per token, no window
    "acme-moe": {
        **{key: value for key, value in MISTRAL_7B.items() if key != "sliding_window"},
        "model_type": "mixtral",
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
    },
    "acme-awq": {
        "model_type": "qwen2",
        "num_hidden_layers": 28,
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "intermediate_size": 18944,
        "vocab_size": 152064,
        "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128},
    },
}


def _hardware(rng: random.Random, gpu: str, multi: bool) -> dict[str, Any]:
    if not multi:
        return {"gpu": gpu}
    tp = rng.choice([1, 2, 4, 8])
    return {"gpu": gpu, "count": tp * rng.choice([1, 1, 2]), "tensor_parallel": tp}


def _finetune(rng: random.Random) -> dict[str, Any]:
    method = rng.choice(["full", "lora", "lora", "qlora"])
    job: dict[str, Any] = {
        "method": method,
        "precision": rng.choice(["bf16-mixed", "bf16-mixed", "bf16", "fp16-mixed"]),
        "optimizer": rng.choice(["adamw", "adamw-fused", "adamw-8bit", "sgd", "adafactor"]),
        "micro_batch": rng.choice([1, 2, 4, 8]),
        "seq_len": rng.choice([1024, 2048, 4096, 8192]),
        "gradient_accumulation": rng.choice([1, 4, 8, 16]),
        "activation_checkpointing": rng.random() < 0.6,
        "fused_loss": rng.random() < 0.3,
        "tokens": rng.choice([None, 10**8, 5 * 10**8, 2 * 10**9, 2 * 10**10]),
    }
    if method != "full":
        job["lora"] = {
            "rank": rng.choice([8, 16, 32, 64]),
            "targets": rng.choice([["q_proj", "v_proj"], ["q_proj", "k_proj", "v_proj", "o_proj"]]),
        }
    gpu = rng.choice(TRAIN_GPUS)
    hardware = {"gpu": gpu, "count": rng.choice([1, 1, 2, 4, 8])}
    if hardware["count"] > 1:
        job["sharding"] = rng.choice(["none", "zero2", "zero3", "fsdp"])
    if rng.random() < 0.3:
        job["checkpoints"] = {"every_hours": rng.choice([1, 2, 4]), "keep": rng.choice([1, 3]), "storage_gb": 500}
    job["hardware"] = hardware
    return {key: value for key, value in job.items() if value is not None}


def _serve(rng: random.Random, index: int) -> dict[str, Any]:
    context = rng.choice([2048, 4096, 8192, 16384, 32768, 131072])
    job: dict[str, Any] = {
        "context": context,
        "output_tokens": rng.choice([128, 256, 512, 1024]),
        "concurrency": rng.choice([1, 4, 8, 16, 32, 64, 128]),
        "hardware": _hardware(rng, rng.choice(SERVE_GPUS), rng.random() < 0.5),
    }
    if rng.random() < 0.4:
        job["quantization"] = rng.choice(["none", "fp8", "int8", "int4-awq"])
    if rng.random() < 0.5:
        job["slo"] = {"ttft_ms": rng.choice([200, 500, 1000, 3000]), "tpot_ms": rng.choice([20, 40, 80])}
    if rng.random() < 0.3:
        job["category"] = rng.choice(["short-fast", "long-context", "high-throughput"])
    if rng.random() < 0.2:
        job["evidence"] = [
            {
                "category": rng.choice(["short-fast", "long-context"]),
                "metric": "tpot_ms",
                "value": round(rng.uniform(5, 80), 1),
                "source": f"load test {index}",
            }
        ]
    return job


def spec(index: int, seed: int = 0) -> dict[str, Any]:
    """The ``index``-th spec of the corpus: a plain mapping, ready for yaml.safe_dump."""
    rng = random.Random(seed * 1_000_003 + index)
    document: dict[str, Any] = {"version": 1, "name": f"workload-{index:05d}", "owner": rng.choice(["ml", "infra"])}
    roll = rng.random()
    if roll < 0.8:
        document["model"] = {"id": rng.choice(MODELS)}
    elif roll < 0.9:
        document["model"] = {"config": f"configs/{rng.choice(sorted(CONFIGS))}/config.json"}
    else:
        heads = rng.choice([16, 32, 64])
        document["model"] = {
            "architecture": {
                "layers": rng.choice([24, 32, 48]),
                "hidden": heads * 128,
                "heads": heads,
                "kv_heads": 8,
                "intermediate": heads * 128 * 3,
                "vocab": rng.choice([32000, 128256]),
            }
        }
    jobs = rng.random()
    if jobs < 0.35:
        document["finetune"] = _finetune(rng)
    elif jobs < 0.85:
        document["serve"] = _serve(rng, index)
    else:
        document["finetune"], document["serve"] = _finetune(rng), _serve(rng, index)
    if rng.random() < 0.1:
        document["gpus"] = {
            "acme-accel": {
                "memory_gib": rng.choice([48, 96, 192]),
                "bandwidth_tbs": 2.0,
                "bf16_tflops": 400,
                "price_per_hour": 2.0,
            }
        }
        document["serve" if "serve" in document else "finetune"]["hardware"]["gpu"] = "acme-accel"
    budget: dict[str, Any] = {}
    if rng.random() < 0.5:
        budget["serve_monthly"] = rng.choice([1000, 5000, 20000, 100000])
        budget["finetune_total"] = rng.choice([500, 5000, 50000])
    if rng.random() < 0.2:
        budget["prices"] = {"l4": 0.8, "h100-sxm": 2.5}
        budget["prices_date"] = "2026-11-20"
    if budget:
        document["budget"] = budget
    if rng.random() < 0.15:
        document["waivers"] = [
            {"rule": rng.choice(["GP202", "GP302", "GP505"]), "reason": "accepted", "approved_by": "lead"}
        ]
    return document


def write_corpus(folder: Path, count: int, seed: int = 0) -> list[Path]:
    """Write ``count`` distinct specs (and the config.json files some name) under ``folder``."""
    for name, config in CONFIGS.items():
        target = folder / "configs" / name / "config.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(config, indent=2))
    paths = []
    for index in range(count):
        path = folder / f"spec{index:05d}.yaml"
        path.write_text(yaml.safe_dump(spec(index, seed), sort_keys=False))
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    paths = write_corpus(args.out_dir, args.count, args.seed)
    print(f"wrote {len(paths)} specs under {args.out_dir}")


if __name__ == "__main__":
    main()
