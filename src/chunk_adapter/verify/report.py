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
    def inconclusive(self) -> list[CheckResult]:
        """The checks that could not decide (budget, uncontrolled threads, no reproduction)."""
        return [r for r in self.results if r.verdict == "inconclusive"]

    @property
    def verdict(self) -> str:
        """``violation``, ``inconclusive`` or ``pass``."""
        if self.failures:
            return "violation"
        return "inconclusive" if self.inconclusive else "pass"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

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
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "rules": [
                {"rule": rule, "verdict": verdict, "checks": checks}
                for rule, verdict, checks in rule_checks(self.results, self.planned)
            ],
            "groups": [group.to_json() for group in self.groups],
            "checks": [r.to_json() for r in self.results],
        }


def _clip(text: str, width: int) -> str:
    """*text* cut to *width* at a separator ("; " or ", "), never inside a name."""
    if len(text) <= width:
        return text
    cut = max(text.rfind("; ", 0, width - 6), text.rfind(", ", 0, width - 6))
    if cut <= 0:
        cut = text.rfind(" ", 0, width - 6)
    return (text[:cut] if cut > 0 else text[: width - 6]) + " (...)"


def write_text(report: VerifyReport, out: TextIO) -> None:
    print(
        f"\nchunk-adapter verify --adapter {report.adapter_spec} --profile {report.profile} "
        f"--seed {report.seed}   ({report.seconds:.1f} s, stages: {', '.join(report.stages_run)})",
        file=out,
    )
    print(f"\n  {'rule':<5} {'verdict':<12} evidence", file=out)
    for rule, verdict, evidence in rule_table(report.results, report.planned):
        print(f"  {rule:<5} {verdict:<12} {_clip(evidence, 90)}", file=out)
    for result in report.failures:
        if not result.rules:  # the adapter raised where the contract lets no call raise
            text = f"{result.stage}/{result.name}: {result.evidence[:80]}"
            print(f"  {'-':<5} {'FAIL':<12} {text}", file=out)
    pairs = report.first_of_groups()
    for index, (group, result) in enumerate(pairs, 1):
        rules = ", ".join(result.rules) or "no rule"
        print(f"\nVIOLATION in {result.stage}/{result.name} ({rules})", file=out)
        print(f"  {result.evidence}", file=out)
        if len(pairs) > 1 or len(group.checks) > 1:
            print(f"  root cause {index} of {len(pairs)}: {group.rule or 'no rule'} — "
                  f"{group.cause}", file=out)  # fmt: skip
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
    if report.failures:
        verdict = (
            f"VIOLATION: {len(report.failures)} confirmed contract violation(s), "
            f"{len(pairs)} root cause(s) (exit 1)"
        )
        if not report.run_all:
            verdict += "; --all runs every check after a violation and lists every root cause"
    elif report.inconclusive:
        verdict = (
            f"INCONCLUSIVE: no violation confirmed, but {len(report.inconclusive)} check(s) "
            "could not decide (exit 3); see above for what to do"
        )
    else:
        verdict = "PASS: the adapter kept the contract as far as this budget explored"
    print(f"\n{verdict}", file=out)


def write_json(report: VerifyReport, path: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        json.dump(report.to_json(), out, indent=2, default=repr)
        out.write("\n")
