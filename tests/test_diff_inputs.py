"""gpuplan diff on inputs a repository can hold: odd file names for git's cat-file protocol, blobs far over
the spec limit, binary and unparseable sides, FIFOs and symlink loops in the working tree, and layouts over
their memory. Each side that cannot be checked is that side's finding (as gpuplan lint has it), never a crash,
never "removed", and the other specs are still compared."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import run_cli
from test_diff import CLEAN, LOCAL_CONFIG, TINY, TOO_MANY, by_path, git, write

from gpuplan.diff.build import diff_files, diff_git
from gpuplan.diff.git import Repository
from gpuplan.reading import SPEC_MAX_BYTES

LOCAL = (
    "version: 1\nname: local\nmodel: {{config: {config}}}\n"
    "serve:\n  context: 4096\n  concurrency: 4\n  hardware: {{gpu: l4}}\n"
)


def new_repo(root: Path) -> Path:
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "ci@example.com")
    git(root, "config", "user.name", "CI")
    return root


def commit_all(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


# Names git's line-based batch protocol must not misread: several spaces, a tab, non-ASCII, a trailing
# " missing" (what cat-file appends to a name it cannot find), and a newline (resolved on its own).
ODD_NAMES = ("two  spaces.yaml", "tab\there.yaml", "naïve 模型.yaml", "ends missing", "line\nbreak.yaml")


def test_cat_file_answers_are_matched_to_names_with_spaces_tabs_and_missing(tmp_path: Path):
    root = new_repo(tmp_path / "repo")
    write(root, {name: f"content of {name}\n" for name in ODD_NAMES})
    write(root, {"folder/inside.yaml": "x\n"})
    commit_all(root, "odd names")
    absent = ["absent  two spaces.yaml", "absent\ttab.yaml", "absent é.yaml", "absent missing", "gone\nbreak.yaml"]
    contents = Repository.find(root).read("HEAD", [*ODD_NAMES, *absent, "folder"])
    assert contents == {
        **{name: f"content of {name}\n".encode() for name in ODD_NAMES},
        **dict.fromkeys(absent),
        "folder": None,  # a tree is no file
    }


def test_a_missing_model_config_with_a_space_in_its_name_is_gp021_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The audit's case: cat-file answers '<rev>:my config.json missing', which was split as a blob header."""
    root = new_repo(tmp_path / "repo")
    write(root, {"s.yaml": LOCAL.format(config='"my config.json"')})
    commit_all(root, "1")
    write(root, {"s.yaml": LOCAL.format(config='"my config.json"').replace("concurrency: 4", "concurrency: 2")})
    commit_all(root, "2")
    (change,) = diff_git("HEAD~1", "HEAD", cwd=root).changes
    gp021 = [f for side in (change.before, change.after) for f in side.findings if f.code == "GP021"]
    assert len(gp021) == 2 and change.findings_added == ()  # the same missing file on both sides: nothing new
    # Named as the spec names it, on both sides (one side is linted from a scratch folder).
    assert [f.message for f in gp021] == ["my config.json: cannot read it: no such file"] * 2
    monkeypatch.chdir(root)
    code, out, err = run_cli("diff", "--git", "HEAD~1", "--head", "HEAD")
    assert (code, err) == (0, "")
    assert "/serve/concurrency: 4 → 2" in out


def test_model_configs_named_oddly_are_read_from_each_revision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = new_repo(tmp_path / "repo")
    names = ["my  config missing", "tab\tconfig.json", "модель config.json"]
    specs = {f"s{i}.yaml": LOCAL.format(config=json.dumps(name)) for i, name in enumerate(names)}
    write(root, {**specs, **{name: json.dumps(LOCAL_CONFIG) for name in names}})
    commit_all(root, "1")
    write(root, {name: spec.replace("concurrency: 4", "concurrency: 2") for name, spec in specs.items()})
    commit_all(root, "2")
    monkeypatch.chdir(root)
    code, out, err = run_cli("diff", "--git", "HEAD~1", "--head", "HEAD", "--format", "json")
    assert (code, err) == (0, "")
    specs_out = json.loads(out)["specs"]
    assert [spec["path"] for spec in specs_out] == sorted(specs)
    for spec in specs_out:  # each config.json was found on both sides: the model resolved and was estimated
        assert spec["before"]["estimated"] and spec["after"]["estimated"], spec["path"]
        assert [f["code"] for f in spec["findings_added"]] == []


