"""Race-prone scenarios, one or more per key question of the design card (1–7).

Each is small on purpose: the explorer's cost grows with the number of switch
points, and each scenario isolates one question. The scheduler thread, the
SAVE thread and the RECV thread all take part in every one. Request ids are
short; the adapter's ``stage_id`` is 1, so chunk ``n`` of ``r`` has key
``r_1_n``.
"""

from __future__ import annotations

from .scenario import (
    Scenario,
    cancel,
    cleanup,
    fail_build,
    fail_put,
    load,
    poll,
    save,
    settle,
    stop,
)

__all__ = ["LIBRARY", "scenario"]

_ALL = [
    Scenario(
        "q1-save-snapshot-enqueue",
        (load("a"), save("a", [1], False), save("a", [1, 2], True)),
        question="1: save_async only snapshots and enqueues; the build runs on the SAVE thread",
    ),
    Scenario(
        "q2-id-advances-on-put",
        (load("b"), fail_put("b_1_0"), save("b", 0), save("b", 1), save("b", 2, True)),
        question="2: the chunk id advances only after a successful put",
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

LIBRARY: dict[str, Scenario] = {s.name: s for s in _ALL}


def scenario(name: str) -> Scenario:
    """The library scenario called *name* (errors list the names there are)."""
    try:
        return LIBRARY[name]
    except KeyError:
        raise KeyError(
            f"no scenario {name!r} in the explorer's library; choose one of {sorted(LIBRARY)}"
        ) from None
