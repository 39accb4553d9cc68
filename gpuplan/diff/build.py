"""Build a diff: find the pairs of spec versions (two files, or two git revisions), lint both sides, compare.

Both sides are linted by this gpuplan with the same catalog and the same configuration (the one that
applies to the spec in the working tree, as ``gpuplan lint`` finds it, or ``--config``), so a diff shows
what the *spec change* does, not what a catalog or configuration change does.
"""

from __future__ import annotations

import datetime
import posixpath
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuplan.config import Config, ConfigError, load_config
from gpuplan.diff.git import Change, Repository, read_working_file
from gpuplan.diff.model import DiffResult, Revision, SpecChange, SpecSide, compare, side_from_result
from gpuplan.discovery import SPEC_SUFFIXES, is_spec_file
from gpuplan.errors import GpuplanError
from gpuplan.findings import Severity
from gpuplan.linter import LintOptions, LintResult, lint_bytes
from gpuplan.loader import load_bytes
from gpuplan.run import config_for, lint_options


@dataclass(frozen=True)
class DiffOptions:
    config_path: str | None = None
    use_waivers: bool = True
    today: datetime.date | None = None
    fail_on: Severity | None = None  # --fail-on: the level verdicts are decided at (default: each spec's config)


@dataclass(frozen=True)
class _Linting:
    """How one spec is linted and decided: its lint options and the fail level its verdict uses."""

    options: LintOptions
    fail_on: Severity


class _Configs:
    """Each spec's linting: ``--config``, else the configuration ``gpuplan lint`` would find for it."""

    def __init__(self, options: DiffOptions) -> None:
        self.options = options
        self.explicit = load_config(Path(options.config_path)) if options.config_path else None
        self.found: dict[Path | str, Config | ConfigError] = {}

    def linting(self, location: Path) -> _Linting:
        # A removed spec's folder may be gone: the search upward starts there all the same.
        config = self.explicit or config_for(str(location), self.found)
        options = lint_options(config, use_waivers=self.options.use_waivers, today=self.options.today)
        # As gpuplan lint and report: --fail-on, else the configuration's fail-on, else error.
        return _Linting(options, self.options.fail_on or config.fail_on or Severity.ERROR)


def diff_files(base: str, head: str, options: DiffOptions | None = None) -> DiffResult:
    """Compare two spec files."""
    options = options or DiffOptions()
    configs = _Configs(options)
    contents = {}
    for name in (base, head):
        content = read_working_file(Path(name))
        if content is None:
            raise GpuplanError(f"cannot read {name}: no such file")
        contents[name] = content
    lint = configs.linting(Path(head))
    before = _side(base, contents[base], Path(base), lint)
    after = _side(head, contents[head], Path(head), lint)
    change = compare(head, None, before, after, contents[base] == contents[head])
    return DiffResult(Revision("file", base), Revision("file", head), (change,))


