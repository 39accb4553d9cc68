"""Model context limits (GP206, GP207): the longest context a model takes, derived as vLLM derives it.

Every expected maximum below is derived by hand from vLLM's ``_get_and_verify_max_len``
(vllm/config/model.py): the smallest length key of the config.json (``model_max_length`` replacing it),
times the RoPE scaling factor for types other than su/longrope/llama3, yarn starting from its
``original_max_position_embeddings``; Gemma 3 is not scaled again. The catalog's maxima are the released
config.json files' ``max_position_embeddings`` (Llama-2-7b-hf 4,096; Llama-3.1-8B 131,072, whose llama3
rope_scaling is already counted in it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from gpuplan.architecture import ArchitectureError
from gpuplan.hf_config import read_hf_model
from gpuplan.linter import lint_path

# Qwen/Qwen2.5-7B-Instruct's dimensions (config.json: max_position_embeddings 32,768), to which its model
# card adds rope_scaling {type: yarn, factor: 4, original_max_position_embeddings: 32768} for 128k.
QWEN = {
    "model_type": "qwen2",
    "num_hidden_layers": 28,
    "hidden_size": 3584,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "intermediate_size": 18944,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
}
YARN = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def _lint(tmp_path: Path, spec: str, config: dict | None = None) -> list:
    """The findings of ``spec`` (with ``config`` written as config.json beside it), as lint reports them."""
    (tmp_path / ".git").mkdir(exist_ok=True)  # no configuration above the spec is picked up
    if config is not None:
        (tmp_path / "config.json").write_text(json.dumps(config))
    path = tmp_path / "spec.yaml"
    path.write_text(spec)
    return list(lint_path(str(path)).findings)


def _serve(model: str, context: int, output: int = 512, extra: str = "") -> str:
    return (
        f"version: 1\nname: t\nmodel: {model}\nserve:\n  context: {context}\n  output_tokens: {output}\n"
        f"  concurrency: 1\n  hardware: {{gpu: h100-sxm, count: 1}}\n{extra}"
    )


def _coded(findings: list, code: str) -> list:
    return [finding for finding in findings if finding.code == code]


# -- the cases ------------------------------------------------------------------------------------


def test_llama_2_7b_served_at_16k_is_refused_at_serve_context(tmp_path):
    findings = _lint(tmp_path, _serve("{id: llama-2-7b}", 16384))
    [finding] = _coded(findings, "GP206")
    assert finding.severity.value == "error"
    assert (finding.line, finding.col, finding.pointer) == (5, 12, "/serve/context")  # the value of serve.context
    assert "serve.context 16,384" in finding.message and "at most 4,096 tokens" in finding.message
    assert "meta-llama/Llama-2-7b-hf config.json" in finding.message  # where the maximum comes from
    assert "at most 4,096" in finding.hint


def test_llama_3_1_8b_at_200k_is_refused_and_at_its_maximum_is_not(tmp_path):
    [finding] = _coded(_lint(tmp_path, _serve("{id: llama-3.1-8b}", 200000)), "GP206")
    assert "at most 131,072 tokens" in finding.message
    findings = _lint(tmp_path, _serve("{id: llama-3.1-8b}", 131072))
    assert not _coded(findings, "GP206") and not _coded(findings, "GP207")


def test_a_yarn_config_takes_its_original_length_times_the_factor(tmp_path):
    # vLLM: derived 32,768 (max_position_embeddings); yarn -> original_max_position_embeddings 32,768; x 4.
    model = read_hf_model({**QWEN, "rope_scaling": YARN})
    assert model.architecture.max_position == 131072
    assert "original_max_position_embeddings 32,768" in model.context_source and "yarn" in model.context_source
    config = {**QWEN, "rope_scaling": YARN}
    assert not _coded(_lint(tmp_path, _serve("{config: config.json}", 131072), config), "GP206")
    [finding] = _coded(_lint(tmp_path, _serve("{config: config.json}", 131073), config), "GP206")
    assert "at most 131,072 tokens" in finding.message and "rope_scaling yarn factor 4" in finding.message
    assert "more than the model of config.json takes" in finding.message
    # Without the rope_scaling, the same config.json takes 32,768.
    [finding] = _coded(_lint(tmp_path, _serve("{config: config.json}", 65536), QWEN), "GP206")
    assert "at most 32,768 tokens (config.json max_position_embeddings 32,768)" in finding.message


def test_fine_tuning_beyond_the_maximum_is_a_warning_at_seq_len(tmp_path):
    spec = (
        "version: 1\nname: t\nmodel: {id: llama-2-7b}\nfinetune:\n  method: lora\n  seq_len: 8192\n"
        "  hardware: {gpu: h100-sxm, count: 1}\n"
    )
    findings = _lint(tmp_path, spec)
    [finding] = _coded(findings, "GP207")
    assert finding.severity.value == "warning" and finding.pointer == "/finetune/seq_len"
    assert (finding.line, finding.col) == (6, 12)
    assert "at most 4,096 positions" in finding.message
    assert not _coded(findings, "GP206")
    at_limit = spec.replace("seq_len: 8192", "seq_len: 4096")
    assert not _coded(_lint(tmp_path, at_limit), "GP207")


def test_fine_tuning_beyond_a_learned_position_table_cannot_run(tmp_path):
    # bigcode/starcoder: n_positions 8,192 learned positions; a longer sequence indexes past the table.
    spec = (
        "version: 1\nname: t\nmodel: {id: starcoder-15b}\nfinetune:\n  method: qlora\n  seq_len: 16384\n"
        "  hardware: {gpu: h100-sxm, count: 1}\n"
    )
    findings = _lint(tmp_path, spec)
    [finding] = _coded(findings, "GP206")
    assert finding.pointer == "/finetune/seq_len" and "8,192 rows" in finding.message
    assert not _coded(findings, "GP207")


def test_the_lint_hint_proposes_no_layout_for_a_million_tokens_on_llama_3_1_8b(tmp_path):
    spec = _serve("{id: llama-3.1-8b}", 1_000_000, 1024).replace("concurrency: 1", "concurrency: 16")
    findings = _lint(tmp_path, spec)
    assert _coded(findings, "GP206")
    [kv] = _coded(findings, "GP203")  # the KV cache does not fit either: true, but no GPUs fix the context
    assert " x h100" not in kv.hint and "131,072" in kv.hint and "GP206" in kv.hint
    for finding in findings:  # no finding proposes a layout to paste (GP507, GP311, GP301's, ...)
        assert "paste" not in finding.hint, finding


def test_the_planner_proposes_no_layout_for_a_context_the_model_cannot_take(tmp_path):
    path = tmp_path / "spec.yaml"
    (tmp_path / ".git").mkdir(exist_ok=True)
    path.write_text(_serve("{id: llama-3.1-8b}", 1_000_000, 1024))
    code, out, _ = run_cli("plan", "--format", "json", str(path))
    [job] = json.loads(out)["jobs"]
    assert code == 1  # plan exits 1 when a job has no recommendation
    assert job["recommended"] is None and job["options"] == [] and job["alternatives"] == []
    assert job["declared"]["meets"]["context"] is False
    assert "131,072" in job["declared"]["reasons"][0]
    _, out, _ = run_cli("plan", str(path))
    assert "none — no layout runs a context longer than the model takes" in out
    # Within the maximum, every option meets the constraint.
    path.write_text(_serve("{id: llama-3.1-8b}", 8192))
    code, out, _ = run_cli("plan", "--format", "json", str(path))
    [job] = json.loads(out)["jobs"]
    assert code == 0 and job["recommended"] is not None and job["recommended"]["meets"]["context"] is True


# -- how the maximum is derived ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"rope_scaling": {"type": "linear", "factor": 4}}, 131072),  # 32,768 x 4
        ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, 65536),  # 32,768 x 2
        ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}}, 32768),
        ({"rope_scaling": {"type": "su", "long_factor": [1.0], "short_factor": [1.0]}}, 32768),  # longrope
        ({"rope_scaling": {"rope_type": "default"}}, 32768),  # no factor: 1
        ({"rope_scaling": {}}, 32768),  # no scaling
        ({"rope_scaling": None}, 32768),
        ({"seq_length": 8192}, 8192),  # the smallest key
        ({"max_seq_len": 65536}, 32768),
        ({"model_max_length": 65536}, 65536),  # set, it replaces the others (vLLM: Command-R)
        ({"model_max_length": 65536, "rope_scaling": {"type": "linear", "factor": 2}}, 131072),
        ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16384}}, 65536),
        (  # Transformers v5, one per layer type: yarn's original length x its factor
            {
                "rope_parameters": {
                    "full_attention": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32768},
                    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                }
            },
            65536,
        ),
        ({"rope_scaling": {"type": "yarn", "factor": 4.0}, "original_max_position_embeddings": 8192}, 32768),
        ({"rope_scaling": {"type": "yarn", "factor": 4.0}}, 131072),  # no original: max_position_embeddings
    ],
)
def test_the_maximum_is_derived_as_vllm_derives_it(extra, expected):
    assert read_hf_model({**QWEN, **extra}).architecture.max_position == expected


def test_gemma_3_is_not_scaled_again():
    # google/gemma-3-27b-it: text_config omits max_position_embeddings (Gemma3TextConfig: 131,072) and states
    # rope_scaling linear x 8, which vLLM does not apply again ("already scaled by RoPE scaling").
    from test_hf_config import GEMMA3_27B

    assert read_hf_model(GEMMA3_27B).architecture.max_position == 131072


def test_a_model_with_no_known_maximum_gets_no_finding(tmp_path):
    config = {key: value for key, value in QWEN.items() if key != "max_position_embeddings"}
    findings = _lint(tmp_path, _serve("{config: config.json}", 1_000_000), config)
    assert not _coded(findings, "GP206") and not _coded(findings, "GP207")
    explicit = "{architecture: {layers: 2, hidden: 64, heads: 2, intermediate: 128, vocab: 1000}}"  # no max_position
    assert not _coded(_lint(tmp_path, _serve(explicit, 1_000_000)), "GP206")


def test_an_explicit_architecture_s_maximum_is_named(tmp_path):
    explicit = "{architecture: {layers: 2, hidden: 64, heads: 2, intermediate: 128, vocab: 1000, max_position: 2048}}"
    [finding] = _coded(_lint(tmp_path, _serve(explicit, 4096)), "GP206")
    assert "the explicit architecture takes: at most 2,048 tokens (model.architecture.max_position)" in finding.message


def test_tenants_are_held_to_their_own_models(tmp_path):
    tenants = (
        "  tenants:\n"
        "    - {name: short, model: {id: llama-2-7b}, context: 8192, concurrency: 1}\n"
        "    - {name: inherits, model: {id: llama-2-13b}, concurrency: 1}\n"
    )
    findings = _coded(_lint(tmp_path, _serve("{id: llama-3.1-8b}", 6000, extra=tenants)), "GP206")
    by_pointer = {finding.pointer: finding for finding in findings}
    assert set(by_pointer) == {"/serve/tenants/0/context", "/serve/context"}
    assert "tenant 'short''s model llama-2-7b" in by_pointer["/serve/tenants/0/context"].message
    assert "tenant 'inherits''s model llama-2-13b" in by_pointer["/serve/context"].message


# -- bad input: a finding at model.config, naming the key, never a traceback --------------------------------------


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"max_position_embeddings": -4096}, "max_position_embeddings must be at least 1"),
        ({"max_position_embeddings": 4096.5}, "max_position_embeddings must be a whole number"),
        ({"max_position_embeddings": "4096"}, "max_position_embeddings must be a whole number"),
        ({"seq_length": 0}, "seq_length must be at least 1"),
        ({"n_positions": [2048]}, "n_positions must be a whole number"),
        ({"model_max_length": True}, "model_max_length must be a whole number"),
        ({"rope_scaling": {"type": "linear", "factor": 0}}, "rope_scaling.factor must be a number above 0"),
        ({"rope_scaling": {"type": "linear", "factor": -2.0}}, "rope_scaling.factor must be a number above 0"),
        ({"rope_scaling": {"type": "linear", "factor": "4"}}, "rope_scaling.factor must be a number above 0"),
        ({"rope_scaling": {"type": "llama3", "factor": False}}, "rope_scaling.factor must be a number above 0"),
        ({"rope_scaling": [4]}, "rope_scaling must be a mapping"),
        ({"rope_scaling": {"factor": 4.0}}, "rope_scaling names no rope_type"),
        ({"rope_scaling": {"type": 4, "factor": 4.0}}, "rope_scaling.type must be a short string"),
        ({"rope_scaling": {"type": "linear", "rope_type": "yarn", "factor": 4.0}}, "disagree"),
        ({"rope_scaling": {**YARN, "original_max_position_embeddings": -1}}, "original_max_position_embeddings"),
        ({"rope_scaling": {"type": "linear", "factor": 1e300}}, "outside 1 to 100,000,000"),
        ({"rope_scaling": {"type": "linear", "factor": 1e-300}}, "outside 1 to 100,000,000"),
    ],
)
def test_bad_length_and_rope_values_are_gp021_at_model_config(tmp_path, extra, named):
    with pytest.raises(ArchitectureError, match=named):
        read_hf_model({**QWEN, **extra})
    findings = _lint(tmp_path, _serve("{config: config.json}", 4096), {**QWEN, **extra})
    [finding] = findings
    assert finding.code == "GP021" and finding.pointer == "/model/config" and named in finding.message
    assert (finding.line, finding.col) == (3, 17)  # the value of model.config: "model: {config: " is 16 wide
