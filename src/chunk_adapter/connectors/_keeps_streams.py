"""The connector methods of stream identity (R29), shared by shared memory and Redis.

:class:`KeepsStreams` gives a connector ``abandon``, ``sweep`` and
``leftovers_discarded`` over its :class:`~._stream_ids.StreamLedger`; the connector
says how to take the next chunk of a rest only if it is an abandoned stream's
(``_sweep_at``).
"""

from __future__ import annotations

from ._stream_ids import Leftover, StreamLedger
from .base import ClosedOnce
from .serialization import check_key

__all__ = ["KeepsStreams"]


class KeepsStreams(ClosedOnce):
    """``abandon``, ``sweep`` and ``leftovers_discarded`` (see module doc)."""

    stream_identity: bool
    _ledger: StreamLedger

    def abandon(self, key: str) -> bool:
        """The reader is done with the unfinished stream it was reading under *key*'s
        request and stage; *key* is the key it would have read next. Later gets of that
        request and stage consume that stream's values and return ``None`` (R29,
        :mod:`._stream_ids`). ``True`` if there was such a stream (one it handed out a
        chunk of); nothing happens with ``stream_identity=False``. Reads no store."""
        check_key(key, "abandon")
        self._check_open("abandon")
        return self.stream_identity and self._ledger.abandon(key)

    def sweep(self, key: str) -> bool | None:
        """Throw away the next stored chunk of the rest of a stream abandoned under *key*'s
        request and stage (:meth:`abandon`), without touching any other stream's value.
        ``True``: progress (a chunk thrown away, or another stream's value found where
        the rest would be: that chunk will not come); ``False``: nothing there yet;
        ``None``: no abandoned stream's rest is left to wait for. Call it from the thread
        that gets that request's keys (the reference adapter's RECV thread)."""
        check_key(key, "sweep")
        self._check_open("sweep")
        leftover = self._ledger.leftover(key) if self.stream_identity else None
        return None if leftover is None else self._sweep_at(leftover)

    @property
    def leftovers_discarded(self) -> int:
        """Values of abandoned streams consumed and thrown away by gets and sweeps (R29)."""
        return self._ledger.discarded

    def _sweep_at(self, leftover: Leftover) -> bool:
        """Take the value under ``leftover.key`` if its tag is in ``leftover.abandoned``
        (then ``StreamLedger.keep`` it), else leave it and report it ``passed``;
        ``True`` for either, ``False`` when nothing is there yet."""
        raise NotImplementedError
