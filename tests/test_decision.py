"""The verdict: computed from the same findings, fail level, configuration and waivers as the exit code."""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLES, run_cli

from gpuplan.codes import Approval, approval_of
from gpuplan.decision import Amount, Verdict, decide
from gpuplan.decision.audit import content_hash
from gpuplan.findings import Severity
from gpuplan.linter import lint_path
from gpuplan.run import lint_run

ALL_EXAMPLES = sorted(EXAMPLES.glob("*.yaml")) + sorted((EXAMPLES / "findings").glob("*.yaml"))
APPROVALS = """\
approvals:
  prepared_by: {name: Ana Ruiz, date: 2026-11-28}
  reviewed_by: {name: Lee Chen, date: 2026-11-30}
  approved_by: {name: Sam Okafor}
"""


def verdict_line(markdown: str) -> str:
    return markdown.splitlines()[0]


@pytest.mark.parametrize("fail_on", ["error", "warning", "info"])
def test_the_verdict_never_contradicts_the_exit_code(fail_on: str):
    """Over every example and fail level: exit 1 is never APPROVE, and a REJECT a rejecting finding decides exits 1
    (one for want of any sound layout exits as its at-risk warning does: the test below)."""
    for spec in ALL_EXAMPLES:
        summary = lint_run([str(spec)], fail_on=fail_on).summary()
        (result,) = summary.results
        decision = decide(result, summary.fail_on)
        assert decision.exit_code == summary.exit_code, spec
        if summary.exit_code == 1:
            assert decision.verdict is not Verdict.APPROVE, spec
        rejecting = any(approval_of(f.code) is Approval.REJECTS for f in decision.deciding)
        if decision.verdict is Verdict.REJECT and rejecting:
            assert summary.exit_code == 1, spec


def test_an_ignored_budget_rule_is_visible_and_the_verdict_follows_the_exit_code(tmp_path: Path):
    spec = tmp_path / "budget-over.yaml"
    shutil.copy(EXAMPLES / "findings" / "budget-over.yaml", spec)
    code, out, _ = run_cli("report", str(spec))
    assert code == 1 and verdict_line(out) == "## REJECT: budget-over"
    assert "Rules ignored | none" in out
    config = tmp_path / ".gpuplan.yaml"
    config.write_text("ignore: [GP501, GP502]\n")
    code, out, _ = run_cli("report", str(spec))
    # With the budget rules off nothing at the error level is left: exit 0, and the verdict is no REJECT;
    # GP507 (a warning: 4 x h200-nvl runs the fine-tuning for 268 USD against 495) still asks for a change.
    assert code == 0 and verdict_line(out) == "## APPROVE WITH CHANGES: budget-over"
    assert "| Rules ignored | GP501, GP502 |" in out
    digest = hashlib.sha256(config.read_bytes()).hexdigest()
    assert f"| Configuration | .gpuplan.yaml beside the spec (SHA-256 {digest}) |" in out
    # The estimate still shows what the switched-off rules would have said, as a risk on the first page:
    # 120.2 GPU-hours (8 x h100-sxm x 15.02 h) x 4.12 = 495 USD against 200; 1 x 3.10 x 730 = 2,263 USD a month
    # against 500.
    assert "**Over budget with the budget check off.**" in out
    assert "; fine-tuning costs 495 USD against a budget of 200 USD (GP501 off)" in out
    assert "** Serving costs 2,263 USD a month against a budget of 500 USD (GP502 off)" in out


def test_fail_on_warning_turns_a_warning_into_a_change_and_exit_1():
    spec = str(EXAMPLES / "findings" / "fit-low-headroom.yaml")
    code, out, _ = run_cli("report", spec)
    assert code == 0 and verdict_line(out) == "## APPROVE WITH CHANGES: fit-low-headroom"  # GP202: not sound
    code, out, _ = run_cli("report", "--fail-on", "warning", spec)
    assert code == 1 and verdict_line(out) == "## APPROVE WITH CHANGES: fit-low-headroom"
    assert "| Fail level | warning (exit code 1) |" in out


