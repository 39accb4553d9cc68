"""Structural mutations of valid specs and config.json files, and the checks every output must pass.

Shared by the suite's fuzz tests (tests/test_fuzz.py, a CI-sized run) and the long run
(benchmarks/fuzz.py, 10,000 inputs). A mutated input is a spec's bytes plus, where the spec names
one, a config.json's bytes. Mutations: any value replaced by a hostile one (NaN, infinities, 1e308,
5e-324, zero, negatives, huge integers, wrong types, control and bidi characters, forged workflow
commands), keys deleted or added, YAML tags (core, nested, unsafe), anchors and aliases, line
separators, CRLF, a BOM, truncation; config.json values the same way, written with NaN/Infinity.
Beside them, ``valid_inputs``: schema-valid specs from tests/valid_specs.py, unmutated.
"""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import yaml
from conftest import spec_yaml
from hypothesis import strategies as st
from valid_specs import any_valid_spec

from gpuplan.linter import SIGNED_FIGURES

ROOT = Path(__file__).resolve().parent.parent
SPECS = [
    (path.name, yaml.safe_load(path.read_text()))
    for path in sorted((ROOT / "examples").glob("*.yaml")) + sorted((ROOT / "examples" / "findings").glob("*.yaml"))
]
CONFIG = {  # Llama-3.1-8B's config.json dimensions (meta-llama/Llama-3.1-8B), plus MoE/MLA/window keys
    "model_type": "llama",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}
CONFIG_EXTRAS = {  # keys of the harder architectures, so that mutations reach their code paths
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "sliding_window": 4096,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "head_dim": 128,
    "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128},
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
}

HOSTILE_NUMBERS = [
    math.nan,
    math.inf,
    -math.inf,
    1e308,
    -1e308,
    5e-324,
    0,
    0.0,
    -0.0,
    -1,
    -(10**15),
    2**63,
    2**64 + 1,
    10**30,
    0.5,
    1e-9,
    True,
]
HOSTILE_TEXT = [
    "",
    " ",
    "\x1b]0;pwned\x07\x1b[31mred",
    "line one\nline two",
    "reason\n::error file=x,line=1::forged\n::add-mask::secret",
    "\u202eevil\u202c",
    "a\u2028b\u2029c\x85d",
    "\x00\x01\x7f\x9b",
    "x" * 5000,
    "🙂" * 50,
    "GP201",
    "llama-3.1-8b",
    "h100-sxm",
    "2026-13-45",
    "0000-00-00",
    "9999-12-31",
    "-",
    "../../../../etc/passwd",
    "/dev/zero",
]
hostile_values = st.one_of(
    st.sampled_from(HOSTILE_NUMBERS),
    st.sampled_from(HOSTILE_TEXT),
    st.none(),
    st.just([]),
    st.just({}),
    st.just([1, "a", None]),
    st.just({"nested": {"deep": [math.nan]}}),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)

# Text-level mutations: YAML features a data-level mutation cannot produce.
_TAGS = ["!!bool", "!!int", "!!float", "!!str", "!!null", "!!binary", "!!timestamp", "!!python/object:os.system"]


def _pointers(data: Any, pointer: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [pointer]
    children = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    for key, value in children:
        found += _pointers(value, (*pointer, key))
    return found


def _parent(data: Any, pointer: tuple[Any, ...]) -> Any:
    for part in pointer[:-1]:
        data = data[part]
    return data


@st.composite
def mutated_data(draw: Any, seed: Any) -> Any:
    """``seed`` with 1-3 structural mutations: values replaced, keys deleted or added, subtrees swapped."""
    data = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 3))):
        pointers = [p for p in _pointers(data) if p]
        if not pointers:
            break
        pointer = draw(st.sampled_from(pointers))
        parent = _parent(data, pointer)
        kind = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "swap"]))
        if kind == "replace":
            parent[pointer[-1]] = copy.deepcopy(draw(hostile_values))
        elif kind == "delete":
            del parent[pointer[-1]]
        elif kind == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["zz", "\x1b[2J", "contxt", "\u202ekey", 7]))] = copy.deepcopy(
                draw(hostile_values)
            )
        elif kind == "swap":
            other = draw(st.sampled_from(pointers))
            parent[pointer[-1]] = copy.deepcopy(_parent(data, other)[other[-1]])
    return data


