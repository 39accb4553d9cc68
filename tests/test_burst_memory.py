"""A burst's KV cache is sized for one sequence: the engine holds what its pool takes and queues the rest.

The figures are derived by hand from Llama-3.1-8B's config.json: 32 layers x 8 KV heads x 128 dims, K and
V in bf16, is 2 x 32 x 8 x 128 x 2 = 131,072 B of KV cache per token; a 4,096-token sequence is 4,096 x
131,072 = 536,870,912 B (0.5 GiB), a 65,536-token one 8 GiB. One L4 leaves vLLM a pool of about 4.1 GiB
after the weights (15.0 GiB) and its reserves: 8 sequences of 4,096 tokens, none of 65,536.
"""

from __future__ import annotations

import json

import yaml
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from test_properties_memory import rich_architectures
from test_rules import lint, spec
from test_verify import SERVE_SPEC, SHORT_POOL, log_file, vllm_log

from gpuplan.estimate.serving import ServingSetup, estimate_serving, max_concurrency
from gpuplan.records import evolve

SEQUENCE_4K = 4096 * 131_072  # bytes of KV cache of one 4,096-token Llama-3.1-8B sequence (bf16)
BATCH = {
    "context": 4096,
    "output_tokens": 256,
    "prompt_tokens": {"mean": 1500, "p90": 3000},
    "concurrency": 200,
    "arrival": "burst",
    "engine": "vllm",
    "hardware": {"gpu": "l4", "count": 1},
}


def estimate_json(serve: dict, tmp_path) -> dict:
    path = tmp_path / "spec.yaml"
    path.write_text(spec(serve))
    _, out, err = run_cli("estimate", str(path), "--format", "json")
    assert err == ""
    return json.loads(out)


def test_a_burst_is_sized_for_one_sequence_and_fits(tmp_path):
    document = estimate_json(BATCH, tmp_path)
    serve = document["serve"]
    assert serve["kv_pool_bytes"] // SEQUENCE_4K == serve["max_concurrency"] == 8  # 4.1 GiB / 0.5 GiB
    assert serve["breakdown"]["kv_cache"] == SEQUENCE_4K
    assert serve["fits"] is True and serve["loads"] is True
    band = serve["per_gpu_bytes_band"]
    assert band["low"] == serve["per_gpu_bytes"] <= band["high"] < serve["usable_bytes"]
    codes = {f["code"] for f in document["findings"]}
    assert not codes & {"GP201", "GP202", "GP203", "GP209"}
    path = tmp_path / "spec.yaml"
    _, text, _ = run_cli("estimate", str(path))
    assert (
        "a burst of 200 x 4,096 tokens per replica, sized for one sequence (the KV cache holds 8 at the full"
        " context; the others wait their turn)" in text
    )
    assert "engine budget -> fits" in text and "max context at 1: " in text


def test_the_same_sequences_in_a_closed_loop_must_all_fit():
    closed = {**BATCH, "arrival": "closed-loop"}
    (finding,) = lint(spec(closed), select=("GP203",)).findings
    # 200 x 0.5 GiB of KV cache: the declared sequences all run at once in a closed loop
    assert finding.message.startswith("200 x 4,096 tokens need 100.0 GiB of KV cache per GPU;")


def test_a_burst_whose_pool_cannot_hold_one_sequence_cannot_start(tmp_path):
    long = {**BATCH, "context": 65536}
    (finding,) = lint(spec(long), select=("GP203",)).findings
    assert finding.message.startswith(
        "one 65,536-token sequence needs 8.0 GiB of KV cache per GPU (the engine starts with room for one;"
    )
    assert "at most 0 sequences at 65,536 tokens" in finding.message
    assert finding.line == 6  # `context:` (the sixth line spec() writes): what makes one sequence too large
    serve = estimate_json(long, tmp_path)["serve"]
    assert serve["fits"] is False and serve["loads"] is False
    _, text, _ = run_cli("estimate", str(tmp_path / "spec.yaml"))
    assert "(the KV cache holds none at the full context: the engine cannot start)" in text


def test_a_burst_is_planned_by_its_latency_not_by_holding_it_whole(tmp_path):
    def recommended(serve: dict) -> dict:
        path = tmp_path / "spec.yaml"
        path.write_text(spec(serve))
        _, out, _ = run_cli("plan", str(path), "--format", "json")
        (job,) = json.loads(out)["jobs"]
        return job["recommended"]

    # No SLO: the declared L4 starts the engine, and no layout is cheaper than it; its headroom is taken from
    # the figure the table shows.
    alone = recommended(BATCH)
    assert (alone["gpu"], alone["gpus"]) == ("l4", 1)
    free = (alone["budget_bytes"] - alone["planned_bytes"]) / alone["budget_bytes"] * 100
    assert abs(alone["headroom_pct"] - free) < 0.1
    # The same 200 sequences in a closed loop need 100 GiB of KV cache: several GPUs.
    assert recommended({**BATCH, "arrival": "closed-loop"})["gpus"] > 1
    # A TTFT SLO the L4's wave misses (p90 about 196 s) buys a faster GPU, judged at the band's slow edge.
    fast = recommended({**BATCH, "slo": {"ttft_ms": 30000}})
    assert fast["sound"] and fast["gpu"] != "l4"


