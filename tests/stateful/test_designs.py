"""The state machine judges every design the contract allows, not only one SAVE and one
RECV thread.

The contract orders work within a request (R5) and a registration (R13) only. Found
outside the repository (a third hold-out set, docs/quality.md): an adapter whose
requests run on a pool of SAVE workers and one with a follower task per registration
were failed by the machines (R13, "unexpected gets", exit 1) because the model let
nothing else happen while one call was held at a gate. Each row replays the steps
that failed them; a single-thread adapter (the reference) goes through the same steps.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from chunk_adapter.factory import REFERENCE, load_factory
from chunk_adapter.stateful import make_machine
from chunk_adapter.stateful.machine import ConformanceMachine


def _reregister(state: ConformanceMachine) -> None:
    # the follower of the new registration gets the key while the old one's get is held
    state.reregister_during_get(final=False, rid="a")


def _held_build_then_reregister(state: ConformanceMachine) -> None:
    # another request's chunk is built and put by a second worker while 'a' is held
    state.load(again=False, rid="a")
    state.save_held(at="build", final=False, kind="list", rid="a")
    state.reregister_during_get(final=False, rid="b_1")


def _held_get_then_others(state: ConformanceMachine) -> None:
    # a get held for 'a' while other requests are registered and saved to
    state.load(again=False, rid="c")
    state.hold_get(rid="c")
    state.load(again=False, rid="a")
    state.stream(rid="a", count=2, final=True, none_at=None, kind="list")
    state.release_recv()
    state.poll()


def _cancel_while_final_put_held(state: ConformanceMachine) -> None:
    # a final held in its put, then a cancel and the next stream's final: the cancel comes
    # after the final was saved, before the next stream (R27's usage rule forbids it), so
    # the machine skips it; the sixth hold-out set's mailbox keeps such a mark for the next
    # stream, the reference ends it with the held final (R6 read as either, not both)
    state.save_held(at="put", final=True, kind="list", rid="b_1")
    state.stream_with_cancel(cancel_at=0, count=0, kind="list", rid="b_1", twice=False)
    state.release_save()
    state.stream_with_cancel(cancel_at=2, count=0, kind="list", rid="b_1", twice=False)


STEPS: dict[str, Callable[[ConformanceMachine], None]] = {
    "reregister": _reregister,
    "held-build-then-reregister": _held_build_then_reregister,
    "held-get-then-others": _held_get_then_others,
    "cancel-while-final-put-held": _cancel_while_final_put_held,
}
DESIGNS = (
    REFERENCE,
    "tests.quality.correct.chain_pool:make",  # a chained job per request on a pool
    "tests.quality.correct.aio_followers:make",  # a follower task per registration
    "tests.quality.correct.pinned_pool:make",  # SAVE workers, requests pinned by hash
    "tests.quality.correct.sixth_pkg.mailbox:make",  # calls posted to owner threads
)


@pytest.mark.rule("R5", "R6", "R13", "R16")
@pytest.mark.parametrize("steps", list(STEPS), ids=list(STEPS))
@pytest.mark.parametrize("spec", DESIGNS, ids=[s.split(".")[-1] for s in DESIGNS])
def test_each_design_the_contract_allows_passes_the_machine(spec: str, steps: str) -> None:
    machine = make_machine(load_factory(spec), liveness_timeout=10.0, put_tries=3)
    state = machine()
    try:
        STEPS[steps](state)
    finally:
        state.teardown()


@pytest.mark.rule("R16")
def test_a_stale_commit_is_still_caught_beside_a_held_get() -> None:
    """The model learns that gets go on beside a held one; a stale get's value handed to
    the new registration is still R16."""
    machine = make_machine(
        load_factory("tests.quality.broken_stateful:missing_token_check"),
        liveness_timeout=10.0,
        put_tries=3,
    )
    state = machine()
    with pytest.raises(AssertionError, match=r"R1[346]"):
        try:
            _reregister(state)
        finally:
            state.teardown()
