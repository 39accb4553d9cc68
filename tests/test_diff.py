"""gpuplan diff: real git repositories made in a temporary folder, two spec files, guardrails, formats.

Money is pinned with `budget.prices` overrides so each figure is hand-derivable: a month is 730 hours
(spec.HOURS_PER_MONTH), so monthly cost = GPUs x price x 730.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT, run_cli
from test_memory_bands import kv_low_ratio

from gpuplan.diff.build import diff_files, diff_git
from gpuplan.diff.git import Repository
from gpuplan.diff.guardrails import Guardrails, strictest
from gpuplan.diff.json_format import render as render_json
from gpuplan.diff.model import Figure
from gpuplan.diff.present import _figure_clause

PRICED = "budget:\n  prices: {{{prices}}}\n  prices_date: 2026-11-20\n"

# Llama 3.1 70B, 32 x 8k chats with an fp8 KV cache (the serve-llama-70b example's workload).
SERVE_70B = """\
version: 1
name: support-70b
model: {{id: llama-3.1-70b}}
serve:
  context: 8192
  output_tokens: 512
  concurrency: 32
  kv_cache_dtype: fp8
  hardware: {{gpu: {gpu}, count: {count}, tensor_parallel: {count}}}
"""
BASE_SERVE = SERVE_70B.format(gpu="h200-sxm", count=2) + PRICED.format(prices="h200-sxm: 4.00")  # 2 x 4 x 730 = 5,840
HEAD_SERVE = SERVE_70B.format(gpu="h100-sxm", count=4) + PRICED.format(prices="h100-sxm: 3.00")  # 4 x 3 x 730 = 8,760

# Llama 3.1 8B on one L40S (the team has only L40S: the planner may propose no other GPU, so no GP507): the
# KV cache is 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 128 KiB a token, 1 GiB per 8,192-token
# sequence; beside it 14.99 GiB of weights, 0.44 GiB of activations and 0.25 GiB of runtime, in the
# 40.04 GiB engine budget (0.9 x 44.5 GiB).
SMALL = """\
version: 1
name: {name}
model: {{id: llama-3.1-8b}}
serve:
  context: 8192
  concurrency: {concurrency}
  hardware: {{gpu: l40s}}
plan: {{gpu: [l40s]}}
"""
L40S_PRICE = PRICED.format(prices="l40s: 2.00")  # 1 x 2 x 730 = 1,460 a month
CLEAN = SMALL.format(name="chat", concurrency=8) + L40S_PRICE  # 8 GiB of KV: 23.68 GiB, 16.4 GiB free, no finding
# The engine's KV pool is 40.04 - 15.68 = 24.36 GiB; at 0.9 the serving band's low edge (x 0.9566, the 2nd of
# its 17 ratios) leaves 23.30 GiB. 20 GiB of KV: 3.30 GiB (8%) free at that edge < the 10% margin: GP202
# (4.36 GiB, 11%, on the estimate)
LOW_HEADROOM = SMALL.format(name="chat", concurrency=20) + L40S_PRICE
# 40 GiB of KV alone exceeds the 24.4 GiB left after weights and runtime: GP203
TOO_MANY = SMALL.format(name="chat", concurrency=40) + L40S_PRICE

# Llama 3.2 1B on one L4, the team's only GPU kind (so no GP507: an L40 at its catalog median would cost less).
TINY = """\
version: 1
name: tiny
model: {id: llama-3.2-1b}
serve:
  context: 4096
  concurrency: 4
  hardware: {gpu: l4}
plan: {gpu: [l4]}
""" + PRICED.format(prices="l4: 1.00")  # 1 x 1 x 730 = 730 a month

FINETUNE = """\
version: 1
name: classifier
model: {id: llama-3.1-8b}
finetune:
  method: lora
  seq_len: 2048
  tokens: 100000000
  hardware: {gpu: h100-sxm}
""" + PRICED.format(prices="h100-sxm: 2.50")


# A 16-layer model given as a local config.json (model.config).
LOCAL_CONFIG = {
    "num_hidden_layers": 16,
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 8192,
    "vocab_size": 128256,
    "tie_word_embeddings": True,
}


def git(repo: Path, *args: str) -> str:
    completed = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return completed.stdout


def write(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def new_repo(root: Path) -> None:
    """An empty repository at ``root`` on branch main, with a committer."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "ci@example.com")
    git(root, "config", "user.name", "CI")


