"""Evidence readers on excerpts written in each format: values, ranks, settings, failures, bad input."""

from __future__ import annotations

import io
import os
from dataclasses import replace

import pytest
from evidence_samples import (
    GIB,
    RankMemory,
    VllmRun,
    accelerate_epochs,
    hf_trainer_block,
    torch_memory_json,
    torchtune_steps,
    vllm_failed_start,
    vllm_header,
    vllm_log,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.errors import GpuplanError
from gpuplan.evidence import read as evidence_read
from gpuplan.evidence.lines import LineReader
from gpuplan.evidence.model import (
    CUDA_GRAPHS,
    GPU_TOTAL,
    KINDS,
    KV_POOL,
    KV_TOKENS,
    MAX_CONCURRENCY,
    NON_TORCH,
    PEAK_ALLOCATED,
    PEAK_RESERVED,
    REQUESTED,
    TORCH_PEAK,
    WEIGHTS,
)
from gpuplan.evidence.read import detect, read_evidence

MIB = 2**20
ONE_GPU = VllmRun(
    ranks={"": RankMemory(weights=14.99, torch_peak=1.89, non_torch=0.25, graphs=0.91, kv_pool=58.11)},
    kv_tokens=476_016,
    concurrency=58.11,
)


def write(tmp_path, text: str | bytes, name: str = "run.log"):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


def test_reader_modules_match_the_kinds_the_command_line_offers():
    assert tuple(evidence_read.READERS) == KINDS


# -- vLLM ------------------------------------------------------------------------------------


def test_single_gpu_vllm_log(tmp_path):
    evidence = read_evidence(write(tmp_path, vllm_log(ONE_GPU)))
    assert (evidence.kind, evidence.job, evidence.version) == ("vllm", "serve", "0.19.0")
    assert evidence.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert evidence.ranks == ("0",)
    values = {term: m.by_rank()["0"] for term, m in evidence.measurements.items()}
    assert values[WEIGHTS] == 14.99 * GIB
    assert values[TORCH_PEAK] == 1.89 * GIB and values[NON_TORCH] == 0.25 * GIB
    assert values[CUDA_GRAPHS] == 0.91 * GIB and values[KV_POOL] == 58.11 * GIB
    assert values[REQUESTED] == 75.23 * GIB and values[GPU_TOTAL] == 79.19 * GIB
    assert values[KV_TOKENS] == 476_016 and values[MAX_CONCURRENCY] == 58.11
    # vLLM prints round(x, 2) GiB: each memory value is known to +-0.005 GiB.
    assert evidence.measurements[WEIGHTS].resolution == pytest.approx(0.005 * GIB)
    settings = {name: s.value for name, s in evidence.settings.items()}
    assert settings["max_model_len"] == 8192 and settings["concurrency_context"] == 8192
    assert (settings["tensor_parallel"], settings["pipeline_parallel"]) == (1, 1)
    assert (settings["dtype"], settings["kv_cache_dtype"], settings["quantization"]) == ("bf16", "auto", "none")
    assert settings["memory_utilization"] == 0.95
    assert evidence.failure is None and evidence.missing == () and evidence.incomplete == ""


def test_multi_rank_log_keeps_one_value_per_rank(tmp_path):
    run = VllmRun(
        ranks={
            "PP0": RankMemory(weights=7.51, torch_peak=1.1, non_torch=0.07, graphs=0.65, kv_pool=66.54),
            "PP1": RankMemory(weights=7.51, torch_peak=2.01, non_torch=0.07, graphs=0.65, kv_pool=65.63),
        },
        kv_tokens=1_075_312,
        concurrency=131.26,
        pp=2,
    )
    evidence = read_evidence(write(tmp_path, vllm_log(run)))
    assert evidence.ranks == ("PP0", "PP1")
    assert evidence.measurements[TORCH_PEAK].by_rank() == {"PP0": 1.1 * GIB, "PP1": 2.01 * GIB}
    assert evidence.measurements[KV_POOL].by_rank() == {"PP0": 66.54 * GIB, "PP1": 65.63 * GIB}
    assert evidence.settings["pipeline_parallel"].value == 2


def test_ranks_sort_by_stage_then_tensor_rank(tmp_path):
    memory = RankMemory(weights=3.8, torch_peak=1.0, non_torch=2.0, graphs=0.5, kv_pool=60.0)
    ranks = dict.fromkeys(("PP1_TP1", "PP0_TP1", "PP1_TP0", "PP0_TP0"), memory)
    run = VllmRun(ranks=ranks, kv_tokens=2_000_000, concurrency=244.14, tp=2, pp=2)
    assert read_evidence(write(tmp_path, vllm_log(run))).ranks == ("PP0_TP0", "PP0_TP1", "PP1_TP0", "PP1_TP1")


def test_fp8_kv_cache_setting(tmp_path):
    run = VllmRun(ranks=ONE_GPU.ranks, kv_tokens=952_032, concurrency=116.21, kv_cache_dtype="fp8_e4m3")
    evidence = read_evidence(write(tmp_path, vllm_log(run)))
    assert evidence.settings["kv_cache_dtype"].value == "fp8"
    assert evidence.settings["kv_cache_dtype"].raw == "fp8_e4m3"


def test_info_level_log_lacks_the_profiler_split_and_says_how_to_get_it(tmp_path):
    run = VllmRun(ranks=ONE_GPU.ranks, kv_tokens=476_016, concurrency=58.11, debug=False)
    evidence = read_evidence(write(tmp_path, vllm_log(run)))
    assert TORCH_PEAK not in evidence.measurements and NON_TORCH not in evidence.measurements
    assert any("VLLM_LOGGING_LEVEL=DEBUG" in missing for missing in evidence.missing)
    assert evidence.incomplete == ""


def test_failed_start_reports_the_root_cause_not_the_wrappers(tmp_path):
    run = VllmRun(ranks={}, kv_tokens=0, concurrency=0, tp=5, model="Qwen/Qwen3-14B")
    evidence = read_evidence(write(tmp_path, vllm_failed_start(run, "AssertionError: 151936 is not divisible by 5")))
    assert evidence.failure is not None
    assert evidence.failure.cause == "AssertionError: 151936 is not divisible by 5"
    assert (evidence.failure.out_of_memory, evidence.failure.during) == (False, "startup")
    assert evidence.settings["tensor_parallel"].value == 5
    assert evidence.missing == () and evidence.incomplete == ""


def test_out_of_memory_at_start_is_marked(tmp_path):
    cause = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 79.19 GiB"
    )
    evidence = read_evidence(write(tmp_path, vllm_failed_start(ONE_GPU, cause)))
    assert evidence.failure is not None and evidence.failure.out_of_memory
    assert evidence.failure.cause.startswith("torch.OutOfMemoryError: CUDA out of memory")


