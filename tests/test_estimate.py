"""Worked examples pinned by hand, ground-truth rows, and the estimate command."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES, make_spec, run_cli
from training_jobs import training_setup

from gpuplan.analysis import analyse
from gpuplan.architecture import ArchitectureError
from gpuplan.assumptions import ttft_tail_words
from gpuplan.catalog import UnknownNameError, get_gpu, get_model
from gpuplan.estimate.serving import ServingSetup, estimate_serving, kv_bytes_per_sequence
from gpuplan.estimate.training_memory import estimate_training
from gpuplan.hf_config import from_hf_config
from gpuplan.records import evolve

GIB = 2**30


@pytest.mark.parametrize(
    "model_id, params",
    [
        ("llama-3-8b", 8_030_261_248),
        ("llama-3-70b", 70_553_706_496),
        ("llama-3.2-1b", 1_235_814_400),
        ("llama-3.1-405b", 405_853_388_800),
        ("mistral-7b-v0.3", 7_248_023_552),
        ("mixtral-8x7b", 46_702_792_704),
        ("qwen2.5-7b", 7_615_616_512),
        ("gemma-2-9b", 9_241_705_984),
        ("llama-2-7b", 6_738_415_616),
        ("deepseek-v3", 671_026_419_200),
        ("mixtral-8x22b", 140_620_634_112),
    ],
)
def test_parameter_counts_are_exact(model_id, params):
    assert get_model(model_id).architecture.params == params


def test_kv_cache_bytes_by_hand():
    # 2 (K and V) x 80 layers x 8 KV heads x 128 head_dim x 2 bytes = 327,680 B per token.
    assert get_model("llama-3.1-70b").architecture.kv_bytes_per_token(2) == 327_680
    # MLA: (512 latent + 64 RoPE) x 61 layers x 2 bytes, not split by TP.
    deepseek = get_model("deepseek-v3").architecture
    assert deepseek.kv_bytes_per_token(2) == deepseek.kv_bytes_per_token(2, tensor_parallel=8) == 70_272
    # TP beyond the KV heads replicates them: 8 heads over TP16 is one head per rank.
    assert get_model("llama-3.1-70b").architecture.kv_bytes_per_token(2, 16) == 2 * 80 * 1 * 128 * 2
    # Gemma 2 9B at 32k: 21 full layers keep 32,768 tokens; 21 sliding layers keep what vLLM reserves,
    # (cdiv(min(W - 1 + 8192 batched tokens, context), 16) + 1) blocks = 769 x 16 = 12,304 tokens.
    gemma = get_model("gemma-2-9b").architecture
    per_layer_token = 2 * 8 * 256 * 2
    assert (
        kv_bytes_per_sequence(gemma, 32768, 2, 1, 1, state_dtype_bytes=2) == (21 * 32768 + 21 * 12304) * per_layer_token
    )


def test_ground_truth_rows_within_three_percent():
    # PyTorch MemTracker peaks (benchmarks/data/groundtruth.yaml); its harness released the model
    # outputs before backward, as the Hugging Face Trainer does (loop: trainer).
    arch = get_model("llama-3-8b").architecture
    cases = [
        (training_setup(architecture=arch, precision="bf16", seq_len=2048, loop="trainer"), 74.79),
        (training_setup(architecture=arch, precision="bf16", seq_len=2048, attention="eager", loop="trainer"), 84.87),
        (training_setup(architecture=arch, precision="bf16-mixed", seq_len=2048, loop="trainer"), 149.58),
        (
            training_setup(architecture=arch, precision="bf16", optimizer="adamw-fused", seq_len=2048, loop="trainer"),
            60.13,
        ),
        (
            training_setup(
                architecture=arch,
                precision="bf16",
                method="lora",
                seq_len=2048,
                checkpointing=True,
                lora_targets=("q_proj", "k_proj", "v_proj", "o_proj"),
                loop="trainer",
            ),
            18.58,
        ),
        (
            training_setup(
                architecture=get_model("llama-3-70b").architecture, precision="bf16", seq_len=2048, loop="trainer"
            ),
            657.08,
        ),
    ]
    for setup, truth in cases:
        assert estimate_training(setup, 0).allocated / GIB == pytest.approx(truth, rel=0.03)


def test_full_finetune_model_states_by_hand():
    # Pure bf16 AdamW foreach at the step: weights 2P + grads 2P + two bf16 states 4P + temporary 2P, and the
    # default manual loop still holds the step's bf16 logits, 2 B x 128,256 x 2,048 tokens.
    arch = get_model("llama-3-8b").architecture
    memory = estimate_training(training_setup(architecture=arch, precision="bf16"), 0)
    assert memory.peak_phase == "optimizer_step"
    assert memory.allocated == pytest.approx(10 * 8_030_261_248 + 2 * 128_256 * 2048, abs=16)
    assert sum(memory.breakdown.values()) == memory.per_gpu


def test_serving_weights_and_kv_for_70b_tp2():
    arch = get_model("llama-3.1-70b").architecture
    setup = ServingSetup(architecture=arch, context=8192, concurrency=32, kv_dtype_bytes=1, tensor_parallel=2)
    memory = estimate_serving(setup, get_gpu("h200-nvl").usable_bytes)
    assert memory.weights == pytest.approx(arch.params * 2 / 2, rel=0.001)
    assert memory.kv_cache == 32 * 8192 * 80 * 2 * 4 * 128 * 1  # 4 KV heads per rank, fp8
    assert memory.fits


def test_hf_config_reading(tmp_path):
    config = {
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
    }
    assert from_hf_config(config).params == 8_030_261_248
    with pytest.raises(ArchitectureError, match="lacks intermediate"):
        from_hf_config({k: v for k, v in config.items() if k != "intermediate_size"})


def test_unknown_names_suggest_close_matches():
    with pytest.raises(UnknownNameError, match=r"did you mean 'llama-3\.1-70b'"):
        get_model("llama-3.1-70-b")
    with pytest.raises(UnknownNameError, match="did you mean 'h200-sxm'"):
        get_gpu("h200sxm")
    # The names people write for the 48 GB workstation card: the catalog's id comes first (it said 'a10').
    with pytest.raises(UnknownNameError, match="did you mean 'rtx-a6000'") as raised:
        get_gpu("a6000")
    assert raised.value.suggestions[0] == "rtx-a6000"


def test_lint_suggests_the_catalog_id_of_an_a6000(write_spec):
    path = write_spec(
        "version: 1\nname: t\nmodel: {id: llama-3.1-8b}\nserve: {context: 4096, concurrency: 4, hardware: {gpu: "
        "a6000}}\n"
    )
    code, out, _ = run_cli("lint", str(path))
    assert code == 1 and "GP022 [error] unknown GPU 'a6000' — did you mean 'rtx-a6000'" in out


def test_qlora_of_a_70b_model_on_one_48_gb_card(write_spec):
    # The QLoRA paper's headline, asked of the cards people have: the bundled example (seq 2048, checkpointed)
    # needs 45.15 GiB on the device (43.23 GiB of tensors at the last layer's backward, 0.92 GiB of allocator
    # cache, 1 GiB outside the allocator: none of it depends on the GPU). That fits an RTX A6000 (47.49 GiB
    # usable) on the estimate, but published QLoRA peaks reached 1.2235 x gpuplan's figure at 0.9 (the 19th of
    # 21 ratios): 55.2 GiB, beyond the card, so it is "at risk" (GP208), and the hint names the fewest A6000s
    # that hold it at that confidence: 2 in a pipeline split (the example's eager stack runs QLoRA over no
    # tensor-parallel ranks: gpuplan.conflicts).
    # An L40 or A40 (ECC on: 44.49 GiB) does not hold even the device figure: more of the same card are
    # needed (GP301, 2 of them at PP 2). (Before the last layer's backward joined the phases, 44.40 GiB held
    # with 0.09 GiB to spare: the allocator's cache decided it.)
    text = (EXAMPLES / "qlora-llama-70b.yaml").read_text(encoding="utf-8")
    path = write_spec(text.replace("h200-sxm", "rtx-a6000"), name="rtx-a6000.yaml")
    code, out, _ = run_cli("lint", str(path))
    finding = (
        "GP208 [warning] fine-tuning fits rtx-a6000 on the estimate (45.2 GiB of 47.5 GiB usable) but not at "
        "90% confidence: up to 55.2 GiB per GPU"
    )
    assert code == 0 and finding in out and "hint: on rtx-a6000: 2 x rtx-a6000, pipeline_parallel 2" in out, out
    code, out, _ = run_cli("estimate", "--format", "json", str(path))
    finetune = json.loads(out)["finetune"]
    assert round(finetune["per_gpu_bytes"] / GIB, 2) == 45.15
    assert round((finetune["allocated_bytes"] + finetune["breakdown"]["framework_overhead"]) / GIB, 2) == 44.23
    assert (finetune["usable_bytes"], finetune["fits"]) == (get_gpu("rtx-a6000").usable_bytes, True)
    for gpu in ("l40", "a40"):
        code, out, _ = run_cli("lint", str(write_spec(text.replace("h200-sxm", gpu), name=f"{gpu}.yaml")))
        assert (
            code == 1
            and f"GP301 [error] fine-tuning needs 45.2 GiB at the backward peak on one {gpu} (44.5 GiB usable)" in out
        ), out
        assert f"2 x {gpu}, pipeline_parallel 2" in out, out


def test_estimate_json_has_the_documented_fields():
    code, out, _ = run_cli("estimate", "--format", "json", str(EXAMPLES / "finetune-then-serve.yaml"))
    assert code == 0
    result = json.loads(out)
    for job, required in (
        ("finetune", ("weights", "gradients", "optimizer", "activations")),
        ("serve", ("weights", "kv_cache")),
    ):
        entry = result[job]
        assert {"params", "per_gpu_bytes", "breakdown", "gpu", "usable_bytes", "fits", "assumptions"} <= set(entry)
        phases = entry.get("phases", {"only": entry["breakdown"]})
        present = set(entry["breakdown"]) | {name for parts in phases.values() for name in parts}
        assert set(required) <= present, (job, present)
    assert result["serve"]["per_gpu_bytes"] == sum(result["serve"]["breakdown"].values())


def test_unknown_model_in_spec_is_a_finding(write_spec):
    from conftest import VALID_SERVE

    path = write_spec(VALID_SERVE.replace("llama-3.1-8b", "llama-3.1-8bb"))
    code, out, _ = run_cli("lint", str(path))
    assert code == 1
    assert f"{path}:4:7: GP020 [error] unknown model 'llama-3.1-8bb' — did you mean 'llama-3.1-8b'" in out


def test_custom_gpu_local_config_and_explicit_architecture(tmp_path):
    config = {
        "hidden_size": 2048,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "intermediate_size": 8192,
        "vocab_size": 128256,
        "tie_word_embeddings": True,
    }
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "config.json").write_text(json.dumps(config))
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "version: 1\nname: custom\nmodel: {config: models/config.json}\n"
        "serve: {context: 4096, concurrency: 4, hardware: {gpu: acme-48}}\n"
        "gpus:\n  acme-48: {memory_gib: 48, bandwidth_tbs: 1.0, bf16_tflops: 400, price_per_hour: 1.5}\n"
    )
    code, out, _ = run_cli("estimate", "--format", "json", str(spec))
    result = json.loads(out)["serve"]
    assert code == 0 and result["params"] == 1_235_814_400 and result["gpu"] == "acme-48"
    assert result["monthly_cost"] == pytest.approx(1.5 * 730)
    explicit = spec.read_text().replace(
        "model: {config: models/config.json}",
        "model: {architecture: {layers: 16, hidden: 2048, heads: 32, kv_heads: 8, head_dim: 64, "
        "intermediate: 8192, vocab: 128256, tie_embeddings: true}}",
    )
    spec.write_text(explicit)
    code, out, _ = run_cli("estimate", "--format", "json", str(spec))
    assert json.loads(out)["serve"]["params"] == 1_235_814_400
    spec.write_text(
        "version: 1\nname: custom\nmodel: {config: missing.json}\n"
        "serve: {context: 4096, concurrency: 4, hardware: {gpu: l4}}\n"
    )
    code, out, _ = run_cli("lint", str(spec))
    assert code == 1 and "GP021 [error] missing.json: cannot read it: no such file" in out


def test_price_override_and_missing_price():
    from gpuplan.spec import Budget

    gpu = get_gpu("h200-nvl")
    assert gpu.price_per_hour is None
    budget = Budget("USD", None, None, {"h200-nvl": 3.8}, "2026-11-20", 12)
    from gpuplan.spec import Spec

    spec = Spec("s", "n", "", "", None, None, None, budget, (), {})
    assert spec.price(gpu) == (3.8, "spec budget.prices (2026-11-20)")
    eur = Spec("s", "n", "", "", None, None, None, Budget("EUR", None, None, {}, None, 12), (), {})
    assert eur.price(get_gpu("h100-sxm")) == (None, "no price")  # catalog prices are USD


def test_prequantized_checkpoint_is_served_as_stored(tmp_path):
    config = {
        "hidden_size": 8192,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "intermediate_size": 28672,
        "vocab_size": 128256,
        "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 64},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "version: 1\nname: awq\nmodel: {config: config.json}\n"
        "serve: {context: 8192, concurrency: 8, hardware: {gpu: h100-sxm}}\n"
    )
    code, out, _ = run_cli("estimate", "--format", "json", str(spec))
    assert code == 0
    weights = json.loads(out)["serve"]["breakdown"]["weights"]
    arch = from_hf_config(config)
    linear = arch.linear_params()
    # 4 bits + (fp16 scale + 4-bit zero) per 64 weights = 4.3125 bits for the linears; the rest 16-bit.
    assert weights == pytest.approx(linear * 4.3125 / 8 + (arch.params - linear) * 2, rel=1e-6)
    spec.write_text(
        spec.read_text().replace("hardware: {gpu: h100-sxm}", "quantization: none, hardware: {gpu: h100-sxm}")
    )
    code, out, _ = run_cli("estimate", "--format", "json", str(tmp_path / "spec.yaml"))
    assert json.loads(out)["serve"]["breakdown"]["weights"] == pytest.approx(arch.params * 2, rel=1e-6)


def test_estimate_states_the_attention_kernel_and_the_network_the_training_speed_rests_on():
    # finetune-then-serve trains with flash (FlashAttention-2) on h100-sxm: 35% of the dense bf16 peak
    # (FlashAttention-3 paper, table 1: FA2 reaches about 35% of H100's peak), over the schema's default
    # network of 400 Gb/s per GPU.
    code, out, _ = run_cli("estimate", "--format", "json", str(EXAMPLES / "finetune-then-serve.yaml"))
    assert code == 0
    assumptions = json.loads(out)["finetune"]["assumptions"]
    assert assumptions["attention"].endswith("its kernels reach 35% of the h100-sxm's dense 16-bit peak")
    assert assumptions["network"] == "400 Gb/s per GPU between nodes (hardware.network_gbps)"
    assert (
        "attention at" in assumptions["training speed"] and "of its kernel's ceiling" in assumptions["training speed"]
    )


def test_estimate_reads_standard_input_as_lint_and_plan_do():
    """`gpuplan estimate -` estimates the spec on standard input: the same figures and findings as from
    its file, the findings at <stdin>."""
    spec = EXAMPLES / "serve-llama-70b.yaml"
    code, from_file, _ = run_cli("estimate", "--format", "json", str(spec))
    stdin_code, from_stdin, _ = run_cli("estimate", "--format", "json", "-", input=spec.read_bytes())
    assert stdin_code == code == 0
    file_json, stdin_json = json.loads(from_file), json.loads(from_stdin)
    assert stdin_json["serve"] == file_json["serve"]
    assert {f["file"] for f in stdin_json["findings"]} == {"<stdin>"}
    assert [f["code"] for f in stdin_json["findings"]] == [f["code"] for f in file_json["findings"]]


def test_estimate_text_names_replicas_and_gpus_per_replica(tmp_path):
    """8 x h100-sxm at TP 2 is 4 replicas of 2 GPUs, each with the declared 32 sequences in flight; a
    fine-tune on 4 GPUs without TP is 4 data-parallel replicas of 1 GPU."""
    spec = tmp_path / "serve.yaml"
    spec.write_text(
        (EXAMPLES / "serve-llama-70b.yaml")
        .read_text()
        .replace(
            "hardware: {gpu: h100-sxm, count: 4, tensor_parallel: 4}",
            "hardware: {gpu: h100-sxm, count: 8, tensor_parallel: 2}",
        )
    )
    _, out, _ = run_cli("estimate", str(spec))
    assert "serving on 8 x h100-sxm: 4 replicas x 2 GPUs (TP 2, PP 1), 32 x 8,192 tokens per replica" in out
    _, out, _ = run_cli("estimate", str(EXAMPLES / "finetune-then-serve.yaml"))
    assert "on 4 x h100-sxm: 4 data-parallel replicas x 1 GPU (TP 1, PP 1, sharding zero3)" in out
    assert "serving on 1 x l4: 1 replica x 1 GPU (TP 1, PP 1), 4 x 8,192 tokens per replica" in out


def test_training_speed_is_stated_without_a_token_count(tmp_path):
    # The rates of a step need no run length: without finetune.tokens the estimate states the same tokens/s,
    # MFU, step time and exposed sync as with it, and leaves the hours and the cost out (null, "n/a").
    source = (EXAMPLES / "finetune-llama-8b-lora.yaml").read_text()
    assert "  tokens: 300000000\n" in source, "the example's token count moved: update this test"
    without = tmp_path / "no-tokens.yaml"
    without.write_text(source.replace("  tokens: 300000000\n", ""))
    _, out, _ = run_cli("estimate", "--format", "json", str(EXAMPLES / "finetune-llama-8b-lora.yaml"))
    _, bare, _ = run_cli("estimate", "--format", "json", str(without))
    with_tokens, no_tokens = json.loads(out)["finetune"], json.loads(bare)["finetune"]
    for rate in ("tokens_per_s", "tokens_per_s_per_gpu", "mfu", "step_s", "gradient_sync_s", "offload_s"):
        assert no_tokens[rate] is not None and no_tokens[rate] == with_tokens[rate], rate
    assert no_tokens["training_hours"] is None and no_tokens["cost"] is None
    # One GPU, one micro-batch of 2 x 4,096 tokens per step: 8,192 tokens over step_s seconds is the rate.
    assert with_tokens["tokens_per_s"] == pytest.approx(2 * 4_096 / with_tokens["step_s"], rel=1e-3)
    # 300,000,000 tokens at that rate: the hours the example states.
    assert with_tokens["training_hours"] == pytest.approx(300_000_000 / with_tokens["tokens_per_s"] / 3600, rel=1e-3)
    _, text, _ = run_cli("estimate", str(without))
    assert "  training time: n/a (finetune.tokens is not given); cost n/a" in text
    assert f"  speed: {with_tokens['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU" in text


def test_a_mean_ttft_above_its_p90_is_explained():
    # finetune-then-serve's L4: 4 clients of one replica; fewer than 1 in 10 requests queue for the token
    # budget (rho < 0.1), so the p90 (1,049 ms) waits for nothing while the mean (1,071 ms) carries the few
    # long waits: the line says what that means. serve-llama-70b's TTFT is over its prompts (mean 2,500, p90
    # 6,000): its mean (282 ms) is below its p90 (549 ms), as fit-low-headroom's (1,052 ms) is below its p90
    # (1,292 ms), and their lines say nothing of the kind.
    # fit-long-context-kv's 16 clients share a KV cache that holds one sequence: 15 wait their turn, so the
    # line claims only what a mean over the p90 implies (the line said "fewer than 1 request in 10 queues").
    for name in (
        "serve-llama-70b.yaml",
        "finetune-then-serve.yaml",
        "findings/fit-low-headroom.yaml",
        "findings/fit-long-context-kv.yaml",
    ):
        _, out, _ = run_cli("estimate", "--format", "json", str(EXAMPLES / name))
        serve = json.loads(out)["serve"]
        _, text, _ = run_cli("estimate", str(EXAMPLES / name))
        above = serve["ttft_ms"] > serve["ttft_p90_ms"]
        assert ("the mean is above the p90: at most 1 request in 10 takes longer" in text) == above, name
        assert "queues" not in text, name
    _, text, _ = run_cli("estimate", str(EXAMPLES / "finetune-then-serve.yaml"))
    assert (
        "mean 1,071 ms for a prompt of 7,936 tokens at 4 in flight (alone 969 ms; front end 20 ms; the mean is above"
        " the p90" in text
    )


def estimate_text(write_spec, serve: str) -> str:
    """``gpuplan estimate``'s text for llama-3.1-8b served with the ``serve`` section's lines."""
    spec = write_spec(f"version: 1\nname: s\nmodel: {{id: llama-3.1-8b}}\nserve:\n{serve}")
    _, out, _ = run_cli("estimate", str(spec))
    return out


def test_the_text_says_where_a_band_leans_and_caps_the_longest_context_at_the_model(write_spec):
    # llama-3.1-8b on one h100-sxm, a burst of 64: the burst TPOT band's fast edge is 1.21 x the estimate at
    # 0.9 (speed_bands.json), so 90% of such runs measured above it, and the line says so; the TTFT band
    # straddles its estimate and says nothing of the kind. The KV cache of one sequence would hold more tokens
    # than the model's 131,072 positions: the longest context is the model's, the cache's figure beside it.
    out = estimate_text(
        write_spec, "  context: 8192\n  concurrency: 64\n  arrival: burst\n  hardware: {gpu: h100-sxm}\n"
    )
    (tpot,) = [line for line in out.splitlines() if line.strip().startswith("TPOT")]
    (ttft,) = [line for line in out.splitlines() if line.strip().startswith("TTFT")]
    assert tpot.endswith("not used to tune the model; 90% of them measured above the estimate)")
    assert "measured above" not in ttft and "measured below" not in ttft
    (kv,) = [line for line in out.splitlines() if "max context at 1:" in line]
    assert "max context at 1: 131,072, the model's limit (the KV cache holds " in kv


def test_static_batching_is_worded_as_static_and_a_mean_ttft_above_its_p90_only_as_printed(write_spec):
    # TensorRT-LLM with static batching: not "(in-flight batching), static batching", and TTFT waits for a
    # batch, not "beside the running batch".
    out = estimate_text(
        write_spec,
        "  context: 4096\n  concurrency: 32\n  engine: trtllm\n  batching: static\n  hardware: {gpu: h100-sxm}\n",
    )
    assert "assumption: engine: TensorRT-LLM, static batching: GEMMs" in out
    assert "in static batches: each prefills together and decodes until its longest answer ends" in out
    assert "beside the running batch" not in out
    # The mean is said to stand above the p90 only where the printed figures (whole milliseconds) show it.
    speed = analyse(make_spec((EXAMPLES / "finetune-then-serve.yaml").read_text())).serve.speed
    assert round(speed.ttft_s * 1000) > round(speed.ttft_p90_s * 1000) and ttft_tail_words(speed)
    assert ttft_tail_words(evolve(speed, ttft_s=0.6611, ttft_p90_s=0.6609)) == ""  # both print as 661 ms
