"""vLLM's memory sizing by release (``serve.engine_version``): each expected value below is read from that
release's own code (the source distribution's ``vllm/``; the module docstring of
gpuplan/estimate/vllm_releases.py names the function) and worked out by hand, not through the code under
test. Then the out-of-sample startup logs (benchmarks/data/vllm_published_logs.yaml) are well formed and no
start that failed is called a start."""

from __future__ import annotations

import json
import sys

import pytest
import yaml
from conftest import ROOT, run_cli

from gpuplan.catalog import get_gpu, get_model
from gpuplan.estimate.serving import ServingSetup, cuda_graph_bytes, estimate_serving, sampler_warmup_bytes
from gpuplan.estimate.vllm_releases import CUDA_CONTEXT_BYTES, SIZING_CHANGES, sizing_line, vllm_release
from gpuplan.releases import parse_version
from gpuplan.units import GIB, MIB

sys.path.insert(0, str(ROOT / "benchmarks"))

from accuracy import estimate
from serving_memory import VLLM_LOGS, score

H100 = get_gpu("h100-sxm")
LLAMA = get_model("llama-3.1-8b").architecture


def test_versions_parse_as_pip_and_vllm_print_them():
    assert parse_version("0.6.4.post1") == (0, 6, 4)
    assert parse_version("0.10.1.dev101+gbda9d0535") == (0, 10, 1)
    assert parse_version("v0.8") == (0, 8, 0)
    with pytest.raises(ValueError):
        parse_version("latest")


@pytest.mark.parametrize(
    ("version", "gpu", "context", "chunks", "expected"),
    [
        # V0 (vllm/engine/arg_utils.py): 256 sequences; no chunked prefill up to 32K: max(max_model_len, 2048)
        ("0.6.4", "rtx-3090", 20_000, True, (20_000, 256)),
        ("0.6.4", "rtx-3090", 1_000, True, (2_048, 256)),
        # above 32K it chunks by itself: 512 tokens until 0.6.4, 2,048 from 0.6.5
        ("0.6.4", "h100-sxm", 40_000, True, (512, 256)),
        ("0.7.2", "h100-sxm", 40_000, True, (2_048, 256)),
        # ... but not for a sliding-window model, LoRA or speculative decoding
        ("0.7.2", "h100-sxm", 40_000, False, (40_000, 256)),
        # V1 0.8.0-0.8.3: 1,024 sequences on every GPU; 8,192 tokens on a GPU named H100/H200, else 2,048;
        # 0.8.4 (PR #16158): 256 sequences off H100/H200 (arg_utils.py: default_max_num_seqs)
        ("0.8.0", "h100-sxm", 8_192, True, (8_192, 1_024)),
        ("0.8.3", "l40s", 8_192, True, (2_048, 1_024)),
        ("0.8.4", "l40s", 8_192, True, (2_048, 256)),
        ("0.8.4", "h200-sxm", 8_192, True, (8_192, 1_024)),
        # 0.8.5: by memory, at least 70 GiB (the A100 80GB too); from 0.9.0 the A100 takes the small pair
        ("0.8.5", "a100-sxm-80gb", 8_192, True, (8_192, 1_024)),
        ("0.9.0", "a100-sxm-80gb", 8_192, True, (2_048, 256)),
        ("0.19", "l40s", 8_192, True, (2_048, 256)),
        # 0.28.0: at least 160 GiB gets 16,384 tokens; the H200's 141 GB stays at 8,192
        ("0.28.0", "b200-hgx", 8_192, True, (16_384, 1_024)),
        ("0.28.0", "h200-sxm", 8_192, True, (8_192, 1_024)),
    ],
)
def test_batch_defaults_by_release(version, gpu, context, chunks, expected):
    device = get_gpu(gpu)
    assert vllm_release(version).batch_defaults(device.memory_bytes, device.id, context, chunks) == expected