def test_a_blob_over_the_limit_is_read_only_one_byte_past_it(tmp_path: Path):
    root = new_repo(tmp_path / "repo")
    write(root, {"big.yaml": TINY + "#" * (3 * SPEC_MAX_BYTES)})
    commit_all(root, "big")
    (content,) = Repository.find(root).read("HEAD", ["big.yaml"]).values()
    assert isinstance(content, bytes) and len(content) == SPEC_MAX_BYTES + 1
    assert content.startswith(TINY.encode())


@pytest.fixture
def spec_repo(tmp_path: Path) -> Path:
    """main: four copies of the small clean spec and a Kubernetes manifest."""
    root = new_repo(tmp_path / "repo")
    write(root, {f"{name}.yaml": CLEAN for name in ("big", "binary", "broken", "manifest", "kept")})
    write(root, {"deploy.yaml": "kind: Deployment\n"})
    commit_all(root, "base")
    return root


def test_sides_that_cannot_be_checked_are_findings_not_removals(spec_repo: Path, monkeypatch: pytest.MonkeyPatch):
    root = spec_repo
    # 2 MiB of comment before the spec: over the limit, and its first 256 KiB do not look like a spec
    (root / "big.yaml").write_bytes(b"#" * (2 * SPEC_MAX_BYTES) + b"\n" + CLEAN.encode())
    (root / "binary.yaml").write_bytes(bytes(range(256)) * 8)  # 0x80 is no UTF-8 start byte
    (root / "broken.yaml").write_text("model: [\n")
    (root / "manifest.yaml").write_text("kind: Deployment\nmetadata: {name: app}\n")  # YAML of another kind
    (root / "deploy.yaml").write_bytes(bytes(range(256)))  # never a spec on either side: not in the diff
    (root / "kept.yaml").write_text(CLEAN.replace("concurrency: 8", "concurrency: 4"))
    commit_all(root, "head")
    changes = by_path(diff_git("HEAD~1", "HEAD", cwd=root))
    assert {path: change.status for path, change in changes.items()} == {
        "big.yaml": "modified",
        "binary.yaml": "modified",
        "broken.yaml": "modified",
        "manifest.yaml": "removed",
        "kept.yaml": "modified",
    }
    added = {path: [f.code for f in change.findings_added] for path, change in changes.items()}
    assert (added["big.yaml"], added["binary.yaml"], added["broken.yaml"]) == (["GP003"], ["GP005"], ["GP001"])
    assert added["manifest.yaml"] == []
    assert changes["big.yaml"].findings_added[0].message == (
        "cannot read big.yaml: it is more than 1,048,576 bytes; specs are limited to 1,048,576 bytes"
    )
    assert changes["kept.yaml"].after.jobs["serve"]["concurrency"] == 4  # the others are still compared
    monkeypatch.chdir(root)
    code, out, _ = run_cli("diff", "--git", "HEAD~1", "--head", "HEAD")
    assert code == 1  # new errors, under the default fail-on-new-error
    assert "  - big.yaml: new error GP003\n  - binary.yaml: new error GP005\n  - broken.yaml: new error GP001\n" in out
    # The way back: the broken sides are the base, their findings are resolved, the specs are not "added".
    back = by_path(diff_git("HEAD", "HEAD~1", cwd=root))
    assert [back[path].status for path in ("big.yaml", "binary.yaml", "broken.yaml")] == ["modified"] * 3
    assert [f.code for f in back["binary.yaml"].findings_resolved] == ["GP005"]
    assert run_cli("diff", "--git", "HEAD", "--head", "HEAD~1")[0] == 0