def diff_git(
    base_ref: str | None,
    head_ref: str | None = None,
    pathspecs: tuple[str, ...] = (),
    *,
    merge_base: bool = False,
    options: DiffOptions | None = None,
    cwd: Path | None = None,
) -> DiffResult:
    """Compare every spec that changed between ``base_ref`` (default: the merge base with the default branch)
    and ``head_ref`` (default: the working tree)."""
    options = options or DiffOptions()
    repository = Repository.find(cwd)
    head_commit = repository.commit(head_ref) if head_ref else None
    tip = head_commit or "HEAD"
    if base_ref is None:
        default = repository.default_branch()
        base_commit = repository.merge_base(repository.commit(default), repository.commit(tip))
        base = Revision("git", f"merge base with {default}", base_commit)
    else:
        base_commit = repository.commit(base_ref)
        if merge_base:
            base_commit = repository.merge_base(base_commit, repository.commit(tip))
        base = Revision("git", base_ref if not merge_base else f"merge base with {base_ref}", base_commit)
    head = Revision("git", head_ref, head_commit) if head_ref else Revision("worktree", "working tree")
    changes = [c for c in repository.changes(base_commit, head_commit, pathspecs) if _yaml_named(c)]
    old = repository.read(base_commit, [c.old_path for c in changes if c.old_path])
    new = repository.read(head_commit, [c.new_path for c in changes if c.new_path])
    configs = _Configs(options)
    results = []
    for change in changes:
        # A side that is not a spec (absent, or YAML of another kind) counts as absent: a Kubernetes
        # manifest turned into a spec is an added spec, not a manifest with a hundred findings resolved.
        before_raw = _spec_content(change.old_path, old)
        after_raw = _spec_content(change.new_path, new)
        if before_raw is None and after_raw is None:
            continue
        path = change.new_path if after_raw is not None else change.old_path
        assert path is not None
        lint = configs.linting(repository.root / path)
        before = after = None
        if change.old_path and before_raw is not None:
            before = _revision_side(repository, base_commit, change.old_path, before_raw, lint)
        if change.new_path and after_raw is not None:
            after = (
                _side(change.new_path, after_raw, repository.root / change.new_path, lint)
                if head_commit is None
                else _revision_side(repository, head_commit, change.new_path, after_raw, lint)
            )
        old_path = change.old_path if change.old_path != path and after is not None else None
        results.append(compare(path, old_path, before, after, before_raw == after_raw))
    return DiffResult(base, head, tuple(sorted(results, key=lambda c: c.path)))


def _yaml_named(change: Change) -> bool:
    return any(path.endswith(SPEC_SUFFIXES) for path in (change.old_path, change.new_path) if path)


def _spec_content(path: str | None, contents: dict[str, bytes | None]) -> bytes | None:
    """The bytes of ``path`` when it is a spec as the pre-commit hook recognises one (name and content)."""
    content = contents.get(path) if path else None
    return content if path and content is not None and is_spec_file(path, content) else None


def _side(display: str, raw: bytes, location: Path, linting: _Linting) -> SpecSide:
    """Lint a spec whose relative paths (model.config) resolve beside ``location`` on disk."""
    result = lint_bytes(str(location), raw, linting.options)
    return side_from_result(display, _relabelled(result, display), linting.fail_on)


def _revision_side(repository: Repository, commit: str, path: str, raw: bytes, linting: _Linting) -> SpecSide:
    """Lint a spec as stored in ``commit``: files it refers to (model.config) are read from the same commit."""
    references = sorted(set(_referenced_files(path, raw)))
    if not references:
        return _side(path, raw, repository.root / path, linting)
    blobs = repository.read(commit, references)
    with tempfile.TemporaryDirectory(prefix="gpuplan-diff-") as scratch:
        for reference, content in blobs.items():
            if content is not None:
                target = Path(scratch, reference)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
        return _side(path, raw, Path(scratch, path), linting)


def _referenced_files(path: str, raw: bytes) -> Iterator[str]:
    """Repository paths of the local config.json files a spec names (``model.config``, tenants' too)."""
    folder = posixpath.dirname(path)
    for value in _model_configs(load_bytes(path, raw).data):
        if posixpath.isabs(value):
            continue
        joined = posixpath.normpath(posixpath.join(folder, value))
        if joined != ".." and not joined.startswith("../"):
            yield joined


def _model_configs(data: Any) -> Iterator[str]:
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "model" and isinstance(value, dict) and isinstance(value.get("config"), str):
                yield value["config"]
            yield from _model_configs(value)
    elif isinstance(data, list):
        for item in data:
            yield from _model_configs(item)


def _relabelled(result: LintResult, display: str) -> LintResult:
    """Findings named by the spec's path in the repository, not the folder it was linted from."""
    return replace(result, path=display, findings=tuple(replace(f, file=display) for f in result.findings))


__all__ = ["DiffOptions", "SpecChange", "diff_files", "diff_git"]
