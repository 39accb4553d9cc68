"""Schema-valid workload specs (and the config.json files they name), generated from the schema itself.

Shared by the property tests (tests/test_properties_valid_specs.py, tests/test_fuzz.py) and the long fuzz
run (benchmarks/fuzz.py). Where tests/mutations.py breaks valid specs, this module builds valid ones, so
that the estimators, the rules and the planner see every value the format allows.

Three sources, all read from schemas/workload.schema.json rather than written out by hand:

- ``valid_specs()``: whole documents. The walker follows the schema (properties, ``$ref``, ``anyOf``,
  ``oneOf``, arrays, maps): required keys always, optional keys present or absent. Each scalar is drawn
  from its *pool* (``leaf_pool``): every enum value, every bound (minimum, maximum, just inside an
  exclusive minimum, one step inside each bound), the default, the values the bundled examples and the
  model catalog use at that place, plus any value in range. Fields that name something are drawn from
  what exists (catalog GPU and model ids, the spec's own ``gpus``, generated config.json files, rule
  codes), and ``repair`` then mostly (nine times in ten) satisfies the checks beyond the schema: GP021
  (architecture consistency), GP023 (layout divisibility, expert parallelism), GP024 (serving lengths)
  and GP025 (conflicting fine-tuning settings), so that most specs reach the estimate and the rules.
- ``example_variants()`` / ``one_field_variants()``: each bundled example with one or two fields set to
  each of their pool values (pairwise, random) or, exhaustively, one enum field at a time to each value.
  ``set_field`` creates what the field needs (a tenant, a custom GPU, an explicit architecture in place
  of a catalog id); ``repair`` keeps the set fields pinned.
- ``hf_configs()``: Hugging Face config.json files for ``model.config``, of every family
  gpuplan/hf_config.py reads specially: dense (Llama, Qwen, Gemma 1-3, Phi, GPT-NeoX, Falcon, StarCoder),
  MoE (Mixtral, Qwen-MoE, DeepSeek-V3 with MLA, gpt-oss, Llama 4), hybrid (Qwen3-Next's Gated DeltaNet,
  Nemotron-H's Mamba-2 pattern), sliding windows (a window, a pattern,
  ``layer_types``), tied or untied embeddings, ``quantization_config`` (AWQ, GPTQ, fp8, MXFP4,
  compressed-tensors, bitsandbytes 8-bit, with modules kept in 16-bit) and multimodal wrappers.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml
from conftest import spec_yaml
from hypothesis import strategies as st

from gpuplan.architecture import Architecture, ArchitectureError
from gpuplan.catalog import get_model, gpu_catalog, model_catalog
from gpuplan.codes import CODES
from gpuplan.conflicts import BF16_PRECISIONS, runs_pipeline, runs_tensor_parallel
from gpuplan.defaults import resolve_ref
from gpuplan.resources import schema_path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA: dict[str, Any] = json.loads(schema_path().read_text())
GPU_IDS = sorted(gpu_catalog())
MODEL_IDS = sorted(model_catalog())
EXAMPLES: list[tuple[str, dict[str, Any]]] = [
    (str(path.relative_to(ROOT / "examples")), yaml.safe_load(path.read_text()))
    for path in sorted((ROOT / "examples").glob("*.yaml")) + sorted((ROOT / "examples" / "findings").glob("*.yaml"))
]
RULE_NAMES = sorted(code.code for code in CODES.values()) + sorted(code.name for code in CODES.values())
CUSTOM_GPU_IDS = ["custom-gpu", "my.gpu_2", "x"]

Path_ = tuple[str, ...]  # a schema path: property names, "[]" for array items, "{}" for a map's values
ITEM, ENTRY = "[]", "{}"


# -- reading the schema ---------------------------------------------------------------------------------


def resolved(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its local ``$ref`` followed (the schema step's own reading of a reference)."""
    return resolve_ref(SCHEMA, node)


def node_at(path: Path_) -> dict[str, Any]:
    """The schema node of ``path``."""
    node = resolved(SCHEMA)
    for part in path:
        if part == ITEM:
            node = resolved(node["items"])
        elif part == ENTRY:
            node = resolved(node["additionalProperties"])
        else:
            node = resolved(node["properties"][part])
    return node


def leaf_fields(node: dict[str, Any] | None = None, path: Path_ = ()) -> list[tuple[Path_, dict[str, Any]]]:
    """Every scalar field of the schema (array items of scalars included), with its node."""
    node = resolved(SCHEMA if node is None else node)
    found: list[tuple[Path_, dict[str, Any]]] = []
    if node.get("type") == "object":
        for name, child in node.get("properties", {}).items():
            found += leaf_fields(child, (*path, name))
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            found += leaf_fields(extra, (*path, ENTRY))
    elif node.get("type") == "array":
        found += leaf_fields(node["items"], (*path, ITEM))
    elif path:
        found.append((path, node))
    return found


def enum_values(node: dict[str, Any]) -> list[Any]:
    """The closed choices of a node: its enum, or the enums of its oneOf branches."""
    if "enum" in node:
        return list(node["enum"])
    return [value for branch in node.get("oneOf", []) for value in branch.get("enum", [])]


ENUM_FIELDS: list[tuple[Path_, list[Any]]] = [
    (path, enum_values(node)) for path, node in leaf_fields() if enum_values(node)
]


def _integers(node: dict[str, Any]) -> list[int]:
    low, high = node.get("minimum", 0), node.get("maximum", 10**6)
    found = {low, min(low + 1, high), max(high - 1, low), high}
    if isinstance(node.get("default"), int) and not isinstance(node.get("default"), bool):
        found.add(node["default"])
    return sorted(found)


def _numbers(node: dict[str, Any]) -> list[float | int]:
    high = node.get("maximum", 1e6)
    if "exclusiveMinimum" in node:
        low = node["exclusiveMinimum"]
        found: list[float | int] = [math.nextafter(low, math.inf), low + 1e-6]
    else:
        low = node.get("minimum", 0)
        found = [low, float(low), low + 1e-6]
    found += [high, float(high), high - 1e-6 * max(1, abs(high)), (low + high) / 2]
    if "default" in node:
        found.append(node["default"])
    unique = {(type(value), value): value for value in found if value <= high}  # 1 and 1.0 both kept
    return sorted(unique.values())


