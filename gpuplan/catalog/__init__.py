"""The built-in GPU and model catalogs: sourced, dated YAML inside the package, read on first use.

gpus.yaml, gpu_sources.yaml and models.yaml are the source; gpuplan reads catalog.json, their parse written by
tools/compile_catalog.py (a test holds the two equal): JSON loads in under a millisecond, the YAML in
about 15 ms, which every process would pay.
"""

from __future__ import annotations

import difflib
import functools
import json
from pathlib import Path
from typing import Any

from gpuplan.architecture import Architecture, make_architecture
from gpuplan.records import record
from gpuplan.units import plural

_HERE = Path(__file__).resolve().parent


@record
class Price:
    """A price per GPU-hour and what it rests on: where it comes from, the quotes, their dates and range.

    A catalog price is the median of several providers' on-demand quotes, so it is as old as the quote
    the median is (of an even count, the older of the middle two: ``median_quoted``), not its newest nor
    its oldest; a spec's own price carries ``budget.prices_date``, a vendor's quote its own date.
    """

    per_hour: float  # per GPU-hour: an instance-hour quote divided by its GPUs
    origin: str  # "catalog", "budget.quotes", "budget.prices" or "gpus"
    quoted_from: str | None = None  # YYYY-MM-DD of the oldest quote (None: undated)
    quoted_to: str | None = None  # YYYY-MM-DD of the newest quote
    median_quoted: str | None = None  # a catalog median: YYYY-MM-DD of the quote(s) it is (None: undated)
    median_set_by: tuple[str, ...] = ()  # a catalog median: those quotes, "provider on date"
    quotes: int = 1
    undated_quotes: int = 0
    providers: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    instance_gpus: int = 0  # a quote per instance-hour: GPUs per instance, billed whole; 0: per GPU-hour
    instance_price: float | None = None  # the quote per instance-hour
    reference: str = ""  # the vendor's quote reference (budget.quotes)

    @property
    def dated(self) -> str | None:
        """YYYY-MM-DD of what the price rests on, the date that ages it (None: undated)."""
        return self.median_quoted if self.origin == "catalog" else self.quoted_from

    def billed_gpus(self, gpus: int) -> int:
        """The GPUs paid for when ``gpus`` are used: whole instances under an instance-hour quote (a 4-GPU
        layout on an 8-GPU instance pays for 8), else the GPUs themselves."""
        size = self.instance_gpus
        return -(-gpus // size) * size if size else gpus

    def describe(self) -> str:
        """Where the price comes from, in words, for assumptions and report provenance (worded once: a
        catalog price is described in every estimate that uses it)."""
        return self._description

    @functools.cached_property
    def _description(self) -> str:
        if self.origin == "budget.prices":
            return f"spec budget.prices ({self.quoted_from or 'undated'})"
        if self.origin == "budget.quotes":
            unit = f", {self.instance_price:g} per {self.instance_gpus}-GPU instance-hour" if self.instance_gpus else ""
            return f"quote from {self.providers[0]}{unit} ({self.quoted_from or 'undated'})"
        if self.origin == "gpus":
            return "spec gpus section"
        span = self.quoted_from if self.quoted_from == self.quoted_to else f"{self.quoted_from} to {self.quoted_to}"
        undated = f" (+{self.undated_quotes} undated)" if self.undated_quotes else ""
        spread = f", {self.low:.2f}-{self.high:.2f}" if self.low is not None and self.high != self.low else ""
        return (
            f"catalog median of {plural(self.quotes, 'quote')}{spread} from {', '.join(self.providers)}, "
            f"quoted {span or 'undated'}{undated}"
        )


@record
class Gpu:
    """One GPU model: memory in bytes, bandwidth, dense TFLOPS, form factor, scale-up domain, price."""

    id: str
    name: str
    form_factor: str  # sxm | nvl | pcie | oam
    memory_bytes: int
    usable_bytes: int
    bandwidth_tbs: float
    tflops: dict[str, float | None]
    interconnect_gbs: float  # scale-up, bidirectional per GPU; PCIe figure when there is none
    domain: int  # GPUs in the scale-up (NVLink/xGMI) domain; 1 = PCIe only
    pcie_gbs: float
    price: Price | None
    memory_gb: float = 0.0
    vendor: str = ""
    arch: str = ""  # the instruction set kernels are built for: "sm90" (compute capability 9.0), "gfx942"; "" unknown
    tdp_w: int | None = None
    mig: bool = False
    custom: bool = False
    consumer: bool = False  # GeForce cards: the driver licence excludes data-centre deployment

    @property
    def price_per_hour(self) -> float | None:
        return None if self.price is None else self.price.per_hour

    @property
    def suggestable(self) -> bool:
        """Whether rules may propose this GPU as an alternative."""
        return not self.consumer

    @property
    def compute_capability(self) -> int | None:
        """The NVIDIA compute capability as the engines compare it (8.0 -> 80); None for other GPUs."""
        return compute_capability(self.arch)

    @property
    def has_bf16(self) -> bool:
        """Whether the GPU has bf16 tensor cores (compute capability 8.0 and later; not the T4)."""
        return bool(self.tflops.get("bf16"))

    def peak_flops(self, dtype: str) -> float:
        """Dense FLOP/s for a compute dtype, falling back to the 16-bit rate where the GPU lacks it.

        The 16-bit rate is bf16's, or fp16's on a GPU without bf16 units (T4): there the engines run
        16-bit work in fp16 (vLLM refuses bf16 below compute capability 8.0 and asks for ``--dtype
        half``; trainers need fp16-mixed), at the fp16 tensor rate. A fine-tuning precision that needs
        bf16 on such a GPU is GP025; a bf16 model served there is timed as fp16 and says so in the
        estimate's assumptions; the planner proposes such a GPU only for jobs that compute in fp16 or fp32.
        """
        value = self.tflops.get(dtype) or self.tflops.get("bf16") or self.tflops.get("fp16") or 0.0
        return float(value) * 1e12

    @property
    def bandwidth(self) -> float:
        return self.bandwidth_tbs * 1e12

    @property
    def has_nvlink(self) -> bool:
        return self.domain > 1


@record
class CatalogModel:
    id: str
    name: str
    architecture: Architecture
    source: str
    hf_ids: tuple[str, ...] = ()  # Hugging Face repo ids (base, instruct, chat) sharing this architecture
    quantization: str = "none"  # the format the published checkpoint stores (served as stored by default)
    group_size: int = 128
    keep_16bit: tuple[str, ...] = ()  # module patterns the checkpoint keeps in 16-bit (its quantization_config)
    classes: tuple[str, ...] = ()  # config.json architectures: the modelling class (vLLM's model runner reads it)

    @property
    def context_source(self) -> str:
        """Where the catalog's max_position comes from, for messages: the config.json it was copied from."""
        return f"gpuplan's catalog, from {self.source.split(' (')[0]}"

    @functools.cached_property
    def quantized_params(self) -> int | None:
        """Linear weights stored quantized; None: every decoder linear. Counted on first use: a lint
        reads one model of the catalog, not all of them."""
        if not self.keep_16bit:
            return None
        from gpuplan.hf_quantization import quantized_linear_params  # only for checkpoints that keep layers in 16 bits

        return quantized_linear_params(self.architecture, list(self.keep_16bit))


class UnknownNameError(LookupError):
    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        self.kind, self.name, self.known = kind, name, known
        close = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.5)
        self.suggestions = close
        hint = f" — did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        super().__init__(f"unknown {kind} '{name}'{hint}")


