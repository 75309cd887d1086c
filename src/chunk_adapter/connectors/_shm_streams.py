"""Stream identity on shared memory (R29): the segment reads (used by ``shm``).

The framing and the bookkeeping are :mod:`._stream_ids`'s, the methods
:mod:`._keeps_streams`'s; this mixin reads the segments: the tag of a value
waiting under a key, and a sweep that unlinks a segment only when its tag is an
abandoned stream's.
"""

from __future__ import annotations

from ._keeps_streams import KeepsStreams
from ._segments import attach, foreign
from ._shm_values import read_value, stream_tag
from ._stream_ids import Leftover, is_final
from .serialization import Serializer, decode_value

__all__ = ["ShmStreams"]


class ShmStreams(KeepsStreams):
    """Stream identity's reads of segments for :class:`SharedMemoryConnector`."""

    namespace: str
    serializer: Serializer

    def segment_name(self, key: str) -> str:
        raise NotImplementedError  # SharedMemoryConnector's

    def _sweep_at(self, leftover: Leftover) -> bool:
        try:
            shm = attach(self.segment_name(leftover.key))
        except (FileNotFoundError, ValueError):
            return False  # not there yet (or being created)
        except PermissionError:
            self._ledger.passed(leftover)  # another user's segment: never ours to take
            return True
        try:
            tag = stream_tag(shm) if foreign(shm) is None else b""
            if tag is None:
                return False  # being written
            if tag not in leftover.abandoned:
                self._ledger.passed(leftover)
                return True
            data = read_value(shm, leftover.key, self.namespace)
            if data is None:
                return False
            value = decode_value(self.serializer, leftover.key, data)
            try:
                shm.unlink()
            except FileNotFoundError:  # consumed meanwhile
                return False
            self._ledger.keep(leftover.key, tag, is_final(value))
            return True
        finally:
            shm.close()