def test_fail_on_info_blocks_an_approval_on_infos(tmp_path: Path):
    spec = tmp_path / "qlora.yaml"
    # An unused waiver is GP702; the configuration re-levels it to info, below the default fail level.
    spec.write_text((EXAMPLES / "qlora-llama-70b.yaml").read_text() + "waivers:\n  - {rule: GP505, reason: not used}\n")
    (tmp_path / ".gpuplan.yaml").write_text("severity: {GP702: info}\n")
    code, out, _ = run_cli("report", str(spec))
    assert code == 0 and verdict_line(out) == "## APPROVE: legal-drafting-qlora-70b"
    assert "| Rules re-levelled | GP702 warning → info |" in out
    assert "**Rule lowered: GP702.** unused-waiver reports at info instead of warning" in out
    code, out, _ = run_cli("report", "--fail-on", "info", str(spec))
    assert code == 1 and verdict_line(out) == "## APPROVE WITH CHANGES: legal-drafting-qlora-70b"
    # The change to make is on the first page in words; Appendix A has the finding and its hint.
    assert "| **Changes required** | A waiver matches no finding (Appendix A) |" in out.split("<details>")[0]
    assert "1. GP702 unused-waiver:" in out


def test_an_unpriced_gpu_cannot_be_approved():
    code, out, _ = run_cli("report", str(EXAMPLES / "findings" / "budget-missing-price.yaml"))
    # GP503 is a warning, below the default fail level: exit 0, but no amount can be stated or signed.
    assert code == 0
    assert verdict_line(out) == "## CANNOT APPROVE: budget-missing-price"
    assert "| **Amount to sign** | none can be stated: no price per GPU-hour for h200-nvl in USD |" in out
    assert "| Approved by | not for signature | not for signature | not for signature |" in out


def test_a_spec_that_does_not_resolve_cannot_be_approved(write_spec):
    spec = write_spec("version: 1\nname: x\nmodel: {id: llama-3.1-8b}\nserve: {contxt: 1}\n")
    code, out, _ = run_cli("report", str(spec))
    assert code == 1 and verdict_line(out) == "## CANNOT APPROVE: x"
    assert "The spec could not be estimated: serve is missing the required key 'concurrency'." in out
    assert "unknown key 'contxt' in serve" in out


def test_approvals_under_reject_are_not_for_signature(write_spec):
    text = (EXAMPLES / "findings" / "fit-70b-on-one-h100.yaml").read_text() + APPROVALS
    spec = write_spec(text)
    code, out, _ = run_cli("report", str(spec))
    assert code == 1 and verdict_line(out) == "## REJECT: fit-70b-on-one-h100"
    for name in ("Ana Ruiz", "Lee Chen", "Sam Okafor", "2026-11-28"):
        assert name not in out
    assert "The names in the spec's approvals are not shown as approvals." in out
    assert "| Prepared by | not for signature | not for signature | not for signature |" in out
    html = spec.with_suffix(".html")
    code, _, _ = run_cli("report", "--html", "-o", str(html), str(spec))
    assert code == 1 and "Ana Ruiz" not in html.read_text() and "not for signature" in html.read_text()


def test_approvals_carry_one_date_per_role(write_spec):
    text = (EXAMPLES / "serve-llama-70b.yaml").read_text() + APPROVALS
    code, out, _ = run_cli("report", str(write_spec(text)))
    assert code == 0
    assert "| Prepared by | Ana Ruiz |  | 2026-11-28 |" in out
    assert "| Reviewed by | Lee Chen |  | 2026-11-30 |" in out
    assert "| Approved by | Sam Okafor |  |  |" in out  # undated: dated by hand when signed


def test_the_old_single_date_approvals_are_an_error_at_their_position(write_spec):
    text = (EXAMPLES / "serve-llama-70b.yaml").read_text()
    lines = len(text.splitlines())
    spec = write_spec(text + "approvals:\n  prepared_by: Ana Ruiz\n  date: 2026-11-28\n")
    code, out, _ = run_cli("lint", str(spec))
    assert code == 1
    assert f"spec.yaml:{lines + 2}:16: GP102 [error] approvals.prepared_by must be a mapping" in out
    assert f"spec.yaml:{lines + 3}:3: GP101 [error] unknown key 'date' in approvals" in out


def content_hash_of(markdown: str) -> str:
    found = re.search(r"\| Content hash \| ([0-9a-f]{64}) \|", markdown)
    assert found, "the decision record states the content hash"
    return found.group(1)


