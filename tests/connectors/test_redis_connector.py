"""RedisConnector against a throwaway redis-server: round trip, prefix, TTL, notify, adapters.

Rules: a connector's get returns what was put (R2); a put that raised stored
nothing (R10); adapters over it keep the contract, polling and event-driven.
"""

from __future__ import annotations

import importlib
import json
import threading
from typing import Any

import pytest

from chunk_adapter.connectors import _redis_parts as redis_parts
from chunk_adapter.connectors.redis import (
    DEFAULT_TTL,
    HEADER_BYTES,
    MAGIC,
    RedisConnector,
    RedisConnectorError,
    RedisNotInstalled,
)
from chunk_adapter.connectors.redis_server import (
    CLIENT_HINT,
    INSTALL_HINT,
    RedisServer,
    redis_unavailable,
)
from chunk_adapter.connectors.serialization import SerializationError
from chunk_adapter.errors import ConnectorError, InvalidValue
from chunk_adapter.factory import AdapterFactory
from chunk_adapter.oracles import assert_ok
from tests._need_redis import require_redis
from tests.connectors._connector_e2e import run_end_to_end, wait_for


@pytest.fixture
def conn(redis_server: RedisServer, redis_prefix: str) -> Any:
    with RedisConnector(url=redis_server.url, prefix=redis_prefix) as made:
        yield made


@pytest.mark.rule("R2")
@pytest.mark.parametrize(
    "data",
    [None, "text", b"\x00" * 3, {"a": (1, {2})}, b"y" * (1 << 20)],
    # Not ids=repr: the 1 MiB value's repr was a 1 MiB test id, copied into every report.
    ids=["None", "text", "three-nul-bytes", "nested-dict", "one-MiB-bytes"],
)
def test_round_trip_returns_an_equal_value_and_consumes_it(conn: RedisConnector, data: Any) -> None:
    value = {"data": data, "finished": True}
    conn.put("r_0_0", value)
    assert conn.get("r_0_0") == value
    assert conn.get("r_0_0") is None, "GETDEL consumes"
    assert conn.keys() == []


def test_keys_are_namespaced_by_the_prefix(redis_server: RedisServer, redis_prefix: str) -> None:
    with (
        RedisConnector(url=redis_server.url, prefix=redis_prefix) as a,
        RedisConnector(url=redis_server.url, prefix=redis_prefix[:-1] + "-other") as b,
    ):
        a.put("k", {"data": 1, "finished": True})
        assert a.client.exists((redis_prefix + "k").encode()) == 1
        assert b.get("k") is None
        assert b.keys() == [] and a.keys() == ["k"]
        assert a.get("k") == {"data": 1, "finished": True}


