"""Issue 12 on Redis: a put never overwrites a value nobody has consumed yet.

Before, ``RedisConnector.put`` was a plain ``SET``: a second put of a key
silently replaced an unread chunk (a reused request id, a second sender on the
prefix), where the shared-memory connector raises ``KeyOccupied``. Now a put is
``SET ... NX PX ttl`` and raises the same ``KeyOccupied``, with the same
classification (R25): transient when this connector put the value (its reader
will consume it, the adapter retries), permanent when anyone else did (one
foreign value never stalls the SAVE thread). All against a real redis-server.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import KeyOccupied, RedisConnector, is_permanent
from chunk_adapter.connectors import _redis_parts as redis_parts
from chunk_adapter.connectors import redis as redis_module
from chunk_adapter.connectors.redis_server import RedisServer
from chunk_adapter.connectors.serialization import PICKLE, SAFE
from tests.connectors._connector_e2e import wait_for

BOUND = 10.0  # seconds any wait below may take; never expected to be reached
ROUNDS = 50  # races per run of the concurrency tests


@pytest.fixture
def pair(redis_server: RedisServer, redis_prefix: str) -> Iterator[tuple[Any, Any]]:
    """Two connectors (two writers) on one prefix (several writers of a stage on purpose:
    what these tests race is the key, not the stage, R32)."""
    with (
        RedisConnector(url=redis_server.url, prefix=redis_prefix, exclusive_stages=False) as a,
        RedisConnector(url=redis_server.url, prefix=redis_prefix, exclusive_stages=False) as b,
    ):
        yield a, b


def value(data: Any, finished: bool = False) -> dict[str, Any]:
    return {"data": data, "finished": finished}


def test_a_second_put_of_an_unconsumed_key_raises_and_keeps_the_first(
    pair: tuple[Any, Any],
) -> None:
    conn, _ = pair
    conn.put("r_0_0", value("first"))
    with pytest.raises(KeyOccupied) as info:
        conn.put("r_0_0", value("second"))
    assert not is_permanent(info.value), "our own unread value: the adapter retries"
    assert "'r_0_0'" in str(info.value) and "nothing was stored" in str(info.value)
    assert conn.get("r_0_0") == value("first")
    conn.put("r_0_0", value("second"))  # consumed: the key is free again
    assert conn.get("r_0_0") == value("second")


@pytest.mark.rule("R25")
def test_another_writers_unconsumed_value_is_a_permanent_key_occupied(
    pair: tuple[Any, Any],
) -> None:
    a, b = pair
    a.put("r_0_0", value("a's"))
    with pytest.raises(KeyOccupied) as info:
        b.put("r_0_0", value("b's"))
    assert is_permanent(info.value), info.value
    assert "another connector" in str(info.value) and ".purge()" in str(info.value)
    assert b.get("r_0_0") == value("a's"), "the first writer's value is intact"


@pytest.mark.rule("R25")
def test_a_value_without_the_header_is_foreign_and_still_readable(
    pair: tuple[Any, Any], redis_prefix: str
) -> None:
    """A value another tool stored (no header) is never overwritten, and get reads it."""
    conn, _ = pair
    stored = bytes(SAFE.dumps(value(7, True)))  # the default format, without the header
    conn.client.set((redis_prefix + "r_0_0").encode(), stored)
    with pytest.raises(KeyOccupied, match="not put by a RedisConnector") as info:
        conn.put("r_0_0", value("mine"))
    assert is_permanent(info.value)
    assert conn.get("r_0_0") == value(7, True)


def test_a_key_of_another_type_is_foreign(pair: tuple[Any, Any], redis_prefix: str) -> None:
    conn, _ = pair
    conn.client.rpush((redis_prefix + "r_0_0").encode(), b"x")
    with pytest.raises(KeyOccupied) as info:
        conn.put("r_0_0", value("mine"))
    assert is_permanent(info.value)
    assert conn.client.type((redis_prefix + "r_0_0").encode()) == b"list"
    conn.purge()


def test_no_overwrite_keeps_the_ttl(redis_server: RedisServer, redis_prefix: str) -> None:
    with RedisConnector(url=redis_server.url, prefix=redis_prefix, ttl=30) as conn:
        conn.put("k", value(1))
        pttl = conn.client.pttl((redis_prefix + "k").encode())
        assert 0 < pttl <= 30_000
        with pytest.raises(KeyOccupied):
            conn.put("k", value(2))
        assert conn.client.pttl((redis_prefix + "k").encode()) <= pttl, "not refreshed"
        assert conn.get("k") == value(1)


def _race(writers: list[Any], key: str) -> tuple[list[int], list[BaseException]]:
    """Every writer puts *key* at once (released together by a barrier)."""
    start = threading.Barrier(len(writers))  # releases all writers at once
    won: list[int] = []
    lost: list[BaseException] = []
    # Guards won and lost (appended by the writer threads); nobody waits on it.
    lock = threading.Lock()

    def write(i: int) -> None:
        start.wait(BOUND)
        try:
            writers[i].put(key, value(f"writer {i}"))
        except BaseException as exc:  # collected: the test asserts on it
            with lock:
                lost.append(exc)
        else:
            with lock:
                won.append(i)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(writers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(BOUND)
    assert not any(t.is_alive() for t in threads), f"a writer hung for {BOUND} s"
    return won, lost


@pytest.mark.rule("R25")
@pytest.mark.parametrize("count", [2, 6])
def test_writers_racing_for_one_key_exactly_one_wins(
    redis_server: RedisServer, redis_prefix: str, count: int
) -> None:
    writers = [RedisConnector(url=redis_server.url, prefix=redis_prefix) for _ in range(count)]
    try:
        for n in range(ROUNDS):
            key = f"race_0_{n}"
            won, lost = _race(writers, key)
            assert len(won) == 1, f"round {n}: {len(won)} writers won {key!r}: {won}"
            assert len(lost) == count - 1, f"round {n}: {lost}"
            assert all(isinstance(e, KeyOccupied) and is_permanent(e) for e in lost), lost
            assert writers[0].get(key) == value(f"writer {won[0]}"), f"round {n}"
    finally:
        for writer in writers:
            writer.close()


def _race_in_a_process(url: str, prefix: str, barrier: Any, results: Any) -> None:
    """One writer process: each round, put the round's key when every writer is ready."""
    with RedisConnector(url=url, prefix=prefix, exclusive_stages=False) as conn:
        for n in range(ROUNDS):
            barrier.wait(BOUND)
            try:
                conn.put(f"xrace_0_{n}", value(os.getpid()))
            except KeyOccupied as exc:
                results.put((n, os.getpid(), bool(exc.permanent)))
            else:
                results.put((n, os.getpid(), None))