def test_an_oversized_untracked_file_that_is_no_spec_is_left_alone(spec_repo: Path):
    """A large data file added beside the specs is not a spec: the hook would not check it, nor does the diff."""
    (spec_repo / "data.yaml").write_bytes(b"rows:\n" + b"  - 1\n" * (SPEC_MAX_BYTES // 3))
    assert "data.yaml" not in by_path(diff_git("HEAD", cwd=spec_repo))


def test_unreadable_worktree_files_are_gp009_and_the_rest_is_compared(spec_repo: Path, monkeypatch: pytest.MonkeyPatch):
    root = spec_repo
    (root / "binary.yaml").unlink()
    os.mkfifo(root / "binary.yaml")  # a tracked spec replaced by a FIFO: opening it would wait for a writer
    os.symlink("loop.yaml", root / "loop.yaml")  # untracked, pointing at itself
    (root / "kept.yaml").write_text(CLEAN.replace("concurrency: 8", "concurrency: 4"))
    changes = by_path(diff_git("HEAD", cwd=root))
    assert {path: change.status for path, change in changes.items()} == {
        "binary.yaml": "modified",
        "loop.yaml": "added",
        "kept.yaml": "modified",
    }
    assert [(f.code, f.message) for f in changes["binary.yaml"].findings_added] == [
        ("GP009", "cannot read binary.yaml: it is a named pipe (FIFO), not a regular file")
    ]
    assert [(f.code, f.message) for f in changes["loop.yaml"].findings_added] == [
        ("GP009", "cannot read loop.yaml: too many levels of symbolic links (a symlink loop)")
    ]
    assert changes["kept.yaml"].after.jobs["serve"]["concurrency"] == 4
    monkeypatch.chdir(root)
    code, out, err = run_cli("diff", "--git", "HEAD", "--format", "github")
    assert (code, err) == (1, "")
    assert "::error file=loop.yaml,line=1,title=new finding GP009 unreadable-file::" in out


def test_a_layout_over_its_memory_has_no_free_share(tmp_path: Path):
    """CLEAN: 14.99 GiB weights + 0.44 activations + 0.25 runtime + 8 x 1 GiB KV = 23.68 GiB of the 40.04 GiB
    budget: 16.36 GiB free (16.4), 40.9%. TOO_MANY holds 40 x 1 GiB of KV: 55.68 GiB, 15.64 GiB short (15.6);
    the change is of the shown amounts, -15.6 - 16.4 = -32.0 GiB, and a share of nothing has no change."""
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(CLEAN)
    b.write_text(TOO_MANY)
    text = run_cli("diff", str(a), str(b))[1]
    cells = [re.split(r" {2,}", line.strip()) for line in text.splitlines() if line.startswith("    Headroom")]
    assert cells == [
        ["Headroom per GPU", "16.4 GiB", "none: short by 15.6 GiB", "-32.0 GiB"],
        ["Headroom share", "40.9%", "none"],
    ]
    markdown = run_cli("diff", str(b), str(a), "--format", "markdown")[1]
    assert "| Headroom per GPU | none: short by 15.6 GiB | 16.4 GiB | +32.0 GiB |\n" in markdown
    assert "| Headroom share | none | 40.9% |   |\n" in markdown
    # JSON keeps the signed figures for policies (documented: negative means the layout does not fit).
    after = json.loads(run_cli("diff", str(a), str(b), "--format", "json")[1])["specs"][0]["after"]["jobs"]["serve"]
    assert after["headroom_pct"] == -39.1  # -15.64 / 40.04
    (change,) = diff_files(str(a), str(b)).changes
    assert change.after.jobs["serve"]["headroom_bytes"] < 0
