"""Receiver-side oracles: what ``poll_ready`` handed out, per registration (R1, R2, R12–R16, R23).

Each registration's deliveries (everything ``poll_ready`` returned for the
request while it was registered, in order) must be the values of one chain of
successful gets of chunk ids 0, 1, 2, ..., each get begun after the
registration's ``load_async`` began and after the previous one ended: so no
value fetched for a cleaned-up registration, nothing twice, nothing out of
order, nothing past the final.

Over 400 lines, and one module because each registration's chain of gets is built once
and every receiver check (R1, R2, R12–R16, R23) reads it; apart, each check would
rebuild the chain or take it as a parameter list of half a dozen maps.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..history import ConnectorOp
from ..rules import R1, R2, R12, R13, R14, R15, R16, R23
from .sender import wire_shaped
from .timeline import Registration, Timeline, split_key
from .violations import Violation

__all__ = ["check_receiver"]


def check_receiver(tl: Timeline, *, quiescent: bool) -> list[Violation]:
    out: list[Violation] = list(_poll_shapes(tl))
    out += _stray(tl)
    receivers = {c.adapter for c in tl.calls if c.call == "load_async"}
    live = quiescent and not any(name in tl.stopped_adapters for name in receivers)
    moved_on = _moved_on(tl)
    since = _since(tl)
    for rid in tl.receiver_ids():
        gets = tl.gets.get(rid, [])
        regs = tl.registrations.get(rid, [])
        stale, late = _maybe_stale(gets, regs, since)
        out += _no_get_past_final(rid, gets, regs, stale, late)
        out += _gets_return_puts(rid, gets, tl.puts.get(rid, []))
        by_id: dict[int, list[ConnectorOp]] = defaultdict(list)
        for g in gets:
            parsed = split_key(g.key)
            if parsed is not None and g.outcome == "ok":
                by_id[parsed[2]].append(g)
        for n, reg in enumerate(regs):
            last = n == len(regs) - 1 and reg.cleanup is None
            chain = _Chain(
                rid, reg, gets, by_id, tl.puts.get(rid, []), live and last, stale, regs[:n],
                moved_on, late,
            )  # fmt: skip
            out += chain.run()
    return out


def _moved_on(tl: Timeline) -> Callable[[ConnectorOp, int], bool]:
    """``moved_on(g, t)``: *g*'s thread began another get (of any request) after *g*
    ended and before *t*. A RECV thread commits what it got before its next get, so
    such a get's commit is no longer pending at *t*. The per-thread index is built on
    the first question only: it is asked about a chunk handed out twice, and every
    settle judges the history."""
    begins: dict[str, list[int]] = {}

    def moved_on(g: ConnectorOp, t: int) -> bool:
        if not begins:
            for ops in tl.gets.values():
                for op in ops:
                    begins.setdefault(op.thread, []).append(op.begin)
            for b in begins.values():
                b.sort()
        mine = begins.get(g.thread, [])
        i = bisect.bisect_right(mine, g.end)
        return i < len(mine) and mine[i] < t

    return moved_on


def _since(tl: Timeline) -> Callable[[ConnectorOp, int], int]:
    """``since(g, prev_end)``: when the token read before get *g* happened at the earliest.

    An adapter reads a request's token under its lock, then gets outside it; the read
    came after the request's previous get ended (*prev_end*). When every get of the
    history is made by one thread, the read also came after that thread's previous get
    of any request ended: one RECV thread that reads the token before every get (the
    spec's RECV step 1) does nothing else in between. Where several threads get (a
    pool of fetchers, a notify callback, a follower task per registration), nothing
    bounds it: the request's previous get may be another registration's — a follower of
    a registration cleaned up and replaced reads its token before the cleanup and may
    make its get after the new registration's follower got and ended (a false alarm,
    R13, on the correct ``aio_followers`` before: false-alarm runs, seed 420)."""
    threads = {(op.thread, op.ident) for ops in tl.gets.values() for op in ops}
    if len(threads) != 1:
        return lambda g, prev_end: 0
    ends = sorted(op.end for ops in tl.gets.values() for op in ops)

    def since(g: ConnectorOp, prev_end: int) -> int:
        i = bisect.bisect_left(ends, g.begin)  # the gets that ended before this one began
        return max(prev_end, ends[i - 1]) if i else prev_end

    return since


def _maybe_stale(
    gets: list[ConnectorOp],
    regs: list[Registration],
    since: Callable[[ConnectorOp, int], int],
) -> tuple[set[int], set[int]]:
    """Ids of the gets that may belong to a registration cleaned up before they began,
    and of those that would only if their token was read before other gets.

    An adapter reads a request's token under its lock, then gets outside it. A
    ``cleanup_receiver`` (and a new ``load_async``) can run between that read
    and the get's begin, so such a get may be the old registration's, and its
    value rightly discarded: a get may be stale when a cleanup ended between the
    read (at the earliest :func:`_since`) and this get's begin. A get after a round
    that read its tokens before other gets is not excused (the second set): it may
    take, on a consuming connector, the chunk of the registration that replaced its own.
    """
    cleanups = sorted(r.cleanup.end for r in regs if r.cleanup is not None)
    stale: set[int] = set()
    late: set[int] = set()
    if not cleanups:
        return stale, late
    prev_end = 0
    for g in sorted(gets, key=lambda op: op.begin):
        for read, into in ((since(g, prev_end), stale), (prev_end, late)):
            i = bisect.bisect_right(cleanups, read)  # the first cleanup ending after the read
            if i < len(cleanups) and cleanups[i] < g.begin:
                into.add(id(g))
                break  # stale: not also late
        prev_end = g.end
    return stale, late


def _poll_shapes(tl: Timeline) -> Iterator[Violation]:
    """R15: a request with nothing new is absent; values come as lists of dicts."""
    for c in tl.calls:
        if c.call != "poll_ready" or c.error is not None:
            continue
        if not isinstance(c.result, dict):
            yield Violation(R15, f"poll_ready must return a dict, got {c.result!r}", at=c.begin)
            continue
        for rid, values in c.result.items():
            if not isinstance(values, list) or not values:
                yield Violation(
                    R15,
                    f"poll_ready returned {values!r} for a request; a request with nothing new "
                    "must be absent and the others map to a non-empty list",
                    rid,
                    at=c.begin,
                )
            else:
                for v in values:
                    if not wire_shaped(v):
                        yield Violation(
                            R2,
                            f"poll_ready handed out {v!r}, not the dict that was put",
                            rid,
                            at=c.begin,
                        )


def _stray(tl: Timeline) -> Iterator[Violation]:
    """R16/R12: nothing is handed out for a request that is not registered."""
    for rid, d in tl.stray:
        cleaned = any(
            r.cleanup is not None and r.cleanup.end < d.poll.begin
            for r in tl.registrations.get(rid, [])
        )
        if cleaned:
            yield Violation(
                R16,
                f"poll_ready handed out {d.value!r} after cleanup_receiver returned and before "
                "any new load_async",
                rid,
                at=d.poll.begin,
            )
        else:
            yield Violation(
                R12,
                f"poll_ready handed out {d.value!r} for a request never registered",
                rid,
                at=d.poll.begin,
            )


def _read_early(rid: str, g: ConnectorOp) -> Violation:
    """R16 (R23 its consequence): get *g* began after a cleanup and a new registration of
    its request, and its thread got other keys since it could have read the token."""
    return Violation(
        R16,
        f"the get of {g.key!r} began after cleanup_receiver and a new load_async of the "
        "request, and its thread made another get that ended after that cleanup: the "
        "registration was read before that other get (a round that reads the "
        "registrations once, then gets for each), so this get serves the cleaned-up "
        "registration and takes, on a consuming connector, the new registration's chunk, "
        "which then never arrives; read the token under the lock right before every get",
        rid,
        g.key,
        g.begin,
        also=(R23,),
    )


def _no_get_past_final(
    rid: str,
    gets: list[ConnectorOp],
    regs: list[Registration],
    stale: set[int],
    late: set[int],
) -> Iterator[Violation]:
    """R13: after a get that returned the final, no get of the request until a new registration.

    A get that may be a cleaned-up registration's (``_maybe_stale``) is not counted. When
    a ``load_async`` was made while the request was registered (a reload) before that
    get, the reload is the root: R12 at it (it must change nothing), R13 its consequence.
    When the get that returned the final read its registration before its thread's other
    gets (*late*), that read is the root (:func:`_read_early`).
    """
    ordered = sorted(regs, key=lambda r: r.load.begin)
    loads = [r.load.begin for r in ordered]
    begins = [g.begin for g in gets]
    for g in gets:
        if g.outcome != "ok" or not (isinstance(g.value, dict) and g.value.get("finished") is True):
            continue
        if id(g) in stale:
            continue
        nxt = bisect.bisect_right(loads, g.begin)
        limit = loads[nxt] if nxt < len(loads) else 1 << 62
        i = bisect.bisect_right(begins, g.end)
        if i < len(gets) and gets[i].begin < limit:
            if id(g) in late:
                yield _read_early(rid, g)
                return
            reloads = (
                [r for r in ordered[nxt - 1].reloads if r.begin < gets[i].begin] if nxt else []
            )
            if reloads:  # the registration was fine until a load_async started it over
                yield Violation(
                    R12,
                    "load_async of the registered request started its registration over: "
                    f"{gets[i].key!r} was fetched after the get of {g.key!r} returned the final "
                    "chunk (a load_async while registered must change nothing)",
                    rid,
                    gets[i].key,
                    reloads[0].begin,
                    also=(R13,),
                )
                return
            yield Violation(
                R13,
                f"get of {gets[i].key!r} after the get of {g.key!r} returned the final chunk, "
                "with no new registration in between (a finished registration is never polled "
                "again)",
                rid,
                gets[i].key,
                gets[i].begin,
            )
            return


def _gets_return_puts(
    rid: str, gets: list[ConnectorOp], puts: list[ConnectorOp]
) -> Iterator[Violation]:
    """R2: a value got is a value put under that key (checked when the puts are recorded)."""
    put_values: dict[str, list[ConnectorOp]] = defaultdict(list)
    for p in puts:
        if p.outcome == "ok":
            put_values[p.key].append(p)
    for g in gets:
        if g.outcome != "ok" or g.key not in put_values:
            continue
        if not any(p.begin < g.end and p.value == g.value for p in put_values[g.key]):
            yield Violation(
                R2, f"get returned {g.value!r}, which was never put there", rid, g.key, g.begin
            )


@dataclass
class _Chain:
    """Matches one registration's deliveries to a chain of gets (module doc)."""

    rid: str
    reg: Registration
    gets: list[ConnectorOp]
    """Every get of the request, in begin order."""
    by_id: dict[int, list[ConnectorOp]]
    """The request's successful gets by chunk id."""
    puts: list[ConnectorOp]
    live: bool
    """Judge liveness: quiescent, the receiver running, the request's last registration."""
    stale: set[int]
    """``id()`` of the gets that may be a cleaned-up registration's (``_maybe_stale``)."""
    earlier: list[Registration]
    """The request's registrations before this one."""
    moved_on: Callable[[ConnectorOp, int], bool]
    """``moved_on(get, t)``: the get's thread began another get after it, before *t*."""
    late: set[int]
    """``id()`` of the gets stale only if their token was read before the thread's other gets."""

    def run(self) -> list[Violation]:
        out: list[Violation] = []
        last_end = self.reg.load.begin
        ds = self.reg.deliveries
        for c, d in enumerate(ds):
            g = next(
                (
                    g
                    for g in self.by_id.get(c, [])
                    if g.begin > last_end and g.end < d.poll.end and g.value == d.value
                ),
                None,
            )
            if g is None:
                out.append(self._unexplained(c, d.value, [x.value for x in ds[:c]], d.poll.begin))
                return out
            if c > 0 and _finished(ds[c - 1].value):
                out.append(
                    Violation(
                        R13,
                        f"poll_ready handed out {d.value!r} after this registration's final chunk",
                        self.rid,
                        at=d.poll.begin,
                    )
                )
                return out
            last_end = g.end
        if self.live:
            out += self._liveness(len(ds), last_end)
        return out

    def _unexplained(self, c: int, value: Any, before: list[Any], at: int) -> Violation:
        """Why chunk *c* handed out (by the poll that began at *at*) has no matching get."""
        load = self.reg.load.begin
        end = self.reg.cleanup.begin if self.reg.cleanup is not None else None
        same = [g for gs in self.by_id.values() for g in gs if g.value == value]
        # A cleaned-up registration's get of it crossed the fence only when this
        # registration handed the value out more often than its own gets fetched it: on a
        # connector that keeps values both may get it, and a value handed out once that
        # this registration got too is its own, out of id order (a chunk before it lost).
        own = [g for g in same if g.begin > load and (end is None or g.begin < end)]
        handed = sum(d.value == value for d in self.reg.deliveries)
        crossed = any(g.begin < load for g in same) and handed > len(own)
        last = self.earlier[-1].cleanup if self.earlier else None
        fence = last.begin if last is not None else load  # the cleanup it crossed
        # A stale commit breaks the fence when it happens: after its get ended and the
        # fence began, before the poll that shows it (what it caused in between, such as
        # gets past a final it made the registration skip to, comes after the root).
        crossed_at = min((max(g.end, fence) for g in same if g.begin < load), default=at)
        stale_at = min(at, crossed_at)
        if any(value == b for b in before):
            for got in same:
                parsed = split_key(got.key)
                if got.begin > load and parsed is not None:
                    restart = self._restarted_by(got, parsed[2], at)
                    if restart is not None:  # a second chain fetched it again
                        return restart
            handed_before = any(d.value == value for r in self.earlier for d in r.deliveries)
            if not handed_before and any(
                g.begin < load and not self.moved_on(g, fence) for g in same
            ):
                # a cleaned-up registration got it and never handed it out, and its thread
                # did nothing more until the fence: the extra copy is that get
                # committed past the fence, and that is the root (had the old registration
                # handed it out, or its thread gone on to other gets first, the commit came
                # before the fence and poll_ready handed one copy twice: R15)
                return Violation(
                    R16,
                    f"chunk {value!r} was handed out again as chunk {c} of the registration, "
                    "and a cleaned-up registration's get of it, never handed out there, "
                    "crossed the commit fence",
                    self.rid,
                    at=stale_at,
                    also=(R15,),
                )
            return Violation(
                R15,
                f"chunk {value!r} was handed out again as chunk {c} of the same registration "
                "(poll_ready must swap out what it returns; exactly once, R14)",
                self.rid,
                at=at,
                also=(R14,),
            )
        if crossed:
            return Violation(
                R16,
                f"chunk {c} handed out ({value!r}) was fetched by a get that began before this "
                "registration's load_async: a value of a cleaned-up registration crossed the "
                "commit fence",
                self.rid,
                at=stale_at,
            )
        if same:
            return Violation(
                R14,
                f"chunk {value!r} handed out as chunk {c} of the registration, but it was got "
                f"under key(s) {sorted({g.key for g in same})!r}: not in id order",
                self.rid,
                at=at,
            )
        return Violation(
            R14,
            f"chunk {c} handed out ({value!r}) matches no value got for this request",
            self.rid,
            at=at,
        )

    def _restarted_by(self, got: ConnectorOp, n: int, before: int = 1 << 62) -> Violation | None:
        """R12, the root of chunk *n* lost or handed out twice: a ``load_async`` was made
        while the request was registered, and a get of chunk *n* or an earlier one began
        after both it and the get of *n*: the call started the registration over (the
        chunk got under the old start dropped, or fetched and handed out again) where it
        must change nothing. Only gets that began before *before* count."""
        for reload in self.reg.reloads:
            after = max(got.end, reload.begin)
            again = [
                g
                for g in self.gets
                if after < g.begin < before
                and (key := split_key(g.key)) is not None
                and key[2] <= n
            ]
            if again:
                return Violation(
                    R12,
                    f"load_async of the registered request started its registration over: "
                    f"chunk {n} ({got.value!r}) was got, and "
                    f"{min(again, key=lambda g: g.begin).key!r} was fetched again after it "
                    "(a load_async while registered must change nothing)",
                    self.rid,
                    got.key,
                    at=reload.begin,
                    also=(R14,),
                )
        return None

    def _liveness(self, n: int, last_end: int) -> list[Violation]:
        """R14/R23 after quiescence: the registration's next chunk is not stuck."""
        if n and _finished(self.reg.deliveries[-1].value):
            return []
        for g in self.by_id.get(n, []):
            if g.begin > last_end and id(g) not in self.stale:
                if id(g) in self.late:
                    return [_read_early(self.rid, g)]
                restart = self._restarted_by(g, n)
                if restart is not None:
                    return [restart]
                return [
                    Violation(
                        R14,
                        f"chunk {n} was got ({g.value!r}) for the registration but never handed "
                        "out by poll_ready (after quiescence)",
                        self.rid,
                        g.key,
                    )
                ]
        for p in self.puts:
            parsed = split_key(p.key)
            if p.outcome != "ok" or parsed is None or parsed[2] != n:
                continue
            consumed = any(g.end > p.begin for g in self.by_id.get(n, []))
            if not consumed:
                disagree = self._keys_disagree(p, parsed[1], n)
                if disagree is not None:
                    return [disagree]
                skipped = self._skipped(n, last_end) or self._not_retried(n, last_end)
                if skipped is not None:
                    return [skipped]
                return [
                    Violation(
                        R23,
                        f"chunk {n} ({p.value!r}) was put but the registration never received it "
                        "(after quiescence)",
                        self.rid,
                        p.key,
                    )
                ]
        return []

    def _not_retried(self, n: int, last_end: int) -> Violation | None:
        """R13 where chunk *n* was put and never got: the registration's last get of it
        failed and none came after (a failed get is retried later); R23 follows."""
        cleanup = self.reg.cleanup
        tries = [
            g
            for g in self.gets
            if g.begin > last_end
            and (parsed := split_key(g.key)) is not None
            and parsed[2] == n
            and id(g) not in self.stale
            and id(g) not in self.late
            and (cleanup is None or g.begin < cleanup.begin)
        ]
        last = max(tries, key=lambda g: g.begin, default=None)
        if last is None or last.outcome != "error":
            return None
        return Violation(
            R13,
            f"the get of chunk {n} ({last.key!r}) failed ({last.error}) and was never tried "
            "again: a failed get is retried later (after quiescence)",
            self.rid,
            last.key,
            also=(R23,),
        )

    def _skipped(self, n: int, last_end: int) -> Violation | None:
        """R13 where chunk *n* was put and never got: this registration asked for a later
        id instead (the next id only, in order), so it went past *n*; R23 follows."""
        cleanup = self.reg.cleanup
        for g in self.gets:
            parsed = split_key(g.key)
            if parsed is None or parsed[2] <= n or g.begin <= last_end:
                continue
            if id(g) in self.stale or id(g) in self.late:
                continue
            if cleanup is not None and g.begin > cleanup.begin:
                continue
            return Violation(
                R13,
                f"get of {g.key} while chunk {n}, put, was never got: the registration went "
                f"past chunk {n} (only the next id is asked for)",
                self.rid,
                g.key,
                g.begin,
                also=(R23,),
            )
        return None

    def _keys_disagree(self, put: ConnectorOp, stage: int, n: int) -> Violation | None:
        """R1, the root of a chunk never received: it was put under stage *stage*, which no
        get of the request ever named, while this registration's gets name another stage
        under which nothing of the request was ever put. Sender and receiver then name
        the same chunk with different keys (the sender's own ``stage_id``, the
        receiver's ``src_stage_id``); which side is wrong the history cannot tell."""
        mine = [
            g for g in self.gets if g.begin > self.reg.load.begin and split_key(g.key) is not None
        ]
        read = {k[1] for g in mine if (k := split_key(g.key)) is not None}
        if not read or stage in read:
            return None
        if any((k := split_key(g.key)) is not None and k[1] == stage for g in self.gets):
            return None  # someone reads that stage: not a disagreement of keys
        if any((k := split_key(q.key)) is not None and k[1] in read for q in self.puts):
            return None  # what it reads is written: the put is another hop's
        return Violation(
            R1,
            f"chunk {n} was put under key {put.key!r} but the registration reads "
            f"{mine[0].key!r}: the sender's and the receiver's keys disagree on the stage "
            "(the sender names its own stage_id, the receiver its src_stage_id), so "
            "nothing it put is ever received",
            self.rid,
            put.key,
            also=(R23,),
        )


def _finished(value: Any) -> bool:
    return isinstance(value, dict) and value.get("finished") is True
