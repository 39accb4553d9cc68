"""Survivors of the second, out-of-sample mutation sample (``benchmarks/mutation.py --sample 5 --seed 7``).

Each test names the mutant it kills and derives its figure or wording by hand. The survivors argued as
equivalent are listed in the README (mutation testing).
"""

from __future__ import annotations

import datetime
import textwrap

import yaml

from gpuplan.catalog import gpu_catalog
from gpuplan.linter import LintOptions, lint_bytes
from gpuplan.rules.form_factor import _siblings

TODAY = datetime.date(2026, 12, 2)
# examples/findings/form-factor-pcie-tp.yaml: TP 2 over PCIe, where one A100 PCIe 80GB holds it.
GEMMA_ON_TWO_L40S = """
version: 1
name: t
model: {id: gemma-2-27b}
serve:
  context: 4096
  concurrency: 4
  kv_cache_dtype: fp8
  hardware: {gpu: l40s, count: 2, tensor_parallel: 2}
"""


def findings(text: str, *codes: str, catalog_hints: bool = False):
    options = LintOptions(today=TODAY, select=codes, catalog_hints=catalog_hints)
    return lint_bytes("spec.yaml", textwrap.dedent(text).encode(), options).findings


def test_checkpoints_that_exactly_fill_the_storage_fit():
    # x_checkpoint_storage_exceeded__mutmut_14 (> became >=). Llama 3.1 8B full bf16-mixed AdamW: 14 B a
    # parameter x 8,030,261,248 = 112,423,657,472 B, exactly 112.423657472 GB (a float that round-trips).
    spec = {
        "version": 1,
        "name": "t",
        "model": {"id": "llama-3.1-8b"},
        "finetune": {
            "method": "full",
            "precision": "bf16-mixed",
            "seq_len": 2048,
            "activation_checkpointing": True,
            "sharding": "zero3",
            "tokens": 500_000_000,
            "checkpoints": {"every_hours": 1, "keep": 1, "storage_gb": 112.423657472},
            "hardware": {"gpu": "h100-sxm", "count": 8},
        },
    }
    assert findings(yaml.safe_dump(spec), "GP601") == ()
    spec["finetune"]["checkpoints"]["storage_gb"] = 112.423657471
    (finding,) = findings(yaml.safe_dump(spec), "GP601")
    assert finding.message.startswith("1 resumable checkpoints of 112.4 GB need 112.4 GB")


def test_nvl_and_pcie_cards_are_the_siblings_of_an_sxm_module():
    # x__siblings__mutmut_13 ("nvl" misspelt): the catalog's H200 has an NVL card and H100 both.
    catalog = gpu_catalog()
    assert _siblings(catalog["h200-sxm"]) == ["h200-nvl"]
    assert sorted(_siblings(catalog["h100-sxm"])) == ["h100-nvl", "h100-pcie"]


def test_pcie_tensor_parallel_message_counts_the_all_reduces():
    # x_multi_gpu_serving_without_nvlink__mutmut_11 (message dropped). Gemma-2-27B has 46 layers: two
    # all-reduces each (attention and MLP outputs) = 92 per output token.
    (finding,) = findings(
        GEMMA_ON_TWO_L40S,
        "GP312",
    )
    assert finding.message.startswith("tensor_parallel 2 on l40s (PCIe only) puts 92 all-reduces over PCIe")
    assert "on every output token (TPOT estimate " in finding.message


def test_a_larger_gpu_instead_of_tp_gives_the_layout_to_paste():
    # x_larger_gpu_instead_of_tp__mutmut_47 (hint dropped): the same deployment fits one A100 PCIe 80GB.
    (finding,) = findings(
        GEMMA_ON_TWO_L40S,
        "GP305",
    )
    assert finding.hint == "paste serve: {hardware: {gpu: a100-pcie-80gb, count: 1}}"


def test_parallelism_needed_says_tensor_parallelism_for_serving_only():
    # x_parallelism_needed__mutmut_31: serving is told "tensor parallelism is needed"; fine-tuning, whose
    # answer may shard or pipeline, "parallelism is needed".
    (serve,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-70b}
        serve: {context: 8192, concurrency: 8, hardware: {gpu: h100-sxm, count: 1}}
        """,
        "GP301",
    )
    assert "; tensor parallelism is needed: " in serve.message
    (finetune,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-70b}
        finetune: {method: full, seq_len: 2048, hardware: {gpu: h100-sxm, count: 1}}
        """,
        "GP301",
    )
    assert "; parallelism is needed: " in finetune.message and "tensor parallelism" not in finetune.message
    # ... and each at its own job's hardware, named as the job it is (x_parallelism_needed__mutmut_2/78).
    assert (serve.pointer, finetune.pointer) == ("/serve/hardware", "/finetune/hardware")
    assert serve.message.startswith("serving needs ") and finetune.message.startswith("fine-tuning needs ")
    assert "(79.2 GiB usable)" in finetune.message  # the catalog's usable bytes of h100-sxm, not the engine budget