def config_repo(root: Path) -> Path:
    """A repository at ``root`` whose one commit holds spec.yaml, which reads m/config.json (LOCAL_CONFIG)."""
    new_repo(root)
    spec = (
        "version: 1\nname: local\nmodel: {config: m/config.json}\n"
        "serve:\n  context: 4096\n  concurrency: 4\n  hardware: {gpu: l4}\n"
    )
    write(root, {"spec.yaml": spec, "m/config.json": json.dumps(LOCAL_CONFIG)})
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "base")
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main: five specs, a Kubernetes manifest and notes; feature (checked out): one spec modified, one
    renamed, one deleted, one broken (YAML syntax error), one added, the non-spec files changed."""
    root = tmp_path / "infra"
    new_repo(root)
    write(
        root,
        {
            "specs/serve.yaml": BASE_SERVE,
            "specs/train.yaml": FINETUNE,
            "specs/old.yaml": CLEAN,
            "specs/broken.yaml": TINY.replace("name: tiny", "name: broken"),
            "specs/untouched.yaml": TINY,
            "deploy/app.yaml": "kind: Deployment\nmetadata: {name: app}\n",
            "notes.md": "plans\n",
        },
    )
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "base")
    git(root, "checkout", "-q", "-b", "feature")
    write(
        root,
        {
            "specs/serve.yaml": HEAD_SERVE,
            "specs/broken.yaml": "version: 1\nname: broken\nmodel: {id: [\nserve: {}\n",
            "specs/new.yaml": TINY.replace("name: tiny", "name: new"),
            "deploy/app.yaml": "kind: Deployment\nmetadata: {name: app2}\n",
            "notes.md": "more plans\n",
        },
    )
    git(root, "mv", "specs/train.yaml", "specs/finetune.yaml")
    git(root, "rm", "-q", "specs/old.yaml")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "feature")
    return root


def by_path(result) -> dict:
    return {change.path: change for change in result.changes}


def test_git_diff_finds_exactly_the_changed_specs(repo: Path):
    result = diff_git("main", cwd=repo)
    changes = by_path(result)
    assert sorted(changes) == [
        "specs/broken.yaml",
        "specs/finetune.yaml",
        "specs/new.yaml",
        "specs/old.yaml",
        "specs/serve.yaml",
    ]  # not deploy/app.yaml (no spec), notes.md, or specs/untouched.yaml
    assert {path: c.status for path, c in changes.items()} == {
        "specs/broken.yaml": "modified",
        "specs/finetune.yaml": "unchanged",  # a pure rename: same bytes
        "specs/new.yaml": "added",
        "specs/old.yaml": "removed",
        "specs/serve.yaml": "modified",
    }
    assert changes["specs/finetune.yaml"].old_path == "specs/train.yaml"
    assert not changes["specs/finetune.yaml"].material
    assert result.base.commit == git(repo, "rev-parse", "main").strip()
    assert result.head.kind == "worktree"


def test_default_base_is_the_merge_base_and_head_can_be_a_revision(repo: Path):
    merge_base = git(repo, "merge-base", "main", "feature").strip()
    default = diff_git(None, cwd=repo)
    assert default.base.commit == merge_base
    assert default.base.name == "merge base with main"
    git(repo, "checkout", "-q", "main")  # the same comparison from the other branch, by revision
    between = diff_git("main", "feature", cwd=repo)
    assert between.head.commit == git(repo, "rev-parse", "feature").strip()
    assert [c.path for c in between.changes] == [c.path for c in default.changes]


def test_spec_with_a_syntax_error_on_one_side_is_a_finding(repo: Path):
    change = by_path(diff_git("main", cwd=repo))["specs/broken.yaml"]
    assert change.verdict_before == "APPROVE" and change.verdict_after == "CANNOT APPROVE"
    # the flow sequence opened on line 3 swallows line 4 and is still open at the end (line 5)
    assert [(f.code, f.line) for f in change.findings_added] == [("GP001", 5)]
    assert change.after.monthly_cost is None  # not estimated: left out of the totals
    # its serving job is unknown on the new side, not gone: no cost change is claimed for it
    assert change.figure_pair("serve", "monthly_cost") == (730.0, None)
    assert change.figure_delta("serve", "monthly_cost") is None


def test_a_change_between_two_sides_that_do_not_load_is_never_cosmetic(tmp_path: Path):
    # Both sides not UTF-8 (GP005) or not YAML (GP001), the new one asking for 64 GPUs where the old asked for 4:
    # the same finding on both sides, no fields to compare, and the diff said the spec "differs only in comments,
    # layout or name" (`material: false`; `--comment-on any` printed nothing). What changed cannot be told there.
    base = (ROOT / "examples" / "serve-llama-70b.yaml").read_bytes()
    head = base.replace(b"count: 4, tensor_parallel: 4", b"count: 64, tensor_parallel: 8")
    assert head != base
    for name, spoil in (
        ("latin1", lambda text: text.replace(b"owner:", b"owner: caf\xe9 #", 1)),
        ("escape", lambda text: text.replace(b"owner:", b"owner: \x1b", 1)),
    ):
        (tmp_path / f"{name}-a.yaml").write_bytes(spoil(base))
        (tmp_path / f"{name}-b.yaml").write_bytes(spoil(head))
        (change,) = diff_files(str(tmp_path / f"{name}-a.yaml"), str(tmp_path / f"{name}-b.yaml")).changes
        assert change.findings_added == () and change.fields_changed == ()  # nothing else tells it apart
        assert change.unjudged and change.material, name
        _, out, _ = run_cli(
            "diff", "--comment-on", "any", str(tmp_path / f"{name}-a.yaml"), str(tmp_path / f"{name}-b.yaml")
        )
        assert "could not be estimated" in out and "only in comments" not in out
    # The same bytes on both sides stay unchanged, and a side that loads beside one that does not was material already.
    (tmp_path / "same.yaml").write_bytes(b"owner: \x1b\n")
    (same,) = diff_files(str(tmp_path / "same.yaml"), str(tmp_path / "same.yaml")).changes
    assert not same.unjudged and not same.material


def test_git_diff_figures_and_totals(repo: Path):
    result = diff_git("main", cwd=repo)
    changes = by_path(result)
    serve = changes["specs/serve.yaml"]
    assert serve.cost_before("monthly_cost") == 5840.0  # 2 x 4.00 x 730
    assert serve.cost_after("monthly_cost") == 8760.0  # 4 x 3.00 x 730
    assert serve.cost_delta("monthly_cost") == 2920.0
    assert serve.cost_delta("term_cost") == 2920.0 * 12  # the default term: 12 months
    assert changes["specs/old.yaml"].cost_delta("monthly_cost") == -1460.0  # removed: its full cost as -
    assert changes["specs/new.yaml"].cost_delta("monthly_cost") == 730.0  # added: its full cost as +
    assert [f.json_pointer for f in serve.fields_changed] == [
        "/serve/hardware/gpu",
        "/serve/hardware/count",
        "/serve/hardware/tensor_parallel",
        "/budget/prices/h100-sxm",
        "/budget/prices/h200-sxm",
    ]
    assert [(f.kind, f.before, f.after) for f in serve.fields_changed[:2]] == [
        ("modified", "h200-sxm", "h100-sxm"),
        ("modified", 2, 4),
    ]
    (totals,) = result.totals
    # before 5,840 + 1,460 (old) + 0 (fine-tune only: no monthly cost) = 7,300; after 8,760 + 730 (new) = 9,490;
    # broken.yaml has no cost after the change and is left out.
    assert (totals.monthly.before, totals.monthly.after, totals.monthly.delta) == (7300.0, 9490.0, 2190.0)
    assert totals.monthly.percent == 30.0  # 2,190 / 7,300
    assert totals.uncosted == ("specs/broken.yaml",)
    assert_totals_are_sums(result)


def assert_totals_are_sums(result) -> None:
    for totals in result.totals:
        for figure, key in ((totals.monthly, "monthly_cost"), (totals.run, "run_cost"), (totals.term, "term_cost")):
            mine = [c for c in result.changes if c.currency == totals.currency and c.path not in figure.uncosted]
            assert figure.before == round(sum(c.cost_before(key) for c in mine), 2)
            assert figure.after == round(sum(c.cost_after(key) for c in mine), 2)
            assert figure.delta == round(sum(c.cost_delta(key) for c in mine), 2)


def test_cli_guardrails_exit_codes(repo: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(repo)
    quiet = ("--format", "json", "--no-fail-on-new-error")
    # the broken spec brings GP001, a new error: exit 1 by default
    assert run_cli("diff", "--git", "main")[0] == 1
    assert run_cli("diff", "--git", "main", *quiet)[0] == 0
    # +2,190 a month (+30%): above 2,000 fails, 2,190 is not "more than" 2,190
    assert run_cli("diff", "--git", "main", *quiet, "--max-monthly-increase", "2000")[0] == 1
    assert run_cli("diff", "--git", "main", *quiet, "--max-monthly-increase", "2190")[0] == 0
    assert run_cli("diff", "--git", "main", *quiet, "--max-monthly-increase-pct", "29.9")[0] == 1
    assert run_cli("diff", "--git", "main", *quiet, "--max-monthly-increase-pct", "30")[0] == 0
    # broken.yaml goes from APPROVE to CANNOT APPROVE, serve.yaml from APPROVE to APPROVE WITH CHANGES: worse
    assert run_cli("diff", "--git", "main", *quiet, "--fail-on-worse-verdict")[0] == 1
    code, out, _ = run_cli("diff", "--git", "main", "--no-fail-on-new-error", "--max-monthly-increase", "10")
    assert code == 1
    assert (
        "monthly cost rises by 2,190 USD (from 7,300 USD to 9,490 USD), more than max-monthly-increase 10.00 USD" in out
    )


def test_guardrails_from_configuration(repo: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(repo)
    (repo / ".gpuplan.yaml").write_text("diff:\n  fail-on-new-error: false\n  max-monthly-increase-pct: 25\n")
    code, out, _ = run_cli("diff", "--git", "main", "--format", "json")
    assert code == 1
    assert json.loads(out)["guardrails"]["breaches"] == [
        "monthly cost rises by 30.0%, more than max-monthly-increase-pct 25%"
    ]
    assert run_cli("diff", "--git", "main", "--max-monthly-increase-pct", "50")[0] == 0  # the flag overrides
    (repo / ".gpuplan.yaml").write_text("diff:\n  max-monthly-increse: 1\n")
    code, _, err = run_cli("diff", "--git", "main")
    assert code == 2
    assert "unknown key 'max-monthly-increse' in diff" in err


def test_comment_on_increase_prints_nothing_for_a_decrease(repo: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(repo)
    # from feature back to main: -2,190 a month, and the broken spec is fixed (no new error)
    code, out, err = run_cli(
        "diff", "--git", "feature", "--head", "main", "--format", "markdown", "--comment-on", "increase"
    )
    assert (code, out, err) == (0, "", "")
    code, out, _ = run_cli("diff", "--git", "feature", "--head", "main", "--format", "markdown")
    assert code == 0
    assert out.startswith("**Monthly GPU cost will decrease by 2,190 USD (-23%), from 9,490 to 7,300 USD;")
    code, out, _ = run_cli("diff", "--git", "main", "--format", "markdown", "--comment-on", "increase")
    assert out.startswith("**Monthly GPU cost will increase by 2,190 USD (+30%), from 7,300 to 9,490 USD;")
    assert code == 1  # the new error still fails the run
    assert run_cli("diff", "--git", "main", "--comment-on", "never")[1] == ""


def test_comment_on_any_skips_changes_that_do_not_matter(repo: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(repo)
    git(repo, "checkout", "-q", "main")
    (repo / "specs/untouched.yaml").write_text("# a comment only\n" + TINY)
    code, out, _ = run_cli("diff", "--git", "main", "--comment-on", "any")
    assert (code, out) == (0, "")
    code, out, _ = run_cli("diff", "--git", "main")
    assert code == 0
    assert out.splitlines()[1] == "No spec changed in a way that affects memory, cost, findings or verdicts."


def test_git_errors_exit_2(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(repo)
    code, out, err = run_cli("diff", "--git", "no-such-branch")
    assert (code, out) == (2, "")
    assert err == f"gpuplan: error: unknown git revision 'no-such-branch' (not a branch, tag or commit in {repo})\n"
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.chdir(outside)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    code, _, err = run_cli("diff", "--git")
    assert code == 2
    assert err.startswith("gpuplan: error: not inside a git repository")


def test_diff_leaves_the_working_tree_and_index_alone(repo: Path):
    (repo / "specs/serve.yaml").write_text(HEAD_SERVE.replace("concurrency: 32", "concurrency: 16"))
    status = git(repo, "status", "--porcelain")
    index = (repo / ".git/index").read_bytes()
    head = git(repo, "rev-parse", "HEAD")
    result = diff_git("main", cwd=repo)
    assert by_path(result)["specs/serve.yaml"].after.jobs["serve"]["concurrency"] == 16  # the unstaged edit
    assert git(repo, "status", "--porcelain") == status
    assert (repo / ".git/index").read_bytes() == index
    assert git(repo, "rev-parse", "HEAD") == head


def test_untracked_spec_counts_as_added(repo: Path):
    (repo / "specs/draft.yaml").write_text(CLEAN.replace("name: chat", "name: draft"))
    change = by_path(diff_git("main", cwd=repo))["specs/draft.yaml"]
    assert change.status == "added"
    assert change.cost_delta("monthly_cost") == 1460.0


def test_the_guardrails_are_the_strictest_of_the_configurations_wherever_the_command_runs(
    repo: Path, monkeypatch: pytest.MonkeyPatch
):
    # specs/.gpuplan.yaml caps the monthly increase at 100 (the change adds 2,920): run from the repository
    # root it passed and from specs/ it failed. The root's configuration (none: the defaults) and each
    # changed spec's own now give every guardrail at its strictest, from either folder, and say so.
    (repo / "specs/.gpuplan.yaml").write_text("diff:\n  max-monthly-increase: 100\n")
    quiet = ("--format", "json", "--no-fail-on-new-error")
    for folder in (repo, repo / "specs"):
        monkeypatch.chdir(folder)
        code, out, err = run_cli("diff", "--git", "main", *quiet)
        assert code == 1, folder
        assert "the guardrails also take" in err and "specs/.gpuplan.yaml's diff keys" in err
        assert any(
            "more than max-monthly-increase 100" in reason for reason in json.loads(out)["guardrails"]["breaches"]
        )
    # A looser root limit does not loosen the spec's own: 100 still applies beside 10,000.
    (repo / ".gpuplan.yaml").write_text("diff:\n  max-monthly-increase: 10000\n")
    monkeypatch.chdir(repo)
    assert run_cli("diff", "--git", "main", *quiet)[0] == 1
    (repo / "specs/.gpuplan.yaml").unlink()
    assert run_cli("diff", "--git", "main", *quiet)[0] == 0


def test_a_section_silent_on_a_guardrail_keeps_its_default_in_the_strictest():
    # The schema's defaults (schemas/config.schema.json): fail-on-new-error on, fail-on-worse-verdict off. A
    # root with no diff section left them out of the merge, so a spec folder's `false` turned the first off.
    loose = {"fail-on-new-error": False, "fail-on-worse-verdict": False}
    merged = Guardrails.from_config(strictest([{}, loose]))
    assert merged.fail_on_new_error is True and merged.fail_on_worse_verdict is False
    assert Guardrails.from_config(strictest([{}, {"fail-on-worse-verdict": True}])).fail_on_worse_verdict is True
    # A limit no section sets stays unset; one section's limit is the strictest of one.
    assert Guardrails.from_config(strictest([{}, {"max-monthly-increase": 100}])).max_monthly_increase == 100
    assert Guardrails.from_config(strictest([{}, {}])).max_monthly_increase is None
    # Where the root turns a check off, a spec's configuration may turn it back on.
    assert Guardrails.from_config(strictest([loose, {"fail-on-new-error": True}])).fail_on_new_error is True


def test_local_model_config_is_read_from_the_same_revision(tmp_path: Path):
    """A spec naming a config.json gets the config.json of its own revision, not the working tree's."""
    root = tmp_path / "repo"
    new_repo(root)
    config = LOCAL_CONFIG
    spec = (
        "version: 1\nname: local\nmodel: {config: model/config.json}\n"
        "serve:\n  context: 4096\n  concurrency: 4\n  hardware: {gpu: l4}\n"
    )
    write(root, {"svc/spec.yaml": spec, "svc/model/config.json": json.dumps(config)})
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "base")
    write(root, {"svc/model/config.json": json.dumps({**config, "num_hidden_layers": 32})})
    # The spec's bytes are the same, yet the model it reads changed: modified, saying which file.
    (change,) = diff_git("main", cwd=root).changes
    assert (change.status, change.inputs_changed, change.material) == ("modified", ("svc/model/config.json",), True)
    (root / "svc/spec.yaml").write_text(spec.replace("concurrency: 4", "concurrency: 2"))
    (change,) = diff_git("main", cwd=root).changes
    assert change.inputs_changed == ("svc/model/config.json",)
    # KV cache per token: layers x 8 KV heads x 64 (2048 / 32) x 2 (K, V) x 2 bytes; 16 layers before, 32 after
    before, after = change.before.jobs["serve"], change.after.jobs["serve"]
    assert before["per_gpu_bytes"] < after["per_gpu_bytes"]  # twice the layers on the new side
    assert [f.code for f in change.findings_added if f.code == "GP021"] == []
    # Under a pathspec that leaves the spec out, it is not listed; one that takes it in, it is.
    assert diff_git("main", pathspecs=("other/",), cwd=root).changes == ()
    assert [c.path for c in diff_git("main", pathspecs=("svc/",), cwd=root).changes] == ["svc/spec.yaml"]


