"""serve.evidence beside gpuplan's own figure for the same category and metric: which figure it is set beside, in
which direction "faster" reads for latencies and rates, and that a report funding another layout still sets the
evidence beside the declared one (it was measured there)."""

import json
import re

import pytest
from conftest import EXAMPLES, make_spec, run_cli

from gpuplan.analysis import analyse
from gpuplan.config import Settings
from gpuplan.decision.offered import Offered, offered_figures
from gpuplan.spec import Evidence

SETTINGS = Settings.from_thresholds({})
SERVE = (EXAMPLES / "serve-llama-70b.yaml").read_text()  # 8,192 tokens, 32 in flight: high-throughput


def with_evidence(*items: str) -> str:
    """The serving example with its evidence list replaced by ``items`` (flow mappings)."""
    listed = "".join(f"    - {item}\n" for item in items)
    text, count = re.subn(r"  evidence:\n(    - .*\n)+", lambda _: "  evidence:\n" + listed, SERVE)
    assert count == 1 and "budget:" in text
    return text


def test_faster_reads_as_the_rate_for_latencies_and_rates():
    # A TPOT offered at 32 ms where gpuplan says 40 ms is 40/32 - 1 = 25% faster (tokens come 1.25x as often);
    # 1,200 tokens/s offered where gpuplan says 1,000 is 1,200/1,000 - 1 = 20% faster; 50 ms against 40 is
    # 40/50 - 1 = 20% slower.
    def offered(metric: str, value: float, estimate: float) -> Offered:
        return Offered(Evidence("high-throughput", metric, value, "", 0), estimate, "", True, (30.0, 45.0))

    assert offered("tpot_ms", 32, 40).offer_faster_by == pytest.approx(0.25)
    assert offered("tokens_per_s", 1200, 1000).offer_faster_by == pytest.approx(0.20)
    assert offered("tpot_ms", 50, 40).offer_faster_by == pytest.approx(-0.20)
    assert offered("tpot_ms", 32, 40).within_band and not offered("tpot_ms", 50, 40).within_band
    words = offered("tpot_ms", 50, 40).words(0.9)
    assert "the offer is 20% slower than gpuplan's, outside its 90% band (30.0-45.0 ms)" in words


def test_each_category_is_set_beside_its_own_figure():
    text = with_evidence(
        "{category: high-throughput, metric: tpot_ms, value: 31}",
        "{category: long-context, metric: ttft_ms, value: 900}",
        "{category: short-fast, metric: tokens_per_s, value: 50}",
        "{metric: tokens_per_s, value: 5000}",
    )
    s = analyse(make_spec(text)).serve
    assert s is not None and s.categories is not None
    own, long_context, short, none = offered_figures(s, SETTINGS, 0.9)
    # the workload's category: the estimate at the declared load, with its band
    assert own.in_category and own.estimate == pytest.approx(s.speed.tpot_s * 1000) and own.band is not None
    # another category: that category's answer, whatever the declared load, and no band
    assert not long_context.in_category and long_context.band is None
    assert long_context.estimate == pytest.approx(s.categories.long_context_ttft_s * 1000)
    assert "not the workload's category (high-throughput)" in long_context.basis
    assert (short.estimate, short.basis) == (None, "gpuplan states no tokens_per_s for short-fast")
    assert none.estimate is None and none.basis.startswith("no category")


def test_a_report_funding_another_layout_sets_the_evidence_beside_the_declared_one(tmp_path):
    # The serving example's plan funds 2 x h200-sxm over the declared 4 x h100-sxm; the provider's 31 ms was
    # measured on the declared TP4 (its source says so) and is set beside that layout's TPOT, which
    # `gpuplan estimate` of the spec prints, not beside the funded layout's.
    spec = tmp_path / "spec.yaml"
    spec.write_text(SERVE)
    _, out, _ = run_cli("estimate", "--format", "json", str(spec))
    declared_tpot = json.loads(out)["serve"]["evidence"][0]["estimate"]
    report = tmp_path / "report.md"
    run_cli("report", str(spec), "-o", str(report))
    (row,) = [line for line in report.read_text().splitlines() if line.startswith("| Evidence offered")]
    assert f"gpuplan {declared_tpot:,.1f} ms for the declared 4 x h100-sxm (TP 4) at the declared load" in row
