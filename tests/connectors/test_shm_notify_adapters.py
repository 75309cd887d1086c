"""SharedMemoryConnector: the doorbell (notify/subscribe), and adapters running over it.

Rules: an adapter over the connector keeps the whole contract (oracle-checked);
an unserialisable chunk is dropped and the stream stays contiguous (R9, R10, R22).
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

import pytest

from chunk_adapter.connectors.doorbell import NOTIFY_THREAD, Doorbell
from chunk_adapter.connectors.shm import SharedMemoryConnector
from chunk_adapter.factory import AdapterFactory
from chunk_adapter.oracles import assert_ok
from tests.connectors._connector_e2e import run_end_to_end, wait_for


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