def test_adding_approvals_leaves_the_content_hash_unchanged(write_spec):
    base = (EXAMPLES / "serve-llama-70b.yaml").read_text()
    _, plain, _ = run_cli("report", str(write_spec(base, "a.yaml")))
    signed_text = (
        "# signed copy\n" + base.replace("owner: ml-platform\n", "owner:   ml-platform   # team\n") + APPROVALS
    )
    _, signed, _ = run_cli("report", str(write_spec(signed_text, "b.yaml")))
    _, changed, _ = run_cli("report", str(write_spec(base.replace("concurrency: 32", "concurrency: 33"), "c.yaml")))
    assert content_hash_of(plain) == content_hash_of(signed)
    assert content_hash_of(plain) != content_hash_of(changed)
    file_hash = re.compile(r"\| Spec SHA-256 \(file\) \| ([0-9a-f]{64}) \|")
    assert file_hash.search(plain).group(1) != file_hash.search(signed).group(1)  # type: ignore[union-attr]
    assert "SHA-256 of the spec's data without its approvals section" in plain


def test_keys_that_are_not_strings_hash_as_json_writes_them(write_spec):
    # YAML reads `1:`, `true:`, `null:` and `2.0:` as an int, a bool, None and a float; the schema rejects them, but
    # the report of such a spec (CANNOT APPROVE) still records its content hash, and sorting those keys beside
    # strings raised TypeError (an internal error). Written by hand, as json.dumps writes such keys and with the
    # keys sorted as strings ("2" < "null" < "true"; 2.0 is the whole number 2):
    canonical = '{"1":2,"a":{"2":3,"null":2,"true":1}}'
    data = {1: 2, "a": {True: 1, None: 2, 2.0: 3}, "approvals": [{"by": "x"}]}
    assert content_hash(data) == hashlib.sha256(canonical.encode()).hexdigest()
    text = (EXAMPLES / "serve-llama-70b.yaml").read_text()
    for key in ("1", "true", "null", "2.5"):
        code, out, err = run_cli("report", str(write_spec(text + f"{key}: 2\n", f"{key}.yaml")))
        assert (code, err) == (1, ""), key  # the report is written; its GP101 error is at the fail level
        assert "CANNOT APPROVE" in out and re.search(r"\| Content hash \| [0-9a-f]{64} \|", out), key


def test_the_amount_is_the_run_plus_the_monthly_figure_times_the_term():
    # 12,030.40 a month is printed 12,030; 12,030 x 12 = 144,360, so the sum checks by hand. The run of 453.20
    # is printed 453 (whole units from 100 up): 453 + 144,360 = 144,813, the total printed.
    amount = Amount("USD", 12, finetune_run=453.2, serve_monthly=12030.4)
    assert amount.serve_term == 144_360
    assert amount.total == 144_813
    # A run under 100 is printed to the cent, and so is the total it is part of: 41.45 + 144,360 = 144,401.45.
    small = Amount("USD", 12, finetune_run=41.45, serve_monthly=12030.4)
    assert small.total_shown is not None and (small.total_shown.value, small.total_shown.decimals) == (144_401.45, 2)
    assert Amount("USD", 12, serve_monthly=None, unknown=("no price",)).total is None


def test_term_months_sets_the_amount(write_spec):
    text = (
        (EXAMPLES / "serve-llama-70b.yaml")
        .read_text()
        .replace("serve_monthly: 13000", "serve_monthly: 13000\n  term_months: 36")
    )
    code, out, _ = run_cli("report", str(write_spec(text)))
    # 4 x 4.12 USD x 730 h = 12,030.40 a month -> 12,030 x 36 = 433,080 USD as declared; the required
    # 2 x h200-sxm at 6,636 a month -> 238,896 to sign, from 2026-12-02 to the day before 2029-12-02.
    assert code == 0 and "| **As declared it would cost** | 433,080 USD, 2026-12-02 to 2029-12-01 (36 months" in out
    assert "| **Amount to sign** | 238,896 USD, not to exceed, 2026-12-02 to 2029-12-01 (36 months" in out


def test_verdict_ranks_order_the_answers():
    assert [v.rank for v in Verdict] == [0, 1, 2, 3]
    assert Verdict.APPROVE.signable and Verdict.APPROVE_WITH_CHANGES.signable
    assert not Verdict.REJECT.signable and not Verdict.CANNOT_APPROVE.signable
    result = lint_path(str(EXAMPLES / "findings" / "fit-70b-on-one-h100.yaml"))
    decision = decide(result, Severity.ERROR)
    assert decision.verdict is Verdict.REJECT and [f.code for f in decision.deciding] == ["GP301"]
    assert decision.reason.startswith("The declared deployment does not fit on one GPU and declares no parallelism:")


