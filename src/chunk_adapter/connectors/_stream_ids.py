"""Stream identity in the framing of the shared-memory and Redis connectors (R29).

Keys name a request, a stage and a chunk, never a stream (R1), and the wire value
is fixed (R2), so a request id used again can read the rest of an older stream.
The connectors that store bytes therefore put a *stream tag* in each value's
framing — the writer's 16-byte id and a number the writer gives the stream's
chunk 0 (:class:`StreamNumbers`) — and a receiving connector remembers, per
request and stage, the tag of the value it last handed out and whether it was
the stream's final (:class:`StreamLedger`).

When the reader is done with a stream it had not finished (the reference
adapter's ``cleanup_receiver``), it calls the connector's ``abandon(key)`` with
the key it would have read next. The stream abandoned is the one it last handed
out an unfinished chunk of under that request and stage (a get in flight at the
cleanup included: the adapter calls ``abandon`` from the thread that gets). From
then on a ``get`` that meets a value of an abandoned stream consumes it and
returns ``None``, as if the key were empty, and ``sweep`` consumes the rest as
it arrives (only values of abandoned streams), until that stream's final has
been met. So a new stream of the id never receives a chunk of a stream a
registration was reading, whatever the timing of the cleanup, of the reuse and
of the old stream's rest; the new stream's puts that found an old value in
their way are retried (``KeyOccupied`` of the same writer) and land once it is
discarded.

What it cannot see: a registration cleaned up before it received any chunk of
its stream leaves that stream, whole, to the next registration of the id. The
keys carry nothing that says which registration a stream was sent for: a stream
whose first chunk arrives after the cleanup is as likely the next
registration's own (its sender may never have sent the first one), and one
already waiting then arrived after the registration's last look.
"""

from __future__ import annotations

import re
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = [
    "NUMBER",
    "Leftover",
    "StreamLedger",
    "StreamNumbers",
    "is_final",
    "split_key",
]

NUMBER = struct.Struct("<Q")
"""The stream number in a value's framing (u64, little-endian); 0: no stream known."""
_TRACKED = 16384
"""Requests (per stage) whose stream numbers or reads are kept, oldest out first: far
more streams than are open at once (each side forgets a stream once its final is
stored, or handed out, with nothing of it left behind)."""
_ABANDONED_KEPT = 16
"""Abandoned streams remembered per request and stage (the oldest forgotten first)."""
_KEY = re.compile(r"(.+_-?\d+)_(\d+)")
K = TypeVar("K")
V = TypeVar("V")


def split_key(key: str) -> tuple[str, int] | None:
    """``(request and stage, chunk id)`` of a chunk key (R1), ``None`` for another shape."""
    match = _KEY.fullmatch(key)
    return (match.group(1), int(match.group(2))) if match else None


def is_final(value: object) -> bool:
    """Whether *value* is a stream's final chunk (R2's ``finished``)."""
    return isinstance(value, dict) and value.get("finished") is True


def _bounded_set(table: OrderedDict[K, V], key: K, entry: V, size: int = _TRACKED) -> None:
    """``table[key] = entry`` as the newest entry; the oldest go beyond *size*."""
    table[key] = entry
    table.move_to_end(key)
    while len(table) > size:
        table.popitem(last=False)


class StreamNumbers:
    """The writer side: the stream number each put of a chunk key carries.

    A stream's chunk 0 starts a new number unless an earlier try of that same chunk
    0 failed (its retry keeps the number, so every chunk of the stream carries the
    number its stored chunk 0 has); its other chunks carry that number; the stream
    is forgotten once its final is stored.
    """

    def __init__(self) -> None:
        # Guards _numbers and _next; held for dict updates only. Nobody waits.
        self._lock = threading.Lock()
        # stream -> (its number, whether its chunk 0 was stored)
        self._numbers: OrderedDict[str, tuple[int, bool]] = OrderedDict()
        self._next = 1

    def number(self, key: str) -> int:
        """The stream number for a put of *key* (0 for a key that is no chunk key)."""
        parts = split_key(key)
        if parts is None:
            return 0
        stream, chunk_id = parts
        with self._lock:
            known = self._numbers.get(stream)
            if known is not None and (chunk_id > 0 or not known[1]):
                return known[0]
            number, self._next = self._next, self._next + 1
            _bounded_set(self._numbers, stream, (number, False))
            return number

    def stored(self, key: str, final: bool) -> None:
        """A put of *key* stored its value; *final*: it was the stream's final."""
        parts = split_key(key)
        if parts is None:
            return
        stream = parts[0]
        with self._lock:
            if final:
                self._numbers.pop(stream, None)
            elif stream in self._numbers:
                self._numbers[stream] = (self._numbers[stream][0], True)


