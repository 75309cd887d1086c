"""Issue 12 points 1, 2 and 7 on the real connectors: nothing shared or run by accident.

Before: shared memory and Redis unpickled whatever sat under a key (pickle was
the default), a segment planted by another user was read, a doorbell directory
made in advance by another user was trusted, and a final whose payload could
not be serialised (or whose key someone else held) was retried forever on the
only SAVE thread. Now the default serializer cannot run code, foreign segments
and directories are refused, and such a put fails at once (R25): the final
goes out with data None and the other requests keep flowing.

Tests that plant a file owned by another user need root (they chown).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import (
    PICKLE,
    Doorbell,
    KeyOccupied,
    RedisConnector,
    SerializationError,
    SharedMemoryConnector,
)
from chunk_adapter.connectors.redis_server import RedisServer
from chunk_adapter.errors import ConnectorError

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="plants files of another user (chown): root")
NOBODY = 65534
RAN: list[str] = []  # what the planted payload's code appended: must stay empty


def _ran(tag: str) -> None:
    RAN.append(tag)


class Planted:
    """Unpickling it calls _ran: a stand-in for arbitrary code."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (_ran, ("planted code ran",))


@pytest.fixture(autouse=True)
def nothing_ran() -> Iterator[None]:
    RAN.clear()
    yield
    assert RAN == [], "a planted payload ran code in the reader"


def _wait(predicate: Any, what: str, timeout: float = 10.0) -> None:
    import time

    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.002)


# ------------------------------------------------------------------ serializer
def test_the_default_serializer_is_safe_and_round_trips_the_wire_types() -> None:
    from chunk_adapter.connectors import SAFE

    with SharedMemoryConnector("t" + os.urandom(5).hex()) as conn:
        assert conn.serializer is SAFE
    value = {"data": {"t": (1, b"\x00"), "s": {2}, 3: [None, 1.5]}, "finished": True}
    assert SAFE.loads(SAFE.dumps(value)) == value


@pytest.mark.rule("R2")
def test_a_pickle_planted_in_shared_memory_is_not_run(shm_namespace: str) -> None:
    with (
        SharedMemoryConnector(shm_namespace, serializer=PICKLE) as attacker,
        SharedMemoryConnector(shm_namespace) as reader,
    ):
        attacker.put("r_0_0", {"data": Planted(), "finished": True})
        with pytest.raises(SerializationError, match="same serializer"):
            reader.get("r_0_0")


@needs_root
def test_a_segment_another_user_planted_is_never_read(shm_namespace: str) -> None:
    with (
        SharedMemoryConnector(shm_namespace, serializer=PICKLE) as attacker,
        SharedMemoryConnector(shm_namespace, serializer=PICKLE) as reader,
    ):
        attacker.put("r_0_0", {"data": Planted(), "finished": True})
        path = f"/dev/shm/{reader.segment_name('r_0_0')}"
        os.chown(path, NOBODY, NOBODY)
        try:
            with pytest.raises(ConnectorError, match=r"owned by uid 65534.*not read"):
                reader.get("r_0_0")
            assert os.path.exists(path), "not consumed either"
            assert reader.purge() == 0, "another user's segment is not ours to remove"
        finally:
            os.unlink(path)


def test_a_segment_open_to_other_users_is_never_read(shm_namespace: str) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        conn.put("r_0_0", {"data": 1, "finished": True})
        path = f"/dev/shm/{conn.segment_name('r_0_0')}"
        os.chmod(path, 0o666)
        try:
            with pytest.raises(ConnectorError, match="mode 0666"):
                conn.get("r_0_0")
        finally:
            os.unlink(path)


@needs_root
def test_a_doorbell_directory_another_user_made_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    short = tempfile.mkdtemp(prefix="cas", dir="/tmp")  # socket paths must stay short
    monkeypatch.setattr(tempfile, "tempdir", short)
    bell = Doorbell("ns")
    parent = os.path.dirname(bell.directory)
    os.makedirs(bell.directory, mode=0o777)
    os.chown(parent, NOBODY, NOBODY)
    with pytest.raises(ConnectorError, match=r"belongs to uid 65534.*Fix: remove it"):
        bell.subscribe(lambda key: None)
    listener = os.path.join(bell.directory, "spy")
    import socket

    spy = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    spy.bind(listener)
    spy.setblocking(False)
    try:
        bell.ring("secret_0_0")  # refused: the key is not sent into another user's directory
        with pytest.raises(BlockingIOError):
            spy.recv(100)
    finally:
        spy.close()
        bell.close()
        shutil.rmtree(short)


def test_the_default_namespace_is_private_to_user_and_process_group() -> None:
    from chunk_adapter.connectors.shm import default_namespace

    assert default_namespace() == f"ca{os.geteuid()}g{os.getpgrp()}"
    with SharedMemoryConnector() as conn:
        assert conn.namespace == default_namespace()


