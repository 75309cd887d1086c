"""Hypothesis strategies for scenarios and schedules, so failures shrink.

    @given(scenario=scenarios(), choices=schedules())
    def test_contract(scenario, choices):
        explore(scenario, DrawnStrategy(choices)).raise_if_failed()

A schedule is a list of small ints read by :class:`~.strategies.DrawnStrategy`
(0 = keep the running thread). Hypothesis shrinks a failing pair towards fewer
ops and fewer, earlier preemptions. Imports Hypothesis, so it is only for tests.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from .scenario import (
    Op,
    Scenario,
    cancel,
    cleanup,
    fail_build,
    fail_get,
    fail_put,
    load,
    poll,
    save,
    settle,
)

__all__ = ["scenarios", "schedules"]


def schedules(
    max_choices: int = 40, max_pick: int = 3, max_preemptions: int = 6
) -> st.SearchStrategy[list[int]]:
    """Choice lists for :class:`~.strategies.DrawnStrategy`, drawn as a few sparse
    ``(choice point, alternative)`` pairs: most choices keep the running thread, a
    few switch, anywhere in the first *max_choices* choice points. Shrinking removes
    pairs and moves them earlier: towards the fewest preemptions that still fail."""
    pairs = st.lists(
        st.tuples(st.integers(0, max_choices - 1), st.integers(1, max_pick)),
        max_size=max_preemptions,
    )
    return pairs.map(_dense)


def _dense(pairs: list[tuple[int, int]]) -> list[int]:
    if not pairs:
        return []
    choices = [0] * (max(pos for pos, _ in pairs) + 1)
    for pos, pick in pairs:
        choices[pos] = pick
    return choices


def _ops(rids: tuple[str, ...], stage_id: int) -> st.SearchStrategy[Op]:
    rid = st.sampled_from(rids)
    key = st.builds(lambda r, n: f"{r}_{stage_id}_{n}", rid, st.integers(0, 2))
    return st.one_of(
        st.builds(save, rid, st.one_of(st.none(), st.integers(0, 9)), st.booleans()),
        st.builds(load, rid),
        st.builds(cleanup, rid),
        st.builds(cancel, rid),
        st.just(poll()),
        st.just(settle()),
        st.builds(fail_put, key, st.integers(1, 2)),
        st.builds(fail_get, key, st.just(1)),
        st.builds(fail_build, rid, st.just(1)),
    )


@st.composite
def scenarios(
    draw: Any,
    request_ids: tuple[str, ...] = ("a", "b"),
    max_ops: int = 6,
    topology: str = "loopback",
) -> Scenario:
    """Short scripts over *request_ids* that a well-behaved scheduler could issue.

    The one usage rule of the contract is kept: a request that was cancelled
    gets its final chunk saved (appended at the end if the script has none).
    ``topology`` as for :class:`Scenario` (``"loopback"``: one adapter, stage 1,
    three threads, the cheapest to shrink; ``"pipeline"``: sender stage 0 and
    receiver stage 1, five threads).
    """
    stage = 1 if topology == "loopback" else 0
    ops: list[Op] = draw(st.lists(_ops(request_ids, stage), min_size=1, max_size=max_ops))
    open_cancel: set[str] = set()
    for op in ops:
        if op.kind == "cancel" and op.request_id is not None:
            open_cancel.add(op.request_id)
        elif op.kind == "save" and op.final and op.request_id in open_cancel:
            open_cancel.discard(op.request_id)
    ops += [save(rid, "end", True) for rid in sorted(open_cancel)]
    consume = draw(st.booleans())
    return Scenario(
        "generated",
        tuple(ops),
        consume_on_get=consume,
        options={"idle_backoff": 0.01, "put_tries": 2},
        topology=topology,
        stage_id=stage,
    )
