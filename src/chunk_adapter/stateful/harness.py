"""The harness: the adapters under test, their recorded world, and the model beside them.

It builds a :class:`~chunk_adapter.stateful.world.World` — by default a
pipeline of two adapters from the factory, a sender and a receiver over one
recorded connector (``loopback=True``: one adapter receiving its own chunks)
— and drives adapters and :class:`~chunk_adapter.model.ContractModel` with the
same calls. After every step it settles (:class:`~.settle.Settling`): waits,
bounded by ``liveness_timeout``, until the connector and the builder have
seen exactly what the model says quiescent adapters have done, then runs
every oracle. So each step's outcome depends only on the steps so far.
"""

from __future__ import annotations

import copy
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ..connectors.gates import Gate
from ..factory import AdapterFactory
from ..model import ContractModel, ModelStopped
from ..oracles import Violation, accepted
from ..rules import R3, R18, R19
from .budget import Budget
from .payloads import MUTATION, mutate
from .settle import MARKER, SENTINEL, Settling, step
from .verdicts import is_prefix, poll_violation
from .world import STOP_BOUND, World, bounded

__all__ = ["MARKER", "MUTATION", "SENTINEL", "WAITED", "Harness"]

WAITED = 0.5
"""Seconds a scheduler call made while the adapter's work is held may take before it
waited for that work (R3): calls that never wait take microseconds; a wait for a held
call lasts until the call's own timeout (the join timeout, typically 1 s)."""


