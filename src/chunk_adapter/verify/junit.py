"""The verify report as JUnit XML, for CI systems that keep test history."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from .._version import __version__
from .report import VerifyReport

__all__ = ["write_junit"]


def write_junit(report: VerifyReport, path: str) -> None:
    """One test case per check; a violation is a ``<failure>``, inconclusive an ``<error>``,
    a violation the baseline accepts ``<skipped>`` (with its evidence).

    The suite's ``<properties>`` carry the adapter, profile, seed, budget,
    verdict and tool version, so a CI history can tell runs apart, and the
    root causes (``root_cause.N``: rule, cause, the checks that saw it, the
    reproducer). A failure's message names its root cause.
    """
    groups = report.groups
    known = {id(result) for result in report.accepted_results}
    suite = ET.Element(
        "testsuite",
        name=f"chunk-adapter verify {report.adapter_spec}",
        tests=str(len(report.results)),
        failures=str(len(report.failures) - len(known)),
        errors=str(len(report.inconclusive)),
        skipped=str(sum(r.verdict == "skip" for r in report.results) + len(known)),
        time=f"{report.seconds:.3f}",
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("adapter", report.adapter_spec),
        ("profile", report.profile),
        ("seed", str(report.seed)),
        ("max_seconds", f"{report.max_seconds:g}"),
        ("verdict", report.verdict),
        ("exit_code", str(report.exit_code)),
        ("chunk_adapter_version", __version__),
        ("all", str(report.run_all).lower()),
        ("root_causes", str(len(groups))),
    ):
        ET.SubElement(properties, "property", name=name, value=value)
    cause_of: dict[int, str] = {}  # id(result) -> "root cause N of M: ..."
    for index, group in enumerate(groups, 1):
        by = report.baseline.accepts(group) if report.baseline else None
        value = (
            f"{group.rule or 'no rule'}: {group.cause} | seen by: {', '.join(group.checks)}"
            f" | reproduce with: {group.replay or '-'}"
            + (f" | accepted: {by.reason or 'no reason given'}" if by is not None else "")
        )
        ET.SubElement(properties, "property", name=f"root_cause.{index}", value=value)
        for finding in group.findings:
            cause_of[id(finding)] = (
                f"root cause {index} of {len(groups)}: {group.rule or 'no rule'} — {group.cause}"
            )
    for result in report.results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"chunk_adapter.verify.{result.stage}",
            name=result.name,
            time=f"{result.seconds:.3f}",
        )
        if id(result) in known:  # a root cause the baseline accepts: reported, not failed
            ET.SubElement(
                case, "skipped", message=f"accepted by the baseline: {result.evidence[:400]}"
            )
        elif result.verdict == "fail":
            failure = ET.SubElement(
                case,
                "failure",
                type=result.rules[0] if result.rules else "violation",
                message=result.evidence[:500],
            )
            failure.text = "\n".join(
                part
                for part in (cause_of.get(id(result), ""), result.evidence, result.detail,
                             result.replay or "")
                if part
            )  # fmt: skip
        elif result.verdict == "inconclusive":
            error = ET.SubElement(case, "error", type="inconclusive", message=result.evidence[:500])
            error.text = "\n".join(part for part in (result.evidence, result.coverage) if part)
        elif result.verdict == "skip":
            ET.SubElement(case, "skipped", message=result.evidence[:500])
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(path, encoding="unicode")
