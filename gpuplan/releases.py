"""Release numbers as specs write them (``serve.engine_version``, ``finetune.bitsandbytes_version``): the one
parse, so that "0.6.4.post1", "0.10.1.dev101+g…" and "v0.8" compare as the releases they name."""

from __future__ import annotations

import re

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a release string ("0.6.4", "0.6.4.post1", "0.10.1.dev101+g…", "v0.8")."""
    match = _VERSION.match(text.strip())
    if match is None:
        raise ValueError(f"not a release number: {text!r}")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def version_text(version: tuple[int, int, int]) -> str:
    return ".".join(str(part) for part in version)
