"""R17 by count: no request waits behind another.

A RECV round polls each registration once (SPEC.md: "one round over the requests in
the polling queue, each polled once"), and a registration that found nothing may be
left alone for its pause (about 1 ms). So once a chunk of one request is due (put, and
owed a fetch: :meth:`.latency.HopView.due`) and ten such pauses have passed since
(:data:`ALLOWANCE`), the thread that fetches it fetches at most a round or two's worth
of any other request's chunks before it asks for the due one.
More than :data:`BEHIND` chunks of one other request got by that same thread after the
allowance and before it asks is a request waiting behind another (R17 "no head-of-line
blocking"): a receiver that keeps serving the registration that made progress, or
drains one stream before the next, while the others' chunks sit there.

Counted, because the wait is in gets, not in seconds: a 120-chunk backlog drained at a
fraction of a millisecond a get is far under :mod:`.latency`'s 0.25 s. Judged only
where a get takes time (the world's ``latency``): with free gets the virtual clock
stands still while a backlog drains, and a registration's legitimate 1 ms pause would
last through any backlog. Not once a get of the receiver has failed (after a failed
get a receiver may back off as long as it likes, all its registrations or one, and a
registration that made progress since may be polled again first); failed puts and
builds are judged, and the long-haul worlds' late registrations make the backlogs.
Only the fetching thread's own gets count (another thread's gets running ahead is the
scheduler's doing, not a round's order); the window ends at the first get of the due
key whatever it returns (a request polled is not waiting behind anyone); a window a
cleanup, a ``load_async`` or ``stop()`` of the receiver crosses is not judged (the
registration that was owed the chunk may be gone).
"""

from __future__ import annotations

import sys
from bisect import bisect_left, bisect_right
from collections import Counter

from ...history import ConnectorOp, History
from ...oracles import split_key
from ...rules import R17
from ..runtime.tasks import Failure
from ..scenarios.pipeline import Hop
from ..scenarios.scenario import Scenario
from .latency import HopView
from .timing import hop_suffix, judged

__all__ = ["ALLOWANCE", "BEHIND", "behind_failures"]

BEHIND = 20
"""Chunks of one other request a receiver thread may fetch, after :data:`ALLOWANCE`,
while a chunk is due and not yet asked for: a round polls each registration once, so a
fair receiver fetches one or two (batching a few per visit, a handful); the correct
catalogue's most is far under it (docs/quality.md)."""

PAUSE = 0.001
"""The contract's pause after a round without progress, in seconds (R17: about 1 ms)."""

ALLOWANCE = 10
"""Gets of other requests count from this many pauses after a chunk is due: the pause
after a round without progress (the contract's about 1 ms, or the world's
``idle_backoff``), which a receiver may take per registration, ten times over."""


def behind_failures(history: History, scenario: Scenario, hops: tuple[Hop, ...]) -> list[Failure]:
    """The R17 head-of-line waits of a generated world (module doc), one per hop at most."""
    times = history.times
    if not judged(scenario) or not times:
        return []
    if scenario.latency <= 0:
        return []  # free gets: the clock stands still while a backlog drains (module doc)
    pause = max(float(scenario.options.get("idle_backoff", PAUSE)), PAUSE)
    records = history.records()
    found: list[Failure] = []
    for hop in hops:
        view = HopView.of(records, times, hop)
        ok_gets = sorted(
            (g for ops in view.gets.values() for g in ops if g.outcome == "ok"),
            key=lambda g: g.begin,
        )
        begins = [g.begin for g in ok_gets]
        first_failed = min(
            (g.begin for ops in view.gets.values() for g in ops if g.outcome == "error"),
            default=sys.maxsize,
        )
        for put, since in view.puts_since():
            # the widest window a put can have: from its end to the next get of its key;
            # as few gets as a round makes in it decide nothing (most puts: no due to work out)
            asked = next((g.begin for g in view.gets[put.key] if g.begin > put.end), None)
            if (
                asked is None
                or bisect_left(begins, asked) - bisect_right(begins, put.end) <= BEHIND
            ):
                continue
            waited = _waited(view, put, since, times, ok_gets, first_failed, ALLOWANCE * pause)
            if waited is not None:
                found.append(Failure("violation", waited + hop_suffix(hops, hop), (R17,)))
                break
    return found


def _waited(
    view: HopView,
    put: ConnectorOp,
    since: int,
    times: dict[int, float],
    ok_gets: list[ConnectorOp],
    first_failed: int,
    allowance: float,
) -> str | None:
    """Why *put*'s chunk waited behind another request, or ``None`` (module doc)."""
    due = view.due(put, since, times)
    parsed = split_key(put.key)
    if due is None or parsed is None:
        return None
    start = max(due[0], put.end)
    asked = next((g for g in view.gets[put.key] if g.begin > start), None)
    if asked is None:
        return None  # never asked for: lost or cut short, the liveness rules judge that
    rid = parsed[0]
    if first_failed < asked.begin:
        return None  # after a failed get a receiver may back off as long as it likes
    if view.unregistered(rid, put):
        return None  # not registered when it landed: nobody was waiting for it
    if any(start < seq < asked.begin for seq, _, _ in view.fences[rid] + view.fences[None]):
        return None  # cleaned up, registered anew or stopped meanwhile
    counts: Counter[str] = Counter()
    counted_from = due[1] + allowance
    for g in ok_gets:
        if g.begin <= start or times[g.begin] < counted_from:
            continue
        if g.begin >= asked.begin:
            break
        other = split_key(g.key)
        if other is not None and other[0] != rid and g.ident == asked.ident:
            counts[other[0]] += 1
    if not counts:
        return None
    other_rid, fetched = counts.most_common(1)[0]
    if fetched <= BEHIND:
        return None
    return (
        f"R17: {put.key!r} was due {due[2]} (put at t={times[put.end]:.3f} s, virtual), and "
        f"the thread that fetched it ({asked.thread}) first got {fetched} chunks of "
        f"{other_rid!r} more than {allowance:g} s after that and before it asked for it once: "
        "a request waited behind another. A round polls each registration once; more "
        f"than {BEHIND} chunks of one other request is no round"
    )