def test_out_of_memory_while_serving_is_a_failure_of_the_run(tmp_path):
    text = vllm_log(ONE_GPU) + (
        "(EngineCore pid=242) ERROR 04-22 00:09:12 [v1/engine/core.py:812] "
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB.\n"
    )
    evidence = read_evidence(write(tmp_path, text))
    assert evidence.failure is not None and (evidence.failure.during, evidence.failure.out_of_memory) == ("run", True)


def _without_the_up_lines(text: str) -> str:
    """The log less the lines that say the engine is up ('init engine ... took', 'Starting vLLM server')."""
    return "".join(
        line
        for line in text.splitlines(keepends=True)
        if "init engine (profile" not in line and "Starting vLLM server" not in line
    )


OOM_WHILE_SERVING = (
    "(EngineCore pid=242) ERROR 04-22 01:10:00 [v1/engine/core.py:800] torch.OutOfMemoryError: CUDA out of "
    "memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 0.5 GiB is free.\n"
)


def test_out_of_memory_after_the_kv_cache_lines_is_a_failure_without_a_line_saying_the_engine_is_up(tmp_path):
    # A start that reported its KV cache (pool, tokens, concurrency) and its graphs, then an OOM: the log kept no
    # 'init engine ... took' line (an excerpt, or another release's wording). The OOM was thrown away (no failure:
    # it was taken for a start's exception, and the start had not failed). Out of memory is out of memory.
    text = _without_the_up_lines(vllm_log(ONE_GPU)) + OOM_WHILE_SERVING
    evidence = read_evidence(write(tmp_path, text))
    assert evidence.failure is not None
    assert (evidence.failure.during, evidence.failure.out_of_memory) == ("run", True)
    assert evidence.failure.cause.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00")
    assert evidence.failure.line == text.count("\n")  # the OOM is the last line
    assert evidence.measurements[KV_TOKENS].by_rank() == {"0": 476_016}  # what the start stated is kept
    # The same OOM after vLLM's own start-up lines is the same failure, as it was.
    whole = read_evidence(write(tmp_path, vllm_log(ONE_GPU) + OOM_WHILE_SERVING)).failure
    assert whole is not None and replace(whole, line=evidence.failure.line) == evidence.failure