@dataclass
class _Reads:
    """What a receiving connector knows of one request's streams at one stage."""

    last: bytes | None = None  # tag of the value last handed out
    last_chunk: int = -1  # its chunk id
    finished: bool = True  # whether that value was its stream's final
    # Tag -> the chunk id its rest starts at, of the streams whose values are thrown
    # away (a dict for its order: the oldest is forgotten first).
    abandoned: OrderedDict[bytes, int] = field(default_factory=OrderedDict)


@dataclass(frozen=True)
class Leftover:
    """Where the rest of an abandoned stream is looked for next (:meth:`StreamLedger.leftover`)."""

    key: str  # the key of its next chunk
    tag: bytes  # its stream tag
    abandoned: frozenset[bytes]  # the tags of every stream abandoned under the request


class StreamLedger:
    """The reader side: which values a ``get`` hands out and which it discards."""

    def __init__(self) -> None:
        # Guards _reads and discarded; held for dict updates only. Nobody waits.
        self._lock = threading.Lock()
        self._reads: OrderedDict[str, _Reads] = OrderedDict()  # stream -> what is known
        self.discarded = 0
        """Values of abandoned streams consumed and thrown away."""

    def __len__(self) -> int:
        """Requests (per stage) remembered: streams being read, and streams left."""
        return len(self._reads)

    def _of(self, stream: str) -> _Reads:
        reads = self._reads.get(stream) or _Reads()
        _bounded_set(self._reads, stream, reads)
        return reads

    def keep(self, key: str, tag: bytes | None, final: bool) -> bool:
        """A get consumed a value of stream *tag* under *key*: ``True`` to hand it out,
        ``False`` when its stream was abandoned (the value is then thrown away)."""
        parts = split_key(key)
        if parts is None or tag is None:
            return True
        stream, chunk_id = parts
        with self._lock:
            reads = self._of(stream)
            keep = tag not in reads.abandoned
            if keep:
                reads.last, reads.last_chunk, reads.finished = tag, chunk_id, final
            else:
                self.discarded += 1
                if final:
                    del reads.abandoned[tag]
                else:
                    reads.abandoned[tag] = max(reads.abandoned[tag], chunk_id + 1)
            if reads.finished and not reads.abandoned:
                del self._reads[stream]  # nothing to remember: what is kept is what is open
            return keep

    def abandon(self, key: str) -> bool:
        """The reader is done with the stream it was reading under *key*'s request and
        stage; *key* is the key it would have read next (module doc). ``True`` if a
        stream was abandoned: the one it last handed out an unfinished chunk of."""
        parts = split_key(key)
        if parts is None:
            return False
        with self._lock:
            reads = self._reads.get(parts[0])
            if reads is None or reads.finished or reads.last is None:
                return False  # nothing of an unfinished stream handed out: none left
            _bounded_set(reads.abandoned, reads.last, reads.last_chunk + 1, _ABANDONED_KEPT)
            reads.last, reads.finished = None, True
        return True

    def leftover(self, key: str) -> Leftover | None:
        """The abandoned stream of *key*'s request and stage whose rest starts lowest
        (where a sweep looks next), or ``None`` when none is left to throw away."""
        parts = split_key(key)
        if parts is None:
            return None
        stream = parts[0]
        with self._lock:
            reads = self._reads.get(stream)
            if reads is None or not reads.abandoned:
                return None
            tag, rest = min(reads.abandoned.items(), key=lambda item: item[1])
            return Leftover(f"{stream}_{rest}", tag, frozenset(reads.abandoned))

    def passed(self, leftover: Leftover) -> None:
        """Another stream's value sits where *leftover*'s next chunk would: that chunk
        was consumed or will never be stored (a sender puts a stream after the one
        before it), so its rest starts after it."""
        parts = split_key(leftover.key)
        assert parts is not None  # made by leftover()
        stream, chunk_id = parts
        with self._lock:
            reads = self._reads.get(stream)
            if reads is not None and leftover.tag in reads.abandoned:
                reads.abandoned[leftover.tag] = max(reads.abandoned[leftover.tag], chunk_id + 1)
