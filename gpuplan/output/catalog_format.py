"""``gpuplan catalog gpus|models``: the built-in catalogs as a table (text) or a JSON array."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from gpuplan.units import format_price


def render_gpus(output_format: str) -> str:
    """GPUs: memory, bandwidth, dense BF16 TFLOPS (FP16's, marked, on a GPU without bf16 units: the T4),
    form factor, NVLink domain, indicative price and the dates of its quotes; JSON adds every catalog field
    and the price's provenance."""
    from gpuplan.catalog import gpu_catalog, gpu_sources

    gpus = gpu_catalog()
    if output_format == "json":
        sources = gpu_sources()
        rows = [
            {**dataclasses.asdict(gpu), "price_per_hour": gpu.price_per_hour, "provenance": sources.get(gpu.id, {})}
            for gpu in gpus.values()
        ]
        return json.dumps(rows, indent=2) + "\n"
    lines = [
        f"{'id':<16}{'memory':>10}{'usable GiB':>12}{'TB/s':>7}{'bf16 TF':>9}  {'form':<6}{'arch':<8}{'domain':>6}"
        f"{'$/h':>8}  quoted"
    ]
    for gpu in gpus.values():
        price = format_price(gpu.price_per_hour) if gpu.price_per_hour is not None else "-"
        rate = f"{gpu.peak_flops('bf16') / 1e12:.0f}" + ("" if gpu.has_bf16 else " fp16")
        lines.append(
            f"{gpu.id:<16}{gpu.memory_gb:>8g}GB{gpu.usable_bytes / 2**30:>12.1f}{gpu.bandwidth_tbs:>7.2f}"
            f"{rate:>9}  {gpu.form_factor:<6}{gpu.arch or '-':<8}{gpu.domain:>6}{price:>8}  {_quoted(gpu.price)}"
        )
    return "".join(f"{line}\n" for line in lines)


def _quoted(price: Any) -> str:
    """The dates of the quotes behind a catalog price: one date, or the oldest to the newest."""
    if price is None or price.quoted_from is None:
        return "-"
    return price.quoted_from if price.quoted_from == price.quoted_to else f"{price.quoted_from}..{price.quoted_to}"


def render_models(output_format: str) -> str:
    """Models: parameters, layers, hidden size, heads/KV heads, KV bytes per token (BF16), source; JSON
    adds the Hugging Face ids and the whole architecture."""
    from gpuplan.catalog import model_catalog

    models = model_catalog()
    if output_format == "json":
        rows = [
            {
                "id": m.id,
                "name": m.name,
                "params": m.architecture.params,
                "active_params": m.architecture.active_params,
                "kv_bytes_per_token_bf16": m.architecture.kv_bytes_per_token(2),
                "hf_ids": list(m.hf_ids),
                "source": m.source,
                "architecture": dataclasses.asdict(m.architecture),
            }
            for m in models.values()
        ]
        return json.dumps(rows, indent=2) + "\n"
    lines = [f"{'id':<24}{'params':>18}{'layers':>7}{'hidden':>7}{'heads':>9}{'KV B/token':>12}  source"]
    for m in models.values():
        a = m.architecture
        lines.append(
            f"{m.id:<24}{a.params:>18,}{a.layers:>7}{a.hidden:>7}{f'{a.heads}/{a.n_kv}':>9}"
            f"{a.kv_bytes_per_token(2):>12,.0f}  {m.source}"
        )
    return "".join(f"{line}\n" for line in lines)