def test_the_api_servers_start_line_as_vllm_words_it_says_the_engine_is_up(tmp_path):
    # vLLM 0.19's API server prints "Starting vLLM API server 0 on URL" (earlier releases "Starting vLLM API server
    # on URL", later ones "Starting vLLM server on URL"). An excerpt that holds it, and no KV-cache lines, then an
    # OOM: the engine was up, so it ran out of memory while running; it was read as a start that failed.
    header = "\n".join(vllm_header(ONE_GPU)) + "\n"
    for wording in ("Starting vLLM API server 0 on http://0.0.0.0:8000", "Starting vLLM API server on http://h:8000"):
        up = f"(APIServer pid=1) INFO 04-22 00:05:00 [entrypoints/openai/api_server.py:1945] {wording}\n"
        failure = read_evidence(write(tmp_path, header + up + OOM_WHILE_SERVING)).failure
        assert failure is not None and (failure.during, failure.out_of_memory) == ("run", True), wording
    # Without it, the same OOM is the start's own failure.
    failure = read_evidence(write(tmp_path, header + OOM_WHILE_SERVING)).failure
    assert failure is not None and (failure.during, failure.out_of_memory) == ("startup", True)


def test_errors_after_a_successful_start_that_are_not_memory_are_not_failures(tmp_path):
    text = vllm_log(ONE_GPU) + (
        "(APIServer pid=1) ERROR 04-22 00:09:12 [entrypoints/openai/serving_chat.py:201] "
        "ValueError: This model's maximum context length is 8192 tokens.\n"
    )
    assert read_evidence(write(tmp_path, text)).failure is None


def test_truncated_log_names_what_is_missing(tmp_path):
    evidence = read_evidence(write(tmp_path, vllm_log(ONE_GPU, stop_after_loading=True)))
    assert evidence.measurements[WEIGHTS].by_rank() == {"0": 14.99 * GIB}
    assert "ends before the engine reported its KV cache" in evidence.incomplete
    joined = " ".join(evidence.missing)
    for phrase in ("Available KV cache memory", "GPU KV cache size", "Maximum concurrency", "CUDA graph pool"):
        assert phrase in joined
    assert "VLLM_LOGGING_LEVEL" not in joined  # the log is at DEBUG level: those lines are cut, not filtered


def test_a_log_holding_two_starts_is_read_for_the_last(tmp_path):
    first = vllm_failed_start(ONE_GPU, "ValueError: No available memory for the cache blocks.")
    evidence = read_evidence(write(tmp_path, first + vllm_log(ONE_GPU)))
    assert evidence.failure is None
    assert evidence.measurements[KV_TOKENS].by_rank() == {"0": 476_016}
    assert any("2 engine starts" in note for note in evidence.notes)


def test_another_engine_version_is_read_and_named(tmp_path):
    text = vllm_log(VllmRun(ranks=ONE_GPU.ranks, kv_tokens=476_016, concurrency=58.11, version="0.11.2"))
    text = text.replace("Available KV cache memory: 58.11 GiB", "KV cache memory available: 58.11 GiB")
    evidence = read_evidence(write(tmp_path, text))
    assert evidence.version == "0.11.2"
    assert any("vLLM 0.11.2" in note for note in evidence.notes)
    # The pool is still known from the per-rank DEBUG line; the INFO line that changed wording is not missed.
    assert evidence.measurements[KV_POOL].by_rank() == {"0": 58.11 * GIB}


