"""What one step touched, and when two steps conflict: the dependency relation of DPOR.

A *step* is what one task does from the moment the controller lets it run until
it next comes back (a switch point, a block, its exit). While a strategy asks
for footprints (:class:`~.strategies.dpor.DporStrategy`), every operation the
explorer controls notes the object it touched and how (:meth:`Controller.touch`):

====================  =================================================  ======
object                who touches it                                     mode
====================  =================================================  ======
a lock                acquire (also a blocked try), release, a wait's     w
                      release and re-acquire
a condition           wait, notify                                       w
an event              set, clear / is_set, wait                          w / r
a task                its start, its first step, its exit / join,        w / r
                      is_alive
a queue               put, get / empty, qsize                            w / r
a connector key       put / get (a consuming get: w)                     w / r
injected faults       a put or get that raised / any put or get, the      w / r
                      scenario arming one
one side of a         the sender side: ``save_async``, ``cancel_sender``,  w
request's history     builds and puts of that request; the receiver
                      side: ``load_async``, ``cleanup_receiver`` and
                      gets of it (``poll``/``stop``: every request's)
the progress counter  puts, builds, values got / ``settle()`` reading     c / r
an adapter attribute  read of an immutable value / anything else         r / w
time passed           the step a timeout starts (all were blocked)       w: all
====================  =================================================  ======

Two footprints *conflict* when they share an object and their modes are not
both ``r`` nor both ``c`` (increments commute). Steps that conflict are
ordered by DPOR in every way; steps that do not are explored in one order only.

The history is split by side because the oracles never order a sender-side
record against a receiver-side one of the same request except through a key
(a get returns what a put of *that key* wrote: the key conflict orders them;
chunk ``n``'s put and gets share a key within a hop, and a pipeline is judged
hop by hop) or through ``stop()`` and ``poll_ready()`` (every request's history,
both sides). So a RECV thread's get of ``r_1_1`` that misses, or the script's
``load_async("r")`` returning, commutes with the SAVE thread's put of ``r_1_0``
or its build for ``r``; two records of one side of a request still conflict.

The adapter's own state is seen through its instance attributes
(:func:`~.watch.watch_state`: the instance gets a subclass that notes every read and
write of an attribute in its ``__dict__``). Reading an attribute that holds a
mutable value (a list, a dict, a deque) counts as a write, since the step may
mutate it. State the explorer cannot see — module globals, closures, objects
kept in locals across switch points — is not in any footprint: DPOR assumes it
is not shared between threads (see docs/explorer.md, Limitations).

:class:`Tracker` is the controller's side: it gathers the running step's
footprint and hands it over when the step ends (only while a strategy observes:
with tracking off the controller never makes one and ``touch`` does nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .tasks import Task

__all__ = [
    "CALL_SIDE",
    "HIST_ALL",
    "OPAQUE",
    "PROGRESS",
    "RECV",
    "SEND",
    "TIME_PASSED",
    "Footprint",
    "Observe",
    "Tracker",
    "Waiting",
    "conflict",
    "hist",
    "request_of",
]

Footprint = dict[Any, str]
"""object key -> mode: ``"r"`` read, ``"w"`` write, ``"c"`` commuting increment."""

PROGRESS = ("progress",)
HIST_ALL = ("hist", "*")
"""Every request's history: ``poll()`` and ``stop()`` write it; every per-request
record reads it, so the two conflict while records of different requests do not."""

TIME_PASSED = ("time passed",)
"""In the footprint of the step a timeout starts (the virtual clock jumped because every
task was blocked): that step runs after every earlier step, and conflicts with all of them."""

OPAQUE = ("opaque",)
"""In every footprint of an execution whose shared state DPOR cannot see (substitution
mode, an adapter without an instance ``__dict__``): every step conflicts with every other."""

Observe = Callable[[int, Footprint, dict[Any, int]], None]
"""A strategy's ``observe(tid, footprint, held)``: task *tid* ended a step that touched
*footprint*; *held* says who holds each lock the step touched (a task id; -1: free)."""

Waiting = Callable[[int, Any, int], None]
"""A strategy's ``waiting(tid, lock, holder)``: at this choice point task *tid* is not
offered because its next step takes *lock*, which task *holder* holds."""


def merge(fp: Footprint, key: Any, mode: str) -> None:
    """Add *key* touched in *mode* to *fp* (two different modes make a write)."""
    old = fp.get(key)
    if old is None:
        fp[key] = mode
    elif old != mode:
        fp[key] = "w"


def conflict(a: Footprint, b: Footprint) -> bool:
    """Whether two steps with these footprints may not commute."""
    if TIME_PASSED in a or TIME_PASSED in b:
        return True
    if len(b) < len(a):
        a, b = b, a
    for key, mode in a.items():
        other = b.get(key)
        if other is not None and (mode == "w" or other == "w" or mode != other):
            return True
    return False


def request_of(key: str) -> str:
    """The request id of a connector key ``<request>_<stage>_<chunk>``; ``"*"`` if not one."""
    parts = key.rsplit("_", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return parts[0]
    return "*"


SEND, RECV = "send", "recv"
CALL_SIDE = {"save": SEND, "cancel": SEND, "load": RECV, "cleanup": RECV}
"""The side of a request's history each scenario call is recorded on; any other call with
a request id (``fail_build``, ``relay``...) writes both sides."""


def hist(request_id: str | None, side: str | None = None) -> tuple[tuple[str, ...], ...]:
    """What a record of *request_id* on *side* (``SEND``, ``RECV``; ``None``: both) writes.
    No request id (``poll``, ``stop``): every request's history."""
    if not request_id or request_id == "*":
        return (HIST_ALL,)
    if side is None:
        return (("hist", request_id, SEND), ("hist", request_id, RECV))
    return (("hist", request_id, side),)


