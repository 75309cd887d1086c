"""A recorded history sorted into what the oracles need, per request id.

Sender side: successful ``save_async`` calls, ``cancel_sender`` calls, builds
and puts of each request. Receiver side: registrations (derived from the
``load_async`` / ``cleanup_receiver`` sequence), gets, and the values each
``poll_ready`` handed out. Keys are split with :func:`split_key`; the oracles
assume one sending stage per history (many requests, any number of adapters:
a pipeline's sender and receiver are told apart by ``CallRecord.adapter``).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..history import BuildCall, ConnectorOp, History
from .inline import InlineWork
from .records import CallRecord

__all__ = ["Delivery", "Registration", "Timeline", "split_key"]


@functools.lru_cache(maxsize=1 << 16)
def split_key(key: str) -> tuple[str, int, int] | None:
    """``"r_1_3"`` -> ``("r", 1, 3)``; a request id may itself contain ``_``.

    Cached: the oracles split the same keys over and over as a history grows.
    """
    parts = key.rsplit("_", 2)
    if len(parts) != 3:
        return None
    rid, stage, cid = parts
    try:
        return rid, int(stage), int(cid)
    except ValueError:
        return None


@dataclass
class Delivery:
    """One value ``poll_ready`` handed out for a request."""

    value: Any
    poll: CallRecord
    index: int  # position within that poll's list


@dataclass
class Registration:
    """One ``load_async`` that registered a request, up to its ``cleanup_receiver``."""

    request_id: str
    load: CallRecord
    cleanup: CallRecord | None = None
    deliveries: list[Delivery] = field(default_factory=list)
    reloads: list[CallRecord] = field(default_factory=list)
    """``load_async`` calls made while registered (each must change nothing, R12)."""


@dataclass
class Timeline:
    """The history, sorted per request (see module doc)."""

    calls: list[CallRecord]
    saves: dict[str, list[CallRecord]]
    cancels: dict[str, list[CallRecord]]
    builds: dict[str, list[BuildCall]]
    puts: dict[str, list[ConnectorOp]]
    gets: dict[str, list[ConnectorOp]]
    registrations: dict[str, list[Registration]]
    stray: list[tuple[str, Delivery]]  # delivered while the request was not registered
    have_builds: bool
    have_saves: bool  # any save_async recorded: the sender is observed
    sender_stop_end: int | None  # end of the first stop() of an adapter that saved
    stopped_adapters: dict[str, int]  # adapter name -> end of its first completed stop()
    # builds, puts and gets a scheduler call did itself, on its own thread (R3)
    inline: list[tuple[CallRecord, BuildCall | ConnectorOp]] = field(default_factory=list)

    @classmethod
    def of(cls, history: History) -> Timeline:
        records = history.records()
        calls = sorted((r for r in records if isinstance(r, CallRecord)), key=lambda r: r.begin)
        ops = sorted((r for r in records if isinstance(r, ConnectorOp)), key=lambda r: r.begin)
        builds_all = sorted((r for r in records if isinstance(r, BuildCall)), key=lambda r: r.begin)

        saves: dict[str, list[CallRecord]] = defaultdict(list)
        cancels: dict[str, list[CallRecord]] = defaultdict(list)
        senders: set[str] = set()
        stopped: dict[str, int] = {}
        for c in calls:
            if c.call == "save_async" and isinstance(c.request_id, str):  # else R21's
                senders.add(c.adapter)
                if c.error is None:
                    saves[c.request_id].append(c)
            elif c.call == "cancel_sender" and c.error is None and isinstance(c.request_id, str):
                cancels[c.request_id].append(c)
            elif c.call == "stop" and c.error is None:
                stopped.setdefault(c.adapter, c.end)
        sender_stops = [end for name, end in stopped.items() if name in senders]

        finder = InlineWork(calls)
        inline: list[tuple[CallRecord, BuildCall | ConnectorOp]] = []
        builds: dict[str, list[BuildCall]] = defaultdict(list)
        inline_builds: dict[str, list[BuildCall]] = defaultdict(list)
        for b in builds_all:
            if not isinstance(b.request_id, str):
                continue  # of a save with a wrong id the adapter took: R21's (.inputs)
            around = finder.call_around(b)
            if around is None:
                builds[b.request_id].append(b)
            else:  # not the SAVE thread's: kept out of the alignment, reported as R3
                inline.append((around, b))
                inline_builds[b.request_id].append(b)
        for rid, bs in inline_builds.items():
            if rid not in builds:  # an adapter that only ever builds inline: align with those
                builds[rid] = bs
        puts: dict[str, list[ConnectorOp]] = defaultdict(list)
        gets: dict[str, list[ConnectorOp]] = defaultdict(list)
        for op in ops:
            around = finder.call_around(op)
            if around is not None:
                inline.append((around, op))
            parsed = split_key(op.key)
            if parsed is None:
                continue
            (puts if op.op == "put" else gets)[parsed[0]].append(op)

        registrations, stray = _registrations(calls)
        return cls(
            calls=calls,
            saves=saves,
            cancels=cancels,
            builds=builds,
            puts=puts,
            gets=gets,
            registrations=registrations,
            stray=stray,
            have_builds=bool(builds_all),
            have_saves=bool(senders),
            sender_stop_end=min(sender_stops) if sender_stops else None,
            stopped_adapters=stopped,
            inline=sorted(inline, key=lambda pair: pair[1].begin),
        )

    def sender_ids(self) -> list[str]:
        return sorted(set(self.saves) | set(self.puts) | set(self.builds) | set(self.cancels))

    def receiver_ids(self) -> list[str]:
        return sorted(set(self.registrations) | set(self.gets))


def _registrations(
    calls: list[CallRecord],
) -> tuple[dict[str, list[Registration]], list[tuple[str, Delivery]]]:
    """Replay load/cleanup/poll in call order; attribute each delivery to a registration.

    Registrations are per adapter: a ``poll_ready`` hands out only what its
    own adapter's registrations received.
    """
    current: dict[tuple[str, str], Registration] = {}  # (adapter, request id) -> registration
    regs: dict[str, list[Registration]] = defaultdict(list)
    stray: list[tuple[str, Delivery]] = []
    for c in calls:
        if c.error is not None or not isinstance(c.request_id, (str, type(None))):
            continue  # raised: never made; a wrong id: R21's (.inputs)
        rid = c.request_id
        if c.call == "load_async" and rid is not None:
            if (c.adapter, rid) not in current:
                reg = Registration(rid, c)
                current[(c.adapter, rid)] = reg
                regs[rid].append(reg)
            else:
                current[(c.adapter, rid)].reloads.append(c)
        elif c.call == "cleanup_receiver" and rid is not None:
            ended = current.pop((c.adapter, rid), None)
            if ended is not None:
                ended.cleanup = c
        elif c.call == "poll_ready" and isinstance(c.result, dict):
            for got_rid, values in c.result.items():
                seq = values if isinstance(values, list) else [values]
                for i, value in enumerate(seq):
                    d = Delivery(value, c, i)
                    owner = current.get((c.adapter, got_rid))
                    if owner is not None:
                        owner.deliveries.append(d)
                    else:
                        stray.append((got_rid, d))
    return regs, stray
