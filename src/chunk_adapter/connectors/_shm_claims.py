"""Stage claims: one process writes a stage's keys, one reads them (used by ``shm``).

Two pipelines started from one parent share the default namespace (one user,
one process group), so without a check their senders write the same keys
(``req-1_0_0``) and their receivers consume each other's chunks: streams swap,
finals included, and neither side sees an error. A key names its stage
(``{request}_{stage}_{chunk}``, R1), so a connector can tell when a second
*process* starts writing, or consuming, a stage some live process already does
in this namespace, and refuse it before anything mixes.

A claim is a file ``<lease directory>/<role>-<stage>.claim`` (the lease
directory of :mod:`._shm_leases`: private to this user) kept open with an
exclusive ``flock`` by the process that claimed it, and named with its pid. The
kernel drops the lock when that process dies, however it dies, so a restarted
sender claims the stage again at once. A process holds each claim once, for
all its connectors of that namespace, until the last of them is closed or
garbage collected (a sender and a receiver in one process, or an adapter made
again in a test, never refuse each other). A forked child starts with no
claims: it is another process, and it claims for itself.

A refusal also marks the namespace *shared* (a file ``shared`` beside the
claims naming both processes): a process of the second pipeline may already
hold the other role of the stage (its receiver claimed before the first
pipeline's), and then the two would pair across pipelines. So while a mark
names two live processes, every put and get of every connector of the
namespace is refused (transiently: once one side is gone, the pipeline left
goes on), each connector looking at most every :data:`SHARED_LOOK` seconds.
What the first pipeline's receiver took before the mark is the limit: a
stream can cross between pipelines in that moment, never after it.

Roles: ``"put"`` for writing a stage's keys, ``"get"`` for consuming them (a
get that keeps the value claims nothing: several stages may read one stage's
output then). A stage served by several processes on purpose (replicas that
split its requests) says so: ``SharedMemoryConnector(exclusive_stages=False)``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time

from .base import NamespaceShared, process_exists, stage_of
from .doorbell import check_private

__all__ = ["SHARED_LOOK", "Claims"]

SHARED_LOOK = 0.05
"""Seconds between a connector's looks at its namespace's shared mark."""


class Claims:
    """The stage claims of one connector (module doc); thread-safe."""

    def __init__(self, directory: str, namespace: str) -> None:
        self._directory = directory
        self._namespace = namespace
        # Guards _held (this connector's claims) and _closed; taken by puts and gets on
        # any thread, and by release(). Nobody waits on it.
        self._lock = threading.Lock()
        self._held: set[tuple[str, int]] = set()
        self._closed = False
        self._mark = os.path.join(directory, "shared")
        self._looked = -SHARED_LOOK  # when the mark was last looked for (a stale read: one
        # look more)

    def check(self, role: str, key: str, action: str) -> None:
        """Claim *role* of *key*'s stage for this process, or raise :class:`NamespaceShared`."""
        self._check_mark(action, key)
        stage = stage_of(key)
        if stage is None or (role, stage) in self._held:  # a read of a set: no lock needed
            return
        with self._lock:
            if self._closed or (role, stage) in self._held:
                return
            holder = _PROCESS.take(self._directory, role, stage)
            if holder is None:
                self._held.add((role, stage))
                return
        doing = "writes" if role == "put" else "consumes"
        _add_mark(self._mark, f"{os.getpid()} {holder} {role}-{stage}")
        raise NamespaceShared(
            f"{action}({key!r}): process {holder} already {doing} stage {stage}'s keys in "
            f"namespace {self._namespace!r}: two pipelines share it, and their chunks would "
            f"mix; nothing was {'stored' if role == 'put' else 'read'}. Fix: give each "
            "pipeline its own namespace (SharedMemoryConnector(namespace='pipeline-a')), or, "
            "if several processes serve this stage on purpose, pass exclusive_stages=False"
        )

    def _check_mark(self, action: str, key: str) -> None:
        """Refuse while the namespace is marked shared by two live processes (module doc)."""
        now = time.monotonic()
        if now - self._looked < SHARED_LOOK:
            return
        self._looked = now
        live = _live_marks(self._mark)
        if not live:
            return
        self._looked = -SHARED_LOOK  # refused: look again at the next call
        pairs = "; ".join(f"process {a} refused {what}, held by process {b}" for a, b, what in live)
        raise NamespaceShared(
            f"{action}({key!r}): namespace {self._namespace!r} is shared by two pipelines "
            f"({pairs}); every put and get in it is refused while both run, so their chunks "
            "never mix. Fix: give each pipeline its own namespace "
            "(SharedMemoryConnector(namespace='pipeline-a')) and restart them",
            permanent=False,
        )

    def release(self) -> None:
        """This connector is done: drop its share of the process's claims. Idempotent."""
        with self._lock:
            held, self._held, self._closed = self._held, set(), True
        for role, stage in held:
            _PROCESS.drop(self._directory, role, stage)


