"""Which chunk the reference SAVE thread works on next, so that one stream's failing
puts never hold back another's (issue 27, head-of-line blocking).

A put that fails transiently is not retried in place: its stream is *parked*
with the time of its next try, and the SAVE thread goes on with other requests'
chunks. Chunks of a parked stream taken from the FIFO meanwhile are *held*
behind it, in save order, and go out after it (R5 asks for save order within a
request only). :class:`SaveSchedule` keeps that bookkeeping; it has no lock of
its own: every method is called with the adapter's ``_send_lock`` held.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Attempt", "SaveSchedule"]

Item = tuple[str, Any, bool]  # (request id, snapshot, final?) as saved


@dataclass
class Attempt:
    """A chunk between its first put and its last: the wire value and its tries."""

    request_id: str
    value: dict[str, Any]
    is_final: bool
    seq: int  # the item's number in take order (stop() counts an abandoned item once)
    tries: int = 0
    failing_since: float | None = None  # when its first put failed (final_put_timeout)
    due: float = 0.0  # when its next try is due, while parked


@dataclass
class SaveSchedule:
    """Parked streams, the chunks held behind them, and the streams free to go on."""

    # request id -> its attempt waiting for its next try.
    parked: dict[str, Attempt] = field(default_factory=dict)
    # (due time, seq, request id), a heap; an entry is stale once its attempt left
    # ``parked`` or was parked again (its seq or due no longer match).
    _due: list[tuple[float, int, str]] = field(default_factory=list)
    # request id -> its chunks taken from the FIFO while it was blocked, in save order.
    held: dict[str, deque[Item]] = field(default_factory=dict)
    # Streams whose blocking chunk finished while they had chunks held: next to go.
    _resume: deque[str] = field(default_factory=deque)
    # Due retries and new work take turns: True after a job that was a retry or that
    # ended parked, so the next job is new work if there is any (neither starves).
    fresh_first: bool = False

    def blocked(self, request_id: str) -> bool:
        """Must a newly taken chunk of *request_id* wait behind earlier ones?"""
        return request_id in self.parked or request_id in self.held

    def hold(self, item: Item) -> None:
        self.held.setdefault(item[0], deque()).append(item)

    def park(self, attempt: Attempt, due: float) -> None:
        attempt.due = due
        self.parked[attempt.request_id] = attempt
        heapq.heappush(self._due, (due, attempt.seq, attempt.request_id))

    def next_due(self) -> float | None:
        """When the earliest parked attempt is due (``None``: nothing parked)."""
        while self._due:
            due, seq, request_id = self._due[0]
            attempt = self.parked.get(request_id)
            if attempt is not None and attempt.seq == seq and attempt.due == due:
                return due
            heapq.heappop(self._due)  # stale
        return None

    def take_due(self, now: float) -> Attempt | None:
        """The earliest parked attempt due at *now*, no longer parked."""
        due = self.next_due()
        if due is None or due > now:
            return None
        _, _, request_id = heapq.heappop(self._due)
        return self.parked.pop(request_id)

    def finished(self, request_id: str) -> None:
        """*request_id*'s blocking chunk is done: its held chunks may go on."""
        if request_id in self.held and request_id not in self.parked:
            self._resume.append(request_id)

    def take_resumed(self) -> Item | None:
        """The first held chunk of the longest-waiting stream free to go on."""
        while self._resume:
            request_id = self._resume.popleft()
            items = self.held.get(request_id)
            if not items:
                continue
            item = items.popleft()
            if not items:
                del self.held[request_id]
            return item
        return None

    def pending(self) -> int:
        """Chunks parked or held (saved, not finished, not in the FIFO)."""
        return len(self.parked) + sum(len(items) for items in self.held.values())

    def clear(self) -> tuple[list[Attempt], list[Item]]:
        """Forget everything (stop()): the parked attempts and the held chunks."""
        parked, held = list(self.parked.values()), [i for q in self.held.values() for i in q]
        self.parked.clear()
        self.held.clear()
        self._due.clear()
        self._resume.clear()
        return parked, held