def test_a_prefix_that_extends_another_never_sees_its_keys(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    """Issue 12 point 7: prefixes ``job`` and ``job1`` read each other's keys, and
    ``purge()`` of one deleted the other's ("job" + "1k_0_0" is "job1" + "k_0_0")."""
    name = redis_prefix[:-1]
    with (
        RedisConnector(url=redis_server.url, prefix=name) as job,
        RedisConnector(url=redis_server.url, prefix=name + "1") as job1,
    ):
        assert job.prefix == redis_prefix, "'job' and 'job:' are one prefix"
        try:
            job.put("1k_0_0", {"data": "job's", "finished": True})
            job1.put("k_0_0", {"data": "job1's", "finished": True})
            assert job1.keys() == ["k_0_0"] and job.keys() == ["1k_0_0"]
            assert job1.purge() == 1
            assert job.get("1k_0_0") == {"data": "job's", "finished": True}
        finally:
            job1.purge()


@pytest.mark.parametrize("prefix", ["a:b", "a:b:", ":", "::"])
def test_a_prefix_with_a_colon_inside_is_rejected_naming_the_fix(
    redis_server: RedisServer, prefix: str
) -> None:
    with pytest.raises(InvalidValue, match=r"no ':' inside.*Use e.g."):
        RedisConnector(url=redis_server.url, prefix=prefix)


def test_values_carry_the_ttl(redis_server: RedisServer, redis_prefix: str) -> None:
    with RedisConnector(url=redis_server.url, prefix=redis_prefix) as default:
        default.put("k", {"data": 1, "finished": True})
        pttl = default.client.pttl((redis_prefix + "k").encode())
        assert DEFAULT_TTL * 1000 - 60_000 < pttl <= DEFAULT_TTL * 1000
    with RedisConnector(url=redis_server.url, prefix=redis_prefix, ttl=None) as forever:
        forever.put("f", {"data": 1, "finished": True})
        assert forever.client.pttl((redis_prefix + "f").encode()) == -1  # no expiry
        assert forever.purge() == 2


def test_an_abandoned_value_expires(redis_server: RedisServer, redis_prefix: str) -> None:
    with RedisConnector(url=redis_server.url, prefix=redis_prefix, ttl=0.05) as conn:
        conn.put("gone", {"data": 1, "finished": True})
        wait_for(lambda: conn.get("gone") is None, "the 50 ms TTL to expire the value", 10.0)
        assert conn.keys() == []


@pytest.mark.parametrize("ttl", [0, -1, "10", True])
def test_a_bad_ttl_is_rejected(redis_server: RedisServer, ttl: Any) -> None:
    with pytest.raises(InvalidValue, match="ttl is the lifetime"):
        RedisConnector(url=redis_server.url, ttl=ttl)


def test_an_empty_prefix_is_rejected(redis_server: RedisServer) -> None:
    with pytest.raises(InvalidValue, match="prefix namespaces"):
        RedisConnector(url=redis_server.url, prefix="")


def test_consume_on_get_false_reads_without_deleting(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    with RedisConnector(url=redis_server.url, prefix=redis_prefix, consume_on_get=False) as c:
        c.put("k", {"data": 1, "finished": True})
        assert c.get("k") == c.get("k") == {"data": 1, "finished": True}
        assert c.purge() == 1
        assert c.keys() == []


@pytest.mark.rule("R10")
def test_an_unserialisable_value_fails_the_put_clearly_and_stores_nothing(
    conn: RedisConnector,
) -> None:
    with pytest.raises(SerializationError) as info:
        conn.put("bad_0_1", {"data": threading.Lock(), "finished": False})
    assert isinstance(info.value, ConnectorError)
    assert "'bad_0_1'" in str(info.value) and "nothing was stored" in str(info.value)
    assert conn.keys() == []


def test_a_pluggable_serializer_is_used(redis_server: RedisServer, redis_prefix: str) -> None:
    with RedisConnector(url=redis_server.url, prefix=redis_prefix, serializer=json) as c:
        c.put("k", {"data": [1], "finished": True})
        stored = c.client.get((redis_prefix + "k").encode())
        assert stored[HEADER_BYTES:] == b'{"data": [1], "finished": true}'
        assert stored[:HEADER_BYTES].startswith(MAGIC + c.writer), "header: who put it"
        assert c.get("k") == {"data": [1], "finished": True}


@pytest.mark.rule("R2")
@pytest.mark.parametrize("key", ["", "ключ", "\udcff", "*?[]\\", "a b\nc"])
def test_any_string_key_round_trips(conn: RedisConnector, key: str) -> None:
    conn.put(key, {"data": key, "finished": False})
    assert conn.keys() == [key]
    assert conn.get(key) == {"data": key, "finished": False}


def test_a_server_that_is_down_fails_the_call_naming_the_key() -> None:
    with RedisConnector(url="redis://127.0.0.1:9/0", socket_timeout=1.0) as dead:
        with pytest.raises(RedisConnectorError, match=r"put\('k'\) on Redis failed"):
            dead.put("k", {"data": 1, "finished": True})
        with pytest.raises(RedisConnectorError, match=r"get\('k'\)"):
            dead.get("k")


def test_after_close_calls_fail_and_close_is_idempotent(conn: RedisConnector) -> None:
    conn.close()
    conn.close()
    with pytest.raises(ConnectorError, match="closed"):
        conn.put("k", {"data": 1, "finished": True})


def test_missing_redis_py_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def no_redis(name: str, *args: Any) -> Any:
        if name == "redis":
            raise ImportError("No module named 'redis'")
        return real(name, *args)

    monkeypatch.setattr(redis_parts.importlib, "import_module", no_redis)
    with pytest.raises(RedisNotInstalled, match=r"pip install 'chunk-adapter\[redis\]'"):
        RedisConnector()


@pytest.mark.parametrize("ci", [None, "1"])
def test_missing_redis_server_skips_locally_and_fails_in_ci(
    monkeypatch: pytest.MonkeyPatch, ci: str | None
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("REDIS_SERVER", raising=False)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    assert redis_unavailable() == INSTALL_HINT
    expected = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(expected, match="apt-get install redis-server"):
        require_redis()
    assert "pip install" in CLIENT_HINT


# ------------------------------------------------------------------- notify
def test_notify_offers_subscribe_and_calls_back_after_the_value_is_readable(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    with (
        RedisConnector(url=redis_server.url, prefix=redis_prefix, notify=True) as sender,
        RedisConnector(url=redis_server.url, prefix=redis_prefix, notify=True) as receiver,
    ):
        got: list[tuple[str, Any]] = []
        arrived = threading.Event()

        def on_put(key: str) -> None:
            got.append((key, receiver.get(key)))  # readable when notified
            arrived.set()

        unsubscribe = receiver.subscribe(on_put)
        sender.put("n_1_0", {"data": "hello", "finished": False})
        assert arrived.wait(10), "no notification within 10 s"
        assert got == [("n_1_0", {"data": "hello", "finished": False})]
        unsubscribe()
        unsubscribe()  # idempotent
        threads = [t.name for t in threading.enumerate()]
        assert redis_parts.NOTIFY_THREAD not in threads, "unsubscribe stops the listener"


def test_without_notify_there_is_no_subscribe(conn: RedisConnector) -> None:
    assert not hasattr(conn, "subscribe")


# --------------------------------------------------------------- adapters on it
@pytest.mark.rule("R2", "R9", "R11", "R14", "R23")
@pytest.mark.parametrize("notify", [False, True], ids=["polling", "event-driven"])
def test_adapters_over_redis_keep_the_contract(
    adapter_factory: AdapterFactory,
    redis_server: RedisServer,
    redis_prefix: str,
    notify: bool,
    seed: int,
) -> None:
    with RedisConnector(url=redis_server.url, prefix=redis_prefix, notify=notify) as conn:
        history, got = run_end_to_end(adapter_factory, conn, seed)
        assert_ok(history, quiescent=True, put_tries=3, context=f"redis end to end, seed={seed}")
        assert got, f"nothing arrived (seed={seed})"
        assert conn.keys() == [], f"keys left after every final arrived (seed={seed})"


def test_notifications_resume_after_the_listener_connection_is_killed(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    """Pub/sub is at most once: a put during the outage may go unnoticed, later ones do not."""
    with RedisConnector(url=redis_server.url, prefix=redis_prefix, notify=True) as conn:
        keys: list[str] = []
        arrived = threading.Event()

        def on_put(key: str) -> None:
            keys.append(key)
            arrived.set()

        unsubscribe = conn.subscribe(on_put)
        try:
            channel = conn.channel.encode()

            def subscribers() -> int:
                return int(dict(conn.client.pubsub_numsub(channel))[channel])

            def listener_ids() -> set[str]:
                return {str(c["id"]) for c in conn.client.client_list(_type="pubsub")}

            assert subscribers() == 1
            before = listener_ids()
            assert conn.client.client_kill_filter(_type="pubsub") == 1
            wait_for(
                lambda: bool(listener_ids() - before) and subscribers() == 1,
                "the listener to reconnect and resubscribe",
            )
            conn.put("after_1_0", {"data": 1, "finished": True})
            assert arrived.wait(10), "no notification after the listener reconnected"
            assert keys[-1] == "after_1_0"
        finally:
            unsubscribe()
        conn.purge()


def test_a_server_without_getdel_is_read_with_get_and_del_in_one_transaction(
    conn: RedisConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[bytes] = []

    def old_server(name: bytes) -> Any:
        calls.append(name)
        raise redis_parts.import_redis().ResponseError("unknown command 'GETDEL'")

    monkeypatch.setattr(conn.client, "getdel", old_server)
    for i in range(2):
        conn.put(f"k{i}", {"data": i, "finished": True})
        assert conn.get(f"k{i}") == {"data": i, "finished": True}
        assert conn.get(f"k{i}") is None
    assert len(calls) == 1, "GETDEL is tried once, then the fallback is remembered"
    assert conn.keys() == []