def test_the_sampler_warm_up_per_logit():
    # The sort path: bf16 logits 2 + their fp32 copy 4 + sorted values 4 and int64 indices 8 = 18, plus
    # the sort's workspace (aten SortStable.cu): from 128 rows an int64 index 8 and CUB's alternates 4 + 8
    # = 38; 2-127 rows two int2 arrays 16 and CUB's 12 = 46; one row CUB's alone = 30.
    assert vllm_release("0.10.2").sampler_bytes_per_logit(1024) == 38
    assert vllm_release("0.6.4").sampler_bytes_per_logit(256) == 38
    assert vllm_release("0.16.0").sampler_bytes_per_logit(64) == 46
    assert vllm_release("0.16.0").sampler_bytes_per_logit(1) == 30
    # 0.17.0 on: the Triton kernel from 8 rows (bf16 2 + fp32 4 + probabilities 4 + noise 4), the sort below
    assert vllm_release("0.17.0").sampler_bytes_per_logit(8) == 14
    assert vllm_release("0.19").sampler_bytes_per_logit(7) == 46
    # 0.10.2's warm-up of Llama-3.1-8B on an H100 (1,024 requests of 128,256 logits, 8,192 tokens' hidden
    # states): 1,024 x 128,256 x 38 + 8,192 x 4,096 x 2 = 5,057,675,264 B = 4.71 GiB; the 0.10.2 log of
    # llm-d measured 4.76 (out of sample).
    warm_up = sampler_warmup_bytes(LLAMA, 1024, 8192, vllm_release("0.10.2"))
    assert warm_up == 1024 * 128_256 * 38 + 8192 * 4096 * 2
    assert warm_up / GIB == pytest.approx(4.71, abs=0.005)


def test_capture_sizes_and_modes():
    # V0: 1, 2, 4, then 8..256 step 8 for 256 sequences: 3 + 32 = 35 graphs, one mode
    assert vllm_release("0.7.2").capture_sizes(256, 2048) == (35,)
    # V1 0.8-0.9: up to 512 in steps of 8 (3 + 64 = 67), filtered to the batched tokens (2,048: all of them)
    assert vllm_release("0.9.2").capture_sizes(256, 2048) == (67,)
    # 0.10.0: capped at 2 x max_num_seqs: 128 sequences -> 256 -> 3 + 32 = 35
    assert vllm_release("0.10.0").capture_sizes(128, 8192) == (35,)
    # 0.11.0: PIECEWISE for every size, FULL for those up to max_num_seqs (all 67 at 1,024 sequences);
    # 0.11.2: steps of 16 above 256: 3 + 31 + 17 = 51 (the v0.19 logs' 51 in both modes)
    assert vllm_release("0.11.0").capture_sizes(1024, 8192) == (67, 67)
    assert vllm_release("0.11.2").capture_sizes(1024, 8192) == (51, 51)
    # 256 sequences: PIECEWISE up to 512 (51 sizes), FULL up to 256: 1, 2, 4, 8..248, 256 = 35 (0.21's log:
    # "Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 (largest=256)", LMCache#3430)
    assert vllm_release("0.21.0").capture_sizes(256, 2048) == (51, 35)
    # A first capture of 200 MiB per mode, 6 MiB for every further graph: V0's 35 graphs, 200 + 34 x 6 MiB;
    # 0.21's 51 + 35: 2 x 200 + (50 + 34) x 6 MiB.
    assert cuda_graph_bytes(256, 2048, vllm_release("0.7.2")) == (200 + 34 * 6) * MIB
    assert cuda_graph_bytes(256, 2048, vllm_release("0.21.0")) == (2 * 200 + 84 * 6) * MIB


@pytest.mark.parametrize(
    ("version", "context", "graphs", "utilization", "block", "clamped"),
    [
        ("0.6.3", False, False, 0.9, 16, (0, 6, 3)),
        ("0.6.4", True, False, 0.9, 16, (0, 6, 4)),  # total - free: the context counts (PR #9352)
        ("0.6.5", False, False, 0.9, 16, (0, 6, 5)),  # memory_profiling: increases only (PR #10511)
        ("0.8.0", True, False, 0.9, 16, (0, 8, 0)),  # V1's determine_available_memory, as 0.6.4's
        ("0.9.1", False, False, 0.9, 16, (0, 9, 1)),  # V1 memory_profiling (PR #19312)
        ("0.19", False, False, 0.9, 16, (0, 19, 0)),  # the graph estimate computed, not subtracted
        ("0.20.0", False, True, 0.92, 16, (0, 20, 0)),  # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1
        ("0.34.0", False, True, 1.0, 64, (0, 34, 0)),  # the extensible KV cache, 64-token blocks
        ("0.5.4", False, False, 0.9, 16, (0, 6, 0)),  # older than modelled: 0.6.0's
        ("0.40", False, True, 1.0, 64, (0, 34, 0)),  # newer than modelled: 0.34.0's
    ],
)
def test_what_counts_against_the_budget(version, context, graphs, utilization, block, clamped):
    release = vllm_release(version)
    assert (release.context_in_budget, release.graphs_in_budget, release.default_utilization) == (
        context,
        graphs,
        utilization,
    )
    assert (release.block_tokens, release.version) == (block, clamped)