def test_enforce_eager_means_no_graph_pool(tmp_path):
    run = VllmRun(ranks=ONE_GPU.ranks, kv_tokens=476_016, concurrency=58.11, enforce_eager=True)
    evidence = read_evidence(write(tmp_path, vllm_log(run)))
    assert evidence.measurements[CUDA_GRAPHS].by_rank() == {"0": 0.0}


def test_a_text_file_without_vllm_lines_is_refused_with_what_was_looked_for(tmp_path):
    path = write(tmp_path, "hello\nValueError: not a vLLM log\n" * 10)
    with pytest.raises(GpuplanError, match="no vLLM V1 startup lines in 20 lines"):
        read_evidence(path, "vllm")
    with pytest.raises(GpuplanError, match="name the format with --kind"):
        read_evidence(path)


# -- hostile input ---------------------------------------------------------------------------


def test_ansi_colours_are_stripped_before_matching(tmp_path):
    coloured = "".join(
        f"\x1b[1;36m{line[: line.index(')') + 1]}\x1b[0;0m{line[line.index(')') + 1 :]}\n"
        if line.startswith("(")
        else line + "\n"
        for line in vllm_log(ONE_GPU).splitlines()
    )
    evidence = read_evidence(write(tmp_path, coloured))
    assert evidence.measurements[WEIGHTS].by_rank() == {"0": 14.99 * GIB}
    assert evidence.measurements[KV_TOKENS].by_rank() == {"0": 476_016}


@pytest.mark.parametrize("value", ["1e400", "inf", "nan", "9" * 60, "-3.5", "0x1f"])
def test_absurd_numbers_are_ignored_with_a_note(tmp_path, value):
    text = vllm_log(ONE_GPU).replace("Model loading took 14.99 GiB", f"Model loading took {value} GiB")
    text = text.replace("14.99 GiB for weight", f"{value} GiB for weight").replace(
        "weights memory: 14.99GiB", f"weights memory: {value}GiB"
    )
    evidence = read_evidence(write(tmp_path, text))
    assert WEIGHTS not in evidence.measurements
    assert any("unreadable value" in note for note in evidence.notes)


def test_control_characters_in_evidence_never_reach_a_message(tmp_path):
    cause = "RuntimeError: boom \x1b]0;pwned\x07\x1b[2J\x00\x08 \u202eevil\u202c " + "x" * 5000
    evidence = read_evidence(write(tmp_path, vllm_failed_start(ONE_GPU, cause)))
    assert evidence.failure is not None
    shown = evidence.failure.cause
    assert shown.startswith("RuntimeError: boom")
    assert not any(char in shown for char in "\x1b\x07\x00\x08\u202e\u202c")
    assert len(shown) <= 160


def test_overlong_lines_and_binary_garbage_are_skipped(tmp_path):
    garbage = b"\x00\xff\xfe" * 1000 + b"\n" + b"A" * (200 * 1024) + b"\n"
    path = write(tmp_path, garbage + vllm_log(ONE_GPU).encode())
    evidence = read_evidence(path, "vllm")
    assert evidence.measurements[KV_TOKENS].by_rank() == {"0": 476_016}
    assert any("longer than 64 KiB" in note for note in evidence.notes)


def test_a_log_padded_with_millions_of_empty_lines_reads_at_buffer_speed(tmp_path):
    # 3,000,000 empty lines (LF and CRLF) around a vLLM log: the reader skips each run a buffer at a time; line
    # by line, Python took about 1 s per 3 million here (50 MB of them: 17 s). The lines still count: the
    # KV-cache line keeps its number (3,000,000 + its place in the log), and so does the total.
    log = vllm_log(ONE_GPU)
    blank = b"\n" * 2_000_000 + b"\r\n" * 1_000_000
    path = write(tmp_path, blank + log.encode() + blank)
    evidence = read_evidence(path)
    kv = evidence.measurements[KV_TOKENS]
    assert kv.by_rank() == {"0": 476_016}
    (line,) = [index + 1 for index, text in enumerate(log.splitlines()) if "GPU KV cache size" in text]
    assert kv.line == 3_000_000 + line


