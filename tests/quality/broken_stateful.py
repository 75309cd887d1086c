"""Deliberately broken adapters the stateful machines must catch.

Each is the reference ChunkAdapter with ONE method overridden to break ONE
rule, exposed as a factory (``tests.quality.broken_stateful:<name>``) so it
can also be run with ``--adapter``. ``EXPECTED`` maps each factory name to the
rule(s) a correct report may name.
"""

from __future__ import annotations

import copy
from typing import Any

from chunk_adapter._validate import check_final, check_request_id
from chunk_adapter.adapter import ChunkAdapter


class MissingTokenCheck(ChunkAdapter):
    """Commits what a get returned without checking the registration's token (R16).

    The reference's ``_poll_one`` with its one check changed: a value is committed to
    whatever registration of the request is there when the get returns, not only to
    the one the get was made for. Everything else is the reference's bookkeeping, so
    the adapter carries this bug and no other.
    """

    def _poll_one(self, request_id: str, token: object, key: str, chunk_id: int) -> bool:
        value: Any = None
        try:
            value = self.connector.get(key)
        except Exception:
            self._get_failed = True
        if value is not None and not isinstance(value, dict):
            value = None
        with self._recv_lock:
            self._recv_counts["gets"] += 1
            current = self._tokens.get(request_id)
            if value is None:
                if current is token:
                    self._queue.append((request_id, token))
                else:
                    self._awaited.discard(key)
                return False
            self._awaited.discard(key)
            if current is None:
                self._recv_counts["stale_discarded"] += 1
                return False
            # BUG: no "current is token" check: a get made for a cleaned-up registration
            # commits into the request's next one.
            self._ready.setdefault(request_id, []).append(value)
            self._next_recv_id[request_id] = chunk_id + 1
            self._recv_counts["committed"] += 1
            self._stalled.discard(request_id)
            if value.get("finished"):
                self._progress_at.pop(request_id, None)
            else:
                self._progress_at[request_id] = self.runtime.monotonic()
                self._queue.append((request_id, current))
            return True


class PollNoSwap(ChunkAdapter):
    """poll_ready copies the ready lists instead of swapping them out (R15)."""

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]:
        with self._recv_lock:
            return {rid: list(values) for rid, values in self._ready.items()}  # BUG: no clear


class IdBumpedBeforePut(ChunkAdapter):
    """Advances the chunk id before the put succeeds, so a retry skips an id (R9).

    The reference's put, but a failed try uses up its chunk id: the retry goes out
    under the next one.
    """

    def _put_once(self, attempt: Any) -> float | None:
        pause = super()._put_once(attempt)
        if pause is not None:  # the try failed and will be retried
            with self._send_lock:  # BUG: the failed try's id is used up anyway
                rid = attempt.request_id
                self._next_send_id[rid] = self._next_send_id.get(rid, 0) + 1
        return pause


class FinalDroppedOnCancel(ChunkAdapter):
    """Drops a cancelled request's final chunk too, instead of putting it with None (R6, R11)."""

    def _send_one(self, request_id: str, snap: Any, is_final: bool, cancelled: bool) -> None:
        if cancelled:
            return  # BUG: the final must still be put, with data None
        super()._send_one(request_id, snap, is_final, cancelled)


class MissingSnapshot(ChunkAdapter):
    """Queues the caller's object itself, not a snapshot of it (R4)."""

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        check_request_id(request_id, "save_async")
        check_final(is_final, "save_async")
        self._check_running("save_async")
        with self._send_cond:
            self._fifo.append((request_id, obj, is_final))  # BUG: no snapshot
            self._send_cond.notify()


class GetPastFinal(ChunkAdapter):
    """Keeps polling a registration after its final chunk was committed (R13)."""

    def _poll_one(self, request_id: str, token: object, key: str, chunk_id: int) -> bool:
        progress = super()._poll_one(request_id, token, key, chunk_id)
        with self._recv_lock:
            finished = self._tokens.get(request_id) is token and any(
                v.get("finished") for v in self._ready.get(request_id, [])
            )
            if progress and finished and (request_id, token) not in self._queue:
                self._queue.append((request_id, token))  # BUG: polled again past the final
        return progress