def test_model_runner_v2_from_0_29():
    # Every model runs on model runner V2 from 0.29.0 (use_v2_model_runner). Its profile samples greedily until
    # 0.32: the bf16 logits alone (2 B), or over TP ranks the all-gather of compute_logits, 4 + 2/TP B; from
    # 0.33 a second pass through FlashInfer's top-k/top-p holds bf16 2 + fp32 4 + masked fp32 4 + probs 4.
    assert vllm_release("0.30.0").sampler_bytes_per_logit(1024) == 2
    assert vllm_release("0.30.0").sampler_bytes_per_logit(1024, 4) == 4 + 2 / 4
    assert vllm_release("0.33.0").sampler_bytes_per_logit(1024) == 14
    assert vllm_release("0.28.0").sampler_bytes_per_logit(1024) == 14  # still the V1 runner's Triton path
    # Its per-sequence state, counted in the budget: int32 bin counts [1,024 x 128,256] = 525,336,576 B and
    # two int32 [1,024 x ceil(128,256 / 32) = 4,008] masks = 32,833,536 B.
    assert vllm_release("0.29.0").sampler_state_bytes(1024, 128_256) == 525_336_576 + 32_833_536
    assert vllm_release("0.28.0").sampler_state_bytes(1024, 128_256) == 0
    # Llama-3.1-8B on one H100 at 0.30: the runtime term carries that state beside the 0.25 GiB non-torch.
    memory = estimate_serving(
        ServingSetup(architecture=LLAMA, context=8192, concurrency=1, release=vllm_release("0.30.0")),
        H100.usable_bytes,
    )
    assert memory.runtime == round(0.25 * GIB) + 558_170_112


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        # VllmConfig.use_v2_model_runner and _is_default_v2_model_runner_model of each release (vllm/config/vllm.py),
        # over RUNNER_MODELS' order: Qwen3 dense, Llama dense, Llama from a quantized checkpoint, Qwen2-MoE,
        # Qwen2 dense, Mixtral (MoE), a DeepseekV4ForCausalLM MoE, Qwen3-Next (hybrid), a KimiK3 hybrid.
        ("0.21.1", "000000000"),  # no model runner V2 by default
        ("0.22.0", "100000000"),  # {Qwen3ForCausalLM}, not MoE, not is_quantized
        ("0.23.0", "110000000"),  # {Llama, Mistral, Qwen3}ForCausalLM, not MoE, not is_quantized
        ("0.24.0", "111100000"),  # those and {DeepseekV2, Qwen2Moe, GraniteMoe}, any checkpoint, MoE or not
        ("0.25.0", "111110000"),  # not hybrid: listed (the three MoE classes) or not MoE
        ("0.26.0", "111110000"),  # + Inkling, LongcatFlashNgram
        ("0.27.0", "111110001"),  # a hybrid only when listed; + KimiK3ForConditionalGeneration
        ("0.28.0", "111110101"),  # + DeepseekV4ForCausalLM
        ("0.29.0", "111111111"),  # every model
    ],
)
def test_which_models_run_on_model_runner_v2(version, expected):
    release = vllm_release(version)
    chosen = "".join(
        str(int(release.for_deployment(classes, get_model(model).architecture, quantized, "", "sm90").v2_runner))
        for model, classes, quantized in RUNNER_MODELS
    )
    assert chosen == expected


