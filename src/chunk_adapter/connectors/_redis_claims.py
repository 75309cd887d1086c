"""Stage claims on Redis: one process writes a stage's keys under a prefix, one consumes
them (used by ``redis``; the shared-memory twin is :mod:`._shm_claims`).

Every pipeline on one Redis server shares the default prefix, so without a
check two pipelines' senders write the same keys and their receivers consume
each other's chunks. A key names its stage (R1), so the connector claims the
stage for this process on its first put (role ``put``) or consuming get (role
``get``) of it: ``SET <prefix>\\0claim:<role>:<stage> <host>:<pid>:<nonce> NX PX``.
A claim held by another process refuses the call with
:class:`~.base.NamespaceShared`, nothing stored or read.

A claim lives :data:`CLAIM_TTL` seconds; this process's heartbeat thread renews
every claim of its open connectors each :data:`RENEW_EVERY`, so a live process
keeps its stages however long it idles, and a process that died frees them
within :data:`CLAIM_TTL`. A holder on this host whose pid is gone is taken
over at once (a sender killed and started again); one on another host, after
its claim expires. Until then the refusal is *transient* (the adapter retries
it; a final until it lands), where an accidental second pipeline stays refused
for as long as the first runs. A refusal by a holder that lives (its claim
renewed within the last two heartbeats) also marks the prefix *shared*
(``<prefix>\0shared``, naming both): the second pipeline's other process may
already hold the stage's other role, and the two would pair across pipelines.
While the mark lasts every put and get of every connector on the prefix is
refused (transiently), each connector looking at most every
:data:`SHARED_LOOK`; the refused process's own calls keep it alive, so it
lasts until that process is gone, then :data:`MARK_TTL` more. A process holds
each claim for all its connectors; closing the last of them deletes it. Claim keys start with a NUL
after the prefix, which no chunk key does: ``keys()`` and ``purge()`` leave
them out.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from typing import Any

from .base import NamespaceShared, process_exists, stage_of

__all__ = ["CLAIM_MARK", "CLAIM_TTL", "MARK_TTL", "RENEW_EVERY", "SHARED_LOOK", "RedisClaims"]

CLAIM_TTL = 5.0
"""Seconds a claim outlives the last renewal of its holder."""
RENEW_EVERY = 1.0
"""Seconds between the heartbeat's renewals (well inside :data:`CLAIM_TTL`)."""
CLAIM_MARK = "\0claim:"
"""What follows the prefix in a claim's key."""
SHARED_MARK = "\0shared"
"""What follows the prefix in the key marking it shared (a hash: refused -> holder)."""
MARK_TTL = 15.0
"""Seconds the shared mark outlives the last call of the process it refused."""
SHARED_LOOK = 0.25
"""Seconds between a connector's looks at the shared mark (one round trip each)."""

_owner: tuple[int, bytes] = (0, b"")


def _this_process() -> bytes:
    """``host:pid:nonce``, made again in a forked child (another process)."""
    global _owner
    if _owner[0] != os.getpid():
        _owner = (os.getpid(), f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}".encode())
    return _owner[1]


def _host_pid(owner: bytes) -> tuple[str, str]:
    """``(host, pid)`` of a claim's ``host:pid:nonce``."""
    host, _, rest = owner.decode("utf-8", "replace").partition(":")
    return host, rest.partition(":")[0]


def _who(owner: bytes) -> str:
    host, pid = _host_pid(owner)
    return f"process {pid} on {host}"


def _dead_here(holder: bytes) -> bool:
    """Whether *holder* names a process of this host that no longer exists."""
    host, pid = _host_pid(holder)
    return host == socket.gethostname() and pid.isdigit() and not process_exists(int(pid))