class LoadNotIdempotent(ChunkAdapter):
    """load_async starts a fresh registration even when the request is registered (R12)."""

    def load_async(self, request_id: str) -> None:
        check_request_id(request_id, "load_async")
        self._check_running("load_async")
        with self._recv_cond:
            token = object()  # BUG: no "already registered" check
            self._tokens[request_id] = token
            self._next_recv_id[request_id] = 0
            self._progress_at[request_id] = self.runtime.monotonic()
            self._queue.append((request_id, token))
            self._recv_signal += 1  # the reference's wake-up: this bug is R12's alone
            self._recv_cond.notify()


class CleanupKeepsReady(ChunkAdapter):
    """cleanup_receiver forgets the registration but not its ready chunks (R16)."""

    def cleanup_receiver(self, request_id: str) -> None:
        with self._recv_lock:
            kept = self._ready.get(request_id)
        super().cleanup_receiver(request_id)
        # BUG: the registration's ready chunks are put back (the only difference from
        # the reference: everything else the cleanup forgets stays forgotten)
        if kept is not None:
            with self._recv_lock:
                self._ready[request_id] = kept


class NonePayloadUsesId(ChunkAdapter):
    """A skipped None payload still consumes a chunk id, leaving a gap (R8, R9)."""

    def _send_one(self, request_id: str, snap: Any, is_final: bool, cancelled: bool) -> None:
        if cancelled or is_final:
            super()._send_one(request_id, snap, is_final, cancelled)
            return
        try:
            payload = self.build_payload(request_id, snap, is_final)
        except Exception:
            return
        if payload is None:
            with self._send_lock:  # BUG: skipped, but the id advances anyway
                self._next_send_id[request_id] = self._next_send_id.get(request_id, 0) + 1
            return
        self._put_with_retries(request_id, {"data": payload, "finished": False}, False)


class FinalLostOnBuildFailure(ChunkAdapter):
    """Drops a final chunk whose build failed instead of putting it with None (R7, R11)."""

    def _send_one(self, request_id: str, snap: Any, is_final: bool, cancelled: bool) -> None:
        if cancelled or not is_final:
            super()._send_one(request_id, snap, is_final, cancelled)
            return
        try:
            payload = self.build_payload(request_id, snap, is_final)
        except Exception:
            return  # BUG: a final whose build failed must still be put, with data None
        self._put_with_retries(request_id, {"data": payload, "finished": True}, True)


def _factory(cls: type[ChunkAdapter], name: str, snapshot: Any = copy.deepcopy) -> Any:
    """A factory building *cls* (the broken adapters of tests/quality share it)."""

    def factory(
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Any = None,
    ) -> ChunkAdapter:
        return cls(
            connector,
            stage_id=stage_id,
            src_stage_id=src_stage_id,
            build_payload=build_payload,
            snapshot=snapshot,
        )

    factory.__doc__ = cls.__doc__
    factory.__name__ = factory.__qualname__ = name
    return factory


missing_token_check = _factory(MissingTokenCheck, "missing_token_check")
poll_no_swap = _factory(PollNoSwap, "poll_no_swap")
id_bumped_before_put = _factory(IdBumpedBeforePut, "id_bumped_before_put")
final_dropped_on_cancel = _factory(FinalDroppedOnCancel, "final_dropped_on_cancel")
missing_snapshot = _factory(MissingSnapshot, "missing_snapshot")
get_past_final = _factory(GetPastFinal, "get_past_final")
load_not_idempotent = _factory(LoadNotIdempotent, "load_not_idempotent")
cleanup_keeps_ready = _factory(CleanupKeepsReady, "cleanup_keeps_ready")
none_payload_uses_id = _factory(NonePayloadUsesId, "none_payload_uses_id")
final_lost_on_build_failure = _factory(FinalLostOnBuildFailure, "final_lost_on_build_failure")

EXPECTED: dict[str, set[str]] = {
    "missing_token_check": {"R16"},
    "poll_no_swap": {"R15", "R14"},
    "id_bumped_before_put": {"R9"},
    "final_dropped_on_cancel": {"R6", "R11"},
    "missing_snapshot": {"R4"},
    "get_past_final": {"R13"},
    "load_not_idempotent": {"R12", "R13", "R14", "R23"},
    "cleanup_keeps_ready": {"R16"},
    "none_payload_uses_id": {"R8", "R9"},
    "final_lost_on_build_failure": {"R7", "R11"},
}
