"""The conformance state machine: random sequences of calls, faults and gates.

Each rule is one step on a :class:`~chunk_adapter.stateful.harness.Harness`,
which settles after the step and runs the oracles. The harness drives a
pipeline — a sender and a receiver built by the factory — unless the machine
is made with ``loopback=True``. Three request ids (one with
an ``_`` in it) so that collisions, cancels, cleanups and reuse of finished ids
actually happen, and a burst of :data:`MANY` interleaved streams. Saved
objects are flat lists or nested ones (a dict of lists, a ``bytearray``, an
object with its own ``__deepcopy__``) that the machine mutates at every depth
after the call (R4, :mod:`.payloads`); some saves pass ``None`` (R8, a final
too). Cancels come at every point of a stream, and twice; a request id is
reused after its final, after cleanup and while its previous final is still
queued (``reuse_while_final_queued``). Gates hold a build, a put or a get so
calls overlap the SAVE or RECV thread's work — including a get in flight
across ``cleanup_receiver`` + ``load_async`` (R16). ``stop()`` is a step too;
after it the sending and registering calls must raise (R19).

Steps that would make the outcome depend on timing are no-ops instead (see
:mod:`chunk_adapter.model`): a new stream is not queued behind a held SAVE
thread while the request's previous final is still pending (its keys would be
put twice in one burst), and a request whose build, or final's put, is held is not
cancelled (both outcomes allowed; R27's usage rule). The same for the design an adapter
may choose: while a gate holds a build, put or get of one request, nothing new
is saved for another request, nor (a get held) registered for one or saved
for one registered. The contract orders work within a request only: a single
SAVE or RECV thread waits behind the held call, a pool of workers or a task per
registration goes on, and both are correct.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, cast

from hypothesis import strategies as st
from hypothesis.errors import UnsatisfiedAssumption
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from ..factory import AdapterFactory
from ..profiles import current_profile
from .budget import Budget
from .harness import Harness
from .payloads import make

__all__ = ["MANY", "REQUEST_IDS", "ConformanceMachine", "MachineConfig"]

REQUEST_IDS = ("a", "b_1", "c")
MANY = tuple(f"m{i}" for i in range(6))
"""The ids of ``interleaved_streams`` (used by no other rule)."""
rids = st.sampled_from(REQUEST_IDS)
payload_kinds = st.sampled_from(("list", "nested", "nested", "none"))
object_kinds = st.sampled_from(("list", "nested"))


F = TypeVar("F", bound=Callable[..., None])


def judged(fn: F) -> F:
    """A rule that, once done, runs the oracles on the history and checks the puts
    against the model (``Harness.judge``): once per rule, not after every call the
    rule makes. A rule called by another (``stream`` calls ``save``) is judged with it.
    """

    @functools.wraps(fn)
    def wrapper(self: ConformanceMachine, *args: Any, **kwargs: Any) -> None:
        self._depth += 1
        try:
            fn(self, *args, **kwargs)
        finally:
            self._depth -= 1
        if self._depth == 0 and not self.h.failed:
            self.h.judge(f"after {fn.__name__}")

    return cast(F, wrapper)


@dataclass(frozen=True)
class MachineConfig:
    """What a machine class needs to build its harness (set by ``make_machine``).

    ``loopback``: one adapter receiving its own chunks instead of a sender and a
    receiver (:mod:`~chunk_adapter.stateful.world`). ``budget``: when to stop
    starting examples, and where failures are recorded (the verify stage's).
    """

    factory: AdapterFactory
    put_tries: int = 3
    liveness_timeout: float | None = None  # None: the profile's
    reproduce: str = ""
    loopback: bool = False
    budget: Budget | None = None


class ConformanceMachine(RuleBasedStateMachine):
    """Drives the adapters ``config.factory`` builds (use ``make_machine`` to set it)."""

    config: ClassVar[MachineConfig | None] = None

    def __init__(self) -> None:
        super().__init__()
        config = type(self).config
        if config is None:
            raise TypeError(
                "ConformanceMachine needs an adapter factory: build the class with "
                "chunk_adapter.stateful.make_machine(factory)"
            )
        timeout = config.liveness_timeout or current_profile().liveness_timeout
        self.budget = config.budget
        if self.budget is not None:
            self.budget.start_example()  # past the budget: OutOfBudget ends the run
        try:
            self.h = Harness(
                config.factory,
                put_tries=config.put_tries,
                liveness_timeout=timeout,
                reproduce=config.reproduce,
                loopback=config.loopback,
                budget=self.budget,
                judge_each_settle=False,  # once per rule instead: the invariant below
            )
        except Exception as exc:  # the factory raised, or the first load_async failed
            if self.budget is not None:
                self.budget.record_failure(exc)
            raise
        self.serial = 0
        self.ok = False
        self._depth = 0  # rules running (judged when the outermost returns)

    def _object(self, rid: str, kind: str) -> Any:
        self.serial += 1
        return make(rid, self.serial, kind)

    def _save_idle(self) -> bool:
        return not self.h.model.stopped and self.h.model.held_save is None

    def _running(self) -> bool:
        return not self.h.model.stopped

    def _behind_held(self, rid: str, *, saving: bool) -> bool:
        """Would new work for *rid* wait behind a held call of another request? Then
        whether it waits depends on the adapter's design (module doc): the step is a
        no-op. *saving*: a save (else a registration)."""
        m = self.h.model
        if m.stopped:
            return False
        if saving and m.held_save is not None and m.held_save.item.request_id != rid:
            return True
        held = m.held_get
        if held is None or held.request_id == rid:
            return False
        return not saving or m.registered(rid)

    # ------------------------------------------------------------------ sender
    @rule(rid=rids, final=st.booleans(), kind=payload_kinds)
    @judged
    def save(self, rid: str, final: bool, kind: str) -> None:
        m = self.h.model
        if not m.stopped and m.held_save is not None and any(i.is_final for i in m.pending(rid)):
            return  # no-op: the new stream's keys would race the old ones (module doc)
        if self._behind_held(rid, saving=True):
            return  # no-op: it may or may not wait behind the held call (module doc)
        self.h.save(rid, self._object(rid, kind), final)

    @rule(
        rid=rids,
        count=st.integers(1, 3),
        final=st.booleans(),
        none_at=st.sampled_from((None, 0, 1, 2)),
        kind=object_kinds,
    )
    @judged
    def stream(self, rid: str, count: int, final: bool, none_at: int | None, kind: str) -> None:
        """Save *count* non-final chunks (chunk *none_at* is ``None``: skipped, R8), then
        the final if *final*: one stream's worth."""
        for i in range(count):
            self.save(rid, False, "none" if i == none_at else kind)
        if final:
            self.save(rid, True, kind)

    @rule(
        rid=rids,
        count=st.integers(0, 2),
        cancel_at=st.integers(0, 3),
        twice=st.booleans(),
        kind=object_kinds,
    )
    @judged
    def stream_with_cancel(
        self, rid: str, count: int, cancel_at: int, twice: bool, kind: str
    ) -> None:
        """A stream of *count* non-finals and a final with ``cancel_sender`` at position
        *cancel_at* (0: before the first save, *count*: just before the final, past it:
        after the final), once or *twice* in a row (R6, R11, R27)."""
        cancel_at = min(cancel_at, count + 1)
        for i in range(count + 2):
            if i == cancel_at:
                self.cancel(rid)
                if twice:
                    self.cancel(rid)
            if i < count:
                self.save(rid, False, kind)
            elif i == count:
                self.save(rid, True, kind)

    @precondition(_save_idle)
    @rule(rid=rids, final=st.booleans(), at=st.sampled_from(("build", "put")), kind=object_kinds)
    @judged
    def save_held(self, rid: str, final: bool, at: str, kind: str) -> None:
        """Save a chunk whose build (or put) is then held at a gate."""
        m = self.h.model
        if self._behind_held(rid, saving=True):
            return  # no-op: once released, it may or may not wait behind the held get
        if at == "build":
            if rid in m.cancelled:
                return  # no-op: a cancelled request's chunk is never built
            self.h.hold_build(rid)
        else:
            # No-op: the chunk would fail or be dropped before its put, or a scripted put
            # failure of any stream is still to come. Its retry would run after the
            # release, and whether it delays a put of this id past a receiver's read of
            # the same (reused) key is a race of real time the model cannot order.
            dropped = rid in m.cancelled and not final
            if m.put_failures_pending or m.build_failures[rid] or dropped:
                return
            self.h.hold_put(m.next_send_key(rid))
        self.h.save(rid, self._object(rid, kind), final)

    @precondition(lambda self: self._save_idle() and self.h.save_gate is None)
    @rule(rid=rids, count=st.integers(0, 2), final=st.booleans(), kind=object_kinds)
    @judged
    def reuse_while_final_queued(self, rid: str, count: int, final: bool, kind: str) -> None:
        """Reuse a request id while its previous stream's final is still queued (R9, R11).

        Hold the SAVE thread in the build of *rid*'s final, save a new stream under
        the same id behind it (*count* non-finals, then a final if *final*), release:
        the new stream starts at chunk 0 after the old final, and none of it is lost.
        The receiver is not polling *rid* meanwhile (cleaned up first if it was), so
        both streams' keys may be put in one burst without a race at the receiver.
        """
        m = self.h.model
        if rid in m.cancelled or self._behind_held(rid, saving=True):
            return  # no-op: a cancelled request's final is put without a build to hold
        if m.polling_key(rid) is not None:
            self.h.cleanup(rid)
        self.h.hold_build(rid)
        self.h.save(rid, self._object(rid, kind), True)
        for _ in range(count):
            self.h.save(rid, self._object(rid, kind), False)
        if final:
            self.h.save(rid, self._object(rid, kind), True)
        self.h.release_save()

    @precondition(  # held, a second run would queue new streams behind finals
        lambda self: self._save_idle() and self.h.model.held_get is None
    )
    @rule(ids=st.integers(2, len(MANY)), chunks=st.integers(1, 2), kind=object_kinds)
    @judged
    def interleaved_streams(self, ids: int, chunks: int, kind: str) -> None:
        """Many streams at once: register *ids* requests, save their chunks round-robin,
        then their finals, poll, and clean them all up (R9, R13, R14, R17, R23). Each
        batch of calls settles once (``Harness.save_many``): one step's cost."""
        names = list(MANY[:ids])
        self.h.load_many(names)
        saves = [(rid, final) for final in [False] * chunks + [True] for rid in names]
        self.h.save_many([(rid, self._object(rid, kind), final) for rid, final in saves])
        self.h.poll()
        self.h.cleanup_many(names)

    @rule(rid=rids, twice=st.booleans())
    @judged
    def cancel(self, rid: str, twice: bool = False) -> None:
        """``cancel_sender``, and with *twice* a second time: it changes nothing more (R6)."""
        held = self.h.model.held_save
        if held and held.item.request_id == rid and (held.stage == "build" or held.item.is_final):
            return  # no-op: a held build allows both (R6); a held final, R27 (docs/stateful.md)
        self.h.cancel(rid)
        if twice:
            self.h.cancel(rid)

    @precondition(lambda self: self.h.save_gate is not None)
    @rule()
    @judged
    def release_save(self) -> None:
        self.h.release_save()

    # ---------------------------------------------------------------- receiver
    @rule(rid=rids, again=st.booleans())
    @judged
    def load(self, rid: str, again: bool) -> None:
        """load_async, and with *again* a second time: it must change nothing (R12)."""
        if self._behind_held(rid, saving=False):
            return  # no-op: its chunks may or may not wait behind the held get (module doc)
        self.h.load(rid)
        if again:
            self.h.load(rid)

    @rule(rid=rids)
    @judged
    def cleanup(self, rid: str) -> None:
        self.h.cleanup(rid)

    @rule(rid=rids)
    @judged
    def cleanup_and_reload(self, rid: str) -> None:
        """The scheduler re-admits a request: cleanup_receiver then load_async (R16)."""
        if self._behind_held(rid, saving=False):
            return  # no-op, as load
        self.h.cleanup(rid)
        self.h.load(rid)

    @rule()
    @judged
    def poll(self) -> None:
        self.h.poll()

    @precondition(lambda self: self._running() and self.h.recv_gate is None)
    @rule(rid=rids)
    @judged
    def hold_get(self, rid: str) -> None:
        """Hold the registration's next get in flight (released by ``release_recv``)."""
        key = self.h.model.polling_key(rid)
        if key is not None:
            self.h.hold_get(key)

    @precondition(lambda self: self._running() and self.h.recv_gate is None)
    @rule(rid=rids, final=st.booleans())
    @judged
    def reregister_during_get(self, rid: str, final: bool) -> None:
        """The race of R16 in one step: a get in flight across cleanup + load_async.

        Hold the registration's next get, save a chunk (its put may land under the
        held key), cleanup_receiver + load_async, then release the get: what it
        fetched belongs to the old registration and must never be handed out.
        """
        if self.h.model.polling_key(rid) is None:
            self.h.cleanup(rid)
            self.h.load(rid)
        key = self.h.model.polling_key(rid)
        if key is None:
            return  # the fresh registration already received its stream's final
        self.h.hold_get(key)
        self.save(rid, final, "list")
        self.h.cleanup(rid)
        self.h.load(rid)
        self.h.release_recv()

    @precondition(lambda self: self.h.recv_gate is not None)
    @rule()
    @judged
    def release_recv(self) -> None:
        self.h.release_recv()

    # ------------------------------------------------------------------ faults
    @precondition(lambda self: self._save_idle() and self.h.recv_gate is None)
    @rule(rid=rids, times=st.integers(1, 4))
    @judged
    def fail_puts(self, rid: str, times: int) -> None:
        """Script put failures only while no gate holds a thread: a failure met after a
        release delays its stream's puts behind a retry, and whether that delay lets a
        receiver read a reused key first is a race of real time the model cannot order."""
        self.h.fail_puts(rid, times)

    @precondition(_running)
    @rule(times=st.integers(1, 3))
    @judged
    def fail_gets(self, times: int) -> None:
        self.h.fail_gets(times)

    @precondition(_running)
    @rule(rid=rids)
    @judged
    def fail_build(self, rid: str) -> None:
        self.h.fail_build(rid)

    # ---------------------------------------------------------------- stopping
    @precondition(
        lambda self: self._running() and self.h.save_gate is None and self.h.recv_gate is None
    )
    @rule()
    @judged
    def stop(self) -> None:
        self.h.stop()

    def teardown(self) -> None:
        try:
            if not self.h.failed:
                self.h.finish()
                if self.budget is not None:
                    self.budget.example_passed()
        except UnsatisfiedAssumption:
            # the final settle's history showed a root cause a verify baseline accepts
            # (reject(): :mod:`~chunk_adapter.oracles.accepted`); a rule can reject its
            # example, the teardown cannot, and Hypothesis would report it as an error
            pass
        finally:
            self.h.close()