def test_a_cheaper_sound_layout_is_approve_with_changes_quoting_the_planner(tmp_path: Path):
    result = lint_path(str(EXAMPLES / "serve-llama-70b.yaml"))
    decision = decide(result, Severity.ERROR)
    # GP507 is a warning: exit 0, but the declared 4 x h100-sxm is not the layout to sign.
    assert decision.exit_code == 0 and decision.verdict is Verdict.APPROVE_WITH_CHANGES
    (change,) = decision.changes
    assert (change.job, change.layout, change.cost) == ("serve", "2 x h200-sxm, tensor_parallel 2", "6,636 USD/month")
    # 4 x 4.12 x 730 = 12,030.4 a month declared, shown 12,030; 2 x 4.545 x 730 = 6,635.7 recommended, shown
    # 6,636: the saving is the difference of the shown amounts, 12,030 - 6,636 = 5,394 (not 5,394.7 -> 5,395).
    assert change.saving is not None and change.saving.per == "month"
    assert (change.saving.amount.value, change.saving.amount.decimals) == (5394, 0)
    assert change.fragment == "serve: {hardware: {gpu: h200-sxm, count: 2, tensor_parallel: 2}}"
    assert decision.reason == (
        "The declared layout works, but a sound layout costs less (GP507); the planner recommends serving on "
        "2 x h200-sxm, tensor_parallel 2 (6,636 USD/month), saving 5,394 USD a month."
    )
    # The same spec with GP507 switched off is approved as declared, and the report says which rule is off.
    spec = tmp_path / "serve.yaml"
    shutil.copy(EXAMPLES / "serve-llama-70b.yaml", spec)
    (tmp_path / ".gpuplan.yaml").write_text("ignore: [GP507]\n")
    code, out, _ = run_cli("report", str(spec))
    assert code == 0 and verdict_line(out) == "## APPROVE: support-assistant-70b"
    assert "| Rules ignored | GP507 |" in out and "**Rules ignored by configuration.** GP507 did not run" in out


def test_a_rejected_plan_requests_no_amount_and_names_the_way_forward():
    code, out, _ = run_cli("report", str(EXAMPLES / "findings" / "fit-70b-on-one-h100.yaml"))
    assert code == 1 and verdict_line(out) == "## REJECT: fit-70b-on-one-h100"
    # 1 x h100-sxm x 4.12 x 730 = 3,007.6, so 3,008 a month and 36,096 over 12 months: said, never requested.
    assert (
        "| **Amount to sign** | none: the declared plan is rejected (as declared it would cost 36,096 USD, "
        "2026-12-02 to 2027-12-01 (12 months, from the report's date): serving 3,008 USD a month x 12) |"
    ) in out
    # 8 x l40 (two replicas of 4 pipeline stages: an L40 has no NVLink, so no TP over PCIe is proposed):
    # 8 x 0.97 x 730 = 5,664.8 a month, shown 5,665: the way forward on page one. (One B200 holds the
    # 143.5 GiB on the estimate, 89% of its 160.7 GiB budget, but its 27.2 GiB KV pool may come short by 16%
    # at 0.9: 92%, over the 90% margin.)
    assert out.splitlines()[2] == (
        "**Reject: the declared serving does not fit on one GPU and declares no parallelism. The way forward: "
        "serving on 8 x l40 at 5,665 USD a month.**"
    )
    # No saving is claimed against a layout that does not fit; the recommendation is stated with its cost.
    assert (
        "| Saving available (serving) | n/a: the declared layout breaks memory; 8 x l40, pipeline\\_parallel 4, "
        "2 replicas of 4 sequences meets every constraint for 5,665 USD/month |" in out
    )
    assert (
        "| Funded layout (serving) | 8 x l40, pipeline\\_parallel 4, 2 replicas of 4 sequences (5,665 USD/month) |"
        in out
    )


