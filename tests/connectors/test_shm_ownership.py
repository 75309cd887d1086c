"""SharedMemoryConnector: who owns a segment — no overwrite, consume or keep, close,
purge, and what outlives the connector object.

Rule: a put that raised stored nothing (R10).
"""

from __future__ import annotations

from typing import Any

import pytest

from chunk_adapter.connectors import _shm_values as shm_values
from chunk_adapter.connectors.shm import KeyOccupied, SharedMemoryConnector
from chunk_adapter.errors import ConnectorError
from tests.connectors._shm import linux_only


@pytest.mark.rule("R10")
def test_a_put_never_overwrites_an_unconsumed_value(shm_namespace: str) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        conn.put("k", {"data": "first", "finished": False})
        with pytest.raises(
            KeyOccupied, match=r"'k'.*this connector put.*nothing was stored"
        ) as own:
            conn.put("k", {"data": "second", "finished": False})
        assert not own.value.permanent, "our own unread value: its reader will free the key"
        with (
            SharedMemoryConnector(shm_namespace) as other,
            pytest.raises(KeyOccupied, match=r"'k'.*another connector.*purge\(\)") as foreign,
        ):
            other.put("k", {"data": "other", "finished": False})
        assert foreign.value.permanent, "someone else's value: retrying cannot help (R25)"
        assert conn.get("k") == {"data": "first", "finished": False}
        conn.put("k", {"data": "third", "finished": True})  # consumed: the key is free again
        assert conn.get("k") == {"data": "third", "finished": True}


def test_consume_on_get_false_keeps_the_value_until_close(shm_namespace: str) -> None:
    conn = SharedMemoryConnector(shm_namespace, consume_on_get=False)
    conn.put("k", {"data": 1, "finished": True})
    assert conn.get("k") == conn.get("k") == {"data": 1, "finished": True}
    assert len(conn.segments()) == 1
    conn.close()
    assert conn.segments() == []


@linux_only
def test_close_unlinks_what_it_put_and_nobody_consumed(shm_namespace: str) -> None:
    reader = SharedMemoryConnector(shm_namespace)
    with SharedMemoryConnector(shm_namespace) as writer:
        for i in range(5):
            writer.put(f"r_1_{i}", {"data": i, "finished": i == 4})
        assert reader.get("r_1_0") is not None and reader.get("r_1_1") is not None
        # a segment of the same name re-created by another connector is not ours to unlink
        reader.put("r_1_0", {"data": "reader's", "finished": False})
        assert len(writer.segments()) == 4
    assert reader.segments() == [reader.segment_name("r_1_0")]
    assert reader.get("r_1_0") == {"data": "reader's", "finished": False}
    with pytest.raises(ConnectorError, match="closed"):
        writer.put("r_1_9", {"data": 9, "finished": True})
    writer.close()  # idempotent


@linux_only
def test_a_put_racing_close_leaves_nothing_behind(
    shm_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close() from another thread while a put fills its segment: that segment goes too."""
    conn = SharedMemoryConnector(shm_namespace)
    real_reserve = shm_values.reserve  # the put fills its segment there

    def close_meanwhile(segment: Any, size: int) -> None:
        conn.close()  # what another thread's close() does at this moment
        real_reserve(segment, size)

    monkeypatch.setattr(shm_values, "reserve", close_meanwhile)
    with pytest.raises(ConnectorError, match="closed meanwhile"):
        conn.put("k", {"data": 1, "finished": True})
    assert conn.segments() == []


@linux_only
def test_segments_outlive_the_connector_object_without_close(shm_namespace: str) -> None:
    """A sender may exit before its receiver reads: only close() unlinks."""
    writer = SharedMemoryConnector(shm_namespace)
    writer.put("k", {"data": 1, "finished": True})
    del writer
    assert SharedMemoryConnector(shm_namespace).get("k") == {"data": 1, "finished": True}


def test_pending_forgets_consumed_puts_so_it_stays_bounded(shm_namespace: str) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        for i in range(1100):
            conn.put(f"k{i}", {"data": i, "finished": False})
            assert conn.get(f"k{i}") is not None
        assert conn.pending() < 1024, "the set of created names is pruned when it doubles"


@linux_only
def test_purge_removes_by_age(shm_namespace: str) -> None:
    conn = SharedMemoryConnector(shm_namespace)
    conn.put("a", {"data": 1, "finished": True})
    assert conn.purge(older_than=3600) == 0
    assert conn.purge(older_than=0) == 1
    assert conn.segments() == []
