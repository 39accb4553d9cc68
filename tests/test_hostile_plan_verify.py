"""``plan`` and ``verify`` keep the README's promise for hostile spec strings, as lint/estimate/report/diff do.

Spec text never reaches a terminal or CI log raw: control, separator and bidi characters show escaped, no
spec value starts a line of its own (a forged ``::error`` / ``::add-mask::`` workflow command), Markdown
carries no live HTML or link from a spec, JSON keeps the strings exact. That holds for the plan itself
(text, Markdown) and for the findings that stop ``plan`` and ``verify`` (printed on stderr).
"""

from __future__ import annotations

import copy
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLES, ROOT, run_cli
from evidence_samples import RankMemory, VllmRun, vllm_log
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutations import HOSTILE_TEXT, RAW_CONTROL, SPECS, _parent, _pointers, dump_yaml

MARKDOWN_NAME = (
    "<img src=x onerror=alert(1)></details>@octocat [x](https://evil.example) \u202eevil\x7f\x9b\n::error::forged"
)
FORGED = "\n::error::forged\u202e\x00\x7f"
# Markdown that a renderer would act on: an HTML tag or comment, or a link / image opener, not escaped.
LIVE_MARKDOWN = re.compile(r"(?<!\\)<[A-Za-z/!?]|(?<!\\)\]\(")
# A vLLM start-up log (the shape tests/test_verify.py uses) whose model name is hostile: the log is untrusted
# too (its reader shows such characters as "?"). vLLM prints its arguments with repr(), which escapes the
# name; a log can still carry it raw.
HOSTILE_MODEL = "meta-llama/evil\u202e\x1b[31m\x9b"
HOSTILE_LOG = vllm_log(
    VllmRun(
        ranks={"": RankMemory(weights=14.99, torch_peak=1.89, non_torch=0.25, graphs=0.91, kv_pool=20.5)},
        kv_tokens=167_936,
        concurrency=20.5,
        model=HOSTILE_MODEL,
    )
).replace(repr(HOSTILE_MODEL)[1:-1], HOSTILE_MODEL)


def forged_lines(text: str) -> list[str]:
    """Lines a GitHub runner would read as workflow commands."""
    return [line for line in text.splitlines() if line.lstrip().startswith("::")]


def inert(stream: str) -> None:
    assert not RAW_CONTROL.search(stream), stream
    assert not forged_lines(stream), forged_lines(stream)


def example_with(example: str, **changes: Any) -> str:
    data = yaml.safe_load((EXAMPLES / example).read_text(encoding="utf-8"))
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        target = data
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000)


def test_plan_shows_a_hostile_name_escaped_in_text_and_markdown_and_exact_in_json(write_spec):
    spec = write_spec(example_with("serve-llama-70b.yaml", name=MARKDOWN_NAME))
    code, out, err = run_cli("plan", str(spec))
    assert code == 0 and err == ""
    inert(out)
    # The title line keeps the name, escaped: "\u202eevil\x7f\x9b\n::error::forged (llama-3.1-70b): ..."
    assert "\\u202eevil\\x7f\\x9b\\n::error::forged (llama-3.1-70b): at most 64 GPUs" in out.splitlines()[0]
    code, out, err = run_cli("plan", "--format", "markdown", str(spec))
    assert code == 0 and err == ""
    inert(out)
    assert not LIVE_MARKDOWN.search(out), LIVE_MARKDOWN.search(out)
    assert out.startswith("# GPU plan: \\<img src=x onerror=alert(1)\\>\\</details\\>@octocat \\[x\\](https")
    code, out, _ = run_cli("plan", "--format", "json", str(spec))
    assert code == 0 and json.loads(out)["name"] == MARKDOWN_NAME


def test_plan_markdown_fences_the_yaml_so_that_no_content_closes_it(write_spec):
    from gpuplan.output.plan_text import _fenced

    # A run of three backticks in the content: the fence is four long, so "```" inside cannot close it.
    assert _fenced('a: "```"\n', "yaml") == ["````yaml", 'a: "```"', "````"]
    assert _fenced("a: 1\n", "yaml") == ["```yaml", "a: 1", "```"]
    code, out, _ = run_cli("plan", "--format", "markdown", str(EXAMPLES / "serve-llama-70b.yaml"))
    assert code == 0
    block = out.split("```yaml\n", 1)[1].split("\n```\n", 1)[0]
    assert yaml.safe_load(block) == {"serve": {"hardware": {"gpu": "h200-sxm", "count": 2, "tensor_parallel": 2}}}


# Each value stops the spec (GP020 unknown model, GP106 schema) with a finding that quotes it.
STOPPING = {
    "model id": {"model.id": "llama-3.1-8b" + FORGED},
    "currency": {"budget.currency": "US\n::add-mask::x\u202e"},
    "price key": {"budget.prices": {"h100-sxm" + FORGED: 1.0}},
    "gpu id": {"serve.hardware.gpu": "h100-sxm" + FORGED},
    "waiver rule": {"waivers": [{"rule": "GP201" + FORGED, "reason": "accepted\n::add-mask::y"}]},
}


