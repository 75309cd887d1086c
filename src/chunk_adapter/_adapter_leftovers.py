"""The rest of streams a registration left unfinished (R29), for the reference adapter.

:class:`LeftoverSide` is a mixin of
:class:`~chunk_adapter._adapter_recv.ReceiverSide`: the RECV thread's entries
that keep a reused request id from receiving an older stream's chunks. The state
it uses (``_recv_lock``, ``_drains``, ``_sweeps`` ...) is created and documented in
``ChunkAdapter.__init__``.

Keys carry no stream (R1). On a connector that keeps stream identity itself
(shared memory and Redis: ``abandon(key)`` and ``sweep(key)``,
``connectors/_stream_ids.py``), always: ``cleanup_receiver`` of a registration
that has not committed its final queues a :class:`Leave` entry, and the RECV
thread tells the connector the key the registration would have read next —
before any later entry of the queue, so before a new registration of the id
gets anything. The connector's gets then throw that stream's values away
wherever they meet them, and a :class:`Sweep` entry has the connector throw
away the rest as it arrives (never another stream's value), until none is left
or nothing came for ``leftover_timeout``. A new registration reads at once:
nothing it can get is the old stream's.

On a connector without it, ``discard_leftovers=True`` has the receiver keep
streams apart itself: such a cleanup (of a registration that committed a chunk)
starts a :class:`Drain`, which gets that stream's remaining keys in order and
throws the values away until the stream's final (or ``leftover_timeout``
without one). Until then a new registration of the same id reads only the keys
below the drain, which the old stream has emptied (the connector consumes). A
sender puts a stream's chunks before the next stream's (one FIFO, R5), so the
rest of the old stream never lands where the new one reads.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ._death import survived
from ._logpace import LogPace
from ._validate import short_repr
from .connectors.base import chunk_key
from .runtime import EventLike, LockLike, Runtime

__all__ = ["Drain", "Leave", "LeftoverSide", "StreamIdentity", "Sweep"]


@dataclass(eq=False)
class Drain:
    """The rest of abandoned streams of one request id, being discarded (module doc).

    ``next_id`` is the key being drained; ``later`` the start ids of streams of
    the same id abandoned while this one drains (a registration blocked below
    the drain), drained after it in order; ``since`` when it last made progress;
    ``token`` identifies its polling-queue entry.
    """

    next_id: int
    since: float
    token: object = field(default_factory=object)
    later: list[int] = field(default_factory=list)

    def bound(self) -> int:
        """A registration of the same id may get keys below this only (V5)."""
        return min(self.next_id, *self.later) if self.later else self.next_id


class StreamIdentity(NamedTuple):
    """A connector's stream identity (module doc): its ``abandon`` and ``sweep``."""

    abandon: Callable[[str], object]  # False: no stream was left (nothing to sweep)
    sweep: Callable[[str], bool | None]


@dataclass(eq=False)
class Sweep:
    """The connector sweeping away the rest of one request id's abandoned streams
    (module doc); ``since`` when it last made progress; ``token`` identifies its
    polling-queue entry."""

    since: float
    token: object = field(default_factory=object)


@dataclass(frozen=True)
class Leave:
    """A polling-queue entry: tell the connector a registration left its stream at
    ``next_id`` unfinished (module doc)."""

    next_id: int