def test_model_runner_v2_on_amd_gpus_and_with_a_draft_model():
    qwen3, deepseek = get_model("qwen3-8b").architecture, get_model("deepseek-v3").architecture
    # A separate draft model (vLLM's draft_model method) is not one V2 supports: V1 in every release.
    assert not vllm_release("0.30.0").for_deployment(("Qwen3ForCausalLM",), qwen3, False, "draft", "sm90").v2_runner
    assert vllm_release("0.30.0").for_deployment(("Qwen3ForCausalLM",), qwen3, False, "eagle", "sm90").v2_runner
    # 0.29 on: DeepSeek-V3.2 and V4 keep the V1 runner on ROCm (ROCM_DEFAULT_MRV1_ARCHITECTURES) only.
    v32 = ("DeepseekV32ForCausalLM",)
    assert not vllm_release("0.30.0").for_deployment(v32, deepseek, False, "", "gfx942").v2_runner
    assert vllm_release("0.30.0").for_deployment(v32, deepseek, False, "", "sm90").v2_runner
    # 0.27 listed KimiK3 but not on ROCm (ROCM_EXCLUDED_V2_MODEL_RUNNER_ARCHITECTURES).
    next_arch = get_model("qwen3-next-80b-a3b").architecture
    kimi = ("KimiK3ForConditionalGeneration",)
    assert vllm_release("0.27.0").for_deployment(kimi, next_arch, False, "", "sm90").v2_runner
    assert not vllm_release("0.27.0").for_deployment(kimi, next_arch, False, "", "gfx942").v2_runner


def test_model_runner_v2_before_0_29_samples_and_keeps_its_state_as_each_release_did():
    qwen3 = get_model("qwen3-8b")
    runner = {
        v: vllm_release(v).for_deployment(qwen3.classes, qwen3.architecture, False, "", "sm90")
        for v in ("0.24", "0.26", "0.27")
    }
    # Until 0.25 apply_sampling_params copies the bf16 logits to fp32 (2 + 4 B), above the TP all-gather (4 + 2/TP);
    # 0.26 samples them in place, and 0.27 on the greedy dummy requests need no processing: 2 B.
    assert runner["0.24"].sampler_bytes_per_logit(1024) == 6 and runner["0.24"].sampler_bytes_per_logit(1024, 2) == 6
    assert runner["0.26"].sampler_bytes_per_logit(1024) == 2 and runner["0.27"].sampler_bytes_per_logit(1024, 2) == 5
    # Qwen3-8B (vocabulary 151,936) at 1,024 sequences: bin counts 4 x 1,024 x 151,936 = 622,329,856 B and two
    # masks of 4 x 1,024 x ceil(151,936 / 32) = 4,748, 2 x 19,447,808 = 38,895,616 B: 661,225,472 B. Made after
    # the weights load and before the profile, it is outside what memory_profiling counts until 0.26 (weights,
    # the profile's rise, non-torch memory) and inside total_consumed from 0.27.
    state = 622_329_856 + 38_895_616
    memory = {
        v: estimate_serving(
            ServingSetup(architecture=qwen3.architecture, context=8192, concurrency=1, release=runner[v]),
            H100.usable_bytes,
        )
        for v in ("0.24", "0.26", "0.27")
    }
    assert (memory["0.24"].runtime, memory["0.24"].outside_budget) == (round(0.25 * GIB), state)
    assert (memory["0.27"].runtime, memory["0.27"].outside_budget) == (round(0.25 * GIB) + state, 0)
    assert memory["0.24"].outside_what == "model runner V2's sampler state"
    # Beside the budget it takes no KV room (0.26 and 0.27 sample alike) but must fit the GPU beside the budget.
    assert memory["0.26"].kv_available - memory["0.27"].kv_available == state
    assert not estimate_serving(
        ServingSetup(
            architecture=qwen3.architecture,
            context=8192,
            concurrency=1,
            release=runner["0.24"],
            memory_utilization=0.995,
        ),
        H100.usable_bytes,
    ).outside_fits


