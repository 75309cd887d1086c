"""One ``Finding`` from every driver (chunk_adapter.finding): each native record gives its
rules (root first), kind, one-line message, evidence and reproducer, and a stage's result
is built from it by ``CheckResult.of_finding``."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from chunk_adapter.bed.waiting import Hang
from chunk_adapter.confirm import same_failure
from chunk_adapter.errors import InvalidValue
from chunk_adapter.examples import ExampleOutcome
from chunk_adapter.explore import ExplorationFailed, explore
from chunk_adapter.explore.runtime.tasks import Failure, as_failure, shown
from chunk_adapter.explore.scenarios.library import LIBRARY
from chunk_adapter.explore.strategies import DporStrategy
from chunk_adapter.finding import Finding, first_line, kinds_of, rules_of
from chunk_adapter.oracles import ContractViolation, Violation
from chunk_adapter.outcome import CheckResult
from chunk_adapter.rules import R4, R9, R11, R12, R14, R15, R16, R18, R22
from chunk_adapter.stateful.budget import FailingExample, finding_of
from chunk_adapter.stateful.minimize import shown as stateful_shown
from chunk_adapter.stress.report import ORACLE, StressFailure, StressReport
from chunk_adapter.verify import probes
from tests.quality import broken_explore

# -- the type ------------------------------------------------------------------


def test_a_message_is_one_line_and_the_error_names_the_value() -> None:
    with pytest.raises(InvalidValue, match=r"one line.*'a\\nb'"):
        Finding((R9,), message="a\nb")


def test_rules_are_a_tuple_of_names() -> None:
    with pytest.raises(InvalidValue, match=r"tuple of rule names.*\['R9'\]"):
        Finding(["R9"])  # type: ignore[arg-type]


def test_the_root_and_what_a_run_of_findings_names() -> None:
    run = (Finding((R9, R4), "violation"), Finding(kind="deadlock"), Finding((R4,)))
    assert Finding((R16, R12)).root == R16 and Finding().root == ""
    assert rules_of(run) == (R9, R4)
    assert kinds_of(run) == ("violation", "deadlock")
    assert first_line("one\ntwo") == "one" and first_line("") == ""


# -- the contract layer: a violation, the exception that carries them ----------------


def test_a_violation_gives_its_rules_and_its_text() -> None:
    finding = Violation(R15, "drained twice", "rid", also=(R14,)).finding
    assert finding == Finding((R15, R14), "", "R15: drained twice [request 'rid']")


def test_a_contract_violation_gives_its_root_first_and_its_whole_text() -> None:
    error = ContractViolation([Violation(R9, "id 2 after 0", at=3), Violation(R11, "no final")])
    finding = error.finding
    assert finding.rules == (R9, R11)
    assert finding.message == "R9: id 2 after 0"  # the root cause, not the summary line
    assert finding.evidence == str(error) and "R11: no final" in finding.evidence
    assert ContractViolation.of(R16, "a get after cleanup").finding.message == (
        "R16: a get after cleanup"
    )


# -- the test bed: a hang ------------------------------------------------------


def test_a_hang_gives_its_rules_and_whether_a_call_or_a_wait_ran_out() -> None:
    call = Hang("stop()", 1.0, call=True, rules=(R18,)).finding
    assert (call.rules, call.kind, call.message) == (
        (R18,), "hang", "R18: stop() did not return within 1 s",
    )  # fmt: skip
    wait = Hang("the final chunk of 'v'", 10.0, call=False).finding
    assert (wait.rules, wait.kind) == ((), "timeout")  # the caller names the rule, if any


# -- the examples stage and its probes ------------------------------------------


def failing_example() -> ExampleOutcome:
    outcome = ExampleOutcome("Example 2", (R4, R15), lines=["keys put: ['v_0_0']"])
    outcome.expect(False, R4, "'v' received ['a', 'b'] twice", also=(R15,))
    return outcome


def test_an_example_gives_the_rules_it_found_broken_and_what_it_printed() -> None:
    finding = failing_example().finding
    assert finding == Finding(
        (R4, R15), "", "R4: 'v' received ['a', 'b'] twice", "keys put: ['v_0_0']"
    )
    assert ExampleOutcome("Example 3", (R11,)).finding is None  # it held


def test_a_probe_failure_is_a_finding_of_its_check() -> None:
    ran = probes._example_check(lambda factory: failing_example())(None)  # type: ignore[arg-type]
    (finding,) = probes._shown("example 2", ran)
    assert (finding.rules, finding.kind, finding.message) == (
        (R4, R15), "example 2", "R4: 'v' received ['a', 'b'] twice",
    )  # fmt: skip
    # a failure that names no rule (the adapter raised) is the same as the check failing again
    raised = probes._found("example 2", "the adapter raised ValueError()", (), "")
    assert same_failure(raised, (finding,))
    assert probes._shown("example 2", ("pass", "held", (R4,), "")) == ()


# -- stress ----------------------------------------------------------------------


def stress_report() -> StressReport:
    report = StressReport("put_faults", {"seed": 7})
    report.add("R9: id 2 after 0", ORACLE, 3, rule=R9)
    report.fail("stats", "counted 3, recorded 2")
    report.fail(R22, "the SAVE thread died")  # a root fault: first
    return report


def test_a_stress_report_keeps_one_finding_per_failure_root_first() -> None:
    report = stress_report()
    assert [(f.rules, f.kind) for f in report.findings] == [
        ((R22,), ""), ((R9,), ""), ((), "stats"),
    ]  # fmt: skip
    assert report.failures[0] == "R22: the SAVE thread died"
    assert report.rules == [R22, R9, "stats"] and report.contract_rules == (R22, R9)
    assert len(report.contract_findings()) == 2


def test_a_stress_scenario_gives_its_finding_with_the_replay() -> None:
    report = stress_report()
    finding = report.finding("pkg.mod:factory", reproducer="chunk-adapter replay stress:x")
    assert finding is not None
    assert (finding.rules, finding.message, finding.reproducer) == (
        (R22, R9), "R22: the SAVE thread died", "chunk-adapter replay stress:x",
    )  # fmt: skip
    assert finding.evidence == report.describe("pkg.mod:factory")
    default = report.finding("pkg.mod:factory")
    assert default is not None and default.reproducer == report.python_call("pkg.mod:factory")
    notes = StressReport("s", {"seed": 1})
    notes.fail("stats", "counted 1, recorded 0")
    assert notes.finding() is None  # a counter note is not the contract


def test_a_stress_failure_carries_the_finding() -> None:
    with pytest.raises(StressFailure) as raised:
        stress_report().raise_if_failed("pkg.mod:factory")
    assert raised.value.finding.rules == (R22, R9)
    assert raised.value.finding.evidence == str(raised.value)
    again: Any = pickle.loads(pickle.dumps(raised.value))
    assert again.finding == raised.value.finding


# -- the state machines -----------------------------------------------------------


def test_a_failing_example_gives_its_rules_type_and_blob() -> None:
    error = ContractViolation([Violation(R14, "delivered twice")])
    finding = FailingExample(error, "AXicY2A", 3, 0.5).finding
    assert finding.rules == (R14,) and finding.message == "R14: delivered twice"
    assert finding.kind.endswith(".ContractViolation") and finding.reproducer == "AXicY2A"
    raised = finding_of(RuntimeError("boom\nat line 3"))
    assert (raised.rules, raised.kind, raised.message) == ((), "builtins.RuntimeError", "boom")
    assert stateful_shown(None) == ()


# -- the explorer -----------------------------------------------------------------


def test_an_explorer_failure_gives_its_rules_kind_and_first_line() -> None:
    failure = Failure("violation", "R16: a get after cleanup\ntrace...", (R16, R12))
    assert failure.finding == Finding(
        (R16, R12), "violation", "R16: a get after cleanup", failure.message
    )
    # confirming compares each failure by its signature: a violation's root rule alone
    assert shown([failure, Failure("deadlock", "no thread can run")]) == (
        Finding((R16,), "violation", "R16: a get after cleanup", failure.message),
        Finding((), "deadlock", "no thread can run", "no thread can run"),
    )
    assert shown([as_failure("R9: from a user's checker")])[0].rules == ("R9",)


def test_an_exploration_gives_its_finding_with_the_schedule() -> None:
    report = explore(
        LIBRARY["q7-stop-wakes-save"],
        DporStrategy(),
        factory=broken_explore.LostWakeup,
        time_budget=60.0,
    )
    finding = report.finding
    assert finding is not None and report.failure is not None
    assert (finding.rules, finding.kind) == ((R18,), "hang")  # the kind's rule
    assert finding.message.startswith("[hang] ")
    assert finding.reproducer == report.failure.schedule
    assert finding.evidence == report.describe_failure()
    with pytest.raises(ExplorationFailed) as raised:
        report.raise_if_failed()
    assert raised.value.finding == finding and str(raised.value) == finding.evidence


# -- the result every stage builds from it ---------------------------------------


def test_a_result_is_built_from_a_finding() -> None:
    finding = Finding((R9, R4), "violation", "R9: id 2 after 0", "the trace", "replay me")
    result = CheckResult.of_finding(
        "explore", "q2 / pct", "fail", finding, seconds=1.5, confirmation="replayed", coverage="3"
    )
    assert result == CheckResult(
        "explore", "q2 / pct", (R9, R4), "fail", "R9: id 2 after 0",
        detail="the trace", replay="replay me", seconds=1.5, confirmation="replayed",
        coverage="3",
    )  # fmt: skip
    worded = CheckResult.of_finding(
        "explore", "q2 / pct", "inconclusive", finding, evidence="did not reproduce", rules=()
    )
    assert (worded.rules, worded.evidence, worded.detail) == ((), "did not reproduce", "the trace")
