"""Shape: a public adapter that delegates to an engine living in another package.

Imported as the top-level module ``delegating_front`` (its directory is put on
``sys.path`` by the test, as a user's own package would be): the factory's
module and the adapter's class say nothing of the engine, whose module binds
``from threading import ...`` names. The explorer must find the engine from
what the adapter holds and what its threads run.
"""

from __future__ import annotations

from typing import Any

from tests.explore.shapes import rlock_perf

__all__ = ["Front", "make"]


class Front:
    """Forwards each contract call to the engine it was given."""

    def __init__(self, engine: rlock_perf.Adapter) -> None:
        self._engine = engine

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        self._engine.save_async(request_id, obj, is_final)

    def cancel_sender(self, request_id: str) -> None:
        self._engine.cancel_sender(request_id)

    def load_async(self, request_id: str) -> None:
        self._engine.load_async(request_id)

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        return self._engine.poll_ready()

    def cleanup_receiver(self, request_id: str) -> None:
        self._engine.cleanup_receiver(request_id)

    def stop(self) -> None:
        self._engine.stop()

    def __enter__(self) -> Front:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def make(connector: Any, *, stage_id: int, src_stage_id: int | None = None,
         build_payload: Any = None) -> Front:  # fmt: skip
    return Front(rlock_perf.make(connector, stage_id=stage_id, src_stage_id=src_stage_id,
                                 build_payload=build_payload))  # fmt: skip
