"""R17 by count in generated worlds (``chunk_adapter.explore.engine.behind``).

A receiver that keeps serving the registration that made progress, draining one stream
before it polls the next, makes the others wait behind it; a get costs no virtual
time, so the clock of ``latency`` never sees the wait, the count does. The seeded
receiver below is found by the long-haul worlds; the reference passes the same worlds
(the count stays far under the bound there: docs/quality.md has the calibration on
every correct adapter of the catalogue).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors.base import chunk_key
from chunk_adapter.explore.engine import execution
from chunk_adapter.explore.engine.behind import ALLOWANCE, BEHIND, PAUSE, behind_failures
from chunk_adapter.explore.engine.simulate import Simulation, simulate
from chunk_adapter.explore.scenarios.pipeline import Hop
from chunk_adapter.explore.scenarios.scenario import Scenario
from chunk_adapter.history import ConnectorOp
from chunk_adapter.rules import R17
from tests.unit._history_script import Script

pytestmark = pytest.mark.rule("R17")


class DrainsWhileReady(ChunkAdapter):
    """Polls a registration again at once while it makes progress: a stream with a
    backlog is drained before any other registration is polled."""

    def _poll_one(self, request_id: str, token: object, key: str, chunk_id: int) -> bool:
        progress = made = super()._poll_one(request_id, token, key, chunk_id)
        while progress and not self._stop.is_set():
            with self._recv_lock:
                if not self._queue or self._queue[-1] != (request_id, token):
                    return made  # its final: not queued again
                self._queue.pop()  # the entry the commit queued at the tail
                chunk_id = self._next_recv_id[request_id]
            key = chunk_key(request_id, self.src_stage_id, chunk_id)
            progress = super()._poll_one(request_id, token, key, chunk_id)
        return made


WORLD = Scenario("world", (), liveness=2.0, latency=0.001)
HOP = (Hop("adapter", "adapter", 1),)


def _waiting(
    others: int, *, ident: int = 0, cleaned: bool = False, failed: bool = False, tick: float = 0.001
) -> Script:
    """``b`` registered with its chunk 0 put; then *others* chunks of ``a`` put and got
    (by the thread *ident*; ``b``'s get is thread 0's), ``b`` cleaned up and registered
    again first if *cleaned*, and only then ``b``'s chunk 0 asked for (a get of it failed
    before it was put, if *failed*). Each record's begin and end take *tick* virtual
    seconds each (gets that take time)."""
    s = Script()
    ticks = itertools.count()
    s.h.clock = lambda: next(ticks) * tick
    s.load("a")
    s.load("b")
    if failed:
        b = s.h.tick()
        s.h.append(ConnectorOp("get", "b_1_0", None, "error", "InjectedFault()", b, b, "recv"))
    s.put("b_1_0", "b0")
    for n in range(others):
        s.put(f"a_1_{n}", f"a{n}")
        s.get(f"a_1_{n}", {"data": f"a{n}", "finished": False}, ident=ident)
        if cleaned and n == others // 2:
            s.cleanup("b")
            s.load("b")
    s.get("b_1_0", {"data": "b0", "finished": False})
    return s


def _got(message: str) -> int:
    return int(message.split("first got ", 1)[1].split(" ", 1)[0])


def test_more_than_a_round_of_another_requests_chunks_before_a_due_one_is_r17() -> None:
    found = behind_failures(_waiting(3 * BEHIND).h, WORLD, HOP)
    assert [f.rules for f in found] == [(R17,)], found
    assert "chunks of 'a'" in found[0].message, found[0].message
    # the gets of the first ALLOWANCE (4 ticks of 1 ms a chunk) are not counted
    assert BEHIND < _got(found[0].message) < 3 * BEHIND, found[0].message


def test_what_a_round_may_fetch_first_is_no_wait() -> None:
    assert behind_failures(_waiting(BEHIND).h, WORLD, HOP) == []


def test_gets_within_the_allowance_do_not_count() -> None:
    # a registration's own pause: the clock has not moved ALLOWANCE past the due moment
    still = ALLOWANCE * PAUSE / (4 * 3 * BEHIND + 10)
    assert behind_failures(_waiting(3 * BEHIND, tick=still).h, WORLD, HOP) == []


def test_another_threads_gets_are_the_schedulers_doing_not_a_wait() -> None:
    assert behind_failures(_waiting(3 * BEHIND, ident=7).h, WORLD, HOP) == []


def test_after_a_failed_get_the_receiver_may_back_off() -> None:
    assert behind_failures(_waiting(3 * BEHIND, failed=True).h, WORLD, HOP) == []


def test_a_window_a_cleanup_crosses_is_not_judged() -> None:
    assert behind_failures(_waiting(3 * BEHIND, cleaned=True).h, WORLD, HOP) == []


@pytest.mark.parametrize(
    "world",
    [
        Scenario("scripted", (), latency=0.001),  # not judged in time
        Scenario("free gets", (), liveness=2.0),  # the clock stands still while a backlog drains
        # a pause of 50 ms a registration: the whole backlog (0.25 s) is within ten of them
        Scenario("slow pace", (), liveness=2.0, latency=0.001, options={"idle_backoff": 0.05}),
    ],
    ids=lambda w: w.name,
)
def test_worlds_the_count_does_not_judge(world: Scenario) -> None:
    assert behind_failures(_waiting(3 * BEHIND).h, world, HOP) == []


def _long_haul(factory: Any, seed: int) -> Simulation:
    """One world of the main sample, then 60 long-haul worlds (streams of up to 120)."""
    return simulate(
        factory, examples=1, long_haul_share=60, deadline=time.monotonic() + 240, seed=seed
    )


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_receiver_draining_one_stream_before_the_next_is_found_by_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the clock's judge off: a backlog a late registration meets can also outlast
    # its 0.25 s; this is about the count alone
    monkeypatch.setattr(execution, "latency_failures", lambda *args: [])
    sim = _long_haul(DrainsWhileReady, seed=1)
    assert sim.found is not None, "the long-haul worlds missed a receiver draining one stream"
    message = sim.found.execution.failures[0].message
    assert message.startswith("R17:") and "waited behind another" in message, message
    assert _got(message) > BEHIND, message


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_reference_adapter_passes_the_same_worlds() -> None:
    sim = _long_haul(ChunkAdapter, seed=0)
    assert sim.found is None, sim.found.execution.failures[0].message if sim.found else ""
    assert sim.long_haul >= 30, sim.long_haul  # the worlds ran, not a deadline