@settings(max_examples=200)
@given(st.binary(max_size=400).map(lambda b: bytes(b"\n\r a\x1b"[x % 5] for x in b)), st.sampled_from([1, 3, 8]))
def test_skipping_empty_lines_a_buffer_at_a_time_reads_as_line_by_line(data, buffer_size):
    # The same lines, numbers and count, whether the reader skips runs of empty lines through a buffer's peek
    # (buffers so small that runs cross them) or reads a plain stream line by line.
    class Plain(io.RawIOBase):
        def __init__(self, data: bytes) -> None:
            self.inner = io.BytesIO(data)

        def readline(self, size: int | None = -1) -> bytes:
            return self.inner.readline(size)

    buffered = LineReader(io.BufferedReader(io.BytesIO(data), buffer_size=buffer_size))
    plain = LineReader(Plain(data))  # type: ignore[arg-type]
    assert list(buffered) == list(plain)
    assert buffered.count == plain.count == data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)


def test_a_flood_of_rank_names_cannot_grow_memory(tmp_path):
    line = "(Worker_TP{0} pid=1) INFO 04-22 00:04:02 [gpu_model_runner.py:1] Model loading took 1.0 GiB memory\n"
    text = vllm_log(ONE_GPU) + "".join(line.format(index) for index in range(5000))
    evidence = read_evidence(write(tmp_path, text))
    assert len(evidence.measurements[WEIGHTS].values) == 4096


def test_a_fifo_is_refused_before_it_is_opened(tmp_path):
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)  # no writer: opening it for reading would block forever
    with pytest.raises(GpuplanError, match="not a regular file \\(a FIFO\\)"):
        read_evidence(str(fifo), "vllm")


@pytest.mark.parametrize("path, kind", [("/dev/null", "a character device"), (".", "a directory")])
def test_devices_and_directories_are_refused(path, kind):
    with pytest.raises(GpuplanError, match=f"not a regular file \\({kind}\\)"):
        read_evidence(path, "vllm")


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(GpuplanError, match=r"cannot read run evidence .*No such file"):
        read_evidence(str(tmp_path / "absent.log"))


# -- training evidence -----------------------------------------------------------------------


def test_torch_memory_json_from_the_snippet(tmp_path):
    text = torch_memory_json(
        38_654_705_664,  # 36 GiB
        42_949_672_960,  # 40 GiB
        total_memory=85_031_714_816,
        world_size=1,
        run={"micro_batch": 4, "seq_len": 2048, "gradient_accumulation": 8},
        memory_stats={"num_alloc_retries": 3, "num_ooms": 0},
    )
    evidence = read_evidence(write(tmp_path, text, "stats.json"))
    assert (evidence.kind, evidence.job) == ("torch-memory", "finetune")
    assert evidence.measurements[PEAK_ALLOCATED].by_rank() == {"rank 0": 36 * GIB}
    assert evidence.measurements[PEAK_RESERVED].by_rank() == {"rank 0": 40 * GIB}
    assert evidence.measurements[PEAK_ALLOCATED].resolution == 0
    assert {name: s.value for name, s in evidence.settings.items()} == {
        "world_size": 1,
        "micro_batch": 4,
        "seq_len": 2048,
        "gradient_accumulation": 8,
    }
    assert any("3 allocations retried" in note for note in evidence.notes)


