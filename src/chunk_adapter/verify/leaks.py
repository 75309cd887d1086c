"""R24, bounded state, checked black-box: does retained memory grow with finished requests?

A sender and a receiver run batches of request ids to the end, each id in one
of four shapes — a full stream; a cancel before the first save; a cancel after
the final (its mark, R27, is used up by the next stream of that id, which is
then received too); and a registration cleaned up before its final (the
scheduler gave the request up; the check drains the final's key itself). After
each batch every stream is finished and cleaned up, the connector (a
:class:`~chunk_adapter.connectors.MemoryConnector` that consumes on get and
keeps no key log) holds nothing, and nothing may be left per request.

Retained memory is measured with :mod:`tracemalloc` after ``gc.collect()``,
after a warm-up of :data:`WARMUP` ids (interpreter caches, free lists and any
bounded history of up to that many requests fill up), then after every batch of
a window of :data:`WINDOW` ids. The window's growth is judged by its *lows*: the
least reading over its first :data:`RECORD` ids against the least over its last
:data:`RECORD` ids. A record of up to :data:`RECORD` recent requests that is
filled and then cleared (or cut back) makes a sawtooth whose lows stay level
whatever its period and wherever the window starts in it; two single readings
would see growth whenever both fell on a rising slope (a record of 300 streams
cleared when full did: a false R24 with the same phase in both windows). Growth
of the lows over :data:`PER_REQUEST` bytes per request between the two spans —
a wide margin over tracemalloc noise, and below the smallest real leak (a dict
entry keyed by the request id keeps ~90 bytes) — is a suspicion, which a second
window of :data:`CONFIRM` ids (four times as long: the lows of a sawtooth read once
a batch may differ by one batch's records, a quarter as much per request there)
must confirm before it is reported as a violation with the figure; a
suspicion the second window does not confirm is inconclusive (:class:`Undecided`).
``stats()`` depths (any ``*_depth``, and the reference adapter's depth names) that
grow with the ids run are shown beside the figure, but never decide alone: a
user's ``stats()`` is not part of the contract, and a cumulative counter there
may carry a depth's name (``registered``: registrations made so far) while
nothing is kept.
"""

from __future__ import annotations

import contextlib
import gc
import tracemalloc
from collections.abc import Callable, Iterable
from dataclasses import asdict, is_dataclass
from typing import Any

from ..bed.stack import Bed
from ..bed.waiting import Hang, call_bounded, stopping, wait_until
from ..connectors import MemoryConnector
from ..examples import ARRIVE, CALL, FACTORY
from ..factory import AdapterLike
from ..history import History
from ..oracles import accepted, check_aside
from ..oracles.records import RecordedAdapter
from ..oracles.violations import ContractViolation
from ..rules import R23, R24, RECENT_REQUESTS

__all__ = ["BATCH", "PER_REQUEST", "RECORD", "WARMUP", "WINDOW", "Undecided", "probe_bounded_state"]

BATCH = 50
"""Request ids in flight at once (each batch ends with nothing open)."""
BATCH_BOUND = 3 * ARRIVE
"""Seconds one batch may take (its waits for chunks are bounded by ``ARRIVE`` each)."""
WARMUP = 600
"""Ids run before the first measurement: caches and bounded histories fill up first."""
RECORD = RECENT_REQUESTS
"""The largest bounded record of recent requests R24 allows (below :data:`WARMUP`); also
the span of ids whose lowest reading starts and ends a window (a multiple of :data:`BATCH`)."""
WINDOW = 1500
"""Ids in one window: its first and last :data:`RECORD` ids are :data:`WINDOW` - :data:`RECORD`
ids apart."""
CONFIRM = 6000
"""Ids in the confirming window. Readings are one batch apart, so the lows of a record that
is filled and cleared may differ by up to one batch's records (62 streams) in either
window; over :data:`CONFIRM` ids that error is a quarter of what it is over :data:`WINDOW`."""
DIAGNOSE = 2.0
"""Seconds each wait of the recorded batch that diagnoses a hang may take (the hang was
seen already: this only lets what is in flight settle before the oracles judge)."""
PER_REQUEST = 16.0
"""Bytes retained per finished request above which growth is a suspicion."""
DEPTHS = frozenset(
    {"cancel_marks", "open_streams", "registered", "ready_chunks", "stalled", "save_in_flight"}
)
"""The reference adapter's depth names in ``stats()`` (besides any ``*_depth``)."""