def test_what_differs_on_amd_and_blackwell_gpus():
    # The graph estimate is taken from the budget on CUDA from 0.20.0 and on ROCm from 0.26.0 (0.20's
    # gpu_worker.py: not is_rocm(); 0.21-0.25: is_cuda(); 0.26: is_cuda_alike()).
    assert vllm_release("0.22.1").graphs_counted("sm90") and not vllm_release("0.22.1").graphs_counted("gfx942")
    assert vllm_release("0.26.0").graphs_counted("gfx942")
    # 0.34's extensible cache keeps at least 1 GiB free on CUDA, 3 GiB on ROCm.
    assert (vllm_release("0.34.0").kv_margin_floor("sm90"), vllm_release("0.34.0").kv_margin_floor("gfx950")) == (
        GIB,
        3 * GIB,
    )
    # From 0.28.0 data-centre Blackwell (compute capability 10.x) captures up to 1,024: 3 + 31 + 49 sizes
    # (256..1,024 in steps of 16), both modes at 1,024 sequences; other GPUs stop at 512 (51).
    assert vllm_release("0.28.0").capture_sizes(1024, 16384, "sm100") == (83, 83)
    assert vllm_release("0.28.0").capture_sizes(1024, 16384, "sm90") == (51, 51)
    assert vllm_release("0.27.1").capture_sizes(1024, 16384, "sm100") == (51, 51)


def test_a_release_moves_the_pool_by_its_own_mechanisms():
    # Llama-3.1-8B on one H100 at 8,192 tokens, utilization 0.9: v0.19 and 0.8.0 profile the same 8,192
    # tokens over 1,024 requests, but 0.8.0 sorts the logits (38 B, not 14, per logit) and pays for the
    # CUDA context (0.61 GiB): its pool is smaller by 1,024 x 128,256 x 24 + CUDA_CONTEXT_BYTES.
    base = ServingSetup(architecture=LLAMA, context=8192, concurrency=1, memory_utilization=0.9)
    new = estimate_serving(base, H100.usable_bytes)
    old = estimate_serving(
        ServingSetup(
            architecture=LLAMA, context=8192, concurrency=1, memory_utilization=0.9, release=vllm_release("0.8.0")
        ),
        H100.usable_bytes,
    )
    assert new.kv_available - old.kv_available == 1024 * 128_256 * (38 - 14) + CUDA_CONTEXT_BYTES
    # 0.20.0 takes its graph estimate (51 sizes x 2 modes: 2 x 200 + 100 x 6 MiB) from the budget first.
    later = estimate_serving(
        ServingSetup(
            architecture=LLAMA, context=8192, concurrency=1, memory_utilization=0.9, release=vllm_release("0.20.0")
        ),
        H100.usable_bytes,
    )
    assert new.kv_available - later.kv_available == (2 * 200 + 100 * 6) * MIB
    assert later.graphs_in_budget and not new.graphs_in_budget


def test_engine_version_in_a_spec(tmp_path):
    spec = tmp_path / "old.yaml"
    spec.write_text(
        "version: 1\nname: old\nmodel: {id: llama-3.1-8b}\n"
        'serve: {engine_version: "0.6.4", context: 20000, concurrency: 1, hardware: {gpu: rtx-3090}}\n'
    )
    code, out, _ = run_cli("estimate", str(spec))
    assert code == 0 and "vLLM v0.6.4 (V0 engine, OpenAI API server defaults)" in out
    # YAML reads an unquoted 0.10 as the number 0.1: a type error with the way out.
    spec.write_text(spec.read_text().replace('"0.6.4"', "0.10"))
    code, out, _ = run_cli("lint", str(spec))
    assert code == 1 and "GP102" in out and "write it in quotes" in out
    # Another engine's memory is modelled at one release: GP026 at the setting.
    spec.write_text(spec.read_text().replace("0.10", '"0.10", engine: sglang'))
    code, out, _ = run_cli("lint", str(spec))
    assert code == 1 and "GP026" in out and "serve.engine_version names a vLLM release" in out


