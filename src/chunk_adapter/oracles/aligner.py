"""Aligning one request's puts with its saves, stream by stream (R2, R4–R8, R10, R11, R23).

The puts of a request are walked in the order they began (one SAVE thread
puts them one at a time) and aligned with the request's saves, stream by
stream (a stream ends at its final chunk): every non-final put must match a
pending save of its stream, in save order, with the payload built from the
snapshot taken at the call; saves passed over without a put must be explained
(cancel, failed build, ``None`` payload, failed puts); the final is put once,
last, with data ``None`` when the request was cancelled. Each violation is
placed at the put being aligned (``Violation.at``); liveness ones at ``None``.
Before the puts, every build is checked on its own: ``build_payload`` must be
given an object equal to a snapshot saved for the request (R4, placed at the
build, the earliest event that shows a missing snapshot).

Over 400 lines, and one module because the alignment is one walk with one cursor per
stream; its explanations of a passed-over save (cancel, failed build, ``None``, failed
puts) read and move that cursor, so they stay beside it.
"""

from __future__ import annotations

import bisect
import copy
from dataclasses import dataclass, field
from typing import Any

from ..history import BuildCall, ConnectorOp
from ..rules import R2, R4, R5, R6, R7, R8, R10, R11, R23, R25
from .records import UNCOPYABLE, CallRecord
from .timeline import Timeline
from .violations import Violation

__all__ = ["INF", "Aligner", "data_of", "is_final_put"]

INF = 1 << 62


@dataclass
class _Stream:
    nonfinals: list[CallRecord] = field(default_factory=list)
    final: CallRecord | None = None


def _streams(saves: list[CallRecord]) -> list[_Stream]:
    streams = [_Stream()]
    for s in saves:
        if s.args[1]:
            streams[-1].final = s
            streams.append(_Stream())
        else:
            streams[-1].nonfinals.append(s)
    if not streams[-1].nonfinals and streams[-1].final is None:
        streams.pop()
    return streams


def _equal(a: Any, b: Any) -> bool | None:
    """``a == b`` as a plain bool, ``None`` when the values cannot say (an ``==`` that
    raises or returns something else, as a numpy array's does)."""
    try:
        same = a == b
    except Exception:
        return None
    return same if isinstance(same, bool) else None


def data_of(op: ConnectorOp) -> Any:
    return op.value.get("data") if isinstance(op.value, dict) else None


def gives_up(op: ConnectorOp) -> bool:
    """Whether *op* is a final with data ``None`` refused for good: the last form a final
    takes, so its stream ends there unless that put is tried once more (R25)."""
    return op.outcome == "error" and op.permanent and is_final_put(op) and data_of(op) is None


def is_final_put(op: ConnectorOp) -> bool:
    return isinstance(op.value, dict) and op.value.get("finished") is True


_UNKNOWN = object()
"""A payload the history cannot tell (:meth:`Aligner._payload_of`)."""

ATTRIBUTED = 64
"""The most saves dropped in one window whose failed puts are told apart chunk by chunk
(:meth:`Aligner._short_of_tries` compares their payloads pairwise); past it, the pooled
count alone (1,000 drops in one outage cost 0.37 s a judgement instead of 0.03 s)."""

BRANCHES = 16
"""How many alternative alignments of equal-data saves one request may try in all
(:meth:`Aligner._branch`, at most :data:`CANDIDATES` at each point); past it the earliest
save is taken. A branch point needs failed puts before a put whose data several pending
saves share, so real histories have one or two."""
CANDIDATES = 3
"""Equal-data saves tried for one put: the earliest few (a put more than two saves ahead
of its own would leave those between unexplained anyway)."""
REPEATS = 8
"""How many finals put again (:meth:`Aligner._again_or_not`) one request may read both ways
in all, apart from :data:`BRANCHES`; the second reading is tried only where the first
found a violation. Past it, a repeat is read as the next stream's final."""