def test_a_burst_larger_than_the_measured_pool_is_a_slower_wave_not_a_capacity_error(tmp_path, write_spec):
    # The log's pool holds 20.5 sequences of 8,192 tokens: a closed loop of 32 falls short (an error); a burst
    # of 32 waits for the pool anyway, but runs fewer at once than the estimate planned (a warning).
    burst = yaml.safe_load(SERVE_SPEC)
    burst["serve"]["arrival"] = "burst"
    path = write_spec(yaml.safe_dump(burst, sort_keys=False))
    log = log_file(tmp_path, vllm_log(SHORT_POOL))
    _, out, _ = run_cli("verify", str(path), "--run", str(log))
    assert "GP803 [warning] the engine holds 20.50 sequences of 8,192 tokens" in out
    assert "the burst's wave runs fewer, so its TTFT and throughput are slower than estimated" in out
    _, out, _ = run_cli("verify", str(write_spec(SERVE_SPEC, "closed.yaml")), "--run", str(log))
    assert "GP803 [error] the engine holds 20.50 sequences" in out


@settings(max_examples=60)
@given(
    rich_architectures(),
    st.integers(1, 65536),
    st.integers(1, 512),
    st.sampled_from(["vllm", "sglang", "trtllm"]),
    st.sampled_from([1, 2]),
    st.sampled_from([1, 2]),
    st.integers(1, 200),  # from GPUs too small for the weights (no pool) to ones that hold every burst
)
def test_a_burst_of_any_size_is_sized_as_one_sequence(arch, context, burst, engine, tp, pp, gib):
    """Over MoE, MLA, sliding-window, tied and hybrid models and every engine's memory model: a burst's memory
    is one sequence's whatever its size, never more than the closed loop of all of them; and where it fits,
    the engine's pool holds at least that sequence of the full context (the engine starts)."""
    if arch.heads % tp or arch.layers < pp:
        return
    closed = ServingSetup(
        architecture=arch, context=context, concurrency=burst, engine=engine, tensor_parallel=tp, pipeline_parallel=pp
    )
    usable = gib * 2**30
    memory = estimate_serving(evolve(closed, burst=True), usable)
    assert memory == estimate_serving(evolve(closed, concurrency=1), usable)
    assert memory == estimate_serving(evolve(closed, burst=True, concurrency=burst * 7), usable)
    assert memory.per_gpu <= estimate_serving(closed, usable).per_gpu
    if memory.fits and memory.kv_bytes_per_sequence:
        assert max_concurrency(memory) >= 1


def test_a_saving_without_a_latency_slo_says_what_it_costs_in_time(tmp_path):
    # The same burst on one H200: with no SLO, one L4 is sound and 82% cheaper (GP507), and its wave is
    # some 30 times as long; the finding quotes both layouts' p90 TTFT and output tokens/s, each as
    # `estimate` gives it for that layout. With a TTFT SLO the planner bounds the latency: no such clause.
    on_h200 = {**BATCH, "hardware": {"gpu": "h200-sxm", "count": 1}}
    h200 = estimate_json(on_h200, tmp_path)["serve"]
    l4 = estimate_json(BATCH, tmp_path)["serve"]
    (finding,) = lint(spec(on_h200), select=("GP507",)).findings
    assert finding.message.startswith("1 x l4 meets memory and headroom for 583 USD/month")
    assert finding.message.endswith(
        f"; no latency SLO is declared, and it is slower: p90 TTFT {h200['ttft_p90_ms']:,.0f} ->"
        f" {l4['ttft_p90_ms']:,.0f} ms, {h200['tokens_per_s']:,.0f} -> {l4['tokens_per_s']:,.0f} output tokens/s"
    )
    bounded = {**on_h200, "slo": {"ttft_ms": 30000}}
    assert all("no latency SLO" not in f.message for f in lint(spec(bounded), select=("GP507",)).findings)


def test_a_saving_slower_by_less_than_its_figures_show_states_no_time_cost(tmp_path, write_spec):
    # A one-layer model of a hidden size of 16 (a fuzzed spec's): an L4 in place of the declared A10 is
    # slower by a hair, "p90 TTFT 12 -> 12 ms, 86 -> 86 output tokens/s" as GP507 printed it. Where the shown
    # figures are equal there is no time cost to state: the saving stands alone.
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(
        json.dumps(
            {
                "model_type": "mixtral",
                "num_hidden_layers": 1,
                "hidden_size": 16,
                "num_attention_heads": 4,
                "intermediate_size": 1,
                "vocab_size": 32,
                "max_position_embeddings": 1,
                "num_local_experts": 1,
                "num_experts_per_tok": 1,
            }
        )
    )
    speculative = "{method: eagle, num_tokens: 1, acceptance_rate: 0.0}"
    path = write_spec(
        "version: 1\nname: tiny\nmodel: {config: m/config.json}\nserve:\n  context: 1\n  output_tokens: 1\n"
        f"  concurrency: 1\n  max_sequences: 1\n  speculative: {speculative}\n  hardware: {{gpu: a10}}\n"
    )
    _, out, _ = run_cli("lint", "--select", "GP507", str(path))
    assert "GP507" in out and "saving about 359 USD a month (38%)" in out
    assert "it is slower" not in out
