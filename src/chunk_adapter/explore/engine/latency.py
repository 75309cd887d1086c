"""R17 on the virtual clock: a chunk the receiver owes is fetched at once.

In a world where nothing holds up a receiver (no get fails or is
down, no call is slow: :func:`receiving_quiet`), a chunk the receiver owes a fetch is
fetched within :data:`LATENCY` of becoming due (the contract's pause after an
unproductive round is about 1 ms; after progress the next round starts at
once; no request waits behind another), unless the registration was cleaned
up or stopped meanwhile (a chunk never fetched at all is lost: the liveness
rules judge that). It is due once it is put and the receiver was polling for
its key, got the request's previous chunk (by a get no cleanup of the request or stop
overlapped: a get in flight across a cleanup may be stale), or (chunk 0) registered the
request (a load that registers): whether the receiver polls or is told of puts, the chunk
it waits for next is fetched at once. Not when, by the put, the receiver had got that
chunk or a later one, or a final, since: it is past the chunk then, and the value put is
a new stream's (a reused id), owed to the next registration.

Judged in generated worlds (``Scenario.liveness`` set); after a failed get a receiver
may back off as long as it likes, so only worlds whose receivers nothing holds up count.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ...history import ConnectorOp, History
from ...oracles import CallRecord, split_key
from ...rules import R17
from ..runtime.tasks import Failure
from ..scenarios.pipeline import Hop
from ..scenarios.scenario import Scenario
from .timing import hop_suffix, judged

__all__ = ["LATENCY", "HopView", "latency_failures", "receiving_quiet"]

LATENCY = 0.25
"""Virtual seconds from a chunk becoming due to its fetch: 250x the contract's 1 ms pause."""


def receiving_quiet(scenario: Scenario) -> bool:
    """Whether nothing in *scenario* holds up a receiver: no get fails or is down (after
    one the RECV thread may back off as long as it likes) and no call is slow (a slow put
    or build may hold a worker an adapter shares with its gets). Failed puts and builds,
    and put or build outages, leave the receiving side's timing its own."""
    for op in scenario.ops:
        if op.kind in ("fail_get", "slow") or (op.kind == "outage" and op.what == "get"):
            return False
    return True


def latency_failures(
    history: History, scenario: Scenario, hops: tuple[Hop, ...], cut: int | None
) -> list[Failure]:
    """The R17 breaches of a world whose receivers nothing holds up (module doc), one per
    hop at most."""
    times = history.times
    if not judged(scenario) or not receiving_quiet(scenario) or not times or cut is None:
        return []
    end = times.get(cut, max(times.values()))
    records = history.records()
    found: list[Failure] = []
    for hop in hops:
        view = HopView.of(records, times, hop)
        for put, since in view.puts_since():
            late = _late(put, since, view.gets, times, end, view.fences, view.handed)
            if late is not None:
                found.append(Failure("violation", late + hop_suffix(hops, hop), (R17,)))
                break
    return found


Fences = dict[str | None, list[tuple[int, float, str]]]
"""Per request (``None``: the receiver's ``stop()``), its receiver's ``cleanup_receiver``,
``stop`` and ``load_async`` calls: (begin, virtual time of the begin, call)."""


