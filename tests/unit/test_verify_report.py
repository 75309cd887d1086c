"""The verify report: one verdict and exit code per report, the same in text, JSON and JUnit."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from chunk_adapter.outcome import PASTE_BEGIN, PASTE_END, CheckResult
from chunk_adapter.verify.junit import write_junit
from chunk_adapter.verify.markdown import to_markdown
from chunk_adapter.verify.report import VerifyReport, write_json, write_text
from chunk_adapter.verify.result import rule_table

PASS = CheckResult("examples", "example 2", ("R4", "R9"), "pass", "held")
FAIL = CheckResult("stateful", "machines", ("R16", "R14"), "fail", "R16: stale value", replay="x")
UNDECIDED = CheckResult("explore", "q5", ("R16", "R4"), "inconclusive", "budget", coverage="3 of 9")


def report(*results: CheckResult) -> VerifyReport:
    return VerifyReport("pkg:make", "ci", 0, 150.0, results=list(results))


@pytest.mark.parametrize(
    ("results", "verdict", "code"),
    [
        ((PASS,), "pass", 0),
        ((PASS, UNDECIDED), "inconclusive", 3),
        ((PASS, UNDECIDED, FAIL), "violation", 1),
        ((FAIL,), "violation", 1),
    ],
)
def test_verdict_and_exit_code(results: tuple[CheckResult, ...], verdict: str, code: int) -> None:
    r = report(*results)
    assert (r.verdict, r.exit_code) == (verdict, code)
    assert r.to_json()["verdict"] == verdict and r.to_json()["exit_code"] == code


def test_rule_table_puts_fail_before_inconclusive_before_pass() -> None:
    table = {rule: verdict for rule, verdict, _ in rule_table([PASS, UNDECIDED, FAIL])}
    assert table["R16"] == "FAIL"
    assert table["R4"] == "inconclusive"
    assert table["R9"] == "pass"
    assert table["R1"] == "not checked"


def test_text_says_inconclusive_with_coverage_and_never_violation() -> None:
    out = io.StringIO()
    write_text(report(PASS, UNDECIDED), out)
    text = out.getvalue()
    assert "INCONCLUSIVE in explore/q5" in text and "coverage: 3 of 9" in text
    assert "VIOLATION" not in text
    assert "exit 3" in text


def test_junit_failure_type_is_the_root_rule_and_inconclusive_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    write_junit(report(PASS, UNDECIDED, FAIL), str(path))
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("failures"), suite.get("errors")) == ("1", "1")
    failure = suite.find("testcase[@name='machines']/failure")
    assert failure is not None and failure.get("type") == "R16"
    error = suite.find("testcase[@name='q5']/error")
    assert error is not None and error.get("type") == "inconclusive"


def test_json_round_trips_the_checks(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_json(report(PASS, FAIL), str(path))
    data = json.loads(path.read_text())
    assert [CheckResult.from_json(c) for c in data["checks"]] == [PASS, FAIL]


def test_json_output_validates_against_the_shipped_schema(tmp_path: Path) -> None:
    schema = json.loads(
        resources.files("chunk_adapter.verify").joinpath("report.schema.json").read_text()
    )
    jsonschema.Draft202012Validator.check_schema(schema)
    for results in ((PASS,), (PASS, UNDECIDED), (PASS, UNDECIDED, FAIL)):
        path = tmp_path / "r.json"
        write_json(report(*results), str(path))
        jsonschema.validate(json.loads(path.read_text()), schema)
    bad = report(PASS).to_json()
    bad["verdict"] = "ok"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_markdown_leads_with_the_verdict_and_gives_each_finding_its_reproducer() -> None:
    text = to_markdown(report(PASS, UNDECIDED, FAIL))
    assert "**VIOLATION**" in text.splitlines()[2]
    assert "### ❌ stateful/machines (R16, R14)" in text
    assert "```sh\nx\n```" in text
    assert "Coverage: 3 of 9" in text
    assert "| R16 | ❌ FAIL | stateful/machines |" in text
    assert "**INCONCLUSIVE**" in to_markdown(report(PASS, UNDECIDED)).splitlines()[2]


def test_the_text_table_cuts_long_evidence_between_names_not_inside_one() -> None:
    many = [
        CheckResult("explore", f"q{i}-cleanup-inflight-get / pct(seed=0)", ("R16",), "fail", "x")
        for i in range(5)
    ]
    out = io.StringIO()
    write_text(report(*many), out)
    row = next(line for line in out.getvalue().splitlines() if line.startswith("  R16 "))
    assert row.endswith("(...)"), row
    assert row.count("explore/") == row.count("/ pct(seed=0)"), row


def test_the_finding_line_is_printed_once() -> None:
    finding = CheckResult("stateful", "m", ("R9",), "fail", "R9: gap", detail="R9: gap\nsteps")
    out = io.StringIO()
    write_text(report(finding), out)
    assert out.getvalue().count("R9: gap") == 1, out.getvalue()


def test_a_file_to_paste_is_printed_unindented_between_its_markers() -> None:
    code = "def test_x() -> None:\n    assert True"
    finding = CheckResult(
        "stateful", "machines", ("R4",), "fail", "R4: copy",
        detail=f"R4: copy\nsteps:\n{PASTE_BEGIN}t.py -----\n{code}\n{PASTE_END}\nafter",
    )  # fmt: skip
    out = io.StringIO()
    write_text(report(finding), out)
    text = out.getvalue()
    assert f"\n{code}\n{PASTE_END}\n" in text, text
    assert "\n    steps:\n" in text and "\n    after\n" in text
