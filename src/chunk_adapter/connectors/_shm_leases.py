"""Writer leases: which shared-memory writers died without finishing (used by ``shm``).

A :class:`~chunk_adapter.connectors.shm.SharedMemoryConnector` that puts holds
a **lease** from its first put on: a file named after its writer id in
``<tmp>/chunk-adapter-<uid>/leases-<digest of namespace>/``, kept open with an
exclusive ``flock``. The kernel drops that lock when the process dies, however
it dies. A writer that *finishes* removes its lease: ``close()``, or the
process's normal exit (``atexit``, and multiprocessing's exit hook in its child
processes); the values it left unconsumed stay for a receiver that may still
come, as before. So a lease file whose lock nobody holds names a writer that
died without finishing (``kill -9``, a crash, ``os._exit``): its unconsumed and
half-written segments are garbage, and :func:`dead_writers` finds it. Before
creating a segment the writer notes its name in the lease (:meth:`Lease.note`),
so a segment it was killed creating, with no header yet to name its writer,
is found too.

A lease is made under a temporary name, locked, then renamed into place, so a
reader never sees an unlocked lease of a live writer. A forked child shares
its parent's lock (one open file description): the writer counts as alive
while either lives.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import tempfile
import threading
import uuid
from multiprocessing import util

from .doorbell import check_private

__all__ = ["Lease", "dead_writers", "forget", "lease_directory"]

_SUFFIX = ".lease"
_NOTE = 256  # bytes of the lease holding the name of the segment being created


def lease_directory(namespace: str) -> str:
    digest = hashlib.blake2b(namespace.encode(), digest_size=8).hexdigest()
    return os.path.join(tempfile.gettempdir(), f"chunk-adapter-{os.getuid()}", f"leases-{digest}")


class Lease:
    """This process's claim that *writer* is alive (see module doc)."""

    def __init__(self, namespace: str, writer: bytes) -> None:
        directory = lease_directory(namespace)
        check_private(directory)
        self.path = os.path.join(directory, writer.hex() + _SUFFIX)
        self._pid = os.getpid()
        temporary = os.path.join(directory, f".{uuid.uuid4().hex}.tmp")
        self._fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(temporary, self.path)
        except BaseException:
            os.close(self._fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise
        _hold(self)

    def note(self, segment: str) -> None:
        """Record the segment this writer is about to create (one ``pwrite``)."""
        os.pwrite(self._fd, segment.encode("ascii").ljust(_NOTE, b"\0"), 0)

    def release(self) -> None:
        """The writer finished: remove the lease (its values stay). Idempotent."""
        with _LIVE_LOCK:
            fd, self._fd = self._fd, -1
            _LIVE.discard(self)
        if fd < 0:
            return
        if self._pid == os.getpid():  # a forked child's inherited copy leaves the file
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        os.close(fd)


def dead_writers(namespace: str) -> dict[bytes, tuple[str, str]]:
    """``{writer id: (lease path, segment it was creating or "")}`` of the namespace's
    writers that died unfinished."""
    directory = lease_directory(namespace)
    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        return {}
    dead: dict[bytes, tuple[str, str]] = {}
    for entry in entries:
        if not entry.endswith(_SUFFIX):
            continue
        path = os.path.join(directory, entry)
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:  # gone meanwhile, or not a plain file of ours
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            note = os.pread(fd, _NOTE, 0).rstrip(b"\0").decode("ascii", "replace")
        except BlockingIOError:
            continue  # held: the writer lives
        finally:
            os.close(fd)  # releases the probe's lock at once
        with contextlib.suppress(ValueError):
            dead[bytes.fromhex(entry[: -len(_SUFFIX)])] = (path, note)
    return dead


def forget(path: str) -> None:
    """Remove a dead writer's lease once its segments are gone."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


# Guards _LIVE and _hooked_pid: leases are added by puts on any thread and released
# by close() or at exit. Nobody waits on it.
_LIVE_LOCK = threading.Lock()
_LIVE: set[Lease] = set()
_hooked_pid = 0  # the process that registered the exit hooks (a fork child must again)


def _hold(lease: Lease) -> None:
    global _hooked_pid
    with _LIVE_LOCK:
        _LIVE.add(lease)
        hook, _hooked_pid = _hooked_pid != os.getpid(), os.getpid()
    if hook:
        atexit.register(_release_all)
        # multiprocessing's children leave through os._exit after running these hooks
        # (a fork child starts with an empty list of them).
        util.Finalize(None, _release_all, exitpriority=0)


def _release_all() -> None:
    with _LIVE_LOCK:
        leases = list(_LIVE)
    for lease in leases:
        lease.release()