@pytest.mark.rule("R25")
def test_writer_processes_racing_for_one_key_exactly_one_wins(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)  # releases both writer processes into each round at once
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=_race_in_a_process, args=(redis_server.url, redis_prefix, barrier, results)
        )
        for _ in range(2)
    ]
    for proc in procs:
        proc.start()
    try:
        outcomes: dict[int, list[tuple[int, bool | None]]] = {}
        for _ in range(2 * ROUNDS):
            n, pid, permanent = results.get(timeout=6 * BOUND)
            outcomes.setdefault(n, []).append((pid, permanent))
    finally:
        for proc in procs:
            proc.join(BOUND)
    assert [p.exitcode for p in procs] == [0, 0]
    with RedisConnector(url=redis_server.url, prefix=redis_prefix) as conn:
        for n, pair in sorted(outcomes.items()):
            winners = [pid for pid, permanent in pair if permanent is None]
            assert len(winners) == 1, f"round {n}: {pair}"
            assert [permanent for _, permanent in pair if permanent is not None] == [True]
            assert conn.get(f"xrace_0_{n}") == value(winners[0]), f"round {n}"


def test_threads_of_one_connector_racing_for_one_key_exactly_one_wins(
    pair: tuple[Any, Any],
) -> None:
    conn, _ = pair
    for n in range(ROUNDS):
        key = f"race_0_{n}"
        won, lost = _race([conn, conn], key)
        assert len(won) == 1 and len(lost) == 1, f"round {n}: won {won}, lost {lost}"
        assert isinstance(lost[0], KeyOccupied) and not is_permanent(lost[0]), lost
        assert conn.get(key) == value(f"writer {won[0]}")