def test_raw_memory_stats_dump_and_a_list_of_ranks(tmp_path):
    ranks = [
        {"rank": 0, "memory_stats": {"allocated_bytes.all.peak": 10 * GIB, "reserved_bytes.all.peak": 12 * GIB}},
        {"rank": 1, "memory_stats": {"allocated_bytes.all.peak": 11 * GIB, "reserved_bytes.all.peak": 13 * GIB}},
    ]
    import json

    evidence = read_evidence(write(tmp_path, json.dumps(ranks), "stats.json"))
    assert evidence.ranks == ("rank 0", "rank 1")
    assert evidence.measurements[PEAK_RESERVED].by_rank() == {"rank 0": 12 * GIB, "rank 1": 13 * GIB}
    top_level = json.dumps({"allocated_bytes.all.peak": 5 * GIB, "num_ooms": 2})
    evidence = read_evidence(write(tmp_path, top_level, "raw.json"))
    assert evidence.measurements[PEAK_ALLOCATED].by_rank() == {"rank 0": 5 * GIB}
    assert evidence.failure is not None and "2 out-of-memory errors" in evidence.failure.cause
    assert evidence.missing == ("max_memory_reserved (or memory_stats['reserved_bytes.all.peak'])",)


def test_out_of_memory_errors_in_torch_memory_stats_are_a_failure_of_the_run(tmp_path):
    # torch.cuda.memory_stats()["num_ooms"] counts the OutOfMemoryErrors the caching allocator raised: 3 of them
    # is a run that ran out of memory (docs/rules.md GP804), whatever the peaks it kept say. It was a note only.
    text = torch_memory_json(30 * GIB, 34 * GIB, num_ooms=3, num_alloc_retries=12)
    evidence = read_evidence(write(tmp_path, text, "stats.json"))
    assert evidence.failure is not None
    assert (evidence.failure.out_of_memory, evidence.failure.during) == (True, "run")
    assert evidence.failure.cause == "PyTorch's allocator raised 3 out-of-memory errors (num_ooms on rank 0)"
    # Retries succeeded after the allocator freed its cache: pressure, still a note, and no failure alone.
    assert any("12 allocations retried" in note for note in evidence.notes)
    retries_only = torch_memory_json(30 * GIB, 34 * GIB, memory_stats={"num_alloc_retries": 12, "num_ooms": 0})
    assert read_evidence(write(tmp_path, retries_only, "retries.json")).failure is None
    # Per rank, in a list: each rank's count is named, the total is their sum (2 + 1 = 3).
    import json

    ranks = json.dumps(
        [
            {"rank": 0, "max_memory_allocated": 30 * GIB, "num_ooms": 2},
            {"rank": 1, "max_memory_allocated": 30 * GIB},
            {"rank": 2, "max_memory_allocated": 30 * GIB, "memory_stats": {"num_ooms": 1}},
        ]
    )
    failure = read_evidence(write(tmp_path, ranks, "ranks.json")).failure
    assert failure is not None
    assert failure.cause == "PyTorch's allocator raised 3 out-of-memory errors (num_ooms: 2 on rank 0, 1 on rank 2)"


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"max_memory_allocated": NaN}', "not valid JSON"),
        ('{"max_memory_allocated": Infinity}', "not valid JSON"),
        # A key that is there with a value that cannot be a byte count is named as invalid, not as missing.
        ('{"max_memory_allocated": true}', "max_memory_allocated is true: not a byte count"),
        ('{"max_memory_allocated": 1e400}', "max_memory_allocated is inf: beyond any GPU's memory"),
        # a JSON integer past a float's range was an internal error (OverflowError, converting it to compare)
        ('{"max_memory_allocated": 1' + "0" * 309 + "}", "is an integer of 310 digits: beyond any GPU's memory"),
        ('{"max_memory_allocated": -1' + "0" * 309 + "}", "is an integer of 310 digits: beyond any GPU's memory"),
        ('{"max_memory_allocated": -5}', "max_memory_allocated is -5: a byte count cannot be negative"),
        ('{"max_memory_allocated": "40000000000"}', "max_memory_allocated is '40000000000' .text.: a byte count is"),
        ('{"max_memory_allocated": "20000MB"}', "max_memory_allocated is '20000MB' .text.: a byte count is"),
        ('{"memory_stats": {"reserved_bytes.all.peak": null}}', "reserved_bytes.all.peak is null: not a byte count"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"a": 1', "not valid JSON"),
    ],
)
def test_bad_json_is_a_clear_error(tmp_path, text, message):
    with pytest.raises(GpuplanError, match=message):
        read_evidence(write(tmp_path, text, "stats.json"))


