"""One shared-memory segment's value: written, read back, and judged when a put finds
its key taken (used by :mod:`.shm`; the layout is :mod:`._shm_layout`).

Writing fills the header, key and payload while ``state`` is 0 and stores
``state = COMMITTED`` last; reading returns nothing for a segment that is
empty, too short or not committed, and checks the magic, the key and the CRC
of what it read, so a partial or foreign value is never returned.
"""

from __future__ import annotations

import os
import struct
import time
import zlib

from ._segments import Segment, attach, foreign, reserve, view
from ._shm_layout import COMMITTED, HEADER, MAGIC, STATE_AT, KeyOccupied, ShmCorrupt
from ._stream_ids import NUMBER

__all__ = ["fill", "occupied", "read_value", "stream_tag", "writer_of"]


def fill(
    shm: Segment,
    size: int,
    writer: bytes,
    stream: int,
    raw_key: bytes,
    data: bytes | bytearray | memoryview,
) -> None:
    """Size *shm* to *size* bytes and write the value of stream number *stream*;
    ``state = COMMITTED`` is the last store (the publication). Raises ``OSError`` when
    the file system is full."""
    reserve(shm, size)
    buf = view(shm)
    try:
        crc = zlib.crc32(data, zlib.crc32(raw_key))
        HEADER.pack_into(
            buf, 0, MAGIC, 0, time.time(), os.getpid(), writer,
            len(raw_key), len(data), crc, stream,
        )  # fmt: skip
        buf[HEADER.size : HEADER.size + len(raw_key)] = raw_key
        buf[HEADER.size + len(raw_key) : size] = data
        struct.pack_into("<I", buf, STATE_AT, COMMITTED)  # publish: the last store
    finally:
        del buf


def writer_of(shm: Segment) -> bytes | None:
    """The writer id in *shm*'s header (``None`` while the header is not written)."""
    buf = view(shm)
    try:
        return HEADER.unpack_from(buf, 0)[4] if len(buf) >= HEADER.size else None
    finally:
        del buf


def stream_tag(shm: Segment) -> bytes | None:
    """The stream tag (writer id and stream number, :mod:`._stream_ids`) of the committed
    value in *shm*; ``None`` while it is not committed or has no stream number."""
    buf = view(shm)
    try:
        if len(buf) < HEADER.size:
            return None
        magic, state, _, _, writer, _, _, _, stream = HEADER.unpack_from(buf, 0)
        if magic != MAGIC or state != COMMITTED or not stream:
            return None
        return bytes(writer) + NUMBER.pack(stream)
    finally:
        del buf


def read_value(shm: Segment, key: str, namespace: str) -> bytes | None:
    """The committed payload in *shm* for *key*; ``None`` while it is not committed.
    Raises :class:`ShmCorrupt` for a segment that is not ours, another key's (a digest
    collision) or fails its CRC."""
    buf = view(shm)
    try:
        if len(buf) < HEADER.size:
            return None
        magic, state, _, _, _, key_len, data_len, crc, _ = HEADER.unpack_from(buf, 0)
        if state != COMMITTED:
            return None  # being written (or its writer died): not there yet
        end = HEADER.size + key_len + data_len
        if magic != MAGIC or end > len(buf):
            raise ShmCorrupt(
                f"get({key!r}): segment {shm.name!r} is not a chunk-adapter segment; "
                f"another program uses namespace {namespace!r}: pick another namespace"
            )
        raw_key = bytes(buf[HEADER.size : HEADER.size + key_len])
        if raw_key != key.encode("utf-8", "surrogatepass"):
            raise ShmCorrupt(
                f"get({key!r}): segment {shm.name!r} holds key {raw_key!r} (a digest "
                "collision); use another namespace for one of the two keys"
            )
        data = bytes(buf[HEADER.size + key_len : end])
        if zlib.crc32(data, zlib.crc32(raw_key)) != crc:
            raise ShmCorrupt(f"get({key!r}): segment {shm.name!r} fails its CRC check")
        return data
    finally:
        del buf


def occupied(key: str, name: str, writer: bytes, namespace: str) -> KeyOccupied:
    """The error for a put that found segment *name* taken: transient only if *writer*
    (the putting connector) wrote what is there."""
    try:
        shm = attach(name)
    except (FileNotFoundError, ValueError):
        return KeyOccupied(
            f"put({key!r}): segment {name!r} is being created or consumed right now; "
            "nothing was stored (the adapter retries)"
        )
    except PermissionError:
        return KeyOccupied(
            f"put({key!r}): segment {name!r} exists and belongs to another user; nothing "
            "was stored. Fix: remove it, or pick another namespace",
            permanent=True,
        )
    try:
        problem = foreign(shm)
        found = writer_of(shm)
    finally:
        shm.close()
    if problem is None and found == writer:
        return KeyOccupied(
            f"put({key!r}): segment {name!r} still holds a value this connector put and "
            "nobody consumed yet; nothing was stored (the adapter retries)"
        )
    why = problem or "written by another connector (another process, or one that died)"
    return KeyOccupied(
        f"put({key!r}): segment {name!r} holds a value {why}; nothing was stored and "
        "retrying cannot help. Fix: do not reuse a request id while another sender's "
        f"value is unread; SharedMemoryConnector({namespace!r}).purge() removes a "
        "dead sender's leftovers",
        permanent=True,
    )