@pytest.mark.parametrize("case", sorted(STOPPING))
def test_findings_that_stop_plan_and_verify_are_printed_escaped(tmp_path, write_spec, case):
    spec = write_spec(example_with("serve-llama-70b.yaml", **STOPPING[case]))
    log = tmp_path / "vllm.log"
    log.write_text(HOSTILE_LOG, encoding="utf-8")
    code, lint_out, _ = run_cli("lint", str(spec))
    assert code == 1
    finding = lint_out.splitlines()[0]  # lint's own line for the first finding, escaped
    for command in (("plan", str(spec)), ("verify", str(spec), "--run", str(log))):
        code, out, err = run_cli(*command)
        assert code == 2 and out == ""
        inert(err)
        assert finding in err.splitlines()  # the same line lint prints, through the same formatter
        assert "cannot be planned" in err or "cannot be verified" in err


def test_verify_shows_a_hostile_spec_path_escaped(tmp_path):
    # A file name is repository content too: "spec\n::error::x\u202e.yaml" must not start a line.
    spec = tmp_path / "spec\n::error::x\u202e.yaml"
    spec.write_text((EXAMPLES / "finetune-then-serve.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    log = tmp_path / "vllm.log"
    log.write_text(HOSTILE_LOG, encoding="utf-8")
    code, out, err = run_cli("verify", str(spec), "--run", str(log))
    assert code in (0, 1) and "internal error" not in err
    inert(out)
    assert f"{tmp_path}/spec\\n::error::x\\u202e.yaml against {tmp_path}/vllm.log: vLLM 0.19.0" in out


# -- fuzzing ----------------------------------------------------------------------------------------

hostile_strings = st.one_of(
    st.sampled_from([*HOSTILE_TEXT, MARKDOWN_NAME, "a```b", "@octocat"]),
    st.text(alphabet=st.sampled_from(list("ab:-<>[]()`|@\n\r\t\x00\x1b\x7f\x85\x9b\u2028\u202e\u2066")), max_size=24),
)


@st.composite
def hostile_specs(draw: Any) -> tuple[str, str]:
    """An example or finding spec with 1-3 of its strings (the name most often, which plan prints whole)
    replaced by hostile ones: free text reaches plan's output; ids, enums and keys stop it with findings."""
    name, seed = draw(st.sampled_from(SPECS))
    data = copy.deepcopy(seed)
    strings = [p for p in _pointers(data) if p and isinstance(_parent(data, p)[p[-1]], str)]
    targets = draw(st.lists(st.sampled_from(strings), max_size=2, unique=True))
    if draw(st.integers(0, 2)):
        targets.append(("name",))
    for pointer in targets:
        _parent(data, pointer)[pointer[-1]] = draw(hostile_strings)
    if isinstance(data.get("budget"), dict) and draw(st.integers(0, 5)) == 0:
        data["budget"]["prices"] = {draw(hostile_strings): 1.0}
    return name, dump_yaml(data)


COMMANDS = [
    ("plan", "text"),
    ("plan", "markdown"),
    ("plan", "json"),
    ("verify", "text"),
    ("verify", "markdown"),
    ("verify", "json"),
]


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_specs())
def test_plan_and_verify_never_print_raw_spec_text(case):
    name, text = case
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        (folder / ".git").mkdir()  # no configuration above the input is picked up
        spec = folder / "spec.yaml"
        spec.write_text(text, encoding="utf-8")
        log = folder / "vllm.log"
        log.write_text(HOSTILE_LOG, encoding="utf-8")
        for command, output_format in COMMANDS:
            extra = ("--run", str(log)) if command == "verify" else ()
            code, out, err = run_cli(command, str(spec), "--format", output_format, *extra)
            where = (name, text, command, output_format)
            assert code in (0, 1, 2), where
            assert "internal error" not in out + err and "Traceback" not in out + err, (where, err[-600:])
            inert(err)
            if output_format == "json":
                if out:
                    json.loads(out)
            else:
                inert(out)
            if output_format == "markdown":
                assert not LIVE_MARKDOWN.search(out), (where, LIVE_MARKDOWN.search(out))


@pytest.mark.parametrize(
    "setting", ["tensor_parallel_size=0, pipeline_parallel_size=1", "tensor_parallel_size=1, pipeline_parallel_size=0"]
)
def test_a_log_claiming_a_parallel_degree_of_zero_exits_2_at_its_line(tmp_path, write_spec, setting):
    # A degree of 0 reached the layout and divided by it: "internal error: ZeroDivisionError". No run has
    # one: a value that cannot be what it claims exits 2 with the file and line, as a byte count in the
    # wrong unit does.
    spec = write_spec(
        "version: 1\nname: v\nmodel: {id: llama-3.1-8b}\nserve:\n  context: 8192\n  concurrency: 32\n"
        "  hardware: {gpu: h100-sxm}\n"
    )
    log = tmp_path / "run.log"
    log.write_text(
        "(EngineCore pid=242) INFO 04-22 00:03:46 [v1/engine/core.py:105] Initializing a V1 LLM engine (v0.19.0)"
        " with config: model='meta-llama/Llama-3.1-8B-Instruct', dtype=torch.bfloat16, max_seq_len=8192, "
        f"{setting}, quantization=None, kv_cache_dtype=auto\n"
        "(EngineCore pid=242) INFO 04-22 00:04:02 [v1/worker/gpu_model_runner.py:4820] Model loading took "
        "14.99 GiB memory and 14.429680 seconds\n"
        "(EngineCore pid=242) INFO 04-22 00:04:20 [v1/worker/gpu_worker.py:436] Available KV cache memory: 58.11 GiB\n"
    )
    for extra in ((), ("--format", "json")):
        code, _, err = run_cli("verify", str(spec), "--run", str(log), *extra)
        assert code == 2 and "internal error" not in err, err
        assert f"{log}:1: " in err and "is 0: impossible, it is at least 1 in any run" in err


@pytest.mark.parametrize("zero", ["max_num_requests=0", "max_num_tokens=0"])
def test_a_tensorrt_llm_log_claiming_a_cap_of_zero_exits_2(tmp_path, write_spec, zero):
    # TensorRT-LLM's caps are recorded as max_sequences and max_batched_tokens: a 0 there was read as a run's
    # setting (verify exited 1 with ordinary findings), where vLLM's own names were refused.
    fixture = ROOT / "tests" / "fixtures" / "engine_logs" / "trtllm-6294-llama-3.1-8b-fp8-h100.log"
    text = fixture.read_text()
    field = zero.split("=")[0]
    original = next(part for part in text.split() if part.startswith(f"{field}="))
    log = tmp_path / "trt.log"
    log.write_text(text.replace(original, zero.rstrip(",") + ("," if original.endswith(",") else ""), 1))
    spec = write_spec(
        "version: 1\nname: t\nmodel: {id: llama-3.1-8b}\nserve:\n  context: 157\n  output_tokens: 28\n"
        "  concurrency: 4\n  engine: trtllm\n  quantization: fp8\n  hardware: {gpu: h100-sxm}\n"
    )
    code, _, err = run_cli("verify", str(spec), "--run", str(log))
    assert code == 2 and f"{log}:5: " in err and "is 0: impossible, it is at least 1 in any run" in err, err


def test_a_file_name_that_is_not_utf8_is_shown_by_its_bytes_and_every_output_is_written(tmp_path):
    # `caf\xe9.yaml` (Latin-1's é): Python holds the stray byte as U+DCE9 (surrogateescape), which no UTF-8 output
    # encodes. SARIF and the report failed as internal errors, and the JSON outputs carried the raw byte (not
    # UTF-8). The text shows the byte as \xe9, JSON as the escape \udce9 (json.loads gives back the name the file
    # system takes), SARIF's URI percent-encodes the byte, and the report is written.
    import subprocess
    import sys

    name = b"caf\xe9.yaml"
    (tmp_path / os.fsdecode(name)).write_bytes((EXAMPLES / "serve-llama-70b.yaml").read_bytes())
    gpuplan = str(Path(sys.executable).parent / "gpuplan")

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([gpuplan, *args], cwd=tmp_path, capture_output=True, timeout=120)

    text = run("lint", os.fsdecode(name))
    assert text.returncode == 0 and text.stdout.decode("utf-8").startswith("caf\\xe9.yaml:27:13: GP507")
    for command in (("lint", "--format", "json"), ("plan", "--format", "json")):
        completed = run(*command, os.fsdecode(name))
        assert b"Traceback" not in completed.stderr and b"internal error" not in completed.stderr
        shown = completed.stdout.decode("utf-8")  # valid UTF-8
        assert "caf\\udce9.yaml" in shown and os.fsdecode(name) in _strings(json.loads(shown))  # the name, decoded
    sarif = run("lint", "--format", "sarif", os.fsdecode(name))
    assert sarif.returncode == 0 and '"uri": "caf%E9.yaml"' in sarif.stdout.decode("utf-8")
    report = run("report", "-o", "out.md", os.fsdecode(name))
    # Markdown escapes the backslash it shows
    assert report.returncode == 0 and "caf\\\\xe9.yaml" in (tmp_path / "out.md").read_text(encoding="utf-8")


def _strings(node: Any) -> list[str]:
    """Every string of a JSON document, keys and values."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [text for key, value in node.items() for text in (key, *_strings(value))]
    if isinstance(node, list):
        return [text for item in node for text in _strings(item)]
    return []
