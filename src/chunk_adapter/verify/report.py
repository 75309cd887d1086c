"""Writing a verify report: the terminal table, JSON and JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any, TextIO

from .result import CheckResult, rule_table

__all__ = ["VerifyReport", "write_json", "write_junit", "write_text"]


@dataclass
class VerifyReport:
    adapter_spec: str
    profile: str
    seed: int
    max_seconds: float
    results: list[CheckResult] = field(default_factory=list)
    seconds: float = 0.0
    stages_run: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.verdict == "fail"]

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "adapter": self.adapter_spec,
            "profile": self.profile,
            "seed": self.seed,
            "max_seconds": self.max_seconds,
            "seconds": round(self.seconds, 3),
            "stages": self.stages_run,
            "verdict": "violation" if self.failures else "pass",
            "rules": [
                {"rule": rule, "verdict": verdict, "evidence": evidence}
                for rule, verdict, evidence in rule_table(self.results)
            ],
            "checks": [r.to_json() for r in self.results],
        }


def write_text(report: VerifyReport, out: TextIO) -> None:
    print(
        f"\nchunk-adapter verify --adapter {report.adapter_spec} --profile {report.profile} "
        f"--seed {report.seed}   ({report.seconds:.1f} s, stages: {', '.join(report.stages_run)})",
        file=out,
    )
    print(f"\n  {'rule':<5} {'verdict':<12} evidence", file=out)
    for rule, verdict, evidence in rule_table(report.results):
        print(f"  {rule:<5} {verdict:<12} {evidence[:90]}", file=out)
    unruled = [r for r in report.failures if not r.rules]
    for result in unruled:
        print(
            f"  {'-':<5} {'FAIL':<12} {result.stage}/{result.name}: {result.evidence[:80]}",
            file=out,
        )
    for result in report.failures:
        print(
            f"\nVIOLATION in {result.stage}/{result.name} ({', '.join(result.rules) or 'no rule'})",
            file=out,
        )
        print(f"  {result.evidence}", file=out)
        if result.detail:
            for line in result.detail.rstrip().splitlines():
                print(f"    {line}", file=out)
        if result.replay:
            print(f"  reproduce with: {result.replay}", file=out)
    verdict = (
        f"VIOLATION: {len(report.failures)} failed check(s)"
        if report.failures
        else "PASS: the adapter kept the contract as far as this budget explored"
    )
    print(f"\n{verdict}", file=out)


def write_json(report: VerifyReport, path: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        json.dump(report.to_json(), out, indent=2, default=repr)
        out.write("\n")


def write_junit(report: VerifyReport, path: str) -> None:
    suite = ET.Element(
        "testsuite",
        name=f"chunk-adapter verify {report.adapter_spec}",
        tests=str(len(report.results)),
        failures=str(len(report.failures)),
        skipped=str(sum(r.verdict == "skip" for r in report.results)),
        time=f"{report.seconds:.3f}",
    )
    for result in report.results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"chunk_adapter.verify.{result.stage}",
            name=f"{result.name} [{', '.join(result.rules)}]",
            time=f"{result.seconds:.3f}",
        )
        if result.verdict == "fail":
            failure = ET.SubElement(case, "failure", message=result.evidence[:500])
            failure.text = "\n".join(
                part for part in (result.evidence, result.detail, result.replay or "") if part
            )
        elif result.verdict == "skip":
            ET.SubElement(case, "skipped", message=result.evidence[:500])
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(path, encoding="unicode")
