"""Race-prone scenarios, one or more per key question of the design card (1–7).

Each is small on purpose: the explorer's cost grows with the number of switch
points, and each scenario isolates one question.

Every question comes twice. ``pipeline/<name>`` drives a pipeline of two
adapters (:mod:`.pipeline`), as a deployment does: a *sender* (``stage_id`` 0)
that gets the saves and cancels, and a *receiver* (``stage_id`` 1, reading
stage 0) that gets the loads, polls and cleanups; chunk ``n`` of ``r`` has key
``r_0_n``, and the scheduler thread and both adapters' SAVE and RECV threads
take part. ``pipeline/three-stage`` adds a middle adapter that receives and
re-sends the same request ids. The plain ``<name>`` is the *loopback* form:
one adapter whose receiver reads its own stage (``stage_id`` 1, keys
``r_1_n``), as the explorer first ran them. It has three threads instead of
five, so bounded DFS stays small (``q5-cleanup-inflight-get`` completes at
preemption bound 2 in a few thousand executions), and schedules recorded
against these names keep replaying. The verify stage runs every
``pipeline/...`` scenario and the loopback ``q5-cleanup-inflight-get``
(:data:`VERIFY`).
"""

from __future__ import annotations

from dataclasses import replace

from .scenario import (
    Scenario,
    cancel,
    cleanup,
    fail_build,
    fail_put,
    load,
    poll,
    relay,
    save,
    settle,
    stop,
)

__all__ = ["LIBRARY", "PROVE", "VERIFY", "scenario"]

_ALL = [
    Scenario(
        "q1-save-snapshot-enqueue",
        (load("a"), save("a", [1], False), save("a", [1, 2], True)),
        question="1: save_async only snapshots and enqueues; the build runs on the SAVE thread",
    ),
    Scenario(
        "q2-id-advances-on-put",
        (load("b"), fail_put("b_1_0"), save("b", 0), save("b", 1), save("b", 2, True)),
        question="2: the chunk id advances only after a successful put (chunk 0 fails once)",
        options={"put_tries": 2},
    ),
    Scenario(
        "q3-none-and-cancelled-final",
        (load("c"), save("c", None), save("c", 1), cancel("c"), save("c", 2, True)),
        question="3: a None payload is skipped; a cancelled stream's final carries None",
    ),
    Scenario(
        "q3-build-failure",
        (load("d"), fail_build("d"), save("d", 0), save("d", 1, True)),
        question="3: a failed build drops a non-final chunk; ids stay contiguous",
    ),
    Scenario(
        "q4-receiver-finished",
        (load("r"), save("r", 0), save("r", 1, True), poll(), poll(), load("r")),
        question="4: next key per request; no polling after the final; poll_ready drains",
    ),
    Scenario(
        "q5-cleanup-inflight-get",
        (save("r", "old"), settle(), load("r"), cleanup("r"), load("r")),
        question="5: a get in flight while cleanup_receiver + load_async run: the token check",
        consume_on_get=False,
        options={"idle_backoff": 0.01},
    ),
    Scenario(
        "q5-cleanup-inflight-get-live",
        (load("r"), save("r", "old"), cleanup("r"), load("r")),
        question="5: as above, with the SAVE thread putting while the race runs",
        consume_on_get=False,
        options={"idle_backoff": 0.01},
    ),
    Scenario(
        "q5-cleanup-inflight-get-consuming",
        (save("r", "old", True), load("r"), cleanup("r"), load("r")),
        question="5: as above, with a consuming get and a final chunk",
    ),
    Scenario(
        "q5-cleanup-inflight-get-2",
        (load("r"), save("r", "old", True), cleanup("r"), load("r"), save("r", "new", True)),
        question="5: as above, with a second stream on the same request id",
        consume_on_get=False,
    ),
    Scenario(
        "q5-cleanup-inflight-get-beside",
        (load("a"), load("r"), cleanup("r"), load("r"), save("r", "new", True), save("a", 1, True)),
        question="5: as above, with another request registered beside it: a token read "
        "before the RECV thread's other gets is stale by its own get",
        latency=0.001,  # calls take time: the round's other gets overlap the cleanup
    ),
    Scenario(
        "q5-cleanup-inflight-get-event",
        (load("r"), save("r", "old"), cleanup("r"), load("r"), save("r", "new", True)),
        question="5: as above, with event-driven receive (put notifications, awaited keys)",
        consume_on_get=False,
        notify=True,
    ),
    Scenario(
        "q6-idle-event-driven",
        (load("a"), load("b"), settle(), save("b", 1, True)),
        question="6: as q6-idle-polling, event-driven: a put for one request wakes the RECV thread",
        notify=True,
        # Idle past the reference's 0.5 s re-poll: a wait that spins once its deadline
        # has passed then shows as a livelock (found by the mutation run, docs/quality.md).
        idle=0.75,
    ),
    Scenario(
        "q6-idle-polling",
        (load("a"), load("b"), settle(), save("b", 1, True)),
        question="6: requests polling with no data, then data for one of them only",
        options={"idle_backoff": 0.01},
    ),
    Scenario(
        "q7-stop-wakes-save",
        (save("s", 1, True), stop()),
        question="7: stop() right after a save: the SAVE thread must wake, never hang",
    ),
    Scenario(
        "q7-stop-idle",
        (load("t"), settle(), stop()),
        question="7: stop() while both threads wait",
        options={"idle_backoff": 0.01},
    ),
    Scenario(
        "q7-stop-event-driven",
        (load("e"), save("e", 1, True), stop()),
        question="7: stop() with event-driven receive (connector offers subscribe)",
        notify=True,
    ),
    Scenario(
        "two-requests",
        (load("a"), load("b"), save("a", 0), save("b", 0), cancel("a"), save("a", 1, True)),
        question="several requests at once: no request waits behind another",
        options={"idle_backoff": 0.01},
    ),
]


