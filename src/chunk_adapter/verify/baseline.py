"""Baselines: accept the root causes an adapter already has, fail only on new ones.

A team adopting the gate on an adapter that exists cannot fix every finding
before merging it. ``verify --write-baseline FILE`` records the root causes a
run found (:mod:`.groups`: root rule + cause) in a TOML file, each with an
empty ``reason`` for a human to fill in; ``verify --baseline FILE`` then
reports those as *accepted* (exit 0 if nothing else is wrong), fails on any
root cause the file does not name, and lists the entries it did not see as
*stale* (fixed, most likely: delete them, so the file only shrinks). A
*waiver* (``--accept R21=reason``, or ``[[waiver]]`` in the file) accepts
every root cause of one rule: a deliberate departure from the contract.

An entry matches a root cause by its **signature**: its rule (``"R16"``; a
root cause is its root rule, :mod:`.groups`), or for a finding that names no
rule, ``"no rule: <check>"``. So it survives seeds, line moves, and another
check or stage finding the same defect with other words. Both flags imply
``--all``: a baseline needs every root cause, not the first.

Version 1 files (which matched by the first check's message) are still read:
their entries of one rule fold into one (reasons and checks kept), and the next
``--write-baseline`` writes version 2.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w

from ..errors import UsageError
from ..outcome import RULES
from ..rules import RELIABLE
from ..rules import rule as rule_named
from .groups import Group, signature

if TYPE_CHECKING:
    from .report import VerifyReport

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

__all__ = [
    "Baseline",
    "Entry",
    "Judgement",
    "Waiver",
    "baseline_text",
    "judge",
    "load_baseline",
    "parse_waiver",
    "signature",
    "write_baseline",
]

VERSION = 2
"""Of the baseline file's format (:data:`READS`: the versions read; another is refused with
the fix)."""
READS = (1, 2)

HEADER = """\
# chunk-adapter verify baseline: root causes accepted for now.
# `chunk-adapter verify --baseline {name}` reports these as accepted and fails only on a
# root cause not listed here. Fill in each `reason`; delete an entry once verify reports it
# stale (its bug is fixed). Rewrite with --write-baseline (the reasons given are kept).
"""


@dataclass(frozen=True)
class Entry:
    """One accepted root cause: its rule and cause, and why it is accepted."""

    rule: str  # "" for a finding that names no rule (the adapter raised)
    cause: str  # the rule's name, for the reader; for no rule, the check that saw it
    reason: str = ""
    seen_by: tuple[str, ...] = ()  # "stage/check" that saw it when the file was written
    example: str = ""  # the first finding's evidence then, for the reader

    @property
    def signature(self) -> str:
        return signature(self.rule, self.cause)

    @property
    def title(self) -> str:
        """``"R16 — `cleanup_receiver` is a commit fence"``, as the reports name it."""
        return f"{self.rule or 'no rule'} — {self.cause}"


@dataclass(frozen=True)
class Waiver:
    """Every root cause of *rule* accepted: a deliberate departure from the contract."""

    rule: str
    reason: str


@dataclass
class Baseline:
    """The accepted root causes and the waived rules (a file's, plus ``--accept``)."""

    entries: list[Entry] = field(default_factory=list)
    waivers: list[Waiver] = field(default_factory=list)
    path: str = ""

    def accepts(self, group: Group) -> Entry | Waiver | None:
        """The entry (else the waiver) that accepts *group*; ``None`` when it is new.

        The entry of its root cause, else of another rule its findings name (one
        defect seen through several checks in one finding: which comes first varies)."""
        for key in (group.signature, *group.named):
            for entry in self.entries:
                if entry.signature == key:
                    return entry
        for waiver in self.waivers:
            if waiver.rule == group.rule:
                return waiver
        return None

    def accepted_json(self) -> dict[str, list[str]]:
        """What a verify worker's judge sets aside (``oracles.accepted``), as JSON."""
        rules = [e.rule for e in self.entries if e.rule] + [w.rule for w in self.waivers]
        return {"rules": list(dict.fromkeys(rules))}

    def with_waivers(self, waivers: Iterable[Waiver]) -> Baseline:
        return Baseline(list(self.entries), [*self.waivers, *waivers], self.path)


@dataclass
class Judgement:
    """A run's root causes against a baseline."""

    accepted: list[tuple[Group, Entry | Waiver]]
    new: list[Group]
    stale: list[Entry]  # entries no root cause of this run matched, nor set aside
    set_aside: list[tuple[Entry, int]]  # entries seen only by the workers' judge: histories

    @property
    def accepted_count(self) -> int:
        """Root causes accepted: found and accepted, or set aside by the workers' judge."""
        return len(self.accepted) + len(self.set_aside)


def judge(
    groups: Sequence[Group], baseline: Baseline, seen: Mapping[str, int] | None = None
) -> Judgement:
    """Sort *groups* into accepted and new. *seen*: rule -> histories the workers' judge
    set aside as accepted (``oracles.accepted``); an entry neither matched nor set aside
    is stale."""
    accepted: list[tuple[Group, Entry | Waiver]] = []
    new: list[Group] = []
    for group in groups:
        by = baseline.accepts(group)
        if by is None:
            new.append(group)
        else:
            accepted.append((group, by))
    found = {key for g in groups for key in (g.signature, *g.named)}
    seen = seen or {}
    stale = [e for e in baseline.entries if e.signature not in found and not seen.get(e.signature)]
    set_aside = [
        (e, seen[e.signature])
        for e in baseline.entries
        if e.signature not in found and seen.get(e.signature)
    ]
    return Judgement(accepted, new, stale, set_aside)


def _rule(value: object, where: str) -> str:
    if value == "" or (isinstance(value, str) and value in (*RULES, *RELIABLE)):
        return value
    raise UsageError(
        f"{where}: rule {value!r} is not a contract rule; use one of R1..R{len(RULES)} "
        '(docs/contract.md), or "" for a finding that names no rule'
    )


def parse_waiver(text: str) -> Waiver:
    """``"R21=ids are ints in our stack"`` (or ``"R21"``) as a :class:`Waiver` (``--accept``)."""
    rule, _, reason = text.partition("=")
    rule = rule.strip().upper()
    if not rule:
        raise UsageError(f"--accept {text!r}: give a rule, as --accept 'R21=why it is accepted'")
    return Waiver(_rule(rule, f"--accept {text!r}"), reason.strip() or "(no reason given)")


def _string(table: dict[str, Any], key: str, where: str, *, required: bool) -> str:
    value = table.get(key, "" if not required else None)
    if not isinstance(value, str):
        raise UsageError(f"{where}: {key!r} must be a string, got {value!r}")
    return value


def load_baseline(path: str) -> Baseline:
    """The baseline in the TOML file *path*; :class:`UsageError` naming what is wrong."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(
            f"baseline file {path!r} does not exist; write one with "
            f"chunk-adapter verify --write-baseline {path}"
        )
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"baseline file {path!r} is not valid TOML: {exc}") from None
    version = data.get("version")
    if version not in READS:
        raise UsageError(
            f"baseline file {path!r} has version {version!r}, this chunk-adapter reads "
            f"versions {', '.join(map(str, READS))}; rewrite it with --write-baseline {path}"
        )
    unknown = sorted(set(data) - {"version", "adapter", "accepted", "waiver"})
    if unknown:
        raise UsageError(
            f"baseline file {path!r}: unknown key(s) {unknown}; "
            "the file holds version, adapter, [[accepted]] and [[waiver]]"
        )
    entries = []
    for index, table in enumerate(data.get("accepted", []), 1):
        where = f"{path}: [[accepted]] entry {index}"
        if not isinstance(table, dict):
            raise UsageError(f"{where} is not a table")
        seen_by = table.get("seen_by", [])
        if not isinstance(seen_by, list) or not all(isinstance(s, str) for s in seen_by):
            raise UsageError(f"{where}: 'seen_by' must be a list of strings, got {seen_by!r}")
        rule = _rule(table.get("rule"), where)
        cause = _string(table, "cause", where, required=not rule)
        if rule:
            cause = rule_named(rule).name  # the file's text is for the reader
        elif version == 1 and seen_by:
            cause = seen_by[0]  # version 1 named a rule-less cause by its message
        entries.append(
            Entry(
                rule,
                cause,
                _string(table, "reason", where, required=False),
                tuple(seen_by),
                _string(table, "example", where, required=False),
            )
        )
    waivers = []
    for index, table in enumerate(data.get("waiver", []), 1):
        where = f"{path}: [[waiver]] {index}"
        if not isinstance(table, dict):
            raise UsageError(f"{where} is not a table")
        reason = _string(table, "reason", where, required=True).strip()
        if not reason:
            raise UsageError(f"{where}: a waiver accepts a whole rule; say why in 'reason'")
        waivers.append(Waiver(_rule(table.get("rule"), where), reason))
    return Baseline(_folded(entries), waivers, path)


def _folded(entries: list[Entry]) -> list[Entry]:
    """*entries* with those of one signature folded into the first: their reasons (each
    once) and the checks that saw them kept (a version 1 file has an entry per message)."""
    out: dict[str, Entry] = {}
    for entry in entries:
        first = out.get(entry.signature)
        if first is None:
            out[entry.signature] = entry
            continue
        reasons = [r for r in dict.fromkeys((first.reason, entry.reason)) if r]
        out[entry.signature] = Entry(
            first.rule, first.cause, "; ".join(reasons),
            tuple(dict.fromkeys((*first.seen_by, *entry.seen_by))), first.example,
        )  # fmt: skip
    return list(out.values())


def baseline_text(
    adapter: str,
    groups: Sequence[Group],
    previous: Baseline | None,
    name: str,
) -> str:
    """The baseline file accepting every root cause in *groups*, as TOML.

    The entries of *previous* (the file being rewritten) are kept, with their reasons,
    after those found now, and its waivers (with ``--accept``'s) as they are: a run
    that did not meet an entry (another seed, a budget) is no proof its bug is gone, so
    rewriting only adds; a stale entry is deleted by a human, as the report says.
    """
    before = {e.signature: e for e in previous.entries} if previous else {}
    accepted = []
    written: set[str] = set()
    for group in groups:
        key = group.signature
        if key in written:
            continue
        written.add(key)
        old = before.get(key)
        accepted.append({
            "rule": group.rule,
            "cause": group.cause,
            "reason": old.reason if old else "",
            "seen_by": list(dict.fromkeys((*group.checks, *(old.seen_by if old else ())))),
            "example": " ".join(group.evidence.split())[:300],
        })  # fmt: skip
    for entry in previous.entries if previous else ():
        if entry.signature not in written:
            written.add(entry.signature)
            accepted.append({
                "rule": entry.rule,
                "cause": entry.cause,
                "reason": entry.reason,
                "seen_by": list(entry.seen_by),
                "example": entry.example,
            })  # fmt: skip
    data: dict[str, Any] = {"version": VERSION, "adapter": adapter, "accepted": accepted}
    if previous and previous.waivers:
        data["waiver"] = [{"rule": w.rule, "reason": w.reason} for w in previous.waivers]
    return HEADER.format(name=name) + "\n" + tomli_w.dumps(data, multiline_strings=False)


def write_baseline(report: VerifyReport, path: str, previous: Baseline | None) -> Baseline:
    """Write *report*'s root causes to *path* (:func:`baseline_text`) and return the
    baseline the file now holds: every root cause the run found that the waivers do not
    already accept, and every entry the file held. So rewriting it with other seeds
    gathers the causes one defect shows through."""
    waivers = list(previous.waivers) if previous else []
    waived = {w.rule for w in waivers}
    groups = [g for g in report.groups if g.rule not in waived]
    text = baseline_text(report.adapter_spec, groups, previous, Path(path).name)
    Path(path).write_text(text, encoding="utf-8")
    return load_baseline(path)
