"""The reference adapter with a SAVE thread that takes the FIFO in batches.

"One lock round-trip per chunk is wasteful under load": the SAVE thread takes every
item queued so far in one critical section (with the reference's ``_take``, which also
says whether the item's request is cancelled), then builds and puts the batch in order
outside the lock.

BUG (R6): whether an item is cancelled is decided when its batch is taken, not when
its turn comes. A ``cancel_sender`` that arrives while a batch is being sent does not
stop the batch's later chunks of that request: they are built and put after the cancel
returned (only one chunk already past the check may be), and its final goes out with
its built payload instead of ``data`` ``None``. A cancel that comes while the request's
chunks are still in the FIFO, or while the SAVE thread is idle, works.
"""

from __future__ import annotations

from chunk_adapter.adapter import ChunkAdapter

from ._reference import factory

__all__ = ["BatchedSave", "make"]


class BatchedSave(ChunkAdapter):
    """The reference ChunkAdapter; the SAVE thread takes everything queued at once."""

    def _save_loop(self) -> None:
        while True:
            with self._send_cond:
                while not self._fifo and not self._stop.is_set():
                    self._send_cond.wait(self.wait_timeout)
                if self._stop.is_set():
                    return
                batch = [self._take() for _ in range(len(self._fifo))]
            for request_id, snap, is_final, cancelled in batch:  # BUG (R6): stale `cancelled`
                if self._stop.is_set():
                    return
                with self._send_lock:
                    self._in_flight = (self._done, request_id, is_final)
                try:
                    self._send_one(request_id, snap, is_final, cancelled)
                except Exception:
                    self.log.exception(
                        "SAVE thread: unexpected error on %r; continuing", request_id
                    )
                finally:
                    with self._drained_cond:
                        self._in_flight = None
                        self._done += 1
                        self._drained_cond.notify_all()


make = factory(BatchedSave)
