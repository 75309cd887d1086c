"""A verify report, and writing it as the terminal table and JSON (JUnit: :mod:`.junit`).

Exit status, the same in every form (docs/verify.md, "Exit status"):
0 pass; 1 a confirmed contract violation; 2 usage (raised before a report
exists); 3 inconclusive — no violation confirmed, but some planned check could
not decide.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TextIO

from .._version import __version__
from ..outcome import PASTE_BEGIN, PASTE_END
from .baseline import Baseline, Entry, Judgement, Waiver, judge
from .groups import Group, group_findings
from .result import CheckResult, rule_checks, rule_table

__all__ = ["EXIT_CODES", "SCHEMA_VERSION", "VerifyReport", "write_json", "write_text"]

EXIT_CODES = {"pass": 0, "violation": 1, "usage": 2, "inconclusive": 3}
SCHEMA_VERSION = 1
"""Of the JSON report (``report.schema.json`` beside this module); bumped on any breaking change."""


@dataclass
class VerifyReport:
    adapter_spec: str
    profile: str
    seed: int
    max_seconds: float
    results: list[CheckResult] = field(default_factory=list)
    seconds: float = 0.0
    stages_run: list[str] = field(default_factory=list)
    run_all: bool = False  # verify --all: every check ran to the budget, after violations too
    planned: dict[str, list[str]] = field(default_factory=dict)
    """``"stage/check"`` -> the rules the check was planned to cover (the rule table's
    "not reached" for the rules a failing check did not get to)."""
    baseline: Baseline | None = None
    """The accepted root causes (``--baseline``, ``--accept``): a root cause it accepts is
    reported as accepted and does not make the verdict a violation (:mod:`.baseline`)."""
    accepted_seen: dict[str, int] = field(default_factory=dict)
    """Rule -> histories the workers' judge set aside as an accepted root cause."""
    reliability: bool = False
    """``verify --reliability``: R25, R30 and R31 were judged too (docs/verify.md)."""

    @property
    def failures(self) -> list[CheckResult]:
        """The confirmed violations."""
        return [r for r in self.results if r.verdict == "fail"]

    @property
    def groups(self) -> list[Group]:
        """The confirmed violations by root cause (:mod:`.groups`), in the order found."""
        return group_findings(self.results)

    def first_of_groups(self) -> list[tuple[Group, CheckResult]]:
        """Each root cause with the first finding of it (the one whose detail is shown)."""
        return [(group, group.findings[0]) for group in self.groups]

    @property
    def judgement(self) -> Judgement | None:
        """The root causes against the baseline (``None`` without one)."""
        if self.baseline is None:
            return None
        return judge(self.groups, self.baseline, self.accepted_seen)

    @property
    def new_groups(self) -> list[Group]:
        """The root causes no baseline entry or waiver accepts (all of them without one)."""
        judgement = self.judgement
        return self.groups if judgement is None else judgement.new

    @property
    def accepted_results(self) -> list[CheckResult]:
        """The confirmed violations of accepted root causes."""
        judgement = self.judgement
        return [] if judgement is None else [
            r for group, _ in judgement.accepted for r in group.findings
        ]  # fmt: skip

    @property
    def inconclusive(self) -> list[CheckResult]:
        """The checks that could not decide (budget, uncontrolled threads, no reproduction)."""
        return [r for r in self.results if r.verdict == "inconclusive"]

    @property
    def verdict(self) -> str:
        """``violation``, ``inconclusive`` or ``pass``."""
        if self.new_groups:
            return "violation"
        return "inconclusive" if self.inconclusive else "pass"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def _group_json(self, group: Group) -> dict[str, Any]:
        data = group.to_json()
        if self.baseline is not None:
            by = self.baseline.accepts(group)
            data["status"] = "new" if by is None else "accepted"
            if by is not None:
                data["accepted_by"] = "waiver" if isinstance(by, Waiver) else "baseline"
                data["reason"] = by.reason
        return data

    def _baseline_json(self) -> dict[str, Any] | None:
        judgement = self.judgement
        if self.baseline is None or judgement is None:
            return None
        return {
            "file": self.baseline.path or None,
            "accepted": judgement.accepted_count,
            "new": len(judgement.new),
            "stale": [
                {"rule": e.rule, "cause": e.cause, "reason": e.reason} for e in judgement.stale
            ],
            "set_aside": {e.signature: count for e, count in judgement.set_aside},
            "waivers": [{"rule": w.rule, "reason": w.reason} for w in self.baseline.waivers],
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "chunk-adapter", "version": __version__},
            "adapter": self.adapter_spec,
            "profile": self.profile,
            "seed": self.seed,
            "max_seconds": self.max_seconds,
            "seconds": round(self.seconds, 3),
            "stages": self.stages_run,
            "all": self.run_all,
            "reliability": self.reliability,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "rules": [
                {"rule": rule, "verdict": verdict, "checks": checks}
                for rule, verdict, checks in rule_checks(
                    self.results, self.planned, self.accepted_results
                )
            ],
            "groups": [self._group_json(group) for group in self.groups],
            "checks": [r.to_json() for r in self.results],
            "baseline": self._baseline_json(),
        }


