"""Broken asyncio adapters: each is the correct one-loop adapter with ONE race added.

Each is :class:`~tests.quality.correct.asyncio_loop.AsyncioLoopAdapter` (one daemon
thread running an event loop; send and receive tasks; blocking calls in executors)
with one method overridden. Each bug is a real race on real threads, but its window
is a loop iteration or two wide, so plain runs mostly pass and an interleaving
explorer is what finds it reliably. Factories:
``tests.quality.broken_asyncio:<name>``; ``EXPECTED`` maps each name to the rule(s) a
correct report may name first (the rule broken, then what the oracles may see first).

- ``put_state_on_loop`` (R6): the SAVE worker does not record a successful put itself;
  it hands the update (advance the chunk id, or after a final forget the id counter
  and the cancel mark) to the loop with ``call_soon_threadsafe``. The loop runs it
  before the send task goes on, so the ids stay right; but between the final's put
  returning and the loop running the update, a ``cancel_sender`` for the request
  lands in the mark the update then clears. That cancel came after the stream's
  final was put, so it marks the NEXT stream of the id (R6: the mark lasts until the
  final is put; R27): the next stream's chunks saved after it are put anyway, and
  its final with data. Found by the state machines on real threads, which cancel once
  the adapter has gone quiet after the final: the update still waits on the loop then.
  The explorer does not tell it apart: every adapter forgets the mark only after its
  put returns, so a world that cancels the moment the final's put is recorded fails
  the correct ones too, and one that settles first lets the loop run the update.
- ``await_between_check_and_commit`` (R16): the receive task checks the
  registration's token under the lock after its get, then ``await``s (one
  ``asyncio.sleep(0)``: the loop goes round once) and commits in a second critical
  section without checking again. A ``cleanup_receiver`` in that gap is not a commit
  fence: the stale chunk appears in ``poll_ready`` (and, if the id was registered
  again meanwhile, is handed to the new registration).
- ``threadsafe_order`` (R5): ``save_async`` of a final reaches the FIFO by a longer
  path than other chunks: ``call_soon_threadsafe(loop.call_later, 0, ...)``, a timer
  that fires one loop iteration later. A ``save_async`` made right after it (the
  first chunk of the request's next stream, when the id is reused at once) whose
  ``call_soon_threadsafe`` lands before that iteration overtakes the final: it is put
  as the old stream's next chunk, before its final (R5: the aligner sees the final put
  after the later stream's chunk, so the order of saves is the root, not a lost final).
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.quality.correct.asyncio_loop import (
    AsyncioLoopAdapter,
    BuildPayload,
    Item,
    _Registration,
)

__all__ = [
    "EXPECTED",
    "await_between_check_and_commit",
    "put_state_on_loop",
    "threadsafe_order",
]


class PutStateOnLoop(AsyncioLoopAdapter):
    """Records a successful put on the loop, later, instead of at once (R6)."""

    def _after_put(self, request_id: str, chunk_id: int, is_final: bool) -> None:
        # BUG: deferred to the loop. The send task still sees the update in time (it is
        # queued before the put's own result), but a cancel_sender made after a final's
        # put returned and before the loop runs this is erased by it.
        self._loop.call_soon_threadsafe(self._advance, request_id, chunk_id, is_final)


class AwaitBetweenCheckAndCommit(AsyncioLoopAdapter):
    """Checks the token, awaits, then commits without re-checking (R16)."""

    async def _poll_one(self, request_id: str, reg: _Registration) -> bool:
        with self._recv_lock:
            if self._regs.get(request_id) is not reg or reg.done:
                return False
            chunk_id = reg.next_id
        key = f"{request_id}_{self.src_stage_id}_{chunk_id}"
        status, value = await self._run_blocking(self._recv_pool, self._get_blocking, key)
        if status != "ok" or not isinstance(value, dict):
            return False
        with self._recv_lock:
            if self._regs.get(request_id) is not reg or reg.next_id != chunk_id:
                return False
        # BUG: the loop goes round once between the check and the commit; the commit
        # below trusts the check made above, so a cleanup_receiver in between is missed.
        await asyncio.sleep(0)
        with self._recv_lock:
            self._ready.setdefault(request_id, []).append(value)
            reg.next_id = chunk_id + 1
            reg.done = value.get("finished") is True
        return True


class ThreadsafeOrder(AsyncioLoopAdapter):
    """Finals reach the FIFO through a timer, one loop iteration late (R5)."""

    def _hand_over(self, item: Item) -> None:
        if not item[2]:
            super()._hand_over(item)
            return
        try:
            # BUG: a second hop (a 0 s timer) for finals only: a save_async whose
            # call_soon_threadsafe lands before the timer fires overtakes the final.
            self._loop.call_soon_threadsafe(self._loop.call_later, 0, self._fifo.put_nowait, item)
        except RuntimeError:
            raise RuntimeError("save_async() called after stop()") from None


def _factory(cls: type[AsyncioLoopAdapter], name: str) -> Any:
    def factory(
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: BuildPayload | None = None,
        **_options: Any,
    ) -> AsyncioLoopAdapter:
        return cls(
            connector, stage_id=stage_id, src_stage_id=src_stage_id, build_payload=build_payload
        )

    factory.__doc__ = cls.__doc__
    factory.__name__ = factory.__qualname__ = name
    return factory


put_state_on_loop = _factory(PutStateOnLoop, "put_state_on_loop")
await_between_check_and_commit = _factory(
    AwaitBetweenCheckAndCommit, "await_between_check_and_commit"
)
threadsafe_order = _factory(ThreadsafeOrder, "threadsafe_order")

EXPECTED: dict[str, set[str]] = {
    "put_state_on_loop": {"R6"},
    "await_between_check_and_commit": {"R16", "R14"},
    "threadsafe_order": {"R5", "R9"},
}
