"""Issue 12 point 4: a reused request id never receives a previous stream's chunks.

Before: ``cleanup_receiver`` of an unfinished registration left the rest of that
stream in the connector, and the next stream with the same id received
``[B0, B1, A2, A3, A4, A-final]`` on shared memory. With
``discard_leftovers=True`` the receiver drains the old stream's remaining keys
(its gets consume them) up to its final, and a new registration of the id reads
only keys the old stream has emptied until then (docs/connectors.md, "Stream
identity"). Default off: the contract (R12, R16) and the suite's model expect a
later registration to read what is stored.

Shared memory and Redis never overwrite an unconsumed key (``KeyOccupied``), so
the new stream is saved at once. Memory overwrites: the new stream is saved once
the old rest is discarded (``stats().draining == 0``), as the docs tell users to
do there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import MemoryConnector, RedisConnector, SharedMemoryConnector
from chunk_adapter.connectors.base import ConnectorWrapper
from chunk_adapter.errors import InvalidValue

BOUND = 30.0  # generous bound for anything to arrive; never expected to be reached
OLD = ["A0", "A1", "A2", "A3", "A4", "A-final"]
NEW = ["B0", "B1", "B2", "B3", "B-final"]


def _until(predicate: Callable[[], bool], what: str, timeout: float = BOUND) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.002)


class Receiver:
    """Collects what ``poll_ready`` hands out for one request id."""

    def __init__(self, adapter: ChunkAdapter, rid: str) -> None:
        self.adapter, self.rid, self.got = adapter, rid, []  # type: list[Any]

    def pump(self) -> list[Any]:
        for chunk in self.adapter.poll_ready().get(self.rid, []):
            self.got.append(chunk["data"])
        return self.got

    def until(self, count: int) -> list[Any]:
        _until(lambda: len(self.pump()) >= count, f"{count} chunks of {self.rid}")
        return self.got


def send(snd: ChunkAdapter, rid: str, datas: list[str]) -> None:
    for data in datas:
        snd.save_async(rid, data, data.endswith("final"))


def reuse_after_cleanup(conn: Any, *, discard: bool, overwrites: bool) -> list[Any]:
    """The issue's scenario: the receiver takes A0, A1 and cleans up; the sender
    finishes A and starts B under the same id; the receiver registers again."""
    snd = ChunkAdapter(conn, stage_id=0)
    rcv = ChunkAdapter(conn, stage_id=1, discard_leftovers=discard)
    try:
        rcv.load_async("r")
        send(snd, "r", OLD[:2])
        assert Receiver(rcv, "r").until(2) == OLD[:2]
        rcv.cleanup_receiver("r")
        rcv.load_async("r")  # at once: the new registration must not read A's rest
        send(snd, "r", OLD[2:])
        if overwrites and discard:  # memory overwrites: B after A's rest is gone
            _until(lambda: rcv.stats().draining == 0, "A's rest discarded")
        send(snd, "r", NEW)
        assert snd.flush(BOUND)
        new = Receiver(rcv, "r")
        _until(lambda: bool(new.pump()) and str(new.got[-1]).endswith("final"), "a final")
        if discard:
            assert rcv.stats().leftovers_discarded == len(OLD) - 2
        rcv.cleanup_receiver("r")
        return new.got
    finally:
        snd.stop()
        rcv.stop()


@pytest.fixture(params=["memory", "shm", "redis"])
def connector(request: pytest.FixtureRequest) -> Iterator[tuple[Any, bool]]:
    """A consuming connector, and whether its put overwrites an unconsumed value."""
    if request.param == "memory":
        yield MemoryConnector(consume_on_get=True), True
        return
    if request.param == "shm":
        conn: Any = SharedMemoryConnector(request.getfixturevalue("shm_namespace"))
        yield conn, False
    else:
        server = request.getfixturevalue("redis_server")
        conn = RedisConnector(url=server.url, prefix=request.getfixturevalue("redis_prefix"))
        yield conn, False
    conn.close()


@pytest.mark.rule("R29")
def test_a_reused_id_receives_only_its_own_stream(connector: tuple[Any, bool]) -> None:
    conn, overwrites = connector
    assert reuse_after_cleanup(conn, discard=True, overwrites=overwrites) == NEW
    if not overwrites:  # nothing of A or B left behind either
        stored = conn.segments() if isinstance(conn, SharedMemoryConnector) else conn.keys()
        assert stored == []


@pytest.mark.rule("R29")
def test_without_the_option_the_old_stream_leaks_into_the_new_one(shm_namespace: str) -> None:
    """The bug as measured (shm): proof that the scenario above bites."""
    with SharedMemoryConnector(shm_namespace) as conn:
        got = reuse_after_cleanup(conn, discard=False, overwrites=False)
        assert got == ["B0", "B1", "A2", "A3", "A4", "A-final"]
        conn.purge()  # B's rest, stuck behind A's leftovers


@pytest.mark.rule("R29")
def test_a_rest_that_never_comes_is_given_up_and_the_new_stream_flows() -> None:
    conn = MemoryConnector(consume_on_get=True)
    snd = ChunkAdapter(conn, stage_id=0)
    rcv = ChunkAdapter(conn, stage_id=1, discard_leftovers=True, leftover_timeout=0.2)
    try:
        rcv.load_async("r")
        send(snd, "r", ["A0"])
        assert Receiver(rcv, "r").until(1) == ["A0"]
        snd.stop()  # A's sender dies: nothing more of A comes; a new sender starts
        snd = ChunkAdapter(conn, stage_id=0)
        rcv.cleanup_receiver("r")
        rcv.load_async("r")
        assert rcv.stats().draining == 1
        _until(lambda: rcv.stats().leftovers_given_up == 1, "the drain to give up")
        assert rcv.stats().draining == 0
        send(snd, "r", NEW)
        assert Receiver(rcv, "r").until(len(NEW)) == NEW
        rcv.check_invariants()
    finally:
        snd.stop()
        rcv.stop()


class Blind(ConnectorWrapper):
    """Gets of ``key`` find nothing while ``blind`` is set (the value is not there yet)."""

    def __init__(self, inner: Any, key: str) -> None:
        super().__init__(inner)
        self.key = key
        self.blind = threading.Event()  # set by the test: key's value has "not arrived"

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        if key == self.key and self.blind.is_set():
            return None
        return self.inner.get(key)


@pytest.mark.rule("R29")
def test_two_abandoned_streams_of_one_id_are_drained_in_order() -> None:
    """A is abandoned after A0; B, registered while A's rest is still awaited, after
    B0; then C: it gets none of A's or B's chunks, though B's rest lands below A's."""
    memory = MemoryConnector(consume_on_get=True)
    conn = Blind(memory, "r_0_1")
    snd = ChunkAdapter(conn, stage_id=0)
    rcv = ChunkAdapter(conn, stage_id=1, discard_leftovers=True)
    try:
        rcv.load_async("r")
        send(snd, "r", ["A0"])
        assert Receiver(rcv, "r").until(1) == ["A0"]
        conn.blind.set()
        rcv.cleanup_receiver("r")  # A's drain waits at key 1
        rcv.load_async("r")  # B: may read key 0 only
        send(snd, "r", ["A1", "A-final", "B0"])
        assert Receiver(rcv, "r").until(1) == ["B0"]
        rcv.check_invariants()  # V5: B is held below A's drain
        rcv.cleanup_receiver("r")  # B abandoned at key 1: drained after A
        conn.blind.clear()
        _until(lambda: rcv.stats().leftovers_discarded == 2, "A's rest discarded")
        assert rcv.stats().draining == 1, "B's rest is still to be discarded"
        send(snd, "r", ["B1", "B-final"])
        _until(lambda: rcv.stats().draining == 0, "B's rest discarded")
        rcv.load_async("r")
        send(snd, "r", ["C0", "C-final"])
        assert Receiver(rcv, "r").until(2) == ["C0", "C-final"]
        assert rcv.stats().leftovers_discarded == 4
        assert len(memory) == 0
    finally:
        snd.stop()
        rcv.stop()


def test_a_keeping_connector_is_refused() -> None:
    with pytest.raises(InvalidValue, match="discard_leftovers=True needs a connector"):
        ChunkAdapter(MemoryConnector(), stage_id=1, discard_leftovers=True)


class Held(ConnectorWrapper):
    """Gets of ``key`` find nothing while ``hold`` is set; counts the puts tried on ``key``."""

    def __init__(self, inner: Any, key: str) -> None:
        super().__init__(inner)
        self.key = key
        self.hold = threading.Event()  # set by the test: the drain cannot read key yet
        self.tries = 0  # puts tried on key; written by the SAVE thread, read by the test

    def put(self, key: str, value: dict[str, Any]) -> None:
        if key == self.key:
            self.tries += 1
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        if key == self.key and self.hold.is_set():
            return None
        return self.inner.get(key)


@pytest.mark.rule("R29")
def test_on_redis_a_new_stream_sent_during_the_drain_is_not_cut_short(
    redis_server: Any, redis_prefix: str
) -> None:
    """Redis used to overwrite: B2, put while the drain had not yet discarded A2, replaced
    it and was discarded in its place (and B's final ended the drain as if it were A's),
    so B was cut short after B1. Now B2's put waits (``KeyOccupied``, ours: retried)
    until the drain has consumed A2."""
    with RedisConnector(url=redis_server.url, prefix=redis_prefix) as redis:
        conn = Held(redis, "r_0_2")
        snd = ChunkAdapter(conn, stage_id=0, put_backoff=0.001)
        rcv = ChunkAdapter(conn, stage_id=1, discard_leftovers=True)
        try:
            rcv.load_async("r")
            send(snd, "r", OLD[:2])
            assert Receiver(rcv, "r").until(2) == OLD[:2]
            conn.hold.set()
            rcv.cleanup_receiver("r")
            rcv.load_async("r")
            send(snd, "r", OLD[2:] + NEW)
            _until(lambda: conn.tries >= 2, "B2's put on A2's unread key")
            conn.hold.clear()
            assert snd.flush(BOUND)
            new = Receiver(rcv, "r")
            _until(lambda: bool(new.pump()) and str(new.got[-1]).endswith("final"), "a final")
            assert new.got == NEW
            assert rcv.stats().leftovers_discarded == len(OLD) - 2
            rcv.cleanup_receiver("r")
            assert redis.keys() == []
        finally:
            snd.stop()
            rcv.stop()