_PATTERN_VALUES = {
    "^20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$": ["2000-01-01", "2026-11-20", "2026-12-02", "2099-12-31"],
    "^(GP[0-9]{3}|[a-z][a-z0-9-]*)$": ["GP201", "GP999", "does-not-fit", "z"],
    "^[A-Z]{3}$": ["USD", "EUR", "ZZZ"],
    "^[a-z0-9][a-z0-9._-]*$": CUSTOM_GPU_IDS,
    "^[ASLM-]+$": ["A", "LLLA", "SA", "SSSSSA", "M-", "M-M-MA-", "L", "M", "-", "LA-", "SLM"],
    # A release of every generation vllm_releases tells apart, the forms pip and vLLM print, and releases
    # older and newer than it models.
    "^v?[0-9]+\\.[0-9]+(\\.[0-9]+)?([.+-][0-9A-Za-z.+-]*)?$": [
        "0.5.4",
        "0.6.0",
        "0.6.4.post1",
        "0.6.5",
        "0.7.3",
        "0.8.0",
        "0.8.5",
        "0.9.1",
        "0.10.1.dev101+gbda9d0535",
        "0.11.0",
        "0.11.2",
        "0.17.0",
        "0.19",
        "0.20.0",
        "0.28.0",
        "0.34.0",
        "v0.40",
    ],
    # Every architecture gpuplan tells apart (vLLM's MXFP4 padding), and ones it does not know.
    "^(sm[0-9]{2,3}|gfx[0-9a-f]{3,4})$": [
        "sm75",
        "sm80",
        "sm90",
        "sm100",
        "sm120",
        "sm999",
        "gfx942",
        "gfx950",
        "gfx1100",
    ],
}
# Free text the schema allows: empty, one character, the longest, and what output must render safely.
_TEXT = ["", "x", "ünïcödé 🙂", "two\nlines", "\x1b[31mred\x1b[0m", "\u202eevil\u202c", "::error::forged"]


def _strings(node: dict[str, Any]) -> list[str]:
    if "pattern" in node:
        return list(_PATTERN_VALUES[node["pattern"]])
    low, high = node.get("minLength", 0), node.get("maxLength", 200)
    found = [text for text in _TEXT if low <= len(text) <= high]
    return found + ["y" * max(low, 1), "z" * high]


def boundary_values(node: dict[str, Any]) -> list[Any]:
    """A node's enum values, or its bounds and the values just inside them, and its default."""
    if "const" in node:
        return [node["const"]]
    choices = enum_values(node)
    if choices:
        integer = next((b for b in node.get("oneOf", []) if b.get("type") == "integer"), None)
        return choices + (_integers(integer) if integer else [])
    kind = node.get("type")
    if kind == "integer":
        return _integers(node)
    if kind == "number":
        return _numbers(node)
    if kind == "boolean":
        return [False, True]
    if kind == "string":
        return _strings(node)
    raise AssertionError(f"no boundary values for {node}")


def _normalised(path: tuple[Any, ...], data: Any) -> Path_:
    """The schema path of a concrete pointer into ``data`` (list indices -> [], map keys -> {})."""
    found: list[str] = []
    node = resolved(SCHEMA)
    for part in path:
        if isinstance(part, int):
            found.append(ITEM)
            node = resolved(node["items"])
        elif part in node.get("properties", {}):
            found.append(part)
            node = resolved(node["properties"][part])
        else:
            found.append(ENTRY)
            node = resolved(node["additionalProperties"])
    return tuple(found)