def test_a_spec_found_by_the_config_json_it_reads_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Finding the specs that read a changed config.json reads every spec at the head; the spec's own side
    # is then taken from that read, not read again (one revision, one read of each path).
    root = config_repo(tmp_path / "repo")
    write(root, {"m/config.json": json.dumps({**LOCAL_CONFIG, "num_hidden_layers": 32})})
    reads: list[tuple[str | None, str]] = []
    original = Repository.read

    def counted(self, revision, paths):
        paths = list(paths)
        reads.extend((revision, path) for path in paths)
        return original(self, revision, paths)

    monkeypatch.setattr(Repository, "read", counted)
    (change,) = diff_git("main", cwd=root).changes
    assert change.inputs_changed == ("m/config.json",)
    assert reads.count((None, "spec.yaml")) == 1, reads


def test_a_config_json_change_fails_the_new_error_guardrail_and_a_configuration_change_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # A PR that edits only the config.json a spec reads (16 -> 160 layers: the weights no longer fit an l4)
    # is a modified spec with a new error, exit 1; a PR that edits only .gpuplan.yaml is named, exit 0.
    root = config_repo(tmp_path / "repo")
    monkeypatch.chdir(root)
    write(root, {"m/config.json": json.dumps({**LOCAL_CONFIG, "num_hidden_layers": 160})})
    code, out, _ = run_cli("diff", "--git", "main")
    assert code == 1, out
    assert "spec.yaml (modified; 1 file it reads changed: m/config.json)" in out
    assert "new error GP" in out
    git(root, "checkout", "-q", "--", "m/config.json")
    (root / ".gpuplan.yaml").write_text("ignore: [GP504]\n")
    code, out, _ = run_cli("diff", "--git", "main", "--format", "json")
    document = json.loads(out)
    assert (code, document["configuration_changed"], document["specs"]) == (0, [".gpuplan.yaml"], [])
    code, out, _ = run_cli("diff", "--git", "main")
    assert "Configuration changed: .gpuplan.yaml." in out


