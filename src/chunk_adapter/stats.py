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

    Receiver: ``gets`` (every get, whatever it returned), ``gets_empty`` (gets
    that found nothing), ``get_failures`` (gets that raised or returned a
    non-dict), ``committed`` (chunks made ready), ``stale_discarded`` (values
    fetched for a registration that was cleaned up meanwhile),
    ``stale_entries_dropped`` (polling-queue entries of a gone registration).

    Depths, at the moment of the snapshot: ``save_queue_depth``,
    ``poll_queue_depth``, ``registered``, ``ready_chunks``.
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
    gets: int = 0
    gets_empty: int = 0
    get_failures: int = 0
    committed: int = 0
    stale_discarded: int = 0
    stale_entries_dropped: int = 0
    save_queue_depth: int = 0
    poll_queue_depth: int = 0
    registered: int = 0
    ready_chunks: int = 0

    @property
    def dropped(self) -> int:
        """Every non-final chunk the sender gave up without a put (skips excluded)."""
        return self.dropped_cancelled + self.dropped_build_failed + self.dropped_put_failed

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