class RedisClaims:
    """The stage claims of one connector (module doc); thread-safe."""

    def __init__(self, client: Any, prefix: str, errors: tuple[type[BaseException], ...]) -> None:
        self._client = client
        self._prefix = prefix
        self._errors = errors
        # Guards _held (claim key -> its stage and role) and _closed. Taken by puts and
        # gets on any thread, the heartbeat and release(); never held while talking to
        # Redis. Nobody waits on it.
        self._lock = threading.Lock()
        self._held: dict[bytes, tuple[str, int]] = {}
        self._closed = False
        self._mark = f"{prefix}{SHARED_MARK}".encode("utf-8", "surrogatepass")
        self._looked = -SHARED_LOOK  # when the mark was last looked for

    def check(self, role: str, key: str, action: str) -> None:
        """Claim *role* of *key*'s stage for this process, or raise :class:`NamespaceShared`;
        a Redis error propagates to the caller (transient)."""
        self._check_mark(action, key)
        stage = stage_of(key)
        if stage is None:
            return
        name = f"{self._prefix}{CLAIM_MARK}{role}:{stage}".encode("utf-8", "surrogatepass")
        with self._lock:
            if name in self._held or self._closed:
                return  # the heartbeat keeps it; close() ends it
        owner, ttl = _this_process(), int(CLAIM_TTL * 1000)
        if not self._client.set(name, owner, nx=True, px=ttl):
            holder = bytes(self._client.get(name) or b"")
            if holder and holder != owner and not (_dead_here(holder) and self._take(name, holder)):
                if self._client.pttl(name) > (CLAIM_TTL - 2.5 * RENEW_EVERY) * 1000:
                    self._add_mark(owner, f"{role}-{stage}", holder)  # it lives: two pipelines
                    self._looked = -SHARED_LOOK  # the next call looks at the mark
                raise self._refused(role, stage, key, action, holder)
            self._client.set(name, owner, px=ttl)  # ours (or expired just now): renew it
        with self._lock:
            self._held[name] = (role, stage)
        _HEARTBEAT.add(self)

    def _add_mark(self, owner: bytes, what: str, holder: bytes) -> None:
        with self._client.pipeline(transaction=True) as pipe:
            pipe.hset(self._mark, owner + b"|" + what.encode(), holder)
            pipe.pexpire(self._mark, int(MARK_TTL * 1000))
            pipe.execute()

    def _check_mark(self, action: str, key: str) -> None:
        """Refuse while the prefix is marked shared (module doc)."""
        now = time.monotonic()
        if now - self._looked < SHARED_LOOK:
            return
        self._looked = now
        marks = self._client.hgetall(self._mark)
        if not marks:
            return
        self._looked = -SHARED_LOOK  # refused: look again at the next call
        owner, pairs = _this_process(), []
        for refused, holder in marks.items():
            who, _, what = bytes(refused).partition(b"|")
            if who == owner:  # the refused process still runs: the mark stays
                self._client.pexpire(self._mark, int(MARK_TTL * 1000))
            pairs.append(f"{_who(who)} refused {what.decode()}, held by {_who(bytes(holder))}")
        raise NamespaceShared(
            f"{action}({key!r}): prefix {self._prefix!r} is shared by two pipelines "
            f"({'; '.join(pairs)}); every put and get under it is refused while both run, so "
            "their chunks never mix. Fix: give each pipeline its own prefix "
            "(RedisConnector(prefix='pipeline-a')) and restart them",
            permanent=False,
        )

    def _take(self, name: bytes, holder: bytes) -> bool:
        """Replace a dead holder's claim, unless someone changed it meanwhile."""
        with self._client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(name)
                if bytes(pipe.get(name) or b"") != holder:
                    return False
                pipe.multi()
                pipe.set(name, _this_process(), px=int(CLAIM_TTL * 1000))
                pipe.execute()
            except self._errors:
                return False
        return True

    def renew(self) -> None:
        """The heartbeat: extend this connector's claims that are still this process's."""
        with self._lock:
            names = [] if self._closed else list(self._held)
        owner = _this_process()
        for name in names:
            with contextlib.suppress(*self._errors):
                if bytes(self._client.get(name) or b"") == owner:
                    self._client.pexpire(name, int(CLAIM_TTL * 1000))
                else:  # lost (expired and taken): the next call claims it again or is refused
                    with self._lock:
                        self._held.pop(name, None)

    def release(self) -> None:
        """This connector is done: its claims end unless another connector of this
        process holds them too. Idempotent; best effort (they expire anyway)."""
        with self._lock:
            names, self._held, self._closed = list(self._held), {}, True
        _HEARTBEAT.discard(self)
        still = _HEARTBEAT.held_names()
        owner = _this_process()
        for name in names:
            if name in still:
                continue
            with contextlib.suppress(*self._errors):
                if bytes(self._client.get(name) or b"") == owner:
                    self._client.delete(name)

    def names(self) -> set[bytes]:
        with self._lock:
            return set(self._held)

    def _refused(
        self, role: str, stage: int, key: str, action: str, holder: bytes
    ) -> NamespaceShared:
        doing = "writes" if role == "put" else "consumes"
        return NamespaceShared(
            f"{action}({key!r}): {_who(holder)} already {doing} stage {stage}'s keys "
            f"under prefix {self._prefix!r}: two pipelines share it, and their chunks would "
            f"mix; nothing was {'stored' if role == 'put' else 'read'}. Fix: give each "
            "pipeline its own prefix (RedisConnector(prefix='pipeline-a')), or, if several "
            "processes serve this stage on purpose, pass exclusive_stages=False. (A process "
            f"that died frees its stages within {CLAIM_TTL:g} s: until then this is retried.)",
            permanent=False,
        )


class _Heartbeat:
    """One daemon thread per process renewing the claims of its open connectors."""

    def __init__(self) -> None:
        # Guards _claims and _thread; the thread waits on it (with a timeout: it wakes
        # every RENEW_EVERY, and a fork child starts its own). add() notifies.
        self._cond = threading.Condition(threading.Lock())
        self._claims: set[RedisClaims] = set()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def add(self, claims: RedisClaims) -> None:
        with self._cond:
            self._claims.add(claims)
            if self._thread is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(
                    target=self._run, name="chunk-adapter-redis-claims", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def discard(self, claims: RedisClaims) -> None:
        with self._cond:
            self._claims.discard(claims)

    def held_names(self) -> set[bytes]:
        with self._cond:
            everyone = list(self._claims)
        return {name for claims in everyone for name in claims.names()}

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                deadline = time.monotonic() + RENEW_EVERY
                while (left := deadline - time.monotonic()) > 0 and self._thread is me:
                    self._cond.wait(left)
                if self._thread is not me:
                    return  # a fork child's copy of the object started its own thread
                everyone = list(self._claims)
            for claims in everyone:
                claims.renew()


_HEARTBEAT = _Heartbeat()
