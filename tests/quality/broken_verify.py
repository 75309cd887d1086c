"""Adapters that attack the verify tool itself: hangs, deadlocks, a factory that raises.

Each must still get a clean verdict (exit 1, the right rule) within the budget.
"""

from __future__ import annotations

import threading
from typing import Any

from chunk_adapter.adapter import ChunkAdapter


class HangsInStop(ChunkAdapter):
    """stop() never returns (it waits for an event nobody sets)."""

    def stop(self) -> None:
        super().stop()
        never = threading.Event()
        while not never.wait(0.1):
            pass


class DeadlocksInSave(ChunkAdapter):
    """save_async takes the (non-reentrant) send lock twice: a self-deadlock."""

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        with self._send_lock:
            super().save_async(request_id, obj, is_final)


def hangs_in_stop(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return HangsInStop(connector, **kwargs)


def deadlocks_in_save(connector: Any, **kwargs: Any) -> ChunkAdapter:
    return DeadlocksInSave(connector, **kwargs)


def factory_raises(connector: Any, **kwargs: Any) -> ChunkAdapter:
    raise RuntimeError("this factory cannot build an adapter")


def wrong_signature(connector: Any) -> ChunkAdapter:
    return ChunkAdapter(connector, stage_id=0)
