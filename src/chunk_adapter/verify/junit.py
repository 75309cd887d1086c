"""The verify report as JUnit XML, for CI systems that keep test history."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from .._version import __version__
from .report import VerifyReport

__all__ = ["write_junit"]


def write_junit(report: VerifyReport, path: str) -> None:
    """One test case per check; a violation is a ``<failure>``, inconclusive an ``<error>``.

    The suite's ``<properties>`` carry the adapter, profile, seed, budget,
    verdict and tool version, so a CI history can tell runs apart.
    """
    suite = ET.Element(
        "testsuite",
        name=f"chunk-adapter verify {report.adapter_spec}",
        tests=str(len(report.results)),
        failures=str(len(report.failures)),
        errors=str(len(report.inconclusive)),
        skipped=str(sum(r.verdict == "skip" for r in report.results)),
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
    ):
        ET.SubElement(properties, "property", name=name, value=value)
    for result in report.results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"chunk_adapter.verify.{result.stage}",
            name=result.name,
            time=f"{result.seconds:.3f}",
        )
        if result.verdict == "fail":
            failure = ET.SubElement(
                case,
                "failure",
                type=result.rules[0] if result.rules else "violation",
                message=result.evidence[:500],
            )
            failure.text = "\n".join(
                part for part in (result.evidence, result.detail, result.replay or "") if part
            )
        elif result.verdict == "inconclusive":
            error = ET.SubElement(case, "error", type="inconclusive", message=result.evidence[:500])
            error.text = "\n".join(part for part in (result.evidence, result.coverage) if part)
        elif result.verdict == "skip":
            ET.SubElement(case, "skipped", message=result.evidence[:500])
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(path, encoding="unicode")