def _read(name: str) -> dict[str, Any]:
    """The parse of the catalog's YAML file ``name``."""
    data: dict[str, Any] = _compiled()[name]
    return data


@functools.lru_cache(maxsize=1)
def _compiled() -> dict[str, Any]:
    with open(_HERE / "catalog.json", encoding="utf-8") as handle:
        catalog: dict[str, Any] = json.load(handle)
    return catalog


@functools.lru_cache(maxsize=1)
def gpu_catalog() -> dict[str, Gpu]:
    return {entry["id"]: _gpu(entry) for entry in _read("gpus.yaml")["gpus"]}


@functools.lru_cache(maxsize=1)
def model_catalog() -> dict[str, CatalogModel]:
    models = {}
    for entry in _read("models.yaml")["models"]:
        values = {k: v for k, v in entry.items() if k not in _CATALOG_KEYS}
        architecture = make_architecture(values)
        checkpoint = entry.get("checkpoint", {})
        keep = checkpoint.get("keep_16bit")
        models[entry["id"]] = CatalogModel(
            entry["id"],
            entry["name"],
            architecture,
            entry["source"],
            tuple(entry.get("hf", ())),
            checkpoint.get("quantization", "none"),
            checkpoint.get("group_size", 128),
            tuple(keep or ()),
            tuple(entry.get("architectures", ())),
        )
    return models


# Keys of a catalog entry that are not architecture fields.
_CATALOG_KEYS = ("id", "name", "source", "hf", "checkpoint", "architectures")


@functools.lru_cache(maxsize=1)
def _model_aliases() -> dict[str, str]:
    """Lower-cased catalog ids and Hugging Face repo ids -> catalog id."""
    aliases: dict[str, str] = {}
    for model in model_catalog().values():
        aliases[model.id.lower()] = model.id
        for hf_id in model.hf_ids:
            aliases[hf_id.lower()] = model.id
    return aliases


# Suffixes of fine-tuned variants that keep the base model's architecture (Hugging Face naming).
_VARIANT_SUFFIXES = ("-instruct", "-it", "-chat", "-hf", "-base")


@functools.lru_cache(maxsize=1)
def catalog_version() -> str:
    return str(_read("gpus.yaml")["catalog_version"])