def test_the_approval_lapses_at_the_first_stale_price_or_expired_waiver():
    # Dates worked by hand with a 90-day limit and a report dated 2026-12-03:
    # - a quote of 2026-10-01 turns 90 days old on 2026-12-30 (30 days of October after the 1st, 30 of
    #   November, 30 of December: 2026-10-01 + 90 days), earlier than the default 2027-03-03
    #   (2026-12-03 + 90 days: 28 days of December, 31 of January, 28 of February, 3 of March);
    # - a waiver expiring 2026-12-15 comes first of all;
    # - a quote of 2026-05-07 is already 210 days old (24 days of May, then 30, 31, 31, 30, 31, 30 and 3).
    from gpuplan.decision.audit import Expiry, approval_expiry

    day = datetime.date(2026, 12, 3)
    assert approval_expiry(day, {}, {}, 90) == Expiry(
        datetime.date(2027, 3, 3),
        "90 days after this report, when its prices are due for a refresh",
    )
    fresh = {"h100-sxm": datetime.date(2026, 10, 1)}
    assert approval_expiry(day, fresh, {}, 90) == Expiry(
        datetime.date(2026, 12, 30),
        "the h100-sxm price quoted 2026-10-01 turns 90 days old",
    )
    assert approval_expiry(day, fresh, {"GP302": "2026-12-15"}, 90) == Expiry(
        datetime.date(2026, 12, 15),
        "the waiver of GP302 expires",
    )
    # Already past: the approval holds on the report's day only, and the basis says what has lapsed,
    # in the past tense, with the remedy (never "turns 90 days old on" a date months ago).
    stale = {"h100-sxm": datetime.date(2026, 5, 7), "l40s": datetime.date(2026, 10, 1)}
    assert approval_expiry(day, stale, {}, 90) == Expiry(
        day,
        "the day of this report only: the h100-sxm price quoted 2026-05-07 is already 210 days old, past the "
        "90-day limit; refresh the quote to extend the approval",
    )
    assert approval_expiry(day, {}, {"GP302": "2026-11-30"}, 90) == Expiry(
        day,
        "the day of this report only: the waiver of GP302 expired on 2026-11-30; renew it to extend the approval",
    )


def test_an_approval_with_changes_states_the_amount_it_commits_to():
    # serve-llama-70b: 4 x h100-sxm at 12,030 USD a month must become 2 x h200-sxm at 6,636 (GP507):
    # 12 x 6,636 = 79,632 over the term, which is 144,360 - 64,728 (the saving over 12 months). The
    # fine-tuning example: its run becomes 138 USD on 4 x b200-hgx (an eager transformers loop, the default
    # framework); serving stays 584 a month.
    _, out, _ = run_cli("report", str(EXAMPLES / "serve-llama-70b.yaml"))
    assert (
        "| **Amount to sign** | 79,632 USD, not to exceed, 2026-12-02 to 2027-12-01 (12 months, from the report's "
        "date): serving up to 6,636 USD a month x 12 |"
    ) in out
    _, out, _ = run_cli("report", str(EXAMPLES / "finetune-then-serve.yaml"))
    # The run is signed at the slow edge of its speed band at 0.9: training throughput measured / estimate at
    # 0.1 is the 15th of 142 ratios in gpuplan/estimate/speed_bands.json, 0.7455, so 138.39 / 0.7455 = 185.6,
    # up to 186 (the estimate is 138.39 before rounding: 4.95 h x 4 GPUs x 6.99 USD); 186 + 584 x 12 = 7,194.
    assert (
        "| **Amount to sign** | 7,194 USD, not to exceed, 2026-12-02 to 2027-12-01 (12 months, from the report's "
        "date): fine-tuning run up to 186 USD (one-off; estimated at 138 USD, allowing for the slow end of the "
        "speed estimate) + serving up to 584 USD a month x 12 |"
    ) in out
    _, out, _ = run_cli("report", str(EXAMPLES / "qlora-llama-70b.yaml"))  # APPROVE: the declared amount alone
    assert "As declared it would cost" not in out


@pytest.mark.parametrize(
    ("example", "code", "words"),
    [
        ("storage-too-small.yaml", "GP601", "cannot keep its checkpoints in the declared storage"),
        ("fit-70b-on-one-h100.yaml", "GP301", "does not fit on one GPU and declares no parallelism"),
        ("budget-over.yaml", "GP501", "is over budget"),
    ],
)
def test_a_rejecting_code_of_the_code_table_rejects_with_its_words(example: str, code: str, words: str):
    """Which codes reject, and in which words, is the code table's (gpuplan.codes), not the report's: the
    verdict of each example quotes its first rejecting finding's words from the table."""
    summary = lint_run([str(EXAMPLES / "findings" / example)], keep_analysis=True).summary()
    (result,) = summary.results
    decision = decide(result, summary.fail_on)
    assert decision.verdict is Verdict.REJECT
    assert decision.deciding[0].code == code
    assert words in decision.reason


