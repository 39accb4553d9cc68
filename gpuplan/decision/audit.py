"""The decision record: what was reviewed, under which configuration, and who may sign it.

The content hash identifies what was reviewed independently of who signed: it is the SHA-256 of the
spec's data without its ``approvals`` section, written as canonical JSON (keys sorted, no insignificant
whitespace, UTF-8, a number that is a whole number written as an integer: 4.0 and 4 are one value, as
RFC 8785's canonical JSON writes them). Adding or changing signatures, comments, key order or YAML
formatting leaves it unchanged; any other value changes it. The raw file's SHA-256 is recorded beside it.
A YAML key that is not a string (``1:``, ``true:``, ``null:``: the schema rejects it, and a report of such a spec
says it cannot be approved) is written as JSON writes a key, its JSON text as a string (1, true, null), so that the
keys sort as strings do.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from gpuplan.errors import GpuplanError
from gpuplan.git import run_git
from gpuplan.records import record
from gpuplan.units import whole_number

CONTENT_HASH_DEFINITION = (
    "SHA-256 of the spec's data without its approvals section, as canonical JSON (keys sorted, no "
    "insignificant whitespace, UTF-8, whole numbers as integers): signatures, comments and formatting (4.0 for 4) "
    "do not change it; any other value does."
)
GIT_TIMEOUT_S = 5  # a local repository answers in milliseconds; a hung filesystem must not hang a report


def content_hash(data: Any) -> str | None:
    """The hash defined in CONTENT_HASH_DEFINITION, or None when the spec did not load."""
    if data is None:
        return None
    reviewed = {key: value for key, value in data.items() if key != "approvals"} if isinstance(data, dict) else data
    canonical = json.dumps(
        _numbers_as_values(reviewed), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _numbers_as_values(data: Any) -> Any:
    """``data`` with every integral float as the int it equals (``units.whole_number``), at any depth, and every
    key a string (a key that is not one as its JSON text)."""
    if isinstance(data, dict):
        return {_key_text(key): _numbers_as_values(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_numbers_as_values(value) for value in data]
    return whole_number(data)


def _key_text(key: Any) -> str:
    """A mapping key as canonical JSON writes it: a string as itself, any other scalar as its JSON text (json.dumps
    writes 1, true and null as the keys "1", "true" and "null"; sorting them beside strings would fail)."""
    return key if isinstance(key, str) else json.dumps(whole_number(key), ensure_ascii=False, default=str)


@record
class GitState:
    commit: str  # HEAD of the repository holding the spec
    path: str  # the spec's path inside the repository
    status: str  # "committed" | "modified since this commit" | "not committed"


def git_state(spec_path: Path) -> GitState | None:
    """The commit and repository path of ``spec_path``; None outside a repository or without ``git``."""
    folder = spec_path.resolve().parent

    def run(*args: str, where: Path = folder) -> str | None:
        try:
            done = run_git(list(args), where, check=False, timeout=GIT_TIMEOUT_S)
        except GpuplanError:
            return None
        return done.stdout.decode("utf-8", "surrogateescape") if done.returncode == 0 else None

    # One line each: the top folder (which may hold spaces) and the commit.
    found = run("rev-parse", "--show-toplevel", "HEAD")
    lines = found.splitlines() if found is not None else []
    if len(lines) != 2:
        return None
    top, commit = lines
    try:
        relative = spec_path.resolve().relative_to(Path(top).resolve()).as_posix()
    except ValueError:
        return None
    # The path is the top folder's: run where it is relative to (from a subfolder it would name nothing,
    # and every spec below the top would read "committed").
    status = run("status", "--porcelain=v1", "--", relative, where=Path(top))
    if status is None:
        return None
    code = status[:2]
    state = (
        "not committed" if code in ("??", "A ", "AM") else "modified since this commit" if code.strip() else "committed"
    )
    return GitState(commit, relative, state)


@record
class ConfigRecord:
    path: str | None  # None: no configuration file, the documented defaults
    sha256: str | None
    select: tuple[str, ...]
    ignore: tuple[str, ...]
    severities: tuple[tuple[str, str, str], ...]  # (code, default level, configured level)
    waivers: bool  # whether the spec's waivers were applied (False under --no-waivers)


def config_record(options: Any, spec_path: str) -> ConfigRecord:
    """What shaped a lint run (gpuplan.linter.LintOptions), with the configuration file's hash and its path
    relative to the spec's folder (the same on every machine that checks the repository out)."""
    from gpuplan.codes import CODES

    if options is None:
        return ConfigRecord(None, None, (), (), (), True)
    digest = shown = None
    if options.config_source:
        source = Path(options.config_source)
        try:
            digest = hashlib.sha256(source.read_bytes()).hexdigest()
        except OSError:
            digest = None
        relative = Path(os.path.relpath(source.resolve(), Path(spec_path).resolve().parent)).as_posix()
        shown = f"{relative} beside the spec" if "/" not in relative else relative
    relevelled = tuple(
        (code, CODES[code].severity.value, level.value)
        for code, level in sorted(options.severities.items())
        if code in CODES and CODES[code].severity is not level
    )
    return ConfigRecord(
        shown,
        digest,
        tuple(options.select),
        tuple(dict.fromkeys(options.ignore)),
        relevelled,
        options.use_waivers,
    )


