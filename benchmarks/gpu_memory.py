"""Measure real training steps on a GPU and set them beside gpuplan's memory figures.

    python benchmarks/gpu_memory.py --list                 # the cases and gpuplan's figures (no GPU needed)
    python benchmarks/gpu_memory.py --run [--out FILE]     # on a CUDA machine: measure every case
    python benchmarks/gpu_memory.py --run --case ID ...    # some cases only
    python benchmarks/gpu_memory.py --run --device cpu --steps 1 --case smoke   # the harness itself, on a CPU

Each case is a gpuplan spec fragment (a catalog model, a fine-tuning method and its settings). ``--run``
builds the model with random weights from its config.json (transformers ``AutoModelForCausalLM.from_config``
in bf16: no download), adds PEFT LoRA where the case says so, and runs ``--steps`` steady-state steps as the
Hugging Face Trainer runs them (forward with labels, the loss taken and the output released, backward,
optimizer step, ``zero_grad(set_to_none=True)``) on random tokens of the case's shape. After the first step
(the optimizer's states are created lazily there) the peak counters are reset, so the figures are of a
steady-state step. Per case it records:

- ``allocated``: ``torch.cuda.max_memory_allocated()`` (live tensors; gpuplan's ``allocated_bytes``);
- ``reserved``: ``torch.cuda.max_memory_reserved()`` (the caching allocator's segments);
- ``device``: the GPU's memory in use as the driver counts it, ``total - free`` of ``torch.cuda.mem_get_info()``
  at the end of the run, before anything is freed: the caching allocator keeps its segments, so this is its
  peak plus the CUDA context and cuBLAS/cuDNN workspaces (what OOM depends on and nvidia-smi shows;
  gpuplan's ``per_gpu_bytes``). Run it alone on the GPU: another process's memory would count too;
- ``context``: the same reading before the model is built, with only the CUDA context created;
- ``step_s``: the median wall time of the measured steps (synchronised).

The output (``--out``, YAML) carries the GPU, driver, CUDA and library versions with every record, and
gpuplan's figures for the same spec beside each measurement, so a run can be committed to
``benchmarks/data/`` as it is. A case that runs out of memory is recorded as such (``outcome: oom``) with
gpuplan's verdict on it. Models are the catalog's Llama- and Qwen2-style dense decoders, for which a
transformers config.json follows from the catalog's dimensions (``hf_config``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuplan.catalog import get_model  # noqa: E402
from gpuplan.linter import LintOptions, lint_bytes  # noqa: E402
from gpuplan.output.estimate_json import estimate_document  # noqa: E402

GIB = 2**30
TRAIN = {"precision": "bf16", "optimizer": "adamw", "loop": "trainer", "attention": "flash"}
# transformers' attention implementation for gpuplan's finetune.attention: SDPA runs the flash kernel on
# bf16 CUDA tensors (torch.nn.functional.scaled_dot_product_attention's backend choice).
ATTENTION = {"flash": "sdpa", "eager": "eager"}
LORA = {"rank": 16, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"], "dtype": "fp32", "dropout": 0.0}


def _case(case_id: str, model: str, method: str, gpu: str = "h200-sxm", **settings: Any) -> dict[str, Any]:
    finetune: dict[str, Any] = {**TRAIN, "method": method, **settings, "hardware": {"gpu": gpu}}
    if method == "lora":
        finetune.setdefault("lora", LORA)
    return {"id": case_id, "spec": {"model": {"id": model}, "finetune": finetune}}


# Full and LoRA, with and without checkpointing, foreach and fused AdamW, at shapes where activations,
# logits or model states dominate in turn; 1B to 8B so that each fits one 80 GB or larger GPU.
CASES = [
    _case("smoke", "llama-3.2-1b", "lora", micro_batch=1, seq_len=128),
    _case("l1b-full", "llama-3.2-1b", "full", micro_batch=4, seq_len=2048),
    _case("l1b-full-ckpt", "llama-3.2-1b", "full", micro_batch=8, seq_len=2048, activation_checkpointing="full"),
    _case("l1b-full-fused", "llama-3.2-1b", "full", micro_batch=4, seq_len=2048, optimizer="adamw-fused"),
    _case("l3b-full-ckpt", "llama-3.2-3b", "full", micro_batch=4, seq_len=4096, activation_checkpointing="full"),
    _case("l3b-lora", "llama-3.2-3b", "lora", micro_batch=4, seq_len=2048),
    _case("l3b-lora-ckpt", "llama-3.2-3b", "lora", micro_batch=8, seq_len=4096, activation_checkpointing="full"),
    _case("l8b-lora", "llama-3.1-8b", "lora", micro_batch=2, seq_len=2048),
    _case("l8b-lora-ckpt", "llama-3.1-8b", "lora", micro_batch=4, seq_len=8192, activation_checkpointing="full"),
    _case("l8b-full-ckpt", "llama-3.1-8b", "full", micro_batch=1, seq_len=4096, activation_checkpointing="full"),
    _case("q7b-lora", "qwen2.5-7b", "lora", micro_batch=2, seq_len=4096),
]


def hf_config(model_id: str) -> dict[str, Any]:
    """A transformers config.json for a catalog model of the Llama or Qwen2 family: the catalog's dimensions
    under the names LlamaConfig / Qwen2Config read (transformers models/llama, models/qwen2)."""
    arch = get_model(model_id).architecture
    if arch.is_moe or arch.is_mla or arch.mlp != "gated" or arch.norm != "rms" or arch.fused_qkv:
        raise SystemExit(f"{model_id}: not a Llama- or Qwen2-style dense decoder")
    qwen = arch.attention_bias
    return {
        "architectures": ["Qwen2ForCausalLM" if qwen else "LlamaForCausalLM"],
        "model_type": "qwen2" if qwen else "llama",
        "hidden_size": arch.hidden,
        "intermediate_size": arch.intermediate,
        "num_hidden_layers": arch.layers,
        "num_attention_heads": arch.heads,
        "num_key_value_heads": arch.n_kv,
        "head_dim": arch.d_head,
        "vocab_size": arch.vocab,
        "tie_word_embeddings": arch.tie_embeddings,
        "max_position_embeddings": arch.max_position or 131072,
        "rms_norm_eps": 1e-5,
        "torch_dtype": "bfloat16",
    }


def gpuplan_figures(case: dict[str, Any]) -> dict[str, Any]:
    """gpuplan's figures for the case's spec, as `gpuplan estimate --format json` gives them."""
    document = {"version": 1, "name": case["id"], **case["spec"]}
    result = lint_bytes(f"{case['id']}.yaml", yaml.safe_dump(document).encode(), LintOptions())
    if result.analysis is None:
        codes = sorted({f.code for f in result.findings})
        raise SystemExit(f"{case['id']}: the spec does not resolve ({', '.join(codes)})")
    finetune = estimate_document(result.analysis)["finetune"]
    return {
        "allocated_gib": round(finetune["allocated_bytes"] / GIB, 3),
        "device_gib": round(finetune["per_gpu_bytes"] / GIB, 3),
        "device_high_gib": round(finetune["per_gpu_bytes_band"]["high"] / GIB, 3),
        "peak_phase": finetune["peak_phase"],
        "fits": finetune["fits"],
    }


def _versions(torch: Any, device: str) -> dict[str, Any]:
    import peft
    import transformers

    versions = {"torch": str(torch.__version__), "transformers": transformers.__version__, "peft": peft.__version__}
    if device == "cuda":
        versions |= {
            "gpu": torch.cuda.get_device_name(0),
            "cuda": torch.version.cuda,
            "driver": _driver_version(),
            "total_gib": round(torch.cuda.mem_get_info()[1] / GIB, 3),
        }
    return versions


def _driver_version() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # no NVML binding: the driver is still named by nvidia-smi, outside this run
        return "unknown (no pynvml)"


def measure(case: dict[str, Any], steps: int, device: str) -> dict[str, Any]:
    """One case: the model from its config, ``steps`` training steps, the counters (see the module doc)."""
    import torch
    import transformers

    finetune = case["spec"]["finetune"]
    cuda = device == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        base = total - free
    config = transformers.AutoConfig.for_model(**hf_config(case["spec"]["model"]["id"]))
    config._attn_implementation = ATTENTION[finetune["attention"]]
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    if finetune["method"] == "lora":
        import peft

        lora = finetune["lora"]
        adapter = peft.LoraConfig(
            r=lora["rank"], lora_alpha=2 * lora["rank"], lora_dropout=lora["dropout"], target_modules=lora["targets"]
        )
        model = peft.get_peft_model(model, adapter, autocast_adapter_dtype=lora["dtype"] == "fp32")
    if finetune.get("activation_checkpointing") == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if finetune["method"] == "lora":
            model.enable_input_require_grads()
    model.train()
    fused = finetune["optimizer"] == "adamw-fused"
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-5, fused=fused or None, foreach=None if fused else True)
    shape = (finetune.get("micro_batch", 1), finetune["seq_len"])
    times = []
    outcome = "ran"
    try:
        for step in range(steps + 1):
            tokens = torch.randint(0, config.vocab_size, shape, device=device)
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            loss = model(input_ids=tokens, labels=tokens).loss  # the Trainer keeps the loss, not the output
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            del loss
            if cuda:
                torch.cuda.synchronize()
            if step == 0 and cuda:
                torch.cuda.reset_peak_memory_stats()  # states exist now: measure steady-state steps
            if step > 0:
                times.append(time.perf_counter() - start)
    except torch.OutOfMemoryError:
        outcome = "oom"
    record: dict[str, Any] = {"id": case["id"], "outcome": outcome, "spec": case["spec"]}
    if cuda:
        free, total = torch.cuda.mem_get_info()
        record |= {
            "allocated_gib": round(torch.cuda.max_memory_allocated() / GIB, 3),
            "reserved_gib": round(torch.cuda.max_memory_reserved() / GIB, 3),
            "device_gib": round((total - free) / GIB, 3),  # segments are kept: the peak, context included
            "context_gib": round(base / GIB, 3),
        }
    if times:
        record["step_s"] = round(statistics.median(times), 4)
    del model, optimizer
    if cuda:
        torch.cuda.empty_cache()
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print the cases and gpuplan's figures")
    parser.add_argument("--run", action="store_true", help="measure the cases (a CUDA GPU unless --device cpu)")
    parser.add_argument("--case", action="append", default=[], help="only this case id (repeatable)")
    parser.add_argument("--steps", type=int, default=3, help="measured steps after the first (default 3)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--out", type=Path, help="write the records as YAML here")
    args = parser.parse_args(argv)
    known = {case["id"] for case in CASES}
    if unknown := [case for case in args.case if case not in known]:
        parser.error(f"unknown case {', '.join(unknown)}; cases: {', '.join(sorted(known))}")
    cases = [case for case in CASES if not args.case or case["id"] in args.case]
    if args.list or not args.run:
        for case in cases:
            print(f"{case['id']:<16} {json.dumps(case['spec']['finetune'])[:90]}  gpuplan: {gpuplan_figures(case)}")
        return 0
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: --run measures on a GPU (--device cpu runs the harness only)", file=sys.stderr)
        return 2
    records = []
    for case in cases:
        record = measure(case, args.steps, args.device) | {"gpuplan": gpuplan_figures(case)}
        records.append(record)
        print(json.dumps({k: v for k, v in record.items() if k != "spec"}), flush=True)
    document = {
        "measured": datetime.date.today().isoformat(),
        "versions": _versions(torch, args.device),
        "harness": "benchmarks/gpu_memory.py",
        "records": records,
    }
    if args.out:
        args.out.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
