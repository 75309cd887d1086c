"""The reference adapter with a ``cancel_sender`` that only cancels what it knows of.

"A cancel for a request with nothing queued, in flight or partly put has nothing to
cancel": instead of keeping a mark for a stream that may never come (the reference
counts those as ``cancels_idle`` and warns), this adapter ignores such a cancel and
logs it at DEBUG. A cancel of an open stream marks it exactly as the reference does.

BUG (R6; R27 spells it out): the cancel mark applies to the request's FUTURE chunks
too and lasts until its final is put. A scheduler that cancels a request before its
first chunk was saved (an abort that overtakes the model's first output), or between
two streams of the same id, gets the next stream sent in full, its final with its
built payload, instead of a final with ``data`` ``None`` alone.
"""

from __future__ import annotations

from chunk_adapter._validate import check_request_id
from chunk_adapter.adapter import ChunkAdapter

from ._reference import factory

__all__ = ["LazyCancel", "make"]


class LazyCancel(ChunkAdapter):
    """The reference ChunkAdapter; a cancel of a request with no open stream is ignored."""

    def cancel_sender(self, request_id: str) -> None:
        check_request_id(request_id, "cancel_sender")
        with self._send_lock:
            self._check_running("cancel_sender")
            if self._stream_open(request_id):
                self._cancelled.add(request_id)
                return
        # BUG (R6): the mark must be kept for the request's next stream
        self.log.debug("cancel_sender(%r): no open stream; nothing to cancel", request_id)


make = factory(LazyCancel)
