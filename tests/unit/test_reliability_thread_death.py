"""Issue 27 point 2 and R30: no background thread of the reference adapter dies silently.

Before: ``SystemExit`` (or ``KeyboardInterrupt``, or ``asyncio.CancelledError``)
raised by ``build_payload``, ``put`` or ``get`` ended the SAVE or RECV thread in
silence; the adapter went on accepting ``save_async`` and ``load_async`` and
delivered nothing, ``flush`` waited out its timeout. Now a cancellation is that
call's failure (survived and counted, like an ``Exception``), and a request to
end makes the thread end loudly: CRITICAL log, ``flush`` False at once, and
``AdapterFailed`` naming the cause from the next ``save_async``/``load_async``.
Each test synchronises on what the connector or build saw (events), never on
time.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from chunk_adapter import AdapterFailed, ChunkAdapter, MemoryConnector
from tests.unit._rig import chunk
from tests.unit._wait import Inbox

WAIT = 10.0  # generous: every wait below ends on an event well before


def _build_raising(exc: BaseException, on: Any) -> Any:
    def build(request_id: str, snap: Any, is_final: bool) -> Any:
        if snap == on:
            raise exc
        return snap

    return build


@pytest.mark.rule("R30")
@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt()], ids=repr)
def test_a_build_that_asks_to_exit_ends_the_save_thread_loudly(
    exc: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = ChunkAdapter(MemoryConnector(), stage_id=0, build_payload=_build_raising(exc, "x"))
    try:
        adapter.save_async("r", "x", False)
        assert adapter.flush(WAIT) is False, "flush must not report a dead thread's work done"
        with pytest.raises(AdapterFailed, match=type(exc).__name__) as raised:
            adapter.save_async("r", "y", True)
        assert "SAVE thread" in str(raised.value) and "build" in str(raised.value)
        with pytest.raises(AdapterFailed, match=type(exc).__name__):
            adapter.load_async("other")
        critical = [r for r in caplog.records if r.levelno == logging.CRITICAL]
        assert critical and type(exc).__name__ in critical[0].getMessage()
        assert adapter.poll_ready() == {}, "the calls that hand out or forget still work"
    finally:
        adapter.stop()


class _GetExits(MemoryConnector):
    """A connector whose get of *key* raises SystemExit, once it has been put."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key
        self.raised = threading.Event()  # set just before the get raises

    def get(self, key: str) -> dict[str, Any] | None:
        if key == self.key and super().get(key) is not None:
            self.raised.set()
            raise SystemExit("get gave up")
        return super().get(key)


@pytest.mark.rule("R30")
def test_a_get_that_asks_to_exit_ends_the_recv_thread_loudly() -> None:
    conn = _GetExits("r_0_0")
    rcv = ChunkAdapter(conn, stage_id=1, event_driven=False)
    try:
        conn.put("r_0_0", chunk("a", True))
        rcv.load_async("r")
        assert conn.raised.wait(WAIT), "the RECV thread never got the key"
        for thread in rcv._threads:  # the RECV thread ends; the SAVE thread idles on
            if thread.name == "chunk-adapter-recv":
                thread.join(WAIT)
                assert not thread.is_alive()
        with pytest.raises(AdapterFailed, match="RECV thread died of SystemExit"):
            rcv.load_async("next")
    finally:
        rcv.stop()


@pytest.mark.rule("R30", "R22")
def test_a_cancelled_build_is_that_chunks_failure_and_the_stream_goes_on() -> None:
    conn = MemoryConnector()
    build = _build_raising(asyncio.CancelledError(), "b")
    snd = ChunkAdapter(conn, stage_id=0, build_payload=build)
    rcv = ChunkAdapter(conn, stage_id=1)
    inbox = Inbox(rcv)
    try:
        rcv.load_async("r")
        for data, final in (("a", False), ("b", False), ("c", False), ("end", True)):
            snd.save_async("r", data, final)
        assert snd.flush(WAIT) is True
        inbox.wait_final("r", timeout=WAIT)
        assert inbox.data("r") == ["a", "c", "end"], "only the cancelled chunk is dropped"
        assert snd.stats().build_failures == 1
        snd.save_async("s", "z", True)  # still running: no AdapterFailed
    finally:
        snd.stop()
        rcv.stop()


@pytest.mark.rule("R30", "R10")
def test_a_cancelled_put_is_retried_like_a_failed_one() -> None:
    class CancelsOnce(MemoryConnector):
        def __init__(self) -> None:
            super().__init__()
            self.cancelled = False

        def put(self, key: str, value: dict[str, Any]) -> None:
            if not self.cancelled:
                self.cancelled = True
                raise asyncio.CancelledError
            super().put(key, value)

    conn = CancelsOnce()
    snd = ChunkAdapter(conn, stage_id=0, put_backoff=0.001)
    try:
        snd.save_async("r", "a", True)
        assert snd.flush(WAIT) is True
        assert conn.get("r_0_0") == chunk("a", True)
        assert snd.stats().put_retries == 1
    finally:
        snd.stop()