def _gpu(entry: dict[str, Any]) -> Gpu:
    link = entry["interconnect"]
    pcie = float(entry["pcie_gbs"])
    return Gpu(
        id=entry["id"],
        name=entry["name"],
        form_factor=entry["form_factor"],
        memory_bytes=int(entry["memory_bytes"]),
        usable_bytes=int(entry["usable_bytes"]),
        bandwidth_tbs=float(entry["bandwidth_tbs"]),
        tflops=dict(entry["tflops_dense"]),
        interconnect_gbs=float(link["bandwidth_gbs"] or pcie),
        domain=int(link["domain"] or 1),
        pcie_gbs=pcie,
        price=_catalog_price(entry),
        memory_gb=float(entry["memory_gb"]),
        vendor=entry.get("vendor", ""),
        arch=entry.get("arch", ""),
        tdp_w=entry.get("tdp_w"),
        mig=bool(entry.get("mig")),
        consumer=bool(entry.get("consumer")),
    )


def compute_capability(arch: str) -> int | None:
    """The compute capability an ``arch`` of the form sm<major><minor> spells (sm90 -> 90); None otherwise."""
    return int(arch[2:]) if arch.startswith("sm") and arch[2:].isdigit() else None


def _catalog_price(entry: dict[str, Any]) -> Price | None:
    if entry.get("price_usd_per_hour") is None:
        return None
    return Price(
        per_hour=float(entry["price_usd_per_hour"]),
        origin="catalog",
        quoted_from=entry.get("price_quoted_from"),
        quoted_to=entry.get("price_quoted_to"),
        median_quoted=entry.get("price_median_quoted"),
        median_set_by=tuple(entry.get("price_median_set_by", ())),
        quotes=int(entry.get("price_quotes", 1)),
        undated_quotes=int(entry.get("price_undated_quotes", 0)),
        providers=tuple(entry.get("price_providers", ())),
        low=entry.get("price_low"),
        high=entry.get("price_high"),
    )


def gpu_sources() -> dict[str, dict[str, Any]]:
    """Provenance of every catalog GPU: sources, notes and each dated price quote (read on demand)."""
    return {entry["id"]: entry for entry in _read("gpu_sources.yaml")["gpus"]}


def custom_gpu(gpu_id: str, entry: dict[str, Any]) -> Gpu:
    """A GPU defined in a spec's ``gpus`` section (validated, with the schema's defaults applied)."""
    total = int(entry["memory_gib"] * 2**30)
    pcie = float(entry["pcie_gbs"])
    return Gpu(
        id=gpu_id,
        name=entry.get("name", gpu_id),
        form_factor=entry["form_factor"],
        arch=entry.get("arch", ""),
        memory_bytes=total,
        usable_bytes=total - 2**29,
        bandwidth_tbs=float(entry["bandwidth_tbs"]),
        tflops={
            "bf16": entry["bf16_tflops"],
            "fp16": entry["bf16_tflops"],
            "fp8": entry.get("fp8_tflops"),
            "fp4": entry.get("fp4_tflops"),
        },
        interconnect_gbs=float(entry.get("interconnect_gbs", pcie)),
        domain=int(entry["nvlink_domain"]),
        pcie_gbs=pcie,
        price=None if entry.get("price_per_hour") is None else Price(float(entry["price_per_hour"]), "gpus"),
        memory_gb=round(total / 1e9, 1),
        custom=True,
    )


def get_gpu(gpu_id: str, custom: dict[str, Gpu] | None = None) -> Gpu:
    known = {**gpu_catalog(), **(custom or {})}
    if gpu_id in known:
        return known[gpu_id]
    raise UnknownNameError("GPU", gpu_id, sorted(known))


def gpu_id_in_any_case(text: str, custom: dict[str, Gpu] | None = None) -> str:
    """The GPU id (the catalog's, or a spec's own ``gpus:``) that ``text`` names in any case: what a person types
    on the command line ("L4" is l4); a spec writes the id itself. Raises UnknownNameError (with "did you
    mean") for none."""
    wanted = text.strip()
    known = {**gpu_catalog(), **(custom or {})}
    match = next((gpu_id for gpu_id in known if gpu_id.lower() == wanted.lower()), None)
    if match is None:
        raise UnknownNameError("GPU", wanted, sorted(known))
    return match


def get_model(model_id: str) -> CatalogModel:
    """A catalog model by id or Hugging Face repo id, case-insensitively.

    An instruct/chat variant not listed resolves to its base when stripping one variant suffix
    (``-Instruct``, ``-it``, ``-chat``, ``-hf``) names a listed repo: they share the architecture.
    """
    models = model_catalog()
    if model_id in models:
        return models[model_id]
    aliases = _model_aliases()
    key = model_id.strip().lower()
    if key in aliases:
        return models[aliases[key]]
    for suffix in _VARIANT_SUFFIXES:
        if key.endswith(suffix) and key[: -len(suffix)] in aliases:
            return models[aliases[key[: -len(suffix)]]]
    known = sorted(models)
    if "/" in model_id:
        known = sorted({*known, *(hf_id for model in models.values() for hf_id in model.hf_ids)})
    raise UnknownNameError("model", model_id, known)