def test_the_runner_follows_the_config_json_class(tmp_path):
    # The same dimensions (Llama 3.1 8B's) under two class names: 0.23 runs LlamaForCausalLM on model runner V2
    # and keeps Qwen2ForCausalLM on V1, whose sampler warm-up (Triton, 14 B per logit) differs from V2's (6 B).
    config = {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
    }
    labels = {}
    for name in ("LlamaForCausalLM", "Qwen2ForCausalLM"):
        (tmp_path / f"{name}.json").write_text(json.dumps({**config, "architectures": [name]}))
        spec = tmp_path / f"{name}.yaml"
        spec.write_text(
            f"version: 1\nname: t\nmodel: {{config: {name}.json}}\n"
            'serve: {engine_version: "0.23.0", context: 8192, concurrency: 1, hardware: {gpu: h100-sxm}}\n'
        )
        code, out, _ = run_cli("estimate", "--format", "json", str(spec))
        assert code == 0, out
        labels[name] = json.loads(out)["serve"]["memory_engine"]
    assert labels == {
        "LlamaForCausalLM": "vLLM v0.23 (V1 engine, model runner V2, OpenAI API server defaults)",
        "Qwen2ForCausalLM": "vLLM v0.23 (V1 engine, OpenAI API server defaults)",
    }


# -- the out-of-sample startup logs ------------------------------------------------------------------------

LOGS = yaml.safe_load(VLLM_LOGS.read_text(encoding="utf-8"))


@pytest.mark.parametrize("record", LOGS["records"], ids=lambda record: record["id"])
def test_log_records_are_well_formed(record):
    assert record["source"].startswith("https://") and record["version"] and record["quote"]
    assert record["outcome"] == "started" or record["outcome"].startswith("failed: ")
    assert record["spec"]["serve"]["engine_version"]
    result, codes = estimate(record["id"], record["spec"])
    assert not [code for code in codes if code.startswith(("GP0", "GP1"))], codes
    assert result is not None and result["serve"] is not None


def test_no_start_that_failed_is_called_a_start():
    scored, failed = score()
    assert len(failed) >= 5 and not [start.record for start in failed if start.loads]
    assert len(scored) >= 15


# -- lines of identical sizing -------------------------------------------------------------------------------


# Models whose runner differs between releases: (catalog id, config.json architectures, quantized checkpoint).
RUNNER_MODELS = (
    ("qwen3-8b", ("Qwen3ForCausalLM",), False),
    ("llama-3.1-8b", ("LlamaForCausalLM",), False),
    ("llama-3.1-8b", ("LlamaForCausalLM",), True),
    ("qwen1.5-moe-a2.7b", ("Qwen2MoeForCausalLM",), False),
    ("qwen2.5-7b", ("Qwen2ForCausalLM",), False),
    ("mixtral-8x7b", ("MixtralForCausalLM",), False),
    ("mixtral-8x7b", ("DeepseekV4ForCausalLM",), False),  # its class as a stand-in for DeepSeek-V4's
    ("qwen3-next-80b-a3b", ("Qwen3NextForCausalLM",), False),
    ("qwen3-next-80b-a3b", ("KimiK3ForConditionalGeneration",), False),  # a listed hybrid class (0.27 on)
)


def behaviour(version: str) -> tuple[object, ...]:
    """Everything a release decides about memory sizing, over inputs that reach every branch."""
    release = vllm_release(version)
    gpus = [get_gpu(g) for g in ("h100-sxm", "a100-sxm-80gb", "l40s", "b200-hgx")]
    batches = tuple(
        release.batch_defaults(gpu.memory_bytes, gpu.id, context, chunks)
        for gpu in gpus
        for context in (4_096, 40_000)
        for chunks in (True, False)
    )
    runners = tuple(
        release.for_deployment(classes, get_model(model).architecture, quantized, method, arch)
        for model, classes, quantized in RUNNER_MODELS
        for method in ("", "draft")
        for arch in ("sm90", "gfx942")
    )
    samplers = tuple(
        runner.sampler_bytes_per_logit(rows, tp) for runner in runners for rows in (1, 7, 8, 127, 128) for tp in (1, 4)
    )
    state = tuple((runner.sampler_state_bytes(1024, 128_256), runner.state_in_budget) for runner in runners)
    graphs = tuple(
        release.capture_sizes(seqs, tokens, arch)
        for seqs in (128, 256, 1024)
        for tokens in (2048, 8192)
        for arch in ("sm90", "sm100")
    )
    flags = (release.engine, release.context_in_budget, release.default_utilization, release.extensible_kv)
    platforms = tuple((release.graphs_counted(arch), release.kv_margin_floor(arch)) for arch in ("sm90", "gfx942"))
    return (*flags, release.block_tokens, batches, samplers, state, graphs, platforms)


