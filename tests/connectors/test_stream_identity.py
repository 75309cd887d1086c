"""R29: a reused request id never receives a previous stream's chunks.

Before: ``cleanup_receiver`` of an unfinished registration left the rest of that
stream in the connector, and the next stream with the same id received
``[B0, B1, A2, A3, A4, A-final]`` on shared memory, or the whole old stream when
the first registration was cleaned up before its first chunk arrived.

Shared memory and Redis keep stream identity by default: each value's framing
carries its stream's tag, ``cleanup_receiver`` tells the connector which stream
was left (``abandon``), and the connector's gets throw that stream's values
away while a sweep takes its rest as it arrives, never another stream's value
(connectors/_stream_ids.py). A connector without it (``MemoryConnector``) has
the adapter's drain, ``discard_leftovers=True``, which reads the old stream's
remaining keys in order; a new registration of the id reads only keys the old
stream has emptied until then (docs/connectors.md, "Stream identity").
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import MemoryConnector, RedisConnector, SharedMemoryConnector
from chunk_adapter.connectors.base import ConnectorWrapper
from chunk_adapter.errors import InvalidType, InvalidValue
from chunk_adapter.stats import AdapterStats

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


@contextlib.contextmanager
def pair(conn: Any, **receiver_options: Any) -> Iterator[tuple[ChunkAdapter, ChunkAdapter]]:
    """A sender (stage 0, quick put retries) and a receiver (stage 1) over *conn*,
    both stopped at the end."""
    snd = ChunkAdapter(conn, stage_id=0, put_backoff=0.001)
    rcv = ChunkAdapter(conn, stage_id=1, **receiver_options)
    try:
        yield snd, rcv
    finally:
        snd.stop()
        rcv.stop()


def send(snd: ChunkAdapter, rid: str, datas: list[str]) -> None:
    for data in datas:
        snd.save_async(rid, data, data.endswith("final"))


def reuse_after_cleanup(conn: Any, *, discard: bool) -> tuple[list[Any], AdapterStats]:
    """The issue's scenario: the receiver takes A0, A1 and cleans up; the sender
    finishes A and starts B under the same id; the receiver registers again. Returns what
    the new registration received and the receiver's stats at the end."""
    with pair(conn, discard_leftovers=discard) as (snd, rcv):
        rcv.load_async("r")
        send(snd, "r", OLD[:2])
        assert Receiver(rcv, "r").until(2) == OLD[:2]
        rcv.cleanup_receiver("r")
        rcv.load_async("r")  # at once: the new registration must not read A's rest
        send(snd, "r", OLD[2:])
        if isinstance(conn, MemoryConnector):  # memory overwrites: B after A's rest is gone
            _until(lambda: rcv.stats().draining == 0, "A's rest discarded")
        send(snd, "r", NEW)
        assert snd.flush(BOUND)
        new = Receiver(rcv, "r")
        _until(lambda: bool(new.pump()) and str(new.got[-1]).endswith("final"), "a final")
        _until(lambda: rcv.stats().draining == 0, "the sweep of A's rest to end")
        rcv.cleanup_receiver("r")
        return new.got, rcv.stats()


def stored(conn: Any) -> list[str]:
    return list(conn.segments() if isinstance(conn, SharedMemoryConnector) else conn.keys())


