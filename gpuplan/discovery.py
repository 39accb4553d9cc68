"""Which files ``gpuplan lint PATHS`` checks: given files always, spec-looking YAML files in directories."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpuplan.reading import ReadRefused, read_head
from gpuplan.records import record

SPEC_SUFFIXES = (".yaml", ".yml")
_SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".nox"})
# A spec has a top-level `model:` and a `finetune:` or `serve:` section; other YAML (CI files,
# Kubernetes manifests, pre-commit configs) in the same repository is left alone.
_BOM = b"\xef\xbb\xbf"


@record
class _Keys:
    """How a style of YAML document sets out its top-level keys: the model, a job, the spec's marks, any key."""

    model: re.Pattern[bytes]
    job: re.Pattern[bytes]
    marks: tuple[re.Pattern[bytes], ...]
    any: re.Pattern[bytes]

    @classmethod
    def of(cls, key: bytes) -> _Keys:
        def compiled(name: bytes) -> re.Pattern[bytes]:
            return re.compile(key % name, re.MULTILINE)

        marks = (compiled(rb"version"), compiled(rb"name"))
        return cls(compiled(rb"model"), compiled(rb"(?:finetune|serve)"), marks, compiled(rb"([A-Za-z_][\w-]*)"))


# Block style: a key at the start of a line, quoted or not (`model:`, `"model":`). Flow style (a document that is one
# `{...}` mapping, as JSON is): a key after the brace or a comma.
_BLOCK = _Keys.of(rb"""^["']?%s["']?\s*:""")
_FLOW = _Keys.of(rb"""(?<=[{,])\s*["']?%s["']?\s*:""")


_HEAD_BYTES = 256 * 1024  # the keys sit at the top of a spec; a long comment block stays well inside this


def looks_like_spec(path: Path) -> bool:
    """Whether a regular file starts like a spec; FIFOs, devices and unreadable files do not (nothing blocks)."""
    try:
        head = read_head(path, _HEAD_BYTES)
    except ReadRefused:
        return False
    return content_looks_like_spec(head)


def content_looks_like_spec(content: bytes) -> bool:
    """The hook's test on a file's bytes (also applied to git objects by ``gpuplan diff --git``): a top-level
    `model:` and `finetune:` or `serve:`; or, beside `version:` and `name:`, one of them and a key that lint's
    "did you mean" would take for the other (`modle:`, `Serve:`), so that a typo is reported, not skipped."""
    # as the loader reads it: a UTF-8 byte order mark first, and any line ending (CR alone too) ends a line
    head = content[:_HEAD_BYTES].removeprefix(_BOM).replace(b"\r", b"\n")
    keys_of = _FLOW if _starts_a_flow_mapping(head) else _BLOCK
    model, job = keys_of.model.search(head), keys_of.job.search(head)
    if model and job:
        return True
    if not (model or job) or not all(mark.search(head) for mark in keys_of.marks):
        return False
    from gpuplan.validate import closest_name  # only for a file with a spec's other keys

    wanted = ["finetune", "serve"] if model else ["model"]
    keys = (key.decode("ascii") for key in keys_of.any.findall(head))
    return any(closest_name(key, wanted) for key in keys if key not in ("version", "name", "model"))


def _starts_a_flow_mapping(head: bytes) -> bool:
    """Whether the document is one flow mapping: its first character, past blank and comment lines, is `{`."""
    for line in head.splitlines():
        text = line.strip()
        if text and not text.startswith(b"#"):
            return text.startswith(b"{")
    return False


def is_spec_file(name: str, content: bytes) -> bool:
    """Whether the pre-commit hook would check this file: a YAML name and spec-looking content."""
    return has_spec_suffix(name) and content_looks_like_spec(content)


def has_spec_suffix(name: str) -> bool:
    """A YAML file's name in any case (`.yaml`, `.YML`): pre-commit's `types: [yaml]` passes both to the hook."""
    return name.lower().endswith(SPEC_SUFFIXES)


def discover(paths: list[str], *, only_specs: bool = False) -> Iterator[str]:
    """Each path to lint, in a stable order; '-' stands for standard input.

    Named files are always linted unless ``only_specs`` (the pre-commit hook, which is handed every
    staged YAML file) asks to skip files that do not look like specs.
    """
    for given in paths:
        path = Path(given)
        if given == "-" or not path.is_dir():
            if not only_specs or given == "-" or not path.is_file() or looks_like_spec(path):
                yield given
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(name for name in dirs if name not in _SKIPPED_DIRS and not name.startswith("."))
            for name in sorted(files):
                candidate = Path(root) / name
                if has_spec_suffix(name) and looks_like_spec(candidate):
                    yield str(candidate)


def model_config_names(data: Any) -> Iterator[str]:
    """The ``model.config`` file names a spec's data holds (the job's model, tenants' too), as written."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "model" and isinstance(value, dict) and isinstance(value.get("config"), str):
                yield value["config"]
            yield from model_config_names(value)
    elif isinstance(data, list):
        for item in data:
            yield from model_config_names(item)