def test_each_sizing_change_changes_something_and_patch_releases_between_do_not():
    changes = SIZING_CHANGES
    for before, change, after in zip((None, *changes[:-1]), changes, (*changes[1:], None), strict=True):
        text = ".".join(map(str, change))
        if before is not None:  # the last release of the line before, as far as a version number goes
            previous = (change[0], change[1], change[2] - 1) if change[2] else (change[0], change[1] - 1, 99)
            assert behaviour(".".join(map(str, previous))) != behaviour(text), change
            assert sizing_line(".".join(map(str, previous))) == before
        last = (
            (after[0], after[1], after[2] - 1)
            if after and after[2]
            else (after[0], after[1] - 1, 99)
            if after
            else change
        )
        assert behaviour(".".join(map(str, last))) == behaviour(text), (change, last)
        assert sizing_line(".".join(map(str, last))) == change


def test_verify_estimates_a_log_at_the_release_that_wrote_it(tmp_path):
    # A log of vLLM 0.11.0 against a spec that names no release (the model's 0.19): GP802 for
    # serve.engine_version, and the terms compared with the estimate at 0.11.0, whose sampler
    # warm-up sorts the logits: Llama-3.1-8B on an H100 at 0.95, 1,024 requests of 128,256 logits x 38 B +
    # 8,192 x 4,096 x 2 = 4.71 GiB of activations where 0.19 holds 1.89.
    from evidence_samples import RankMemory, VllmRun, vllm_log

    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "version: 1\nname: chat-8b\nmodel: {id: llama-3.1-8b}\n"
        "serve:\n  context: 8192\n  concurrency: 32\n  memory_utilization: 0.95\n  hardware: {gpu: h100-sxm}\n"
    )
    memory = RankMemory(weights=14.99, torch_peak=4.71, non_torch=0.25, graphs=0.91, kv_pool=55.28)
    log = tmp_path / "vllm.log"
    log.write_text(vllm_log(VllmRun(ranks={"": memory}, kv_tokens=452_848, concurrency=55.28, version="0.11.0")))
    code, out, _ = run_cli("verify", str(spec), "--run", str(log), "--format", "json")
    assert code == 1  # GP802 is an error
    run = json.loads(out)["runs"][0]
    settings = {s["setting"]: s for s in run["settings"]}
    assert settings["engine_version"]["matches"] is False and settings["engine_version"]["run"] == "0.11.0"
    (gp802,) = [f for f in run["findings"] if f["code"] == "GP802" and "engine_version" in f["message"]]
    assert gp802["pointer"] == "/serve/engine_version"
    rows = {row["term"]: row for row in run["terms"]}
    assert rows["activations"]["estimate"] / GIB == pytest.approx(4.71, abs=0.005)
    # A patch release sizes memory as its line does; 0.11.2 changed the capture sizes, so it is a line of its own.
    assert sizing_line("0.11.1") == sizing_line("0.11.0") != sizing_line("0.11.2")


def test_verify_re_estimates_a_logged_model_on_its_own_runner(tmp_path):
    # A spec of Llama-3.1-8B checked against a vLLM 0.22 log that ran Qwen/Qwen3-8B: verify re-estimates at the
    # run's model, whose config.json class (Qwen3ForCausalLM) 0.22 runs on model runner V2 (6 B per logit in
    # its sampler warm-up, where V1's Triton path holds 14): the activations term is the Qwen3-8B spec's own.
    from evidence_samples import RankMemory, VllmRun, vllm_log

    memory = RankMemory(weights=15.27, torch_peak=1.9, non_torch=0.25, graphs=0.91, kv_pool=55.28)
    log = tmp_path / "vllm.log"
    run = VllmRun(ranks={"": memory}, kv_tokens=452_848, concurrency=55.28, version="0.22.0", model="Qwen/Qwen3-8B")
    log.write_text(vllm_log(run))
    serve = "serve: {context: 8192, concurrency: 32, memory_utilization: 0.95, engine_version: '0.22.0',"
    serve += " hardware: {gpu: h100-sxm}}\n"
    for model in ("llama-3.1-8b", "qwen3-8b"):
        (tmp_path / f"{model}.yaml").write_text(f"version: 1\nname: chat\nmodel: {{id: {model}}}\n{serve}")
    _, out, _ = run_cli("verify", str(tmp_path / "llama-3.1-8b.yaml"), "--run", str(log), "--format", "json")
    (term,) = [t for t in json.loads(out)["runs"][0]["terms"] if t["term"] == "activations"]
    _, direct, _ = run_cli("estimate", "--format", "json", str(tmp_path / "qwen3-8b.yaml"))
    assert term["estimate"] == json.loads(direct)["serve"]["breakdown"]["activations"]


