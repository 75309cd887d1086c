"""Counters an operator reads to see what an adapter did: :class:`AdapterStats`."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["AdapterStats"]


@dataclass(frozen=True)
class AdapterStats:
    """An immutable snapshot of a :class:`~chunk_adapter.adapter.ChunkAdapter`'s counters.

    Sender: ``chunks_put`` (successful puts, finals included), ``finals_put``,
    ``put_failures`` (every put that raised), ``put_retries`` (tries after a
    failure), ``dropped_cancelled`` (non-final chunks of a cancelled request),
    ``dropped_build_failed`` (non-final chunks whose build raised),
    ``dropped_put_failed`` (non-final chunks given up after ``put_tries``),
    ``build_failures`` (every build that raised, final or not),
    ``skipped_none`` (non-final chunks whose payload was ``None``).

    Permanent put errors (R25): ``put_rejected`` (puts that failed with an
    error retrying cannot fix; each is also in ``put_failures``, never in
    ``put_retries``), ``dropped_put_rejected`` (non-finals dropped because of
    one), ``finals_degraded`` (finals put with data ``None`` because their
    payload was refused), ``finals_failed`` (finals refused even with data
    ``None``: streams whose receiver never sees the end).

    Stopping (R26): ``abandoned`` (saved chunks ``stop()`` gave up: still
    queued, or in flight with their thread stopped or blocked — one blocked
    inside ``put`` may still complete), ``abandoned_finals`` (how many of them
    were finals), ``dropped_at_exit`` (non-final chunks of streams cut so that
    their finals could go out within an ending drain). ``saves_refused``
    (non-final saves refused with ``SaveQueueFull`` by ``max_save_queue``).
    Cancels (R6): ``cancels_idle`` (``cancel_sender`` calls for a
    request with no open stream; each mark cuts the next stream of that id).

    Receiver: ``gets`` (every get, whatever it returned), ``gets_empty`` (gets
    that found nothing), ``get_failures`` (gets that raised or returned a
    non-dict), ``committed`` (chunks made ready), ``stale_discarded`` (values
    fetched for a registration that was cleaned up meanwhile),
    ``stale_entries_dropped`` (polling-queue entries of a gone registration),
    ``stalls_reported`` (registrations reported for making no progress for
    ``stall_timeout`` seconds, R28). With ``discard_leftovers``:
    ``leftovers_discarded`` (chunks of cleaned-up, unfinished registrations got
    and thrown away, so a reused request id never receives them),
    ``leftovers_given_up`` (such streams whose rest did not come within
    ``leftover_timeout``). Without it, on a connector that keeps stream identity
    (shared memory, Redis): ``streams_left`` (cleaned-up, unfinished registrations
    whose stream the connector was told to throw away, R29; the connector counts
    what it threw away, ``leftovers_discarded``).

    Depths, at the moment of the snapshot: ``save_queue_depth``,
    ``save_in_flight`` (1 while the SAVE thread works on a chunk),
    ``save_parked`` (streams whose put failed, waiting for their next try while
    the SAVE thread serves other requests), ``save_held`` (chunks of parked
    streams waiting behind them; a flush is done when all four are 0),
    ``cancel_marks``, ``open_streams`` (requests with
    a chunk put and the final not yet), ``poll_queue_depth``, ``registered``,
    ``ready_chunks``, ``stalled`` (registrations reported stalled and still
    without progress), ``draining`` (request ids whose abandoned stream is
    being discarded).
    """

    chunks_put: int = 0
    finals_put: int = 0
    put_failures: int = 0
    put_retries: int = 0
    dropped_cancelled: int = 0
    dropped_build_failed: int = 0
    dropped_put_failed: int = 0
    build_failures: int = 0
    skipped_none: int = 0
    put_rejected: int = 0
    dropped_put_rejected: int = 0
    finals_degraded: int = 0
    finals_failed: int = 0
    abandoned: int = 0
    abandoned_finals: int = 0
    dropped_at_exit: int = 0
    saves_refused: int = 0
    cancels_idle: int = 0
    gets: int = 0
    gets_empty: int = 0
    get_failures: int = 0
    committed: int = 0
    stale_discarded: int = 0
    stale_entries_dropped: int = 0
    stalls_reported: int = 0
    leftovers_discarded: int = 0
    leftovers_given_up: int = 0
    streams_left: int = 0
    save_queue_depth: int = 0
    save_in_flight: int = 0
    save_parked: int = 0
    save_held: int = 0
    cancel_marks: int = 0
    open_streams: int = 0
    poll_queue_depth: int = 0
    registered: int = 0
    ready_chunks: int = 0
    stalled: int = 0
    draining: int = 0

    @property
    def dropped(self) -> int:
        """Every non-final chunk the sender gave up without a put (skips excluded)."""
        return (
            self.dropped_cancelled
            + self.dropped_build_failed
            + self.dropped_put_failed
            + self.dropped_put_rejected
            + self.dropped_at_exit
        )

    @property
    def save_pending(self) -> int:
        """Saved chunks the SAVE thread has not finished yet (queued, in flight, parked
        or held)."""
        return self.save_queue_depth + self.save_in_flight + self.save_parked + self.save_held

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