@dataclass
class HopView:
    """What one hop's receiver did, as R17's judges read it: its gets by key, the
    successful puts of its keys, its fences and what its ``poll_ready`` handed out."""

    gets: dict[str, list[ConnectorOp]]
    puts: list[ConnectorOp]
    fences: Fences
    handed: Handed

    @classmethod
    def of(cls, records: Sequence[object], times: dict[int, float], hop: Hop) -> HopView:
        gets: dict[str, list[ConnectorOp]] = defaultdict(list)
        puts: list[ConnectorOp] = []
        for r in records:
            if isinstance(r, ConnectorOp) and r.begin in times and r.end in times:
                parsed = split_key(r.key)
                if parsed is None or parsed[1] != hop.stage_id:
                    continue
                if r.op == "get":
                    gets[r.key].append(r)
                elif r.outcome == "ok":
                    puts.append(r)
        fences: Fences = defaultdict(list)
        handed: Handed = defaultdict(list)  # rid -> (end of the poll, value handed out)
        for r in records:
            if not isinstance(r, CallRecord) or r.adapter not in (hop.receiver, "adapter"):
                continue
            if r.call in ("cleanup_receiver", "stop", "load_async") and r.begin in times:
                who = r.request_id if r.call != "stop" else None
                fences[who].append((r.begin, times[r.begin], r.call))
            elif r.call == "poll_ready" and r.error is None and isinstance(r.result, dict):
                for rid, values in r.result.items():
                    if isinstance(values, list):  # any other shape is R15's
                        handed[rid] += [(r.end, v) for v in values]
        return cls(gets, puts, fences, handed)

    def puts_since(self) -> Iterator[tuple[ConnectorOp, int]]:
        """Each successful put, with the end of its key's previous put (0: none)."""
        last_put: dict[str, int] = {}  # key -> end of its previous put
        for put in self.puts:
            yield put, last_put.get(put.key, 0)
            last_put[put.key] = put.end

    def due(
        self, put: ConnectorOp, since: int, times: dict[int, float]
    ) -> tuple[int, float, str] | None:
        """:func:`_due` of *put* on this hop."""
        return _due(put, since, self.gets, times, self.fences, self.handed)

    def unregistered(self, rid: str, put: ConnectorOp) -> bool:
        """Whether no registration of *rid* was waiting when *put* landed (its last
        receiving call before then was a cleanup)."""
        return _unregistered(self.fences, rid, put)


Handed = dict[str, list[tuple[int, object]]]
"""Per request, what the receiver's ``poll_ready`` handed out: (end of the call, value)."""


def _due(
    put: ConnectorOp,
    since: int,
    gets: dict[str, list[ConnectorOp]],
    times: dict[int, float],
    fences: Fences,
    handed: Handed,
) -> tuple[int, float, str] | None:
    """From when the receiver owed a fetch of *put*'s value: ``(seq, virtual time, why)``
    of the latest of the moments that make it due, ``None`` when none does. The key was
    polled and found empty before the put, twice (a polling receiver; not by a get a
    cleanup fenced, and not when a get after that poll took the receiver past the chunk:
    an empty poll may be a stale one, of a registration cleaned up, which makes at most
    one), the request's previous chunk was got, not a final, and handed out later (after
    progress the next round starts at once; a get of a registration cleaned up may still
    begin after the cleanup, and its value is never handed out; of several such gets, the
    last), or, for
    chunk 0, the request was registered (a receiver told of puts by notifications
    fetches once when a registration is made, as anything put before it rings nothing);
    each only when it came after the key's previous put (*since*), so it is this value's,
    and the receiver was not past the chunk by the put (:func:`_past`)."""
    parsed = split_key(put.key)
    if parsed is None:
        return None
    rid, stage, n = parsed
    put_at = times[put.end]
    starts: list[tuple[int, float, str]] = []
    empty = [g for g in gets[put.key] if g.begin > since and g.outcome == "none"]
    empty = [g for g in empty if g.end < put.begin and not _fenced(fences, rid, g)]
    if len(empty) > 1 and not _past(gets, rid, n, empty[-1].begin, put.end):
        last = times[empty[-1].end]
        starts.append(
            (
                empty[0].end,
                put_at,
                f"while the receiver was polling for it (an empty get at t={last:.3f} s)",
            )
        )
    if n > 0:
        progress = [
            g
            for g in gets[f"{rid}_{stage}_{n - 1}"]
            if g.begin > since
            and g.outcome == "ok"
            and not _final(g.value)
            and not _fenced(fences, rid, g)
            and not _past(gets, rid, n, g.begin, put.end)
            and any(at > g.end and _same(v, g.value) for at, v in handed[rid])
        ]
        if progress:
            g = progress[-1]
            at = times[g.end]
            starts.append(
                (g.end, max(at, put_at), f"after the receiver got chunk {n - 1} (at t={at:.3f} s)")
            )
    else:
        previous = "cleanup_receiver"  # a load that registers: none before it, or a cleanup
        for seq, at, call in fences[rid]:
            registers, previous = previous == "cleanup_receiver", call
            if call == "load_async" and registers and seq > since:
                if _past(gets, rid, 0, seq, put.end):
                    break  # that registration is past chunk 0 (or done): it owes no new 0
                starts.append(
                    (seq, max(at, put_at), f"with the request registered (at t={at:.3f} s)")
                )
                break
    return max(starts, key=lambda s: s[1]) if starts else None