class Undecided(AssertionError):
    """The check saw something it could not confirm: inconclusive, never a violation.

    *blocked_by*: the rules of what kept it from deciding, when that was a violation of
    the adapter's (a stream that never arrived, R23): under a verify baseline that
    accepts them the check is not reached, not inconclusive (:func:`.probes._finding`)."""

    def __init__(self, message: str, blocked_by: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.blocked_by = tuple(blocked_by)

    def __reduce__(self) -> tuple[Any, ...]:  # pickles with its data (a worker hands it on)
        return (type(self), (str(self), self.blocked_by))


Factory = Callable[..., AdapterLike]


class _Pipeline:
    """A sender and a receiver over one consuming, log-free memory connector; with
    *record*, every call and connector operation recorded there (for the oracles)."""

    def __init__(
        self, factory: Factory, record: History | None = None, arrive: float | None = None
    ) -> None:
        bed = Bed(consume_on_get=True, keep_puts=0, record=False if record is None else record)
        assert bed.memory is not None  # a Bed without base= has its memory layer
        self.conn: MemoryConnector = bed.memory
        self.snd = bed.adapter(factory, bound=FACTORY, what="the factory (sender)", stage_id=0)
        self.rcv = bed.adapter(factory, bound=FACTORY, what="the factory (receiver)", stage_id=1)
        if record is not None:
            self.snd = RecordedAdapter(self.snd, record, "sender")
            self.rcv = RecordedAdapter(self.rcv, record, "receiver")
        self.arrive = ARRIVE if arrive is None else arrive  # seconds each wait may take
        self.prefix = 0
        self.puts = 0  # puts the sender must have made so far (the connector counts them)

    def receive(self, finals: set[str], firsts: set[str]) -> None:
        """Poll until each of *finals* got its final and each of *firsts* a chunk."""
        got: dict[str, list[dict[str, Any]]] = {}

        def arrived() -> bool:
            for rid, chunks in self.rcv.poll_ready().items():
                got.setdefault(rid, []).extend(chunks)
            return all(rid in got for rid in firsts) and all(
                got.get(rid) and got[rid][-1].get("finished") for rid in finals
            )

        streams = len(finals) + len(firsts)
        wait_until(arrived, self.arrive, f"the chunks of {streams} streams", rules=(R23,))

    def batch(self, size: int) -> None:
        """*size* request ids, each through one of the four shapes (module doc)."""
        self.prefix += 1
        ids = [f"r24-{self.prefix}-{i}" for i in range(size)]
        full, cancel_first, cancel_after, aborted = (ids[k::4] for k in range(4))
        s, r = self.snd, self.rcv
        for rid in ids:
            r.load_async(rid)
        for rid in cancel_first:
            s.cancel_sender(rid)
        for rid in full + cancel_first + aborted:
            self._save(rid, [rid, 0], False)
        for rid in full + cancel_first + cancel_after:
            self._save(rid, [rid, 1], True)
        self.puts += 2 * len(full) + len(cancel_first) + len(cancel_after) + len(aborted)
        self.receive(set(full + cancel_first + cancel_after), set(aborted))
        for rid in ids:
            r.cleanup_receiver(rid)
        for rid in cancel_after:  # a mark after the final: cuts the next stream (R27)
            s.cancel_sender(rid)
            r.load_async(rid)
            self._save(rid, [rid, 2], True)
        for rid in aborted:
            self._save(rid, [rid, 1], True)
        self.puts += len(cancel_after) + len(aborted)
        self.receive(set(cancel_after), set())
        for rid in cancel_after:
            r.cleanup_receiver(rid)
        wait_until(
            lambda: self.conn.put_count >= self.puts,
            self.arrive,
            f"{self.puts} puts in all",
            rules=(R23,),
        )
        for rid in aborted:  # nobody receives these finals any more: take them out
            self.conn.get(f"{rid}_0_1")

    def _save(self, rid: str, obj: Any, final: bool) -> None:
        self.snd.save_async(rid, obj, final)

    def run(self, ids: int) -> None:
        """*ids* request ids in batches; each batch bounded as a whole (one helper thread,
        not one per call: thousands of calls)."""
        for _ in range(ids // BATCH):
            call_bounded(lambda: self.batch(BATCH), BATCH_BOUND, f"a batch of {BATCH} request ids")

    def depths(self) -> dict[str, int]:
        """The depth-like counts of both adapters' ``stats()`` (summed), if they have one."""
        total: dict[str, int] = {}
        for adapter in (self.snd, self.rcv):
            for name, value in _stats(adapter).items():
                if (name in DEPTHS or name.endswith("_depth")) and isinstance(value, int):
                    total[name] = total.get(name, 0) + value
        return total


def _stats(adapter: AdapterLike) -> dict[str, Any]:
    fn = getattr(adapter, "stats", None)
    if not callable(fn):
        return {}
    try:
        value = call_bounded(fn, CALL, "stats()")
    except Exception:  # stats() is optional and not part of the contract
        return {}
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, dict):
        return value
    return {}


def _retained() -> int:
    """Traced bytes in use after a full collection: the least of three readings, so a
    background thread's passing temporaries do not count."""
    readings = []
    for generation in (2, 0, 0):  # one full collection; the young ones are cheap
        gc.collect(generation)
        readings.append(tracemalloc.get_traced_memory()[0])
    return min(readings)


def _window(p: _Pipeline, ids: int) -> tuple[float, list[str], int]:
    """Run *ids* ids, reading retained memory after each batch; bytes per request the
    lows of the first and the last :data:`RECORD` ids grew by (module doc), the
    ``stats()`` depths that grew, and *ids*."""
    span = RECORD // BATCH
    d_first = p.depths()
    readings = []
    for _ in range(ids // BATCH):
        p.run(BATCH)
        # Every batch, not only in the two spans: the collections between them keep
        # what the spans read comparable (without them the last span read higher).
        readings.append(_retained())
    d_last = p.depths()
    per_request = (min(readings[-span:]) - min(readings[:span])) / (ids - RECORD)
    grown = [
        f"stats().{name} {d_first.get(name, 0)} -> {value}"
        for name, value in sorted(d_last.items())
        if value - d_first.get(name, 0) >= ids // 2
    ]
    return per_request, grown, ids


def _finding(per_request: float, grown: Iterable[str], ids: int) -> str | None:
    grown = list(grown)
    if per_request < PER_REQUEST:  # memory decides; a counter that grows keeps nothing
        return None
    parts = [f"retains {per_request:.0f} bytes per finished request (tracemalloc: the lowest "
             f"reading over {RECORD} ids, {ids - RECORD} ids apart; allowed: under "
             f"{PER_REQUEST:g})"]  # fmt: skip
    parts += grown
    return "; ".join(parts)


def _blocked_by(factory: Factory, hang: Hang) -> tuple[str, ...]:
    """The rules of what kept the check from deciding: the *hang*'s, or, under a verify
    baseline, the accepted root causes one batch shows when it is run again recorded and
    judged by the oracles once its waits ran out (a cancelled final an accepted bug drops
    is a stream that never ends here: not a new finding, and not for this check to name).
    """
    if not accepted.active() or accepted.accepts_all(hang.broken):
        return hang.broken
    history = History()
    aside: tuple[str, ...] = ()
    with contextlib.suppress(Hang):
        p = _Pipeline(factory, record=history, arrive=DIAGNOSE)
        with stopping(p.snd, p.rcv, seconds=CALL):
            with contextlib.suppress(Hang):
                call_bounded(lambda: p.batch(BATCH), 3 * DIAGNOSE, f"a batch of {BATCH} ids")
            # before the stop: a stopped side is not judged
            aside = check_aside(history, quiescent=True)[1]
    return aside or hang.broken


def probe_bounded_state(factory: Factory) -> None:
    """R24: after finals, cleanups and used-up cancel marks, nothing is kept per request."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        p = _Pipeline(factory)
        with stopping(p.snd, p.rcv, seconds=CALL):
            p.run(WARMUP)
            first = _finding(*_window(p, WINDOW))
            if first is None:
                return
            second = _finding(*_window(p, CONFIRM))  # the confirmation, four times as long
    except Hang as exc:  # slow or stuck here is for the other checks to name
        raise Undecided(f"R24 not decided: {exc}", _blocked_by(factory, exc)) from exc
    finally:
        if started:
            tracemalloc.stop()
    if second is None:
        raise Undecided(
            f"R24 not decided: the first window {first}, but a second window of {CONFIRM} "
            "more ids did not grow (a bounded cache still filling up?). Rerun verify; if "
            f"it repeats, the adapter keeps a record of more than {RECORD} requests "
            f"(R24 allows {RECORD})"
        )
    raise ContractViolation.of(
        R24,
        f"the adapter keeps state per finished request: {first}; confirmed by "
        f"{CONFIRM} more ids: {second}. Drop a request's state when its final is put "
        "(sender) and in cleanup_receiver (receiver)",
    )
