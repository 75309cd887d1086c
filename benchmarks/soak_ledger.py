"""The soak's ledger (benchmarks/soak.py): every registration at the receiver, what
its sender said of it, and how it ended.

A stream ends ``verified`` (complete and right, soak_streams.Check), ``lost``,
``mixed`` or ``twice`` (the check found that, or a bound passed), or incomplete for a
reason the soak made itself:

* ``incomplete_by_kill``: its sender was killed before reporting it finished; it is
  cleaned up ``settle / 3`` s after the kill (what was put of it may still arrive);
* ``incomplete_by_restart``: it was open (registered, not complete) when a
  redis-server went down, or ordered before it had been back ``GRACE`` s: its chunks
  may have gone with the server's memory. Such a stream is still checked for order,
  foreign chunks and repeats; it is only not held to completeness.

Every other stream must be complete ``settle`` s after its sender reported it
finished, or ``3 * settle`` s after it was ordered when no report came: else lost.
A stream that did not end verified sets its store entries apart (``orphans``): they
are that outcome's, not a leak.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from soak_streams import LOST, MIXED, TWICE, Check, Order

from chunk_adapter.adapter import ChunkAdapter

__all__ = ["BY_KILL", "BY_RESTART", "OUTCOMES", "VERIFIED", "Ledger", "Track"]

BY_KILL, BY_RESTART, VERIFIED = "incomplete_by_kill", "incomplete_by_restart", "verified"
OUTCOMES = (VERIFIED, BY_KILL, BY_RESTART, LOST, MIXED, TWICE)
PROBLEMS_KEPT = 20  # the first problems are printed; the rest only counted


class Track:
    """One registration, and what is known of its stream."""

    def __init__(self, order: Order, now: float, incarnation: int, exposed: bool) -> None:
        self.check = Check(order)
        self.ordered_at = now
        self.incarnation = incarnation  # the sender it was ordered from
        self.reported_at: float | None = None  # the sender's flush covered it
        self.unflushed = False  # ... and returned False
        self.killed_at: float | None = None  # its sender was killed before reporting it
        self.exposed = exposed  # a redis-server restart may have taken its chunks


class Ledger:
    """The receiver's side of the soak (module doc). Used by the soak's one thread only."""

    def __init__(self, rcv: ChunkAdapter, names: Callable[[Order], set[str]], settle: float):
        self.rcv, self.names, self.settle = rcv, names, settle
        self.tracks: dict[str, Track] = {}
        self.tally = dict.fromkeys(("started", "finished", "exposed", *OUTCOMES), 0)
        self.problems: list[str] = []
        self.orphans: set[str] = set()  # store entries of streams that did not end verified

    def open(self, order: Order, now: float, incarnation: int, exposed: bool) -> None:
        """Register *order*'s stream (``load_async`` may raise ``AdapterFailed``, R30)."""
        self.rcv.load_async(order.sid)
        self.tracks[order.sid] = Track(order, now, incarnation, exposed)
        self.tally["started"] += 1
        self.tally["exposed"] += exposed

    def in_flight(self) -> int:
        """Open streams whose sender lives (a killed sender's are set apart)."""
        return sum(t.killed_at is None for t in self.tracks.values())

    def reported(self, sids: list[str], now: float, flushed: bool) -> None:
        self.tally["finished"] += len(sids) * flushed
        for sid in sids:
            track = self.tracks.get(sid)
            if track is not None:  # else it is complete already
                track.reported_at, track.unflushed = now, not flushed

    def killed(self, incarnation: int, now: float) -> None:
        """Sender *incarnation* was killed: its streams not reported are set apart."""
        for track in self.tracks.values():
            if track.incarnation == incarnation and track.reported_at is None:
                track.killed_at = now

    def awaited(self, incarnation: int) -> bool:
        """Does a stream that sender *incarnation* reported finished still wait for
        chunks?"""
        return any(
            t.incarnation == incarnation and t.reported_at is not None for t in self.tracks.values()
        )

    def expose_all(self) -> None:
        """A redis-server went down: every open stream may lose chunks."""
        for track in self.tracks.values():
            self.tally["exposed"] += not track.exposed
            track.exposed = True

    def set_apart(self) -> set[str]:
        """The store entries of open streams that may end incomplete by kill or restart."""
        names: set[str] = set()
        for track in self.tracks.values():
            if track.killed_at is not None or track.exposed:
                names |= self.names(track.check.order)
        return names

    # ------------------------------------------------------------- receiving
    def receive(self) -> None:
        """Check what ``poll_ready`` hands out; end the streams that are complete or wrong."""
        for rid, values in self.rcv.poll_ready().items():
            track = self.tracks.get(rid)
            if track is None:
                self.tally[MIXED] += 1
                self._note(f"{rid}: {len(values)} value(s) handed out for no registration")
                continue
            for value in values:
                track.check.take(value)
            problem = track.check.problem
            if problem is not None:
                self._end(track, problem[0], problem[1])
            elif track.check.done:
                self._end(track, VERIFIED)

    def expire(self, now: float) -> None:
        """End the streams whose bound has passed."""
        for track in list(self.tracks.values()):
            outcome = self._overdue(track, now)
            if outcome is not None:
                self._end(track, *outcome)

    def _overdue(self, track: Track, now: float) -> tuple[str, str | None] | None:
        if track.killed_at is not None:
            return (BY_KILL, None) if now >= track.killed_at + self.settle / 3 else None
        if track.reported_at is not None:
            if now < track.reported_at + self.settle:
                return None
            said = "flush() returned False" if track.unflushed else "reported it finished"
            why = f"the sender {said} {now - track.reported_at:.1f} s ago"
        elif now >= track.ordered_at + 3 * self.settle:
            why = f"the sender did not finish it in {now - track.ordered_at:.1f} s"
        else:
            return None
        if track.exposed:
            return BY_RESTART, None
        return LOST, f"{track.check.order.sid}: {why}; {track.check.describe()}"

    def _end(self, track: Track, outcome: str, why: str | None = None) -> None:
        order = track.check.order
        del self.tracks[order.sid]
        self.rcv.cleanup_receiver(order.sid)
        self.tally[outcome] += 1
        if outcome != VERIFIED:  # what it left in the store is that outcome's, no leak
            self.orphans |= self.names(order)
        if why is not None:
            self._note(why)

    def _note(self, why: str) -> None:
        if len(self.problems) < PROBLEMS_KEPT:
            self.problems.append(why)

    def failed(self) -> dict[str, Any]:
        """The streams lost, mixed or twice (only those with a count)."""
        return {k: self.tally[k] for k in (LOST, MIXED, TWICE) if self.tally[k]}