def _as_pipeline(loop: Scenario) -> Scenario:
    """The loopback scenario on a sender (stage 0) and a receiver (stage 1, reading 0)."""
    ops = tuple(
        replace(op, key=op.key.replace("_1_", "_0_")) if op.key is not None else op
        for op in loop.ops
    )
    return replace(loop, name=f"pipeline/{loop.name}", ops=ops, topology="pipeline", stage_id=0)


_LOOPBACKS = [replace(s, topology="loopback", stage_id=1) for s in _ALL]
_PIPELINES = [_as_pipeline(s) for s in _LOOPBACKS] + [
    Scenario(
        "pipeline/three-stage",
        (
            load("m", on="middle"),
            load("m"),
            save("m", "x"),
            save("m", "y", True),
            settle(),
            relay(),
        ),
        question="a middle stage receives and re-sends the same request ids to a third",
        options={"idle_backoff": 0.01},
        topology="three-stage",
    ),
]

LIBRARY: dict[str, Scenario] = {s.name: s for s in _LOOPBACKS + _PIPELINES}
"""Every scenario by name: the loopback forms, then the ``pipeline/`` ones."""

VERIFY: tuple[str, ...] = (*(s.name for s in _PIPELINES), "q5-cleanup-inflight-get")
"""What ``chunk-adapter verify`` explores: every pipeline scenario, and one loopback."""


PROVE: tuple[str, ...] = (
    "q7-stop-idle",
    "q6-idle-polling",
    "q6-idle-event-driven",
    "q7-stop-wakes-save",
    "q3-build-failure",
)
"""What ``chunk-adapter verify`` tries to prove (every trace, :class:`ProofStrategy`) after
its seeded runs, when the profile asks for it (``Profile.proofs``) and the time allows:
the loopback scenarios measured to prove on the reference adapter within
``proofs.PROOF_SECONDS`` (60 s) on a loaded 2-core machine, the cheapest first
(``benchmarks/dpor.py --part 4``; ``tests/explore/test_dpor.py::test_each_prove_scenario_proves``).
``q7-stop-event-driven``, ``q1-save-snapshot-enqueue``, ``q2-id-advances-on-put`` and
``q3-none-and-cancelled-final`` were here and do not finish within 60 s."""


def scenario(name: str) -> Scenario:
    """The library scenario called *name* (errors list the names there are)."""
    try:
        return LIBRARY[name]
    except KeyError:
        raise KeyError(
            f"no scenario {name!r} in the explorer's library; choose one of {sorted(LIBRARY)}"
        ) from None