@pytest.fixture(params=["shm", "redis"])
def keeping(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A connector that keeps stream identity (made with its defaults)."""
    if request.param == "shm":
        conn: Any = SharedMemoryConnector(request.getfixturevalue("shm_namespace"))
    else:
        server = request.getfixturevalue("redis_server")
        conn = RedisConnector(url=server.url, prefix=request.getfixturevalue("redis_prefix"))
    yield conn
    conn.close()


@pytest.mark.rule("R29")
def test_by_default_a_reused_id_receives_only_its_own_stream(keeping: Any) -> None:
    got, stats = reuse_after_cleanup(keeping, discard=False)
    assert got == NEW
    # A's rest, each chunk thrown away by the connector or, when the old registration's
    # get was in flight at the cleanup, by the adapter's fence (R16)
    assert keeping.leftovers_discarded + stats.stale_discarded == len(OLD) - 2
    assert stored(keeping) == [], "A's rest past B's final is swept away too"


@pytest.mark.rule("R29")
def test_with_discard_leftovers_the_connector_still_keeps_identity(keeping: Any) -> None:
    """The option asks for what the connector does already: same outcome."""
    got, stats = reuse_after_cleanup(keeping, discard=True)
    assert got == NEW
    assert keeping.leftovers_discarded + stats.stale_discarded == len(OLD) - 2


@pytest.mark.rule("R29")
def test_without_stream_identity_the_old_stream_leaks_into_the_new_one(
    shm_namespace: str,
) -> None:
    """The bug as measured (shm): proof that the scenario above bites."""
    with SharedMemoryConnector(shm_namespace, stream_identity=False) as conn:
        got, _ = reuse_after_cleanup(conn, discard=False)
        assert got == ["B0", "B1", "A2", "A3", "A4", "A-final"]
        conn.purge()  # B's rest, stuck behind A's leftovers


@pytest.mark.rule("R29")
def test_on_memory_the_drain_keeps_a_reused_id_to_its_own_stream() -> None:
    conn = MemoryConnector(consume_on_get=True)
    assert reuse_after_cleanup(conn, discard=True)[0] == NEW
    assert len(conn) == 0


@pytest.mark.rule("R29")
def test_a_rest_that_never_comes_is_given_up_and_the_new_stream_flows() -> None:
    conn = MemoryConnector(consume_on_get=True)
    with pair(conn, discard_leftovers=True, leftover_timeout=0.2) as (snd, rcv):
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
    with pair(conn, discard_leftovers=True) as (snd, rcv):
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


def test_a_keeping_connector_is_refused() -> None:
    with pytest.raises(InvalidValue, match="discard_leftovers=True needs a connector"):
        ChunkAdapter(MemoryConnector(), stage_id=1, discard_leftovers=True)


@pytest.mark.rule("R29")
def test_a_registration_that_received_nothing_leaves_its_stream_whole_to_the_next(
    keeping: Any,
) -> None:
    """The limit no connector can pass (docs/contract.md, R29): the client is gone before
    A0 was read, so nothing says A was its stream and not the next client's. The next
    registration gets A whole, never mixed, and the one after it B."""
    conn = Blind(keeping, "r_0_0")
    with pair(conn) as (snd, rcv):
        conn.blind.set()  # the receiver's gets of A0 find nothing: A0 has "not arrived"
        rcv.load_async("r")
        send(snd, "r", OLD)
        _until(lambda: len(stored(keeping)) == len(OLD), "all of A stored")
        rcv.cleanup_receiver("r")
        conn.blind.clear()
        rcv.load_async("r")
        assert Receiver(rcv, "r").until(len(OLD)) == OLD
        assert rcv.stats().streams_left == 1
        assert rcv.stats().draining == 0, "nothing left, so nothing swept for"
        rcv.cleanup_receiver("r")
        rcv.load_async("r")
        send(snd, "r", NEW)
        assert Receiver(rcv, "r").until(len(NEW)) == NEW
        assert keeping.leftovers_discarded == 0


class Stalled(ConnectorWrapper):
    """A get of ``key`` returns only once ``go`` is set (its value already consumed):
    a get in flight while the test cleans the registration up."""

    def __init__(self, inner: Any, key: str) -> None:
        super().__init__(inner)
        self.key = key
        self.inside = threading.Event()  # set by the RECV thread: the get has its value
        self.go = threading.Event()  # set by the test: the get may return

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        value = self.inner.get(key)
        if key == self.key and value is not None and not self.go.is_set():
            self.inside.set()
            assert self.go.wait(BOUND), "the test never let the get return"
        return value


@pytest.mark.rule("R29")
@pytest.mark.rule("R16")
def test_a_get_in_flight_at_cleanup_still_names_the_stream_left(keeping: Any) -> None:
    """A0's get has consumed it when the registration is cleaned up: the registration
    committed nothing, yet the stream it was reading is A, and A is what is left."""
    conn = Stalled(keeping, "r_0_0")
    with pair(conn) as (snd, rcv):
        rcv.load_async("r")
        send(snd, "r", OLD[:1])
        assert conn.inside.wait(BOUND)
        rcv.cleanup_receiver("r")  # next id 0, its get of A0 in flight
        rcv.load_async("r")
        conn.go.set()
        send(snd, "r", OLD[1:] + NEW)
        assert Receiver(rcv, "r").until(len(NEW)) == NEW
        _until(lambda: rcv.stats().draining == 0, "the sweep of A to end")
        assert rcv.stats().stale_discarded == 1  # A0: the fence (R16)
        assert keeping.leftovers_discarded == len(OLD) - 1
        assert stored(keeping) == []


@pytest.mark.rule("R29")
def test_a_dead_senders_rest_holds_back_no_new_sender(keeping: Any) -> None:
    """A's sender dies after A0; a new sender (another writer) sends B under the id at
    once. B flows in full while the sweep still waits for A's rest (the drain of a
    connector without identity would have eaten B's chunks past its bound), and the
    sweep gives up after ``leftover_timeout``."""
    snd = ChunkAdapter(keeping, stage_id=0)
    rcv = ChunkAdapter(keeping, stage_id=1, leftover_timeout=0.5)
    successor = type(keeping)(  # another writer on the same store
        **(
            {"namespace": keeping.namespace}
            if isinstance(keeping, SharedMemoryConnector)
            else {"client": keeping.client, "prefix": keeping.prefix}
        )
    )
    snd2 = ChunkAdapter(successor, stage_id=0)
    try:
        rcv.load_async("r")
        send(snd, "r", OLD[:1])
        assert Receiver(rcv, "r").until(1) == OLD[:1]
        snd.stop()
        rcv.cleanup_receiver("r")
        rcv.load_async("r")
        send(snd2, "r", NEW)
        assert Receiver(rcv, "r").until(len(NEW)) == NEW
        _until(lambda: rcv.stats().leftovers_given_up == 1, "the sweep to give up")
        assert rcv.stats().draining == 0
        assert keeping.leftovers_discarded == 0
    finally:
        snd.stop()
        snd2.stop()
        rcv.stop()
        successor.close()


@pytest.mark.rule("R29")
def test_two_streams_left_in_turn_reach_neither_the_third(keeping: Any) -> None:
    """A is left after A0; B, registered next, after B0 (A's rest still unsent); then A's
    rest, B's rest and C are sent: C gets only C, and both rests are swept away."""
    with pair(keeping) as (snd, rcv):
        rcv.load_async("r")
        send(snd, "r", ["A0"])
        assert Receiver(rcv, "r").until(1) == ["A0"]
        rcv.cleanup_receiver("r")
        rcv.load_async("r")
        send(snd, "r", ["A1", "A-final", "B0"])
        assert Receiver(rcv, "r").until(1) == ["B0"]
        rcv.cleanup_receiver("r")
        rcv.load_async("r")
        send(snd, "r", ["B1", "B2", "B-final", "C0", "C-final"])
        assert Receiver(rcv, "r").until(2) == ["C0", "C-final"]
        _until(lambda: rcv.stats().draining == 0, "the sweeps to end")
        assert keeping.leftovers_discarded + rcv.stats().stale_discarded == 5
        assert stored(keeping) == []


@pytest.mark.rule("R29")
def test_a_sweep_never_takes_another_streams_value(keeping: Any) -> None:
    """At the connector: A is left at chunk 1; B's chunk 1 sits where A1 would. The
    sweep leaves it (and looks past it), and a get hands it out."""
    keeping.put("r_0_0", {"data": "A0", "finished": False})
    assert keeping.get("r_0_0") == {"data": "A0", "finished": False}
    keeping.abandon("r_0_1")
    keeping.put("r_0_0", {"data": "B0", "finished": False})  # B: a new stream
    keeping.put("r_0_1", {"data": "B1", "finished": False})
    assert keeping.sweep("r_0_0") is True  # B1 where A1 would be: A1 will not come
    assert keeping.sweep("r_0_0") is False  # A2's key: nothing there
    assert keeping.get("r_0_0") == {"data": "B0", "finished": False}
    assert keeping.get("r_0_1") == {"data": "B1", "finished": False}
    keeping.put("r_0_2", {"data": "B-final", "finished": True})
    assert keeping.sweep("r_0_0") is True  # B's final: not A's, looked past
    assert keeping.get("r_0_2") == {"data": "B-final", "finished": True}
    assert keeping.leftovers_discarded == 0


@pytest.mark.rule("R29")
def test_a_leftover_met_by_a_get_is_thrown_away_and_its_key_freed(keeping: Any) -> None:
    for i, data in enumerate(OLD[:3]):
        keeping.put(f"r_0_{i}", {"data": data, "finished": False})
    keeping.put("r_0_3", {"data": "A-final", "finished": True})
    assert keeping.get("r_0_0")["data"] == "A0"
    keeping.abandon("r_0_1")
    assert keeping.get("r_0_1") is None  # A1: thrown away
    keeping.put("r_0_0", {"data": "B0", "finished": False})  # B: a new stream
    keeping.put("r_0_1", {"data": "B1", "finished": False})  # the key is free again
    assert keeping.get("r_0_0") == {"data": "B0", "finished": False}
    assert keeping.get("r_0_1") == {"data": "B1", "finished": False}
    assert keeping.sweep("r_0_0") is True  # A2
    assert keeping.sweep("r_0_0") is True  # A's final: the rest is over
    assert keeping.sweep("r_0_0") is None
    assert keeping.leftovers_discarded == 3
    assert stored(keeping) == []


def test_stream_identity_is_a_bool(shm_namespace: str) -> None:
    with pytest.raises(InvalidType, match="stream_identity must be True or False"):
        SharedMemoryConnector(shm_namespace, stream_identity="yes")  # type: ignore[arg-type]


class Forgetful(ConnectorWrapper):
    """A connector whose ``abandon`` fails (the store cannot be read)."""

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.inner.get(key)

    def abandon(self, key: str) -> None:  # type: ignore[override]
        raise ConnectionError(f"abandon({key!r}): the store is down")


@pytest.mark.rule("R29")
@pytest.mark.rule("R22")
def test_a_failed_abandon_is_logged_and_costs_only_the_identity(
    shm_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The RECV thread survives it (R22) and says what it costs: a new stream of the id
    may receive the old stream's rest, as without stream identity."""
    with SharedMemoryConnector(shm_namespace) as inner:
        conn = Forgetful(inner)
        with pair(conn) as (snd, rcv):
            rcv.load_async("r")
            send(snd, "r", ["A0"])
            assert Receiver(rcv, "r").until(1) == ["A0"]
            with caplog.at_level("WARNING", logger=rcv.log.name):
                rcv.cleanup_receiver("r")
                _until(lambda: "could not tell the connector" in caplog.text, "the warning")
            assert "r_0_1" in caplog.text and "the store is down" in caplog.text
            assert rcv.stats().streams_left == 1
            assert rcv.stats().draining == 0, "no sweep for a stream the connector never knew"
            rcv.load_async("s")  # the RECV thread goes on
            send(snd, "s", ["s0", "s-final"])
            assert Receiver(rcv, "s").until(2) == ["s0", "s-final"]


@pytest.mark.rule("R29")
def test_a_rest_that_comes_after_the_sweep_gave_up_is_still_thrown_away(
    keeping: Any,
) -> None:
    """A's sender stalls after A0 for longer than leftover_timeout, then sends A's rest
    and B: the new registration's gets throw A's rest away where they meet it."""
    with pair(keeping, leftover_timeout=0.2) as (snd, rcv):
        rcv.load_async("r")
        send(snd, "r", ["A0"])
        assert Receiver(rcv, "r").until(1) == ["A0"]
        rcv.cleanup_receiver("r")
        _until(lambda: rcv.stats().leftovers_given_up == 1, "the sweep to give up")
        rcv.load_async("r")
        send(snd, "r", ["A1", "A-final", *NEW])
        assert Receiver(rcv, "r").until(len(NEW)) == NEW
        assert keeping.leftovers_discarded == 2
        assert stored(keeping) == []


@pytest.mark.rule("R29")
def test_with_identity_off_discard_leftovers_drains_as_before(shm_namespace: str) -> None:
    with (
        SharedMemoryConnector(shm_namespace, stream_identity=False) as conn,
        pair(conn, discard_leftovers=True) as (snd, rcv),
    ):
        rcv.load_async("r")
        send(snd, "r", OLD[:2])
        assert Receiver(rcv, "r").until(2) == OLD[:2]
        rcv.cleanup_receiver("r")
        assert rcv.stats().draining == 1, "the adapter's drain, not a sweep"
        rcv.load_async("r")
        send(snd, "r", OLD[2:] + NEW)
        assert Receiver(rcv, "r").until(len(NEW)) == NEW
        assert rcv.stats().leftovers_discarded == len(OLD) - 2
        assert rcv.stats().streams_left == 0


class Unsure:
    """A redis client whose next ``set`` stores its value and then raises (a timeout
    after the server applied it: the put is unsure)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.fail_next = False

    def set(self, *args: Any, **kwargs: Any) -> Any:
        stored = self.client.set(*args, **kwargs)
        if self.fail_next:
            self.fail_next = False
            raise redis_errors().ConnectionError("timed out after the server stored it")
        return stored

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def redis_errors() -> Any:
    return pytest.importorskip("redis").exceptions


@pytest.fixture
def unsure_pair(
    redis_server: Any, redis_prefix: str
) -> Iterator[tuple[Unsure, RedisConnector, RedisConnector]]:
    """A sender whose client can make a put unsure, and a receiver, on one prefix."""
    client = pytest.importorskip("redis").Redis.from_url(redis_server.url)
    unsure = Unsure(client)
    snd = RedisConnector(client=unsure, prefix=redis_prefix, exclusive_stages=False)
    rcv = RedisConnector(client=client, prefix=redis_prefix, exclusive_stages=False)
    try:
        yield unsure, snd, rcv
    finally:
        snd.close()
        rcv.close()
        client.close()


@pytest.mark.rule("R29")
def test_on_redis_a_retry_of_a_swept_unsure_final_is_not_read_again(
    unsure_pair: tuple[Unsure, RedisConnector, RedisConnector],
) -> None:
    """A's final is put unsure (stored, then the put raised); the sweep takes it; the
    sender's retry stores a second copy once the key is free. The new stream must not
    read it: it is recognised as a value already consumed."""
    unsure, snd, rcv = unsure_pair
    snd.put("r_0_0", {"data": "A0", "finished": False})
    assert rcv.get("r_0_0") == {"data": "A0", "finished": False}
    assert rcv.abandon("r_0_1")
    unsure.fail_next = True
    with pytest.raises(Exception, match="timed out after the server stored it"):
        snd.put("r_0_1", {"data": "A-final", "finished": True})
    assert rcv.sweep("r_0_0") is True  # A's final, swept
    assert rcv.sweep("r_0_0") is None
    snd.put("r_0_1", {"data": "A-final", "finished": True})  # the adapter's retry
    snd.put("r_0_0", {"data": "B0", "finished": False})
    assert rcv.get("r_0_0") == {"data": "B0", "finished": False}
    assert rcv.get("r_0_1") is None, "the retry's copy of A's final"


@pytest.mark.rule("R29")
def test_on_redis_an_unsure_header_never_tags_another_streams_chunk(
    unsure_pair: tuple[Unsure, RedisConnector, RedisConnector],
) -> None:
    """A1's put is unsure and never retried (dropped): its remembered header must not be
    reused for B's chunk under that key, or B's chunk would carry A's (abandoned) tag."""
    unsure, snd, rcv = unsure_pair
    snd.put("r_0_0", {"data": "A0", "finished": False})
    assert rcv.get("r_0_0") == {"data": "A0", "finished": False}
    unsure.fail_next = True
    with pytest.raises(Exception, match="timed out after the server stored it"):
        snd.put("r_0_1", {"data": "A1", "finished": False})
    rcv.client.delete(f"{rcv.prefix}r_0_1")  # it expired, or was never there
    assert rcv.abandon("r_0_1")
    snd.put("r_0_0", {"data": "B0", "finished": False})
    snd.put("r_0_1", {"data": "B-final", "finished": True})
    assert rcv.get("r_0_0") == {"data": "B0", "finished": False}
    assert rcv.get("r_0_1") == {"data": "B-final", "finished": True}
    assert rcv.leftovers_discarded == 0
