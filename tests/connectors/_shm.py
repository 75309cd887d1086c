"""Shared-memory test helpers: raw segments written and read by hand (Linux only)."""

from __future__ import annotations

import os

import pytest

__all__ = ["linux_only", "raw_segment", "segment_bytes"]

linux_only = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="lists /dev/shm (Linux)")


def raw_segment(name: str, content: bytes) -> None:
    """Create a segment by hand (what a writer that died mid-write leaves); Linux only."""
    fd = os.open(f"/dev/shm/{name}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.write(fd, content or b"\0")
    finally:
        os.close(fd)


def segment_bytes(name: str) -> bytes:
    """A segment's bytes, read without mapping it (no resource tracker involved); Linux only."""
    with open(f"/dev/shm/{name}", "rb") as f:
        return f.read()
