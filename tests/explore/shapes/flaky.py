"""An adapter whose behaviour depends on something outside the explorer's control.

It silently drops the next non-final chunk while the process-wide budget
``DROPS`` is above zero: a bug, but one whose execution does not replay,
because the budget is spent by then. The explorer must say "did not
reproduce" (inconclusive), never report it as a confirmed violation.
"""

from __future__ import annotations

from typing import Any

from .split_pkg.core import Adapter

__all__ = ["DROPS", "make"]

DROPS = [0]  # chunks still to drop, in this process


class Flaky(Adapter):
    def send_one(self, request_id: str, snap: Any, is_final: bool, cancelled: bool) -> None:
        if DROPS[0] > 0 and not is_final:
            DROPS[0] -= 1
            return  # the nondeterministic bug: a chunk silently never sent
        super().send_one(request_id, snap, is_final, cancelled)


def make(connector: Any, *, stage_id: int, src_stage_id: int | None = None,
         build_payload: Any = None, **options: Any) -> Flaky:  # fmt: skip
    return Flaky(connector, stage_id, src_stage_id, build_payload)
