"""SharedMemoryConnector: round trip, consume, atomic visibility, cleanup, adapters on it.

Rules: a connector's get returns what was put (R2); a put that raised stored
nothing (R10); an adapter over it keeps the whole contract (oracle-checked).
"""

from __future__ import annotations

import json
import os
import random
import socket
import threading
from typing import Any

import pytest

from chunk_adapter.connectors import shm as shm_module
from chunk_adapter.connectors.doorbell import NOTIFY_THREAD, Doorbell
from chunk_adapter.connectors.serialization import SerializationError, Serializer
from chunk_adapter.connectors.shm import (
    HEADER,
    NAME_MAX,
    KeyOccupied,
    SharedMemoryConnector,
    ShmCorrupt,
)
from chunk_adapter.errors import ConnectorError, InvalidType, InvalidValue
from chunk_adapter.factory import AdapterFactory
from chunk_adapter.oracles import assert_ok
from tests.connectors._connector_e2e import run_end_to_end, wait_for

linux_only = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="lists /dev/shm (Linux)")


def _raw_segment(name: str, content: bytes) -> None:
    """Create a segment by hand (what a writer that died mid-write leaves); Linux only."""
    fd = os.open(f"/dev/shm/{name}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.write(fd, content or b"\0")
    finally:
        os.close(fd)


def _segment_bytes(name: str) -> bytes:
    """A segment's bytes, read without mapping it (no resource tracker involved); Linux only."""
    with open(f"/dev/shm/{name}", "rb") as f:
        return f.read()


VALUES: list[Any] = [
    None,
    0,
    "text",
    b"\x00\xff" * 5,
    [1, [2, [3]]],
    {"nested": {"a": (1, 2)}, "set": {1, 2}},
    b"x" * (1 << 20),
]


@pytest.mark.rule("R2")
@pytest.mark.parametrize("data", VALUES, ids=lambda v: type(v).__name__)
def test_round_trip_returns_an_equal_value_and_consumes_it(shm_namespace: str, data: Any) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        value = {"data": data, "finished": False}
        conn.put("r_0_0", value)
        assert conn.get("r_0_0") == value
        assert conn.get("r_0_0") is None, "get must consume: the second get finds nothing"
        assert conn.segments() == [], "a consumed segment is unlinked"


@pytest.mark.rule("R2")
def test_get_of_a_missing_key_is_none(shm_namespace: str) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        assert conn.get("never_put") is None


@pytest.mark.rule("R2")
def test_two_connectors_in_one_namespace_share_values_others_do_not(shm_namespace: str) -> None:
    with (
        SharedMemoryConnector(shm_namespace) as a,
        SharedMemoryConnector(shm_namespace) as b,
        SharedMemoryConnector(shm_namespace + "x") as other,
    ):
        a.put("k", {"data": 1, "finished": True})
        assert other.get("k") is None
        assert b.get("k") == {"data": 1, "finished": True}


@pytest.mark.rule("R2")
@pytest.mark.parametrize(
    "key",
    ["", "a/b/../c", "ключ_1_0", "\udcff\ud800", "*?[]\\.", "x" * 10_000, "a.b", "\x00nul"],
    ids=["empty", "slashes", "unicode", "surrogates", "glob", "long", "dot", "nul"],
)
def test_any_string_key_maps_to_a_short_safe_name(shm_namespace: str, key: str) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        name = conn.segment_name(key)
        assert len(name) <= NAME_MAX
        assert name.startswith(shm_namespace + ".")
        assert all(c.isalnum() or c in "._-" for c in name), name
        conn.put(key, {"data": key, "finished": False})
        assert conn.get(key) == {"data": key, "finished": False}


def test_distinct_keys_get_distinct_names() -> None:
    conn = SharedMemoryConnector("ns")
    names = {conn.segment_name(f"req{i}_1_{j}") for i in range(200) for j in range(50)}
    assert len(names) == 200 * 50


@pytest.mark.rule("R10")
@pytest.mark.parametrize(
    "bad", [lambda: 1, threading.Lock(), (x for x in [1])], ids=["lambda", "lock", "generator"]
)
def test_an_unserialisable_value_fails_the_put_clearly_and_stores_nothing(
    shm_namespace: str, bad: Any
) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        with pytest.raises(SerializationError) as info:
            conn.put("bad_0_3", {"data": bad, "finished": False})
        assert isinstance(info.value, ConnectorError)
        message = str(info.value)
        assert "'bad_0_3'" in message and "nothing was stored" in message
        assert "serializer=" in message, "the message names the fix"
        assert conn.get("bad_0_3") is None
        assert conn.segments() == []
        assert conn.pending() == 0


@linux_only
def test_a_pluggable_serializer_is_used_on_both_sides(shm_namespace: str) -> None:
    as_json = Serializer(dumps=lambda v: json.dumps(v).encode(), loads=json.loads, name="json")
    with (
        SharedMemoryConnector(shm_namespace, serializer=as_json) as a,
        SharedMemoryConnector(shm_namespace, serializer=(json.dumps, json.loads)) as b,
    ):
        a.put("k", {"data": [1, "x"], "finished": True})
        assert b'{"data": [1, "x"]' in _segment_bytes(a.segment_name("k")), "stored as JSON"
        assert b.get("k") == {"data": [1, "x"], "finished": True}
        with pytest.raises(SerializationError, match="json serializer"):
            a.put("k2", {"data": {1, 2}, "finished": True})  # sets are not JSON


def test_a_serializer_that_is_not_a_pair_is_rejected_at_construction(shm_namespace: str) -> None:
    with pytest.raises(InvalidType, match="serializer must be"):
        SharedMemoryConnector(shm_namespace, serializer="pickle")


def test_a_dumps_that_returns_no_bytes_fails_the_put(shm_namespace: str) -> None:
    with SharedMemoryConnector(shm_namespace, serializer=(lambda v: 42, lambda b: b)) as conn:
        with pytest.raises(SerializationError, match="not bytes"):
            conn.put("k", {"data": 1, "finished": True})
        assert conn.segments() == []


@pytest.mark.parametrize("namespace", ["", "a/b", "a.b", "x" * 300, "sp ace"])
def test_a_bad_namespace_is_rejected_with_the_rule(namespace: str) -> None:
    with pytest.raises(InvalidValue, match=r"namespace must be 1-\d+ characters"):
        SharedMemoryConnector(namespace)


def test_a_key_that_is_not_a_str_is_a_type_error(shm_namespace: str) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        with pytest.raises(InvalidType, match="key is a str"):
            conn.put(7, {"data": 1, "finished": True})  # type: ignore[arg-type]
        with pytest.raises(InvalidType, match="key is a str"):
            conn.get(b"k")  # type: ignore[arg-type]


@pytest.mark.rule("R10")
def test_a_put_never_overwrites_an_unconsumed_value(shm_namespace: str) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        conn.put("k", {"data": "first", "finished": False})
        with pytest.raises(
            KeyOccupied, match=r"'k'.*this connector put.*nothing was stored"
        ) as own:
            conn.put("k", {"data": "second", "finished": False})
        assert not own.value.permanent, "our own unread value: its reader will free the key"
        with (
            SharedMemoryConnector(shm_namespace) as other,
            pytest.raises(KeyOccupied, match=r"'k'.*another connector.*purge\(\)") as foreign,
        ):
            other.put("k", {"data": "other", "finished": False})
        assert foreign.value.permanent, "someone else's value: retrying cannot help (R25)"
        assert conn.get("k") == {"data": "first", "finished": False}
        conn.put("k", {"data": "third", "finished": True})  # consumed: the key is free again
        assert conn.get("k") == {"data": "third", "finished": True}


def test_consume_on_get_false_keeps_the_value_until_close(shm_namespace: str) -> None:
    conn = SharedMemoryConnector(shm_namespace, consume_on_get=False)
    conn.put("k", {"data": 1, "finished": True})
    assert conn.get("k") == conn.get("k") == {"data": 1, "finished": True}
    assert len(conn.segments()) == 1
    conn.close()
    assert conn.segments() == []


@linux_only
def test_close_unlinks_what_it_put_and_nobody_consumed(shm_namespace: str) -> None:
    reader = SharedMemoryConnector(shm_namespace)
    with SharedMemoryConnector(shm_namespace) as writer:
        for i in range(5):
            writer.put(f"r_1_{i}", {"data": i, "finished": i == 4})
        assert reader.get("r_1_0") is not None and reader.get("r_1_1") is not None
        # a segment of the same name re-created by another connector is not ours to unlink
        reader.put("r_1_0", {"data": "reader's", "finished": False})
        assert len(writer.segments()) == 4
    assert reader.segments() == [reader.segment_name("r_1_0")]
    assert reader.get("r_1_0") == {"data": "reader's", "finished": False}
    with pytest.raises(ConnectorError, match="closed"):
        writer.put("r_1_9", {"data": 9, "finished": True})
    writer.close()  # idempotent


@linux_only
def test_a_put_racing_close_leaves_nothing_behind(
    shm_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close() from another thread while a put fills its segment: that segment goes too."""
    conn = SharedMemoryConnector(shm_namespace)
    real_reserve = shm_module.reserve

    def close_meanwhile(segment: Any, size: int) -> None:
        conn.close()  # what another thread's close() does at this moment
        real_reserve(segment, size)

    monkeypatch.setattr(shm_module, "reserve", close_meanwhile)
    with pytest.raises(ConnectorError, match="closed meanwhile"):
        conn.put("k", {"data": 1, "finished": True})
    assert conn.segments() == []


@linux_only
def test_segments_outlive_the_connector_object_without_close(shm_namespace: str) -> None:
    """A sender may exit before its receiver reads: only close() unlinks."""
    writer = SharedMemoryConnector(shm_namespace)
    writer.put("k", {"data": 1, "finished": True})
    del writer
    assert SharedMemoryConnector(shm_namespace).get("k") == {"data": 1, "finished": True}


def test_pending_forgets_consumed_puts_so_it_stays_bounded(shm_namespace: str) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        for i in range(1100):
            conn.put(f"k{i}", {"data": i, "finished": False})
            assert conn.get(f"k{i}") is not None
        assert conn.pending() < 1024, "the set of created names is pruned when it doubles"


@linux_only
def test_purge_removes_by_age(shm_namespace: str) -> None:
    conn = SharedMemoryConnector(shm_namespace)
    conn.put("a", {"data": 1, "finished": True})
    assert conn.purge(older_than=3600) == 0
    assert conn.purge(older_than=0) == 1
    assert conn.segments() == []


# ------------------------------------------------------------ atomic visibility
@linux_only
def test_an_empty_segment_being_created_reads_as_nothing_yet(shm_namespace: str) -> None:
    conn = SharedMemoryConnector(shm_namespace)
    name = conn.segment_name("k")
    fd = os.open(f"/dev/shm/{name}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    os.close(fd)  # what a put leaves between shm_open and ftruncate
    assert conn.get("k") is None
    assert conn.segments() == [name], "the reader must not unlink a segment being written"
    assert conn.purge() == 1


@linux_only
@pytest.mark.parametrize("written", [0, 10, HEADER.size + 3])
def test_an_uncommitted_segment_reads_as_nothing_yet(shm_namespace: str, written: int) -> None:
    """A put interrupted before its commit store (or a writer killed there) is invisible."""
    conn = SharedMemoryConnector(shm_namespace)
    conn.put("k", {"data": "x" * 100, "finished": True})
    name = conn.segment_name("k")
    image = bytearray(_segment_bytes(name))
    conn.purge()
    image[4:8] = b"\0\0\0\0"  # state: not committed
    _raw_segment(name, bytes(image[:written]) + bytes(len(image) - written))
    assert conn.get("k") is None
    assert conn.segments() == [name]
    assert conn.purge() == 1, "purge removes a dead writer's half-written segment"


@linux_only
def test_a_corrupt_or_colliding_segment_is_an_error_not_a_wrong_value(shm_namespace: str) -> None:
    conn = SharedMemoryConnector(shm_namespace)
    conn.put("other", {"data": 1, "finished": True})
    image = bytearray(_segment_bytes(conn.segment_name("other")))
    conn.purge()
    _raw_segment(conn.segment_name("k"), bytes(image))  # holds key "other" under k's name
    with pytest.raises(ShmCorrupt, match="collision"):
        conn.get("k")
    conn.purge()
    image[-1] ^= 0xFF  # flip a payload byte
    _raw_segment(conn.segment_name("other"), bytes(image))
    with pytest.raises(ShmCorrupt, match="CRC"):
        conn.get("other")
    assert len(conn.segments()) == 1, "a get that raised consumed nothing"
    assert conn.purge() == 1


@pytest.mark.rule("R2")
def test_a_concurrent_reader_never_sees_a_partial_value(shm_namespace: str, seed: int) -> None:
    """A reader thread spinning on get while large values are written gets each one whole.

    (Within one process the GIL hides a wrong write order; the cross-process test
    ``test_a_reader_process_never_sees_a_partial_shared_memory_value`` catches that.)
    """
    rnd = random.Random(seed)
    values = [
        {"data": rnd.randbytes(rnd.choice([1, 4096, 1 << 18])), "finished": False}
        for _ in range(60)
    ]
    seen: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    with SharedMemoryConnector(shm_namespace) as writer, SharedMemoryConnector(shm_namespace) as r:

        def read() -> None:
            try:
                for i in range(len(values)):
                    while (got := r.get(f"k_{i}")) is None:
                        pass
                    seen.append(got)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        reader = threading.Thread(target=read, name="test-shm-reader", daemon=True)
        reader.start()
        for i, value in enumerate(values):
            writer.put(f"k_{i}", value)
        reader.join(30)
        assert not reader.is_alive(), f"reader stuck after {len(seen)} values (seed={seed})"
    assert not errors, f"{errors!r} (seed={seed})"
    assert seen == values, f"a value differs from what was put (seed={seed})"


# ------------------------------------------------------------------- notify
def test_notify_offers_subscribe_and_calls_back_after_the_value_is_readable(
    shm_namespace: str,
) -> None:
    with (
        SharedMemoryConnector(shm_namespace, notify=True) as sender,
        SharedMemoryConnector(shm_namespace, notify=True) as receiver,
        SharedMemoryConnector(shm_namespace + "x", notify=True) as elsewhere,
    ):
        got: list[tuple[str, Any]] = []
        arrived = threading.Event()
        strays: list[str] = []

        def on_put(key: str) -> None:
            got.append((key, receiver.get(key)))  # readable when notified
            arrived.set()

        unsubscribe = receiver.subscribe(on_put)
        stray = elsewhere.subscribe(strays.append)
        sender.put("n_1_0\udcff", {"data": "hello", "finished": False})
        assert arrived.wait(10), "no notification within 10 s"
        assert got == [("n_1_0\udcff", {"data": "hello", "finished": False})]
        unsubscribe()
        unsubscribe()  # idempotent
        directory = Doorbell(shm_namespace).directory
        assert not os.path.exists(directory) or os.listdir(directory) == [], "socket left"
        stray()
        assert strays == [], "a ring reached another namespace"
    assert not any(t.name == NOTIFY_THREAD for t in threading.enumerate()), "listener left"


def test_without_notify_there_is_no_subscribe(shm_namespace: str) -> None:
    assert not hasattr(SharedMemoryConnector(shm_namespace), "subscribe")


def test_a_ring_removes_the_socket_of_a_subscriber_that_died(shm_namespace: str) -> None:
    bell = Doorbell(shm_namespace)
    os.makedirs(bell.directory, exist_ok=True)
    dead = os.path.join(bell.directory, "12345-dead")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(dead)
    sock.close()  # the process died: its socket file stays, nobody receives
    bell.ring("k")
    assert not os.path.exists(dead)
    bell.close()
    os.rmdir(bell.directory)


# --------------------------------------------------------------- adapters on it
@pytest.mark.rule("R2", "R9", "R11", "R14", "R23")
@pytest.mark.parametrize("notify", [False, True], ids=["polling", "event-driven"])
def test_adapters_over_shared_memory_keep_the_contract(
    adapter_factory: AdapterFactory, shm_namespace: str, notify: bool, seed: int
) -> None:
    with SharedMemoryConnector(shm_namespace, notify=notify) as conn:
        history, got = run_end_to_end(adapter_factory, conn, seed)
        assert_ok(history, quiescent=True, put_tries=3, context=f"shm end to end, seed={seed}")
        assert got, f"nothing arrived (seed={seed})"
        assert conn.segments() == [], f"segments left after every final arrived (seed={seed})"


@pytest.mark.rule("R9", "R10", "R22")
def test_an_unserialisable_chunk_is_dropped_and_the_stream_stays_contiguous(
    adapter_factory: AdapterFactory, shm_namespace: str
) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        snd = adapter_factory(conn, stage_id=1, put_backoff=0.0)
        rcv = adapter_factory(conn, stage_id=2)
        try:
            rcv.load_async("u")
            snd.save_async("u", "a", False)
            snd.save_async("u", {"fn": lambda: 1}, False)  # deepcopy copes, pickle fails
            snd.save_async("u", "b", True)
            got: list[dict[str, Any]] = []

            def final_arrived() -> bool:
                got.extend(rcv.poll_ready().get("u", []))
                return bool(got) and got[-1]["finished"]

            wait_for(final_arrived, "the final of 'u'")
            assert got == [{"data": "a", "finished": False}, {"data": "b", "finished": True}]
            assert conn.segments() == []
        finally:
            snd.stop()
            rcv.stop()
