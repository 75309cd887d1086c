"""POSIX shared-memory segments with no resource tracker involved (used by ``shm``).

``attach(name, create=, size=)`` opens or creates one segment; the object has
``name``, ``buf``, ``close()`` and ``unlink()`` like ``SharedMemory``. On Python
3.13+ it *is* ``SharedMemory(..., track=False)``; before, it is
:class:`UntrackedSegment` (its docstring says why unregistering is not enough).
"""

from __future__ import annotations

import errno
import importlib
import mmap
import os
import sys
from multiprocessing import shared_memory
from typing import Protocol

from ..errors import ConnectorError

__all__ = ["Segment", "UntrackedSegment", "attach", "foreign", "reserve", "view"]

_TRACK_PARAM = sys.version_info >= (3, 13)  # SharedMemory(track=False) exists


class Segment(Protocol):
    """The part of ``SharedMemory`` this module uses."""

    @property
    def name(self) -> str: ...

    @property
    def buf(self) -> memoryview | None: ...

    def close(self) -> None: ...

    def unlink(self) -> None: ...


class UntrackedSegment:
    """``SharedMemory(name, create, size, track=False)`` for Python < 3.13.

    Before 3.13 every ``SharedMemory`` registers with the resource tracker, a
    process that spawned children share. Its registry is a set: two processes
    that register and unregister one name concurrently (a writer creating a
    segment while a reader opens it) make the second unregister fail with a
    traceback, and a name still registered when the tracker exits is unlinked
    with a "leaked shared_memory objects" warning. Unregistering right after
    opening cannot close that race, so this class never registers: it makes the
    same ``shm_open`` + ``mmap`` calls ``SharedMemory`` makes, through the same
    ``_posixshmem`` module.
    """

    def __init__(self, name: str, *, create: bool = False, size: int = 0) -> None:
        posix = importlib.import_module("_posixshmem")
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self.name = name
        self._fd: int = posix.shm_open("/" + name, flags, mode=0o600)
        try:
            if create:
                os.ftruncate(self._fd, size)
            self._mmap = mmap.mmap(self._fd, os.fstat(self._fd).st_size)  # empty: ValueError
        except BaseException:
            os.close(self._fd)
            if create:
                posix.shm_unlink("/" + name)
            raise
        self._buf: memoryview | None = memoryview(self._mmap)

    @property
    def buf(self) -> memoryview | None:
        return self._buf

    def close(self) -> None:
        if self._buf is not None:
            self._buf.release()
            self._buf = None
            self._mmap.close()
            os.close(self._fd)
            self._fd = -1

    def unlink(self) -> None:
        importlib.import_module("_posixshmem").shm_unlink("/" + self.name)


def attach(name: str, *, create: bool = False, size: int = 0) -> Segment:
    """Open or create a segment that no resource tracker knows about."""
    if _TRACK_PARAM:
        return shared_memory.SharedMemory(name, create=create, size=size, track=False)  # type: ignore[call-arg,unused-ignore]
    return UntrackedSegment(name, create=create, size=size)


def view(shm: Segment) -> memoryview:
    buf = shm.buf
    if buf is None:  # only after close(), which this module never calls before reading
        raise ConnectorError(f"segment {shm.name!r} is closed")
    return buf


def foreign(shm: Segment) -> str | None:
    """Why *shm* must not be trusted, or ``None``: it must belong to this user and
    give nobody else access (``0600``, as every segment this module creates).

    Segment names are predictable, so another local user could create one first
    and wait for us to read it (or to fail writing it).
    """
    fd = getattr(shm, "_fd", -1)
    if fd < 0:
        return None  # no descriptor to check (not reached on CPython)
    st = os.fstat(fd)
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not this user (uid {os.geteuid()})"
    if st.st_mode & 0o077:
        return f"mode {st.st_mode & 0o777:04o} lets other users in (expected 0600)"
    return None


def reserve(shm: Segment, size: int) -> None:
    """Allocate the pages now, so a full /dev/shm is an error here, not a SIGBUS later."""
    fd = getattr(shm, "_fd", -1)
    if fd < 0 or not hasattr(os, "posix_fallocate"):
        return
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):  # not supported: write and hope
            return
        raise
