"""Issue 12 point 7 across processes: two unrelated pipelines on the default
shared-memory namespace no longer receive each other's chunks.

Before, the default namespace was ``"chunkad"`` for everyone: a process of an
unrelated pipeline (here: a child in a session of its own) put a value the
parent's default connector then read. Now the default is private to the user
and the process group; a child of the same pipeline (same group) still shares it.
"""

from __future__ import annotations

import multiprocessing
import os

import pytest

from chunk_adapter.connectors.shm import SharedMemoryConnector
from tests.crossprocess._xproc_workers import default_namespace_put_main

CTX = multiprocessing.get_context("spawn")
linux_only = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="lists /dev/shm (Linux)")


def _put_from_child(new_session: bool, key: str) -> str:
    parent_end, child_end = CTX.Pipe()
    proc = CTX.Process(target=default_namespace_put_main, args=(new_session, key, child_end))
    proc.start()
    child_end.close()
    try:
        assert parent_end.poll(60), "the child did not answer"
        tag, value = parent_end.recv()
        assert tag == "namespace", value
        return str(value)
    finally:
        proc.join(30)


@linux_only
def test_an_unrelated_pipeline_on_the_default_namespace_is_invisible() -> None:
    key = f"iso{os.urandom(4).hex()}_0_0"
    mine = SharedMemoryConnector()
    other_ns = _put_from_child(True, key)
    try:
        assert other_ns != mine.namespace
        assert mine.get(key) is None, "a value of another pipeline was readable"
    finally:
        SharedMemoryConnector(other_ns).purge()
    same_ns = _put_from_child(False, key)
    assert same_ns == mine.namespace, "a child of this pipeline shares its namespace"
    got = mine.get(key)  # consumed: nothing left behind
    assert got is not None and got["finished"] is True
