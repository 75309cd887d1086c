"""The one confirmation procedure every stage uses (chunk_adapter.confirm): when a finding
becomes a red, and what "the same failure" means."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from chunk_adapter.confirm import PASSED, Seen, confirm, same_failure
from chunk_adapter.rules import R5, R11, R16, R23

FOUND = Seen(True, (R11, R23), evidence="R11: the final was never put")


def runs(*seen: Seen | None) -> Callable[[], Seen | None]:
    """A re-run that shows *seen* in turn (and fails the test if called once more)."""
    it: Iterator[Seen | None] = iter(seen)
    return lambda: next(it)


@pytest.mark.parametrize(
    ("again", "same"),
    [
        (Seen(True, (R11,)), True),  # the root again, alone
        (Seen(True, (R23, R11)), True),  # the root among other symptoms
        (Seen(True, (R23,)), False),  # a symptom of the finding, not its root
        (Seen(True, (R5,)), False),
        (PASSED, False),
        (None, False),
    ],
)
def test_the_same_failure_is_the_root_rule_broken_again(again: Seen | None, same: bool) -> None:
    assert same_failure(FOUND, again) is same


def test_a_failure_without_a_rule_is_the_same_when_of_the_same_kind() -> None:
    deadlock = Seen(True, kinds=("deadlock",))
    assert same_failure(deadlock, Seen(True, kinds=("deadlock",)))
    assert same_failure(deadlock, Seen(True, (R16,), kinds=("violation", "deadlock")))
    assert not same_failure(deadlock, Seen(True, kinds=("hang",)))
    assert not same_failure(FOUND, Seen(True, kinds=("violation",)))  # a rule needs its rule


def test_reproduced_and_passed_by_the_reference_is_a_red() -> None:
    judged = confirm(FOUND, runs(Seen(True, (R11,))), runs(PASSED))
    assert (judged.verdict, judged.why, judged.reproduced, judged.reruns) == (
        "fail", "reproduced", 1, 1,
    )  # fmt: skip
    assert judged.reference_passed


def test_a_finding_seen_once_is_never_a_red() -> None:
    judged = confirm(FOUND, runs(Seen(True, (R23,)), PASSED), tries=2)
    assert (judged.verdict, judged.why, judged.reproduced, judged.reruns) == (
        "inconclusive", "not reproduced", 0, 2,
    )  # fmt: skip
    assert judged.again == PASSED  # the last re-run is what the evidence quotes


def test_no_rerun_within_the_budget_decides_nothing() -> None:
    judged = confirm(FOUND, runs(None), runs(PASSED))
    assert (judged.verdict, judged.why, judged.reruns) == ("inconclusive", "not re-run", 0)


def test_every_try_runs_so_the_count_says_how_often_it_reproduced() -> None:
    judged = confirm(FOUND, runs(PASSED, Seen(True, (R11,)), PASSED), tries=3)
    assert (judged.verdict, judged.reproduced, judged.reruns) == ("fail", 1, 3)
    assert judged.again == Seen(True, (R11,))  # the re-run that showed it


def test_a_budget_that_ends_during_the_reruns_keeps_what_they_showed() -> None:
    judged = confirm(FOUND, runs(Seen(True, (R11,)), None), tries=3)
    assert (judged.verdict, judged.reproduced, judged.reruns) == ("fail", 1, 1)


@pytest.mark.parametrize("reference", [Seen(True, (R11,)), Seen(True, (R5,)), Seen(True)])
def test_a_reference_failing_it_at_all_makes_it_inconclusive(reference: Seen) -> None:
    judged = confirm(FOUND, runs(Seen(True, (R11,))), runs(reference))
    assert (judged.verdict, judged.why, judged.reference) == (
        "inconclusive", "reference failed", reference,
    )  # fmt: skip


@pytest.mark.parametrize("reference", [None, "undecided"])
def test_without_a_reference_verdict_a_reproduced_finding_stands(reference: str | None) -> None:
    judged = confirm(FOUND, runs(Seen(True, (R11,))), None if reference is None else runs(None))
    assert (judged.verdict, judged.reference_passed) == ("fail", False)


def test_the_reference_is_not_run_for_a_finding_that_did_not_reproduce() -> None:
    judged = confirm(FOUND, runs(PASSED), runs())  # runs(): calling it would raise
    assert judged.verdict == "inconclusive"


def test_tries_below_one_are_refused_naming_the_value() -> None:
    with pytest.raises(ValueError, match="tries must be 1 or more, got 0"):
        confirm(FOUND, runs(), tries=0)
