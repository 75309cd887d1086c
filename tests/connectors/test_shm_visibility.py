"""SharedMemoryConnector: atomic visibility — a segment being written, an uncommitted or
corrupt one, and a reader racing the writer never yield a wrong value.

Rule: a connector's get returns what was put, whole (R2).
"""

from __future__ import annotations

import os
import random
import threading
from typing import Any

import pytest

from chunk_adapter.connectors.shm import HEADER, SharedMemoryConnector, ShmCorrupt
from tests.connectors._shm import linux_only, raw_segment, segment_bytes


@linux_only
def test_an_empty_segment_being_created_reads_as_nothing_yet(shm_namespace: str) -> None:
    conn = SharedMemoryConnector(shm_namespace)
    name = conn.segment_name("k")
    fd = os.open(f"/dev/shm/{name}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    os.close(fd)  # what a put leaves between shm_open and ftruncate
    assert conn.get("k") is None
    assert conn.segments() == [name], "the reader must not unlink a segment being written"
    assert conn.purge() == 1


@linux_only
@pytest.mark.parametrize("written", [0, 10, HEADER.size + 3])
def test_an_uncommitted_segment_reads_as_nothing_yet(shm_namespace: str, written: int) -> None:
    """A put interrupted before its commit store (or a writer killed there) is invisible."""
    conn = SharedMemoryConnector(shm_namespace)
    conn.put("k", {"data": "x" * 100, "finished": True})
    name = conn.segment_name("k")
    image = bytearray(segment_bytes(name))
    conn.purge()
    image[4:8] = b"\0\0\0\0"  # state: not committed
    raw_segment(name, bytes(image[:written]) + bytes(len(image) - written))
    assert conn.get("k") is None
    assert conn.segments() == [name]
    assert conn.purge() == 1, "purge removes a dead writer's half-written segment"


@linux_only
def test_a_corrupt_or_colliding_segment_is_an_error_not_a_wrong_value(shm_namespace: str) -> None:
    conn = SharedMemoryConnector(shm_namespace)
    conn.put("other", {"data": 1, "finished": True})
    image = bytearray(segment_bytes(conn.segment_name("other")))
    conn.purge()
    raw_segment(conn.segment_name("k"), bytes(image))  # holds key "other" under k's name
    with pytest.raises(ShmCorrupt, match="collision"):
        conn.get("k")
    conn.purge()
    image[-1] ^= 0xFF  # flip a payload byte
    raw_segment(conn.segment_name("other"), bytes(image))
    with pytest.raises(ShmCorrupt, match="CRC"):
        conn.get("other")
    assert len(conn.segments()) == 1, "a get that raised consumed nothing"
    assert conn.purge() == 1


@pytest.mark.rule("R2")
def test_a_concurrent_reader_never_sees_a_partial_value(shm_namespace: str, seed: int) -> None:
    """A reader thread spinning on get while large values are written gets each one whole.

    (Within one process the GIL hides a wrong write order; the cross-process test
    ``test_a_reader_process_never_sees_a_partial_shared_memory_value`` catches that.)
    """
    rnd = random.Random(seed)
    values = [
        {"data": rnd.randbytes(rnd.choice([1, 4096, 1 << 18])), "finished": False}
        for _ in range(60)
    ]
    seen: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    with SharedMemoryConnector(shm_namespace) as writer, SharedMemoryConnector(shm_namespace) as r:

        def read() -> None:
            try:
                for i in range(len(values)):
                    while (got := r.get(f"k_{i}")) is None:
                        pass
                    seen.append(got)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        reader = threading.Thread(target=read, name="test-shm-reader", daemon=True)
        reader.start()
        for i, value in enumerate(values):
            writer.put(f"k_{i}", value)
        reader.join(30)
        assert not reader.is_alive(), f"reader stuck after {len(seen)} values (seed={seed})"
    assert not errors, f"{errors!r} (seed={seed})"
    assert seen == values, f"a value differs from what was put (seed={seed})"
