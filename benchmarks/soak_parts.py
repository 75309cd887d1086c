"""The soak's connectors and sender incarnations (benchmarks/soak.py).

:func:`open_backend` gives, per connector, the receiver's connector, how to start a
sender (a spawned process on shm and Redis, a thread on the in-process memory
connector), how to list the store (keys, or segment names) and which entries a
stream's chunks take, and on Redis how to kill and restart the server
(:class:`RedisOutage`); it removes the namespace / prefix (and stops the
redis-server) afterwards. :class:`Incarnation` is one sender: its pipe and its
worker.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from soak_sender import sender_loop, sender_process
from soak_streams import Order

from chunk_adapter.connectors import (
    Connector,
    MemoryConnector,
    RedisConnector,
    SharedMemoryConnector,
    chunk_key,
)
from chunk_adapter.connectors.redis_server import RedisServer

__all__ = ["Backend", "Incarnation", "RedisOutage", "open_backend"]

SPAWN = multiprocessing.get_context("spawn")  # the soak's process has threads: no fork
JOIN = 30.0  # seconds for a killed or finished sender to be gone: generous, never expected


class Incarnation:
    """One sender (module doc)."""

    def __init__(self, number: int, pipe: Connection, worker: BaseProcess | threading.Thread):
        self.number, self.pipe, self.worker = number, pipe, worker
        self.kill_at: float | None = None  # set once it is ready
        self.killed_at = 0.0
        self.stopped = False  # it said "stopped"
        self.closed = False  # its end of the pipe is gone

    def send(self, message: tuple[Any, ...]) -> bool:
        """Send *message*; ``False`` (and ``closed``) when the sender is gone."""
        try:
            self.pipe.send(message)
            return True
        except (OSError, EOFError):
            self.closed = True
            return False

    def messages(self) -> list[tuple[Any, ...]]:
        """Everything the sender has sent so far (what a killed one sent before it died
        included); marks ``closed`` at the end of the pipe."""
        got: list[tuple[Any, ...]] = []
        try:
            while not self.closed and self.pipe.poll(0):
                got.append(self.pipe.recv())
        except (OSError, EOFError):
            self.closed = True
        return got

    def kill(self) -> None:
        """SIGKILL a process (and reap it: a zombie's pid still exists, and Redis hands a
        dead holder's claim over only once its pid is gone); a thread is told to end."""
        if isinstance(self.worker, BaseProcess):
            if self.worker.is_alive():
                self.worker.kill()
        else:
            self.send(("stop",))
            self.send(("exit",))
        self.join(JOIN)
        self.killed_at = time.monotonic()

    def join(self, timeout: float) -> None:
        self.worker.join(timeout)

    def exitcode(self) -> int | None:
        return self.worker.exitcode if isinstance(self.worker, BaseProcess) else None


class RedisOutage:
    """Kill the redis-server with SIGKILL (its pid from ``INFO``, as an operator would
    find it) and start it again on its port: its memory, the values not yet consumed and
    the stage claims included, is gone."""

    def __init__(self, server: RedisServer, client: Any) -> None:
        self.server, self.client = server, client

    def down(self) -> None:
        pid = int(self.client.info("server")["process_id"])
        os.kill(pid, signal.SIGKILL)
        self.server.crash()  # reaps it; its port stays free until up()

    def up(self) -> None:
        self.server.restart()


@dataclass
class Backend:
    """One connector's part of the soak (module doc)."""

    name: str
    receiver: Connector
    start: Callable[[int, int, float], Incarnation]  # (number, seed, settle)
    entries: Callable[[], set[str]]
    names: Callable[[Order], set[str]]
    kills: bool = False  # the sender is a process: kill it now and then
    reclaims: bool = False  # a sender's start removes a killed one's values (shm)
    outage: RedisOutage | None = None  # the store can be killed and restarted (redis)


def _keys(order: Order) -> set[str]:
    return {chunk_key(order.sid, 0, i) for i in range(order.chunks + 1)}


def _spawn(where: tuple[str, str, str]) -> Callable[[int, int, float], Incarnation]:
    def start(number: int, seed: int, settle: float) -> Incarnation:
        mine, theirs = SPAWN.Pipe()
        proc = SPAWN.Process(
            target=sender_process,
            args=(where, seed, settle, theirs),
            name=f"soak-sender-{where[0]}-{number}",
            daemon=True,
        )
        proc.start()
        theirs.close()  # the child's end lives in the child only: its death reads as EOF
        return Incarnation(number, mine, proc)

    return start


def _memory() -> Backend:
    conn = MemoryConnector(consume_on_get=True)

    def start(number: int, seed: int, settle: float) -> Incarnation:
        mine, theirs = multiprocessing.Pipe()
        args = (conn, seed, settle, theirs, lambda: 0)  # its CRITICAL lines: the soak's count
        worker = threading.Thread(target=sender_loop, args=args, name="soak-sender", daemon=True)
        worker.start()
        return Incarnation(number, mine, worker)

    return Backend("memory", conn, start, lambda: set(conn.keys()), _keys)


@contextlib.contextmanager
def _shm() -> Iterator[Backend]:
    namespace = f"soak{uuid.uuid4().hex[:10]}"  # a name, not a choice of the run: unseeded
    conn = SharedMemoryConnector(namespace)

    def names(order: Order) -> set[str]:
        return {conn.segment_name(key) for key in _keys(order)}

    try:
        yield Backend(
            "shm", conn, _spawn(("shm", "", namespace)), lambda: set(conn.segments()), names,
            kills=True, reclaims=True,
        )  # fmt: skip
    finally:
        conn.purge()
        conn.close()


@contextlib.contextmanager
def _redis() -> Iterator[Backend]:
    with RedisServer() as server:
        prefix = f"soak{uuid.uuid4().hex[:10]}"
        conn = RedisConnector(url=server.url, prefix=prefix)
        try:
            yield Backend(
                "redis", conn, _spawn(("redis", server.url, prefix)), lambda: set(conn.keys()),
                _keys, kills=True, outage=RedisOutage(server, conn.client),
            )  # fmt: skip
        finally:
            with contextlib.suppress(Exception):  # a failed run may leave the server down
                conn.purge()
            conn.close()


@contextlib.contextmanager
def open_backend(name: str) -> Iterator[Backend]:
    if name == "memory":
        yield _memory()
    elif name == "shm":
        with _shm() as backend:
            yield backend
    elif name == "redis":
        with _redis() as backend:
            yield backend
    else:
        raise ValueError(f"unknown connector {name!r}; pick memory, shm or redis")
