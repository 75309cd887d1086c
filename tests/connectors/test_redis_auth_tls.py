"""Issue 12 on Redis: authentication, TLS and namespaces, against real redis-servers.

Passwords and TLS travel in ``url=`` (``redis://:pw@...``, ``redis://user:pw@...``,
``rediss://...?ssl_ca_certs=...``); what no retry can fix (a wrong password, a
missing ACL permission, an untrusted certificate) is a permanent error (R25).
Prefixes cannot prefix-collide, and ``purge()`` of one never touches another's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import RedisConnector, is_permanent
from chunk_adapter.connectors.redis import RedisConnectorError
from chunk_adapter.connectors.redis_server import RedisServer
from tests._need_redis import require_redis
from tests.connectors._connector_e2e import wait_for

BOUND = 10.0  # seconds any wait below may take; never expected to be reached
PASSWORD = "tls s3cret/:@"


@pytest.fixture(scope="module")
def tls_server() -> Iterator[RedisServer]:
    """A redis-server that speaks TLS only and requires a password."""
    require_redis()
    with RedisServer(tls=True, password=PASSWORD) as server:
        yield server


def value(data: Any, finished: bool = True) -> dict[str, Any]:
    return {"data": data, "finished": finished}


def test_tls_with_a_password_round_trips_through_url(tls_server: RedisServer) -> None:
    assert tls_server.url.startswith("rediss://:tls%20s3cret%2F%3A%40@127.0.0.1:")
    assert "ssl_ca_certs=" in tls_server.url
    with RedisConnector(url=tls_server.url, prefix="tls") as conn:
        conn.put("k", value(b"over TLS"))
        assert conn.get("k") == value(b"over TLS")
        pool = conn.client.connection_pool
        assert pool.connection_class.__name__ == "SSLConnection", pool.connection_class
        assert conn.keys() == []


def test_adapters_stream_over_tls(tls_server: RedisServer) -> None:
    with RedisConnector(url=tls_server.url, prefix="tls-adapters", notify=True) as conn:
        snd = ChunkAdapter(conn, stage_id=0)
        rcv = ChunkAdapter(conn, stage_id=1)
        try:
            rcv.load_async("r")
            for i in range(5):
                snd.save_async("r", i, i == 4)
            assert snd.flush(BOUND)
            got: list[Any] = []

            def all_arrived() -> bool:
                got.extend(c["data"] for c in rcv.poll_ready().get("r", []))
                return len(got) >= 5

            wait_for(all_arrived, "5 chunks over TLS", BOUND)
            assert got == [0, 1, 2, 3, 4]
        finally:
            snd.stop()
            rcv.stop()
        assert conn.keys() == []


@pytest.mark.rule("R25")
def test_a_server_certificate_the_client_does_not_trust_is_a_permanent_error(
    tls_server: RedisServer,
) -> None:
    untrusted = tls_server.url.split("?")[0]  # no ssl_ca_certs: the system CAs only
    with (
        RedisConnector(url=untrusted, prefix="tls", socket_timeout=BOUND) as conn,
        pytest.raises(RedisConnectorError) as info,
    ):
        conn.put("k", value(1))
    assert is_permanent(info.value), info.value
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
    assert "ssl_ca_certs=" in str(info.value), "the error names the fix"


def test_a_plain_client_cannot_talk_to_a_tls_server(tls_server: RedisServer) -> None:
    plain = tls_server.url.split("?")[0].replace("rediss://", "redis://", 1)
    with (
        RedisConnector(url=plain, prefix="tls", socket_timeout=BOUND) as conn,
        pytest.raises(RedisConnectorError),
    ):
        conn.put("k", value(1))


@pytest.fixture
def acl_user(redis_server: RedisServer) -> Iterator[tuple[str, str]]:
    """A fresh ACL user who may use only keys under ``ok:``; deleted after the test."""
    name, password = f"u{uuid.uuid4().hex[:8]}", "acl-pw"
    with RedisConnector(url=redis_server.url, prefix="admin") as admin:
        admin.client.acl_setuser(
            name, enabled=True, passwords=[f"+{password}"], keys=["ok:*"], commands=["+@all"]
        )
        try:
            yield name, password
        finally:
            admin.client.acl_deluser(name)


def _user_url(server: RedisServer, user: str, password: str) -> str:
    return f"redis://{user}:{password}@{server.host}:{server.port}/0"


@pytest.mark.rule("R25")
def test_an_acl_user_in_url_works_within_its_keys_and_is_refused_for_good_outside(
    redis_server: RedisServer, acl_user: tuple[str, str]
) -> None:
    url = _user_url(redis_server, *acl_user)
    with RedisConnector(url=url, prefix="ok") as allowed:
        allowed.put("k", value(1))
        assert allowed.get("k") == value(1)
    with RedisConnector(url=url, prefix="denied") as denied:
        with pytest.raises(RedisConnectorError, match="no permissions") as info:
            denied.put("k", value(1))
        assert is_permanent(info.value) and "ACL" in str(info.value)
    with RedisConnector(url=_user_url(redis_server, acl_user[0], "wrong"), prefix="ok") as bad:
        with pytest.raises(RedisConnectorError) as info:
            bad.put("k", value(1))
        assert is_permanent(info.value), info.value


def test_purge_of_a_prefix_never_touches_one_it_is_the_start_of(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    """Issue 12 point 7, the other direction: ``job.purge()`` deleted ``job1``'s keys
    (``job*`` matches ``job1:k``). Glob characters in a prefix are matched literally."""
    name = redis_prefix[:-1]
    prefixes = [name, name + "1", name + "*", name + "?", name + "[1]"]
    conns = [RedisConnector(url=redis_server.url, prefix=p) for p in prefixes]
    try:
        for i, conn in enumerate(conns):
            conn.put("k_0_0", value(i))
        for i, conn in enumerate(conns):
            assert conn.keys() == ["k_0_0"], (prefixes[i], conn.keys())
            assert conn.purge() == 1, prefixes[i]
            for j, other in enumerate(conns[i + 1 :], start=i + 1):
                assert other.keys() == ["k_0_0"], f"purge of {prefixes[i]!r} hit {prefixes[j]!r}"
    finally:
        for conn in conns:
            conn.purge()
            conn.close()
