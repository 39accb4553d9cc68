"""Build a diff: find the pairs of spec versions (two files, or two git revisions), lint both sides, compare.

Both sides are linted by this gpuplan with the same catalog and the same configuration (the one that
applies to the spec in the working tree, as ``gpuplan lint`` finds it, or ``--config``), so a diff shows
what the *spec change* does, not what a catalog or configuration change does.
"""

from __future__ import annotations

import datetime
import os
import posixpath
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from gpuplan.config import Config, ConfigError, load_config
from gpuplan.config_files import CONFIG_FILE
from gpuplan.diff.git import Change, Content, Repository, Unreadable, read_working_file
from gpuplan.diff.model import DiffResult, Revision, SpecChange, SpecSide, compare, side_from_result
from gpuplan.discovery import has_spec_suffix, is_spec_file, model_config_names
from gpuplan.errors import GpuplanError
from gpuplan.findings import Severity
from gpuplan.linter import LintOptions, LintResult, lint_bytes, lint_path
from gpuplan.loader import load_bytes
from gpuplan.reading import SPEC_MAX_BYTES
from gpuplan.records import record
from gpuplan.run import config_for, lint_options


@record
class DiffOptions:
    config_path: str | None = None
    use_waivers: bool = True
    today: datetime.date | None = None
    fail_on: Severity | None = None  # --fail-on: the level verdicts are decided at (default: each spec's config)


@record
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
        if not isinstance(content, bytes):  # the two files named are the whole diff: without one there is none
            raise GpuplanError(f"cannot read {name}: {'no such file' if content is None else content.reason}")
        contents[name] = content
    lint = configs.linting(Path(head))
    before = _side(base, contents[base], None, lint)
    after = _side(head, contents[head], None, lint)
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
    every = repository.changes(base_commit, head_commit, pathspecs)
    changes = [c for c in every if _yaml_named(c)]
    # A spec whose own bytes did not change still changes when a file it reads (model.config) does.
    listing = repository.changes(base_commit, head_commit) if pathspecs else every  # a config.json may lie outside them
    changed = {path for c in listing for path in (c.old_path, c.new_path) if path}
    inputs, read_at_head = _changed_inputs(repository, head_commit, pathspecs, changed)
    listed = {c.new_path for c in changes}
    changes += [Change("M", path, path) for path in inputs if path not in listed]
    old = repository.read(base_commit, [c.old_path for c in changes if c.old_path])
    unread = [c.new_path for c in changes if c.new_path and c.new_path not in read_at_head]
    new = {**read_at_head, **repository.read(head_commit, unread)}
    configs = _Configs(options)
    results = []
    for change in changes:
        old_content = old[change.old_path] if change.old_path else None
        new_content = new[change.new_path] if change.new_path else None
        # Only a change the pre-commit hook would check on at least one side is a spec change.
        if not (_hook_checks(change.old_path, old_content) or _hook_checks(change.new_path, new_content)):
            continue
        before_raw = _spec_side(change.old_path, old_content)
        after_raw = _spec_side(change.new_path, new_content)
        path = change.new_path if after_raw is not None else change.old_path
        assert path is not None
        lint = configs.linting(repository.root / path)
        before = after = None
        if change.old_path and before_raw is not None:
            before = _revision_side(repository, base_commit, change.old_path, before_raw, lint)
        if change.new_path and after_raw is not None:
            after = (
                _side(change.new_path, after_raw, repository.root, lint)
                if head_commit is None
                else _revision_side(repository, head_commit, change.new_path, after_raw, lint)
            )
        old_path = change.old_path if change.old_path != path and after is not None else None
        read = inputs.get(change.new_path or "", ())
        results.append(compare(path, old_path, before, after, before_raw == after_raw and not read, read))
    configuration = _configuration_changed(repository, base_commit, head_commit, changed)
    return DiffResult(base, head, tuple(sorted(results, key=lambda c: c.path)), configuration, repository.root)


def _changed_inputs(
    repository: Repository, head: str | None, pathspecs: tuple[str, ...], changed: set[str]
) -> tuple[dict[str, tuple[str, ...]], dict[str, Content]]:
    """The specs at ``head`` (under ``pathspecs``) that read a ``changed`` file, each with those files; and
    every YAML file read at ``head`` to find them (their contents, so that none is read twice)."""
    if not any(path.endswith(".json") for path in changed):
        return {}, {}  # a spec's model.config is a config.json: with none changed, no spec is read again
    candidates = [path for path in repository.files(head, pathspecs) if has_spec_suffix(path)]
    contents = repository.read(head, candidates)
    found = {}
    for path, content in contents.items():
        if isinstance(content, bytes) and is_spec_file(path, content):
            read = tuple(sorted(set(_referenced_files(path, content)) & changed))
            if read:
                found[path] = read
    return found, contents