def _alive(pid: str) -> bool:
    return pid.isdigit() and process_exists(int(pid))


def _add_mark(path: str, line: str) -> None:
    """Note a refusal (``refused-pid holder-pid role-stage``) in the namespace's mark."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, (line + "\n").encode("ascii", "replace"))
    finally:
        os.close(fd)


def _live_marks(path: str) -> list[tuple[str, str, str]]:
    """The mark's refusals whose two processes both live; the mark is removed once none
    does (both sides gone or one: the conflict is over)."""
    try:
        with open(path, encoding="ascii", errors="replace") as mark:
            lines = mark.read().splitlines()
    except FileNotFoundError:
        return []
    live = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and _alive(parts[0]) and _alive(parts[1]):
            live.append((parts[0], parts[1], parts[2]))
    if not live:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    return live


class _ProcessClaims:
    """This process's claims, counted per connector holding each (module doc)."""

    def __init__(self) -> None:
        # Guards _fds, _users and _pid: claims are taken by puts and gets on any thread
        # and dropped by close() or a finalizer. Nobody waits on it.
        self._lock = threading.Lock()
        self._fds: dict[tuple[str, str, int], int] = {}
        self._users: dict[tuple[str, str, int], int] = {}
        self._pid = os.getpid()

    def take(self, directory: str, role: str, stage: int) -> int | str | None:
        """Claim it (``None``), or the pid of the live process holding it."""
        name = (directory, role, stage)
        with self._lock:
            self._forget_if_forked()
            if name in self._fds:
                self._users[name] += 1
                return None
            check_private(directory)
            path = os.path.join(directory, f"{role}-{stage}.claim")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(fd)
                    raise
                holder = os.pread(fd, 32, 0).rstrip(b"\0").decode("ascii", "replace")
                os.close(fd)
                return holder or "(starting)"
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
            self._fds[name], self._users[name] = fd, 1
            return None

    def drop(self, directory: str, role: str, stage: int) -> None:
        name = (directory, role, stage)
        with self._lock:
            self._forget_if_forked()
            if name not in self._users:
                return
            self._users[name] -= 1
            if self._users[name]:
                return
            del self._users[name]
            fd = self._fds.pop(name)
        with contextlib.suppress(OSError):
            os.close(fd)  # the lock goes with the last descriptor of it in this process

    def after_fork_in_child(self) -> None:
        """A forked child holds none of its parent's claims (module doc): its copies of
        the descriptors close at once, so a parent that ends releases them."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._forget_if_forked()

    def _forget_if_forked(self) -> None:
        if self._pid == os.getpid():
            return
        for fd in self._fds.values():  # the parent keeps its lock: only our copy closes
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()
        self._users.clear()
        self._pid = os.getpid()


_PROCESS = _ProcessClaims()
os.register_at_fork(after_in_child=_PROCESS.after_fork_in_child)