def test_a_run_without_tokens_saves_per_million_tokens():
    # x__saving__mutmut_19: a fine-tune with no finetune.tokens has no run cost, so GP507 compares
    # $/1M tokens and says "per 1M tokens".
    (finding,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-8b}
        finetune:
          method: lora
          seq_len: 4096
          micro_batch: 2
          activation_checkpointing: true
          hardware: {gpu: h100-sxm, count: 1}
        """,
        "GP507",
    )
    assert " USD per 1M tokens (" in finding.message


def test_ttft_hint_names_the_levers():
    # x_ttft_slo_missed__mutmut_30 (hint upper-cased): a 32K prompt on one L40S against a 500 ms TTFT.
    (finding,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-8b}
        serve:
          context: 32768
          output_tokens: 512
          concurrency: 4
          hardware: {gpu: l40s, count: 1}
          slo: {ttft_ms: 500}
        """,
        "GP403",
    )
    assert finding.hint == "more TP, a faster GPU, or shorter prompts"


def test_pipeline_only_parallelism_not_needed_names_the_stages_not_all_reduces():
    # x__serve_parallelism_not_needed__mutmut_43 (PP named only from 3 stages). Llama 3.1 8B at 8 x 8K
    # fits one H100 (25.0 GiB); the declared PP 2 has no all-reduces (TP 1): each token passes the two
    # stages in turn, and the advice is to drop pipeline_parallel, not tensor_parallel.
    (finding,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-8b}
        serve: {context: 8192, concurrency: 8, hardware: {gpu: h100-sxm, count: 2, pipeline_parallel: 2}}
        """,
        "GP302",
    )
    assert finding.pointer == "/serve/hardware/pipeline_parallel"
    assert finding.message.endswith(
        " ms with tensor_parallel 1 x pipeline_parallel 2 (every token passes 2 pipeline stages in turn)"
    )
    assert finding.hint.startswith("use pipeline_parallel: 1 and count for replicas: paste serve: {concurrency: 4, ")


def test_four_gpus_as_tp2_by_pp2_are_not_one_gpu():
    # x_serve_single_gpu__mutmut_4 (tp / pp == 1 for tp * pp == 1): TP 2 x PP 2 is four GPUs. Llama 3.1
    # 405B in bf16 is 405,853,388,800 x 2 B = 756 GiB, 189.0 GiB per GPU of four: the weights do not fit
    # (GP201); GP301 ("one GPU cannot hold it") is for one GPU only.
    found = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-405b}
        serve:
          context: 8192
          concurrency: 8
          hardware: {gpu: h100-sxm, count: 4, tensor_parallel: 2, pipeline_parallel: 2}
        """,
        "GP201",
        "GP301",
    )
    assert [f.code for f in found] == ["GP201"]
    assert "(weights 189.0 GiB)" in found[0].message


def test_a_cheaper_layout_names_the_constraints_of_its_job():
    # x_cheaper_layout_available__mutmut_44/46: a serving layout meets "the SLO", a fine-tuning one
    # "gradient sync".
    (serve,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-8b}
        serve: {context: 8192, concurrency: 4, hardware: {gpu: h100-sxm, count: 2, tensor_parallel: 2}}
        """,
        "GP507",
    )
    assert " meets memory, headroom and the SLO for " in serve.message
    (finetune,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.1-8b}
        finetune: {method: lora, seq_len: 4096, tokens: 300000000, hardware: {gpu: h100-sxm, count: 1}}
        """,
        "GP507",
    )
    assert " meets memory, headroom and gradient sync for " in finetune.message


def test_right_sizing_costs_are_in_the_spec_currency():
    # x_oversized_serving_gpu__mutmut_30 (the option's cost without the currency): Llama 3.2 1B at 4 x 4K
    # uses 4% of an H200; one L4 at 0.5 EUR/h is 0.5 x 730 = 365 EUR/month against 4.0 x 730 = 2,920:
    # 2,555 EUR saved, 2,555 / 2,920 = 87.5%, shown as 88%.
    (finding,) = findings(
        """
        version: 1
        name: t
        model: {id: llama-3.2-1b}
        serve: {context: 4096, concurrency: 4, hardware: {gpu: h200-sxm}}
        budget: {currency: EUR, prices: {h200-sxm: 4.0, l4: 0.5}, prices_date: 2026-11-30}
        """,
        "GP505",
    )
    assert finding.message.endswith("meets the SLO for 365 EUR/month, saving about 2,555 EUR a month (88%)")
