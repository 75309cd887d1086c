"""Rules travel as data from where a violation is found to the check's result; a rule
number that only appears in a message's text is not read back out of it."""

from __future__ import annotations

import pickle
import threading
from typing import Any

import pytest

import chunk_adapter.oracles as oracles
import chunk_adapter.verify as verify
from chunk_adapter import ChunkAdapter
from chunk_adapter.bed.stack import SlowFactory
from chunk_adapter.bed.waiting import STOP_RULES, Hang, stopping
from chunk_adapter.examples import ExampleOutcome
from chunk_adapter.explore.engine.result import failure_rules
from chunk_adapter.explore.runtime.tasks import Failure, as_failure, signature
from chunk_adapter.oracles import ContractViolation, Violation
from chunk_adapter.stateful.budget import first_rules
from chunk_adapter.stress.report import NOTE, ORACLE, StressReport
from chunk_adapter.verify import probes
from chunk_adapter.verify.probes import _finding


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
    assert failure_rules([failure]) == ("R16",)
    # a plain string from a user's checker names no rule; the kind's rule stands in
    assert as_failure("R16: text").rules == ()
    assert failure_rules([Failure("deadlock", "R16? no"), as_failure("R9: x")]) == ("R20",)
    assert signature(failure) == "R16"


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


# -- the examples stage: probes and worked examples -----------------------------------------


def test_a_probes_violation_reports_its_rule_whatever_its_message_names() -> None:
    planned = ("R21",)
    silent = ContractViolation([Violation("R16", "x")], message="a chunk after the cleanup")
    assert _finding(silent, planned) == ("fail", "a chunk after the cleanup", ("R16",))
    other = ContractViolation([Violation("R16", "x")], message="R5: a message naming R5")
    assert _finding(other, planned)[2] == ("R16",)
    with_consequence = ContractViolation.of("R7", "a lock shared by adapters", also=("R17",))
    assert str(with_consequence) == "R7: a lock shared by adapters"
    assert _finding(with_consequence, planned)[2] == ("R7", "R17")
    # an assertion that carries no rule falls back on the check's plan, not on its text
    assert _finding(AssertionError("R5: the adapter's own assert"), planned)[2] == planned


def test_a_hang_reports_the_rules_it_carries_not_the_ones_its_text_names() -> None:
    wait = Hang("the put of R7_0_0 (see R5)", 1.0, call=False)
    assert str(wait) == "the put of R7_0_0 (see R5) did not happen within 1 s"
    assert _finding(wait, ("R21",)) == ("fail", str(wait), ("R23",))
    call = Hang("stop() (R18)", 1.0, call=True)  # no rules given: a call that hangs is R3
    assert _finding(call, ())[2] == ("R3",)
    named = Hang("the final chunk of 'v'", 10.0, call=False, rules=("R11",))
    assert str(named) == "R11: the final chunk of 'v' did not happen within 10 s"
    assert _finding(named, ("R4",))[2] == ("R11",)
    assert pickle.loads(pickle.dumps(named)).rules == ("R11",)
    slow = SlowFactory("the factory (sender)", 15.0)
    verdict, evidence, rules = _finding(slow, ("R21",))
    assert (verdict, rules) == ("inconclusive", ()), evidence
    assert evidence.startswith("the factory (sender) did not return within 15 s"), evidence


class _StopBlocks:
    """An adapter whose ``stop()`` blocks until :attr:`release` is set (a seeded bug)."""

    def __init__(self) -> None:
        # Set by the test when it is done; stop() waits on it.
        self.release = threading.Event()

    def stop(self) -> None:
        self.release.wait()


@pytest.mark.rule("R18")
def test_a_stop_that_does_not_return_carries_r18() -> None:
    adapter = _StopBlocks()
    try:
        with pytest.raises(Hang) as hung, stopping(adapter, seconds=0.05):
            pass
    finally:
        adapter.release.set()
    assert (hung.value.rules, hung.value.call) == (STOP_RULES, True)
    assert _finding(hung.value, ("R21",))[2] == ("R18",)


def test_an_examples_problems_report_their_rules_from_the_data() -> None:
    def example(factory: Any) -> ExampleOutcome:
        out = ExampleOutcome("an example", ("R4", "R9"))
        out.expect(True, "R4", "never recorded")
        out.expect(False, "R6", "a wrong outcome (the text names R5)", also=("R11",))
        out.expect(False, "R15", "handed out twice")
        return out

    verdict, evidence, rules, _ = probes._example_check(example)(None)  # type: ignore[arg-type]
    assert (verdict, rules) == ("fail", ("R6", "R11", "R15")), evidence
    assert evidence == "R6: a wrong outcome (the text names R5); R15: handed out twice"


def test_the_examples_stage_reports_a_probes_rule_from_the_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through ``run_probes``: a failure seen twice is confirmed under the rule it carries,
    whatever its message names."""

    def probe(factory: Any) -> None:
        raise ContractViolation([Violation("R16", "x")], message="handed out after R5's fence")

    def hangs(factory: Any) -> None:
        raise Hang("R9: chunk 3", 0.5, call=False)

    monkeypatch.setattr(probes, "EXAMPLES", ())
    monkeypatch.setattr(probes, "PROBES", (("fence", ("R12",), probe), ("wait", ("R4",), hangs)))
    results = list(probes.run_probes(ChunkAdapter, "replay", keep_going=True))
    assert [(r.name, r.verdict, r.rules) for r in results] == [
        ("fence", "fail", ("R16",)),
        ("wait", "fail", ("R23",)),
    ], results
    assert all(r.confirmation.startswith("ran the check again") for r in results), results