def _scalars(data: Any, pointer: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _scalars(value, (*pointer, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _scalars(value, (*pointer, index))
    else:
        yield pointer, data


def architecture_dict(arch: Architecture) -> dict[str, Any]:
    """``arch`` as a spec's ``model.architecture`` (the fields that differ from their defaults)."""
    values: dict[str, Any] = {}
    for item in fields(Architecture):
        value = getattr(arch, item.name)
        if item.name in ("layers", "hidden", "heads", "intermediate", "vocab") or value != item.default:
            values[item.name] = value
    return values


def _observed() -> dict[Path_, list[Any]]:
    """The values the bundled examples (and, for architectures, the model catalog) use at each place."""
    seen: dict[Path_, list[Any]] = {}
    documents = [data for _, data in EXAMPLES]
    documents += [{"model": {"architecture": architecture_dict(m.architecture)}} for m in model_catalog().values()]
    for data in documents:
        for pointer, value in _scalars(data):
            try:
                path = _normalised(pointer, data)
            except KeyError:
                continue
            bucket = seen.setdefault(path, [])
            if value not in bucket or type(value) is not type(bucket[bucket.index(value)]):
                bucket.append(value)
    return seen


OBSERVED = _observed()


def leaf_pool(path: Path_) -> list[Any]:
    """The values ``path`` is drawn from besides a random one in range: enum values, bounds, just inside
    them, the default, and what the examples and catalog models use there. Names of things (GPU and
    model ids, config paths) are not in the schema: see ``domain_values``."""
    node = node_at(path)
    pool = boundary_values(node)
    for value in OBSERVED.get(_tail(path), []):
        if value not in pool:
            pool.append(value)
    return pool


def _tail(path: Path_) -> Path_:
    """Tenants' models share the spec model's observed values."""
    if path[:4] == ("serve", "tenants", ITEM, "model"):
        return ("model", *path[4:])
    return path


def domain_values(path: Path_) -> list[Any] | None:
    """The values of a field that names something: every catalog GPU, model id, rule; None otherwise."""
    if (path[-1:] == ("gpu",) and "hardware" in path) or path == ("plan", "gpu", ITEM):
        return GPU_IDS
    if path[-2:] == ("model", "id") or path == ("serve", "speculative", "draft_model"):
        return MODEL_IDS
    if path == ("waivers", ITEM, "rule"):
        return RULE_NAMES
    return None


def _random_in_range(node: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = node.get("type")
    if kind == "integer":
        return st.integers(node.get("minimum", 0), node.get("maximum", 10**6))
    if kind == "number":
        low = node.get("minimum", node.get("exclusiveMinimum", 0))
        return st.floats(
            low, node.get("maximum", 1e6), exclude_min="exclusiveMinimum" in node, allow_nan=False, allow_infinity=False
        )
    if kind == "string" and "pattern" not in node:
        low, high = node.get("minLength", 0), min(node.get("maxLength", 30), 30)
        return st.text(min_size=low, max_size=max(low, high))
    return st.sampled_from(boundary_values(node))


def leaf_values(path: Path_) -> st.SearchStrategy[Any]:
    """A scalar for ``path``: from its pool most of the time, else any value the schema allows."""
    named = domain_values(path)
    if named is not None:
        return st.sampled_from(named)
    pool = st.sampled_from(leaf_pool(path))
    return st.one_of(pool, pool, _random_in_range(node_at(path)))


# -- whole documents ----------------------------------------------------------------------------------


@dataclass
class GeneratedSpec:
    """A spec document, the config.json files it names (relative path -> JSON value) and where it came from."""

    document: dict[str, Any]
    files: dict[str, Any] = field(default_factory=dict)
    origin: str = "generated"
    repaired: bool = True

    def yaml(self) -> str:
        return spec_yaml(self.document, sort_keys=False, allow_unicode=True, width=10_000)

    def write(self, folder: Path) -> Path:
        """Write the spec (spec.yaml) and its config.json files into ``folder``; return the spec's path."""
        for name, content in self.files.items():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(content, ensure_ascii=False), encoding="utf-8")
        path = folder / "spec.yaml"
        path.write_text(self.yaml(), encoding="utf-8")
        return path


class _Walk:
    """One document's draw: the custom GPU ids and config.json files it has so far."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw
        self.gpu_ids: list[str] = list(GPU_IDS)
        self.custom: list[str] = []
        self.files: dict[str, Any] = {}

    def value(self, path: Path_) -> Any:
        node = node_at(path)
        if path[-1:] == ("model",):
            return self.model()
        if (path[-1:] == ("gpu",) and "hardware" in path) or path == ("plan", "gpu", ITEM):
            return self.draw(st.sampled_from(self.custom + self.gpu_ids if self.custom else self.gpu_ids))
        if node.get("type") == "object" and "enum" not in node:
            return self.mapping(path, node)
        if node.get("type") == "array":
            return self.array(path, node)
        return self.draw(leaf_values(path))

    def mapping(self, path: Path_, node: dict[str, Any]) -> dict[str, Any]:
        required = list(node.get("required", []))
        if not path:  # a spec has finetune, serve or both
            required += self.draw(st.sampled_from([["finetune"], ["serve"], ["finetune", "serve"]]))
        result: dict[str, Any] = {}
        names = list(node.get("properties", {}))
        if not path:  # custom GPUs first, so that hardware can name them
            names.sort(key=lambda name: name != "gpus")
        for name in names:
            if name in required or self.draw(st.booleans()):
                result[name] = self.value((*path, name))
                if path == () and name == "gpus":
                    self.custom = list(result[name])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            keys = self.gpu_ids + self.custom if path[:1] == ("budget",) else CUSTOM_GPU_IDS
            for key in self.draw(st.lists(st.sampled_from(keys), min_size=0, max_size=3, unique=True)):
                result[key] = self.value((*path, ENTRY))
        return result

    def array(self, path: Path_, node: dict[str, Any]) -> list[Any]:
        low = node.get("minItems", 0)
        size = self.draw(st.integers(low, max(low, min(node.get("maxItems", 3), 3))))
        items: list[Any] = []
        for _ in range(size):
            item = self.value((*path, ITEM))
            if node.get("uniqueItems") and item in items:
                continue
            items.append(item)
        return items or [self.value((*path, ITEM))] if low else items

    def model(self) -> dict[str, Any]:
        kind = self.draw(st.sampled_from(["id", "id", "config", "architecture"]))
        if kind == "id":
            model: dict[str, Any] = {"id": self.draw(st.sampled_from(MODEL_IDS))}
        elif kind == "config":
            name = f"models/m{len(self.files)}/config.json"
            self.files[name] = self.draw(hf_configs())
            model = {"config": name}
        else:
            model = {"architecture": self.draw(architectures())}
        if self.draw(st.booleans()):
            model["dtype"] = self.draw(leaf_values(("model", "dtype")))
        return model


@st.composite
def architectures(draw: Any, repair: bool = True) -> dict[str, Any]:
    """A ``model.architecture``: a catalog model's, or one drawn field by field from the schema."""
    if draw(st.integers(0, 3)) == 0:
        values = architecture_dict(get_model(draw(st.sampled_from(MODEL_IDS))).architecture)
        if "sliding_layers" in values:
            values["sliding_layers"] = {2: draw(st.sampled_from([2, "alternate"]))}.get(
                values["sliding_layers"], values["sliding_layers"]
            )
        return values
    walk = _Walk(draw)
    values = walk.mapping(("model", "architecture"), node_at(("model", "architecture")))
    return repair_architecture(values) if repair else values


def repair_architecture(values: dict[str, Any], pinned: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Make an explicit architecture consistent (the checks of gpuplan.architecture.make_architecture)."""
    heads = values["heads"]
    kv = values.get("kv_heads")
    if kv is not None and heads % kv:
        if "heads" in pinned:
            values["kv_heads"] = math.gcd(heads, kv)
        else:
            values["heads"] = heads = kv * max(1, heads // kv)
    if not values.get("head_dim") and values["hidden"] % heads:
        if "hidden" in pinned or heads > values["hidden"]:
            values["head_dim"] = max(1, values["hidden"] // heads)
        else:
            values["hidden"] -= values["hidden"] % heads
    experts = values.get("experts", 0)
    if experts:
        per_token = values.get("experts_per_token")
        if per_token is None or per_token > experts:
            values["experts_per_token"] = min(per_token or 2, experts)
        if values.get("dense_layers", 0) >= values["layers"]:
            values["dense_layers"] = values["layers"] - 1
    if values.get("kv_lora_rank"):
        for name in ("qk_rope_head_dim", "v_head_dim"):
            if not values.get(name):
                values[name] = 64
    _repair_layer_pattern(values)
    return values


_LINEAR_DIMS = {"linear_key_heads": 2, "linear_value_heads": 4, "linear_key_head_dim": 64, "linear_value_head_dim": 64}
_MAMBA_DIMS = {"mamba_heads": 8, "mamba_head_dim": 64, "ssm_state": 16}


def _repair_layer_pattern(values: dict[str, Any]) -> None:
    """The layer pattern and its state layers' dimensions agree (make_architecture's _check_hybrid)."""
    pattern = values.get("layer_pattern", "")
    if pattern:
        pattern = pattern[: values["layers"]]
        if "L" in pattern and "M" in pattern:
            pattern = pattern.replace("M", "L")
        windowed = values.get("sliding_window") or values.get("attention_chunk")
        if "S" in pattern and not windowed:
            values["sliding_window"] = 4096
        elif windowed and "S" not in pattern:
            pattern = "S" + pattern[1:]
        values.pop("sliding_layers", None)
        values["layer_pattern"] = pattern
    for letter, dims in (("L", _LINEAR_DIMS), ("M", _MAMBA_DIMS)):
        for name, default in dims.items():
            if letter in pattern:
                values.setdefault(name, default)
            else:
                values.pop(name, None)
    if "L" in pattern and values["linear_value_heads"] % values["linear_key_heads"]:
        values["linear_value_heads"] = values["linear_key_heads"] * max(
            1, values["linear_value_heads"] // values["linear_key_heads"]
        )
    if "M" in pattern and values["mamba_heads"] % values.get("ssm_groups", 1):
        values["ssm_groups"] = math.gcd(values["mamba_heads"], values.get("ssm_groups", 1))
    if not pattern:
        values.pop("separate_mlp", None)


def _model_field(model: dict[str, Any], files: dict[str, Any], name: str) -> int:
    """An architecture field of a spec's model (0 for one that does not resolve or lacks it)."""
    if "id" in model:
        entry = model_catalog().get(model["id"])
        return getattr(entry.architecture, name) if entry else 0
    if "config" in model:
        from gpuplan.hf_config import read_hf_model

        try:
            return getattr(read_hf_model(files[model["config"]]).architecture, name)
        except (ArchitectureError, KeyError, TypeError):
            return 0
    return int(model.get("architecture", {}).get(name, 0))


def _model_experts(model: dict[str, Any], files: dict[str, Any]) -> int:
    """Routed experts of a spec's model (0 for a dense one or one that does not resolve)."""
    return _model_field(model, files, "experts")


def _repair_serving_features(serve: dict[str, Any], pinned: frozenset[str], vocab: int) -> None:
    """GP027: host-cached adapters at least the GPU's; a draft model with method draft only, of the model's
    vocabulary."""
    lora = serve.get("lora", {})
    if lora.get("max_cpu_adapters", lora.get("max_adapters", 1)) < lora.get("max_adapters", 1):
        lora["max_cpu_adapters"] = lora["max_adapters"]
    speculative = serve.get("speculative")
    if speculative is None:
        return
    same = sorted(m for m, entry in model_catalog().items() if entry.architecture.vocab == vocab)
    draft = speculative.get("draft_model")
    if draft is not None and (model_catalog().get(draft) is None or model_catalog()[draft].architecture.vocab != vocab):
        speculative.pop("draft_model")
        if same:
            speculative["draft_model"] = same[0]
    if speculative["method"] == "draft" and "draft_model" not in speculative:
        if same:
            speculative["draft_model"] = same[0]
        else:
            speculative["method"] = "eagle"
    if speculative["method"] != "draft" and "draft_model" in speculative:
        if "draft_model" in pinned and same:
            speculative["method"] = "draft"
        else:
            del speculative["draft_model"]


def _largest_divisor(count: int, limit: int) -> int:
    return max(d for d in range(1, min(count, limit) + 1) if count % d == 0)


def _repair_hardware(hardware: dict[str, Any], pinned: frozenset[str], serve: bool, experts: int) -> None:
    tp, pp = hardware.get("tensor_parallel", 1), hardware.get("pipeline_parallel", 1)
    count = hardware.get("count", 1)
    if count % (tp * pp):
        if "count" not in pinned:
            if tp * pp > 100_000 and "pipeline_parallel" not in pinned:
                pp = max(1, 100_000 // tp)
            if tp * pp > 100_000 and "tensor_parallel" not in pinned:
                tp = max(1, 100_000 // pp)
            if tp * pp <= 100_000:  # the next multiple of tp x pp, within the schema's bound
                count = min(100_000 // (tp * pp), -(-count // (tp * pp))) * tp * pp
        else:
            if "pipeline_parallel" not in pinned:
                pp = math.gcd(count, pp)
            if "tensor_parallel" not in pinned:
                tp = math.gcd(count // pp if count % pp == 0 else count, tp)
        hardware.update(count=count, tensor_parallel=tp, pipeline_parallel=pp)
    ep = hardware.get("expert_parallel", 1)
    if ep > 1 and "expert_parallel" not in pinned:
        if not serve or not experts:
            del hardware["expert_parallel"]
        else:
            hardware["expert_parallel"] = _largest_divisor(hardware.get("count", 1), min(ep, experts))


def _repair_engine(serve: dict[str, Any], pinned: frozenset[str]) -> None:
    """GP026: TensorRT-LLM's byte cap only with engine trtllm, whose fraction must stay below 1; a vLLM
    release only with engine vllm; vLLM's token budget at least its running sequences."""
    engine = serve.get("engine", "vllm")
    if "engine_version" in serve and engine != "vllm":
        if "engine_version" in pinned and "engine" not in pinned:
            serve["engine"] = engine = "vllm"
        else:
            del serve["engine_version"]
    if "max_gpu_total_bytes" in serve and engine != "trtllm":
        if "max_gpu_total_bytes" in pinned and "engine" not in pinned:
            serve["engine"] = engine = "trtllm"
        else:
            del serve["max_gpu_total_bytes"]
    tokens, sequences = serve.get("max_batched_tokens"), serve.get("max_sequences")
    if engine == "vllm" and tokens is not None and sequences is not None and tokens < sequences:
        if "max_batched_tokens" in pinned:
            serve["max_sequences"] = tokens
        else:
            serve["max_batched_tokens"] = sequences
    if engine == "trtllm" and serve.get("memory_utilization") == 1:
        if "memory_utilization" not in pinned:
            serve["memory_utilization"] = 0.95
        elif "engine" not in pinned:
            serve["engine"] = "vllm"
            serve.pop("max_gpu_total_bytes", None)


def _repair_serve(serve: dict[str, Any], pinned: frozenset[str], pinned_prompt: frozenset[str]) -> None:
    # A request rate belongs to a steady stream, and a steady stream needs one (GP024).
    steady = serve.get("arrival") == "steady"
    if steady != ("rate_rps" in serve):
        if "rate_rps" in serve and "arrival" not in pinned:
            serve["arrival"] = "steady"
        elif "rate_rps" in serve:
            del serve["rate_rps"]
        else:
            serve["rate_rps"] = 1.0
    # Static batching is estimated for a closed loop of clients only (GP024).
    if serve.get("batching") == "static" and serve.get("arrival", "closed-loop") != "closed-loop":
        if "batching" in pinned:
            serve["arrival"] = "closed-loop"
            serve.pop("rate_rps", None)
        else:
            serve["batching"] = "continuous"
    _repair_engine(serve, pinned)
    context, output = serve["context"], serve.get("output_tokens", 256)
    if output > context:
        if "output_tokens" in pinned and "context" not in pinned:
            serve["context"] = context = output
        else:
            serve["output_tokens"] = output = max(1, context // 2)
    _repair_prompts(serve, pinned, pinned_prompt)
    _repair_output_spread(serve, pinned)


def _repair_prompts(serve: dict[str, Any], pinned: frozenset[str], pinned_prompt: frozenset[str]) -> None:
    context, output = serve["context"], serve.get("output_tokens", 256)
    prompts = serve.get("prompt_tokens")
    if prompts is None:
        return
    if "p90" in pinned_prompt and prompts.get("p90", prompts["mean"]) < prompts["mean"]:
        prompts["mean"] = prompts["p90"]
    if prompts["mean"] + output > context and "context" not in pinned and output + prompts["mean"] <= 10_000_000:
        serve["context"] = context = output + prompts["mean"]
    if prompts["mean"] + output > context:
        if context - output >= 1:
            prompts["mean"] = context - output
        elif context > 1 and "output_tokens" not in pinned:
            serve["output_tokens"] = output = context - 1
            prompts["mean"] = 1
        else:
            del serve["prompt_tokens"]
            return
    if prompts.get("p90", prompts["mean"]) < prompts["mean"]:
        prompts["p90"] = prompts["mean"]
    if prompts.get("p90", 0) > context - output:  # a p90 prompt beside the answer must fit the context (GP024)
        if "p90" in pinned_prompt and "context" not in pinned and output + prompts["p90"] <= 10_000_000:
            serve["context"] = output + prompts["p90"]
        else:
            prompts["p90"] = max(prompts["mean"], context - output)


def _repair_output_spread(serve: dict[str, Any], pinned: frozenset[str]) -> None:
    # output_tokens_p90: at least the mean, and room for it after the mean prompt, which needs prompt_tokens
    # (GP024).
    p90 = serve.get("output_tokens_p90")
    if p90 is None:
        return
    context, output = serve["context"], serve.get("output_tokens", 256)
    if p90 < output:
        serve["output_tokens_p90"] = p90 = output
    if context - p90 < 1:  # no room left for a prompt beside the p90 answer (GP024)
        if "context" not in pinned and p90 < 10_000_000:
            serve["context"] = context = p90 + 1
        elif "output_tokens_p90" not in pinned:
            del serve["output_tokens_p90"]
            return
    if p90 == output:
        return
    prompts = serve.get("prompt_tokens")
    if prompts is None and context - p90 >= 1 and "output_tokens_p90" in pinned:
        serve["prompt_tokens"] = prompts = {"mean": context - p90}
    if prompts is None:
        serve["output_tokens_p90"] = output
        return
    room = context - prompts["mean"]
    if p90 > room:
        serve["output_tokens_p90"] = room  # at least output: the prompts were repaired to leave it


def _repair_finetune(tune: dict[str, Any], pinned: frozenset[str]) -> None:
    hardware = tune["hardware"]
    gpu = gpu_catalog().get(hardware.get("gpu", ""))
    if gpu is not None and not gpu.has_bf16 and tune.get("precision", "bf16-mixed") in BF16_PRECISIONS:
        if "precision" in pinned:
            hardware["gpu"] = "l4"  # same class of card, with bf16 units
        else:
            tune["precision"] = "fp16-mixed"
    if tune.get("optimizer_in_backward"):
        if "optimizer_in_backward" in pinned:
            tune.pop("gradient_accumulation", None)
            tune.get("offload", {}).pop("optimizer", None)
        elif tune.get("gradient_accumulation", 1) > 1 or tune.get("offload", {}).get("optimizer", "none") != "none":
            tune["optimizer_in_backward"] = False
    dp = hardware.get("count", 1) // (hardware.get("tensor_parallel", 1) * hardware.get("pipeline_parallel", 1))
    offload = tune.get("offload", {})
    sharding = tune.get("sharding", "none")
    # DeepSpeed offloads parameters at stage 3 alone, on any number of GPUs (gpuplan.conflicts)
    unsharded = (dp > 1 and sharding not in ("zero3", "fsdp")) or sharding in ("zero1", "zero2")
    if offload.get("parameters", "none") != "none" and unsharded:
        if "sharding" in pinned:
            offload["parameters"] = "none"
        else:
            tune["sharding"] = "fsdp"
    if not runs_pipeline(tune.get("sharding", "none"), hardware.get("pipeline_parallel", 1)):
        if "sharding" in pinned:  # DeepSpeed's ZeRO-2/3 do not pipeline (gpuplan.conflicts)
            hardware.pop("pipeline_parallel", None)
        else:  # FSDP pipelines (torchtitan) and keeps a parameter offload valid
            tune["sharding"] = "fsdp"
    fsdp2 = tune.get("sharding") == "fsdp" and tune.get("fsdp_version", 1) == 2
    if fsdp2 and tune.get("fsdp_loading", "sharded") != "sharded":  # FSDP2's wrap is not modelled (GP025)
        if "fsdp_loading" in pinned:
            tune["fsdp_version"] = 1
        else:
            tune["fsdp_loading"] = "sharded"
    if tune.get("sequence_parallel") and hardware.get("tensor_parallel", 1) == 1:
        if "sequence_parallel" in pinned and hardware.get("count", 1) % 2 == 0:
            hardware["tensor_parallel"] = 2
            hardware.pop("pipeline_parallel", None)
        else:
            tune["sequence_parallel"] = False
    blocked = (  # NeMo's QLoRA under Megatron shards no parameters and runs no TP (gpuplan.conflicts)
        tune.get("sharding") in ("zero2", "zero3", "fsdp")
        or hardware.get("tensor_parallel", 1) > 1
        or offload.get("parameters", "none") != "none"
    )
    if tune.get("method") == "qlora" and tune.get("framework") == "megatron" and blocked:
        if "framework" not in pinned:
            tune["framework"] = "eager"
        else:
            if tune.get("sharding") in ("zero2", "zero3", "fsdp"):
                tune["sharding"] = "zero1"
            offload.pop("parameters", None)
            hardware.pop("tensor_parallel", None)
    if hardware.get("tensor_parallel", 1) > 1 and not runs_tensor_parallel(
        tune.get("method", "full"), tune.get("framework", "eager")
    ):  # QLoRA over tensor-parallel ranks runs under Unsloth (framework: fused) alone
        if "framework" not in pinned:
            tune["framework"] = "fused"
        else:
            hardware.pop("tensor_parallel", None)
    evaluation = tune.get("evaluation")
    if evaluation is not None and evaluation.get("predictions", "none") != "none" and "samples" not in evaluation:
        evaluation["samples"] = 64  # kept predictions are counted over the evaluation set (gpuplan.conflicts)
    if tune.get("lora", {}).get("variant") == "dora" and tune["method"] == "full":
        if "variant" in pinned:
            tune["method"] = "lora"
        else:
            tune["lora"]["variant"] = "lora"


def repair(spec: GeneratedSpec, pinned: frozenset[Path_] = frozenset()) -> GeneratedSpec:
    """Mostly satisfy the checks beyond the schema (GP021, GP023-GP027), changing no ``pinned`` path."""
    data = spec.document

    def names(prefix: Path_) -> frozenset[str]:
        return frozenset(
            path[len(prefix)] for path in pinned if path[: len(prefix)] == prefix and len(path) > len(prefix)
        )

    models = [data["model"]] + [t["model"] for t in data.get("serve", {}).get("tenants", [])]
    for model in models:
        if "architecture" in model:
            repair_architecture(model["architecture"], names(("model", "architecture")))
    experts = _model_experts(data["model"], spec.files)
    for job in ("finetune", "serve"):
        if job in data:
            _repair_hardware(data[job]["hardware"], names((job, "hardware")), job == "serve", experts)
    if "serve" in data:
        _repair_serve(data["serve"], names(("serve",)), names(("serve", "prompt_tokens")))
        vocab = _model_field(data["model"], spec.files, "vocab")
        _repair_serving_features(data["serve"], names(("serve", "speculative")), vocab)
    if "finetune" in data:
        pinned_tune = names(("finetune",)) | names(("finetune", "lora")) | names(("finetune", "offload"))
        _repair_finetune(data["finetune"], pinned_tune)
    return spec


@st.composite
def valid_specs(draw: Any, repaired: st.SearchStrategy[bool] | None = None) -> GeneratedSpec:
    """A schema-valid spec drawn from the whole schema; nine in ten are repaired to pass GP021-GP026."""
    walk = _Walk(draw)
    document = walk.mapping((), resolved(SCHEMA))
    fix = draw(repaired if repaired is not None else st.sampled_from([True] * 9 + [False]))
    spec = GeneratedSpec(document, walk.files, "generated", fix)
    return repair(spec) if fix else spec


# -- the bundled examples, one or two fields changed ------------------------------------------------


def _minimal(path: Path_) -> Any:
    """The smallest valid value of ``path``'s node: required keys with their first pool value."""
    node = node_at(path)
    if path[-1:] == ("model",):
        return {"id": "llama-3.2-1b"}
    if path[-1:] == ("gpu",) and "hardware" in path:
        return "h100-sxm"
    if node.get("type") == "object" and "enum" not in node:
        return {name: _minimal((*path, name)) for name in node.get("required", [])}
    if node.get("type") == "array":
        return [_minimal((*path, ITEM))] if node.get("minItems") else []
    if "default" in node:
        return node["default"]
    named = domain_values(path)
    if named:
        return named[0]
    if path[-1] in ("name", "reason"):
        return "minimal"
    observed = OBSERVED.get(_tail(path))
    return observed[0] if observed else boundary_values(node)[0]


def _job_gpu(data: dict[str, Any]) -> str:
    for job in ("finetune", "serve"):
        if job in data:
            return data[job]["hardware"]["gpu"]
    return "h100-sxm"


def set_field(spec: GeneratedSpec, path: Path_, value: Any) -> Path_:
    """Set ``path`` of the spec to ``value``, creating what it needs; returns the concrete path set.

    Array items set item 0 (a scalar array becomes ``[value]``, that value alone); a map entry uses
    the map's first key or, for GPU-keyed maps, the spec's GPU. A field under ``model.architecture`` turns
    a catalog model into its explicit architecture; one under ``gpus`` defines a custom GPU (a copy of
    the catalog GPU the spec uses) and points the spec's hardware at it.
    """
    data = spec.document
    container: Any = data
    concrete: list[str] = []
    for depth, part in enumerate(path[:-1]):
        here = path[: depth + 1]
        if part == ITEM:
            if not container:
                container.append(_minimal(here))
            container = container[0]
            concrete.append(ITEM)
            continue
        if part == ENTRY:
            key = next(iter(container), None) or (_job_gpu(data) if path[0] == "budget" else "custom-gpu")
            if key not in container:
                container[key] = _minimal(here) if path[0] != "gpus" else _custom_copy(_job_gpu(data))
            if path[0] == "gpus":
                for job in ("finetune", "serve"):
                    if job in data:
                        data[job]["hardware"]["gpu"] = key
            container = container[key]
            concrete.append(key)
            continue
        if part == "architecture" and path[depth - 1 : depth] == ("model",) and "architecture" not in container:
            if "id" in container:
                arch = get_model(container.pop("id")).architecture
            else:
                container.pop("config", None)
                arch = model_catalog()["llama-3.2-1b"].architecture
            container["architecture"] = architecture_dict(arch)
        if part not in container:
            container[part] = _minimal(here)
        container = container[part]
        concrete.append(part)
    last = path[-1]
    if last == ENTRY:
        last = next(iter(container), None) or _job_gpu(data)
    if last == ITEM:
        container[:] = [value]  # that one value alone: one LoRA target, one vendor
    else:
        if last in ("id", "config", "architecture") and path[-2:-1] == ("model",):
            for other in ("id", "config", "architecture"):
                container.pop(other, None)
        container[last] = value
    return (*concrete, last)


def _custom_copy(gpu_id: str) -> dict[str, Any]:
    """A spec ``gpus`` entry with a catalog GPU's figures."""
    gpu = gpu_catalog()[gpu_id]
    entry: dict[str, Any] = {
        "memory_gib": gpu.memory_bytes / 2**30,
        "bandwidth_tbs": gpu.bandwidth_tbs,
        "bf16_tflops": gpu.tflops["bf16"],
        "form_factor": gpu.form_factor,
        "interconnect_gbs": gpu.interconnect_gbs,
        "nvlink_domain": gpu.domain,
    }
    if gpu.arch.startswith(("sm", "gfx")):
        entry["arch"] = gpu.arch
    if gpu.tflops.get("fp8"):
        entry["fp8_tflops"] = gpu.tflops["fp8"]
    if gpu.price_per_hour is not None:
        entry["price_per_hour"] = gpu.price_per_hour
    return entry


def applicable_fields(example: dict[str, Any]) -> list[Path_]:
    """The schema's scalar fields that make sense to set on ``example``: its own jobs' fields (a finetune
    example gets no serve fields), the model's, budget, plan, waivers, approvals, custom GPUs."""
    jobs = {job for job in ("finetune", "serve") if job in example}
    found = []
    for path, _ in leaf_fields():
        if path[0] in ("finetune", "serve") and path[0] not in jobs:
            continue
        if path in (("version",), ("model", "config")) or path[-2:] == ("model", "config"):
            continue
        found.append(path)
    return found


def field_values(path: Path_) -> list[Any]:
    """Every value a field is set to on the examples: its pool, or every catalog name it can take."""
    named = domain_values(path)
    return list(named) if named is not None else leaf_pool(path)


def variant(name: str, example: dict[str, Any], changes: list[tuple[Path_, Any]]) -> GeneratedSpec:
    """``example`` with each (path, value) of ``changes`` set, then repaired around them."""
    spec = GeneratedSpec(copy.deepcopy(example), {}, name)
    pinned = []
    for path, value in changes:
        pinned.append(set_field(spec, path, copy.deepcopy(value)))
    spec.origin = f"{name}: " + ", ".join(f"{'.'.join(p)}={v!r}" for p, v in changes)
    return repair(spec, frozenset(pinned))


@st.composite
def example_variants(draw: Any) -> GeneratedSpec:
    """A bundled example with one or two fields set to values of their pools (pairwise combinations)."""
    name, example = draw(st.sampled_from(EXAMPLES))
    candidates = applicable_fields(example)
    paths = draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=2, unique_by=lambda p: p[-1:] + p[:1]))
    changes = [(path, draw(st.sampled_from(field_values(path)))) for path in paths]
    return variant(name, example, changes)


def one_field_variants(enums_only: bool = True, example: str | None = None) -> Iterator[GeneratedSpec]:
    """Every example (or the one named) with one field set to each of its values: enum fields only (the
    exhaustive test), or every field's pool. Fields of the jobs an example lacks are skipped."""
    for name, data in EXAMPLES:
        if example is not None and name != example:
            continue
        for path in applicable_fields(data):
            choices = enum_values(node_at(path))
            if enums_only and not choices:
                continue
            for value in choices if enums_only else field_values(path):
                yield variant(name, data, [(path, value)])


# -- Hugging Face config.json files -----------------------------------------------------------------

_QUANTIZATION_CONFIGS: list[dict[str, Any]] = [
    {"quant_method": "awq", "bits": 4, "group_size": 128},
    {"quant_method": "awq", "w_bit": 4, "q_group_size": 64, "modules_to_not_convert": ["lm_head", "mlp.gate"]},
    {"quant_method": "gptq", "bits": 4, "group_size": -1},
    {"quant_method": "gptq", "bits": 8, "group_size": 32},
    {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
    {"quant_method": "fbgemm_fp8", "modules_to_not_convert": ["model.layers.0.self_attn.q_proj"]},
    {"quant_method": "modelopt", "quant_algo": "FP8"},
    {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router"]},
    {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int", "group_size": 128}}},
        "ignore": ["lm_head", "re:.*self_attn.*"],
    },
    {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "int", "strategy": "channel"}}},
    },
    {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}},
        "ignore": ["re:.*mlp.down_proj$"],
    },
    {"quant_method": "bitsandbytes", "load_in_8bit": True, "llm_int8_skip_modules": ["lm_head"]},
]
_DENSE_TYPES = [
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi",
    "phi3",
    "gpt_neox",
    "falcon",
    "gpt_bigcode",
    "starcoder2",
    "stablelm",
    "granite",
    "nemotron_h",
    "unknown_family",
]
_MOE_TYPES = [
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "deepseek_v3",
    "deepseek_v2",
    "gpt_oss",
    "llama4_text",
    "kimi_k2",
    "qwen3_next",
]
_HYBRID_TYPES = ("qwen3_next", "nemotron_h")
_DIMENSION_KEYS = {  # alternative config.json spellings gpuplan reads
    "layers": ["num_hidden_layers", "n_layer", "num_layers"],
    "hidden": ["hidden_size", "n_embd", "d_model"],
    "heads": ["num_attention_heads", "n_head"],
    "intermediate": ["intermediate_size", "ffn_hidden_size", "n_inner"],
    "vocab": ["vocab_size", "padded_vocab_size"],
}


# RoPE scalings as published configs state them (a model's maximum is derived from them as vLLM derives it).
_ROPE_SCALINGS: list[dict[str, Any]] = [
    {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192},
    {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
    {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096},
    {"type": "linear", "factor": 2.0},
    {"type": "dynamic", "factor": 4.0},
    {"type": "su", "long_factor": [1.0], "short_factor": [1.0]},
    {"rope_type": "default"},
]


@st.composite
def _dimensions(draw: Any) -> dict[str, int]:
    """Consistent transformer dimensions, from toy to the schema's large end."""
    heads = draw(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128]))
    kv_heads = draw(st.sampled_from([d for d in (1, 2, 4, 8, heads) if heads % d == 0]))
    head_dim = draw(st.sampled_from([4, 64, 128, 256]))
    return {
        "layers": draw(st.sampled_from([1, 2, 7, 24, 32, 61, 80, 126, 1000])),
        "hidden": heads * head_dim,
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate": draw(st.sampled_from([1, 16, 2816, 14336, 53248, 10_000_000])),
        "vocab": draw(st.sampled_from([1, 32, 32000, 128256, 262208, 100_000_000])),
        "max_position": draw(st.sampled_from([1, 2048, 131072, 100_000_000])),
    }


@st.composite
def hf_configs(draw: Any) -> dict[str, Any]:
    """A Hugging Face config.json gpuplan reads (most of the time: some are GP021 by design of the file,
    e.g. a window layout it cannot express; the property tests count them)."""
    dims = draw(_dimensions())
    moe = draw(st.booleans())
    model_type = draw(st.sampled_from(_MOE_TYPES if moe else _DENSE_TYPES))
    config: dict[str, Any] = {"model_type": model_type} if model_type != "unknown_family" else {}
    for name in ("layers", "hidden", "heads", "intermediate", "vocab"):
        keys = _DIMENSION_KEYS[name]
        config[draw(st.sampled_from(keys)) if draw(st.integers(0, 4)) == 0 else keys[0]] = dims[name]
    if draw(st.booleans()):
        config["num_key_value_heads"] = dims["kv_heads"]
    if draw(st.booleans()) or dims["hidden"] % dims["heads"]:
        config["head_dim"] = dims["head_dim"]
    if draw(st.booleans()):
        config["max_position_embeddings"] = dims["max_position"]
    if draw(st.integers(0, 3)) == 0:  # the other length keys vLLM reads (the smallest wins)
        config[draw(st.sampled_from(["seq_length", "max_seq_len", "model_max_length", "n_positions"]))] = dims[
            "max_position"
        ]
    if draw(st.integers(0, 2)) == 0 and dims["max_position"] < 100_000_000:  # scaled past the bound: GP021
        config["rope_scaling"] = copy.deepcopy(draw(st.sampled_from(_ROPE_SCALINGS)))
    tie = draw(st.sampled_from([None, True, False]))
    if tie is not None:
        config["tie_word_embeddings"] = tie
    if model_type == "unknown_family" and draw(st.booleans()):
        config["hidden_act"] = draw(st.sampled_from(["gelu", "silu", "gelu_pytorch_tanh"]))
    if model_type in ("falcon", "gpt_bigcode"):
        config["multi_query"] = draw(st.booleans())
        if model_type == "falcon":
            config["new_decoder_architecture"] = draw(st.booleans())
            config["bias"] = draw(st.booleans())
        elif draw(st.booleans()):
            config["n_positions"] = dims["max_position"]
    if model_type in ("gpt_neox", "stablelm"):
        config["use_parallel_residual"] = draw(st.booleans())
    if moe:
        _moe_keys(draw, config, model_type, dims)
    if model_type in _HYBRID_TYPES:
        _hybrid_keys(draw, config, model_type, dims)
    else:
        _window_keys(draw, config, model_type, dims)
    if draw(st.integers(0, 2)) == 0:
        config["quantization_config"] = copy.deepcopy(draw(st.sampled_from(_QUANTIZATION_CONFIGS)))
    if draw(st.integers(0, 5)) == 0:
        config = _multimodal(draw, config)
    return config


def _moe_keys(draw: Any, config: dict[str, Any], model_type: str, dims: dict[str, int]) -> None:
    experts = draw(st.sampled_from([1, 2, 8, 16, 64, 128, 256]))
    per_token = draw(st.sampled_from([k for k in (1, 2, 4, 8) if k <= experts]))
    key = {"mixtral": "num_local_experts", "gpt_oss": "num_local_experts", "llama4_text": "num_local_experts"}.get(
        model_type, "n_routed_experts" if model_type.startswith(("deepseek", "kimi")) else "num_experts"
    )
    config[key] = experts
    config["num_experts_per_tok"] = per_token
    if model_type in ("qwen2_moe", "qwen3_moe", "deepseek_v3", "deepseek_v2", "kimi_k2", "qwen3_next"):
        config["moe_intermediate_size"] = draw(st.sampled_from([8, 1408, 2048]))
    if model_type == "qwen3_next" and draw(st.booleans()):  # absent: the class default, 512
        config["shared_expert_intermediate_size"] = draw(st.sampled_from([8, 512]))
    if model_type == "qwen2_moe":
        if draw(st.booleans()):  # absent: no shared expert (0 is refused: GP021, see the issue 32 report)
            config["shared_expert_intermediate_size"] = draw(st.sampled_from([8, 5632]))
        config["decoder_sparse_step"] = draw(st.sampled_from([1, 2]))
        if draw(st.booleans()) and dims["layers"] > 1:
            config["mlp_only_layers"] = [0]
    if model_type.startswith(("deepseek", "kimi")):
        config["n_shared_experts"] = draw(st.sampled_from([0, 1, 2]))
        config["first_k_dense_replace"] = min(draw(st.sampled_from([0, 1, 3])), dims["layers"] - 1)
        if draw(st.integers(0, 3)):
            config.update(
                kv_lora_rank=draw(st.sampled_from([1, 512])),
                q_lora_rank=draw(st.sampled_from([0, 1536])),
                qk_nope_head_dim=128,
                qk_rope_head_dim=draw(st.sampled_from([1, 64])),
                v_head_dim=128,
            )
    if model_type == "llama4_text":
        config["interleave_moe_layer_step"] = draw(st.sampled_from([1, 2]))
        if draw(st.booleans()):
            config["intermediate_size_mlp"] = draw(st.sampled_from([16384, 8]))


def _hybrid_keys(draw: Any, config: dict[str, Any], model_type: str, dims: dict[str, int]) -> None:
    """The layers of a hybrid model: Qwen3-Next's Gated DeltaNet (layer_types or full_attention_interval, the
    linear_* dimensions, each absent at times: the class defaults) or Nemotron-H's pattern and Mamba-2
    dimensions; now and then a layer kind gpuplan refuses (GP021 by design)."""
    layers = dims["layers"]
    if model_type == "qwen3_next":
        kind = draw(st.sampled_from(["interval", "layer_types", "default"]))
        unknown = draw(st.integers(0, 9)) == 0  # now and then (one in ten) a layer kind gpuplan refuses
        if kind == "interval" and not unknown:
            config["full_attention_interval"] = draw(st.integers(1, min(layers, 8)))
        elif (kind == "layer_types" or unknown) and layers <= 200:
            types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)]
            if unknown:
                types[-1] = draw(st.sampled_from(["sliding_attention", "mamba"]))
            config["layer_types"] = types
        for key, values in (
            ("linear_num_key_heads", [1, 2, 16]),
            ("linear_key_head_dim", [4, 128]),
            ("linear_value_head_dim", [4, 128]),
            ("linear_conv_kernel_dim", [1, 4]),
        ):
            if draw(st.booleans()):
                config[key] = draw(st.sampled_from(values))
        if draw(st.booleans()):  # a multiple of the key heads (16 by default)
            config["linear_num_value_heads"] = config.get("linear_num_key_heads", 16) * draw(st.sampled_from([1, 2]))
        return
    letters = draw(st.sampled_from(["M-", "M*-", "M-M*", "*-"]))
    if draw(st.integers(0, 9)) == 0:  # now and then (one in ten) MoE layers, which gpuplan refuses
        letters = "ME"
    pattern = "".join(letters[i % len(letters)] for i in range(layers))
    if draw(st.integers(0, 3)) == 0 and layers <= 200:
        names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
        config[draw(st.sampled_from(["layers_block_type", "layer_types"]))] = [names[c] for c in pattern]
    else:
        config["hybrid_override_pattern"] = pattern
    heads = draw(st.sampled_from([8, 64, 128]))
    config.update(mamba_num_heads=heads, mamba_head_dim=draw(st.sampled_from([4, 64])))
    config["n_groups"] = draw(st.sampled_from([g for g in (1, 8) if heads % g == 0]))
    if draw(st.booleans()):
        config["ssm_state_size"] = draw(st.sampled_from([16, 128]))
    if draw(st.booleans()):
        config["mamba_ssm_cache_dtype"] = draw(st.sampled_from(["float32", "bfloat16"]))
    if draw(st.booleans()):
        config.pop("head_dim", None)
        config["attention_head_dim"] = dims["head_dim"]