def no_touch(key: object, mode: str) -> None:
    """The controller's ``touch`` when no strategy observes footprints (tracking off)."""


class Tracker:
    """The running step's footprint, handed to the strategy when the step ends.

    Made by the controller only when its scheduler has ``observe``; every operation
    the explorer controls calls :meth:`touch` (as ``Controller.touch``). Runs on the
    task holding the baton, so it needs no lock of its own.
    """

    def __init__(self, observe: Observe, waiting: Waiting | None = None) -> None:
        self._observe = observe
        self._waiting = waiting
        self._fp: Footprint = {}
        # Every lock seen wanted so far (key -> the ControlledLock): end_step reports who
        # holds those a step touched, which DPOR needs to reverse a race on a lock.
        self._locks: dict[Any, Any] = {}

    def touch(self, key: object, mode: str) -> None:
        """The running step touched *key* in *mode* (``r``, ``w``, ``c``)."""
        merge(self._fp, key, mode)

    def end_step(self, tid: int, opaque: bool) -> None:
        """Task *tid*'s step ended: hand its footprint, and who holds each lock it
        touched now, to the strategy; start an empty one."""
        fp, self._fp = self._fp, {}
        if opaque:
            fp[OPAQUE] = "w"
        locks = self._locks
        self._observe(tid, fp, {k: _owner(locks[k]) for k in fp if k in locks})

    def offered(self, runnable: Sequence[Task]) -> list[Task]:
        """The runnable tasks worth offering the strategy: not one about to acquire a lock
        another task holds (it would only block; running it first adds a step and a race,
        never a behaviour). All of them if that leaves none."""
        for t in runnable:
            if t.wants is not None:
                self._locks[t.wants.key] = t.wants
        offered = [t for t in runnable if t.wants is None or t.wants.owner in (None, t)]
        if self._waiting is not None and len(offered) < len(runnable):
            for t in runnable:
                if t not in offered:
                    self._waiting(t.tid, t.wants.key, int(t.wants.owner.tid))
        return offered or list(runnable)


def _owner(lock: Any) -> int:
    """The task id holding *lock*, or -1 when it is free."""
    owner = lock.owner
    return -1 if owner is None else int(owner.tid)