# ------------------------------------------------------ R25 on a real connector
@pytest.mark.rule("R25")
def test_an_unserialisable_final_over_shm_does_not_stop_other_requests(
    shm_namespace: str,
) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        snd = ChunkAdapter(conn, stage_id=0)
        rcv = ChunkAdapter(conn, stage_id=1)
        got: dict[str, list[Any]] = {}
        try:
            for rid in ("bad", "good"):
                rcv.load_async(rid)
            snd.save_async("bad", {"fn": lambda: 1}, True)  # deepcopy copes; no serializer does
            for i in range(10):
                snd.save_async("good", i, False)
            snd.save_async("good", "end", True)

            def done() -> bool:
                for rid, values in rcv.poll_ready().items():
                    got.setdefault(rid, []).extend(values)
                return all(got.get(r) and got[r][-1]["finished"] for r in ("bad", "good"))

            _wait(done, "both finals", timeout=5.0)
            assert [v["data"] for v in got["good"]] == [*range(10), "end"]
            assert got["bad"] == [{"data": None, "finished": True}]
            assert snd.stats().finals_degraded == 1
        finally:
            snd.stop()
            rcv.stop()


@pytest.mark.rule("R25")
def test_a_final_whose_key_another_connector_holds_does_not_block_sending(
    shm_namespace: str,
) -> None:
    with (
        SharedMemoryConnector(shm_namespace) as squatter,
        SharedMemoryConnector(shm_namespace) as conn,
    ):
        squatter.put("x_0_0", {"data": "someone else's", "finished": False})
        with pytest.raises(KeyOccupied) as info:
            conn.put("x_0_0", {"data": 1, "finished": True})
        assert info.value.permanent
        snd = ChunkAdapter(conn, stage_id=0)
        try:
            snd.save_async("x", "final", True)
            snd.save_async("y", "y's final", True)
            assert snd.flush(5.0), "the SAVE thread got past x's final"
            assert conn.get("y_0_0") == {"data": "y's final", "finished": True}
            stats = snd.stats()
            assert (stats.finals_failed, stats.finals_put) == (1, 1), stats
        finally:
            snd.stop()
        assert squatter.get("x_0_0") == {"data": "someone else's", "finished": False}


# ----------------------------------------------------------------------- Redis
def test_a_pickle_planted_in_redis_is_not_run(redis_server: RedisServer, redis_prefix: str) -> None:
    with RedisConnector(url=redis_server.url, prefix=redis_prefix) as conn:
        conn.client.set(
            (redis_prefix + "r_0_0").encode(), PICKLE.dumps({"data": Planted(), "finished": True})
        )
        with pytest.raises(SerializationError, match="same serializer"):
            conn.get("r_0_0")


@pytest.mark.rule("R25")
def test_redis_with_a_password(redis_server: RedisServer) -> None:
    """The password travels in url=; a wrong one is a permanent error: the adapter
    fails that final at once instead of retrying it forever."""
    with RedisServer(password="s3cret/:@") as locked:
        assert ":s3cret%2F%3A%40@" in locked.url
        with RedisConnector(url=locked.url, prefix="pw") as conn:
            conn.put("k", {"data": 1, "finished": True})
            assert conn.get("k") == {"data": 1, "finished": True}
        wrong = locked.url.replace("s3cret", "guess")
        with RedisConnector(url=wrong, prefix="pw") as conn:
            with pytest.raises(ConnectorError) as info:
                conn.put("k", {"data": 1, "finished": True})
            assert getattr(info.value, "permanent", False), info.value
            snd = ChunkAdapter(conn, stage_id=0)
            try:
                snd.save_async("r", "end", True)
                assert snd.flush(5.0)
                assert snd.stats().finals_failed == 1
            finally:
                snd.stop()


@pytest.mark.rule("R25")
def test_a_value_over_max_value_bytes_is_refused_for_good(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    from chunk_adapter.connectors import ValueTooLarge, is_permanent

    with RedisConnector(url=redis_server.url, prefix=redis_prefix, max_value_bytes=1000) as conn:
        with pytest.raises(ValueTooLarge, match=r"'big_0_0'.*over max_value_bytes=1000") as info:
            conn.put("big_0_0", {"data": "x" * 2000, "finished": True})
        assert is_permanent(info.value) and conn.keys() == []
        snd = ChunkAdapter(conn, stage_id=0)
        try:
            snd.save_async("big", "x" * 2000, True)  # refused, then put with data None
            assert snd.flush(5.0)
            assert conn.get("big_0_0") == {"data": None, "finished": True}
            assert snd.stats().finals_degraded == 1
        finally:
            snd.stop()