def _window_keys(draw: Any, config: dict[str, Any], model_type: str, dims: dict[str, int]) -> None:
    layers = dims["layers"]
    kind = draw(st.sampled_from(["none", "window", "pattern", "layer_types", "chunk"]))
    if kind == "layer_types" and model_type == "qwen3_next":  # its layer_types name linear and full attention
        kind = "window"
    if kind == "none":
        if model_type in ("qwen2", "qwen2_moe") and draw(st.booleans()):
            config["use_sliding_window"] = False
        return
    window = draw(st.sampled_from([1, 128, 4096, 100_000_000]))
    if kind == "window":
        config["sliding_window"] = window
        if model_type in ("qwen2", "qwen2_moe", "qwen3_moe"):
            config["use_sliding_window"] = True
    elif kind == "pattern":
        config["sliding_window"] = window
        config["sliding_window_pattern"] = draw(st.sampled_from([1, 2, 6]))
    elif kind == "layer_types":
        period = draw(st.sampled_from([0, 2, 4]))
        config["sliding_window"] = window
        if layers <= 200:
            config["layer_types"] = [
                "full_attention" if period and (i + 1) % period == 0 else "sliding_attention" for i in range(layers)
            ]
    elif model_type == "llama4_text" or draw(st.booleans()):
        config["attention_chunk_size"] = window
        if layers <= 200 and draw(st.booleans()):
            config["no_rope_layers"] = [int((i + 1) % 4 != 0) for i in range(layers)]