class Aligner:
    """Aligns one request's puts with its saves, stream by stream (module doc)."""

    def __init__(self, tl: Timeline, rid: str, quiescent: bool, put_tries: int | None) -> None:
        self.rid = rid
        self.quiescent = quiescent and tl.sender_stop_end is None
        self.put_tries = put_tries
        self.have_builds = tl.have_builds
        self.builds: list[BuildCall] = tl.builds.get(rid, [])  # in begin order
        self._build_begins = [b.begin for b in self.builds]
        self._builds_by_end = sorted(self.builds, key=lambda b: b.end)
        self._build_ends = [b.end for b in self._builds_by_end]
        self.cancels = tl.cancels.get(rid, [])
        self.puts = tl.puts.get(rid, [])
        self.saves: list[CallRecord] = tl.saves.get(rid, [])  # in begin order
        self.streams = _streams(self.saves)
        self.out: list[Violation] = []
        self.stream_at = 0  # index in self.streams of the stream being aligned
        self.pending_at = 0  # index of its first non-final not yet matched to a put
        # Every failed non-final put since the last successful put (each branch of
        # :meth:`_branch` copies it). A final's failed try is no try of a non-final chunk,
        # so it counts for none (R10).
        self.failed: list[ConnectorOp] = []
        self.prev_final_end = -1  # end of the previous stream's final put
        self.started_after: dict[int, int] = {}  # cancel begin -> items started after it
        self.at: int | None = None  # begin of the put being aligned: where a violation is
        self.unsnapshotted: BuildCall | None = None  # a build already reported as R4
        self.branches = [BRANCHES]  # alignments still to try, shared by every branch's copy
        self.index = 0  # index in self.puts of the put being aligned
        self.aligned_rest = False  # a branch has aligned every put after it
        self.again_asked = -1  # index of the put :meth:`_again_or_not` read both ways
        self.repeats = [REPEATS]  # readings :meth:`_again_or_not` may still try (shared)
        self.unaccounted = 0  # puts no save explained (every saved chunk accounted for)
        self.overtaken: frozenset[int] = frozenset()  # id() of finals put after a later chunk
        # Puts refused for good (R25: the error's ``permanent``) of the current stream: a
        # put of the same key and data after one is a retry R25 forbids; a final refused
        # so may be put once more with data None.
        self.refused: list[ConnectorOp] = []
        # A final with data None refused for good (R25): its stream is given up unless the
        # request's next put is that final once more.
        self.giving_up: ConnectorOp | None = None

    @property
    def failures(self) -> int:
        """Failed non-final puts since the last successful put."""
        return len(self.failed)

    def violation(self, rule: str, msg: str, key: str | None = None) -> None:
        """Report *rule*, at the put being aligned (``None`` while checking liveness)."""
        self.out.append(Violation(rule, msg, self.rid, key, self.at))

    def run(self) -> list[Violation]:
        self._builds_of_snapshots()
        self._align_from(0)
        return self.out

    def _align_from(self, start: int) -> None:
        """Align the puts from index *start* on, then judge liveness."""
        for index in range(start, len(self.puts)):
            op = self.puts[index]
            self.at = op.begin
            if self.giving_up is not None:
                pending, self.giving_up = self.giving_up, None
                if not self._once_more(pending, op):
                    self._give_up(pending)  # not tried once more: given up
                elif self._next_final_before(op):  # or it is the next stream's final
                    self._either(pending, index)
                    return
            self._retried_refused(op)
            if op.outcome == "error":
                if op.permanent:
                    self.refused.append(op)
                if gives_up(op):
                    self.giving_up = op  # given up, unless the next put tries it again
                if not is_final_put(op):
                    self.failed.append(op)
                continue
            if op.outcome != "ok" or id(op) in self.overtaken:
                continue  # an overtaken final was reported where it was overtaken
            if self.stream_at >= len(self.streams):
                self.unaccounted += 1
                kind = "final" if is_final_put(op) else "non-final"
                self.violation(
                    R11 if is_final_put(op) else R5,
                    f"a {kind} chunk was put but every saved chunk of the request was already "
                    f"accounted for (data {data_of(op)!r})",
                    op.key,
                )
                return
            self.index = index
            if is_final_put(op) and self._put_again(op, index):
                self._again_or_not(op, index)
                return
            if is_final_put(op):
                self._final(op)
            else:
                self._nonfinal(op)
            if self.aligned_rest:
                return  # a branch aligned the rest (:meth:`_branch`)
        if self.giving_up is not None:
            self._give_up(self.giving_up)
            self.giving_up = None
        if self.quiescent:
            self.at = None
            self._liveness()

    def _branch(self, op: ConnectorOp, candidates: list[int]) -> None:
        """Saves of equal data are interchangeable, so which of them *op* puts is open
        when puts failed before it: the one saved first (its tries succeeded at last), or
        a later one (the earlier was dropped after its failed tries, R10). Align the rest
        of the request under each choice, earliest first, and keep the one with the fewest
        violations (the earliest of those): the history's best explanation, never a
        violation that another reading of the same events does not have."""
        best: Aligner | None = None
        for j in candidates[:CANDIDATES]:
            self.branches[0] -= 1
            trial = self._trial()
            trial._take(j, op)
            trial._align_from(self.index + 1)
            if best is None or len(trial.out) < len(best.out):
                best = trial
        assert best is not None
        self.__dict__.update(best.__dict__)
        self.aligned_rest = True

    def _last_ok_before(self, index: int) -> ConnectorOp | None:
        """The request's last successful put before the put at *index*."""
        return next((p for p in reversed(self.puts[:index]) if p.outcome == "ok"), None)

    def _put_again(self, op: ConnectorOp, index: int) -> bool:
        """Whether the final put *op* may be the request's previous successful put — a
        final, of the same key and value — put again (a put retried while it went on to
        succeed), not the next stream's final: then :meth:`_again_or_not` reads it both
        ways."""
        if index == self.again_asked or self.repeats[0] <= 0:
            return False
        prev = self._last_ok_before(index)
        return (
            prev is not None
            and is_final_put(prev)
            and prev.key == op.key
            and _equal(prev.value, op.value) is True
        )

    def _again_or_not(self, op: ConnectorOp, index: int) -> None:
        """Align the rest with *op* as the next stream's final, and with *op* as the last
        final put a second time (R11: exactly one final put per stream). The second reading
        is kept only where it explains more: the first leaves more puts that no save
        explains (the next stream's own final, put after the repeat), or *op* began while
        the put it repeats was in flight and the second has fewer violations."""
        prev = self._last_ok_before(index)
        assert prev is not None  # _put_again found it
        trials: list[Aligner] = []
        for again in (False, True):
            if again and len(trials[0].out) == len(self.out):
                break  # the plain reading found nothing more: it stands, nothing to ask
            self.repeats[0] -= 1
            trial = self._trial()
            trial.again_asked = index
            if again:
                trial.violation(
                    R11,
                    f"the final chunk {op.key!r} was put a second time (the same value as the "
                    "stream's final put before it): a stream gets exactly one final put",
                    op.key,
                )
                trial._align_from(index + 1)
            else:
                trial._align_from(index)
            trials.append(trial)
        plain, again_ = trials[0], trials[-1]
        better = plain.unaccounted > again_.unaccounted or (
            op.begin < prev.end and len(again_.out) < len(plain.out)
        )
        self.__dict__.update((again_ if better else plain).__dict__)
        self.aligned_rest = True

    def _trial(self) -> Aligner:
        """A copy to align one reading of the rest on (:meth:`_branch`, :meth:`_either`):
        its own lists of what it finds and of the failed and refused puts."""
        trial = copy.copy(self)
        trial.out, trial.started_after = list(self.out), dict(self.started_after)
        trial.failed, trial.refused = list(self.failed), list(self.refused)
        return trial

    # ------------------------------------------------------------------ helpers
    def _builds_of_snapshots(self) -> None:
        """R4 at the build: ``build_payload`` was given an object equal to no snapshot
        saved for the request before the build ended.

        The build record holds the very object the adapter passed, so an object the
        program mutated after ``save_async`` shows its mutation here whatever the
        schedule of the put: no snapshot was taken (or only part of one). (So does a
        snapshot the adapter itself changes after the build, e.g. a buffer it reuses:
        the put-time check has always read that as R4 too.) Values whose ``==`` cannot
        say (:func:`_equal` ``None``) count as equal. One SAVE
        thread builds in save order, so the match is looked for from the save after
        the last one matched, then among every earlier save.
        """
        saves = self.saves
        if not saves or any(s.args[0] is UNCOPYABLE for s in saves):
            return
        begins = [s.begin for s in saves]
        after = 0
        for b in self.builds:
            made = bisect.bisect_left(begins, b.end)
            order = [*range(after, made), *range(min(after, made))]
            j = next((j for j in order if _equal(saves[j].args[0], b.snapshot) is not False), None)
            if j is not None:
                after = j + 1
                continue
            self.at = b.begin
            self.unsnapshotted = b
            self.violation(
                R4,
                f"build_payload was given {b.snapshot!r}, which equals no snapshot saved for "
                "the request (the object must be copied at save_async time: a mutation after "
                "the call reached the build)",
            )
            self.at = None
            return

    def _cancels(self, before: int) -> list[CallRecord]:
        """Cancels that mark the current stream and began before *before*."""
        return [c for c in self.cancels if self.prev_final_end < c.begin < before]

    def _build_before(self, op: ConnectorOp, after: int) -> BuildCall | None:
        """The last build that ended before *op* began, if it began after *after*.

        One SAVE thread builds one chunk at a time, so that is the build of the
        chunk *op* puts (or nothing, for a chunk put without a build).
        """
        i = bisect.bisect_left(self._build_ends, op.begin)
        if i == 0:
            return None
        b = self._builds_by_end[i - 1]
        return b if b.begin > after else None

    def _builds_between(self, after: int, before: int) -> list[BuildCall]:
        """The builds that began after sequence number *after* and before *before*."""
        lo = bisect.bisect_right(self._build_begins, after)
        return self.builds[lo : bisect.bisect_left(self._build_begins, before)]

    def _dropped_ok(self, s: CallRecord, window_end: int) -> bool:
        """Is there a reason besides failed puts for save *s* to have no put?"""
        snap = s.args[0]
        if not self.have_builds and snap is None:
            return True  # identity build -> None payload -> skipped (R8)
        for b in self._builds_between(s.begin, window_end):
            if not b.is_final and b.snapshot == snap and (b.outcome == "error" or b.result is None):
                return True  # R7 / R8
        return bool(self._cancels(window_end))  # R6

    def _justify(
        self, dropped: list[CallRecord], window_end: int, next_op: ConnectorOp | None
    ) -> None:
        """Saves passed over without a put must be explained (R5, R10)."""
        by_put = [s for s in dropped if not self._dropped_ok(s, window_end)]
        need = self._need(by_put)
        key = next_op.key if next_op is not None else None
        short, tries, over = self._short_of_tries(by_put, dropped, window_end, next_op)
        if short and self.failures >= need:  # enough tries in all, but not each its own
            own = ", ".join(f"{snap!r} after {n}" for snap, n in short)
            known = "" if self.put_tries else " (put_tries not known: another chunk got as many)"
            self.violation(
                R10,
                f"saved chunk(s) dropped after fewer than {tries} failed puts of their own{known}: "
                f"{own} (a failed put is a chunk's when it carries its payload); every chunk "
                "gets its own tries",
                key,
            )
        elif by_put and self.failures < need:
            snaps = [s.args[0] for s in by_put]
            stale = [c for c in self.cancels if c.begin < by_put[0].begin]
            stale = [c for c in stale if c.begin <= self.prev_final_end]
            as_cancelled = next_op is None or (  # nothing more put, or a None final
                is_final_put(next_op) and data_of(next_op) is None
            )
            if self.failures == 0 and stale and self.stream_at > 0 and as_cancelled:
                # dropped as if cancelled (the stream's final put with data None), by a
                # cancel of an earlier stream: its mark should have ended when that stream's
                # final was put (R6), so the mark is the root, not the order of saves
                self.violation(
                    R6,
                    f"saved chunk(s) {snaps!r} of a new stream of the request were dropped, "
                    "as if cancelled, by a cancel_sender made before the previous stream's "
                    "final was put: a cancel mark lasts until that final is put",
                    key,
                )
            elif self.failures == 0:
                self.violation(
                    R5,
                    f"saved chunk(s) {snaps!r} were never put although a later chunk of the same "
                    "stream was: nothing explains the drop (no cancel, failed build, None payload "
                    "or failed put)",
                    key,
                )
            else:
                self.violation(
                    R10,
                    f"saved chunk(s) {snaps!r} dropped after {self.failures} failed put(s); "
                    f"expected at least {need} ({self.put_tries or 1} tries each)",
                    key,
                )
        elif over:  # the mirror: tried too often
            limit = (
                "put_tries allows"
                if self.put_tries
                else "a chunk of the same outage was dropped after"
            )
            self.violation(
                R10,
                f"non-final chunk(s) tried more often than the {tries} tries {limit}: "
                f"{'; '.join(over)} (a failed put is a chunk's when it carries its payload); "
                "every chunk gets the same tries and is dropped after them",
                key,
            )
        if (
            not dropped
            and next_op is not None
            and not is_final_put(next_op)
            and self.put_tries is not None
            and self.failures >= self.put_tries
        ):
            self.violation(
                R10,
                f"a non-final chunk was put after {self.failures} failed tries; it should have "
                f"been dropped after {self.put_tries}",
                next_op.key,
            )

    def _short_of_tries(
        self,
        by_put: list[CallRecord],
        dropped: list[CallRecord],
        window_end: int,
        next_op: ConnectorOp | None,
    ) -> tuple[list[tuple[Any, int]], int, list[str]]:
        """The saves of *by_put* (dropped for failed puts) that got fewer failed puts of
        their own than R10's tries, with how many each got; the tries asked for; and the
        chunks tried more often than that, said: a save of *by_put* dropped after more
        (``put_tries`` known), *next_op* (a non-final put) put after as many.

        A failed put is a save's when it carries that save's payload (what its build
        returned, or the snapshot where nothing builds). Pooled, one chunk's tries may hide
        another's missing ones: a count of failures carried over from a dropped chunk gives
        the next one a single try. Where ``put_tries`` is not known, a chunk dropped after
        k failed puts of its own shows that the adapter's tries are k, so the most any
        chunk here got is asked of all, and of the chunk put next, fewer. Said only where
        every payload is known and tells its save apart from the window's others (the
        saves *dropped* for another reason and the chunk put next among them), no put was
        refused for good (R25: that chunk's tries end at once) and the window is small
        enough to compare pairwise: else nothing (``[]``, ``0``, ``[]``)."""
        nothing: tuple[list[tuple[Any, int]], int, list[str]] = ([], 0, [])
        if not by_put or len(dropped) > ATTRIBUTED:
            return nothing
        if any(op.permanent for op in self.failed):  # R25: refused for good, tried once
            return nothing
        payloads = [self._payload_of(s, window_end) for s in by_put]
        if any(p is _UNKNOWN for p in payloads):
            return nothing
        judged = {id(s) for s in by_put}  # by identity: a record's == compares payloads
        excused = [self._payload_of(s, window_end) for s in dropped if id(s) not in judged]
        rivals = [*payloads, *(p for p in excused if p is not _UNKNOWN)]
        rivals += [data_of(next_op)] if next_op is not None else []
        for i, p in enumerate(payloads):
            if any(_equal(p, q) is not False for j, q in enumerate(rivals) if j != i):
                return nothing  # two payloads alike: whose failed put is whose cannot be said
        data = [data_of(op) for op in self.failed]
        counts = []
        put_next = next_op if next_op is not None and not is_final_put(next_op) else None
        asked = payloads if put_next is None else [*payloads, data_of(put_next)]
        for p in asked:
            counted = [d is p or _equal(d, p) for d in data]
            if None in counted:
                return nothing
            counts.append(sum(1 for c in counted if c))
        own = counts.pop() if put_next is not None else 0
        need = self.put_tries or max(counts)
        short = [(s.args[0], n) for s, n in zip(by_put, counts, strict=True) if n < need]
        over = [
            f"{s.args[0]!r} dropped after {n} failed puts of its own"
            for s, n in zip(by_put, counts, strict=True)
            if n > need
        ]
        if put_next is not None and own >= need:
            over.append(f"{data_of(put_next)!r} put after {own} failed puts of its own")
        return short, need, over

    def _payload_of(self, s: CallRecord, window_end: int) -> Any:
        """The payload save *s* would be put with: its one successful non-final build's
        result before *window_end*, its snapshot where nothing builds; ``_UNKNOWN`` else."""
        snap = s.args[0]
        if not self.have_builds:
            return snap
        built = [
            b.result
            for b in self._builds_between(s.begin, window_end)
            if not b.is_final and b.outcome == "ok" and _equal(b.snapshot, snap) is True
        ]
        return built[0] if len(built) == 1 else _UNKNOWN

    def _match(self, nonfinals: list[CallRecord], snap: Any, op: ConnectorOp) -> int | None:
        for j in range(self.pending_at, len(nonfinals)):
            if nonfinals[j].begin < op.begin and nonfinals[j].args[0] == snap:
                return j
        return None

    # -------------------------------------------------------------------- steps
    def _nonfinal(self, op: ConnectorOp) -> None:
        stream = self.streams[self.stream_at]
        data = data_of(op)
        if data is None:
            self.violation(
                R8, "a non-final chunk was put with data None; it must be skipped", op.key
            )
        snap, built = data, None
        if self.have_builds:
            b = self._build_before(op, self.prev_final_end)
            if b is None or b.is_final or b.outcome != "ok":
                self.violation(
                    R7,
                    f"non-final chunk put (data {data!r}) without a successful build before it "
                    f"(last build: {b!r})",
                    op.key,
                )
                self.failed = []
                return
            if b.result != data:
                self.violation(
                    R2,
                    f"put data {data!r} is not what build_payload returned ({b.result!r})",
                    op.key,
                )
            snap, built = b.snapshot, b
        j = self._match(stream.nonfinals, snap, op)
        if j is not None and self.failures and self.branches[0] > 0:
            same = [
                k
                for k in range(j, len(stream.nonfinals))
                if stream.nonfinals[k].begin < op.begin and stream.nonfinals[k].args[0] == snap
            ]
            if len(same) > 1:
                self._branch(op, same)
                return
        if j is None:
            earlier = any(s.args[0] == snap for s in stream.nonfinals[: self.pending_at])
            pending = [s.args[0] for s in stream.nonfinals[self.pending_at :]]
            if earlier:
                self.violation(
                    R5,
                    f"chunk built from {snap!r} was put again or out of save order "
                    f"(pending saves: {pending!r})",
                    op.key,
                )
            elif (later := self._later_stream(snap, op)) is not None:
                self._lost_final(stream, later, snap, op)
            else:
                if built is None or built is not self.unsnapshotted:  # else said at the build
                    self.violation(
                        R4,
                        f"payload built from {snap!r}, which is no snapshot saved for this "
                        f"stream (pending saves: {pending!r}); "
                        "the object must be copied at save_async time",
                        op.key,
                    )
                self._consume_mutated(stream.nonfinals, op)
            self.failed = []
            return
        self._take(j, op)

    def _take(self, j: int, op: ConnectorOp) -> None:
        """*op* puts the current stream's non-final save *j*: what it passed over must be
        explained (R5, R10)."""
        stream = self.streams[self.stream_at]
        self._justify(stream.nonfinals[self.pending_at : j], op.begin, op)
        self._cancel_rules(stream.nonfinals[j], op)
        self.pending_at = j + 1
        self.failed = []

    def _later_stream(self, snap: Any, op: ConnectorOp) -> int | None:
        """The index of a later stream of the request with a chunk saved from *snap* before
        *op*, when this stream's final was saved before *op* too: then *op* is that
        stream's chunk, put while this stream's final never was."""
        final = self.streams[self.stream_at].final
        if final is None or final.begin > op.begin:
            return None
        for index in range(self.stream_at + 1, len(self.streams)):
            if any(s.args[0] == snap and s.begin < op.begin for s in self.streams[index].nonfinals):
                return index
        return None

    def _lost_final(self, stream: _Stream, later: int, snap: Any, op: ConnectorOp) -> None:
        """A stream ended without its final put (R11, not a snapshot fault): say so once and
        align *op* with the stream it belongs to."""
        assert stream.final is not None
        late = self._final_put_later(stream.final)
        if late is not None:  # not lost: overtaken, so the order of saves is the root
            self.overtaken = self.overtaken | {id(late)}
            self.violation(
                R5,
                f"the final chunk saved from {stream.final.args[0]!r} was put (as {late.key!r}) "
                f"after a chunk of a later stream of the request (built from {snap!r}): a "
                "later save overtook the stream's final",
                op.key,
            )
        else:
            self.violation(
                R11,
                f"the final chunk saved from {stream.final.args[0]!r} was never put: a chunk "
                f"of a later stream of the request (built from {snap!r}) was put instead",
                op.key,
            )
        self.stream_at, self.pending_at, self.failed = later, 0, []
        # no put of the lost final ended: the save of the final before *later* bounds it
        self.prev_final_end = self.streams[later - 1].final.end  # type: ignore[union-attr]
        self.started_after = {}
        if is_final_put(op):
            self._final(op)
        else:
            self._nonfinal(op)

    def _final_put_later(self, final: CallRecord) -> ConnectorOp | None:
        """A successful final put after the one being aligned whose data is *final*'s (its
        snapshot, or what a final build of it returned): the final was put late, not lost."""
        built = [
            b.result
            for b in self.builds
            if b.is_final and b.outcome == "ok" and _equal(b.snapshot, final.args[0])
        ]
        for op in self.puts[self.index + 1 :]:
            if op.outcome != "ok" or not is_final_put(op):
                continue
            data = data_of(op)
            if _equal(data, final.args[0]) or any(_equal(data, r) for r in built):
                return op
        return None

    def _later_final(self, final: CallRecord, op: ConnectorOp) -> int | None:
        """The index of a later stream whose final *op* puts, when this stream's final
        (*final*) was built but never put: *op*'s build is of that later final's snapshot,
        saved before *op*, while a build of this final's snapshot ended before it (so the
        final was not built from a mutated object, R4: it was given up)."""
        if not self.have_builds or data_of(op) is None:  # a None final: a cancel's, R6/R7
            return None
        b = self._build_before(op, final.begin)
        if b is None or not b.is_final or _equal(b.snapshot, final.args[0]) is not False:
            return None
        lo = bisect.bisect_right(self._build_begins, final.begin)
        if not any(
            x.is_final and x.end < b.begin and _equal(x.snapshot, final.args[0])
            for x in self.builds[lo:]
        ):
            return None
        for index in range(self.stream_at + 1, len(self.streams)):
            later = self.streams[index].final
            if later is not None and later.begin < op.begin and _equal(later.args[0], b.snapshot):
                return index
        return None

    def _consume_mutated(self, nonfinals: list[CallRecord], op: ConnectorOp) -> None:
        """The put of a mutated object (R4) is still the put of one pending save.

        The SAVE thread takes saves in order, so it is the first pending save
        saved before the put that nothing else explains dropping: mark it put,
        so the same chunk is not reported again as never put (R5) when the
        stream's next chunk arrives. One fault, one violation.
        """
        for j in range(self.pending_at, len(nonfinals)):
            if nonfinals[j].begin > op.begin:
                return
            if not self._dropped_ok(nonfinals[j], op.begin):
                self.pending_at = j + 1
                return

    def _cancel_rules(self, save: CallRecord, op: ConnectorOp) -> None:
        """R6: non-finals saved after a cancel are dropped; at most one in progress slips by."""
        for c in self._cancels(op.begin):
            if c.end < save.begin:
                self.violation(
                    R6,
                    f"chunk {save.args[0]!r} was saved after cancel_sender returned and must be "
                    "dropped, but it was put",
                    op.key,
                )
                return
            start = op.begin
            if self.have_builds:
                b = self._build_before(op, save.begin)
                start = b.begin if b is not None else op.begin
            if start > c.end:
                n = self.started_after.get(c.begin, 0) + 1
                self.started_after[c.begin] = n
                if n > 1:
                    self.violation(
                        R6,
                        f"{n} queued non-final chunks were put after cancel_sender returned; only "
                        "one already past the cancel check may be",
                        op.key,
                    )

    def _final(self, op: ConnectorOp) -> None:
        stream = self.streams[self.stream_at]
        s = stream.final
        if s is not None and (later := self._later_final(s, op)) is not None:
            lost = self.streams[later].final
            assert lost is not None  # _later_final returns a stream with a final
            self._lost_final(stream, later, lost.args[0], op)
            return
        if s is None:
            self.violation(
                R11,
                f"a final chunk was put (data {data_of(op)!r}) but this stream's final was never "
                "saved",
                op.key,
            )
        else:
            self._justify(stream.nonfinals[self.pending_at :], op.begin, op)
            self._final_data(s, op)
        self._next_stream(op)

    def _next_stream(self, op: ConnectorOp) -> None:
        """The stream being aligned ended with *op* (its final put, or given up, R25)."""
        self.stream_at += 1
        self.pending_at = 0
        self.failed = []
        self.refused = []
        self.prev_final_end = op.end
        self.started_after = {}

    def _once_more(self, refused: ConnectorOp, op: ConnectorOp) -> bool:
        """Whether *op* may be the final *refused* (data ``None``, refused for good) put once
        more: the same key, data ``None``, and no build of the request began since (a build
        is the adapter going on to its next chunk)."""
        return (
            op.key == refused.key
            and is_final_put(op)
            and data_of(op) is None
            and not self._builds_between(refused.end, op.begin)
        )

    def _next_final_before(self, op: ConnectorOp) -> bool:
        """Whether the next stream's final was saved before *op* began (a cancelled final is
        put unbuilt with data ``None``: *op* may be that one)."""
        at = self.stream_at + 1
        final = self.streams[at].final if at < len(self.streams) else None
        return final is not None and final.begin < op.begin

    def _either(self, refused: ConnectorOp, index: int) -> None:
        """The put at *index* is the refused final once more, or the next stream's final
        (:meth:`_next_final_before`): align the rest both ways and keep the reading with
        fewer violations, as :meth:`_branch` does."""
        best: Aligner | None = None
        for give_up in (False, True):
            trial = self._trial()
            if give_up:
                trial._give_up(refused)
            trial._align_from(index)
            if best is None or len(trial.out) < len(best.out):
                best = trial
        assert best is not None
        self.__dict__.update(best.__dict__)
        self.aligned_rest = True

    def _give_up(self, op: ConnectorOp) -> None:
        """R25: a final with data ``None`` was refused for good (a cancelled stream's, a
        ``None`` payload's, or a refused final's second form) and the request's next put
        was not that final once more: the stream is given up, and ends at the sender
        without a final put. The next put aligns with the next stream."""
        if self.stream_at >= len(self.streams) or self.streams[self.stream_at].final is None:
            return
        self._justify(self.streams[self.stream_at].nonfinals[self.pending_at :], op.begin, op)
        self._next_stream(op)

    def _final_data(self, s: CallRecord, op: ConnectorOp) -> None:
        data = data_of(op)
        cancels = self._cancels(op.begin)
        definite = any(c.end < s.begin for c in cancels)
        b = self._build_before(op, s.begin) if self.have_builds else None
        if b is not None and not b.is_final:
            b = None
        if data is None:
            explained = bool(cancels) or (
                (b is not None and (b.outcome == "error" or b.result is None))
                or (not self.have_builds and s.args[0] is None)
                # R25: the final's own put was refused for good, so it goes once more
                # with data None and the stream still ends at the receiver
                or any(is_final_put(r) and r.key == op.key for r in self.refused)
            )
            if not explained and any(c.begin < self.prev_final_end for c in self.cancels):
                self.violation(
                    R6,
                    "final chunk put with data None, but the request's cancel_sender was used "
                    "up by an earlier final: a cancel marks the next final put, and only that "
                    f"one (expected data from {s.args[0]!r})",
                    op.key,
                )
            elif not explained:
                self.violation(
                    R7,
                    f"final chunk put with data None, but the request was not cancelled and its "
                    f"build did not fail or return None (expected data from {s.args[0]!r})",
                    op.key,
                )
            return
        if definite:
            self.violation(
                R6,
                f"final chunk saved after cancel_sender returned must be put with data None, "
                f"got {data!r}",
                op.key,
            )
            return
        if self.have_builds:
            if b is None or b.outcome != "ok":
                self.violation(
                    R7, f"final put with data {data!r} but no successful build of it", op.key
                )
            elif b.result != data:
                self.violation(
                    R2,
                    f"final data {data!r} is not what build_payload returned ({b.result!r})",
                    op.key,
                )
            elif b.snapshot != s.args[0] and b is not self.unsnapshotted:
                self.violation(
                    R4,
                    f"final payload built from {b.snapshot!r}, but the snapshot at save_async "
                    f"was {s.args[0]!r}",
                    op.key,
                )
        elif data != s.args[0]:
            self.violation(
                R4,
                f"final data {data!r} differs from the snapshot at save_async ({s.args[0]!r})",
                op.key,
            )

    def _need(self, by_put: list[CallRecord]) -> int:
        """The failed puts that explain dropping *by_put*: R10's tries each, but one for a
        chunk whose put was refused for good (R25: dropped after that one try)."""
        ended = min(len(by_put), sum(1 for op in self.failed if op.permanent))
        return (len(by_put) - ended) * (self.put_tries or 1) + ended

    def _retried_refused(self, op: ConnectorOp) -> None:
        """R25: *op* puts again what a put of the same key refused for good (its error's
        ``permanent``): such a put is never retried (a final goes once more with data
        ``None``, a non-final is dropped and the next chunk takes its id)."""
        data = data_of(op)
        for r in self.refused:
            same = data is not None and (data is data_of(r) or _equal(data, data_of(r)) is True)
            # a build between is the adapter's next chunk, which takes the refused one's
            # id and may carry equal data; with no build on record, nothing is said
            moved_on = not self.have_builds or bool(self._builds_between(r.end, op.begin))
            if r.key == op.key and is_final_put(r) == is_final_put(op) and same and not moved_on:
                self.violation(
                    R25,
                    f"a put of {op.key} refused for good ({r.error}) was tried again with "
                    f"the same data {data!r}: an error no retry can fix (its permanent "
                    "attribute True) is not retried; drop a non-final (the next chunk "
                    "takes its id), put a final once more with data None",
                    op.key,
                )
                self.refused.remove(r)
                return

    def _final_never_put(self, final: CallRecord) -> None:
        """R11 for a final never put; first the rule of what its build did, when it was
        built: ``None`` returned is R8 (a final is put whatever its payload), an exception
        R7 (a final whose build failed is put with data ``None``)."""
        what = f"the final chunk saved from {final.args[0]!r} was never put"
        quiet = "(after quiescence, adapter running)"
        built = next(
            (
                b
                for b in self.builds
                if b.is_final
                and b.begin > final.begin
                and _equal(b.snapshot, final.args[0]) is True
            ),
            None,
        )  # the first final build of this final's snapshot after it was saved
        if built is not None and built.outcome == "ok" and built.result is None:
            rule, why = R8, "its build returned None: a final chunk is put whatever its payload"
        elif built is not None and built.outcome != "ok":
            rule, why = R7, f"its build raised ({built.error}): the final is put with data None"
        else:
            self.violation(R11, f"{what} {quiet}")
            return
        self.out.append(
            Violation(rule, f"{what} {quiet}; {why}", self.rid, None, self.at, also=(R11,))
        )

    def _liveness(self) -> None:
        """R11, R23: after quiescence every saved chunk was put, dropped or skipped."""
        for index in range(self.stream_at, len(self.streams)):
            stream = self.streams[index]
            start = self.pending_at if index == self.stream_at else 0
            if index != self.stream_at:
                self.failed = []
            # A stream whose final never came is the root (R11): its non-finals lost with
            # it are its symptoms (R23), so a lost stream reads R11 first whatever of its
            # chunks went missing too.
            if stream.final is not None:
                self._final_never_put(stream.final)
            by_put = [s for s in stream.nonfinals[start:] if not self._dropped_ok(s, INF)]
            if self._need(by_put) > self.failures:
                self.violation(
                    R23,
                    f"saved chunk(s) {[s.args[0] for s in by_put]!r} were never put (after "
                    f"quiescence; {self.failures} failed put(s) seen)",
                )
