"""Stage functions that misbehave on purpose, for the verify worker's own tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from chunk_adapter.connectors import MemoryConnector
from chunk_adapter.outcome import CheckResult, StageContext


def slow_but_nothing_stuck(factory: Any, ctx: StageContext) -> Iterator[CheckResult]:
    """Works past its deadline without any adapter call in flight (a stage that overran)."""
    ctx.announce("long check")
    threading.Event().wait(ctx.seconds + 60)
    yield CheckResult("stress", "long check", (), "pass", "unreachable")


def save_async_stuck(factory: Any, ctx: StageContext) -> Iterator[CheckResult]:
    """Calls save_async on an adapter whose save_async never returns."""
    ctx.announce("stuck save")
    adapter = factory(MemoryConnector(), stage_id=0)
    adapter.save_async("r", 1, False)
    yield CheckResult("stress", "stuck save", (), "pass", "unreachable")


class _BlocksInSave:
    def __init__(self, connector: Any, **kwargs: Any) -> None:
        self.never = threading.Event()

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        while not self.never.wait(0.1):
            pass

    def cancel_sender(self, request_id: str) -> None: ...
    def load_async(self, request_id: str) -> None: ...
    def poll_ready(self) -> dict[str, Any]:
        return {}

    def cleanup_receiver(self, request_id: str) -> None: ...
    def stop(self) -> None: ...


def blocks_in_save(connector: Any, **kwargs: Any) -> _BlocksInSave:
    return _BlocksInSave(connector, **kwargs)
