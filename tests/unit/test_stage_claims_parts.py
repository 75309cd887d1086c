"""R32's parts that need no second process: which stage a key names, the refusal's
kind, and when a namespace's shared mark is over (tests/crossprocess/test_stage_claims.py
and tests/connectors/test_redis_stage_claims.py run the processes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chunk_adapter.connectors import NamespaceShared, SharedMemoryConnector, is_permanent
from chunk_adapter.connectors._shm_claims import _add_mark, _live_marks
from chunk_adapter.connectors.base import stage_of


@pytest.mark.rule("R32", "R1")
@pytest.mark.parametrize(
    ("key", "stage"),
    [("a_0_1", 0), ("req-1_7_12", 7), ("x_y_3_0", 3), ("a_-1_2", -1), ("plain", None),
     ("a_b_c", None), ("_0_1", None), ("a_0_", None)],
)  # fmt: skip
def test_r32_the_stage_is_read_from_the_key(key: str, stage: int | None) -> None:
    assert stage_of(key) == stage


@pytest.mark.rule("R32")
def test_r32_a_refusal_is_permanent_unless_its_holder_may_be_gone() -> None:
    assert is_permanent(NamespaceShared("held by a live process"))
    assert not is_permanent(NamespaceShared("held by a claim yet to expire", permanent=False))


@pytest.mark.rule("R32")
def test_r32_one_process_shares_its_claims_among_its_connectors() -> None:
    namespace = f"unit{os.urandom(4).hex()}"
    a, b = SharedMemoryConnector(namespace), SharedMemoryConnector(namespace)
    try:
        a.put("r_0_0", {"data": 1, "finished": False})
        b.put("r_0_1", {"data": 2, "finished": True})  # the same process: not refused
        assert b.get("r_0_0") == {"data": 1, "finished": False}
        assert a.get("r_0_1") == {"data": 2, "finished": True}
    finally:
        a.close()
        b.close()


@pytest.mark.rule("R32")
def test_r32_a_shared_mark_is_over_once_either_process_is_gone(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    mark = str(tmp_path / "shared")
    me = str(os.getpid())
    _add_mark(mark, f"{me} {os.getppid()} put-0")  # both live: it holds
    assert _live_marks(mark) == [(me, str(os.getppid()), "put-0")]
    _add_mark(mark, f"{gone.pid} {me} get-1")  # the refused process is gone: over
    assert _live_marks(mark) == [(me, str(os.getppid()), "put-0")]
    os.unlink(mark)
    _add_mark(mark, f"{me} {gone.pid} put-2")  # the holder is gone: over
    assert _live_marks(mark) == []
    assert not os.path.exists(mark), "a mark with no live refusal is removed"
