"""A connector over POSIX shared memory: one segment per key, consumed on get.

Layout of a segment (little-endian), written by ``put``::

    magic "CAS2" | state u32 | created f64 | pid i32 | writer 16s |
    key_len u32 | payload_len u64 | crc32 u32 | stream u64 | key bytes | payload bytes

Visibility is atomic for the reader: the segment is created (``O_EXCL``), sized,
and filled with the header, key and payload while ``state`` is 0; writing
``state = COMMITTED`` is the last store. A reader treats a segment that is empty,
too short or not committed as "nothing there yet", and checks the CRC of what it
read, so it never returns a partial value (a writer killed mid-write leaves an
uncommitted segment that no reader ever returns; :meth:`purge` removes it).

Names. A key can be any string, so the segment name is
``f"{namespace}.{digest}"`` with a 16-character base32 BLAKE2b digest of the
key: always short enough for the platform limit (31 bytes with the leading
slash on macOS, 255 on Linux) and free of ``/``. The full key is stored in the
segment and checked on get, so a digest collision is an error, never a wrong
value. Two connectors see each other's values exactly when they use the same
namespace.

Ownership. A put's segment belongs to the namespace, not to the process: it
outlives the writer, so a sender may exit before the receiver reads. The
``multiprocessing`` resource tracker is kept out of it (see
:mod:`._segments`), so no process unlinks or warns about segments at exit. The
consumer unlinks what it gets; :meth:`close` unlinks what this connector put
that nobody consumed.

A put never overwrites a value nobody has consumed yet: it raises
:class:`KeyOccupied` (nothing stored). When this connector wrote the value
there, a reader is expected to consume it and the adapter retries; when
someone else did (another connector or process), it is a permanent error
(R25), so one foreign segment cannot stall the adapter's SAVE thread.

Trust. Segment names are predictable, so every segment is checked before it
is read or reused: it must belong to this user with mode ``0600``
(:class:`ShmForeign` otherwise; it is never read). Values are stored with the
``safe-msgpack`` serializer by default, which cannot run code when it reads.
The default namespace is private to this user and process group
(:func:`default_namespace`): two pipelines started separately never share
values unless they pass the same ``namespace``. Two started from one parent
do share it; then the second process to write (or consume) a stage's keys is
refused with :class:`NamespaceShared`, before anything mixes
(:mod:`._shm_claims`).

Stream identity (R29). ``writer`` and ``stream`` tag each value with its stream,
and :meth:`abandon` makes the gets of a request id throw away the rest of a stream
its reader was done with, so a reused request id never receives an older
stream's chunk (:mod:`._stream_ids`).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import os
import threading
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from ..errors import ConnectorError, InvalidType
from ._segments import Segment, attach, foreign
from ._shm_claims import Claims
from ._shm_layout import (
    DIGEST_CHARS,
    HEADER,
    NAME_MAX,
    SHM_DIR,
    KeyOccupied,
    ShmCorrupt,
    ShmForeign,
    capacity,
    check_namespace,
    default_namespace,
)
from ._shm_leases import Lease, lease_directory
from ._shm_maintenance import ShmMaintenance
from ._shm_streams import ShmStreams
from ._shm_values import fill, occupied, read_value, stream_tag, writer_of
from ._stream_ids import StreamLedger, StreamNumbers, is_final
from .base import OUTAGE_RETRY_WINDOW, NamespaceShared, PermanentError, ValueTooLarge
from .doorbell import Doorbell
from .serialization import SAFE, Serializer, as_serializer, check_key, decode_value, encode_value

_log = logging.getLogger("chunk_adapter.shm")

__all__ = [
    "HEADER",
    "NAME_MAX",
    "KeyOccupied",
    "NamespaceShared",
    "SharedMemoryConnector",
    "ShmCorrupt",
    "ShmForeign",
    "default_namespace",
]


class SharedMemoryConnector(ShmStreams, ShmMaintenance):
    """``put``/``get`` over one POSIX shared-memory segment per key (see module doc).

    ``namespace`` keeps connectors (and test runs) apart: sender and receiver
    pass the same one (default: :func:`default_namespace`, private to this user
    and process group). ``consume_on_get`` (default ``True``) unlinks a segment
    once its value is read. ``serializer`` is a ``dumps``/``loads`` pair
    (default ``SAFE``, which cannot run code; ``PICKLE`` only among trusted
    writers). ``notify=True`` (on both sides) rings a
    :class:`~.doorbell.Doorbell` after each put and offers ``subscribe``, so an
    adapter waits for puts instead of polling. Close it (or use it as a
    context manager) to unlink what it put that nobody consumed — after the
    receiver is done with it. ``reclaim`` (default ``True``): when made, unlink
    the segments of this namespace's writers that died without finishing, e.g.
    a sender killed mid-stream (:meth:`reclaim`; values of live writers, and of
    writers that closed or exited normally, stay). ``exclusive_stages`` (default
    ``True``): a second live process writing a stage's keys in this namespace, or
    consuming them, is refused with :class:`NamespaceShared` (two pipelines sharing
    the namespace by accident, :mod:`._shm_claims`); ``False`` for a stage several
    processes serve on purpose. ``stream_identity`` (default ``True``, with
    ``consume_on_get``): :meth:`abandon` works, so a reused request id never reads an
    older stream's rest; ``False`` makes it do nothing.
    """

    # A full /dev/shm is transient: the reference adapter gives a non-final this
    # long before dropping it (see connectors.base).
    put_retry_window: float | None = OUTAGE_RETRY_WINDOW

    def __init__(
        self,
        namespace: str | None = None,
        *,
        consume_on_get: bool = True,
        serializer: Serializer | Any = SAFE,
        notify: bool = False,
        reclaim: bool = True,
        exclusive_stages: bool = True,
        stream_identity: bool = True,
    ) -> None:
        if os.name != "posix":
            raise ConnectorError(
                "SharedMemoryConnector needs POSIX shared memory (Linux, macOS); "
                "use RedisConnector on this platform"
            )
        self.namespace = check_namespace(default_namespace() if namespace is None else namespace)
        self.consume_on_get = bool(consume_on_get)
        self.serializer = as_serializer(serializer)
        self.notify = bool(notify)
        self._doorbell = Doorbell(self.namespace) if self.notify else None
        self._writer = uuid.uuid4().bytes
        # Guards _created, _prune_at and _closed. put adds under it; close and
        # prune read and shrink it. Held during a prune's existence checks
        # (amortised O(1) per put). Nobody waits on it.
        self._lock = threading.Lock()
        self._created: set[str] = set()  # segments this connector put, maybe consumed since
        self._prune_at = 1024
        self._closed = False
        # This writer's lease (taken at the first put, released by close() or a normal
        # exit): a free lease tells the next connector this writer crashed.
        self._lease: Lease | None = None
        self._lease_failed = False
        if not isinstance(exclusive_stages, bool):
            raise InvalidType(f"exclusive_stages must be True or False, got {exclusive_stages!r}")
        self.exclusive_stages = exclusive_stages
        if not isinstance(stream_identity, bool):
            raise InvalidType(f"stream_identity must be True or False, got {stream_identity!r}")
        self.stream_identity = stream_identity and self.consume_on_get
        # The stream number each put carries, and which values gets throw away (R29).
        self._streams = StreamNumbers()
        self._ledger = StreamLedger()
        # One live process writes a stage's keys, one consumes them (._shm_claims);
        # released by close() or when this connector is garbage collected.
        self._claims: Claims | None = None
        if self.exclusive_stages:
            self._claims = Claims(lease_directory(self.namespace), self.namespace)
            weakref.finalize(self, self._claims.release)
        if reclaim:
            self.reclaim()

    # ------------------------------------------------------------------ naming
    def segment_name(self, key: str) -> str:
        """The segment name for *key* in this namespace (no leading slash)."""
        raw = check_key(key, "segment_name").encode("utf-8", "surrogatepass")
        digest = hashlib.blake2b(raw, digest_size=DIGEST_CHARS * 5 // 8).digest()
        return f"{self.namespace}.{base64.b32encode(digest).decode('ascii').lower()}"

    # -------------------------------------------------------------- connector
    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store *value* under *key*; raises (storing nothing) on any failure."""
        check_key(key, "put")
        self._check_open("put")
        if self._claims is not None:
            self._claims.check("put", key, "put")
        if self._lease is None and not self._lease_failed:
            self._take_lease()
        data = encode_value(self.serializer, key, value)
        raw_key = key.encode("utf-8", "surrogatepass")
        name = self.segment_name(key)
        size = HEADER.size + len(raw_key) + len(data)
        if self._lease is not None:
            self._lease.note(name)  # a crash from here on leaves a segment the lease names
        try:
            shm = attach(name, create=True, size=size)
        except FileExistsError:
            raise occupied(key, name, self._writer, self.namespace) from None
        except PermissionError as exc:
            raise PermanentError(
                f"put({key!r}): may not create segment {name!r}: {exc}. Fix the permissions "
                f"of {SHM_DIR}"
            ) from exc
        except OSError as exc:
            raise ConnectorError(f"put({key!r}): cannot create segment {name!r}: {exc}") from exc
        try:
            # state = COMMITTED is the last store
            fill(shm, size, self._writer, self._streams.number(key), raw_key, data)
        except BaseException as exc:
            self._discard(shm)
            if isinstance(exc, OSError):
                if size > capacity():
                    raise ValueTooLarge(
                        f"put({key!r}): the value takes {size} bytes and {SHM_DIR} holds "
                        f"{capacity()} at most; nothing was stored. Fix: send smaller chunks, "
                        f"or enlarge {SHM_DIR} (mount -o remount,size=...)"
                    ) from exc
                raise ConnectorError(
                    f"put({key!r}): cannot fill segment {name!r} ({size} bytes): {exc}; nothing "
                    f"was stored. Is {SHM_DIR} full? (df -h {SHM_DIR})"
                ) from exc
            raise
        shm.close()
        with self._lock:
            closed = self._closed
            if not closed:
                self._created.add(name)
                if len(self._created) >= self._prune_at:
                    self._prune_locked()
        if closed:  # close() ran meanwhile and would never unlink this one
            mine = self._owned(name)
            if mine is None:
                return  # consumed already: it was delivered
            self._discard(mine)
            raise ConnectorError(f"put({key!r}): the connector was closed meanwhile; not stored")
        self._streams.stored(key, is_final(value))
        if self._doorbell is not None:
            self._doorbell.ring(key)  # after the commit: a notified get finds the value

    def _take_lease(self) -> None:
        with self._lock:
            if self._lease is not None or self._lease_failed or self._closed:
                return
            try:
                self._lease = Lease(self.namespace, self._writer)
            except (OSError, ConnectorError) as exc:
                self._lease_failed = True
                _log.warning(
                    "no writer lease for namespace %r (%s): if this process crashes, its "
                    "unconsumed segments stay until purge(dead_writers=True)",
                    self.namespace,
                    exc,
                )

    @property
    def subscribe(self) -> Callable[[Callable[[str], None]], Callable[[], None]]:
        """Present only with ``notify=True`` (see the connector protocol and :mod:`.doorbell`)."""
        if self._doorbell is None:
            raise AttributeError("SharedMemoryConnector(notify=False) is polled; pass notify=True")
        self._check_open("subscribe")
        return self._doorbell.subscribe

    def get(self, key: str) -> dict[str, Any] | None:
        """The committed value under *key* (consumed by default), or ``None``."""
        check_key(key, "get")
        self._check_open("get")
        if self._claims is not None and self.consume_on_get:
            self._claims.check("get", key, "get")
        name = self.segment_name(key)
        try:
            shm = attach(name)
        except FileNotFoundError:
            return None
        except ValueError:  # an empty segment: a put has created it but not sized it yet
            return None
        except PermissionError as exc:
            raise ShmForeign(
                f"get({key!r}): segment {name!r} belongs to another user ({exc}); not read"
            ) from exc
        try:
            problem = foreign(shm)
            if problem is not None:
                raise ShmForeign(
                    f"get({key!r}): segment {shm.name!r} is {problem}: not read, since another "
                    "user may have planted it. Fix: remove it and find out who made it"
                )
            data = read_value(shm, key, self.namespace)
            if data is None:
                return None
            value = decode_value(self.serializer, key, data)
            if self.consume_on_get:
                tag = stream_tag(shm)
                try:
                    shm.unlink()
                except FileNotFoundError:  # another consumer took it first
                    return None
                if self.stream_identity and not self._ledger.keep(key, tag, is_final(value)):
                    return None  # the rest of an abandoned stream: thrown away (R29)
            return value
        finally:
            shm.close()

    def contains(self, key: str) -> bool:
        """Whether a committed value sits under *key* now (nothing is consumed)."""
        return self._committed(self.segment_name(check_key(key, "contains")))

    # ----------------------------------------------------------- maintenance
    def _discard(self, shm: Segment) -> None:
        shm.close()
        with contextlib.suppress(FileNotFoundError):
            shm.unlink()

    def _owned(self, name: str) -> Segment | None:
        """The segment *name* if it exists and this connector wrote it, else ``None``."""
        try:
            shm = attach(name)
        except (FileNotFoundError, ValueError, PermissionError):
            return None
        mine = writer_of(shm) == self._writer and foreign(shm) is None
        if not mine:
            shm.close()
            return None
        return shm

    def _prune_locked(self) -> None:
        """Forget consumed segments (called with ``_lock`` held, when the set doubled)."""
        alive = set()
        for name in self._created:
            shm = self._owned(name)
            if shm is not None:
                shm.close()
                alive.add(name)
        self._created = alive
        self._prune_at = max(1024, 2 * len(alive))

    def pending(self) -> int:
        """How many of this connector's puts may still be unconsumed (an upper bound)."""
        with self._lock:
            return len(self._created)

    def close(self) -> None:
        """Unlink every segment this connector put that nobody consumed, end its
        subscriptions. Idempotent."""
        with self._lock:
            names, self._created, self._closed = self._created, set(), True
            lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()
        if self._claims is not None:
            self._claims.release()
        if self._doorbell is not None:
            self._doorbell.close()
        for name in names:
            shm = self._owned(name)
            if shm is not None:
                self._discard(shm)

    def __repr__(self) -> str:
        return (
            f"SharedMemoryConnector({self.namespace!r}, consume_on_get={self.consume_on_get}, "
            f"serializer={self.serializer.name}, notify={self.notify})"
        )