def _configuration_changed(repository: Repository, base: str, head: str | None, changed: set[str]) -> tuple[str, ...]:
    """The configuration files among the ``changed`` paths: every .gpuplan.yaml, and a pyproject.toml that
    names gpuplan on either side. Both sides of a diff are linted with one configuration, so a change to one
    is said, not diffed."""
    named = sorted(path for path in changed if posixpath.basename(path) == CONFIG_FILE)
    projects = [path for path in changed if posixpath.basename(path) == "pyproject.toml"]
    if projects:
        sides = (repository.read(base, projects), repository.read(head, projects))
        named += [
            path
            for path in projects
            if any(isinstance(content := side[path], bytes) and b"gpuplan" in content for side in sides)
        ]
    return tuple(sorted(named))


def _yaml_named(change: Change) -> bool:
    return any(has_spec_suffix(path) for path in (change.old_path, change.new_path) if path)


def _hook_checks(path: str | None, content: Content) -> bool:
    """Whether the pre-commit hook would check this side: a spec by name and content, or a file it cannot read
    (which it reports as GP009)."""
    if path is None or content is None:
        return False
    return isinstance(content, Unreadable) or is_spec_file(path, content)


# What loading reports when bytes cannot be read as YAML at all: too large, not UTF-8, no YAML, empty.
_NOT_YAML = frozenset({"GP001", "GP003", "GP005", "GP006"})


def _spec_side(path: str | None, content: Content) -> bytes | Unreadable | None:
    """The side of a spec change (one the hook checks on one side at least) that is linted, or None where
    the spec is absent. A side that is YAML of another kind (a Kubernetes manifest, a CI file) counts as
    absent: a manifest turned into a spec is an added spec, not a manifest with a hundred findings resolved.
    A side that cannot be read as YAML at all (too large, binary, a syntax error, unreadable) cannot be
    told from a broken spec, so it is linted and its finding (GP003, GP005, GP001, GP009) is that side's."""
    if path is None or content is None or isinstance(content, Unreadable) or is_spec_file(path, content):
        return content
    if not has_spec_suffix(path):
        return None
    loaded = load_bytes(path, content)
    return content if any(finding.code in _NOT_YAML for finding in loaded.findings) else None


def _side(display: str, content: bytes | Unreadable, folder: Path | None, linting: _Linting) -> SpecSide:
    """Lint the spec ``display``: a file as named (``folder`` None), or a repository path found in ``folder``
    (the work tree, or a scratch folder for a revision), where its relative paths (model.config) resolve."""
    location = Path(display) if folder is None else folder / display
    if isinstance(content, Unreadable):  # lint reads it again and reports why it cannot (GP009), never blocking
        result = lint_path(str(location), linting.options)
    else:
        result = lint_bytes(str(location), content, linting.options)
    return side_from_result(display, _relabelled(result, display, folder), linting.fail_on)


def _revision_side(
    repository: Repository, commit: str, path: str, raw: bytes | Unreadable, linting: _Linting
) -> SpecSide:
    """Lint a spec as stored in ``commit``: files it refers to (model.config) are read from the same commit."""
    references = sorted(set(_referenced_files(path, raw))) if isinstance(raw, bytes) else []
    if not references:
        return _side(path, raw, repository.root, linting)
    blobs = repository.read(commit, references)
    with tempfile.TemporaryDirectory(prefix="gpuplan-diff-") as scratch:
        for reference, content in blobs.items():
            if isinstance(content, bytes):
                target = Path(scratch, reference)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
        return _side(path, raw, Path(scratch), linting)


def _referenced_files(path: str, raw: bytes) -> Iterator[str]:
    """Repository paths of the local config.json files a spec names (``model.config``, tenants' too)."""
    if len(raw) > SPEC_MAX_BYTES:  # linting reports it as too large (GP003) and reads nothing it names
        return
    folder = posixpath.dirname(path)
    for value in model_config_names(load_bytes(path, raw).data):
        if posixpath.isabs(value):
            continue
        joined = posixpath.normpath(posixpath.join(folder, value))
        if joined != ".." and not joined.startswith("../"):
            yield joined


def _relabelled(result: LintResult, display: str, folder: Path | None) -> LintResult:
    """Findings named by the spec's path in the repository, not the folder it was linted from (a scratch
    folder for a revision's spec): in their file and in their messages ('cannot read my config.json')."""
    prefix = None if folder is None else f"{folder}{os.sep}"  # absolute: it never matches inside other text

    def message(text: str) -> str:
        return text if prefix is None else text.replace(prefix, "")

    findings = tuple(replace(f, file=display, message=message(f.message)) for f in result.findings)
    return replace(result, path=display, findings=findings)


__all__ = ["DiffOptions", "SpecChange", "diff_files", "diff_git"]