def test_information_problems_and_unsound_layouts_are_classed_in_the_code_table():
    """Input and schema codes (GP0xx, GP1xx) leave a decision without its information whatever their
    family; a missing or stale price too; low headroom and a cheaper layout ask for a change below the
    fail level; a rejecting code always states its words."""
    from gpuplan.codes import CODES

    assert approval_of("GP001") is approval_of("GP107") is Approval.NEEDS_INFORMATION
    assert approval_of("GP503") is approval_of("GP504") is Approval.NEEDS_INFORMATION
    assert approval_of("GP202") is approval_of("GP507") is Approval.NEEDS_CHANGE
    assert approval_of("GP302") is Approval.NONE
    for entry in CODES.values():
        assert bool(entry.rejects_because) == (entry.approval is Approval.REJECTS), entry.code
        # an at-risk code (the estimate holds, its band's edge does not) names that edge for page one's headline
        assert bool(entry.edge_missed) == entry.name.endswith("-at-risk"), entry.code
    assert {entry.code for entry in CODES.values() if entry.edge_missed} == {"GP208", "GP209", "GP405", "GP407"}


def test_a_rejected_plan_states_the_declared_cost_on_the_basis_an_approval_signs(tmp_path):
    # finetune-then-serve approved with changes says the declared layouts would cost 7,332 USD: serving
    # 584 x 12 = 7,008 and the fine-tuning run at the slow end of its speed band, 324 (the basis of an amount
    # to sign). The same spec with a 150 USD run budget is rejected, and its "as declared it would cost" said
    # 7,250: the run on its estimate (242). The same layouts cost the same on page one whatever the verdict.
    text = (EXAMPLES / "finetune-then-serve.yaml").read_text()
    _, approved, _ = run_cli("report", str(EXAMPLES / "finetune-then-serve.yaml"))
    assert "| **As declared it would cost** | 7,332 USD, " in approved
    spec = tmp_path / "fts.yaml"
    spec.write_text(text.replace("finetune_total: 1500", "finetune_total: 150"))
    code, out, _ = run_cli("report", str(spec))
    assert code == 1 and verdict_line(out).startswith("## REJECT")
    assert "(as declared it would cost 7,332 USD, " in out
    assert "fine-tuning run 324 USD (one-off) + serving 584 USD a month x 12; the run at the slow end" in out


def test_the_changes_line_names_training_settings_the_funded_layout_changes_too():
    # finetune-then-serve: the funded 4 x b200-hgx runs without activation checkpointing (the declared layout
    # has it on): the first page says so in words (its paste in Appendix A carries the field), never by its
    # field names, and a changed layout that keeps the settings says nothing more (the serving examples).
    code, out, _ = run_cli("report", str(EXAMPLES / "finetune-then-serve.yaml"))
    first = out.split("<details>")[0]
    assert (
        code == 0
        and (
            "| **Changes required** | fine-tuning on 4 x b200-hgx instead of 4 x h100-sxm, with activation "
            "checkpointing changed too, at 138 USD for the run (Appendix A) |"
        )
        in first
    )
    _, out, _ = run_cli("report", str(EXAMPLES / "serve-llama-70b.yaml"))
    assert "changed too" not in out.split("<details>")[0]


WAIVED_UNFIT = """\
version: 1
name: waived-unfit
model: {id: llama-3.1-8b}
serve:
  context: 8192
  concurrency: 8
  memory_utilization: %s
  hardware: {gpu: h100-sxm, count: 2, tensor_parallel: 2}
budget: {serve_monthly: 1000}
waivers:
- rule: does-not-fit
  reason: kept from the 70B plan
  approved_by: platform-lead
- rule: GP502
  reason: finance signed the overrun
  approved_by: finance
"""