def _unregistered(fences: Fences, rid: str | None, put: ConnectorOp) -> bool:
    """Whether the request's last receiving call before *put* landed was a cleanup: no
    registration was waiting for the value then."""
    before = [call for seq, _, call in fences[rid] if seq < put.end]
    return bool(before) and before[-1] == "cleanup_receiver"


def _fenced(fences: Fences, rid: str, g: ConnectorOp) -> bool:
    """Whether the request was cleaned up (or the receiver stopped) while get *g* was in
    flight, or before it began with no registration since (a RECV round that read the
    registration before the cleanup fetches for it after): what it got is stale, for a
    registration that is gone, so it is no progress that makes the next chunk due (a
    new registration owes chunk 0 first)."""
    own = fences[rid] + fences[None]
    if any(g.begin < seq < g.end and call != "load_async" for seq, _, call in own):
        return True
    before = max((f for f in own if f[0] < g.begin), default=None)
    return before is not None and before[2] != "load_async"


def _past(gets: dict[str, list[ConnectorOp]], rid: str, n: int, after: int, before: int) -> bool:
    """Whether a get of *rid*'s keys that began after *after* returned chunk *n* or a
    later one, or a final, before *before*: the receiver is past chunk *n* then (or done),
    so a chunk *n* put later is a new stream's value, owed to a later registration (on a
    connector that keeps values, a registration may read the old stream's chunks)."""
    return any(
        g.outcome == "ok" and g.begin > after and g.end < before
        and (parsed[2] >= n or _final(g.value))
        for key, ops in gets.items()
        if (parsed := split_key(key)) is not None and parsed[0] == rid
        for g in ops
    )  # fmt: skip


def _same(a: object, b: object) -> bool:
    """``a == b``, and ``False`` where the values cannot say."""
    try:
        return bool(a == b)
    except Exception:
        return False


def _final(value: object) -> bool:
    return isinstance(value, dict) and value.get("finished") is True


def _late(
    put: ConnectorOp,
    since: int,
    gets: dict[str, list[ConnectorOp]],
    times: dict[int, float],
    end: float,
    fences: Fences,
    handed: Handed,
) -> str | None:
    """Why *put* was fetched late, or ``None`` (module doc)."""
    due = _due(put, since, gets, times, fences, handed)
    if due is None:
        return None  # nobody was waiting for it yet
    start, due_at, why = due
    deadline = due_at + LATENCY
    if end < deadline:
        return None  # the run did not last long enough to tell
    parsed = split_key(put.key)
    rid = parsed[0] if parsed else None
    if _unregistered(fences, rid, put):
        return None  # not registered when it landed (an empty get then was a stale one)
    if any(seq > start and t <= deadline for seq, t, _ in fences[rid] + fences[None]):
        return None  # cleaned up, registered anew or stopped meanwhile
    # fetched: by a get that began after the put ended, or by one that overlapped it (a
    # slow or latent call) and returned a value — at the moment that get returned
    polled = [g for g in gets[put.key] if g.begin > since]
    fetched = sorted(
        [times[g.begin] for g in polled if g.begin > put.end]
        + [times[g.end] for g in polled if g.outcome == "ok" and g.end > put.begin]
    )
    if not fetched or fetched[0] <= deadline:
        return None  # in time; or never: a lost chunk, which the liveness rules judge
    return (
        f"R17: {put.key!r} was put at t={times[put.end]:.3f} s (virtual) and was due "
        f"{why}, and fetched at t={fetched[0]:.3f} s: over {LATENCY} s later with no get "
        "failing and nothing slow. After a round without "
        "progress the RECV thread pauses about 1 ms (no growing backoff, no request waiting "
        "behind another)"
    )