def dump_yaml(data: Any) -> str:
    return spec_yaml(data, sort_keys=False, allow_unicode=True, width=10_000)


@st.composite
def mutated_text(draw: Any, text: str) -> bytes:
    """YAML text with 0-2 text-level mutations: tags, anchors and aliases, line separators, CRLF, BOM, cuts."""
    for _ in range(draw(st.integers(0, 2))):
        lines = text.split("\n")
        index = draw(st.integers(0, max(0, len(lines) - 1)))
        line = lines[index]
        kind = draw(st.sampled_from(["tag", "nested-tag", "anchor", "separator", "crlf", "bom", "cut", "indent"]))
        if kind in ("tag", "nested-tag") and ": " in line:
            key, value = line.split(": ", 1)
            tags = draw(st.sampled_from(_TAGS)) + (" " + draw(st.sampled_from(_TAGS)) if kind == "nested-tag" else "")
            lines[index] = f"{key}: {tags} {value}"
        elif kind == "anchor" and ": " in line and index > 0:
            key, value = line.split(": ", 1)
            lines[index] = f"{key}: &a {value}"
            lines.append("zz_alias: *a")
        elif kind == "separator":
            lines[index] = line + draw(st.sampled_from(["\u2028", "\x85", "\u2029", "\r"]))
        elif kind == "crlf":
            text = text.replace("\n", "\r\n")
            continue
        elif kind == "bom":
            text = "\ufeff" + text
            continue
        elif kind == "cut":
            text = text[: draw(st.integers(0, len(text)))]
            continue
        elif kind == "indent":
            lines[index] = "   " + line
        text = "\n".join(lines)
    return text.encode("utf-8", "surrogatepass")


@st.composite
def fuzzed_inputs(draw: Any, with_config: bool = False) -> tuple[str, bytes, bytes | None]:
    """(seed name, spec bytes, config.json bytes or None)."""
    name, seed = draw(st.sampled_from(SPECS))
    seed = copy.deepcopy(seed)
    config = None
    if with_config:
        seed["model"] = {"config": "model/config.json"}
        base = dict(CONFIG)
        for key in draw(st.lists(st.sampled_from(sorted(CONFIG_EXTRAS)), max_size=3, unique=True)):
            base[key] = copy.deepcopy(CONFIG_EXTRAS[key])
        if base.get("num_local_experts") is None:
            base.pop("num_experts_per_tok", None)
        mutated_config = draw(mutated_data(base)) if draw(st.booleans()) else base
        text = json.dumps(mutated_config, allow_nan=True, ensure_ascii=False, default=str)
        if draw(st.integers(0, 9)) == 0:
            text = text[: draw(st.integers(0, len(text)))]
        config = text.encode("utf-8", "surrogatepass")
        data = seed if draw(st.booleans()) else draw(mutated_data(seed))
    else:
        data = draw(mutated_data(seed))
    try:
        text = dump_yaml(data)
    except yaml.YAMLError:
        text = dump_yaml(seed)
    return name, draw(mutated_text(text)), config


Files = dict[str, bytes]  # config.json files by their path relative to the spec


@st.composite
def valid_inputs(draw: Any) -> tuple[str, bytes, Files]:
    """(origin, spec bytes, its config.json files): a schema-valid spec from tests/valid_specs.py, generated
    from the schema, an example with one or two fields changed, or an example on a generated config.json."""
    case = draw(any_valid_spec())
    files = {name: json.dumps(content, ensure_ascii=False).encode() for name, content in case.files.items()}
    return case.origin, case.yaml().encode(), files