class Harness(Settling):
    """The adapters under test plus their model (module doc)."""

    def __init__(
        self,
        factory: AdapterFactory,
        *,
        put_tries: int = 3,
        liveness_timeout: float = 5.0,
        reproduce: str = "",
        loopback: bool = False,
        budget: Budget | None = None,
        judge_each_settle: bool = True,
    ) -> None:
        """*judge_each_settle*: run the oracles after every settle (else call
        :meth:`judge` yourself, as the machine does once per rule)."""
        self.put_tries = put_tries
        # Shorter once the budget has seen a failure (shrinking; stateful/budget.py).
        self.timeout = budget.wait_bound(liveness_timeout) if budget else liveness_timeout
        self.reproduce = reproduce
        self.budget = budget
        self.world = World.build(factory, loopback=loopback)
        self.history = self.world.history
        self.adapter = self.world.adapter
        stage = self.world.send_stage
        self.model = ContractModel(stage_id=stage, src_stage_id=stage, put_tries=put_tries)
        self._armed_builds: dict[str, deque[Gate]] = {}
        self._armed_puts: dict[str, deque[Gate]] = {}
        self._armed_gets: dict[str, deque[Gate]] = {}
        self.save_gate: Gate | None = None
        self.recv_gate: Gate | None = None
        self.steps: list[str] = []
        self.failed = False
        self.accepted_mark = accepted.total()
        self.judge_each_settle = judge_each_settle
        self._markers = 0
        self._failed_puts_settled = 0
        self.history.counts.sentinel_key = self.model.key(SENTINEL, 0, receiver=True)
        try:
            self.load(SENTINEL)
        except BaseException:  # no harness to close this world: close it here
            self.world.close()
            raise

    # ---------------------------------------------------------- scheduler calls
    @step
    def save(self, request_id: str, obj: Any, is_final: bool) -> None:
        """``save_async``, then mutate *obj* at every depth (R4, :mod:`.payloads`): before
        settling when the SAVE thread is held (its build comes later), else after (the
        build is done by then; a shallow snapshot still shares what is mutated)."""
        what = f"save_async({request_id!r}, {obj!r}, {is_final})"
        snap = copy.deepcopy(obj)
        expect_stop = self._model(lambda: self.model.save(request_id, snap, is_final))
        self._call(what, expect_stop, lambda: self.adapter.save_async(request_id, obj, is_final))
        if self.model.held_save is not None:
            mutate(obj)
            self.settle(what)
        else:
            self.settle(what)
            mutate(obj)

    @step
    def save_many(self, saves: list[tuple[str, Any, bool]]) -> None:
        """``save_async`` for each ``(request_id, obj, is_final)`` in turn, one settle for
        them all, then mutate each *obj* at every depth (R4): many streams at the cost
        of one step."""
        what = f"save_async x{len(saves)}: " + ", ".join(
            f"({rid!r}, {obj!r}, {final})" for rid, obj, final in saves
        )
        for rid, obj, final in saves:
            snap = copy.deepcopy(obj)
            expect_stop = self._model(lambda: self.model.save(rid, snap, final))  # noqa: B023
            self._call(what, expect_stop, lambda: self.adapter.save_async(rid, obj, final))  # noqa: B023
        self.settle(what)
        for _, obj, _ in saves:
            mutate(obj)

    @step
    def load_many(self, request_ids: list[str]) -> None:
        """``load_async`` for each of *request_ids*, one settle for them all."""
        what = f"load_async x{len(request_ids)}: {request_ids!r}"
        for rid in request_ids:
            expect_stop = self._model(lambda: self.model.load(rid))  # noqa: B023
            self._call(what, expect_stop, lambda: self.adapter.load_async(rid))  # noqa: B023
        self.settle(what)

    @step
    def cleanup_many(self, request_ids: list[str]) -> None:
        """``cleanup_receiver`` for each of *request_ids*, one settle for them all."""
        what = f"cleanup_receiver x{len(request_ids)}: {request_ids!r}"
        for rid in request_ids:
            self.model.cleanup(rid)
            self._call(what, False, lambda: self.adapter.cleanup_receiver(rid))  # noqa: B023
        self.settle(what)

    @step
    def cancel(self, request_id: str) -> None:
        what = f"cancel_sender({request_id!r})"
        expect_stop = self._model(lambda: self.model.cancel(request_id))
        self._call(what, expect_stop, lambda: self.adapter.cancel_sender(request_id))
        self.settle(what)

    @step
    def load(self, request_id: str) -> None:
        what = f"load_async({request_id!r})"
        expect_stop = self._model(lambda: self.model.load(request_id))
        self._call(what, expect_stop, lambda: self.adapter.load_async(request_id))
        self.settle(what)

    @step
    def cleanup(self, request_id: str) -> None:
        what = f"cleanup_receiver({request_id!r})"
        self.model.cleanup(request_id)
        self._call(what, False, lambda: self.adapter.cleanup_receiver(request_id))
        self.settle(what)

    @step
    def poll(self) -> dict[str, list[dict[str, Any]]]:
        """``poll_ready`` until it has handed out what the model committed (bounded)."""
        what = "poll_ready()"
        self.steps.append(what)
        expected = self.model.poll()
        got: dict[str, list[dict[str, Any]]] = {}
        deadline = time.monotonic() + self.timeout
        while True:
            held, start = self._holding, time.monotonic()
            ready = self.adapter.poll_ready()
            self._waited(what, held, time.monotonic() - start)
            if not isinstance(ready, dict):
                self._oracles(what, quiescent=False)  # names it: R15
            for rid, values in ready.items():
                got.setdefault(rid, []).extend(values if isinstance(values, list) else [values])
            if got == expected or not is_prefix(got, expected) or self.model.stopped:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.history.wait_for_append(remaining):
                break
        self._oracles(what, quiescent=False)
        if got != expected:
            self._fail(what, [poll_violation(expected, got, self.model)])
        return got

    @step
    def stop(self) -> None:
        """``stop()`` on both adapters (sender first), bounded: one that does not return
        within :data:`~.world.STOP_BOUND` is reported (R18), not waited for."""
        what = "stop()"
        self.steps.append(what)
        self.world.stopping()
        self.model.stop()
        returned, error = bounded(self.adapter.stop, STOP_BOUND)
        if not returned:
            self._fail(
                what,
                [Violation(R18, f"stop() had not returned after {STOP_BOUND:g}s")],
            )
        if error is not None:
            raise error
        self._oracles(what, quiescent=False)

    # -------------------------------------------------------------- environment
    @step
    def fail_puts(self, request_id: str, times: int) -> None:
        stream = self.model.next_send_key(request_id).rsplit("_", 1)[0]
        self.world.bed.faulty.fail_next("put", times=times, stream=stream)
        self.model.fail_puts(request_id, times)
        self.settle(f"fail the next {times} put(s) of {request_id!r}")

    @step
    def fail_gets(self, times: int) -> None:
        self.world.bed.faulty.fail_next("get", times=times)
        self.settle(f"fail the next {times} get(s)")

    @step
    def fail_build(self, request_id: str) -> None:
        self.world.builder.fail(request_id)
        self.model.fail_build(request_id)
        self.settle(f"fail the next build of {request_id!r}")

    @step
    def hold_build(self, request_id: str) -> None:
        gate = self.world.builder.hold(request_id)
        self._armed_builds.setdefault(request_id, deque()).append(gate)
        self.model.hold_build(request_id)

    @step
    def hold_put(self, key: str) -> None:
        self._armed_puts.setdefault(key, deque()).append(self.world.bed.gated.hold_put(key))
        self.model.hold_put(key)

    @step
    def hold_get(self, key: str) -> None:
        self._armed_gets.setdefault(key, deque()).append(self.world.bed.gated.hold_get(key))
        self.model.hold_get(key)
        self.settle(f"hold the next get of {key!r}")

    @step
    def release_save(self) -> None:
        gate, self.save_gate = self.save_gate, None
        held = self.model.held_save
        if gate is None or held is None:
            return
        gate.release()
        self.model.release_save()
        self.settle(f"release the SAVE thread ({held.stage} of {held.item.request_id!r})")

    @step
    def release_recv(self) -> None:
        gate, self.recv_gate = self.recv_gate, None
        held = self.model.held_get
        if gate is None or held is None:
            return
        gate.release()
        # Whether the held get or the new registration's own get takes the value is a
        # race in real time when the held one's registration was replaced: the model
        # follows what the held get returned (ContractModel.release_recv)
        got = gate.result is not None if gate.returned.wait(self.timeout) else None
        self.model.release_recv(held_got=got)
        self.settle(f"release the RECV thread (get of {held.key!r})")

    # ------------------------------------------------------------------ the end
    @step
    def finish(self) -> None:
        """Release everything, settle, poll, and check liveness (R11, R14, R23)."""
        while not self.model.stopped and (self.save_gate or self.recv_gate):
            self.release_save()
            self.release_recv()
        if not self.model.stopped:
            self.settle("teardown: quiescence")
        self.poll()
        self.poll()  # nothing new: must return {} (R15)
        self._oracles("teardown", quiescent=True)

    def close(self) -> None:
        """Release every gate and stop the adapters (idempotent; errors ignored)."""
        self.world.close()

    # ---------------------------------------------------------------- helpers
    @property
    def _holding(self) -> bool:
        """Whether a gate holds the adapter's build, put or get right now."""
        return self.save_gate is not None or self.recv_gate is not None

    def _waited(self, what: str, held: bool, took: float) -> None:
        """R3: a scheduler call made while a gate holds the adapter's build, put or get
        returns at once; one that took :data:`WAITED` seconds waited for the held work
        (it can only end when that call does, or on a timeout of its own)."""
        if held and took >= WAITED:
            self._fail(
                what,
                [
                    Violation(
                        R3,
                        f"{what} took {took:.2f}s while the adapter's work was held at a "
                        "gate: a scheduler call never waits for a build, put or get",
                    )
                ],
            )

    def _model(self, fn: Callable[[], object]) -> bool:
        try:
            fn()
        except ModelStopped:
            return True
        return False

    def _call(self, what: str, expect_stop: bool, fn: Callable[[], object]) -> None:
        held, start = self._holding, time.monotonic()
        try:
            fn()
        except RuntimeError:
            if not expect_stop:
                raise
        except Exception as exc:
            if expect_stop:
                self._fail(
                    what,
                    [Violation(R19, f"{what} after stop() raised {exc!r}, not RuntimeError")],
                )
            raise
        else:
            self._waited(what, held, time.monotonic() - start)