@record
class Expiry:
    date: datetime.date
    basis: str  # why this date: the first price to go stale, a waiver's expiry, or the default validity


def approval_expiry(
    generated: datetime.date, price_dates: dict[str, datetime.date], waiver_expiries: dict[str, str], max_age_days: int
) -> Expiry:
    """The day the approval lapses: the earliest of a price going stale (older than ``max_age_days``, as
    GP504 judges), a waiver the verdict relies on expiring, or ``max_age_days`` after the report. When
    that day is already past, the approval holds on the report's own day only, and the basis says what
    has already lapsed (in the past tense: a signer must not read a date months ago as still to come)."""
    age = datetime.timedelta(days=max_age_days)
    # (the day, why it is the day while it is to come, what has lapsed and its remedy once it is past)
    candidates = [
        (generated + age, f"{max_age_days} days after this report, when its prices are due for a refresh", "")
    ]
    for gpu_id, quoted in sorted(price_dates.items()):
        old = (generated - quoted).days
        candidates.append(
            (
                quoted + age,
                f"the {gpu_id} price quoted {quoted} turns {max_age_days} days old",
                f"the {gpu_id} price quoted {quoted} is already {old} days old, past the {max_age_days}-day limit; "
                "refresh the quote to extend the approval",
            )
        )
    for code, expires in sorted(waiver_expiries.items()):
        try:
            day = datetime.date.fromisoformat(expires)
        except ValueError:
            continue
        candidates.append(
            (
                day,
                f"the waiver of {code} expires",
                f"the waiver of {code} expired on {day}; renew it to extend the approval",
            )
        )
    date, basis, lapsed = min(candidates)
    if date < generated:
        return Expiry(generated, f"the day of this report only: {lapsed}")
    return Expiry(date, basis)


def approved_data(data: Any, fragments: list[dict[str, Any]]) -> Any:
    """The spec's data with the required changes applied: each fragment (``{"serve": {"hardware": {...}}}``,
    the planner's, as the report tells the reader to paste it) merged into the data, mapping by mapping;
    a fragment's value replaces the data's wherever it is not itself a mapping."""

    def merged(base: Any, change: Any) -> Any:
        if not isinstance(base, dict) or not isinstance(change, dict):
            return change
        out = dict(base)
        for key, value in change.items():
            out[key] = merged(base.get(key), value)
        return out

    for fragment in fragments:
        data = merged(data, fragment)
    return data


@record
class WaiverEntry:
    """One of the spec's waivers as the decision record itemises it."""

    code: str  # the rule's code (the spec may name it by code or by name); the text given when unknown
    reason: str
    approver: str  # "" when the spec names none
    expires: str  # "" when the waiver never expires
    outcome: str  # "applied", "expired", "unmatched" or "off" (--no-waivers)
    applied: int = 0  # the findings it waived in this run

    @property
    def status(self) -> str:
        """What it did, in the decision record's words."""
        if self.outcome == "applied":
            return f"applied to {self.applied} finding{'s' if self.applied != 1 else ''}"
        return {"expired": "expired", "unmatched": "matches no finding"}.get(self.outcome, "not applied (--no-waivers)")


def waiver_entries(waivers: tuple[Any, ...], findings: tuple[Any, ...], applied: bool) -> tuple[WaiverEntry, ...]:
    """Every waiver of the spec (gpuplan.findings.Waiver) with what it did in this run."""
    from gpuplan.codes import lookup

    entries = []
    for waiver in waivers:
        entry = lookup(waiver.rule)
        code = entry.code if entry is not None else waiver.rule
        used = sum(1 for finding in findings if finding.waiver == waiver) if applied else 0
        if not applied:
            outcome = "off"
        elif used:
            outcome = "applied"
        elif any(f.code == "GP701" and waiver.rule in f.message for f in findings):
            outcome = "expired"
        else:
            outcome = "unmatched"
        entries.append(WaiverEntry(code, waiver.reason, waiver.approved_by, waiver.expires, outcome, used))
    return tuple(entries)