def test_model_runner_v2_by_the_checkpoint_served_and_its_state_beside_any_stage(tmp_path):
    # 0.22 and 0.23 keep a quantized checkpoint (config.json quantization_config: is_quantized) on the V1
    # runner: an AWQ serve of Llama-3.1-8B at 0.23 is V1, the bf16 one V2.
    def estimate(serve: str, model: str = "llama-3.1-8b") -> dict:
        spec = tmp_path / "s.yaml"
        spec.write_text(f"version: 1\nname: s\nmodel: {{id: {model}}}\nserve: {{{serve}}}\n")
        code, out, _ = run_cli("estimate", "--format", "json", str(spec))
        assert code in (0, 1), out
        return json.loads(out)["serve"]

    base = "engine_version: '0.23.0', context: 8192, concurrency: 1, hardware: {gpu: h100-sxm}"
    assert "model runner V2" in estimate(base)["memory_engine"]
    assert "model runner V2" not in estimate(base + ", quantization: int4-awq")["memory_engine"]
    # Before 0.27 V2's sampler state sits beside the budget on the last stage's GPUs. Gemma-3-27B (vocabulary
    # 262,208) at 4,096 sequences: 4 x 4,096 x 262,208 + 2 x 4 x 4,096 x 8,194 = 4,564,516,864 B (4.25 GiB).
    # Over 4 pipeline stages of an H200 at utilization 0.97 the budget is 135.70 GiB of 139.90 usable: with
    # the state beside it, 139.95 GiB: no start, whichever stage has the least KV room.
    pp = "engine_version: '0.25.0', context: 8192, concurrency: 4, max_sequences: 4096, memory_utilization: {}, "
    pp += "hardware: {{gpu: h200-sxm, count: 4, pipeline_parallel: 4}}"
    tight = estimate(pp.format(0.97), "gemma-3-27b")
    assert not tight["fits"] and tight["outside_budget_bytes"] == 4_564_516_864
    assert tight["outside_budget_what"] == "model runner V2's sampler state"
    assert estimate(pp.format(0.96), "gemma-3-27b")["fits"]  # 134.30 + 4.25 = 138.55 GiB


def test_a_model_given_by_its_dimensions_is_sized_for_the_v1_runner_where_the_class_decides(tmp_path):
    # 0.22-0.24 put a model on model runner V2 only by its config.json class; dimensions given in the spec name
    # none, so the release runs it as V1 and the assumptions say why. From 0.25 a dense model runs on V2
    # whatever its class.
    dims = "{layers: 32, hidden: 4096, heads: 32, kv_heads: 8, intermediate: 14336, vocab: 128256}"
    spec = tmp_path / "dims.yaml"
    for version, runner in (("0.23.0", False), ("0.25.0", True)):
        spec.write_text(
            f"version: 1\nname: d\nmodel: {{architecture: {dims}, dtype: bf16}}\n"
            f"serve: {{engine_version: '{version}', context: 8192, concurrency: 1, hardware: {{gpu: h100-sxm}}}}\n"
        )
        code, out, _ = run_cli("estimate", "--format", "json", str(spec))
        document = json.loads(out)["serve"]
        assert code == 0 and ("model runner V2" in document["memory_engine"]) == runner
        noted = "picks model runner V2 by the model's config.json class" in document["assumptions"]["runtime"]
        assert noted != runner