def _lose_the_first_reply(conn: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """*conn*'s first SET is stored by the server, then raises a timeout (its reply lost)."""
    real_set = conn.client.set
    lost_reply = threading.Event()  # set once the first SET has been "timed out"

    def set_then_time_out(*args: Any, **kwargs: Any) -> Any:
        result = real_set(*args, **kwargs)
        if not lost_reply.is_set():
            lost_reply.set()
            raise redis_parts.import_redis().TimeoutError("Timeout reading from socket")
        return result

    monkeypatch.setattr(conn.client, "set", set_then_time_out)


def test_a_retry_of_a_put_that_timed_out_after_storing_succeeds(
    pair: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server stored the value but the reply was lost: the retry (same key, same
    value) finds that value and succeeds; it neither waits for the receiver nor stores
    a second copy. A different put afterwards is still refused."""
    conn, _ = pair
    _lose_the_first_reply(conn, monkeypatch)
    with pytest.raises(redis_module.RedisConnectorError) as info:
        conn.put("r_0_0", value("once"))
    assert not is_permanent(info.value)
    conn.put("r_0_0", value("once"))  # the adapter's retry
    with pytest.raises(KeyOccupied):
        conn.put("r_0_0", value("next"))
    assert conn.get("r_0_0") == value("once")
    assert conn.get("r_0_0") is None, "one copy only"


def test_a_failed_put_publishes_nothing_and_a_lost_publish_keeps_the_put(
    redis_server: RedisServer,
    redis_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with RedisConnector(url=redis_server.url, prefix=redis_prefix, notify=True) as conn:
        keys: list[str] = []
        arrived = threading.Event()  # set by the listener for each notification

        def on_put(key: str) -> None:
            keys.append(key)
            arrived.set()

        unsubscribe = conn.subscribe(on_put)
        try:
            conn.put("a_0_0", value(1))
            assert arrived.wait(BOUND) and keys == ["a_0_0"]
            arrived.clear()
            with pytest.raises(KeyOccupied):
                conn.put("a_0_0", value(2))
            conn.put("b_0_0", value(3))  # notifications arrive in order: a_0_0 would come first
            assert arrived.wait(BOUND) and keys == ["a_0_0", "b_0_0"], keys

            def refuse(*args: Any) -> Any:
                raise redis_parts.import_redis().ConnectionError("connection reset")

            monkeypatch.setattr(conn.client, "publish", refuse)
            with caplog.at_level(logging.WARNING, logger="chunk_adapter.redis"):
                conn.put("c_0_0", value(4))  # stored: a put that raised stored nothing
            assert "could not notify" in caplog.text
            assert conn.get("c_0_0") == value(4)
        finally:
            unsubscribe()
        assert conn.get("a_0_0") == value(1) and conn.get("b_0_0") == value(3)


@pytest.mark.rule("R25")
def test_a_final_whose_key_another_redis_writer_holds_does_not_block_sending(
    pair: tuple[Any, Any],
) -> None:
    """As on shared memory: the final is refused for good, the SAVE thread moves on,
    and the other writer's value is not replaced."""
    squatter, conn = pair
    squatter.put("x_0_0", value("someone else's"))
    snd = ChunkAdapter(conn, stage_id=0)
    try:
        snd.save_async("x", "final", True)
        snd.save_async("y", "y's final", True)
        assert snd.flush(BOUND), "the SAVE thread got past x's final"
        assert conn.get("y_0_0") == value("y's final", True)
        stats = snd.stats()
        assert (stats.finals_failed, stats.finals_put) == (1, 1), stats
    finally:
        snd.stop()
    assert squatter.get("x_0_0") == value("someone else's")


def test_an_own_unread_value_is_waited_for_not_replaced(pair: tuple[Any, Any]) -> None:
    """A reused request id while this sender's previous chunk 0 is unread: the new
    chunk is retried (transient) and stored once the old one is consumed."""
    conn, reader = pair
    conn.put("r_0_0", value("old", True))
    snd = ChunkAdapter(conn, stage_id=0, put_backoff=0.001)
    try:
        snd.save_async("r", "new", True)
        wait_for(lambda: snd.stats().put_retries >= 2, "the final's put to be retried")
        assert snd.stats().finals_put == 0, "the unread value was not replaced"
        assert reader.get("r_0_0") == value("old", True), "the unread value was kept"
        assert snd.flush(BOUND)
        assert reader.get("r_0_0") == value("new", True)
        assert snd.stats().finals_put == 1
    finally:
        snd.stop()


def test_pickle_values_carry_the_header_too(redis_server: RedisServer, redis_prefix: str) -> None:
    with RedisConnector(url=redis_server.url, prefix=redis_prefix, serializer=PICKLE) as conn:
        conn.put("k", value({1, 2}))
        with pytest.raises(KeyOccupied):
            conn.put("k", value({3}))
        assert conn.get("k") == value({1, 2})


def test_a_second_copy_stored_by_a_retry_after_the_first_was_read_is_never_read(
    pair: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reply of a put is lost after the server stored it; the receiver (another
    connector) consumes the value; then the sender's retry stores it again under the
    same header. The receiver drops that second copy (before, it read the chunk twice,
    and the next stream of the request id could read it as its own), and the key is
    free for the next stream's put."""
    sender, receiver = pair
    _lose_the_first_reply(sender, monkeypatch)
    with pytest.raises(redis_module.RedisConnectorError):
        sender.put("r_0_0", value("A0"))
    assert receiver.get("r_0_0") == value("A0")  # the first copy, read before the retry
    sender.put("r_0_0", value("A0"))  # the adapter's retry: stored again, same header
    assert receiver.get("r_0_0") is None, "the retry's second copy was read again"
    sender.put("r_0_0", value("B0"))  # the next stream of r: the key is free
    assert receiver.get("r_0_0") == value("B0")
    sender.put("r_0_0", value("B0"))  # a new put with equal data is a new value, not a copy
    assert receiver.get("r_0_0") == value("B0")