def test_two_files_and_properties_of_diff(tmp_path: Path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(BASE_SERVE)
    b.write_text(HEAD_SERVE)
    same = diff_files(str(a), str(a))
    (change,) = same.changes
    assert change.status == "unchanged" and not change.material
    assert not change.findings_added and not change.findings_resolved and not change.fields_changed
    assert all(change.cost_delta(key) == 0 for key in ("monthly_cost", "run_cost", "term_cost"))
    forward, backward = diff_files(str(a), str(b)), diff_files(str(b), str(a))
    (one,), (other,) = forward.changes, backward.changes
    for key in ("monthly_cost", "run_cost", "term_cost"):
        assert one.cost_delta(key) == -other.cost_delta(key)
    for job in one.after.jobs:
        for key in one.after.jobs[job]:
            delta = one.figure_delta(job, key)
            assert delta == (None if delta is None else -other.figure_delta(job, key))


def test_worse_verdict_in_two_files(tmp_path: Path):
    clean, warned, failed = tmp_path / "clean.yaml", tmp_path / "warned.yaml", tmp_path / "failed.yaml"
    clean.write_text(CLEAN)
    warned.write_text(LOW_HEADROOM)
    failed.write_text(TOO_MANY)
    (change,) = diff_files(str(clean), str(warned)).changes
    assert (change.verdict_before, change.verdict_after, change.verdict_worsened) == (
        "APPROVE",
        "APPROVE WITH CHANGES",
        True,
    )
    # the report's own sentence: GP202 (8% free at 90% confidence), and the planner's way out
    assert change.after.reason.startswith("The declared layout is not sound as it stands (GP202): serving leaves 3.3")
    assert [(f.code, f.pointer) for f in change.findings_added] == [("GP202", "/serve/concurrency")]
    # Memory at the high edge: the 42,993,696,375 B budget less the KV room left at the pool's low edge,
    # floor(26,154,737,271 x the 2nd of the 17 shipped ratios) - 20 GiB of KV.
    low = math.floor(26_154_737_271 * kv_low_ratio(0.9))
    assert change.after.jobs["serve"]["planned_bytes"] == 42_993_696_375 - (low - 20 * 2**30)
    assert run_cli("diff", str(clean), str(warned))[0] == 0  # a warning is no new error
    code, out, _ = run_cli("diff", str(clean), str(warned), "--fail-on-worse-verdict")
    assert code == 1
    assert f"{warned}: verdict worsens from APPROVE to APPROVE WITH CHANGES" in out
    assert run_cli("diff", str(warned), str(clean), "--fail-on-worse-verdict")[0] == 0  # better
    code, out, _ = run_cli("diff", str(warned), str(failed))
    assert code == 1  # GP203 is a new error
    assert "new error GP203" in out
    code, out, _ = run_cli("diff", str(warned), str(failed), "--no-fail-on-new-error", "--fail-on-worse-verdict")
    assert code == 1
    assert f"{failed}: verdict worsens from APPROVE WITH CHANGES to REJECT" in out
    (back,) = diff_files(str(failed), str(warned)).changes
    assert [f.code for f in back.findings_resolved] == ["GP203"]
    assert (back.verdict_before, back.verdict_after, back.verdict_worsened) == ("REJECT", "APPROVE WITH CHANGES", False)


def test_verdict_order_is_the_decision_reports(tmp_path: Path):
    """REJECT is the worst verdict: a spec that could not be estimated (CANNOT APPROVE) and now does not fit
    (REJECT) got worse; the way back did not."""
    broken, failed = tmp_path / "broken.yaml", tmp_path / "failed.yaml"
    broken.write_text(TOO_MANY.replace("concurrency: 40", "concurrency: [40"))  # a YAML syntax error
    failed.write_text(TOO_MANY)
    (change,) = diff_files(str(broken), str(failed)).changes
    assert (change.verdict_before, change.verdict_after, change.verdict_worsened) == (
        "CANNOT APPROVE",
        "REJECT",
        True,
    )
    guard = ("--no-fail-on-new-error", "--fail-on-worse-verdict")
    assert run_cli("diff", str(broken), str(failed), *guard)[0] == 1
    assert run_cli("diff", str(failed), str(broken), *guard)[0] == 0


def test_verdicts_are_decided_at_the_fail_level_as_the_report_decides(tmp_path: Path):
    """A spec on the catalog's L40S price: the newest quote is older than 90 days on the test date (GP504,
    info). Below the fail level it changes nothing (APPROVE); at --fail-on info a price too old to sign
    against is missing information (CANNOT APPROVE), in the diff as in gpuplan report."""
    priced, catalog = tmp_path / "priced.yaml", tmp_path / "catalog.yaml"
    priced.write_text(CLEAN)
    catalog.write_text(CLEAN.split("budget:")[0])
    (change,) = diff_files(str(priced), str(catalog)).changes
    assert [f.code for f in change.findings_added] == ["GP504"]
    assert (change.verdict_before, change.verdict_after) == ("APPROVE", "APPROVE")
    assert run_cli("diff", str(priced), str(catalog), "--fail-on-worse-verdict")[0] == 0
    code, out, _ = run_cli("diff", str(priced), str(catalog), "--fail-on", "info", "--fail-on-worse-verdict")
    assert code == 1
    assert f"{catalog}: verdict worsens from APPROVE to CANNOT APPROVE" in out
    report = run_cli("report", str(catalog), "--fail-on", "info")[1]
    assert report.startswith("## CANNOT APPROVE: chat")
    # the configuration's fail-on counts as the flag does (as for gpuplan report)
    (tmp_path / ".gpuplan.yaml").write_text("fail-on: info\n")
    assert run_cli("diff", str(priced), str(catalog), "--fail-on-worse-verdict")[0] == 1
    assert run_cli("diff", str(priced), str(catalog), "--fail-on-worse-verdict", "--fail-on", "error")[0] == 0


def test_json_matches_its_schema(repo: Path, tmp_path: Path):
    schema = json.loads((ROOT / "schemas" / "diff.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(FINETUNE + "serve:\n  context: 4096\n  concurrency: 4\n  hardware: {gpu: h100-sxm}\n")
    b.write_text(FINETUNE)
    for result in (diff_git("main", cwd=repo), diff_git("feature", "main", cwd=repo), diff_files(str(a), str(b))):
        document = json.loads(render_json(result, [], 0))
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
        assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]
    statuses = {s["status"] for s in json.loads(render_json(diff_git("main", cwd=repo), [], 0))["specs"]}
    assert statuses == {"added", "removed", "modified", "unchanged"}  # every branch of the schema is exercised


def test_a_stream_that_outruns_its_deployment_diffs_as_without_bound_and_matches_the_schema(tmp_path: Path):
    # At 3 requests/s one H100 running llama-3.1-8b with 8k-token prompts completes fewer than it receives:
    # its TTFT figures are null in the JSON (the schema once required numbers there) and "without bound" in
    # the text, as estimate and lint say, not "n/a"; at 0.1 requests/s the stream is served.
    served = "version: 1\nname: s\nmodel: {id: llama-3.1-8b}\nserve:\n  context: 8192\n  concurrency: 64\n"
    served += "  arrival: steady\n  rate_rps: 0.1\n  hardware: {gpu: h100-sxm}\n"
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(served.replace("rate_rps: 0.1", "rate_rps: 3"))
    b.write_text(served)
    result = diff_files(str(a), str(b))
    document = json.loads(render_json(result, [], 0))
    validator = jsonschema.Draft202012Validator(json.loads((ROOT / "schemas" / "diff.schema.json").read_text()))
    assert [e.message for e in validator.iter_errors(document)] == []
    (spec,) = document["specs"]
    before, after = spec["before"]["jobs"]["serve"], spec["after"]["jobs"]["serve"]
    assert (before["saturated"], before["ttft_ms"], after["saturated"]) == (True, None, False)
    assert after["ttft_ms"] > 0
    _, out, _ = run_cli("diff", str(a), str(b))
    (line,) = [line for line in out.splitlines() if "TTFT (the SLO's statistic)" in line]
    assert line.split()[4:6] == ["without", "bound"], line


def test_schema_requires_every_key_the_output_has():
    """additionalProperties: false and every property required, everywhere: the validation above then
    fails on a key the output adds as well as on one it drops."""
    schema = json.loads((ROOT / "schemas" / "diff.schema.json").read_text())

    def objects(node):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                yield node
            for value in node.values():
                yield from objects(value)
        elif isinstance(node, list):
            for value in node:
                yield from objects(value)

    for node in objects(schema):
        assert node.get("additionalProperties") is False
        if (
            node is not schema["$defs"]["side"]["properties"]["jobs"]
            and node is not schema["$defs"]["delta"]["properties"]["jobs"]
        ):
            assert set(node.get("required", [])) == set(node["properties"]), node.get("description", node)


def test_usage_errors_exit_2(tmp_path: Path):
    spec = tmp_path / "a.yaml"
    spec.write_text(CLEAN)
    code, _, err = run_cli("diff", str(spec))
    assert code == 2 and "give two spec files (BASE HEAD), or --git [REF]" in err
    code, _, err = run_cli("diff", str(spec), str(tmp_path / "missing.yaml"))
    assert (code, err) == (2, f"gpuplan: error: cannot read {tmp_path / 'missing.yaml'}: no such file\n")
    code, _, err = run_cli("diff", str(spec), str(tmp_path))
    assert (code, err) == (2, f"gpuplan: error: cannot read {tmp_path}: it is a directory, not a regular file\n")
    code, _, err = run_cli("diff", "--head", "main", str(spec), str(spec))
    assert code == 2 and "--head and --merge-base need --git" in err


def test_merge_base_ignores_what_the_base_branch_did_since(repo: Path):
    git(repo, "checkout", "-q", "main")
    write(repo, {"specs/untouched.yaml": TINY.replace("concurrency: 4", "concurrency: 2")})
    git(repo, "commit", "-q", "-am", "main moves on")
    git(repo, "checkout", "-q", "feature")
    literal = {c.path for c in diff_git("main", cwd=repo).changes}
    assert "specs/untouched.yaml" in literal  # main's own change shows, reversed
    since_fork = {c.path for c in diff_git("main", merge_base=True, cwd=repo).changes}
    assert since_fork == literal - {"specs/untouched.yaml"}


def test_a_yaml_file_that_becomes_a_spec_is_an_added_spec(repo: Path):
    (repo / "deploy/app.yaml").write_text(TINY)  # the Kubernetes manifest is now a spec
    change = by_path(diff_git("main", cwd=repo))["deploy/app.yaml"]
    assert (change.status, change.findings_resolved) == ("added", ())


def test_a_fifo_is_refused_without_blocking(tmp_path: Path):
    import os

    spec, fifo = tmp_path / "a.yaml", tmp_path / "b.yaml"
    spec.write_text(CLEAN)
    os.mkfifo(fifo)  # opening it for reading would wait for a writer forever
    code, out, err = run_cli("diff", str(spec), str(fifo))
    assert (code, out) == (2, "")
    assert err == f"gpuplan: error: cannot read {fifo}: it is a named pipe (FIFO), not a regular file\n"


def test_an_oversized_spec_is_gp003_on_its_side(repo: Path):
    # a spec grown past the 1 MiB limit (a pasted log in a comment): a finding on the new side, as lint has it
    padding = "# " + "x" * 1000 + "\n"
    (repo / "specs/untouched.yaml").write_text(TINY + padding * 1100)
    change = by_path(diff_git("main", cwd=repo))["specs/untouched.yaml"]
    assert [f.code for f in change.findings_added] == ["GP003"]
    assert "specs are limited to 1,048,576 bytes" in change.findings_added[0].message
    assert change.after.jobs == {} and change.verdict_after == "CANNOT APPROVE"


def test_term_cost_follows_each_sides_budget_term(tmp_path: Path):
    """The term is budget.term_months (default 12), per side; the term cost is the amount the report
    requests: the monthly cost in whole units times the term."""
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(BASE_SERVE)
    b.write_text(BASE_SERVE + "  term_months: 36\n")  # appended under budget:
    (change,) = diff_files(str(a), str(b)).changes
    assert [(f.json_pointer, f.before, f.after) for f in change.fields_changed] == [("/budget/term_months", None, 36)]
    assert (change.before.term_months, change.after.term_months) == (12, 36)
    assert change.cost_before("term_cost") == 70_080.0  # 5,840 x 12
    assert change.cost_after("term_cost") == 210_240.0  # 5,840 x 36
    assert change.cost_delta("monthly_cost") == 0.0
    text = run_cli("diff", str(a), str(b))[1]
    row = next(line for line in text.splitlines() if "Cost over the term" in line)
    assert row.split() == [
        *["Cost", "over", "the", "term", "(12", "→", "36", "months)"],
        *["70,080", "USD", "210,240", "USD", "+140,160", "USD"],
    ]


def test_documented_policy_reads_the_json(repo: Path, monkeypatch: pytest.MonkeyPatch):
    """docs/diff.md's Python policy runs on real output: serve.yaml goes from 5,840 to 8,760 a month (+50%)."""
    import sys

    page = (ROOT / "docs" / "diff.md").read_text(encoding="utf-8")
    after = page[page.index("A policy is a few lines over that object") :]
    policy = after[after.index("```python\n") + len("```python\n") : after.index("```\n", after.index("```python"))]
    monkeypatch.chdir(repo)
    forward = run_cli("diff", "--git", "main", "--format", "json")[1]
    run = subprocess.run([sys.executable, "-c", policy], input=forward, capture_output=True, text=True)
    assert (run.returncode, run.stdout) == (1, "specs/serve.yaml: +2,920 USD a month\n")
    back = run_cli("diff", "--git", "feature", "--head", "main", "--format", "json")[1]
    run = subprocess.run([sys.executable, "-c", policy], input=back, capture_output=True, text=True)
    assert (run.returncode, run.stdout) == (0, "policy passed\n")


@pytest.mark.parametrize(
    "before, after, words",
    [
        # 93.28 -> 93.27 USD: -0.0107% rounds to -0.0, which a sign read off the percent printed as "+0%".
        (93.28, 93.27, "will decrease by 0.01 USD (under 1%), from 93.28 to 93.27 USD"),
        # 100 -> 150: +50%; 150 -> 100: -33.3%, shown whole.
        (100.0, 150.0, "will increase by 50 USD (+50%), from 100 to 150 USD"),
        (150.0, 100.0, "will decrease by 50 USD (-33%), from 150 to 100 USD"),
    ],
)
def test_a_cost_changes_percent_is_signed_as_the_change_is(before, after, words):
    assert _figure_clause("one-off fine-tuning cost", Figure(before, after), "USD").endswith(words)
