"""Issue 12 point 6 (crashed sender): its shared-memory segments are reclaimed on the
next start.

Before: a sender killed mid-stream left every unconsumed segment in /dev/shm
(1,755 in the probe) until someone ran ``purge()``. Now each writer holds a
lease (a locked file) from its first put; the kernel frees the lock when the
process dies, a normal exit or ``close()`` removes the file, so the next
``SharedMemoryConnector`` made on the namespace unlinks exactly the segments of
writers that died unfinished. A live writer's segments, and those of a writer
that exited normally (a receiver may still come for them), stay.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from typing import Any

import pytest

from chunk_adapter.connectors.shm import SharedMemoryConnector
from tests.crossprocess._reclaim_workers import opener_main, sender_main

CTX = multiprocessing.get_context("spawn")
TIMEOUT = 90.0  # for any one answer from a child: generous, never expected
linux_only = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="lists /dev/shm (Linux)")


class Child:
    def __init__(self, target: Callable[..., None], *args: Any) -> None:
        self.pipe, child_end = CTX.Pipe()
        self.proc = CTX.Process(target=target, args=(*args, child_end), daemon=True)
        self.proc.start()
        child_end.close()

    def expect(self, tag: str) -> Any:
        assert self.pipe.poll(TIMEOUT), f"no {tag!r} from the child within {TIMEOUT} s"
        got, value = self.pipe.recv()
        assert got == tag, f"expected {tag!r}, got {got!r}: {value}"
        return value

    def finish(self) -> None:
        self.proc.join(TIMEOUT)
        assert self.proc.exitcode is not None, "the child did not exit"


def next_start(namespace: str) -> int:
    """Segments left right after a new process made its connector on *namespace*."""
    opener = Child(opener_main, namespace)
    left = opener.expect("left")
    opener.finish()
    return int(left)


@linux_only
@pytest.mark.rule("R24")
def test_a_killed_senders_segments_are_reclaimed_by_the_next_start(shm_namespace: str) -> None:
    sender = Child(sender_main, shm_namespace)
    putting = sender.expect("putting")
    sender.proc.kill()  # kill -9, mid-stream
    sender.finish()
    left = len(SharedMemoryConnector(shm_namespace, reclaim=False).segments())
    assert left >= putting > 0, "the killed sender left its segments behind"
    assert next_start(shm_namespace) == 0, "the next start did not reclaim them"
    print(f"killed sender: {left} segments left; after the next start: 0")


@linux_only
@pytest.mark.rule("R24")
def test_live_and_normally_exited_writers_keep_their_segments(shm_namespace: str) -> None:
    sender = Child(sender_main, shm_namespace)
    sender.expect("putting")
    live = len(SharedMemoryConnector(shm_namespace, reclaim=False).segments())
    assert next_start(shm_namespace) >= live > 0, "a live writer's segments were reclaimed"
    sender.pipe.send("exit")
    kept = sender.expect("exiting")
    sender.finish()
    assert sender.proc.exitcode == 0
    assert next_start(shm_namespace) == kept > 0, "a finished writer's values were reclaimed"
    reader = SharedMemoryConnector(shm_namespace)
    got = reader.get("crash0_0_0")  # a late receiver still reads them
    assert got is not None and got["data"]["i"] == 0
    assert reader.purge() == kept - 1
