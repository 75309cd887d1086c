"""Project-wide pytest setup.

The ``--adapter`` option and the ``adapter_factory`` / ``adapter_spec``
fixtures come from the package's pytest plugin (chunk_adapter.pytest_plugin,
registered through the ``pytest11`` entry point), so the project's tests and a
user's tests see the same flags.

The fixtures here serve the real-connector tests (tests/connectors,
tests/crossprocess): a fresh shared-memory namespace and a throwaway
redis-server, each failing a test that leaks; and a ``seed`` printed on failure.
Redis tests skip when redis-server (or redis-py) is missing, with the command
that installs it, except under ``CI=...``, where they fail: CI must run them.

Every test also runs under ``_no_threads_left_behind``: a thread the test started
and left running (an adapter never stopped, an executor never shut down) fails the
test, so threads never pile up over a run. To see which tests add threads or
memory, run with the opt-in plugin ``-p tests._crowding`` (docs/quality.md).
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from chunk_adapter.connectors.redis_server import RedisServer
from chunk_adapter.connectors.shm import SharedMemoryConnector
from tests._need_redis import require_redis

# How long, in all, the end of a test waits for the threads it started to finish
# (released gates, adapters stopping). Threads that end on time cost nothing more.
LEFT_THREADS_JOIN = 2.0
# Daemon threads a test may leave running past that wait: the stop-timeout tests
# leave a blocked worker behind on purpose (one or two); an adapter never stopped
# leaves two per adapter for the rest of the session.
LEFT_DAEMON_THREADS_ALLOWED = 4


@pytest.fixture(autouse=True)
def _no_threads_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that leaves a non-daemon thread, or more than
    LEFT_DAEMON_THREADS_ALLOWED daemon threads, alive after its teardown."""
    before = set(threading.enumerate())
    yield
    started = [
        t
        for t in threading.enumerate()
        if t not in before and not isinstance(t, threading._DummyThread)  # cannot be joined
    ]
    deadline = time.monotonic() + LEFT_THREADS_JOIN
    for thread in started:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [t for t in started if t.is_alive()]
    non_daemon = [t.name for t in alive if not t.daemon]
    daemon = [t.name for t in alive if t.daemon]
    assert not non_daemon and len(daemon) <= LEFT_DAEMON_THREADS_ALLOWED, (
        f"{request.node.nodeid} left threads running {LEFT_THREADS_JOIN} s after its "
        f"teardown: non-daemon {non_daemon}, daemon {daemon} (more than "
        f"{LEFT_DAEMON_THREADS_ALLOWED} allowed). Stop the adapters it made "
        "(`with adapter:` or the rig fixture), shut executors down, join the threads it started."
    )


@pytest.fixture
def shm_namespace() -> Iterator[str]:
    """A namespace no other test uses. A segment left in it fails the test (a leak), after
    it is purged, so one test's leak never reaches another."""
    namespace = "t" + uuid.uuid4().hex[:10]
    yield namespace
    left = SharedMemoryConnector(namespace).segments()
    SharedMemoryConnector(namespace).purge()
    assert left == [], f"shared-memory segments leaked in /dev/shm: {left}"


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One redis-server on a free 127.0.0.1 port for the session, stopped after."""
    require_redis()
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_prefix(redis_server: RedisServer) -> Iterator[str]:
    """A key prefix no other test uses. A key left under it fails the test (a leak), after
    the keys are deleted."""
    from chunk_adapter.connectors.redis import RedisConnector

    prefix = f"t{uuid.uuid4().hex[:10]}:"
    yield prefix
    with RedisConnector(url=redis_server.url, prefix=prefix) as conn:
        left = conn.keys()
        conn.purge()
    assert left == [], f"Redis keys leaked under {prefix!r}: {left}"


SEED_KEY = pytest.StashKey[int]()


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """``--chunk-seed`` if given, else a fresh random one; a failure prints how to rerun it."""
    given = request.config.getoption("--chunk-seed", default=None)
    value = int(given) if given is not None else random.randrange(2**32)
    request.node.stash[SEED_KEY] = value
    return value


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and SEED_KEY in item.stash:
        command = f"pytest '{item.nodeid}' --chunk-seed {item.stash[SEED_KEY]}"
        report.sections.append(("reproduce", command))
    return report
