"""The one confirmation procedure every stage uses (chunk_adapter.confirm): when a finding
becomes a red, and what "the same failure" means."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from chunk_adapter.confirm import PASSED, Run, confirm, same_failure
from chunk_adapter.finding import Finding
from chunk_adapter.rules import R5, R11, R16, R23

FOUND = Finding((R11, R23), message="R11: the final was never put")


def failed(*rules: str, kind: str = "") -> Run:
    """A run that showed one finding breaking *rules* (of *kind*)."""
    return (Finding(rules, kind),)


def runs(*seen: Run | None) -> Callable[[], Run | None]:
    """A re-run that shows *seen* in turn (and fails the test if called once more)."""
    it: Iterator[Run | None] = iter(seen)
    return lambda: next(it)


@pytest.mark.parametrize(
    ("again", "same"),
    [
        (failed(R11), True),  # the root again, alone
        (failed(R23, R11), True),  # the root among other symptoms
        ((Finding((R23,)), Finding((R11,))), True),  # the root as a finding of its own
        (failed(R23), False),  # a symptom of the finding, not its root
        (failed(R5), False),
        (PASSED, False),
        (None, False),
    ],
)
def test_the_same_failure_is_the_root_rule_broken_again(again: Run | None, same: bool) -> None:
    assert same_failure(FOUND, again) is same


def test_a_failure_without_a_rule_is_the_same_when_of_the_same_kind() -> None:
    deadlock = Finding(kind="deadlock")
    assert same_failure(deadlock, failed(kind="deadlock"))
    assert same_failure(deadlock, (Finding((R16,), "violation"), Finding(kind="deadlock")))
    assert not same_failure(deadlock, failed(kind="hang"))
    assert not same_failure(FOUND, failed(kind="violation"))  # a rule needs its rule
    assert not same_failure(Finding(), failed(R16))  # naming nothing, it matches nothing


def test_reproduced_and_passed_by_the_reference_is_a_red() -> None:
    judged = confirm(FOUND, runs(failed(R11)), runs(PASSED))
    assert (judged.verdict, judged.why, judged.reproduced, judged.reruns) == (
        "fail", "reproduced", 1, 1,
    )  # fmt: skip
    assert judged.reference_passed


def test_a_finding_seen_once_is_never_a_red() -> None:
    judged = confirm(FOUND, runs(failed(R23), PASSED), tries=2)
    assert (judged.verdict, judged.why, judged.reproduced, judged.reruns) == (
        "inconclusive", "not reproduced", 0, 2,
    )  # fmt: skip
    assert judged.again == PASSED  # the last re-run is what the evidence quotes


def test_no_rerun_within_the_budget_decides_nothing() -> None:
    judged = confirm(FOUND, runs(None), runs(PASSED))
    assert (judged.verdict, judged.why, judged.reruns) == ("inconclusive", "not re-run", 0)


def test_every_try_runs_so_the_count_says_how_often_it_reproduced() -> None:
    judged = confirm(FOUND, runs(PASSED, failed(R11), PASSED), tries=3)
    assert (judged.verdict, judged.reproduced, judged.reruns) == ("fail", 1, 3)
    assert judged.again == failed(R11)  # the re-run that showed it


def test_a_budget_that_ends_during_the_reruns_keeps_what_they_showed() -> None:
    judged = confirm(FOUND, runs(failed(R11), None), tries=3)
    assert (judged.verdict, judged.reproduced, judged.reruns) == ("fail", 1, 1)


@pytest.mark.parametrize("reference", [failed(R11), failed(R5), failed()])
def test_a_reference_failing_it_at_all_makes_it_inconclusive(reference: Run) -> None:
    judged = confirm(FOUND, runs(failed(R11)), runs(reference))
    assert (judged.verdict, judged.why, judged.reference) == (
        "inconclusive", "reference failed", reference,
    )  # fmt: skip


@pytest.mark.parametrize("reference", [None, "undecided"])
def test_without_a_reference_verdict_a_reproduced_finding_stands(reference: str | None) -> None:
    judged = confirm(FOUND, runs(failed(R11)), None if reference is None else runs(None))
    assert (judged.verdict, judged.reference_passed) == ("fail", False)


def test_the_reference_is_not_run_for_a_finding_that_did_not_reproduce() -> None:
    judged = confirm(FOUND, runs(PASSED), runs())  # runs(): calling it would raise
    assert judged.verdict == "inconclusive"


def test_tries_below_one_are_refused_naming_the_value() -> None:
    with pytest.raises(ValueError, match="tries must be 1 or more, got 0"):
        confirm(FOUND, runs(), tries=0)