@pytest.mark.parametrize(
    "document, message",
    [
        # 40.5 bytes, or 0.00 GiB: no training step's peak; a person wrote GiB.
        ({"max_memory_allocated": 40.5}, "max_memory_allocated is 40.5: .* it looks like GiB"),
        # 20,000 bytes (0.02 MiB): the MB a printed figure shows.
        ({"max_memory_allocated": 42 * GIB, "max_memory_reserved": 20_000}, "max_memory_reserved is 20,000: .* MB"),
        ({"max_memory_allocated": 0}, "max_memory_allocated is 0: "),
        ({"max_memory_allocated": 42 * GIB, "total_memory": 80}, "total_memory is 80: .* it looks like GiB"),
    ],
)
def test_a_byte_count_under_a_mebibyte_is_refused_as_another_unit(tmp_path, document, message):
    import json

    with pytest.raises(GpuplanError, match=message):
        read_evidence(write(tmp_path, json.dumps(document), "stats.json"))


def test_an_allocated_peak_above_the_reserved_one_is_refused(tmp_path):
    # Reserved segments hold every allocation, so no rank can allocate more than it reserved: 40e9 > 30e9 B.
    text = torch_memory_json(40_000_000_000, 30_000_000_000)
    with pytest.raises(GpuplanError, match=r"rank 0: max_memory_allocated \(37.25 GiB\) is above max_memory_reserved"):
        read_evidence(write(tmp_path, text, "stats.json"))
    # torchtune rounds both to 0.01 GiB: equal is consistent; 0.03 GiB above is beyond the two roundings.
    assert read_evidence(write(tmp_path, torchtune_steps([(17.0, 17.61, 17.61)]), "tt.log")).missing == ()
    with pytest.raises(GpuplanError, match=r"peak_memory_alloc \(17.64 GiB\) is above peak_memory_reserved"):
        read_evidence(write(tmp_path, torchtune_steps([(17.0, 17.64, 17.61)]), "tt.log"))


def test_a_huge_json_is_refused_unread(tmp_path):
    path = write(tmp_path, b'{"pad": "' + b"x" * (17 * 2**20) + b'"}', "stats.json")
    with pytest.raises(GpuplanError, match="larger than 16 MiB"):
        read_evidence(path, "torch-memory")


def test_hf_trainer_metrics_block(tmp_path):
    parts = {
        "before_init_mem_gpu": 15_320,
        "init_mem_gpu_alloc_delta": 0,
        "init_mem_gpu_peaked_delta": 0,
        "train_mem_gpu_alloc_delta": 30_640,
        "train_mem_gpu_peaked_delta": 8_123,
    }
    evidence = read_evidence(write(tmp_path, "step 10 loss 1.2\n" + hf_trainer_block(parts)))
    assert evidence.kind == "hf-trainer"
    # Peak at train = memory at its start + alloc delta + peaked delta = 15,320 + 0 + 30,640 + 8,123 MiB.
    peak = evidence.measurements[PEAK_ALLOCATED]
    assert peak.by_rank() == {"rank 0": 54_083 * MIB}
    assert peak.resolution == 4 * MIB  # four parts, each floored to whole MiB by `v >> 20`
    assert PEAK_RESERVED not in evidence.measurements


def test_hf_trainer_results_json_has_exact_bytes(tmp_path):
    import json

    document = {
        "before_init_mem_gpu": 1_000_000_000,
        "init_mem_gpu_alloc_delta": 2_000_000_000,
        "train_mem_gpu_alloc_delta": -500,
        "train_mem_gpu_peaked_delta": 4_000_000_000,
        "train_loss": 1.2,
    }
    evidence = read_evidence(write(tmp_path, json.dumps(document), "all_results.json"))
    assert evidence.kind == "hf-trainer"
    assert evidence.measurements[PEAK_ALLOCATED].by_rank() == {"rank 0": 7_000_000_000 - 500}


