"""Figures a reader can check with a calculator: one rounding (gpuplan.units) in every output.

Each test parses the printed figures out of real output for the bundled examples and redoes the page's own
arithmetic: a saving is the difference of the shown costs, a term total is the shown monthly figure times
the months, a memory breakdown adds up to its shown total, and one layout's TTFT and free share read the
same in the report and in ``gpuplan plan``.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
from conftest import EXAMPLES, run_cli
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.units import (
    GIB,
    apportioned_gib,
    format_gib_apart,
    format_money,
    format_price,
    format_share_under,
    money_difference,
    money_times,
    rounded,
)

SPECS = sorted(EXAMPLES.glob("*.yaml"))


def number(text: str) -> float:
    return float(text.replace(",", ""))


# --- the helper itself -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "digits", "expected"),
    [
        (1126.5, 0, 1127.0),  # format() gives 1126 (half to even): the plan/report split the user saw
        (1126.5000000000002, 0, 1127.0),  # the report's exact TTFT for 2 x h200-sxm
        (690.5, 0, 691.0),  # gaudi3's TTFT
        (74.5, 0, 75.0),  # the l40s free share: format() gave 74%
        (0.25, 1, 0.3),  # the serving runtime term: format() gave 0.2
        (0.745, 2, 0.75),  # stored as 0.74499999...: read as the decimal it prints as
        (-2.5, 0, -3.0),  # halves away from zero
        (-0.04, 1, 0.0),  # never "-0.0"
    ],
)
def test_rounding_takes_halves_up_as_a_reader_does(value: float, digits: int, expected: float):
    assert rounded(value, digits) == expected


@given(
    st.one_of(
        st.floats(min_value=-1e9, max_value=1e9, allow_nan=False),
        st.integers(min_value=-(10**7), max_value=10**7).map(lambda n: n / 1000),  # printed ties: 2.675, -0.5
        st.integers(min_value=-(10**6), max_value=10**6).map(lambda n: n / 10 + 0.05),
    ),
    st.integers(min_value=0, max_value=3),
)
def test_rounding_matches_the_printed_decimal_rounded_half_up(value: float, digits: int):
    # ``rounded`` takes round() except where the printed decimal ends on a half; the reference rounds
    # the printed decimal half away from zero, as a reader does, for every value.
    reference = float(Decimal(repr(value)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)) + 0.0
    assert rounded(value, digits) == reference
    assert str(rounded(value, digits)) == str(reference)  # the sign of zero too


def test_a_saving_is_the_difference_of_the_shown_amounts():
    # 12,030.40 shows 12,030 and 6,635.70 shows 6,636: 12,030 - 6,636 = 5,394 (the exact 5,394.70 shows 5,395).
    saving = money_difference(12030.4, 6635.7)
    assert format_money(saving, "USD") == "5,394 USD"
    # 5,394 x 12 = 64,728 (= 144,360 - 79,632 over the term); round(5,394.70) x 12 was 64,740.
    assert format_money(money_times(saving, 12), "USD") == "64,728 USD"
    # Cents: 41.4549 shows 41.45 and 39.8451 shows 39.85, so 41.45 - 39.85 = 1.60 (the exact 1.6098 shows 1.61).
    assert format_money(money_difference(41.4549, 39.8451), "USD") == "1.60 USD"
    # The fsdp example's runs: 248.53 shows 249, 144.22 shows 144: 249 - 144 = 105 (the exact 104.31 showed 104).
    assert format_money(money_difference(248.53, 144.22), "USD") == "105 USD"
    # Whole units against cents: the difference keeps the cents, 180 - 45.67 = 134.33 (not 134).
    assert format_money(money_difference(180.2, 45.67), "USD") == "134.33 USD"


def test_a_comparison_shows_its_two_figures_apart():
    # "needs up to 22.0 GiB, more than the 22.0 GiB usable" reads as no reason at all: the figures take
    # the fewest decimals at which they differ (22.03 against 22.00), one where one is enough.
    # (two decimals at most: the published GiB figure's).
    assert format_gib_apart(22.03 * GIB, 22.0 * GIB) == ("22.03 GiB", "22.00 GiB")
    assert format_gib_apart(28.7 * GIB, 22.0 * GIB) == ("28.7 GiB", "22.0 GiB")


def test_a_share_under_a_margin_reads_under_it():
    # GP202 said "1.9 GiB free (10%, margin 10%)" for 9.75% free: rounded to whole percents the share
    # reads as the margin met. It takes the fewest decimals at which it reads below: 9.75 -> 9.8; 9.99 ->
    # 9.99 (10 and 10.0 at fewer); 9.999 rounds to 10.00 even at two decimals, so it is cut: 9.99.
    assert format_share_under(0.0975, 0.10) == "9.8%"
    assert format_share_under(0.05, 0.10) == "5%"
    assert format_share_under(0.0999, 0.10) == "9.99%"
    assert format_share_under(0.09999, 0.10) == "9.99%"


def test_a_price_shows_the_decimals_its_cost_was_computed_with():
    # The h200-sxm median of an even number of quotes is 4.545 a GPU-hour: 2 GPUs x 730 h x 4.545 = 6,635.7,
    # shown 6,636; printed at two decimals (4.54 x 2 x 730 = 6,628.4) the cost would not add up.
    assert (format_price(4.545), format_price(0.8), format_price(2.69), format_price(1.23456)) == (
        "4.545",
        "0.80",
        "2.69",
        "1.2346",
    )
    _, out, _ = run_cli("plan", str(EXAMPLES / "serve-llama-70b.yaml"))
    assert re.search(r"2 x h200-sxm TP 2 .* 4\.545  6,636 USD/month", out)


@given(st.floats(min_value=0.0, max_value=0.99), st.floats(min_value=0.001, max_value=0.5))
def test_a_share_under_a_margin_never_reads_at_or_above_it(low: float, gap: float):
    margin = low + gap
    assert float(format_share_under(low, margin).rstrip("%").replace(",", "")) < margin * 100


@given(st.integers(min_value=1, max_value=2**42), st.integers(min_value=2**24, max_value=2**42))
def test_a_larger_figure_never_reads_as_smaller(smaller: int, gap: int):
    shown, other = format_gib_apart(smaller + gap, smaller)
    assert float(shown.split()[0].replace(",", "")) >= float(other.split()[0].replace(",", ""))
    assert shown != other  # 16 MiB apart or more (above 0.01 GiB) reads apart at two decimals


def test_memory_terms_are_apportioned_to_their_shown_total():
    # 6.04 + 3.54 + 0.44 + 0.25 = 10.27 GiB shows 10.3. Rounded one by one the terms read 6.0 + 3.5 + 0.4 +
    # 0.3 = 10.2; rounded down they are 60 + 35 + 4 + 2 = 101 tenths, two short of 103, so the two largest
    # remainders (0.25 -> .5, 0.44 -> .4) get a tenth each: 6.0 + 3.5 + 0.5 + 0.3 = 10.3.
    parts = [6.04 * GIB, 3.54 * GIB, 0.44 * GIB, 0.25 * GIB]
    assert apportioned_gib(parts) == [6.0, 3.5, 0.5, 0.3]
    assert apportioned_gib([GIB, 2 * GIB]) == [1.0, 2.0]  # exact terms are left alone


# --- savings in every output -------------------------------------------------------------------------


def report(path: Path) -> str:
    code, out, _ = run_cli("report", str(path))
    assert code in (0, 1)
    return out


def test_report_saving_and_term_figures_add_up_for_every_example():
    checked = 0
    for path in SPECS:
        text = report(path)
        monthly = re.search(r"\| Cost per month \| ([\d,]+) USD \| ([\d,]+) USD \|", text)
        over = re.search(r"\| Cost over (\d+) months \| ([\d,]+) USD \| ([\d,]+) USD \|", text)
        saving = re.search(
            r"\| Saving available \(serving\) \| ([\d,]+) USD a month \(([\d,]+) USD over (\d+) months\)", text
        )
        if saving is None or monthly is None or over is None:
            continue
        declared, recommended = number(monthly.group(1)), number(monthly.group(2))
        assert number(saving.group(1)) == declared - recommended, path.name
        assert number(saving.group(2)) == number(saving.group(1)) * int(saving.group(3)), path.name
        assert number(saving.group(2)) == number(over.group(2)) - number(over.group(3)), path.name
        assert number(over.group(2)) == declared * int(over.group(1)), path.name
        checked += 1
    assert checked >= 1  # serve-llama-70b: 12,030 - 6,636 = 5,394; 5,394 x 12 = 64,728 = 144,360 - 79,632


def test_serving_example_report_pins_the_hand_derived_saving():
    text = report(EXAMPLES / "serve-llama-70b.yaml")
    # 4 x 4.12 x 730 = 12,030.40 -> 12,030; 2 x 4.545 x 730 = 6,635.70 -> 6,636; 12,030 - 6,636 = 5,394.
    assert "5,394 USD a month (64,728 USD over 12 months)" in text
    assert "saving 5,394 USD a month." in text and "saving about 5,394 USD a month (45%)" in text
    assert "5,395" not in text


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_plan_saving_is_the_difference_of_the_shown_costs(path: Path):
    code, out, _ = run_cli("plan", str(path))
    assert code in (0, 1)
    pattern = (
        r"declared +.*?, ([\d,.]+) USD/(month|run) — .*\n +recommended +.*?, ([\d,.]+) USD/\2 — saves ([\d,.]+) USD"
    )
    for match in re.finditer(pattern, out):
        declared, recommended, saving = (match.group(i) for i in (1, 3, 4))
        decimals = max(len(s.partition(".")[2]) for s in (declared, recommended))
        assert saving == f"{number(declared) - number(recommended):,.{decimals}f}", path.name


@pytest.mark.parametrize(
    ("example", "line"),
    [
        # 91.58 - 76.03 = 15.55, the saving of the two costs as shown (17.0%); under the 20% share for another
        # GPU kind and the 100 USD materiality threshold
        ("qlora-llama-70b.yaml", "kept: 1 x b200-hgx would save 15.55 USD per run (17%)"),
        # 488 - 389 = 99 (the exact 487.61 - 388.88 = 98.73: the saving is the difference of the costs shown;
        # 98.73 / 487.61 = 20.2%): over the 20% share for another GPU kind but under 100 USD, so kept
        ("finetune-70b-fsdp-offload.yaml", "kept: 4 x b200-hgx would save 99 USD per run (20%)"),
        # 12,030 - 6,636 = 5,394 (was 5,395: the exact 5,394.70)
        ("serve-llama-70b.yaml", "2 x h200-sxm TP 2, 6,636 USD/month — saves 5,394 USD per month (45%)"),
    ],
)
def test_plan_savings_pinned(example: str, line: str):
    _, out, _ = run_cli("plan", str(EXAMPLES / example))
    assert line in out


def test_gp507_saving_matches_the_costs_it_quotes():
    # The serving example: 12,030 USD/month declared against 6,636: saving 5,394, the difference of the costs
    # shown (the exact 12,030.40 - 6,635.70 = 5,394.70 would read 5,395).
    code, out, _ = run_cli("lint", str(EXAMPLES / "serve-llama-70b.yaml"))
    assert code == 0
    match = re.search(
        r"for ([\d,.]+) USD/month against ([\d,.]+) USD/month .*: saving about ([\d,.]+) USD a month", out
    )
    assert match is not None
    assert number(match.group(3)) == number(match.group(2)) - number(match.group(1)) == 5394


def test_diff_summary_and_reason_state_one_saving(tmp_path: Path):
    source = (EXAMPLES / "serve-llama-70b.yaml").read_text()
    before = tmp_path / "before.yaml"
    before.write_text(
        source.replace("gpu: h100-sxm, count: 4, tensor_parallel: 4", "gpu: h200-sxm, count: 2, tensor_parallel: 2")
    )
    assert before.read_text() != source, "the example's hardware line moved: update this test"
    after = tmp_path / "after.yaml"
    after.write_text(source)
    code, out, _ = run_cli("diff", str(before), str(after), "--format", "markdown")
    assert code == 0
    # 12,030 - 6,636 = 5,394 both as the monthly increase and as the saving the after side's verdict quotes.
    assert "Monthly GPU cost will increase by 5,394 USD (+81%), from 6,636 to 12,030 USD" in out
    assert "saving 5,394 USD a month." in out and "5,395" not in out
    # The term: 5,394 x 12 = 64,728 = 144,360 - 79,632.
    assert "| 79,632 USD | 144,360 USD | +64,728 USD |" in out


# --- one figure, one rounding ------------------------------------------------------------------------


def _report_rows(text: str) -> dict[str, tuple[str, str]]:
    """Layout (in plan's words) -> (free, TTFT) from the report's 'every layout the planner weighed' table."""
    rows = {}
    for match in re.finditer(r"\| (\d+ x [\w.-]+)((?:, \w+\\_parallel \d+)*) \| (\d+%) \| ([\d,]+) / [\d.]+ \|", text):
        extra = match.group(2).replace(", tensor\\_parallel ", " TP ").replace(", pipeline\\_parallel ", " PP ")
        rows[match.group(1) + extra] = (match.group(3), match.group(4))
    return rows


def _plan_rows(text: str) -> dict[str, tuple[str, str]]:
    rows = {}
    pattern = (
        r"^ +(?:recommended|declared)? +(\d+ x [\w.-]+(?: TP \d+)?(?: PP \d+)?)"
        r" +[\d.]+ / [\d.]+ +[\d.]+ +(\d+%) +([\d,]+) "
    )
    for match in re.finditer(pattern, text, re.MULTILINE):
        rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


@pytest.mark.parametrize("example", ["serve-llama-70b.yaml", "finetune-then-serve.yaml"])
def test_report_and_plan_show_one_layout_the_same(example: str):
    path = EXAMPLES / example
    _, plan_text, _ = run_cli("plan", str(path))
    in_report, in_plan = _report_rows(report(path)), _plan_rows(plan_text)
    shared = set(in_report) & set(in_plan)
    assert len(shared) >= 2, (in_report, in_plan)
    for layout in shared:
        assert in_report[layout] == in_plan[layout], layout


def test_the_figures_the_user_found_split_read_the_same():
    _, plan_text, _ = run_cli("plan", str(EXAMPLES / "serve-llama-70b.yaml"))
    rows = _plan_rows(plan_text)
    # The TTFT column is the p90 (the SLO's default statistic): 8 x b200-hgx TP 8's 188.4 ms (the JSON's
    # ttft_p90_ms) reads 188; 2 x h200-sxm's 915.7 ms reads 916 (rounded, not cut).
    assert rows["8 x b200-hgx TP 8"][1] == "188" and rows["2 x h200-sxm TP 2"][1] == "916"
    _, plan_text, _ = run_cli("plan", str(EXAMPLES / "finetune-then-serve.yaml"))
    # 1 x l40s serving: 71.4% free at 90% confidence (the JSON's headroom_pct) reads 71%; 1 x b200-hgx:
    # 1,114.5 tokens/s reads 1,115 (a half of an even figure is where rounding half to even would print 1,114).
    assert _plan_rows(plan_text)["1 x l40s"][0] == "71%"
    assert re.search(r"^ +1 x b200-hgx +[\d./ ]+ +\d+% +[\d,]+ +[\d.]+ +1,115 ", plan_text, re.MULTILINE)


def test_slo_findings_quote_the_estimates_figures(tmp_path: Path):
    # gemma-2-9b on 4 x L4 PP 4 at 13 sequences of 4,000 tokens: TPOT 101.45 ms published (101.4498...
    # unrounded), which `estimate` prints as 101.5; GP404 printing the unrounded figure would say 101.4. TTFT
    # (chat endpoint's front end included) p90 666.6 ms reads 667, mean 679.8 reads 680, alone 635.4 reads 635,
    # in both.
    spec = tmp_path / "pp4.yaml"
    spec.write_text(
        "version: 1\nname: pp4\nmodel: {id: gemma-2-9b}\nserve:\n  context: 4000\n  output_tokens: 512\n"
        "  concurrency: 13\n  slo: {ttft_ms: 500, tpot_ms: 100}\n"
        "  hardware: {gpu: l4, count: 4, pipeline_parallel: 4}\n"
    )
    _, text, _ = run_cli("estimate", str(spec))
    assert "TPOT 101.5 ms" in text and "TTFT p90 667 ms" in text and "mean 680 ms" in text
    assert "(alone 635 ms;" in text
    assert "estimated TPOT 101.5 ms at 13 sequences" in text
    assert "estimated p90 TTFT 667 ms for a prompt of 3,488 tokens" in text and "(TP 1; alone 635 ms)" in text


# --- memory breakdowns add up ------------------------------------------------------------------------


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_estimate_memory_terms_add_up_to_the_total(path: Path):
    _, out, _ = run_cli("estimate", str(path))
    blocks = re.findall(r"((?:^ {4}\w+ +[\d,.]+ GiB\n)+)^ {4}total +([\d,.]+) GiB", out, re.MULTILINE)
    assert blocks
    for terms, total in blocks:
        values = [number(v) for v in re.findall(r"([\d,.]+) GiB", terms)]
        assert round(sum(values), 2) == number(total), (path.name, values, total)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_report_memory_terms_add_up_to_the_peak(path: Path):
    listings = re.findall(r"Memory per GPU: ([^;]+); peak ([\d,.]+) GiB", report(path))
    assert listings
    for terms, peak in listings:
        values = [number(v) for v in re.findall(r"([\d,.]+) GiB", terms)]
        assert round(sum(values), 1) == number(peak), (path.name, terms, peak)


def test_serving_breakdown_the_user_summed():
    _, out, _ = run_cli("report", str(EXAMPLES / "finetune-then-serve.yaml"))
    # 6.0 + 3.5 + 0.4 + 0.3 = 10.2 (the runtime's 0.25 GiB read 0.2 before, and the sum 10.1).
    assert "weights 6.0 GiB, kv cache 3.5 GiB, activations 0.4 GiB, runtime 0.3 GiB; peak 10.2 GiB" in out


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_report_headroom_is_the_capacity_less_the_peak_shown(path: Path):
    text = report(path)
    pairs = re.findall(
        r"\| Peak per GPU \| ([\d,.]+) GiB of an? ([\d,.]+) GiB[^|]*\|\n\| Headroom \| ([\d,.]+) GiB", text
    )
    # Fine-tuning's row reads "X GiB of Y GiB usable, in the <phase> phase"; serving's "X GiB of a Y GiB engine budget".
    pairs += re.findall(
        r"\| Peak per GPU \| ([\d,.]+) GiB of ([\d,.]+) GiB usable[^|]*\|\n\| Headroom \| ([\d,.]+) GiB", text
    )
    assert pairs, path.name
    for peak, capacity, free in pairs:
        # e.g. 2 x h200-sxm: 125.9 - 89.7 = 36.2 (36.28 GiB exactly); serve-llama-70b: 71.2 - 46.8 = 24.4.
        assert round(number(capacity) - number(peak), 1) == number(free), (path.name, peak, capacity, free)