def _multimodal(draw: Any, text: dict[str, Any]) -> dict[str, Any]:
    wrapper = draw(st.sampled_from(["llava", "llava_next", "mistral3", "gemma3", "llama4", "kimi_vl", "other_vlm"]))
    vision: dict[str, Any] = {
        "model_type": draw(
            st.sampled_from(["siglip_vision_model", "clip_vision_model", "pixtral", "llama4_vision_model"])
        ),
        "hidden_size": draw(st.sampled_from([8, 1152])),
        "num_hidden_layers": draw(st.sampled_from([1, 27])),
        "intermediate_size": draw(st.sampled_from([16, 4304])),
    }
    if draw(st.booleans()):
        vision.update(patch_size=14, image_size=896, num_channels=3)
    config: dict[str, Any] = {"model_type": wrapper, "text_config": text, "vision_config": vision}
    if "quantization_config" in text:
        config["quantization_config"] = text.pop("quantization_config")
    if draw(st.booleans()) and "tie_word_embeddings" in text:
        config["tie_word_embeddings"] = text.pop("tie_word_embeddings")
    return config


@st.composite
def config_variants(draw: Any) -> GeneratedSpec:
    """A bundled example whose model is a generated config.json (model.config) instead of a catalog id."""
    name, example = draw(st.sampled_from(EXAMPLES))
    document = copy.deepcopy(example)
    document["model"] = {"config": "model/config.json", **{k: v for k, v in example["model"].items() if k == "dtype"}}
    spec = GeneratedSpec(document, {"model/config.json": draw(hf_configs())}, f"{name}: model.config")
    return repair(spec)


# -- a mix, for the fuzz run ------------------------------------------------------------------------


def any_valid_spec() -> st.SearchStrategy[GeneratedSpec]:
    """Whole generated specs, example variants and examples on a generated config.json, a third each."""
    return st.one_of(valid_specs(), example_variants(), config_variants())
