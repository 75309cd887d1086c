"""The reference adapter with a time limit on ``build_payload``.

"A build that hangs must not hold up every later chunk": each build runs on a short-lived
daemon helper thread, and the SAVE thread waits for it at most ``build_timeout`` seconds
(2 s). A build still running then is treated as a failed build: a non-final chunk is
dropped, a final one is put with ``data`` ``None``. The helper is left to finish alone.
(The helpers are plain ``threading`` threads, so this adapter keeps to ``threading``
and ignores a ``runtime=`` option.)

BUG (R7): only a build that RAISES may cost a chunk. A build that is slow (over 2 s)
but succeeds has its chunk dropped, or its final put with ``data`` ``None``, instead
of the payload it returns; and the next chunk's build starts while the slow one still
runs (R5: one SAVE thread builds one chunk at a time). Builds under 2 s never show it.
"""

from __future__ import annotations

import threading
from typing import Any

from chunk_adapter.adapter import BuildPayload, ChunkAdapter

from ._reference import factory

__all__ = ["TimedBuilds", "build_within", "make"]


class BuildTimedOut(Exception):
    pass


def build_within(build: BuildPayload, request_id: str, snap: Any, final: bool, limit: float) -> Any:
    """``build(request_id, snap, final)`` on a daemon helper; its result, or its exception,
    or :class:`BuildTimedOut` when it is still running after *limit* seconds."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = build(request_id, snap, final)
        except Exception as exc:
            outcome["error"] = exc

    helper = threading.Thread(target=run, name="chunk-adapter-build", daemon=True)
    helper.start()
    helper.join(limit)
    if helper.is_alive():
        raise BuildTimedOut(f"build of {request_id!r} still running after {limit:g}s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


class TimedBuilds(ChunkAdapter):
    """The reference ChunkAdapter; a build that takes over 2 s counts as failed."""

    build_timeout = 2.0

    def _send_one(self, request_id: str, snap: Any, is_final: bool, cancelled: bool) -> None:
        if cancelled and not is_final:
            self._count_send("dropped_cancelled")
            return
        payload: Any = None
        if not cancelled:
            try:  # BUG (R7): a slow build is not a failed one
                payload = build_within(
                    self.build_payload, request_id, snap, is_final, self.build_timeout
                )
            except Exception:
                self.log.exception("build_payload failed for %r (final=%s)", request_id, is_final)
                self._count_send("build_failures")
                if not is_final:
                    self._count_send("dropped_build_failed")
                    return
                payload = None
            if payload is None and not is_final:
                self._count_send("skipped_none")
                return
        self._put_with_retries(request_id, {"data": payload, "finished": is_final}, is_final)


make = factory(TimedBuilds, drop=("runtime",))