def _clip(text: str, width: int) -> str:
    """*text* cut to *width* at a separator ("; " or ", "), never inside a name."""
    if len(text) <= width:
        return text
    cut = max(text.rfind("; ", 0, width - 6), text.rfind(", ", 0, width - 6))
    if cut <= 0:
        cut = text.rfind(" ", 0, width - 6)
    return (text[:cut] if cut > 0 else text[: width - 6]) + " (...)"


def _accepted_by(by: Entry | Waiver, baseline: Baseline) -> str:
    reason = by.reason or "no reason given yet: fill in its 'reason'"
    if isinstance(by, Waiver):
        return f"accepted: {by.rule} is waived ({reason})"
    return f"accepted by the baseline {baseline.path or '(given)'}: {reason}"


def write_text(report: VerifyReport, out: TextIO) -> None:
    print(
        f"\nchunk-adapter verify --adapter {report.adapter_spec} --profile {report.profile} "
        f"--seed {report.seed}{' --reliability' if report.reliability else ''}   "
        f"({report.seconds:.1f} s, stages: {', '.join(report.stages_run)})",
        file=out,
    )
    judgement = report.judgement
    known = report.accepted_results
    print(f"\n  {'rule':<5} {'verdict':<12} evidence", file=out)
    for rule, verdict, evidence in rule_table(report.results, report.planned, known):
        print(f"  {rule:<5} {verdict:<12} {_clip(evidence, 90)}", file=out)
    for result in report.failures:
        if not result.rules:  # the adapter raised where the contract lets no call raise
            text = f"{result.stage}/{result.name}: {result.evidence[:80]}"
            verdict = "accepted" if any(result is r for r in known) else "FAIL"
            print(f"  {'-':<5} {verdict:<12} {text}", file=out)
    pairs = report.first_of_groups()
    for index, (group, result) in enumerate(pairs, 1):
        rules = ", ".join(result.rules) or "no rule"
        by = report.baseline.accepts(group) if report.baseline else None
        if by is not None and report.baseline is not None:
            print(f"\nACCEPTED in {result.stage}/{result.name} ({rules})", file=out)
            print(f"  {result.evidence}", file=out)
            print(f"  root cause {index} of {len(pairs)}: {group.rule or 'no rule'} — "
                  f"{group.cause}", file=out)  # fmt: skip
            print(f"  {_accepted_by(by, report.baseline)}", file=out)
            if group.replay:
                print(f"  reproduce with: {group.replay}", file=out)
            continue
        print(f"\nVIOLATION in {result.stage}/{result.name} ({rules})", file=out)
        print(f"  {result.evidence}", file=out)
        if len(pairs) > 1 or len(group.checks) > 1:
            print(f"  root cause {index} of {len(pairs)}: {group.rule or 'no rule'} — "
                  f"{group.cause}", file=out)  # fmt: skip
        if judgement is not None:
            print("  new: no entry of the baseline accepts it", file=out)
        if len(group.checks) > 1:
            print(f"  also seen by: {', '.join(group.checks[1:])}", file=out)
        if result.confirmation:
            print(f"  confirmed: {result.confirmation}", file=out)
        detail = result.detail.rstrip().splitlines()
        if detail and detail[0].strip() == result.evidence.strip():
            detail = detail[1:]  # the evidence line, already printed just above
        pasting = False  # inside a file to paste: printed as it is, not indented
        for line in detail:
            if line.startswith(PASTE_BEGIN):
                pasting = True
            print(line if pasting else f"    {line}", file=out)
            if line == PASTE_END:
                pasting = False
        if result.replay:
            print(f"  reproduce with: {result.replay}", file=out)
    for result in report.inconclusive:
        print(f"\nINCONCLUSIVE in {result.stage}/{result.name}", file=out)
        print(f"  {result.evidence}", file=out)
        if result.coverage:
            print(f"  coverage: {result.coverage}", file=out)
    if judgement is not None and judgement.set_aside:
        print("\nACCEPTED, set aside by the judge while the checks searched on (histories):",
              file=out)  # fmt: skip
        for entry, count in judgement.set_aside:
            print(f"  {entry.title} ({count}); {entry.reason or 'no reason given yet'}",
                  file=out)  # fmt: skip
    if judgement is not None and judgement.stale:
        hedge = (" (some checks could not decide: not seen is no proof of a fix)"
                 if report.inconclusive else "")  # fmt: skip
        print(f"\nSTALE baseline entries: not seen in this run{hedge}; once their bugs are "
              f"fixed, delete them from {report.baseline.path if report.baseline else ''}:",
              file=out)  # fmt: skip
        for entry in judgement.stale:
            print(f"  {entry.title}{_found_by(entry.seen_by)}", file=out)
    known_note = ""
    accepted_count = judgement.accepted_count if judgement else 0
    if accepted_count:
        known_note = f"; {accepted_count} known root cause(s) accepted by the baseline"
    new = report.new_groups
    if new:
        verdict = (
            f"VIOLATION: {sum(len(g.findings) for g in new)} confirmed contract violation(s), "
            f"{len(new)} {'new ' if judgement is not None else ''}root cause(s) (exit 1)"
            + known_note
        )
        if not report.run_all:
            verdict += "; --all runs every check after a violation and lists every root cause"
    elif report.inconclusive:
        verdict = (
            f"INCONCLUSIVE: no {'new ' if judgement is not None else ''}violation confirmed, "
            f"but {len(report.inconclusive)} check(s) could not decide (exit 3); see above for "
            "what to do" + known_note
        )
    else:
        verdict = "PASS: the adapter kept the contract as far as this budget explored" + (
            f", but for {accepted_count} known root cause(s) the baseline accepts"
            if accepted_count else ""
        )  # fmt: skip
    print(f"\n{verdict}", file=out)


def write_json(report: VerifyReport, path: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        json.dump(report.to_json(), out, indent=2, default=repr)
        out.write("\n")


SEARCHES = ("simulate/", "explore/", "stateful/", "stress/")
"""Stages that search (seeded): another seed may not reach what one found."""


def _found_by(checks: tuple[str, ...]) -> str:
    """Where a stale entry was found when the file was written: a bug only a search found
    may just not have been reached by this run's seed."""
    if not checks:
        return ""
    shown = ", ".join(checks[:2]) + (f" (+{len(checks) - 2})" if len(checks) > 2 else "")
    if all(c.startswith(SEARCHES) for c in checks):
        return f" (found by a search only, {shown}: another seed may not reach it)"
    return f" (found by {shown})"