class LeftoverSide:
    """The drains and sweeps of the RECV thread (see module doc)."""

    # Set up by ChunkAdapter.__init__ (documented there).
    connector: Any
    runtime: Runtime
    log: logging.Logger
    src_stage_id: int
    leftover_timeout: float
    _stop: EventLike
    _recv_lock: LockLike
    _queue: deque[tuple[str, object]]
    _drains: dict[str, Drain]
    _sweeps: dict[str, Sweep]
    _identity: StreamIdentity | None
    _awaited: set[str]
    _get_failed: bool
    _recv_counts: dict[str, int]
    _recv_pace: LogPace

    def _leftover_entry(self, request_id: str, token: object) -> Leave | Sweep | None:
        """Called with ``_recv_lock`` held: the polling-queue entry *token* of
        *request_id* as a leftover's (a :class:`Leave`, or a :class:`Sweep`'s token),
        or ``None`` for a registration's or a drain's."""
        if isinstance(token, Leave):
            return token
        sweep = self._sweeps.get(request_id)
        return sweep if sweep is not None and sweep.token is token else None

    def _leave(self, request_id: str, leave: Leave) -> None:
        """Tell the connector its reader left a stream unfinished, and have it sweep that
        stream's rest away (module doc)."""
        assert self._identity is not None  # only a connector with one queues a Leave
        key = chunk_key(request_id, self.src_stage_id, leave.next_id)
        with self._recv_lock:
            self._recv_counts["streams_left"] += 1
        try:
            left = self._identity.abandon(key)
        except survived() as exc:
            self._recv_pace.say(
                self.log.warning, "abandon", key,
                "could not tell the connector that the stream at %s was left unfinished "
                "(%r): a new stream of this request id may receive its rest", key, exc,
            )  # fmt: skip
            return
        if left is False:
            return  # it handed out nothing of that stream: nothing to sweep for
        with self._recv_lock:
            sweep = self._sweeps.get(request_id)
            if sweep is not None:
                sweep.since = self.runtime.monotonic()  # its entry is queued already
            elif not self._stop.is_set():
                sweep = Sweep(self.runtime.monotonic())
                self._sweeps[request_id] = sweep
                self._queue.append((request_id, sweep.token))

    def _sweep_one(self, request_id: str, sweep: Sweep) -> bool:
        """One ``sweep`` of the connector for *request_id*'s abandoned streams."""
        key = chunk_key(request_id, self.src_stage_id, 0)
        assert self._identity is not None  # only a connector with one starts a sweep
        try:
            swept: bool | None = self._identity.sweep(key)
        except survived() as exc:
            self._recv_pace.say(
                self.log.info, "sweep", key,
                "sweeping the rest of a cleaned-up stream of %s failed: %r; will retry",
                short_repr(request_id), exc,
            )  # fmt: skip
            swept = False
            with self._recv_lock:
                self._get_failed = True
        now = self.runtime.monotonic()
        gave_up = False
        with self._recv_lock:
            if swept:
                sweep.since = now
            elif swept is None:
                del self._sweeps[request_id]
                return False
            elif now - sweep.since >= self.leftover_timeout:
                self._recv_counts["leftovers_given_up"] += 1
                del self._sweeps[request_id]
                gave_up = True
            if not gave_up:
                self._queue.append((request_id, sweep.token))
        if gave_up:
            self.log.warning(
                "receiver: the rest of a cleaned-up stream of %s did not come within %.1fs; "
                "no longer sweeping for it (the connector still throws it away when a get "
                "meets it)",
                short_repr(request_id),
                self.leftover_timeout,
            )
        return bool(swept)

    def _drain_one(self, request_id: str, drain: Drain, key: str) -> bool:
        """One get of a drained stream's next key; the value is thrown away (module doc)."""
        value: Any = None
        try:
            value = self.connector.get(key)
        except survived() as exc:
            self._recv_pace.say(
                self.log.info, "drain get", key,
                "get %s (discarding a cleaned-up stream) failed: %r", key, exc,
            )  # fmt: skip
            value = exc
        now = self.runtime.monotonic()
        gave_up = False
        with self._recv_lock:
            self._recv_counts["gets"] += 1
            if value is not None and not isinstance(value, dict):
                self._recv_counts["get_failures"] += 1
                self._get_failed = True
            self._awaited.discard(key)
            got = isinstance(value, dict)
            if got:
                self._drained(request_id, drain, value, now)
            elif now - drain.since >= self.leftover_timeout:
                self._recv_counts["leftovers_given_up"] += 1
                gave_up = True
                self._drain_ended(request_id, drain, now)
            if self._drains.get(request_id) is drain:
                self._queue.append((request_id, drain.token))
        if gave_up:
            self.log.warning(
                "receiver: the rest of cleaned-up stream %s did not come within %.1fs "
                "(waited for key %s); no longer discarding it. If its sender is still "
                "sending, a new stream of this id may receive those chunks",
                short_repr(request_id),
                self.leftover_timeout,
                key,
            )
        return got

    def _drained(self, request_id: str, drain: Drain, value: dict[str, Any], now: float) -> None:
        """*value*, the drain's next key, was got and thrown away (under ``_recv_lock``)."""
        self._recv_counts["leftovers_discarded"] += 1
        drain.since = now
        drain.next_id += 1
        if value.get("finished"):
            self._drain_ended(request_id, drain, now)

    def _drain_ended(self, request_id: str, drain: Drain, now: float) -> None:
        """The drained stream ended (its final, or given up): the next one, or no drain."""
        if drain.later:  # the next abandoned stream of this id, from its start
            drain.next_id, drain.since = drain.later.pop(0), now
        else:
            del self._drains[request_id]
