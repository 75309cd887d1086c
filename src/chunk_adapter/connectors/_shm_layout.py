"""The shared-memory connector's segment layout, names and errors (used by ``shm``).

Layout of a segment (little-endian)::

    magic "CAS2" | state u32 | created f64 | pid i32 | writer 16s |
    key_len u32 | payload_len u64 | crc32 u32 | stream u64 | key bytes | payload bytes

``state`` is written last (``COMMITTED``): see :mod:`.shm` for the protocol.
``writer`` and ``stream`` are the value's stream tag (:mod:`._stream_ids`).
"""

from __future__ import annotations

import os
import re
import struct
import sys

from ..errors import ConnectorError, InvalidType, InvalidValue
from .base import PermanentError

__all__ = [
    "COMMITTED",
    "DIGEST_CHARS",
    "HEADER",
    "MAGIC",
    "NAME_MAX",
    "SHM_DIR",
    "STATE_AT",
    "KeyOccupied",
    "ShmCorrupt",
    "ShmForeign",
    "capacity",
    "check_namespace",
    "default_namespace",
]

MAGIC = b"CAS2"  # CAS1: the layout before the stream number
COMMITTED = 1
HEADER = struct.Struct("<4sIdi16sIQIQ")
STATE_AT = 4  # offset of the u32 state field, written last
DIGEST_CHARS = 16
# Longest segment name (without the leading slash CPython adds on POSIX).
NAME_MAX = 30 if sys.platform == "darwin" else 250
_NAMESPACE_RE = re.compile(r"[A-Za-z0-9_-]+")
SHM_DIR = "/dev/shm"  # where Linux lists POSIX segments


def capacity() -> int:
    """The size of the shared-memory file system in bytes (huge where unknown)."""
    try:
        st = os.statvfs(SHM_DIR)
    except OSError:
        return 1 << 62
    return st.f_blocks * st.f_frsize


class KeyOccupied(ConnectorError):
    """A put found an unconsumed value under its key; nothing was stored.

    ``permanent`` is ``False`` when this connector wrote that value (its reader
    will consume it: retry) and ``True`` when someone else did (R25).
    """

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class ShmForeign(PermanentError):
    """A segment under our name that another user owns or can write: never read."""


class ShmCorrupt(ConnectorError):
    """A committed segment failed its checks (foreign segment, digest collision, bad CRC)."""


def default_namespace() -> str:
    """``ca<uid>g<process group>``: private to this user and this process group.

    A pipeline's processes started from one parent share it; unrelated pipelines
    (separate shell jobs, services) get different ones. Processes started
    separately must pass the same ``namespace=`` explicitly.
    """
    return f"ca{os.geteuid()}g{os.getpgrp()}"


def check_namespace(namespace: object) -> str:
    if not isinstance(namespace, str):
        raise InvalidType(f"namespace must be a str, got {namespace!r}")
    longest = NAME_MAX - 1 - DIGEST_CHARS
    if not _NAMESPACE_RE.fullmatch(namespace) or len(namespace) > longest:
        raise InvalidValue(
            f"namespace must be 1-{longest} characters from [A-Za-z0-9_-] on this platform, "
            f"got {namespace!r}; pick a shorter name such as 'ca1'"
        )
    return namespace
