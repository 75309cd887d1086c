"""``aio_followers`` (tests/quality/correct) as first written: a get queued on the pool
after its registration was checked (R16).

A follower task checked its registration and then queued the get on a two-worker pool;
behind other followers' gets it could start after a ``cleanup_receiver`` and a new
``load_async`` of the request, and on a consuming connector take the new registration's
chunk and throw it away. The generated worlds found it (docs/quality.md, twenty-fourth
session); the catalogue's adapter now checks again on the worker, right before the get.
Schedules recorded on the first form (tests/explore/test_simulate.py's judge errors)
replay on this copy.
"""

from __future__ import annotations

from typing import Any

from tests.quality.correct.aio_followers import _OPTIONS, AioFollowersAdapter, _guarded, _Reg

__all__ = ["QueuedStaleGet", "queued_stale_get"]


class QueuedStaleGet(AioFollowersAdapter):
    """The get runs whenever the pool gets to it, whatever became of its registration."""

    def _get_if_current(self, reg: _Reg, key: str) -> Any:
        return _guarded(self.connector.get, key)


def queued_stale_get(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: Any = None,
    **options: Any,
) -> QueuedStaleGet:
    """``aio_followers.make`` for the copy: the same keywords and options."""
    return QueuedStaleGet(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **{k: v for k, v in options.items() if k in _OPTIONS and v is not None},
    )