@pytest.mark.parametrize("utilization", ["0.1", "5.0e-324"])
def test_an_approval_on_waivers_says_what_they_waived_never_the_claim_they_deny(write_spec, utilization):
    # Llama 3.1 8B over 2 x H100 (TP 2) needs 15.4 GiB a GPU (7.5 GiB of weights, 4.0 of KV cache, 1.8 of
    # activations, 2.1 of runtime); at memory_utilization 0.1 the engine's budget is 7.9 GiB (0.1 x 79.2), and at
    # 5e-324 (the schema's least positive number) it is 0 bytes: GP201 either way, and 2 x 4.12 x 730 = 6,015 USD
    # a month against the 1,000 budgeted is GP502. Both are waived, so the run passes and the verdict is APPROVE;
    # it said the deployment "fits with -94% headroom" (and divided by the 0-byte budget: an internal error), and
    # the report's headline that it "fits in memory with the margin to spare" and "is within budget".
    path = write_spec(WAIVED_UNFIT % utilization)
    result = lint_path(str(path))
    assert {f.code for f in result.findings if f.waived} >= {"GP201", "GP502"}
    decision = decide(result, Severity.ERROR)
    assert decision.verdict is Verdict.APPROVE and decision.exit_code == 0
    assert "does not fit in GPU memory (GP201, waived)" in decision.reason
    assert "the deployment is over budget (GP502, waived)" in decision.reason
    assert "approved on waivers: GP201 (kept from the 70B plan); GP502 (finance signed the overrun)" in decision.reason
    assert "headroom" not in decision.reason and "within the declared budget" not in decision.reason
    code, out, err = run_cli("report", str(path))
    assert code == 0, err
    headline = next(line for line in out.splitlines() if line.startswith("**Approve"))
    assert headline == (
        "**Approve serving on 2 x h100-sxm as declared: it does not fit in GPU memory (GP201, waived) and it is over "
        "budget (GP502, waived).**"
    )


def test_an_approval_on_waivers_of_two_jobs_names_the_job_each_waiver_is_about(tmp_path: Path):
    # The fine-tune-then-serve example (GP202: the fine-tune's 0.9 edge leaves 8% of an H100 free, inside the 10%
    # margin; GP507: 4 x B200 hold it for less) with budgets of 10 USD a run and 10 a month (GP501, GP502), all
    # four waived: APPROVE. Each waived finding is one job's, and the reason and the headline say whose: the
    # serving deployment fits with room and is not "it fits, but with less headroom" (a review's finding: the
    # headline said "it" of both jobs, and the second budget denial had no subject).
    import yaml

    document = yaml.safe_load((EXAMPLES / "finetune-then-serve.yaml").read_text())
    document["budget"].update(finetune_total=10, serve_monthly=10)
    document["waivers"] = [
        {"rule": code, "reason": f"r{code}", "approved_by": "a"} for code in ("GP202", "GP501", "GP502", "GP507")
    ]
    path = tmp_path / "both.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    decision = decide(lint_path(str(path)), Severity.ERROR)
    assert decision.verdict is Verdict.APPROVE
    assert {f.code for f in decision.waived} == {"GP202", "GP501", "GP502", "GP507"}
    assert "fits, but with less headroom than the configured margin (GP202, waived) and serving on" in decision.reason
    assert "the fine-tuning run is over budget (GP501, waived); the deployment is over budget (GP502, waived)" in (
        decision.reason
    )
    _, out, _ = run_cli("report", str(path))
    headline = next(line for line in out.splitlines() if line.startswith("**Approve"))
    assert (
        "as declared: fine-tuning fits, but with less headroom than the configured margin (GP202, waived)" in headline
    )
    assert headline.endswith("fine-tuning is over budget (GP501, waived); serving is over budget (GP502, waived).**")


def test_a_layout_that_must_change_with_no_sound_layout_to_change_to_is_rejected(tmp_path: Path):
    # A 1B model in 4-bit on one A100 at 2 requests/s, its SLO a 200 ms p90 TTFT, planned at 0.95 confidence: the
    # estimate (22 ms) meets it, the steady band's slow edge at 0.95 (x 19.9) does not (GP405), and no layout the
    # planner may propose holds that edge either (plan: recommended none). The verdict was APPROVE WITH CHANGES with
    # 23,160 USD to sign for the declared layout and a change that named none (a helper's hunt): there is nothing
    # to approve with, so it is a REJECT, and page one says what would have to change.
    path = tmp_path / "stuck.yaml"
    path.write_text(
        "version: 1\nname: stuck\nmodel: {id: llama-3.2-1b}\nserve: {context: 1024, output_tokens: 256,"
        " arrival: steady, rate_rps: 2, concurrency: 256, engine: lmdeploy, quantization: int4-awq,"
        " slo: {ttft_ms: 200, tpot_ms: 10}, hardware: {gpu: a100-sxm-80gb, count: 1}}\nplan: {confidence: 0.95}\n",
        encoding="utf-8",
    )
    decision = decide(lint_path(str(path)), Severity.ERROR)
    assert [f.code for f in decision.deciding] == ["GP405"] and decision.changes == ()
    assert decision.verdict is Verdict.REJECT and not decision.verdict.signable and decision.exit_code == 0
    assert "no layout within the plan's limits meets every constraint at 95% confidence" in decision.reason
    _, out, _ = run_cli("report", str(path))
    assert out.startswith("## REJECT: stuck")
    assert "The way forward: change the targets, the plan's limits or, knowingly, plan.confidence" in out
    # At the default 0.9 a layout holds the edge: the change is there to approve with.
    path.write_text(path.read_text().replace("0.95", "0.9"))
    assert decide(lint_path(str(path)), Severity.ERROR).verdict is Verdict.APPROVE_WITH_CHANGES


