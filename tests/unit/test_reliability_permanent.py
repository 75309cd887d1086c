"""Issue 12 point 2 and R25: an error retrying cannot fix fails the chunk at once.

Before: a final whose payload the serializer rejected was retried forever on the
only SAVE thread, so every other request got 0 of its chunks; a non-final was
tried ``put_tries`` times for nothing. Now such a put is tried once: a non-final
is dropped, a final goes out with data ``None`` (so the stream still ends), and
a final refused even then is given up; each is counted and logged, and the
other requests keep flowing. Transient errors are still retried (R10), and
``put_retry_window`` stretches a non-final's retries over a short outage.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import MemoryConnector, SerializationError
from chunk_adapter.errors import ConnectorError
from tests.connectors._outage import Outage
from tests.unit._rig import chunk
from tests.unit._wait import Inbox, wait_until

POISON = "poison"


class KeyHeld(ConnectorError):
    """What a third-party connector raises for a key someone else holds (duck-typed R25)."""

    permanent = True


class Refusing:
    """Refuses for good every put whose data is POISON, and every put of a key in
    ``refused_keys``; counts each try per key."""

    def __init__(self, inner: MemoryConnector, *refused_keys: str) -> None:
        self.inner = inner
        self.refused_keys = set(refused_keys)
        # Guards tries; taken by every put, never held while calling out.
        self._lock = threading.Lock()
        self.tries: dict[str, int] = {}

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self.tries[key] = self.tries.get(key, 0) + 1
        if value["data"] == POISON:
            raise SerializationError(f"put({key!r}): cannot serialise {POISON!r}")
        if key in self.refused_keys:
            raise KeyHeld(f"put({key!r}): this key is held by someone else")
        self.inner.put(key, value)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.inner.get(key)


def _pair(conn: Any, **options: Any) -> tuple[ChunkAdapter, ChunkAdapter, Inbox]:
    snd = ChunkAdapter(conn, stage_id=0, **options)
    rcv = ChunkAdapter(conn, stage_id=1)
    return snd, rcv, Inbox(rcv)


@pytest.mark.rule("R25")
def test_an_unsendable_final_does_not_stop_other_requests(caplog: pytest.LogCaptureFixture) -> None:
    conn = Refusing(MemoryConnector())
    snd, rcv, inbox = _pair(conn)
    try:
        rcv.load_async("bad")
        rcv.load_async("good")
        snd.save_async("bad", "b0", False)
        snd.save_async("bad", POISON, True)  # its payload can never be serialised
        for i in range(10):
            snd.save_async("good", i, False)
        snd.save_async("good", "end", True)
        inbox.wait_final("good", "bad", timeout=5.0)
        assert inbox.of("good") == [chunk(i) for i in range(10)] + [chunk("end", True)]
        assert inbox.of("bad") == [chunk("b0"), chunk(None, True)], "the stream still ends"
        assert conn.tries["bad_0_1"] == 2, "one refused try, then the None final"
        stats = snd.stats()
        assert (stats.put_rejected, stats.finals_degraded, stats.finals_failed) == (1, 1, 0)
        assert stats.put_retries == 0 and stats.finals_put == 2
        assert any(
            r.levelno == logging.ERROR and "bad_0_1" in r.getMessage() for r in caplog.records
        ), "the refused final is logged at ERROR"
    finally:
        snd.stop()
        rcv.stop()


@pytest.mark.rule("R25", "R9")
def test_a_refused_non_final_is_dropped_at_once_and_its_id_reused() -> None:
    conn = Refusing(MemoryConnector())
    snd, rcv, inbox = _pair(conn, put_tries=5)
    try:
        rcv.load_async("r")
        for data in ("a", POISON, "b"):
            snd.save_async("r", data, False)
        snd.save_async("r", "end", True)
        inbox.wait_final("r", timeout=5.0)
        assert inbox.data("r") == ["a", "b", "end"]
        assert conn.tries["r_0_1"] == 2, "the refused chunk tried once, then b took id 1"
        stats = snd.stats()
        assert (stats.put_rejected, stats.dropped_put_rejected, stats.put_retries) == (1, 1, 0)
        assert stats.dropped == 1
    finally:
        snd.stop()
        rcv.stop()


@pytest.mark.rule("R25", "R11")
def test_a_final_refused_even_with_none_is_given_up_and_forgotten() -> None:
    conn = Refusing(MemoryConnector(), "x_0_1")  # someone else holds x's final key
    snd, rcv, inbox = _pair(conn)
    try:
        rcv.load_async("other")
        snd.save_async("x", "x0", False)
        snd.save_async("x", "xf", True)
        snd.save_async("other", "o", True)
        inbox.wait_final("other", timeout=5.0)
        assert snd.flush(5.0)
        stats = snd.stats()
        assert (stats.put_rejected, stats.finals_degraded, stats.finals_failed) == (2, 1, 1)
        assert stats.open_streams == 0, "the given-up stream is forgotten (R11)"
        conn.refused_keys.clear()
        rcv.load_async("x")
        snd.save_async("x", "new", True)  # a new stream starts at chunk 0 again
        wait_until(lambda: conn.inner.get("x_0_0") == chunk("new", True), 5.0, "x's new stream")
    finally:
        snd.stop()
        rcv.stop()


@pytest.mark.rule("R10")
def test_transient_errors_are_still_retried_and_a_final_until_it_succeeds() -> None:
    from chunk_adapter.connectors.base import is_permanent

    assert not is_permanent(ConnectorError("connection reset"))
    assert is_permanent(SerializationError("x")) and is_permanent(PermissionError("x"))

    class Flaky(Refusing):
        def put(self, key: str, value: dict[str, Any]) -> None:
            with self._lock:
                self.tries[key] = self.tries.get(key, 0) + 1
                n = self.tries[key]
            if n <= 6:
                raise ConnectorError(f"put({key!r}): try {n} fails")
            self.inner.put(key, value)

    conn = Flaky(MemoryConnector())
    snd, rcv, inbox = _pair(conn)
    try:
        rcv.load_async("r")
        snd.save_async("r", "end", True)
        inbox.wait_final("r", timeout=5.0)
        assert conn.tries["r_0_0"] == 7
        assert snd.stats().put_retries == 6 and snd.stats().put_rejected == 0
    finally:
        snd.stop()
        rcv.stop()


@pytest.mark.rule("R10", "R25")
def test_put_retry_window_carries_a_non_final_over_a_short_outage() -> None:
    """With the default schedule a non-final gives up ~15 ms after its first try;
    with put_retry_window=1.0 its last try comes 1 s after the first."""
    conn = Outage(MemoryConnector())
    snd, rcv, inbox = _pair(conn, put_retry_window=1.0)
    try:
        rcv.load_async("r")
        conn.down.set()
        snd.save_async("r", "during the outage", False)
        wait_until(lambda: conn.failures >= 2, 5.0, "two quick failed tries")
        conn.down.clear()  # the store is back before the last try
        snd.save_async("r", "end", True)
        inbox.wait_final("r", timeout=5.0)
        assert inbox.data("r") == ["during the outage", "end"]
        assert snd.stats().dropped_put_failed == 0
    finally:
        snd.stop()
        rcv.stop()


def test_backoff_schedule() -> None:
    adapter = ChunkAdapter(MemoryConnector(), stage_id=0, put_retry_window=1.0)
    try:
        assert [adapter._backoff(t, False) for t in (1, 2)] == [0.005, 0.995]
        assert [adapter._backoff(t, True) for t in (1, 2, 3, 10)] == [0.005, 0.01, 0.02, 0.1]
    finally:
        adapter.stop()
