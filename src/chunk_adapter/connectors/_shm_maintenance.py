"""Listing and purging a shared-memory namespace: the maintenance half of ``shm``.

:class:`ShmMaintenance` is a mixin of
:class:`~chunk_adapter.connectors.shm.SharedMemoryConnector`; it reads
``/dev/shm`` (Linux) and never touches a segment of another user.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ..errors import ConnectorError
from ._segments import attach, foreign, view
from ._shm_layout import COMMITTED, HEADER, MAGIC, SHM_DIR
from ._shm_leases import dead_writers, forget
from .base import ClosedOnce, process_exists

__all__ = ["ShmMaintenance"]


class ShmMaintenance(ClosedOnce):
    """``segments()`` and ``purge()`` for the connector's ``namespace``."""

    namespace: str

    def segments(self, *, committed: bool | None = None) -> list[str]:
        """Names of the segments in this namespace now (Linux: listed from /dev/shm).

        ``committed=True`` lists only values a get would return; ``False`` only
        the empty or half-written ones (a writer at work, or one that died).
        """
        if not os.path.isdir(SHM_DIR):
            raise ConnectorError(
                f"listing segments needs {SHM_DIR} (Linux); this platform has none"
            )
        names = sorted(n for n in os.listdir(SHM_DIR) if n.startswith(self.namespace + "."))
        if committed is None:
            return names
        return [n for n in names if self._committed(n) == committed]

    def _committed(self, name: str) -> bool:
        try:
            shm = attach(name)
        except (FileNotFoundError, ValueError, PermissionError):
            return False
        try:
            if foreign(shm) is not None:
                return False
            buf = view(shm)
            state = HEADER.unpack_from(buf, 0)[1] if len(buf) >= HEADER.size else 0
            del buf
            return bool(state == COMMITTED)
        finally:
            shm.close()

    def purge(self, older_than: float | None = None, *, dead_writers: bool = False) -> int:
        """Unlink the namespace's segments; returns how many it removed.

        The shared-memory analogue of a TTL: run it when a sender died and its
        unconsumed or half-written segments must go. ``older_than``: only those
        older than that many seconds. ``dead_writers=True``: only those whose
        writing process is gone (by the pid in the header; a segment with no
        header yet counts when it is over 10 s old) — safe while live senders
        use the namespace, e.g. at a sender's start. Segments of other users
        are never touched.
        """

        def goes(name: str, age: float) -> bool:
            if older_than is not None and age < older_than:
                return False
            return not dead_writers or self._writer_dead(name, age)

        return self._unlink_own(goes)

    def reclaim(self) -> int:
        """Unlink the segments of writers that died without finishing (a crashed
        sender: its lease is free, see :mod:`._shm_leases`); returns how many.

        A connector does this when it is made (``reclaim=True``). Values of a
        writer that is alive, or that finished (closed, or its process exited
        normally), are never touched: a receiver may still read them. A segment
        with no header yet goes when a dead writer's lease names it, or when it
        is over 10 s old, as in :meth:`purge`.
        """
        if not os.path.isdir(SHM_DIR):
            return 0
        dead = dead_writers(self.namespace)
        if not dead:
            return 0
        creating = {note for _, note in dead.values() if note}

        def goes(name: str, age: float) -> bool:
            writer = self._writer_of(name)
            return writer in dead or (writer is None and (name in creating or age > 10.0))

        removed = self._unlink_own(goes)
        for lease, _ in dead.values():
            forget(lease)
        return removed

    def _unlink_own(self, goes: Callable[[str, float], bool]) -> int:
        """Unlink the namespace's segments this user owns for which ``goes(name, age in
        seconds)`` says so; returns how many went (one already gone is not counted)."""
        now, removed, me = time.time(), 0, os.geteuid()
        for name in self.segments():
            path = os.path.join(SHM_DIR, name)
            try:
                st = os.stat(path)
                if st.st_uid != me or not goes(name, now - st.st_mtime):
                    continue
                os.unlink(path)  # /dev/shm exists, so this is shm_unlink(name)
            except FileNotFoundError:
                continue
            removed += 1
        return removed

    def _writer_of(self, name: str) -> bytes | None:
        """The writer id in *name*'s header; ``None`` before the header is written, and
        ``b""`` for a segment that is not ours to judge (foreign, another format)."""
        try:
            shm = attach(name)
        except (FileNotFoundError, PermissionError):
            return b""
        except ValueError:  # empty: created, not sized yet
            return None
        try:
            if foreign(shm) is not None:
                return b""
            buf = view(shm)
            header = HEADER.unpack_from(buf, 0) if len(buf) >= HEADER.size else None
            del buf
        finally:
            shm.close()
        if header is None or header[0] != MAGIC:
            return None if header is None or header[0] == bytes(4) else b""
        return bytes(header[4])

    def _writer_dead(self, name: str, age: float) -> bool:
        try:
            shm = attach(name)
        except (FileNotFoundError, PermissionError):
            return False
        except ValueError:  # empty: its writer has not sized it yet, or died first
            return age > 10.0
        try:
            buf = view(shm)
            pid = HEADER.unpack_from(buf, 0)[3] if len(buf) >= HEADER.size else 0
            del buf
        finally:
            shm.close()
        if pid <= 0:
            return age > 10.0
        return not process_exists(pid)