@pytest.mark.parametrize(
    "document, message",
    [
        # The MB the printed block shows, copied into the JSON: 15,000 + 2,000 + 20,000 = 37,000 "bytes".
        (
            {
                "init_mem_gpu_alloc_delta": 15_000,
                "train_mem_gpu_alloc_delta": 2_000,
                "train_mem_gpu_peaked_delta": 20_000,
            },
            "add up to 37,000: .* it looks like MB",
        ),
        (
            {"train_mem_gpu_alloc_delta": 2e9, "train_mem_gpu_peaked_delta": "20000MB"},
            "train_mem_gpu_peaked_delta is '20000MB'",
        ),
        ({"train_mem_gpu_alloc_delta": -3e9, "train_mem_gpu_peaked_delta": 1e9}, "add up to -2,000,000,000: "),
    ],
)
def test_hf_trainer_results_in_another_unit_or_invalid_are_refused(tmp_path, document, message):
    import json

    with pytest.raises(GpuplanError, match=message):
        read_evidence(write(tmp_path, json.dumps(document), "all_results.json"))


def test_hf_trainer_without_the_training_deltas_is_refused(tmp_path):
    path = write(tmp_path, hf_trainer_block({"init_mem_gpu_alloc_delta": 10, "train_mem_gpu_peaked_delta": 5}))
    with pytest.raises(GpuplanError, match=r"train_mem_gpu_alloc_delta missing.*skip_memory_metrics=False"):
        read_evidence(path)


def test_torchtune_peak_is_the_largest_step(tmp_path):
    text = "INFO:torchtune.utils._logging:Memory stats after model init:\n\tGPU peak memory allocation: 16.53 GiB\n"
    text += torchtune_steps([(17.1, 17.0, 18.5), (17.9, 17.75, 19.25), (17.2, 17.1, 19.0)])
    evidence = read_evidence(write(tmp_path, text))
    assert evidence.kind == "torchtune"
    assert evidence.measurements[PEAK_ALLOCATED].by_rank() == {"rank 0": 17.75 * GIB}
    assert evidence.measurements[PEAK_RESERVED].by_rank() == {"rank 0": 19.25 * GIB}


def test_torchtune_log_with_only_the_init_stats_says_what_to_turn_on(tmp_path):
    text = "INFO:torchtune.utils._logging:Memory stats after model init:\n\tGPU peak memory allocation: 16.53 GiB\n"
    with pytest.raises(GpuplanError, match=r"only the memory after model init.*log_peak_memory_stats: True"):
        read_evidence(write(tmp_path, text), "torchtune")


def test_accelerate_peak_is_the_largest_epoch(tmp_path):
    evidence = read_evidence(write(tmp_path, accelerate_epochs([(1000, 9000), (1000, 9500)])))
    assert evidence.kind == "accelerate"
    assert evidence.measurements[PEAK_ALLOCATED].by_rank() == {"rank 0": 10_500 * MIB}


@pytest.mark.parametrize(
    "text, name, kind",
    [
        (vllm_log(ONE_GPU), "a.log", "vllm"),
        (torch_memory_json(5 * GIB), "a.json", "torch-memory"),
        (hf_trainer_block({"train_mem_gpu_alloc_delta": 1, "train_mem_gpu_peaked_delta": 2}), "a.txt", "hf-trainer"),
        (torchtune_steps([(1.0, 1.0, 2.0)]), "b.txt", "torchtune"),
        (accelerate_epochs([(1, 2)]), "c.txt", "accelerate"),
    ],
)
def test_the_format_is_told_by_the_content(tmp_path, text, name, kind):
    assert detect(write(tmp_path, text, name)) == kind


def test_the_fast_line_filter_lets_every_phrase_the_vllm_reader_knows_through():
    from gpuplan.evidence import vllm

    for phrase in (*vllm._HANDLED, *vllm._OTHER):
        assert vllm._worth_a_look(f"(Worker_TP1 pid=9) INFO 04-22 00:04:20 [x.py:1] {phrase}"), phrase