GRADIENT_SYNC_BOUND = """version: 1
name: gp310-approve
model: {id: llama-3.1-8b}
finetune:
  method: lora
  seq_len: 512
  sharding: zero3
  tokens: 50000000
  hardware: {gpu: l40, count: 8}
"""
OUTSIDE_PLAN_LIMITS = """version: 1
name: limits-approve
model: {id: llama-3.1-8b}
finetune:
  method: lora
  seq_len: 2048
  activation_checkpointing: full
  tokens: 10000000
  hardware: {gpu: h200-sxm, count: 1}
plan: {gpu: [h100-sxm, h100-pcie]}
"""


@pytest.mark.parametrize(
    "text, code, broken",
    [
        # 8 L40s over PCIe: the planner's gradient_sync constraint breaks (GP310's 239% of a step against 25%)
        (GRADIENT_SYNC_BOUND, "GP310", "gradient_sync"),
        # plan.gpu allows H100s alone; the declared H200 was planned as unsound and approved as declared
        (OUTSIDE_PLAN_LIMITS, "GP508", "limits"),
    ],
)
def test_a_declared_layout_the_plan_calls_unsound_is_never_approved_as_declared(write_spec, text, code, broken):
    # Both specs were APPROVE ("as declared ... with the margin to spare") beside a plan whose declared row said
    # "breaks gradient_sync" / "breaks limits": the verdict now rests on the finding that says so, and funds the
    # plan's recommendation.
    spec = write_spec(text)
    result = lint_path(str(spec))
    assert code in {f.code for f in result.findings}
    decision = decide(result, Severity.ERROR)
    assert decision.verdict is Verdict.APPROVE_WITH_CHANGES and code in {f.code for f in decision.deciding}
    _, out, _ = run_cli("plan", "--format", "json", str(spec))
    (job,) = json.loads(out)["jobs"]
    assert job["declared"]["meets"][broken] is False and not job["declared"]["sound"]
    recommended, declared = job["recommended"], job["declared"]
    assert recommended["sound"] and (recommended["gpu"], recommended["gpus"]) != (declared["gpu"], declared["gpus"])


def test_a_reject_no_layout_change_mends_names_the_findings_own_fix():
    # storage-too-small: 3 checkpoints of 112.4 GB need 337.3 GB of the 200 declared (GP601); the layout is sound,
    # so the plan keeps it, and page one had no way forward at all. fit-context-beyond-model: serving asks 16,384
    # tokens of a 4,096-token model (GP206); every layout breaks that alike, yet page one advised changing "the
    # targets, the plan's limits or plan.confidence", and priced the fine-tune "at n/a for the run" (no tokens).
    _, storage, _ = run_cli("report", str(EXAMPLES / "findings" / "storage-too-small.yaml"), "-o", "-")
    assert storage.splitlines()[2].endswith(
        "The way forward: fine-tuning: storage\\_gb: 371 (10% spare), or keep fewer.**"
    )
    _, context, _ = run_cli("report", str(EXAMPLES / "findings" / "fit-context-beyond-model.yaml"), "-o", "-")
    assert context.splitlines()[2].endswith(
        "The way forward: fine-tuning on 1 x b200-hgx at 0.15 USD/1M tokens; serving: lower serve.context to at most"
        " 4,096, or serve a model that takes 16,384 tokens.**"
    )
    # A layout whose engine refuses the context is quoted no latency: its estimate says why it cannot start.
    assert "E. Serving: the estimate of 1 x h100-sxm (fits in memory, but the engine cannot start)" in context
    assert "| Latency | n/a (the engine cannot start): a 16,384-token context is longer than the model takes" in context
    assert "its engine cannot start, so every scenario fails" in context
