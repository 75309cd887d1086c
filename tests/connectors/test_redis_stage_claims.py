"""R32 on Redis: two pipelines under one prefix are refused, never mixed.

Every pipeline on a Redis server shares the default prefix. The second process to
write (or consume) a stage's keys under a prefix gets ``NamespaceShared`` naming the
holder; the claim expires a few seconds after its holder's last call, so a sender
that died does not block its restart for longer (until then the refusal is
transient: the adapter retries it). Another process's claim is planted the way its
connector writes one (same key, another owner), so no test waits on a real
process's expiry.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from chunk_adapter import ChunkAdapter
from chunk_adapter.bed.waiting import wait_until
from chunk_adapter.connectors import NamespaceShared, RedisConnector, _redis_claims, is_permanent
from chunk_adapter.connectors._redis_claims import CLAIM_MARK, CLAIM_TTL
from chunk_adapter.connectors.redis_server import RedisServer
from chunk_adapter.errors import InvalidType

OTHER = b"otherhost:4242:0123456789abcdef"  # another process's claim, as it writes one


def plant(conn: RedisConnector, role: str, stage: int, ms: int = 60_000) -> None:
    name = f"{conn.prefix}{CLAIM_MARK}{role}:{stage}".encode()
    conn.client.set(name, OTHER, px=ms)


def stores(conn: RedisConnector, key: str) -> Callable[[], bool]:
    """A wait predicate: put a final under *key*; ``False`` while the put is refused."""

    def stored() -> bool:
        try:
            conn.put(key, {"data": 1, "finished": True})
        except NamespaceShared:
            return False
        return True

    return stored


@pytest.fixture
def conn(redis_server: RedisServer, redis_prefix: str) -> Any:
    with RedisConnector(url=redis_server.url, prefix=redis_prefix) as c:
        yield c
        c.purge()  # what a test stored (the prefix fixture checks nothing is left)


def test_r32_a_stage_another_process_writes_is_refused_naming_it(conn: RedisConnector) -> None:
    plant(conn, "put", 0)
    with pytest.raises(NamespaceShared) as caught:
        conn.put("a_0_0", {"data": 1, "finished": True})
    message = str(caught.value)
    assert "process 4242 on otherhost already writes stage 0" in message
    assert "prefix=" in message and "exclusive_stages=False" in message  # the fixes
    assert not is_permanent(caught.value)  # its holder may have died: retried
    assert conn.keys() == [], "nothing stored; claims and marks are not listed as keys"
    with pytest.raises(NamespaceShared, match="is shared by two pipelines"):
        conn.put("a_1_0", {"data": 1, "finished": True})  # the whole prefix is refused now


def test_r32_the_shared_mark_lasts_while_the_refused_process_runs(
    conn: RedisConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pipeline A (this process) holds stage 0; pipeline B's sender (another process) was
    refused and marked the prefix: A is refused too while the mark lasts, and goes on once
    B stopped calling for MARK_TTL."""
    monkeypatch.setattr(_redis_claims, "SHARED_LOOK", 0.0)  # every call looks
    conn.put("a_0_0", {"data": 1, "finished": False})
    mark = f"{conn.prefix}{_redis_claims.SHARED_MARK}".encode()
    conn.client.hset(mark, OTHER + b"|put-0", b"host:1:x")
    conn.client.pexpire(mark, 300)  # B stopped: its mark runs out
    with pytest.raises(NamespaceShared, match="process 4242 on otherhost refused put-0"):
        conn.put("a_0_1", {"data": 2, "finished": True})
    wait_until(stores(conn, "a_0_1"), 30.0, "the shared mark ran out and A went on")
    assert sorted(conn.keys()) == ["a_0_0", "a_0_1"]


def test_r32_a_second_consumer_is_refused_and_reads_nothing(
    redis_server: RedisServer, conn: RedisConnector
) -> None:
    conn.put("a_0_0", {"data": 1, "finished": True})
    plant(conn, "get", 0)
    with pytest.raises(NamespaceShared, match="already consumes stage 0"):
        conn.get("a_0_0")
    with pytest.raises(NamespaceShared, match="is shared by two pipelines"):
        conn.get("a_0_0")
    assert conn.contains("a_0_0"), "the refused get consumed nothing"
    with RedisConnector(url=redis_server.url, prefix=conn.prefix, consume_on_get=False) as keeper:
        assert keeper.get("a_0_0") == {"data": 1, "finished": True}  # keeping claims nothing


