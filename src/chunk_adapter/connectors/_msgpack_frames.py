"""The byte layout of the ``safe-msgpack`` serializer: a preamble, raw buffers, a document.

A stored value is a sequence of msgpack objects::

    [1, n]            the preamble: format version 1, n out-of-band buffers
    bin 0 … bin n-1   the raw bytes of the arrays the value holds, in order
    document          the value itself, in which an array is an ExtType frame
                      naming its dtype, its shape and its buffer's number

:func:`write` packs them into one msgpack ``Packer`` buffer and returns a view of
it, so an array's bytes are copied once (into that buffer), never again; the
buffers come before the document so that :func:`read` learns where each one lies
from the bin headers alone, before the document (whose frames name them) is
unpacked. :func:`read` returns views into the bytes it is given: nothing is
copied until an array is rebuilt.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import msgpack

__all__ = ["VERSION", "Buffers", "packer", "read", "take", "write"]

VERSION = 1
_MAX_BIN = 2**32 - 1  # msgpack's bin 32 holds at most this many bytes
_HEAD = 0x92  # a msgpack array of two items: the preamble
_UINTS = {0xCC: struct.Struct(">B"), 0xCD: struct.Struct(">H"), 0xCE: struct.Struct(">I")}
_BINS = {0xC4: struct.Struct(">B"), 0xC5: struct.Struct(">H"), 0xC6: struct.Struct(">I")}

Buffers = list[memoryview]
"""Out-of-band buffers: views of C-contiguous bytes, numbered by their place."""


def packer(default: Callable[[Any], Any], buf_size: int = 0) -> msgpack.Packer:
    """A ``Packer`` with the settings every part of this format uses (*buf_size*: initial
    size of its buffer, 0 for msgpack's default)."""
    options: dict[str, Any] = {"buf_size": buf_size} if buf_size > 0 else {}
    return msgpack.Packer(
        default=default,
        use_bin_type=True,
        strict_types=True,  # tuples and subclasses reach `default`, never pass as lists
        unicode_errors="surrogatepass",  # any Python str, lone surrogates too
        autoreset=False,
        **options,
    )


def write(document: Any, buffers: Buffers, default: Callable[[Any], Any]) -> memoryview:
    """The stored form of *document* with its out-of-band *buffers* (see module doc).

    Raises ``ValueError`` for a buffer over 4 GiB (msgpack's bin limit).
    """
    total = 0
    for buf in buffers:
        if buf.nbytes > _MAX_BIN:
            raise ValueError(
                f"an array of {buf.nbytes} bytes is over the 4 GiB one array may take; "
                "send it in smaller pieces"
            )
        total += buf.nbytes
    out = packer(default, buf_size=total + 64 * len(buffers) + 4096 if total else 0)
    out.pack([VERSION, len(buffers)])
    for buf in buffers:
        out.pack(buf)
    out.pack(document)
    view: memoryview = out.getbuffer()  # keeps `out` alive; no copy
    return view


def read(data: bytes | bytearray | memoryview) -> tuple[memoryview, list[memoryview]]:
    """Split stored bytes into the document and the buffers (views, nothing copied).

    Raises ``ValueError`` for bytes this format did not write.
    """
    view = memoryview(data).cast("B")
    if len(view) < 3 or view[0] != _HEAD or view[1] != VERSION:
        raise ValueError(
            "these bytes were not written by the safe-msgpack serializer (format "
            f"{VERSION}): they start {bytes(view[:8])!r}"
        )
    count, pos = _uint(view, 2)
    buffers = []
    for _ in range(count):
        size, pos = _bin_header(view, pos)
        if pos + size > len(view):
            raise ValueError(f"a buffer of {size} bytes runs past the end of the value")
        buffers.append(view[pos : pos + size])
        pos += size
    return view[pos:], buffers


def take(buffers: list[memoryview], taken: set[int], index: object) -> memoryview:
    """Buffer number *index*, which no other frame of the value has taken (each buffer
    makes one object: a forged value cannot make many copies of one large buffer)."""
    if type(index) is not int or not 0 <= index < len(buffers) or index in taken:
        raise ValueError(f"buffer {index!r} does not exist or is used twice")
    taken.add(index)
    return buffers[index]


def _uint(view: memoryview, pos: int) -> tuple[int, int]:
    """The msgpack unsigned int at *pos* and the position after it."""
    tag = view[pos]
    if tag < 0x80:
        return tag, pos + 1
    form = _UINTS.get(tag)
    if form is None or pos + 1 + form.size > len(view):
        raise ValueError(f"expected the buffer count at byte {pos}, found tag 0x{tag:02x}")
    return form.unpack_from(view, pos + 1)[0], pos + 1 + form.size


def _bin_header(view: memoryview, pos: int) -> tuple[int, int]:
    """The length of the msgpack bin at *pos* and the position of its first byte."""
    form = _BINS.get(view[pos]) if pos < len(view) else None
    if form is None or pos + 1 + form.size > len(view):
        raise ValueError(f"expected an out-of-band buffer at byte {pos}")
    return form.unpack_from(view, pos + 1)[0], pos + 1 + form.size
