"""Rules travel as data from where a violation is found to the check's result; a rule
number that only appears in a message's text is not read back out of it."""

from __future__ import annotations

import chunk_adapter.oracles as oracles
import chunk_adapter.verify as verify
from chunk_adapter.explore import stage as explore_stage
from chunk_adapter.explore.tasks import Failure, as_failure
from chunk_adapter.oracles import ContractViolation, Violation
from chunk_adapter.stateful.budget import first_rules
from chunk_adapter.stress.report import NOTE, ORACLE, StressReport


def test_there_is_one_contract_violation_class() -> None:
    assert verify.ContractViolation is oracles.ContractViolation
    assert issubclass(ContractViolation, AssertionError)


def test_a_contract_violation_carries_its_violations_or_a_report() -> None:
    found = [Violation("R15", "handed out again (exactly once, R14)", also=("R14",))]
    exc = ContractViolation(found, "at step: x")
    assert exc.rules == ["R15"] and exc.report is None
    assert str(exc).splitlines()[0] == "contract rules broken: R15"
    assert str(exc).endswith("at step: x")
    report = object()
    exc = ContractViolation(found, message="m:f broke the contract", report=report)
    assert str(exc) == "m:f broke the contract" and exc.report is report
    assert exc.violations[0].rules == ("R15", "R14")


def test_a_violation_names_its_consequences_as_data() -> None:
    v = Violation("R15", "text", "rid", also=("R14",))
    assert v.rules == ("R15", "R14")
    assert str(v) == "R15: text [request 'rid']"  # the text is what it was


def test_the_explorer_takes_a_violations_rules_from_the_failure_not_its_message() -> None:
    failure = Failure("violation", "R16: a message that also mentions R5", ("R16",))
    assert explore_stage._rules([failure]) == ("R16",)
    # a plain string from a user's checker names no rule; the kind's rule stands in
    assert as_failure("R16: text").rules == ()
    assert explore_stage._rules([Failure("deadlock", "R16? no"), as_failure("R9: x")]) == ("R20",)
    assert explore_stage._signature(failure) == "R16"


def test_a_stress_report_keeps_each_failures_rule() -> None:
    report = StressReport("s", {"seed": 1})
    report.add("R9: id 2 after 0 (see R4)", ORACLE, 3, rule="R9")
    report.fail("error", "the scheduler thread's call raised R18-ish")
    report.add("stats: counted 3, recorded 2", NOTE, rule="stats")
    assert report.rules == ["error", "R9", "stats"]
    assert report.contract_rules == ("R9",)
    assert report.contract_failures() == report.failures[:2]


def test_the_machines_rules_come_from_the_exception_not_its_text() -> None:
    assert first_rules(ContractViolation([Violation("R4", "x"), Violation("R2", "y")])) == (
        "R4",
        "R2",
    )
    assert first_rules(AssertionError("R16: the adapter's own assertion")) == ()