def write_input(folder: Path, spec: bytes, config: bytes | Files | None) -> Path:
    """Write the spec (spec.yaml) and its config.json: the bytes of model/config.json, or files by path."""
    path = folder / "spec.yaml"
    path.write_bytes(spec)
    files = {"model/config.json": config} if isinstance(config, bytes) else config or {}
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    return path


def input_errors(results: dict[str, tuple[int, str, str]]) -> set[str]:
    """The input and schema error codes (GP0xx but GP010, GP1xx) of lint's JSON output: an input without
    them is schema-valid and resolves, and reaches the estimate."""
    out = results["lint json"][1]
    try:
        findings = json.loads(out)["findings"]
    except (ValueError, KeyError, TypeError):
        return {"unreadable lint json"}
    return {f["code"] for f in findings if f["code"].startswith(("GP0", "GP1")) and f["code"] != "GP010"}


# Raw control, separator and bidi characters: none may reach text output (a newline only ends a line).
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# A computed figure that is not finite, or a negative size (an echo of the spec's own ".nan" is fine).
NOT_FINITE_OR_NEGATIVE_SIZE = re.compile(
    r"(?:\b(?:inf|nan|Infinity|NaN)|[$€£](?:inf|nan))(?=\s*(?:GiB|GB|ms|h\b|hours|tokens|%|B/|USD|EUR|/|GPU))"
    r"|(?<![\w-])-\d[\d,.]*\s*(?:GiB|GB|bytes|B/token)"  # not a name's hyphen (a price source's "A100-80GB")
)


# A GP010 finding in text, GitHub or JSON output (a waiver may name GP010, and its GP702 says so).
GP010_FINDING = re.compile(r'GP010 \[|title=GP010|"code": "GP010"')


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} in JSON output")


def problems(results: dict[str, tuple[int, str, str]], signed: frozenset[str] = frozenset()) -> list[str]:
    """Every way the outputs of one input break the contract; ``results`` maps a command to (code, out, err).

    ``signed``: JSON keys whose numbers may be negative (still finite), as a plan's ``headroom_pct`` is
    for a layout that does not fit; the figures signed by design always may (``SIGNED_FIGURES``: an error
    band's bias, the KV pool a budget does not leave, an offered figure slower than gpuplan's)."""
    signed = signed | SIGNED_FIGURES
    found = []
    for command, (code, out, err) in results.items():
        if code not in (0, 1, 2):
            found.append(f"{command}: exit code {code}")
        for stream in (out, err):
            if "internal error" in stream or "Traceback" in stream or GP010_FINDING.search(stream):
                found.append(f"{command}: internal error: {stream[-600:]}")
        if command.endswith("json") and out:
            try:
                document = json.loads(out, parse_constant=_reject_constant)
            except ValueError as error:
                found.append(f"{command}: output is not JSON: {error}")
                continue
            found += [
                f"{command}: {where} = {value!r}"
                for where, value in _unsafe_numbers(document)
                if not (where.rsplit(".", 1)[-1] in signed and math.isfinite(value))
            ]
        else:
            if RAW_CONTROL.search(out) or RAW_CONTROL.search(err):
                found.append(f"{command}: raw control character in text output")
            match = NOT_FINITE_OR_NEGATIVE_SIZE.search(out)
            if match:
                found.append(f"{command}: {match.group()!r} in text output")
    return found


_SIGNED = frozenset({"line", "col"})  # positions: >= 1, checked by their own property


def _unsafe_numbers(value: Any, where: str = "") -> list[tuple[str, Any]]:
    """Numbers in the estimate or lint JSON that are not finite and >= 0."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, (int, float)):
        return [] if math.isfinite(value) and value >= 0 else [(where, value)]
    items = value.items() if isinstance(value, dict) else enumerate(value)
    return [found for key, item in items for found in _unsafe_numbers(item, f"{where}.{key}")]