def test_r32_one_process_holds_a_stage_for_all_its_connectors(
    redis_server: RedisServer, conn: RedisConnector
) -> None:
    conn.put("a_0_0", {"data": 1, "finished": False})
    with RedisConnector(url=redis_server.url, prefix=conn.prefix) as again:
        again.put("a_0_1", {"data": 2, "finished": True})
        assert again.get("a_0_0") == {"data": 1, "finished": False}
    assert sorted(conn.keys()) == ["a_0_1"]


def test_r32_a_dead_holders_claim_expires_and_the_stage_is_taken(conn: RedisConnector) -> None:
    plant(conn, "put", 0, ms=50)  # a process that died: its claim runs out
    wait_until(stores(conn, "a_0_0"), 5 * CLAIM_TTL, "the expired claim freed stage 0")
    assert conn.keys() == ["a_0_0"]


def test_r32_several_processes_may_serve_a_stage_on_purpose(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    with RedisConnector(url=redis_server.url, prefix=redis_prefix, exclusive_stages=False) as c:
        plant(c, "put", 0)
        c.put("a_0_0", {"data": 1, "finished": True})
        plant(c, "get", 0)
        assert c.get("a_0_0") == {"data": 1, "finished": True}


def test_r32_exclusive_stages_must_be_a_bool(redis_server: RedisServer) -> None:
    with pytest.raises(InvalidType, match="exclusive_stages must be True or False, got 1"):
        RedisConnector(url=redis_server.url, exclusive_stages=1)  # type: ignore[arg-type]


def test_r32_an_adapter_whose_stage_is_taken_never_mixes_and_says_why(
    conn: RedisConnector, caplog: pytest.LogCaptureFixture
) -> None:
    """The sender of a second pipeline: its puts are refused and retried, nothing of
    it stored; a non-final is dropped at the end of its retry window, counted."""
    plant(conn, "put", 0)
    adapter = ChunkAdapter(conn, stage_id=0, put_retry_window=0.05)
    try:
        adapter.save_async("a", {"n": 0}, False)
        wait_until(lambda: adapter.stats().dropped >= 1, 10.0, "the refused chunk was dropped")
    finally:
        adapter.stop()
    assert conn.keys() == []
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "already writes stage 0" in said or "refused put-0" in said, said


def test_r32_a_holder_of_this_host_that_died_is_taken_over_at_once(conn: RedisConnector) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    name = f"{conn.prefix}{CLAIM_MARK}put:0".encode()
    conn.client.set(name, f"{socket.gethostname()}:{gone.pid}:dead".encode(), px=60_000)
    conn.put("a_0_0", {"data": 1, "finished": True})  # a sender killed and started again
    assert conn.keys() == ["a_0_0"]


def test_r32_an_idle_holder_keeps_its_stage(
    conn: RedisConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heartbeat renews a claim however long its process idles: a claim living 1 s
    renewed every 0.05 s is still there 2.5 s later."""
    monkeypatch.setattr(_redis_claims, "CLAIM_TTL", 1.0)
    monkeypatch.setattr(_redis_claims, "RENEW_EVERY", 0.05)
    conn.put("a_0_0", {"data": 1, "finished": False})
    name = f"{conn.prefix}{CLAIM_MARK}put:0".encode()
    start = time.monotonic()
    wait_until(
        lambda: time.monotonic() - start > 2.5 or not conn.client.exists(name),
        10.0,
        "2.5 s passed or the claim expired",
    )
    assert conn.client.exists(name), "the idle holder's claim expired"
    plant_owner = conn.client.get(name)
    assert plant_owner is not None and plant_owner != OTHER


def test_r32_closing_the_last_connector_ends_the_claim(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    with RedisConnector(url=redis_server.url, prefix=redis_prefix) as c:
        c.put("a_0_0", {"data": 1, "finished": True})
        name = f"{c.prefix}{CLAIM_MARK}put:0".encode()
        assert c.client.exists(name)
        c.purge()
    with RedisConnector(url=redis_server.url, prefix=redis_prefix) as look:
        assert not look.client.exists(name), "the claim outlived its last connector"
